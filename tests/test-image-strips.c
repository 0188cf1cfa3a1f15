/*
 * test-image-strips.c - the strip-parallel JPEG decode (src/io/image-jpeg-strips.c)
 * against the one-thread decode: byte for byte on every chroma subsampling,
 * grey, odd sizes in both orientations, restart intervals and the benchmark
 * photo, on pools of 2 to 16 threads; progressive files and every broken
 * file (cut short anywhere, even just before EOI; corrupt entropy data) go
 * back to the one-thread decode, so status, message and bytes are the same.
 *
 * The JPEGs are made here with libjpeg's encoder (the subsampling factors
 * and restart intervals TurboJPEG's 2.x encoder does not offer).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#include "base/pool.h"    // defines: jev_pool_init
#include "io/image-int.h" // defines: jev_jpeg_decode_strips
#include "io/image.h"     // defines: jev_image_decode

/* How a test JPEG is encoded. */
struct enc {
    int h_samp, v_samp; /* luma sampling factors (chroma 1x1): 1x1 = 4:4:4, 2x2 = 4:2:0, ... */
    bool grey;
    int restart_rows; /* restart interval in MCU rows; 0 = none */
    bool progressive;
};

/* A w x h JPEG of a pattern with smooth gradients, hard edges and noise (so that every IDCT coefficient and the
 * chroma upsampling matter). */
static uint8_t *make_jpeg(int w, int h, const struct enc *e, unsigned long *size) {
    uint8_t *px = malloc((size_t)w * (size_t)h * 3);
    uint32_t s = (uint32_t)(w * 31 + h);
    for (size_t i = 0; i < (size_t)w * (size_t)h * 3; i++) {
        s = s * 1664525u + 1013904223u;
        int x = (int)(i / 3 % (size_t)w), y = (int)(i / 3 / (size_t)w), c = (int)(i % 3);
        int v = (x * 3 + y * 2 + c * 60) % 256 + (int)(s >> 29) * 8 - 16;
        if ((x / 7 + y / 5) % 3 == 0)
            v = 255 - v;
        px[i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
    }
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr em;
    c.err = jpeg_std_error(&em);
    jpeg_create_compress(&c);
    unsigned char *out = NULL;
    *size = 0;
    jpeg_mem_dest(&c, &out, size);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = 3;
    c.in_color_space = JCS_RGB;
    jpeg_set_defaults(&c);
    if (e->grey)
        jpeg_set_colorspace(&c, JCS_GRAYSCALE);
    jpeg_set_quality(&c, 92, TRUE);
    c.comp_info[0].h_samp_factor = e->grey ? 1 : e->h_samp;
    c.comp_info[0].v_samp_factor = e->grey ? 1 : e->v_samp;
    c.restart_in_rows = e->restart_rows;
    if (e->progressive)
        jpeg_simple_progression(&c);
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = px + (size_t)c.next_scanline * (size_t)w * 3;
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    free(px);
    uint8_t *copy = malloc(*size);
    memcpy(copy, out, *size);
    free(out);
    return copy;
}

/* The one-thread decode of the bytes, and the decode on pool: the same status, message and bytes. Returns
 * whether the strips themselves decoded the file (jev_jpeg_decode_strips, called on its own). */
static bool check_same(const uint8_t *jpg, size_t n, struct jev_pool *pool, const char *what) {
    struct jev_image one, on;
    struct jev_error e1 = {0}, e2 = {0};
    struct jev_image_params p = jev_image_default_params();
    enum jev_status s1 = jev_image_decode(jpg, n, "t.jpg", NULL, &one, &e1);
    p.pool = pool;
    enum jev_status s2 = jev_image_decode(jpg, n, "t.jpg", &p, &on, &e2);
    if (s1 != s2 || strcmp(e1.msg, e2.msg) != 0)
        fail_msg("%s: one thread %d \"%s\", on %d threads %d \"%s\"", what, s1, e1.msg, jev_pool_size(pool), s2,
                 e2.msg);
    bool strips = false;
    if (s1 == JEV_OK) {
        size_t bytes = (size_t)one.width * (size_t)one.height * 3;
        assert_int_equal(one.width, on.width);
        assert_int_equal(one.height, on.height);
        if (memcmp(one.rgb, on.rgb, bytes) != 0)
            fail_msg("%s: the decode on %d threads differs from the one-thread decode", what, jev_pool_size(pool));
        uint8_t *direct = malloc(bytes);
        memset(direct, 0xA5, bytes);
        strips = jev_jpeg_decode_strips(jpg, n, one.width, one.height, direct, pool);
        if (strips && memcmp(one.rgb, direct, bytes) != 0)
            fail_msg("%s: the strips on %d threads differ from the one-thread decode", what, jev_pool_size(pool));
        free(direct);
    }
    jev_image_free(&one);
    jev_image_free(&on);
    return strips;
}

static void test_strips_match_serial(void **state) {
    (void)state;
    const int sizes[][2] = {{61, 37}, {37, 61}, {640, 480}, {480, 640}, {1001, 257}, {257, 1001}, {17, 9}, {8, 300}};
    const struct enc encs[] = {
        {1, 1, false, 0, false}, /* 4:4:4 */
        {2, 2, false, 0, false}, /* 4:2:0: fancy upsampling reads the rows above and below */
        {2, 1, false, 0, false}, /* 4:2:2 */
        {1, 2, false, 0, false}, /* 4:4:0 */
        {4, 1, false, 0, false}, /* 4:1:1 */
        {1, 1, true, 0, false},  /* grey, replicated */
        {2, 2, false, 3, false}, /* restart markers every 3 MCU rows */
        {1, 1, false, 1, false}, /* every MCU row */
    };
    const int threads[] = {2, 3, 5, 16};
    for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
        struct jev_pool *pool = NULL;
        struct jev_error err = {0};
        assert_int_equal(jev_pool_init(&pool, threads[t], &err), JEV_OK);
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
            for (size_t k = 0; k < sizeof encs / sizeof encs[0]; k++) {
                int w = sizes[s][0], h = sizes[s][1];
                unsigned long n = 0;
                uint8_t *jpg = make_jpeg(w, h, &encs[k], &n);
                char what[96];
                snprintf(what, sizeof what, "%dx%d, sampling %dx%d%s, restart %d", w, h, encs[k].h_samp, encs[k].v_samp,
                         encs[k].grey ? " grey" : "", encs[k].restart_rows);
                bool strips = check_same(jpg, n, pool, what);
                if (h >= 64 && !strips) /* tall enough for two strips: the strips must have run */
                    fail_msg("%s: not decoded in strips on %d threads", what, threads[t]);
                free(jpg);
            }
        jev_pool_free(pool);
    }
}

