/*
 * test-staging.c - the device code paths of the model layer, without a GPU.
 *
 * A device backend (CUDA) is reached through memory that the host cannot
 * touch: the model layer uploads the embedding overrides, the rotary tables,
 * the pixels, mirrors the weights (f32 rows), and downloads the logits in
 * chunks, the vision output and the hook views (ops.h, model/lm.c,
 * model/vision.c, model/weights-mirror.c). Here the CPU's compute ops run
 * behind a "staged" table that says host_memory = false and keeps its own
 * separate blocks, with f32 weight mirrors (a form a device may choose). Every path of
 * the decision pipeline (shared label and text scoring, independent,
 * generate_json, with an image) must give the plain CPU engine's answers:
 * probabilities within 1e-6 (the f32 mirror and the CPU's bf16 kernels sum in
 * different orders) and the same generated text. The counters check that the
 * staged paths really ran.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/ops.h"     // defines: jev_cpu_ops, jev_cpu_backend_new
#include "decide/pipeline.h" // defines: jev_decide_run
#include "model/engine.h"    // defines: jev_engine_init_on
#include "tiny-model.h"      // defines: tiny_model_open
#include "wire/request.h"    // defines: jev_request_parse_*, struct jev_request_error

/* ---- the staged table: CPU compute, device-style memory ---- */

static struct { int64_t allocs, frees, uploads, downloads, mirrors, releases; } g_count;

static void *st_alloc(struct jev_backend *be, size_t bytes) {
    (void)be;
    g_count.allocs++;
    return calloc(1, bytes > 0 ? bytes : 1);
}

static void st_free(struct jev_backend *be, void *p) {
    (void)be;
    if (p)
        g_count.frees++;
    free(p);
}

static void st_upload(struct jev_backend *be, void *dst, const void *src, size_t bytes) {
    (void)be;
    g_count.uploads++;
    memcpy(dst, src, bytes);
}

static void st_download(struct jev_backend *be, void *dst, const void *src, size_t bytes) {
    (void)be;
    g_count.downloads++;
    memcpy(dst, src, bytes);
}

static void st_zero(struct jev_backend *be, void *dst, size_t bytes) {
    (void)be;
    memset(dst, 0, bytes);
}

/* A device backend that widens every matrix to f32 rows in its own memory (as CUDA did before it kept
 * the stored form on the device): the model layer must not care which form a mirror takes. */
static int64_t g_fail_mirror_at = -1; /* >= 0: the mirror with this count fails (out of device memory) */

static enum jev_status st_mirror(struct jev_backend *be, const struct jev_matrix *host, struct jev_matrix *m,
                                 struct jev_error *err) {
    (void)be;
    if (g_count.mirrors == g_fail_mirror_at)
        return jev_fail(err, JEV_ERR_NOMEM, "staged: no room for %s", host->name ? host->name : "?");
    float *rows = malloc((size_t)host->rows * (size_t)host->cols * sizeof(float));
    if (!rows)
        return jev_fail(err, JEV_ERR_NOMEM, "staged mirror of %s", host->name ? host->name : "?");
    for (int64_t r = 0; r < host->rows; r++)
        jev_matrix_row(host, r, rows + r * host->cols);
    *m = (struct jev_matrix){
        .type = JEV_MTYPE_F32, .rows = host->rows, .cols = host->cols, .data = rows, .name = host->name};
    g_count.mirrors++;
    return JEV_OK;
}

static void st_release(struct jev_backend *be, struct jev_matrix *m) {
    (void)be;
    if (m->data)
        g_count.releases++;
    void *p;
    memcpy(&p, &m->data, sizeof p);
    free(p);
    memset(m, 0, sizeof *m);
}

static enum jev_status st_status(struct jev_backend *be, struct jev_error *err) {
    (void)be;
    (void)err;
    return JEV_OK;
}

static struct jev_ops staged_ops;

static void staged_ops_make(void) {
    staged_ops = jev_cpu_ops;
    staged_ops.name = "staged";
    staged_ops.host_memory = false;
    staged_ops.alloc = st_alloc;
    staged_ops.free = st_free;
    staged_ops.upload = st_upload;
    staged_ops.download = st_download;
    staged_ops.zero = st_zero;
    staged_ops.matrix_mirror = st_mirror;
    staged_ops.matrix_release = st_release;
    staged_ops.status = st_status;
    staged_ops.set_precision = NULL; /* exact only: the engine's own refusal of other modes */
}

/* ---- fixture: one model, a plain CPU engine and a staged one ---- */

static struct {
    struct jev_model *model;
    struct jev_pool *pool;
    struct jev_backend *be;
    struct jev_engine *cpu, *staged;
    struct jev_decider *d_cpu, *d_staged;
} F;

