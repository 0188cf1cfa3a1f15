/*
 * test-image.c - image decoding: PIL's convert("RGB") rules for every PNG
 * colour type and depth (against values computed here from the generator's
 * formulas, scripts/make-test-images.py), JPEG colour/grey decoding, EXIF
 * orientation, and every malformed or over-limit input with its exact error.
 *
 * The PNG files in tests/data/ come from scripts/make-test-images.py (stdlib
 * zlib, no image library). JPEGs are made here with TurboJPEG's encoder.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

#include "io/image.h" // defines: jev_image_decode, jev_image_load

/* ---- helpers ---- */

/* The generator's sample formulas (scripts/make-test-images.py). */
static uint32_t s8(int x, int y, int c) { return (uint32_t)(x * 37 + y * 101 + c * 53 + 7) % 256u; }
static uint32_t s16(int x, int y, int c) { return (uint32_t)((x * 9973 + y * 30011 + c * 7919) * 13 + 11) % 65536u; }
static const int PAL[10][3] = {{3, 5, 9},      {32, 76, 122},   {61, 147, 235}, {90, 218, 92},  {119, 33, 205},
                               {148, 104, 62}, {177, 175, 175}, {206, 246, 32}, {235, 61, 145}, {8, 132, 2}};

static uint8_t *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)len + 1);
    assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return buf;
}

static void load_ok(const char *name, struct jev_image *img) {
    char path[256];
    snprintf(path, sizeof path, "tests/data/%s", name);
    struct jev_error err = {0};
    enum jev_status st = jev_image_load(path, NULL, img, &err);
    if (st != JEV_OK)
        fail_msg("%s: %s", name, err.msg);
    assert_non_null(img->rgb);
}

static void expect_px(const struct jev_image *img, int x, int y, uint32_t r, uint32_t g, uint32_t b) {
    const uint8_t *p = img->rgb + ((size_t)y * (size_t)img->width + (size_t)x) * 3;
    if (p[0] != r || p[1] != g || p[2] != b)
        fail_msg("pixel (%d,%d): got %u %u %u, want %u %u %u", x, y, p[0], p[1], p[2], r, g, b);
}

/* Decodes bytes and checks the exact status and message. */
static void expect_error(const void *data, size_t n, enum jev_status want, const char *msg) {
    struct jev_error err = {0};
    struct jev_image img;
    memset(&img, 0xAB, sizeof img);
    enum jev_status st = jev_image_decode(data, n, "t.img", NULL, &img, &err);
    if (st != want || strcmp(err.msg, msg) != 0)
        fail_msg("status %d (want %d), message\n  got:  %s\n  want: %s", st, want, err.msg, msg);
    assert_null(img.rgb);
    assert_int_equal(img.width, 0);
}

/* CRC-32 of PNG chunks (the zlib polynomial), to forge well-formed but hostile chunks. */
static uint32_t crc32_png(const uint8_t *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
    }
    return ~c;
}

static void put32be(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* Rewrites IHDR's width/height (bytes 16..23) and its CRC (bytes 29..32). */
static void forge_ihdr(uint8_t *png, uint32_t w, uint32_t h) {
    put32be(png + 16, w);
    put32be(png + 20, h);
    put32be(png + 29, crc32_png(png + 12, 17));
}

/* A w x h JPEG of a smooth pattern made with TurboJPEG (pf TJPF_RGB/GRAY/CMYK). */
static uint8_t *make_jpeg(int w, int h, int pf, int subsamp, unsigned long *size) {
    int ps = tjPixelSize[pf];
    uint8_t *src = malloc((size_t)w * (size_t)h * (size_t)ps);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < ps; c++)
                src[((size_t)y * (size_t)w + (size_t)x) * (size_t)ps + (size_t)c] =
                    (uint8_t)((x * 2 + y * 2 + c * 25) % 256);
    tjhandle tj = tjInitCompress();
    unsigned char *jpg = NULL;
    *size = 0;
    assert_int_equal(tjCompress2(tj, src, w, 0, h, pf, &jpg, size, subsamp, 90, 0), 0);
    tjDestroy(tj);
    free(src);
    uint8_t *out = malloc(*size);
    memcpy(out, jpg, *size);
    tjFree(jpg);
    return out;
}

