/*
 * image.c - JPEG (libturbojpeg) and PNG (libspng) decoding to RGB8 with
 * PIL's convert("RGB") rules; see image.h for the rules and their sources.
 *
 * Not here: resizing and normalisation (model/vision-preprocess.c).
 * Constraints: no pixel buffer is allocated before the header's sizes pass
 * the limits; every failure leaves *out zeroed and names the input, the
 * format and the problem.
 */
#include "io/image.h" // defines: struct jev_image, jev_image_decode

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <spng.h>
#include <turbojpeg.h>

#include "io/image-int.h" // defines: jev_jpeg_decode_strips

/* ---- limits ---- */

struct jev_image_params jev_image_default_params(void) {
    struct jev_image_params p = {
        .max_file_bytes = JEV_IMAGE_MAX_FILE_BYTES,
        .max_pixels = JEV_IMAGE_MAX_PIXELS,
        .max_side = JEV_IMAGE_MAX_SIDE,
        .apply_exif_orientation = false,
    };
    return p;
}

/* Fills the 0 (= default) fields of a caller's params. */
static struct jev_image_params resolve_params(const struct jev_image_params *in) {
    struct jev_image_params p = in ? *in : jev_image_default_params();
    if (p.max_file_bytes == 0)
        p.max_file_bytes = JEV_IMAGE_MAX_FILE_BYTES;
    if (p.max_pixels <= 0)
        p.max_pixels = JEV_IMAGE_MAX_PIXELS;
    if (p.max_side <= 0)
        p.max_side = JEV_IMAGE_MAX_SIDE;
    return p;
}

/* The header's sizes against the limits: called before any pixel allocation. */
static enum jev_status check_size(const char *name, const char *fmt, int64_t w, int64_t h,
                                  const struct jev_image_params *p, struct jev_error *err) {
    if (w <= 0 || h <= 0)
        return jev_fail(err, JEV_ERR_FORMAT, "%s: %s: image has zero size (%lldx%lld)", name, fmt, (long long)w,
                        (long long)h);
    if (w > p->max_side || h > p->max_side)
        return jev_fail(err, JEV_ERR_NOMEM, "%s: %s: %lldx%lld pixels exceeds the limit of %d pixels per side", name,
                        fmt, (long long)w, (long long)h, (int)p->max_side);
    if (w * h > p->max_pixels)
        return jev_fail(err, JEV_ERR_NOMEM, "%s: %s: %lldx%lld = %lld pixels exceeds the limit of %lld pixels", name,
                        fmt, (long long)w, (long long)h, (long long)(w * h), (long long)p->max_pixels);
    return JEV_OK;
}

/* ---- EXIF orientation ---- */

