/*
 * test-cli-setup.c - the model owns the tokenizer, a planner sizes an engine
 * before it exists, and the CLI's set-up (common/cli-setup.h) opens one
 * engine per command with the planned sizes.
 *
 * - The tokenizer: the model's, loaded on first use (once, whichever
 *   thread asks first) and borrowed by every decider of every engine (one
 *   object); jev_decider_params.tokenizer still overrides it with a file of
 *   the caller's; a model directory without tokenizer.json, or with a broken
 *   one, loads (token ids need none) and its decider names the file.
 * - The planner (jev_decider_planner): no engine, the same plan and the same
 *   inputs dump as a decider over an engine, and it refuses to run.
 * - cli_setup: plan, then one engine of the planned size and one weights
 *   mirror; no second engine, no planning after it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/cli-setup.h" // defines: struct cli_setup, cli_setup_plan, cli_setup_open
#include "decide/pipeline.h"  // defines: jev_decider_planner, jev_decide_plan, jev_decide_dump
#include "text/tokenizer.h"   // defines: jev_tokenizer_encode
#include "tiny-model.h"       // defines: tiny_model_open, tiny_test_dir, tiny_model_write
#include "wire/request.h"     // defines: jev_request_load_workload_file

#define STANDIN ".cache/tokenizer-qwen3/tokenizer.json"

static char g_dir[512];
static struct jev_model *g_model;

static int setup(void **state) {
    (void)state;
    return tiny_model_open("cli-setup", 1, g_dir, sizeof g_dir, &g_model);
}

static int teardown(void **state) {
    (void)state;
    jev_model_free(g_model);
    return 0;
}

/* The workload's first n decisions, about the small PNG instead of the photo (as the bench runner sets
 * its requests' image path; the path is not the request's to free). */
static void workload(int32_t n, struct jev_request *r) {
    struct jev_request_error re = {0};
    if (jev_request_load_workload_file("bench/dog-workload.json", n, r, &re) != JEV_OK)
        fail_msg("workload: %s", re.message);
    r->has_image = true;
    r->image.path = "tests/data/rgb8.png";
}

static struct jev_engine *engine(int32_t max_batch) {
    struct jev_engine_params ep = jev_engine_default_params();
    ep.max_batch = max_batch;
    struct jev_engine *e = NULL;
    if (jev_engine_init(g_model, &ep, &e) != JEV_OK)
        fail_msg("engine: %s", jev_engine_last_error(e));
    return e;
}

static void encode(const struct jev_tokenizer *tok, const char *text, struct jev_tokens *out) {
    struct jev_error err = {0};
    if (jev_tokenizer_encode(tok, text, strlen(text), JEV_TOK_NO_ADDED, out, &err) != JEV_OK)
        fail_msg("encode: %s", err.msg);
}

static void test_model_owns_tokenizer(void **state) {
    (void)state;
    assert_null(g_model->tokenizer); /* not loaded with the weights: on first use */
    struct jev_engine *e1 = engine(4), *e2 = engine(4);
    assert_null(g_model->tokenizer); /* an engine needs none */
    struct jev_decider *d1 = NULL, *d2 = NULL, *d3 = NULL;
    struct jev_error err = {0};
    assert_int_equal(jev_decider_init(g_model, e1, NULL, &d1, &err), JEV_OK);
    assert_non_null(g_model->tokenizer);
    assert_int_equal(jev_decider_init(g_model, e2, NULL, &d2, &err), JEV_OK);
    /* one tokenizer, the model's, for every engine's decider */
    assert_ptr_equal(jev_decider_tokenizer(d1), g_model->tokenizer);
    assert_ptr_equal(jev_decider_tokenizer(d2), g_model->tokenizer);
    /* an override path: the decider's own tokenizer from that file (the same file the synthetic model
     * copied, so the same ids) */
    struct jev_decider_params dp = jev_decider_default_params();
    dp.tokenizer = STANDIN;
    assert_int_equal(jev_decider_init(g_model, e1, &dp, &d3, &err), JEV_OK);
    const struct jev_tokenizer *own = jev_decider_tokenizer(d3);
    assert_non_null(own);
    assert_true(own != g_model->tokenizer);
    struct jev_tokens a = {0}, b = {0};
    encode(own, "Is the dog on the grass?", &a);
    encode(g_model->tokenizer, "Is the dog on the grass?", &b);
    assert_int_equal(a.n, b.n);
    assert_memory_equal(a.ids, b.ids, a.n * sizeof a.ids[0]);
    jev_tokens_free(&a);
    jev_tokens_free(&b);
    jev_decider_free(d3);
    dp.tokenizer = "tests/data/no-such-tokenizer.json";
    assert_int_equal(jev_decider_init(g_model, e1, &dp, &d3, &err), JEV_ERR_IO);
    assert_null(d3);
    assert_non_null(strstr(err.msg, "no-such-tokenizer.json"));
    jev_decider_free(d1);
    jev_decider_free(d2);
    /* the model's tokenizer outlives every decider that borrowed it: still usable here */
    encode(g_model->tokenizer, "yes", &a);
    assert_true(a.n >= 1);
    jev_tokens_free(&a);
    jev_engine_free(e1);
    jev_engine_free(e2);
}