/* ---- PNG conversions ---- */

static void test_png_grey_depths(void **state) {
    (void)state;
    const char *names[] = {"grey1.png", "grey2.png", "grey4.png", "grey8.png", "grey8-trns.png"};
    const int depth[] = {1, 2, 4, 8, 8};
    for (int f = 0; f < 5; f++) {
        struct jev_image img;
        load_ok(names[f], &img);
        assert_int_equal(img.width, 7);
        assert_int_equal(img.height, 5);
        for (int y = 0; y < 5; y++)
            for (int x = 0; x < 7; x++) {
                uint32_t v = s8(x, y, 0) % (1u << depth[f]);
                /* PIL's L;1 / L;2 / L;4 unpackers scale by bit replication: 1 -> 255, 2-bit * 85, 4-bit * 17 */
                uint32_t v8 = depth[f] == 1 ? v * 255 : depth[f] == 2 ? v * 85 : depth[f] == 4 ? v * 17 : v;
                expect_px(&img, x, y, v8, v8, v8);
            }
        jev_image_free(&img);
    }
}

static void test_png_grey16_clips(void **state) {
    (void)state;
    struct jev_image img;
    load_ok("grey16.png", &img);
    for (int y = 0; y < 5; y++)
        for (int x = 0; x < 7; x++) {
            uint32_t v = y == 0 ? (uint32_t)x * 60 : s16(x, y, 0);
            uint32_t v8 = v > 255 ? 255 : v; /* PIL mode I;16 -> RGB clips, it does not scale */
            expect_px(&img, x, y, v8, v8, v8);
        }
    jev_image_free(&img);
}

static void test_png_alpha_dropped_and_16bit_high_byte(void **state) {
    (void)state;
    struct jev_image img;
    load_ok("ga8.png", &img);
    for (int y = 0; y < 5; y++)
        for (int x = 0; x < 7; x++)
            expect_px(&img, x, y, s8(x, y, 0), s8(x, y, 0), s8(x, y, 0));
    jev_image_free(&img);
    load_ok("ga16.png", &img);
    for (int y = 0; y < 5; y++)
        for (int x = 0; x < 7; x++)
            expect_px(&img, x, y, s16(x, y, 0) >> 8, s16(x, y, 0) >> 8, s16(x, y, 0) >> 8);
    jev_image_free(&img);
    const char *rgb[] = {"rgb8.png", "rgba8.png", "rgb16.png", "rgba16.png"};
    for (int f = 0; f < 4; f++) {
        load_ok(rgb[f], &img);
        for (int y = 0; y < 5; y++)
            for (int x = 0; x < 7; x++) {
                if (f < 2)
                    expect_px(&img, x, y, s8(x, y, 0), s8(x, y, 1), s8(x, y, 2));
                else /* PIL's RGB;16B / RGBA;16B unpackers keep the most significant byte */
                    expect_px(&img, x, y, s16(x, y, 0) >> 8, s16(x, y, 1) >> 8, s16(x, y, 2) >> 8);
            }
        jev_image_free(&img);
    }
}