static int setup(void **state) {
    (void)state;
    char dir[1024];
    if (tiny_model_open("staging", 2, dir, sizeof dir, &F.model) != 0)
        return -1;
    struct jev_error err = {0};
    struct jev_engine_params ep = jev_engine_default_params();
    ep.max_batch = 16;
    ep.max_tokens = 2048;
    staged_ops_make();
    if (jev_pool_init(&F.pool, 2, &err) != JEV_OK || !(F.be = jev_cpu_backend_new(F.pool)))
        return -1;
    if (jev_engine_init(F.model, &ep, &F.cpu) != JEV_OK ||
        jev_engine_init_on(F.model, &ep, &staged_ops, F.be, &F.staged) != JEV_OK) {
        fprintf(stderr, "engines: %s / %s\n", jev_engine_last_error(F.cpu), jev_engine_last_error(F.staged));
        return -1;
    }
    if (jev_decider_init(F.model, F.cpu, NULL, &F.d_cpu, &err) != JEV_OK ||
        jev_decider_init(F.model, F.staged, NULL, &F.d_staged, &err) != JEV_OK) {
        fprintf(stderr, "decider: %s\n", err.msg);
        return -1;
    }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    jev_decider_free(F.d_cpu);
    jev_decider_free(F.d_staged);
    jev_engine_free(F.cpu);
    jev_engine_free(F.staged);
    jev_cpu_backend_free(F.be);
    jev_pool_free(F.pool);
    jev_model_free(F.model);
    return 0;
}

static const char *REQ =
    "{\"state\":{\"order\":4411,\"message\":\"I was charged twice for my order.\"},\"questions\":{"
    "\"is_refund\":{\"type\":\"noul\",\"instructions\":\"Is the customer asking for a refund?\"},"
    "\"team\":{\"type\":\"choice\",\"instructions\":\"Which team should handle this?\",\"criteria\":{"
    "\"billing\":\"payments and refunds\",\"shipping\":null,\"New York office\":null,\"New Delhi office\":null}},"
    "\"frustration\":{\"type\":\"score\",\"instructions\":\"How frustrated is the customer?\","
    "\"criteria\":[\"calm\",\"mildly annoyed\",\"angry\"]}}}";

static void run(struct jev_decider *d, enum jev_decide_path path, enum jev_decide_scoring sc,
                struct jev_decide_result *res) {
    struct jev_request r;
    struct jev_request_error rerr = {0};
    if (jev_request_parse_systemone(REQ, strlen(REQ), NULL, &r, &rerr) != JEV_OK)
        fail_msg("parse: %s", rerr.message);
    if (jev_request_set_image_path(&r, "tests/data/rgb8.png", &rerr) != JEV_OK)
        fail_msg("image: %s", rerr.message);
    struct jev_decide_params p = jev_decide_default_params();
    p.path = path;
    p.scoring = sc;
    p.batch = 2; /* several batched forwards over the forks */
    struct jev_error err = {0};
    if (jev_decide_run(d, &r, &p, res, &err) != JEV_OK)
        fail_msg("%s: %s", jev_decide_path_name(path), err.msg);
    jev_request_free(&r);
}

/* The staged engine answers exactly what the CPU engine answers, on one path. */
static void same_answers(enum jev_decide_path path, enum jev_decide_scoring sc) {
    struct jev_decide_result a, b;
    run(F.d_cpu, path, sc, &a);
    int64_t up0 = g_count.uploads, down0 = g_count.downloads;
    run(F.d_staged, path, sc, &b);
    /* the image rows, rotary tables and pixels went up; logits and the vision output came down */
    assert_true(g_count.uploads > up0);
    assert_true(g_count.downloads > down0);
    if (path == JEV_DECIDE_GENERATE) {
        assert_true(a.generated && b.generated);
        assert_int_equal(a.gen.raw_len, b.gen.raw_len);
        assert_memory_equal(a.gen.raw, b.gen.raw, a.gen.raw_len);
    } else {
        assert_int_equal(a.answers.n, b.answers.n);
        for (int32_t i = 0; i < a.answers.n; i++) {
            const struct jev_answer *x = &a.answers.items[i], *y = &b.answers.items[i];
            assert_int_equal(x->n, y->n);
            for (int32_t k = 0; k < x->n; k++)
                if (fabs(x->probs[k] - y->probs[k]) > 1e-6)
                    fail_msg("%s question %d option %d: cpu %.9f, staged %.9f", jev_decide_path_name(path), i, k,
                             x->probs[k], y->probs[k]);
            assert_int_equal(x->winner, y->winner);
        }
    }
    jev_decide_result_free(&a);
    jev_decide_result_free(&b);
}

