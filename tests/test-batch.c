/*
 * test-batch.c - the shared batch's images (decide/batch.c), in process over
 * the tiny synthetic model: a step runs images through the tower until the
 * prefills they make ready fill the next language-model forward, so with a
 * slice larger than three image prefixes one step encodes all three, and
 * with a slice smaller than one prefix a step encodes one; every request's
 * answers equal those of jev_decide_run alone on the same engine (within
 * 1e-6; same winners), so running several images in a step changes no
 * answer. test-serve-batch.c covers company through the server. A batcher
 * asks its engine's backend for batch-invariant products (ops.h,
 * set_batch_invariant): a recording op table over the CPU's sees the call.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/ops.h"     // defines: jev_cpu_ops, jev_cpu_backend_new
#include "base/pool.h"       // defines: jev_pool_init
#include "decide/batch.h"    // defines: jev_batcher_new, jev_batcher_add, jev_batcher_step, jev_batcher_take
#include "decide/pipeline.h" // defines: jev_decide_run, jev_decide_result_free
#include "tiny-model.h"      // defines: tiny_decider_open
#include "wire/request.h"    // defines: jev_request_parse_systemone, jev_request_set_image_path

enum { N = 3 };
static const char *const image_files[N] = {"tests/data/rgb8.png", "tests/data/grey8.png", "tests/data/rgba8.png"};

/* Counts the requests the preparing threads have finished (the batch's wake callback). */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int prepared;

static void on_prepared(void *ctx) {
    (void)ctx;
    pthread_mutex_lock(&lock);
    prepared++;
    pthread_cond_signal(&cond);
    pthread_mutex_unlock(&lock);
}

static void request_with_image(int i, struct jev_request *r) {
    char body[512];
    snprintf(body, sizeof body,
             "{\"state\":\"picture %d\",\"questions\":{\"q\":{\"type\":\"choice\",\"instructions\":\"Which?\","
             "\"criteria\":{\"a\":\"light\",\"b\":\"dark\",\"c\":\"grey\"}}}}",
             i);
    struct jev_request_error rerr = {0};
    assert_int_equal(jev_request_parse_systemone(body, strlen(body), NULL, r, &rerr), JEV_OK);
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", getenv("JEV_ROOT") ? getenv("JEV_ROOT") : ".", image_files[i]);
    assert_int_equal(jev_request_set_image_path(r, path, &rerr), JEV_OK);
}

/* The three requests through one batch over an engine of slice `slice`; *most = the most images one step
 * encoded, *steps_with_images = steps that encoded any. The answers are compared with jev_decide_run's. */
static void run(int32_t slice, int32_t *most, int32_t *steps_with_images) {
    struct jev_engine_params ep = jev_engine_default_params();
    ep.prefill_chunk = slice;
    char dir[1024];
    struct jev_model *model = NULL;
    struct jev_engine *engine = NULL;
    struct jev_decider *d = NULL;
    assert_int_equal(tiny_decider_open("batch", 2, &ep, dir, sizeof dir, &model, &engine, &d), 0);
    struct jev_request r[N];
    for (int i = 0; i < N; i++)
        request_with_image(i, &r[i]);

    /* alone first: the same decider, one request at a time */
    struct jev_decide_result alone[N];
    struct jev_decide_params p = jev_decide_default_params();
    for (int i = 0; i < N; i++) {
        struct jev_error err = {0};
        assert_int_equal(jev_decide_run(d, &r[i], &p, &alone[i], &err), JEV_OK);
    }

    prepared = 0;
    struct jev_batch_params bp = {.max_running = N, .prep_threads = 2, .wake = on_prepared};
    struct jev_batcher *b = NULL;
    struct jev_error err = {0};
    assert_int_equal(jev_batcher_new(d, &bp, &b, &err), JEV_OK);
    for (int i = 0; i < N; i++)
        assert_int_equal(jev_batcher_add(b, &r[i], &p, &r[i], &err), JEV_OK);
    pthread_mutex_lock(&lock); /* every request prepared before the first step: the steps are then the same each run */
    while (prepared < N)
        pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);

    *most = 0;
    *steps_with_images = 0;
    int taken = 0, images = 0;
    for (int guard = 0; taken < N && guard < 10000; guard++) {
        struct jev_batch_step st;
        jev_batcher_step(b, &st);
        images += st.images;
        if (st.images > *most)
            *most = st.images;
        *steps_with_images += st.images > 0;
        void *user;
        enum jev_status status;
        struct jev_decide_result res;
        while (jev_batcher_take(b, &user, &status, &res, &err)) {
            assert_int_equal(status, JEV_OK);
            int i = (int)((struct jev_request *)user - r);
            const struct jev_answer *x = &res.answers.items[0], *y = &alone[i].answers.items[0];
            assert_int_equal(x->n, y->n);
            assert_int_equal(x->winner, y->winner);
            for (int32_t k = 0; k < x->n; k++)
                assert_true(fabs(x->probs[k] - y->probs[k]) <= 1e-6);
            jev_decide_result_free(&res);
            taken++;
        }
    }
    assert_int_equal(taken, N);
    assert_int_equal(images, N); /* three distinct images: each through the tower once */
    jev_batcher_free(b);
    for (int i = 0; i < N; i++) {
        jev_decide_result_free(&alone[i]);
        jev_request_free(&r[i]);
    }
    jev_decider_close(d);
    jev_engine_free(engine);
    jev_model_free(model);
}