static void test_png_palette(void **state) {
    (void)state;
    struct jev_image img;
    load_ok("pal8.png", &img); /* 10 entries, indices up to 11, with tRNS (ignored by convert("RGB")) */
    int seen_out_of_range = 0;
    for (int y = 0; y < 5; y++)
        for (int x = 0; x < 7; x++) {
            uint32_t i = s8(x, y, 0) % 12;
            if (i < 10)
                expect_px(&img, x, y, (uint32_t)PAL[i][0], (uint32_t)PAL[i][1], (uint32_t)PAL[i][2]);
            else { /* past the palette: black, as Pillow 12 shows it (tests/golden/vision-decode.json) */
                expect_px(&img, x, y, 0, 0, 0);
                seen_out_of_range++;
            }
        }
    assert_true(seen_out_of_range > 0);
    jev_image_free(&img);
    load_ok("pal4.png", &img);
    for (int y = 0; y < 5; y++)
        for (int x = 0; x < 7; x++) {
            uint32_t i = s8(x, y, 0) % 10;
            expect_px(&img, x, y, (uint32_t)PAL[i][0], (uint32_t)PAL[i][1], (uint32_t)PAL[i][2]);
        }
    jev_image_free(&img);
    load_ok("pal1.png", &img);
    for (int y = 0; y < 5; y++)
        for (int x = 0; x < 7; x++) {
            uint32_t i = s8(x, y, 0) % 2;
            expect_px(&img, x, y, (uint32_t)PAL[i][0], (uint32_t)PAL[i][1], (uint32_t)PAL[i][2]);
        }
    jev_image_free(&img);
}

static void test_png_interlaced(void **state) {
    (void)state;
    struct jev_image img;
    load_ok("rgb8-adam7.png", &img);
    assert_int_equal(img.width, 9);
    assert_int_equal(img.height, 7);
    for (int y = 0; y < 7; y++)
        for (int x = 0; x < 9; x++)
            expect_px(&img, x, y, s8(x, y, 0), s8(x, y, 1), s8(x, y, 2));
    jev_image_free(&img);
}

/* ---- EXIF orientation ---- */

/* Reference transforms built from three primitive ones, independently of image.c's per-case formulas. */
static struct jev_image ref_copy(const struct jev_image *a) {
    struct jev_image b = *a;
    b.rgb = malloc((size_t)a->width * (size_t)a->height * 3);
    memcpy(b.rgb, a->rgb, (size_t)a->width * (size_t)a->height * 3);
    return b;
}
static void ref_flip_lr(struct jev_image *a) {
    struct jev_image b = ref_copy(a);
    for (int y = 0; y < a->height; y++)
        for (int x = 0; x < a->width; x++)
            memcpy(a->rgb + ((size_t)y * (size_t)a->width + (size_t)x) * 3,
                   b.rgb + ((size_t)y * (size_t)a->width + (size_t)(a->width - 1 - x)) * 3, 3);
    free(b.rgb);
}
static void ref_flip_tb(struct jev_image *a) {
    struct jev_image b = ref_copy(a);
    for (int y = 0; y < a->height; y++)
        memcpy(a->rgb + (size_t)y * (size_t)a->width * 3, b.rgb + (size_t)(a->height - 1 - y) * (size_t)a->width * 3,
               (size_t)a->width * 3);
    free(b.rgb);
}
static void ref_transpose(struct jev_image *a) {
    struct jev_image b = ref_copy(a);
    int w = a->width, h = a->height;
    a->width = h;
    a->height = w;
    for (int y = 0; y < w; y++)
        for (int x = 0; x < h; x++)
            memcpy(a->rgb + ((size_t)y * (size_t)h + (size_t)x) * 3, b.rgb + ((size_t)x * (size_t)w + (size_t)y) * 3,
                   3);
    free(b.rgb);
}

static void test_orientation_all_eight(void **state) {
    (void)state;
    struct jev_image base;
    load_ok("rgb8.png", &base);
    for (int o = 1; o <= 8; o++) {
        struct jev_image got = ref_copy(&base), want = ref_copy(&base);
        struct jev_error err = {0};
        assert_int_equal(jev_image_orient(&got, o, &err), JEV_OK);
        /* PIL exif_transpose: 2 FLIP_LEFT_RIGHT, 3 ROTATE_180, 4 FLIP_TOP_BOTTOM, 5 TRANSPOSE,
         * 6 ROTATE_270 = transpose + flip LR, 7 TRANSVERSE = transpose + rotate 180, 8 ROTATE_90 = transpose + flip TB
         */
        if (o >= 5)
            ref_transpose(&want);
        if (o == 2 || o == 3 || o == 6 || o == 7)
            ref_flip_lr(&want);
        if (o == 3 || o == 4 || o == 7 || o == 8)
            ref_flip_tb(&want);
        assert_int_equal(got.width, want.width);
        assert_int_equal(got.height, want.height);
        assert_memory_equal(got.rgb, want.rgb, (size_t)got.width * (size_t)got.height * 3);
        free(got.rgb);
        free(want.rgb);
    }
    jev_image_free(&base);
}