static void test_strips_dog_photo(void **state) {
    (void)state;
    FILE *f = fopen("assets/dog.jpg", "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    size_t n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *jpg = malloc(n);
    assert_int_equal(fread(jpg, 1, n, f), n);
    fclose(f);
    for (int t = 2; t <= 16; t *= 2) {
        struct jev_pool *pool = NULL;
        struct jev_error err = {0};
        assert_int_equal(jev_pool_init(&pool, t, &err), JEV_OK);
        assert_true(check_same(jpg, n, pool, "assets/dog.jpg"));
        jev_pool_free(pool);
    }
    free(jpg);
}

/* Progressive files, and every broken file, are decoded (or refused) by the one-thread decode. */
static void test_strips_fall_back(void **state) {
    (void)state;
    struct jev_pool *pool = NULL;
    struct jev_error err = {0};
    assert_int_equal(jev_pool_init(&pool, 4, &err), JEV_OK);
    const struct enc prog = {2, 2, false, 0, true}, base = {2, 2, false, 0, false}, rst = {1, 1, false, 2, false};
    unsigned long n = 0;
    uint8_t *jpg = make_jpeg(320, 240, &prog, &n);
    assert_false(check_same(jpg, n, pool, "progressive"));
    free(jpg);
    const struct enc *cut_encs[] = {&base, &rst};
    for (int k = 0; k < 2; k++) {
        jpg = make_jpeg(320, 240, cut_encs[k], &n);
        /* cut short: in the middle, in the last rows, just before EOI (the last strip reads on to the end) */
        const size_t cuts[] = {n / 2, n * 3 / 4, n - 40, n - 2};
        for (int c = 0; c < 4; c++) {
            char what[64];
            snprintf(what, sizeof what, "cut to %zu of %lu bytes", cuts[c], n);
            assert_false(check_same(jpg, cuts[c], pool, what));
        }
        /* corrupt entropy data: warnings (decoded as PIL does) or a fatal error, the same either way */
        uint8_t *bad = malloc(n);
        memcpy(bad, jpg, n);
        for (size_t i = n / 2; i < n / 2 + 64; i++)
            bad[i] = (uint8_t)(i * 7);
        check_same(bad, n, pool, "corrupt entropy data");
        free(bad);
        free(jpg);
    }
    jev_pool_free(pool);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strips_match_serial),
        cmocka_unit_test(test_strips_dog_photo),
        cmocka_unit_test(test_strips_fall_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