/* Threads asking a fresh model for its tokenizer at once all get the one object (loaded once). */
struct first_use {
    struct jev_model *m;
    const struct jev_tokenizer *got;
    enum jev_status st;
};

static void *ask_tokenizer(void *arg) {
    struct first_use *u = arg;
    struct jev_error err = {0};
    u->st = jev_model_tokenizer(u->m, &u->got, &err);
    return NULL;
}

static void test_tokenizer_first_use_from_threads(void **state) {
    (void)state;
    struct jev_model *m = NULL;
    struct jev_error err = {0};
    assert_int_equal(jev_model_open(g_dir, NULL, &m, &err), JEV_OK);
    enum { N = 4 };
    pthread_t th[N];
    struct first_use u[N];
    for (int i = 0; i < N; i++) {
        u[i] = (struct first_use){m, NULL, JEV_ERR_IO};
        assert_int_equal(pthread_create(&th[i], NULL, ask_tokenizer, &u[i]), 0);
    }
    for (int i = 0; i < N; i++)
        assert_int_equal(pthread_join(th[i], NULL), 0);
    for (int i = 0; i < N; i++) {
        assert_int_equal(u[i].st, JEV_OK);
        assert_non_null(u[i].got);
        assert_ptr_equal(u[i].got, u[0].got);
    }
    assert_ptr_equal(m->tokenizer, u[0].got);
    jev_model_free(m);
}

/* A model directory without tokenizer.json, or with a broken one, loads (token ids need none); a
 * decider or a planner over it fails naming the file. */
static void test_tokenizer_file_missing_or_broken(void **state) {
    (void)state;
    char dir[512], path[600];
    tiny_test_dir("cli-setup", "tiny-notok", dir, sizeof dir);
    assert_int_equal(tiny_model_write(dir, JEV_SYNTH_HF), 0);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    assert_int_equal(unlink(path), 0);
    struct jev_model *m = NULL;
    struct jev_error err = {0};
    assert_int_equal(jev_model_open(dir, NULL, &m, &err), JEV_OK);
    struct jev_decider *d = NULL;
    assert_int_equal(jev_decider_planner(m, NULL, &d, &err), JEV_ERR_IO);
    assert_null(d);
    assert_non_null(strstr(err.msg, "tokenizer.json"));
    assert_null(m->tokenizer);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"model\": 3}", f);
    fclose(f);
    memset(&err, 0, sizeof err);
    assert_int_not_equal(jev_decider_planner(m, NULL, &d, &err), JEV_OK); /* the next use tries again */
    assert_null(d);
    if (!strstr(err.msg, "tokenizer.json"))
        fail_msg("the message does not name the file: %s", err.msg);
    jev_model_free(m);
}