static void test_exif_parse_and_apply(void **state) {
    (void)state;
    /* little-endian and big-endian TIFF blocks, with and without the "Exif\0\0" prefix */
    const uint8_t le6[] = {'E',  'x',  'i', 'f', 0, 0, 'I', 'I', '*', 0, 8, 0, 0, 0, 1, 0,
                           0x12, 0x01, 3,   0,   1, 0, 0,   0,   6,   0, 0, 0, 0, 0, 0, 0};
    const uint8_t be3[] = {'M', 'M', 0, '*', 0, 0, 0, 8, 0, 1, 0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, 3, 0, 0, 0, 0, 0, 0};
    assert_int_equal(jev_image_exif_orientation(le6, sizeof le6), 6);
    assert_int_equal(jev_image_exif_orientation(be3, sizeof be3), 3);
    assert_int_equal(jev_image_exif_orientation(le6, 20), 1); /* cut inside the entry */
    assert_int_equal(jev_image_exif_orientation(NULL, 0), 1);

    struct jev_image plain, turned;
    load_ok("rgb8-exif6.png", &plain); /* default: orientation not applied (the processor's behaviour) */
    assert_int_equal(plain.width, 7);
    struct jev_image_params p = jev_image_default_params();
    p.apply_exif_orientation = true;
    struct jev_error err = {0};
    assert_int_equal(jev_image_load("tests/data/rgb8-exif6.png", &p, &turned, &err), JEV_OK);
    assert_int_equal(turned.width, 5);
    assert_int_equal(turned.height, 7);
    assert_int_equal(jev_image_orient(&plain, 6, &err), JEV_OK);
    assert_memory_equal(plain.rgb, turned.rgb, 7 * 5 * 3);
    jev_image_free(&plain);
    jev_image_free(&turned);

    /* JPEG: an APP1 Exif segment inserted after SOI */
    unsigned long n = 0;
    uint8_t *jpg = make_jpeg(40, 24, TJPF_RGB, TJSAMP_444, &n);
    size_t seg = 2 + sizeof le6;
    uint8_t *with = malloc(n + 2 + seg);
    memcpy(with, jpg, 2);
    with[2] = 0xFF;
    with[3] = 0xE1;
    with[4] = (uint8_t)(seg >> 8);
    with[5] = (uint8_t)seg;
    memcpy(with + 6, le6, sizeof le6);
    memcpy(with + 6 + sizeof le6, jpg + 2, n - 2);
    assert_int_equal(jev_image_decode(with, n + 2 + seg, "x.jpg", &p, &turned, &err), JEV_OK);
    assert_int_equal(jev_image_decode(with, n + 2 + seg, "x.jpg", NULL, &plain, &err), JEV_OK);
    assert_int_equal(turned.width, 24);
    assert_int_equal(turned.height, 40);
    assert_int_equal(jev_image_orient(&plain, 6, &err), JEV_OK);
    assert_memory_equal(plain.rgb, turned.rgb, 40 * 24 * 3);
    jev_image_free(&plain);
    jev_image_free(&turned);
    free(with);
    free(jpg);
}

/* ---- JPEG ---- */