static void test_weights_are_mirrored(void **state) {
    (void)state;
    /* every matrix of the tiny model has its own f32 copy; the CPU engine reads the model's */
    assert_true(g_count.mirrors > 0);
    assert_ptr_equal(F.cpu->weights.w, &F.model->weights);
    assert_ptr_not_equal(F.staged->weights.w, &F.model->weights);
    assert_int_equal(F.staged->weights.w->text.layers[0].gate.type, JEV_MTYPE_F32);
    assert_ptr_not_equal(F.staged->weights.w->text.final_norm, F.model->weights.text.final_norm);
    assert_true(F.staged->weights.bytes > 0);
}

static void test_shared_label(void **state) {
    (void)state;
    same_answers(JEV_DECIDE_SHARED, JEV_SCORING_LABEL);
}

static void test_shared_text(void **state) {
    (void)state;
    same_answers(JEV_DECIDE_SHARED, JEV_SCORING_TEXT);
}

static void test_independent(void **state) {
    (void)state;
    same_answers(JEV_DECIDE_INDEPENDENT, JEV_SCORING_LABEL);
}

static void test_generate(void **state) {
    (void)state;
    same_answers(JEV_DECIDE_GENERATE, JEV_SCORING_LABEL);
}

/* A small engine's sizes, for the tests that build and free staged engines of their own. */
static struct jev_engine_params small_engine(void) {
    struct jev_engine_params ep = jev_engine_default_params();
    ep.max_batch = 4;
    ep.max_tokens = 512;
    return ep;
}

/* Freeing the staged engine gives back every block and every matrix mirror it took. */
static void test_frees_what_it_allocates(void **state) {
    (void)state;
    struct jev_engine_params ep = small_engine();
    struct jev_engine *e = NULL;
    int64_t a0 = g_count.allocs, f0 = g_count.frees, m0 = g_count.mirrors, r0 = g_count.releases;
    assert_int_equal(jev_engine_init_on(F.model, &ep, &staged_ops, F.be, &e), JEV_OK);
    assert_true(g_count.allocs > a0);
    assert_true(g_count.mirrors > m0);
    jev_engine_free(e);
    assert_int_equal(g_count.allocs - a0, g_count.frees - f0);
    assert_int_equal(g_count.mirrors - m0, g_count.releases - r0);
}

/* A mirror that fails half-way (the device is full) fails the engine with the tensor's name and
 * gives back everything taken before it. */
static void test_mirror_failure_cleans_up(void **state) {
    (void)state;
    struct jev_engine_params ep = small_engine();
    struct jev_engine *e = NULL;
    int64_t a0 = g_count.allocs, f0 = g_count.frees, m0 = g_count.mirrors, r0 = g_count.releases;
    g_fail_mirror_at = m0 + 5;
    assert_int_equal(jev_engine_init_on(F.model, &ep, &staged_ops, F.be, &e), JEV_ERR_NOMEM);
    g_fail_mirror_at = -1;
    assert_non_null(strstr(jev_engine_last_error(e), "no room for"));
    jev_engine_free(e);
    assert_int_equal(g_count.mirrors - m0, 5);
    assert_int_equal(g_count.mirrors - m0, g_count.releases - r0);
    assert_int_equal(g_count.allocs - a0, g_count.frees - f0);
}

/* A backend without set_precision runs exact only: fast is refused before any weight is mirrored,
 * exact is accepted, and switching an exact engine to fast fails and leaves it exact. */
static void test_precision_exact_only(void **state) {
    (void)state;
    struct jev_engine_params ep = small_engine();
    ep.precision = JEV_PRECISION_FAST;
    struct jev_engine *e = NULL;
    int64_t m0 = g_count.mirrors;
    assert_int_equal(jev_engine_init_on(F.model, &ep, &staged_ops, F.be, &e), JEV_ERR_UNSUPPORTED);
    assert_non_null(strstr(jev_engine_last_error(e), "the staged backend runs exact only"));
    assert_int_equal(g_count.mirrors, m0);
    jev_engine_free(e);
    ep.precision = JEV_PRECISION_EXACT;
    assert_int_equal(jev_engine_init_on(F.model, &ep, &staged_ops, F.be, &e), JEV_OK);
    struct jev_error err = {0};
    assert_int_equal(jev_engine_set_precision(e, JEV_PRECISION_FAST, &err), JEV_ERR_UNSUPPORTED);
    assert_int_equal(e->params.precision, JEV_PRECISION_EXACT);
    assert_int_equal(jev_engine_set_precision(e, JEV_PRECISION_EXACT, &err), JEV_OK);
    jev_engine_free(e);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_precision_exact_only),
        cmocka_unit_test(test_weights_are_mirrored),
        cmocka_unit_test(test_shared_label),
        cmocka_unit_test(test_shared_text),
        cmocka_unit_test(test_independent),
        cmocka_unit_test(test_generate),
        cmocka_unit_test(test_frees_what_it_allocates),
        cmocka_unit_test(test_mirror_failure_cleans_up),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