/* The planner plans what a decider over an engine plans, dumps the same inputs, and runs nothing. */
static void test_planner(void **state) {
    (void)state;
    struct jev_request r;
    workload(8, &r);
    struct jev_decider *planner = NULL, *d = NULL;
    struct jev_error err = {0};
    int64_t engines0 = 0;
    jev_engine_counts(&engines0, NULL);
    assert_int_equal(jev_decider_planner(g_model, NULL, &planner, &err), JEV_OK);
    assert_true(jev_decider_has_vision(planner));
    assert_null(jev_decider_engine(planner));
    int64_t engines1 = 0;
    jev_engine_counts(&engines1, NULL);
    assert_int_equal(engines1, engines0); /* planning made no engine */
    struct jev_engine *e = engine(4);
    assert_int_equal(jev_decider_init(g_model, e, NULL, &d, &err), JEV_OK);
    const enum jev_decide_path paths[3] = {JEV_DECIDE_SHARED, JEV_DECIDE_INDEPENDENT, JEV_DECIDE_GENERATE};
    for (int k = 0; k < 3; k++)
        for (int text = 0; text < 2; text++) {
            struct jev_decide_params p = jev_decide_default_params();
            p.path = paths[k];
            p.scoring = text ? JEV_SCORING_TEXT : JEV_SCORING_LABEL;
            p.batch = 0;
            struct jev_engine_params n1 = {0}, n2 = {0};
            assert_int_equal(jev_decide_plan(planner, &r, &p, &n1, &err), JEV_OK);
            assert_int_equal(jev_decide_plan(d, &r, &p, &n2, &err), JEV_OK);
            int32_t b1 = n1.max_batch, s1 = n1.max_states, t1 = n1.max_tokens;
            assert_int_equal(b1, n2.max_batch);
            assert_int_equal(s1, n2.max_states);
            assert_int_equal(t1, n2.max_tokens);
            assert_int_equal(n1.kv_tokens, n2.kv_tokens);
            /* the K/V room: at least the longest sequence's pages, in whole pages */
            assert_true(n1.kv_tokens >= t1 && n1.kv_tokens % JEV_KV_PAGE == 0);
            /* label scoring on the shared path: the prefix alone holds a DeltaNet state */
            if (k == 0 && !text)
                assert_int_equal(s1, 1);
            else
                assert_true(s1 >= 1 && s1 <= b1 + 1);
            assert_true(t1 > 70); /* the image's tokens are in the prompt */
        }
    json_t *o1 = NULL, *o2 = NULL;
    assert_int_equal(jev_decide_dump(planner, &r, NULL, &o1, &err), JEV_OK);
    assert_int_equal(jev_decide_dump(d, &r, NULL, &o2, &err), JEV_OK);
    assert_true(json_equal(o1, o2)); /* the pixels too: resized on one thread or over the pool alike */
    json_decref(o1);
    json_decref(o2);
    struct jev_decide_result res;
    assert_int_equal(jev_decide_run(planner, &r, NULL, &res, &err), JEV_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "no engine"));
    jev_decider_free(planner);
    jev_decider_free(d);
    jev_engine_free(e);
    jev_request_free(&r);
}

/* A planned engine holds the sequences its requests need, not the library's default 64 (each is
 * device memory on CUDA): the first plan sets max_batch, later plans only grow it; max_tokens keeps
 * its default as the floor. */
static void test_plan_sizes(void **state) {
    (void)state;
    struct jev_request r3, r9;
    workload(3, &r3);
    workload(9, &r9);
    struct jev_decide_params p = jev_decide_default_params(); /* shared, batches of 4 */
    struct cli_setup cs;
    cli_setup_init(&cs, "test");
    cs.dir = g_dir;
    cs.threads = 1;
    struct jev_error err = {0};
    assert_int_equal(cli_setup_load(&cs, &err), JEV_OK);
    assert_int_equal(cs.ep.max_batch, 64);
    assert_int_equal(cli_setup_plan(&cs, &r3, &p, &err), JEV_OK);
    assert_int_equal(cs.ep.max_batch, 3); /* a prefix and 3 forks alive at once */
    assert_int_equal(cli_setup_plan(&cs, &r9, &p, &err), JEV_OK);
    assert_int_equal(cs.ep.max_batch, 4); /* batches of 4 forks */
    assert_int_equal(cli_setup_plan(&cs, &r3, &p, &err), JEV_OK);
    assert_int_equal(cs.ep.max_batch, 4); /* never shrinks after the first plan */
    assert_int_equal(cs.ep.max_tokens, 8192);
    assert_int_equal(cli_setup_open(&cs, true, &err), JEV_OK);
    assert_int_equal(cs.engine->params.max_batch, 4);
    /* and the engine answers both requests */
    struct jev_decide_result res;
    assert_int_equal(jev_decide_run(cs.decider, &r9, &p, &res, &err), JEV_OK);
    assert_int_equal(res.answers.n, 9);
    jev_decide_result_free(&res);
    cli_setup_free(&cs);
    jev_request_free(&r3);
    jev_request_free(&r9);
}