static void test_jpeg_rgb_and_grey(void **state) {
    (void)state;
    const int samp[] = {TJSAMP_444, TJSAMP_420, TJSAMP_422};
    for (int s = 0; s < 3; s++) {
        unsigned long n = 0;
        uint8_t *jpg = make_jpeg(61, 37, TJPF_RGB, samp[s], &n);
        struct jev_image img;
        struct jev_error err = {0};
        assert_int_equal(jev_image_decode(jpg, n, "x.jpg", NULL, &img, &err), JEV_OK);
        assert_int_equal(img.width, 61);
        assert_int_equal(img.height, 37);
        /* lossy, but close to the smooth source pattern away from the chroma edges */
        int far = 0;
        for (int y = 0; y < 37; y++)
            for (int x = 0; x < 61; x++)
                for (int c = 0; c < 3; c++) {
                    int want = (x * 2 + y * 2 + c * 25) % 256;
                    int d = img.rgb[((size_t)y * 61 + (size_t)x) * 3 + (size_t)c] - want;
                    if (d > 24 || d < -24)
                        far++;
                }
        assert_true(far < 61 * 37 * 3 / 20);
        jev_image_free(&img);
        free(jpg);
    }
    unsigned long n = 0;
    uint8_t *jpg = make_jpeg(33, 20, TJPF_GRAY, TJSAMP_GRAY, &n);
    struct jev_image img;
    struct jev_error err = {0};
    assert_int_equal(jev_image_decode(jpg, n, "g.jpg", NULL, &img, &err), JEV_OK);
    for (int i = 0; i < 33 * 20; i++) { /* PIL's L -> RGB replicates */
        assert_int_equal(img.rgb[i * 3], img.rgb[i * 3 + 1]);
        assert_int_equal(img.rgb[i * 3], img.rgb[i * 3 + 2]);
    }
    jev_image_free(&img);
    free(jpg);
}

/* A corrupt JPEG on which TurboJPEG 2.1 stops at an error after a warning and reports the warning (found by
 * fuzz-image): it is accepted, and the rows it never wrote are zero, not what the heap held before. Two decodes
 * with the heap's freed block filled with different bytes first must give the same pixels. */
static void test_jpeg_unwritten_rows_are_zero(void **state) {
    (void)state;
    size_t n;
    uint8_t *jpg = read_file("tests/data/jpeg-stops-after-warning.jpg", &n);
    struct jev_image img[2];
    for (int k = 0; k < 2; k++) {
        uint8_t *dirt = malloc(1 << 12); /* the block the decoder's pixels will likely reuse */
        assert_non_null(dirt);
        memset(dirt, k ? 0x55 : 0xAA, 1 << 12);
        free(dirt);
        struct jev_error err = {0};
        enum jev_status st = jev_image_decode(jpg, n, "stops.jpg", NULL, &img[k], &err);
        if (st != JEV_OK)
            fail_msg("stops.jpg: %s", err.msg);
    }
    assert_int_equal(img[0].width, img[1].width);
    assert_int_equal(img[0].height, img[1].height);
    assert_memory_equal(img[0].rgb, img[1].rgb, (size_t)img[0].width * (size_t)img[0].height * 3);
    jev_image_free(&img[0]);
    jev_image_free(&img[1]);
    free(jpg);
}