static void test_images_fill_the_next_forward(void **state) {
    (void)state;
    int32_t most, steps;
    run(4096, &most, &steps); /* a slice larger than the three prefixes together */
    assert_int_equal(most, N);
    assert_int_equal(steps, 1);
    run(16, &most, &steps); /* a slice smaller than one prefix (an image alone is more tokens) */
    assert_int_equal(most, 1);
    assert_int_equal(steps, N);
}

/* What the engine's backend was asked: calls of set_batch_invariant and the last value. */
static int invariant_calls;
static bool invariant_on;

static void record_invariant(struct jev_backend *be, bool on) {
    (void)be;
    invariant_calls++;
    invariant_on = on;
}

/* A batcher turns the backend's batch-invariant products on (the CPU's are so anyway; CUDA's pin their algorithms)
 * before any request shares a forward; a single-request decider never asks. */
static void test_batcher_asks_for_invariant_products(void **state) {
    (void)state;
    char dir[1024];
    struct jev_model *model = NULL;
    assert_int_equal(tiny_model_open("batch-invariant", 2, dir, sizeof dir, &model), 0);
    static struct jev_ops ops;
    ops = jev_cpu_ops;
    ops.name = "recording";
    ops.set_batch_invariant = record_invariant;
    struct jev_pool *pool = NULL;
    struct jev_error err = {0};
    assert_int_equal(jev_pool_init(&pool, 2, &err), JEV_OK);
    struct jev_backend *be = jev_cpu_backend_new(pool);
    assert_non_null(be);
    struct jev_engine_params ep = jev_engine_default_params();
    struct jev_engine *engine = NULL;
    struct jev_decider *d = NULL;
    assert_int_equal(jev_engine_init_on(model, &ep, &ops, be, &engine), JEV_OK);
    assert_int_equal(jev_decider_open(model, engine, &d), JEV_OK);
    invariant_calls = 0;
    struct jev_request r;
    request_with_image(0, &r);
    struct jev_decide_result alone;
    struct jev_decide_params p = jev_decide_default_params();
    assert_int_equal(jev_decide_run(d, &r, &p, &alone, &err), JEV_OK);
    assert_int_equal(invariant_calls, 0);
    struct jev_batch_params bp = {.max_running = 1, .prep_threads = 1};
    struct jev_batcher *b = NULL;
    assert_int_equal(jev_batcher_new(d, &bp, &b, &err), JEV_OK);
    assert_int_equal(invariant_calls, 1);
    assert_true(invariant_on);
    jev_batcher_free(b);
    jev_decide_result_free(&alone);
    jev_request_free(&r);
    jev_decider_close(d);
    jev_engine_free(engine);
    jev_cpu_backend_free(be);
    jev_pool_free(pool);
    jev_model_free(model);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_images_fill_the_next_forward),
                                       cmocka_unit_test(test_batcher_asks_for_invariant_products)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