/* The CLI's set-up: a request larger than the default engine is planned first, then one engine of that
 * size is built; nothing builds a second. */
static void test_one_engine(void **state) {
    (void)state;
    struct jev_request r;
    workload(100, &r);
    struct jev_decide_params p = jev_decide_default_params();
    p.batch = 0; /* all 100 questions in one forward: 100 forks */
    int64_t e0 = 0, m0 = 0, e1 = 0, m1 = 0;
    jev_engine_counts(&e0, &m0);
    struct cli_setup cs;
    cli_setup_init(&cs, "test");
    const char *args[] = {"--model", g_dir, "--threads", "1", "--backend", "cpu"};
    for (int i = 0; i < 6; i += 2)
        assert_int_equal(cli_setup_arg(&cs, args[i], args[i + 1]), CLI_ARG_VALUE);
    assert_int_equal(cli_setup_arg(&cs, "--threads", "many"), CLI_ARG_BAD);
    assert_int_equal(cli_setup_arg(&cs, "--model", NULL), CLI_ARG_MISSING);
    assert_int_equal(cli_setup_arg(&cs, "--json", NULL), CLI_ARG_NOT_MINE);
    /* --step-tokens: the engine's slice, 16..65536; unset it stays 0 (the backend's: the CPU's 512) */
    assert_int_equal(cs.ep.prefill_chunk, 0);
    assert_int_equal(cli_setup_arg(&cs, "--step-tokens", "8"), CLI_ARG_BAD);
    assert_int_equal(cli_setup_arg(&cs, "--step-tokens", "96"), CLI_ARG_VALUE);
    assert_int_equal(cs.ep.prefill_chunk, 96);
    struct jev_error err = {0};
    assert_int_equal(cli_setup_load(&cs, &err), JEV_OK);
    assert_int_equal(cli_setup_plan(&cs, &r, &p, &err), JEV_OK);
    assert_non_null(cs.planner);
    jev_engine_counts(&e1, &m1);
    assert_int_equal(e1 - e0, 0);
    assert_int_equal(cs.ep.max_batch, 100);
    assert_int_equal(cs.ep.max_tokens, 8192); /* the default: the plan needs fewer */
    assert_int_equal(cli_setup_open(&cs, true, &err), JEV_OK);
    assert_null(cs.planner);
    assert_int_equal(cs.engine->params.max_batch, 100);
    assert_int_equal(cs.engine->params.prefill_chunk, 96);
    assert_true(cs.planned);
    assert_ptr_equal(jev_decider_engine(cs.decider), cs.engine);
    assert_ptr_equal(jev_decider_tokenizer(cs.decider), cs.model->tokenizer);
    struct jev_decide_result res;
    assert_int_equal(jev_decide_run(cs.decider, &r, &p, &res, &err), JEV_OK);
    assert_int_equal(res.answers.n, 100);
    jev_decide_result_free(&res);
    /* one engine per command */
    assert_int_equal(cli_setup_open(&cs, true, &err), JEV_ERR_INVALID_ARG);
    assert_int_equal(cli_setup_plan(&cs, &r, &p, &err), JEV_ERR_INVALID_ARG);
    jev_engine_counts(&e1, &m1);
    assert_int_equal(e1 - e0, 1);
    assert_int_equal(m1 - m0, 1);
    cli_setup_free(&cs);
    jev_request_free(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_owns_tokenizer),
        cmocka_unit_test(test_tokenizer_first_use_from_threads),
        cmocka_unit_test(test_tokenizer_file_missing_or_broken),
        cmocka_unit_test(test_planner),
        cmocka_unit_test(test_plan_sizes),
        cmocka_unit_test(test_one_engine),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