static void test_jpeg_errors(void **state) {
    (void)state;
    unsigned long n = 0;
    uint8_t *jpg = make_jpeg(256, 192, TJPF_RGB, TJSAMP_420, &n);
    expect_error(jpg, n * 3 / 4, JEV_ERR_FORMAT, "t.img: JPEG: truncated data (Premature end of JPEG file)");
    expect_error(jpg, 40, JEV_ERR_FORMAT, "t.img: JPEG: truncated header (no frame header before the end)");
    /* SOF0 dimensions rewritten: over the side limit, then over the pixel limit */
    uint8_t *big = malloc(n);
    memcpy(big, jpg, n);
    size_t sof = 2;
    while (!(big[sof] == 0xFF && big[sof + 1] == 0xC0))
        sof++;
    big[sof + 5] = 0x4E; /* height 20000 */
    big[sof + 6] = 0x20;
    expect_error(big, n, JEV_ERR_NOMEM, "t.img: JPEG: 256x20000 pixels exceeds the limit of 16384 pixels per side");
    big[sof + 5] = 0x3E; /* 16000 x 16000 */
    big[sof + 6] = 0x80;
    big[sof + 7] = 0x3E;
    big[sof + 8] = 0x80;
    expect_error(big, n, JEV_ERR_NOMEM,
                 "t.img: JPEG: 16000x16000 = 256000000 pixels exceeds the limit of 67108864 pixels");
    big[sof + 5] = 0; /* height 0 */
    big[sof + 6] = 0;
    expect_error(big, n, JEV_ERR_FORMAT, "t.img: JPEG: bad header (Empty JPEG image (DNL not supported))");
    /* garbage after the header: corrupt entropy data decodes with warnings (as PIL does) or fails fatally */
    memcpy(big, jpg, n);
    for (size_t i = n / 3; i < n - 2; i++)
        big[i] = 0xFF;
    struct jev_image img;
    struct jev_error err = {0};
    enum jev_status st = jev_image_decode(big, n, "t.img", NULL, &img, &err);
    assert_true(st == JEV_OK || st == JEV_ERR_FORMAT);
    jev_image_free(&img);
    free(big);
    free(jpg);
    /* CMYK: TurboJPEG writes it as YCCK */
    jpg = make_jpeg(16, 16, TJPF_CMYK, TJSAMP_444, &n);
    expect_error(jpg, n, JEV_ERR_UNSUPPORTED, "t.img: JPEG: YCCK colour is not supported (convert the image to RGB)");
    free(jpg);
}

/* ---- PNG errors and limits ---- */

static void test_png_errors(void **state) {
    (void)state;
    size_t n = 0;
    uint8_t *png = read_file("tests/data/rgb8.png", &n);
    uint8_t *b = malloc(n);

    expect_error(png, n - 20, JEV_ERR_FORMAT, "t.img: PNG: truncated image data (the file ends early)");
    expect_error(png, 40, JEV_ERR_FORMAT, "t.img: PNG: truncated image data (the file ends early)");
    expect_error(png, 8, JEV_ERR_FORMAT, "t.img: PNG: truncated header (the file ends early)");
    expect_error(png, 20, JEV_ERR_FORMAT, "t.img: PNG: truncated header (the file ends early)");

    memcpy(b, png, n); /* IHDR CRC broken */
    b[30] ^= 0x55;
    expect_error(b, n, JEV_ERR_FORMAT, "t.img: PNG: invalid chunk checksum");

    memcpy(b, png, n); /* width 20000 (CRC fixed up: a well-formed header that asks too much) */
    forge_ihdr(b, 20000, 5);
    expect_error(b, n, JEV_ERR_NOMEM, "t.img: PNG: 20000x5 pixels exceeds the limit of 16384 pixels per side");
    forge_ihdr(b, 16000, 16000);
    expect_error(b, n, JEV_ERR_NOMEM,
                 "t.img: PNG: 16000x16000 = 256000000 pixels exceeds the limit of 67108864 pixels");
    forge_ihdr(b, 0, 5);
    expect_error(b, n, JEV_ERR_FORMAT, "t.img: PNG: invalid image width");
    forge_ihdr(b, 7, 6); /* one row more than the IDAT holds */
    expect_error(b, n, JEV_ERR_FORMAT, "t.img: PNG: truncated image data (IDAT holds too few bytes)");

    memcpy(b, png, n); /* bit depth 3 */
    b[24] = 3;
    put32be(b + 29, crc32_png(b + 12, 17));
    expect_error(b, n, JEV_ERR_FORMAT, "t.img: PNG: invalid bit depth");

    memcpy(b, png, n); /* the zlib header of IDAT damaged (CRC fixed up) */
    size_t idat = 8;
    while (memcmp(b + idat + 4, "IDAT", 4) != 0)
        idat += 12 + ((size_t)b[idat] << 24 | (size_t)b[idat + 1] << 16 | (size_t)b[idat + 2] << 8 | b[idat + 3]);
    size_t len = (size_t)b[idat] << 24 | (size_t)b[idat + 1] << 16 | (size_t)b[idat + 2] << 8 | b[idat + 3];
    b[idat + 8] = 0xFF; /* the zlib header: neither deflate nor a valid check */
    b[idat + 9] = 0xFF;
    put32be(b + idat + 8 + len, crc32_png(b + idat + 4, len + 4));
    expect_error(b, n, JEV_ERR_FORMAT, "t.img: PNG: IDAT stream error");
    free(png);

    png = read_file("tests/data/pal4.png", &n); /* a palette image with its PLTE chunk renamed to a private one */
    b = realloc(b, n);
    memcpy(b, png, n);
    memcpy(b + 33 + 4, "pLTe", 4);
    put32be(b + 33 + 8 + 30, crc32_png(b + 33 + 4, 34));
    expect_error(b, n, JEV_ERR_FORMAT, "t.img: PNG: missing PLTE for indexed image");
    free(png);
    free(b);

    const uint8_t gif[] = {'G', 'I', 'F', '8', '9', 'a'};
    expect_error(gif, sizeof gif, JEV_ERR_FORMAT, "t.img: not a JPEG or PNG file (starts with 47 49 46 38)");
    expect_error(gif, 0, JEV_ERR_FORMAT, "t.img: empty file");
}

