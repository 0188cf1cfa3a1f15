/*
 * image-jpeg-strips.c - a baseline JPEG decoded in horizontal strips on a
 * thread pool, byte for byte what the serial decode of image.c writes.
 *
 * Why: libjpeg-turbo decodes on one thread (9 ms for the benchmark photo on
 * the GPU host, while its other cores wait). Without restart markers the
 * entropy-coded data can only be walked from the start, but walking it is
 * about half of the work; the IDCT, upsampling and colour conversion are the
 * rest. So each task opens its own libjpeg decoder on the same bytes, skips
 * to its first row with jpeg_skip_scanlines (entropy decoding only: the
 * skipped rows get no IDCT) and decodes its rows in full, straight into the
 * output image. The strips are sized so that the tasks end together.
 *
 * Bytes: each row comes out of the same libjpeg code with the same settings
 * as tjDecompress2 (the islow IDCT, fancy upsampling, RGB output); the
 * skipped rows' context (the upsampler's neighbouring rows) is rebuilt by
 * libjpeg itself. tests/test-image.c compares the two decodes on every
 * subsampling, odd sizes and restart intervals.
 *
 * Not here: anything but the clean case. Progressive and multi-scan files
 * (every strip would walk every scan), and any error or warning in any
 * strip, return false: image.c then decodes serially, so such files keep
 * today's bytes, messages and scan limit exactly.
 */
#include "io/image-int.h" // defines: jev_jpeg_decode_strips

#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#include <jpeglib.h>

#include "base/pool.h" // defines: jev_pool_run

/* libjpeg's errors end a strip by longjmp; any warning marks the strip failed too. */
struct strip_err {
    struct jpeg_error_mgr mgr;
    jmp_buf jump;
    int warnings;
};

static void strip_error_exit(j_common_ptr c) {
    struct strip_err *e = (struct strip_err *)c->err;
    longjmp(e->jump, 1);
}

static void strip_emit_message(j_common_ptr c, int level) {
    if (level < 0) /* a warning (level -1); trace messages (>= 0) are not problems */
        ((struct strip_err *)c->err)->warnings++;
}

static void strip_output_message(j_common_ptr c) { (void)c; }

struct strip_job {
    const uint8_t *data;
    size_t size;
    int width, height;
    uint8_t *rgb;      /* [height][width][3] */
    const int *starts; /* [n + 1] the strips' first rows, then height */
    int n;
    _Atomic int failed; /* any strip hit an error or a warning */
};

/* Opens a decoder on the bytes with tjDecompress2's settings for TJPF_RGB and TJFLAG_ACCURATEDCT. */
static void strip_open(struct jpeg_decompress_struct *c, struct strip_err *e, const struct strip_job *j) {
    c->err = jpeg_std_error(&e->mgr);
    e->mgr.error_exit = strip_error_exit;
    e->mgr.emit_message = strip_emit_message;
    e->mgr.output_message = strip_output_message;
    jpeg_create_decompress(c);
    jpeg_mem_src(c, j->data, (unsigned long)j->size);
    jpeg_read_header(c, TRUE);
    c->out_color_space = JCS_EXT_RGB;
    c->dct_method = JDCT_ISLOW;
    c->do_fancy_upsampling = TRUE;
}

static void strip_run(void *arg, int64_t k, int thread) {
    (void)thread;
    struct strip_job *j = arg;
    struct jpeg_decompress_struct c;
    struct strip_err e = {0};
    memset(&c, 0, sizeof c);
    if (setjmp(e.jump)) {
        j->failed = 1;
        jpeg_destroy_decompress(&c);
        return;
    }
    strip_open(&c, &e, j);
    jpeg_start_decompress(&c);
    if ((int)c.output_width != j->width || (int)c.output_height != j->height || c.output_components != 3)
        longjmp(e.jump, 1);
    const int y0 = j->starts[k], y1 = j->starts[k + 1];
    if (y0 > 0)
        jpeg_skip_scanlines(&c, (JDIMENSION)y0);
    while ((int)c.output_scanline < y1) {
        JSAMPROW rows[16];
        int n = 0;
        for (int y = (int)c.output_scanline; y < y1 && n < 16; y++, n++)
            rows[n] = j->rgb + (size_t)y * (size_t)j->width * 3;
        if (jpeg_read_scanlines(&c, rows, (JDIMENSION)n) == 0)
            longjmp(e.jump, 1);
    }
    /* the last strip reads on to the end as tjDecompress2 does, so that a file cut short after its last
     * row still warns ("Premature end") and goes back to the serial decode, which refuses it */
    if (y1 == j->height)
        jpeg_finish_decompress(&c);
    else
        jpeg_abort_decompress(&c);
    if (e.warnings)
        j->failed = 1;
    jpeg_destroy_decompress(&c);
}

/* Whether a file suits strips: one scan holding every component, baseline or extended sequential. */
static bool strips_eligible(const uint8_t *data, size_t size, int *imcu_rows) {
    struct jpeg_decompress_struct c;
    struct strip_err e = {0};
    struct strip_job j = {.data = data, .size = size};
    memset(&c, 0, sizeof c);
    if (setjmp(e.jump)) {
        jpeg_destroy_decompress(&c);
        return false;
    }
    strip_open(&c, &e, &j);
    bool ok = !c.progressive_mode && !jpeg_has_multiple_scans(&c) && c.num_components >= 1 && e.warnings == 0;
    *imcu_rows = c.max_v_samp_factor * DCTSIZE;
    jpeg_destroy_decompress(&c);
    return ok;
}

/* Skipping a row costs about this share e of decoding it (the entropy decode alone; the benchmark
 * photo: 52% on the 2-core machine, 57-60% on the GPU host), so strip k starts where the strips
 * before it end together: s_k = (1 - (1 - e)^k) / (1 - (1 - e)^n) of the height, in iMCU rows. The
 * whole then takes about e of a one-thread decode however many threads there are, the first strips
 * being the long ones (the photo: 6 strips on 16 threads). */
#define SKIP_SHARE 0.6
#define MAX_STRIPS 64

bool jev_jpeg_decode_strips(const uint8_t *data, size_t size, int width, int height, uint8_t *rgb,
                            struct jev_pool *pool) {
    int n = jev_pool_size(pool), imcu = 8;
    if (!pool || n < 2 || size > (size_t)0xFFFFFFFFu || !strips_eligible(data, size, &imcu))
        return false;
    if (n > MAX_STRIPS)
        n = MAX_STRIPS;
    int starts[MAX_STRIPS + 1], m = 0;
    double q = 1.0 - SKIP_SHARE, qn = 1.0;
    for (int k = 0; k < n; k++)
        qn *= q;
    double qk = 1.0;
    for (int k = 0; k < n; k++, qk *= q) {
        int y = (int)((1.0 - qk) / (1.0 - qn) * height / imcu + 0.5) * imcu;
        if (m == 0 || y > starts[m - 1]) /* strips thinner than an iMCU row merge into the one before */
            if (y < height)
                starts[m++] = y;
    }
    if (m < 2)
        return false;
    starts[m] = height;
    struct strip_job j = {
        .data = data, .size = size, .width = width, .height = height, .rgb = rgb, .starts = starts, .n = m};
    jev_pool_run(pool, m, strip_run, &j);
    return !j.failed;
}
