/*
 * image.h - JPEG and PNG decoding to 8-bit RGB, as the reference pipeline
 * sees an image: PIL's Image.open(...) followed by convert("RGB").
 *
 * What it is: a bounded decoder of outside bytes. The format is chosen by the
 * magic bytes (JPEG FF D8 FF, PNG 89 'PNG' 0D 0A 1A 0A), never by the file
 * name. JPEG goes through libturbojpeg (accurate integer IDCT and fancy
 * upsampling, the libjpeg defaults PIL decodes with), PNG through libspng in
 * the file's native sample format, converted here with PIL's rules:
 *   - grey 1/2/4/8-bit: replicated (low depths scaled to 0..255 by bit
 *     replication, as PIL's L;1/L;2/L;4 unpackers do);
 *   - grey 16-bit: PIL opens it as mode I;16 whose RGB conversion CLIPS the
 *     value to 255 (it does not scale): min(v, 255) replicated;
 *   - RGB/RGBA/grey+alpha 16-bit: the high byte of each sample;
 *   - alpha (RGBA, LA, tRNS): dropped, NOT composited (transformers'
 *     convert_to_rgb is a plain PIL convert("RGB"));
 *   - palette: the PLTE colour; an index beyond the palette gives black
 *     (Pillow 12, the reference environment; Pillow 9 showed a grey ramp).
 * EXIF orientation is applied only when asked (PIL.ImageOps.exif_transpose,
 * which transformers' load_image runs but the processor given a PIL image
 * does not; the benchmark feeds a PIL image, so the default is off).
 *
 * What it is not: colour management (ICC profiles and gamma are ignored, as
 * PIL ignores them), CMYK/YCCK JPEG (refused with JEV_ERR_UNSUPPORTED),
 * animation (the default PNG image only).
 *
 * Constraints: every size is checked against the limits from the header,
 * before any pixel buffer is allocated. Malformed, truncated or hostile input
 * returns JEV_ERR_FORMAT with a message "NAME: PNG: ..." / "NAME: JPEG: ...";
 * a limit hit returns JEV_ERR_NOMEM (jev.h: "a size limit was hit").
 */
#ifndef JEV_IO_IMAGE_H
#define JEV_IO_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h" // defines: struct jev_error

struct jev_pool;

#define JEV_IMAGE_MAX_FILE_BYTES ((size_t)32 << 20) /* default file size limit: 32 MiB */
#define JEV_IMAGE_MAX_PIXELS ((int64_t)64 << 20)    /* default pixel count limit: 64 Mpx */
#define JEV_IMAGE_MAX_SIDE 16384                    /* default limit on width and on height */

/* A decoded image: 8-bit RGB, row-major, no padding. */
struct jev_image {
    int32_t width;  /* pixels per row */
    int32_t height; /* rows */
    uint8_t *rgb;   /* [height][width][3], owned: free with jev_image_free */
};

/* Limits and options of one decode. 0 in a limit means its default. */
struct jev_image_params {
    size_t max_file_bytes;       /* refuse larger inputs; 0 = JEV_IMAGE_MAX_FILE_BYTES */
    int64_t max_pixels;          /* refuse width*height above this; 0 = JEV_IMAGE_MAX_PIXELS */
    int32_t max_side;            /* refuse a width or height above this; 0 = JEV_IMAGE_MAX_SIDE */
    bool apply_exif_orientation; /* rotate/flip by the EXIF Orientation tag (JPEG APP1, PNG eXIf) */
    struct jev_pool *pool;       /* NULL: one thread; else a single-scan JPEG is decoded in strips on it
                                    (the same bytes; the pool must not be running anything else) */
};

/* The defaults: the limits above, EXIF orientation off. */
struct jev_image_params jev_image_default_params(void);

/*
 * Decodes a JPEG or PNG held in memory. `name` names the input in messages
 * (NULL: "image"). params may be NULL (defaults). On success *out owns its
 * pixels; on failure *out is zeroed and err says what was wrong.
 */
enum jev_status jev_image_decode(const void *data, size_t size, const char *name, const struct jev_image_params *params,
                                 struct jev_image *out, struct jev_error *err);

/* Reads and decodes a file (the size limit is checked before reading). */
enum jev_status jev_image_load(const char *path, const struct jev_image_params *params, struct jev_image *out,
                               struct jev_error *err);

/* Frees the pixels; the struct is zeroed. NULL and zeroed images are fine. */
void jev_image_free(struct jev_image *img);

/*
 * The EXIF Orientation (1..8) found in a TIFF/EXIF block (starting at the
 * "II*\0"/"MM\0*" header; an "Exif\0\0" prefix is skipped), or 1 when absent
 * or unreadable. Exposed for tests and fuzzing.
 */
int jev_image_exif_orientation(const uint8_t *exif, size_t size);

/* Applies orientation 2..8 in place as PIL's exif_transpose does (1 = no-op). */
enum jev_status jev_image_orient(struct jev_image *img, int orientation, struct jev_error *err);

#endif