static void test_limits(void **state) {
    (void)state;
    struct jev_image_params p = jev_image_default_params();
    p.max_file_bytes = 100;
    struct jev_image img;
    struct jev_error err = {0};
    assert_int_equal(jev_image_load("tests/data/rgb8.png", &p, &img, &err), JEV_ERR_NOMEM);
    assert_string_equal(err.msg, "tests/data/rgb8.png: 173 bytes exceeds the image file limit of 100 bytes");
    p = jev_image_default_params();
    p.max_pixels = 34;
    jev_error_clear(&err);
    assert_int_equal(jev_image_load("tests/data/rgb8.png", &p, &img, &err), JEV_ERR_NOMEM);
    assert_string_equal(err.msg, "tests/data/rgb8.png: PNG: 7x5 = 35 pixels exceeds the limit of 34 pixels");
    p.max_pixels = 35;
    jev_error_clear(&err);
    assert_int_equal(jev_image_load("tests/data/rgb8.png", &p, &img, &err), JEV_OK);
    jev_image_free(&img);
    jev_error_clear(&err);
    assert_int_equal(jev_image_load("tests/data/no-such.png", NULL, &img, &err), JEV_ERR_IO);
    assert_string_equal(err.msg, "tests/data/no-such.png: cannot open: No such file or directory");
}

static void test_dog_photo(void **state) {
    (void)state;
    struct jev_image a, b;
    struct jev_error err = {0};
    assert_int_equal(jev_image_load("assets/dog.jpg", NULL, &a, &err), JEV_OK);
    assert_int_equal(a.width, 1546);
    assert_int_equal(a.height, 1213);
    size_t n = 0;
    uint8_t *bytes = read_file("assets/dog.jpg", &n);
    struct jev_image_params p = jev_image_default_params();
    p.apply_exif_orientation = true; /* its EXIF says 1: nothing changes */
    assert_int_equal(jev_image_decode(bytes, n, "dog", &p, &b, &err), JEV_OK);
    assert_int_equal(b.width, 1546);
    assert_memory_equal(a.rgb, b.rgb, (size_t)1546 * 1213 * 3);
    jev_image_free(&a);
    jev_image_free(&b);
    free(bytes);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_png_grey_depths),
        cmocka_unit_test(test_png_grey16_clips),
        cmocka_unit_test(test_png_alpha_dropped_and_16bit_high_byte),
        cmocka_unit_test(test_png_palette),
        cmocka_unit_test(test_png_interlaced),
        cmocka_unit_test(test_orientation_all_eight),
        cmocka_unit_test(test_exif_parse_and_apply),
        cmocka_unit_test(test_jpeg_rgb_and_grey),
        cmocka_unit_test(test_jpeg_errors),
        cmocka_unit_test(test_jpeg_unwritten_rows_are_zero),
        cmocka_unit_test(test_png_errors),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_dog_photo),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