static uint32_t rd16(const uint8_t *p, bool le) {
    return le ? (uint32_t)(p[0] | p[1] << 8) : (uint32_t)(p[0] << 8 | p[1]);
}
static uint32_t rd32(const uint8_t *p, bool le) {
    return le ? (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24
              : (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

int jev_image_exif_orientation(const uint8_t *exif, size_t size) {
    if (!exif)
        return 1;
    if (size >= 6 && memcmp(exif, "Exif\0\0", 6) == 0) {
        exif += 6;
        size -= 6;
    }
    if (size < 8)
        return 1;
    bool le;
    if (memcmp(exif, "II*\0", 4) == 0)
        le = true;
    else if (memcmp(exif, "MM\0*", 4) == 0)
        le = false;
    else
        return 1;
    /* IFD0: a 16-bit entry count, then 12-byte entries (tag, type, count, value). */
    uint32_t ifd = rd32(exif + 4, le);
    if (ifd > size || size - ifd < 2)
        return 1;
    uint32_t n = rd16(exif + ifd, le);
    for (uint32_t i = 0; i < n; i++) {
        size_t e = (size_t)ifd + 2 + (size_t)i * 12;
        if (e + 12 > size)
            return 1;
        if (rd16(exif + e, le) != 0x0112)
            continue;
        uint32_t type = rd16(exif + e + 2, le), count = rd32(exif + e + 4, le);
        uint32_t v;
        if (type == 3 && count == 1) /* SHORT, stored in the first 2 bytes of the value field */
            v = rd16(exif + e + 8, le);
        else if (type == 4 && count == 1) /* LONG */
            v = rd32(exif + e + 8, le);
        else
            return 1;
        return v >= 1 && v <= 8 ? (int)v : 1;
    }
    return 1;
}

enum jev_status jev_image_orient(struct jev_image *img, int orientation, struct jev_error *err) {
    if (orientation < 2 || orientation > 8 || !img->rgb)
        return JEV_OK;
    int64_t w = img->width, h = img->height;
    bool swap = orientation >= 5; /* TRANSPOSE, ROTATE_270, TRANSVERSE, ROTATE_90 swap the sides */
    int64_t ow = swap ? h : w, oh = swap ? w : h;
    uint8_t *out = malloc((size_t)(w * h * 3));
    if (!out)
        return jev_fail(err, JEV_ERR_NOMEM, "image: out of memory rotating %lldx%lld pixels", (long long)w,
                        (long long)h);
    /* For each output pixel (x, y), the input pixel (sx, sy) PIL's transpose reads. */
    for (int64_t y = 0; y < oh; y++) {
        for (int64_t x = 0; x < ow; x++) {
            int64_t sx, sy;
            switch (orientation) {
            case 2:
                sx = w - 1 - x;
                sy = y;
                break; /* FLIP_LEFT_RIGHT */
            case 3:
                sx = w - 1 - x;
                sy = h - 1 - y;
                break; /* ROTATE_180 */
            case 4:
                sx = x;
                sy = h - 1 - y;
                break; /* FLIP_TOP_BOTTOM */
            case 5:
                sx = y;
                sy = x;
                break; /* TRANSPOSE */
            case 6:
                sx = y;
                sy = h - 1 - x;
                break; /* ROTATE_270 (90 clockwise) */
            case 7:
                sx = w - 1 - y;
                sy = h - 1 - x;
                break; /* TRANSVERSE */
            default:
                sx = w - 1 - y;
                sy = x;
                break; /* 8: ROTATE_90 (counter-clockwise) */
            }
            memcpy(out + (y * ow + x) * 3, img->rgb + (sy * w + sx) * 3, 3);
        }
    }
    free(img->rgb);
    img->rgb = out;
    img->width = (int32_t)ow;
    img->height = (int32_t)oh;
    return JEV_OK;
}

/* The first APP1 "Exif" segment of a JPEG (PIL keeps the first one), or NULL. */
static const uint8_t *jpeg_find_exif(const uint8_t *d, size_t n, size_t *len) {
    size_t i = 2;
    while (i + 4 <= n && d[i] == 0xFF) {
        uint8_t m = d[i + 1];
        if (m == 0xD8 || m == 0x01 || (m >= 0xD0 && m <= 0xD7)) { /* markers without a length */
            i += 2;
            continue;
        }
        if (m == 0xDA || m == 0xD9) /* start of scan / end of image: no more metadata */
            break;
        size_t seg = (size_t)d[i + 2] << 8 | d[i + 3];
        if (seg < 2 || i + 2 + seg > n)
            break;
        if (m == 0xE1 && seg >= 8 && memcmp(d + i + 4, "Exif\0\0", 6) == 0) {
            *len = seg - 2;
            return d + i + 4;
        }
        i += 2 + seg;
    }
    return NULL;
}

/* ---- JPEG ---- */

static enum jev_status decode_jpeg(const uint8_t *data, size_t size, const char *name, const struct jev_image_params *p,
                                   struct jev_image *out, struct jev_error *err) {
    enum jev_status st = JEV_OK;
    tjhandle tj = tjInitDecompress();
    if (!tj)
        return jev_fail(err, JEV_ERR_NOMEM, "%s: JPEG: cannot create a decoder", name);
    int w = 0, h = 0, subsamp = 0, cs = 0;
    if (size > (size_t)0xFFFFFFFFu) {
        st = jev_fail(err, JEV_ERR_NOMEM, "%s: JPEG: %zu bytes is too large for the decoder", name, size);
        goto done;
    }
    if (tjDecompressHeader3(tj, data, (unsigned long)size, &w, &h, &subsamp, &cs) != 0) {
        st = jev_fail(err, JEV_ERR_FORMAT, "%s: JPEG: bad header (%s)", name, tjGetErrorStr2(tj));
        goto done;
    }
    if (cs == TJCS_CMYK || cs == TJCS_YCCK) {
        st = jev_fail(err, JEV_ERR_UNSUPPORTED, "%s: JPEG: %s colour is not supported (convert the image to RGB)", name,
                      cs == TJCS_CMYK ? "CMYK" : "YCCK");
        goto done;
    }
    if (w == 0 && h == 0) { /* libjpeg met the end of the input before a frame header */
        st = jev_fail(err, JEV_ERR_FORMAT, "%s: JPEG: truncated header (no frame header before the end)", name);
        goto done;
    }
    if ((st = check_size(name, "JPEG", w, h, p, err)) != JEV_OK)
        goto done;
    /* zeroed: on some corrupt files TurboJPEG 2.1 stops at an error after a warning and reports the warning, so
     * rows it never wrote would show whatever the heap held (found by fuzz-image; two decodes of one file
     * differed). A buffer this size comes from fresh zero pages, so calloc costs no pass over it. */
    out->rgb = calloc((size_t)w * (size_t)h, 3);
    if (!out->rgb) {
        st = jev_fail(err, JEV_ERR_NOMEM, "%s: JPEG: out of memory for %dx%d pixels", name, w, h);
        goto done;
    }
    /* On a pool, a single-scan file is decoded in strips (image-jpeg-strips.c: the same bytes); anything else,
     * and any strip that meets a warning or an error, comes here. ACCURATEDCT: the integer "islow" IDCT
     * (libjpeg's default, what PIL decodes with; TurboJPEG's own default is implementation-defined). Fancy
     * upsampling stays on (no FASTUPSAMPLE). LIMITSCANS refuses progressive files with an absurd number of
     * scans (a known CPU-exhaustion attack). */
    if (!jev_jpeg_decode_strips(data, size, w, h, out->rgb, p->pool) &&
        tjDecompress2(tj, data, (unsigned long)size, out->rgb, w, 0, h, TJPF_RGB,
                      TJFLAG_ACCURATEDCT | TJFLAG_LIMITSCANS) != 0) {
        const char *msg = tjGetErrorStr2(tj);
        if (tjGetErrorCode(tj) == TJERR_FATAL) {
            st = jev_fail(err, JEV_ERR_FORMAT, "%s: JPEG: corrupt data (%s)", name, msg);
            goto done;
        }
        /* A warning. libjpeg's memory source reports the end of the input as "Premature end of JPEG file";
         * PIL refuses truncated files ("image file is truncated"), so do we. Other warnings (extraneous
         * bytes, bad Huffman codes) are ignored, as PIL's decoder ignores them. */
        if (strstr(msg, "Premature end")) {
            st = jev_fail(err, JEV_ERR_FORMAT, "%s: JPEG: truncated data (%s)", name, msg);
            goto done;
        }
    }
    out->width = w;
    out->height = h;
done:
    tjDestroy(tj);
    if (st != JEV_OK) {
        free(out->rgb);
        memset(out, 0, sizeof *out);
    }
    return st;
}

/* ---- PNG ---- */

/* An spng error as text; end-of-input gets a plain "truncated" wording. */
static const char *png_reason(int r, bool in_image) {
    if (r == SPNG_IO_EOF || r == SPNG_EOF)
        return in_image ? "truncated image data (the file ends early)" : "truncated header (the file ends early)";
    if (r == SPNG_EIDAT_TOO_SHORT)
        return "truncated image data (IDAT holds too few bytes)";
    return spng_strerror(r);
}

/* Sample k of a packed row of `depth`-bit samples (1, 2, 4, 8) or host-endian 16-bit samples. */
static inline uint32_t png_sample(const uint8_t *row, int64_t k, int depth) {
    switch (depth) {
    case 1: return (row[k >> 3] >> (7 - (k & 7))) & 1u;
    case 2: return (row[k >> 2] >> (6 - 2 * (k & 3))) & 3u;
    case 4: return (row[k >> 1] >> (4 - 4 * (k & 1))) & 15u;
    case 8: return row[k];
    default: {
        uint16_t v;
        memcpy(&v, row + 2 * k, 2);
        return v;
    }
    }
}

/* One 8-bit channel value of a non-palette sample, PIL's way (see image.h). */
static inline uint8_t png_to8(uint32_t v, int depth, bool grey_no_alpha) {
    switch (depth) {
    case 1: return v ? 255 : 0;
    case 2: return (uint8_t)(v * 85u);
    case 4: return (uint8_t)(v * 17u);
    case 8: return (uint8_t)v;
    default: /* 16-bit: grey alone is PIL's I;16 (clipped), every other type keeps the high byte */
        return grey_no_alpha ? (uint8_t)(v > 255 ? 255 : v) : (uint8_t)(v >> 8);
    }
}

static enum jev_status decode_png(const uint8_t *data, size_t size, const char *name, const struct jev_image_params *p,
                                  struct jev_image *out, struct jev_error *err) {
    enum jev_status st = JEV_OK;
    uint8_t *raw = NULL;
    spng_ctx *ctx = spng_ctx_new(0);
    if (!ctx)
        return jev_fail(err, JEV_ERR_NOMEM, "%s: PNG: cannot create a decoder", name);
    /* Ancillary chunks are held in memory by spng: cap each at 8 MiB and the total at 32 MiB. */
    spng_set_chunk_limits(ctx, (size_t)8 << 20, (size_t)32 << 20);
    int r = spng_set_png_buffer(ctx, data, size);
    struct spng_ihdr ihdr;
    if (r == 0)
        r = spng_get_ihdr(ctx, &ihdr);
    if (r != 0) {
        st = jev_fail(err, JEV_ERR_FORMAT, "%s: PNG: %s", name, png_reason(r, false));
        goto done;
    }
    if ((st = check_size(name, "PNG", ihdr.width, ihdr.height, p, err)) != JEV_OK)
        goto done;
    int depth = ihdr.bit_depth, ct = ihdr.color_type;
    int channels = ct == SPNG_COLOR_TYPE_TRUECOLOR         ? 3
                   : ct == SPNG_COLOR_TYPE_TRUECOLOR_ALPHA ? 4
                   : ct == SPNG_COLOR_TYPE_GRAYSCALE_ALPHA ? 2
                                                           : 1;
    struct spng_plte plte = {0};
    if (ct == SPNG_COLOR_TYPE_INDEXED) {
        r = spng_get_plte(ctx, &plte);
        if (r != 0) {
            st = jev_fail(err, JEV_ERR_FORMAT, "%s: PNG: %s", name,
                          r == SPNG_ECHUNKAVAIL ? "palette image without a PLTE chunk" : png_reason(r, false));
            goto done;
        }
    }
    size_t w = ihdr.width, h = ihdr.height;
    size_t row_bytes = (w * (size_t)channels * (size_t)depth + 7) / 8;
    size_t len = 0;
    r = spng_decoded_image_size(ctx, SPNG_FMT_PNG, &len);
    if (r != 0 || len != row_bytes * h) {
        st = jev_fail(err, JEV_ERR_FORMAT, "%s: PNG: %s", name, r ? png_reason(r, false) : "unexpected decoded size");
        goto done;
    }
    raw = malloc(len);
    out->rgb = malloc(w * h * 3);
    if (!raw || !out->rgb) {
        st = jev_fail(err, JEV_ERR_NOMEM, "%s: PNG: out of memory for %zux%zu pixels", name, w, h);
        goto done;
    }
    /* SPNG_FMT_PNG: the file's own sample format (16-bit host-endian, low depths packed), no transparency or
     * gamma applied, so the conversion below is entirely PIL's. */
    r = spng_decode_image(ctx, raw, len, SPNG_FMT_PNG, 0);
    if (r != 0) {
        st = jev_fail(err, JEV_ERR_FORMAT, "%s: PNG: %s", name, png_reason(r, true));
        goto done;
    }
    bool grey_alone = ct == SPNG_COLOR_TYPE_GRAYSCALE;
    for (size_t y = 0; y < h; y++) {
        const uint8_t *row = raw + y * row_bytes;
        uint8_t *o = out->rgb + y * w * 3;
        for (size_t x = 0; x < w; x++, o += 3) {
            int64_t k = (int64_t)(x * (size_t)channels);
            if (ct == SPNG_COLOR_TYPE_INDEXED) {
                uint32_t i = png_sample(row, k, depth);
                if (i < plte.n_entries) {
                    o[0] = plte.entries[i].red;
                    o[1] = plte.entries[i].green;
                    o[2] = plte.entries[i].blue;
                } else { /* past the palette: black, as Pillow 12 (the reference) shows it */
                    o[0] = o[1] = o[2] = 0;
                }
            } else if (channels <= 2) { /* grey, grey + alpha: alpha dropped */
                o[0] = o[1] = o[2] = png_to8(png_sample(row, k, depth), depth, grey_alone);
            } else { /* RGB, RGBA: alpha dropped */
                for (int c = 0; c < 3; c++)
                    o[c] = png_to8(png_sample(row, k + c, depth), depth, false);
            }
        }
    }
    out->width = (int32_t)w;
    out->height = (int32_t)h;
    if (p->apply_exif_orientation) {
        struct spng_exif exif;
        if (spng_get_exif(ctx, &exif) == 0)
            st = jev_image_orient(out, jev_image_exif_orientation((const uint8_t *)exif.data, exif.length), err);
    }
done:
    free(raw);
    spng_ctx_free(ctx);
    if (st != JEV_OK) {
        free(out->rgb);
        memset(out, 0, sizeof *out);
    }
    return st;
}

/* ---- entry points ---- */

enum jev_status jev_image_decode(const void *data, size_t size, const char *name, const struct jev_image_params *params,
                                 struct jev_image *out, struct jev_error *err) {
    memset(out, 0, sizeof *out);
    struct jev_image_params p = resolve_params(params);
    if (!name)
        name = "image";
    const uint8_t *d = data;
    if (size > p.max_file_bytes)
        return jev_fail(err, JEV_ERR_NOMEM, "%s: %zu bytes exceeds the image file limit of %zu bytes", name, size,
                        p.max_file_bytes);
    if (size >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF) {
        JEV_TRY(decode_jpeg(d, size, name, &p, out, err));
        if (p.apply_exif_orientation) {
            size_t n = 0;
            const uint8_t *exif = jpeg_find_exif(d, size, &n);
            enum jev_status st = jev_image_orient(out, jev_image_exif_orientation(exif, n), err);
            if (st != JEV_OK)
                jev_image_free(out);
            return st;
        }
        return JEV_OK;
    }
    if (size >= 8 && memcmp(d, "\x89PNG\r\n\x1a\n", 8) == 0)
        return decode_png(d, size, name, &p, out, err);
    if (size == 0)
        return jev_fail(err, JEV_ERR_FORMAT, "%s: empty file", name);
    return jev_fail(err, JEV_ERR_FORMAT, "%s: not a JPEG or PNG file (starts with %02x %02x %02x %02x)", name, d[0],
                    size > 1 ? d[1] : 0, size > 2 ? d[2] : 0, size > 3 ? d[3] : 0);
}

enum jev_status jev_image_load(const char *path, const struct jev_image_params *params, struct jev_image *out,
                               struct jev_error *err) {
    memset(out, 0, sizeof *out);
    struct jev_image_params p = resolve_params(params);
    FILE *f = fopen(path, "rb");
    if (!f)
        return jev_fail(err, JEV_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return jev_fail(err, JEV_ERR_IO, "%s: not a regular file", path);
    }
    if ((uint64_t)sb.st_size > (uint64_t)p.max_file_bytes) {
        fclose(f);
        return jev_fail(err, JEV_ERR_NOMEM, "%s: %lld bytes exceeds the image file limit of %zu bytes", path,
                        (long long)sb.st_size, p.max_file_bytes);
    }
    size_t n = (size_t)sb.st_size;
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf) {
        fclose(f);
        return jev_fail(err, JEV_ERR_NOMEM, "%s: out of memory reading %zu bytes", path, n);
    }
    size_t got = fread(buf, 1, n, f);
    int rerr = ferror(f);
    fclose(f);
    if (got != n || rerr) {
        free(buf);
        return jev_fail(err, JEV_ERR_IO, "%s: read error", path);
    }
    enum jev_status st = jev_image_decode(buf, n, path, &p, out, err);
    free(buf);
    return st;
}

void jev_image_free(struct jev_image *img) {
    if (!img)
        return;
    free(img->rgb);
    memset(img, 0, sizeof *img);
}
