/*
 * test-prefix-reuse.c - the decider's kept prefix (decide params reuse_prefix, jev_decide_json's
 * default): a request whose prefix (chat frame, image, state) and image bytes equal the last
 * one's forks from the kept state and runs neither the image decode, the tower nor the prefill.
 *
 * Checked on the tiny synthetic model with two PNG images given as bytes (as a request's data
 * URL carries them):
 * - the repeat reuses (counters: no vision forward, only the suffix forwards) and its answers are
 *   bit-identical to the first run's and to a run without reuse;
 * - a different state with the same image reuses the image's tower output (no decode, no tower,
 *   the prefill runs); a different image of the same size with the same state reuses nothing
 *   (only the bytes' digest tells them apart); a text-only request reuses its prefix too;
 * - an image given by path is never kept (its bytes are not digested);
 * - the independent path, reuse turned off, and jev_verify_run give the kept sequence back;
 * - through jev_decide_json (reuse on by default) the same body answers the same bytes, usage
 *   included.
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

#include "decide/pipeline-int.h" // defines: dc_kept_count, DC_KEPT_MAX
#include "decide/pipeline.h"     // defines: jev_decide_run, jev_decider_init
#include "base/read-file.h"      // defines: jev_read_file
#include "model/engine.h"        // defines: struct jev_engine (its state's live count)
#include "tiny-model.h"          // defines: tiny_decider_open
#include "wire/request.h"        // defines: jev_request_parse_*, struct jev_request_error

static struct {
    struct jev_model *model;
    struct jev_engine *engine;
    struct jev_decider *d;
    char *png[2]; /* two different images */
    size_t png_n[2];
} F;

static const char *S1 = "{\"state\":{\"note\":\"a red door\"},\"questions\":{"
                        "\"door\":{\"type\":\"noul\",\"instructions\":\"Is the door red?\"},"
                        "\"color\":{\"type\":\"choice\",\"instructions\":\"Which color?\","
                        "\"criteria\":{\"red\":null,\"blue\":\"like the sky\",\"green\":null}},"
                        "\"size\":{\"type\":\"score\",\"instructions\":\"How big?\",\"criteria\":[\"small\","
                        "\"large\"]},\"open\":{\"type\":\"noul\",\"instructions\":\"Is it open?\"},"
                        "\"wood\":{\"type\":\"noul\",\"instructions\":\"Is it wooden?\"}}}";
static const char *S2 = "{\"state\":{\"note\":\"a blue door\"},\"questions\":{"
                        "\"door\":{\"type\":\"noul\",\"instructions\":\"Is the door red?\"}}}";

static int setup(void **state) {
    (void)state;
    char dir[1024];
    struct jev_engine_params ep = jev_engine_default_params();
    ep.max_batch = 8;
    ep.max_tokens = 2048;
    if (tiny_decider_open("prefix-reuse", 2, &ep, dir, sizeof dir, &F.model, &F.engine, &F.d) != 0)
        return -1;
    struct jev_error err = {0};
    const char *files[2] = {"tests/data/rgb8.png", "tests/data/grey8.png"}; /* same size: only the bytes tell */
    for (int i = 0; i < 2; i++)
        if (jev_read_file(files[i], 1 << 24, &F.png[i], &F.png_n[i], &err) != JEV_OK) {
            fprintf(stderr, "%s\n", err.msg);
            return -1;
        }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    jev_decider_close(F.d);
    jev_engine_free(F.engine);
    jev_model_free(F.model);
    free(F.png[0]);
    free(F.png[1]);
    return 0;
}

/* A request from a body, with image `img` (0 or 1) as bytes, -1 none, -2 the path of image 0. */
static void request(const char *body, int img, struct jev_request *r) {
    struct jev_request_error rerr = {0};
    if (jev_request_parse_systemone(body, strlen(body), NULL, r, &rerr) != JEV_OK)
        fail_msg("parse: %s", rerr.message);
    if (img == -2 && jev_request_set_image_path(r, "tests/data/rgb8.png", &rerr) != JEV_OK)
        fail_msg("image: %s", rerr.message);
    if (img >= 0) {
        r->has_image = true;
        r->image.format = JEV_IMAGE_PNG;
        r->image.bytes = malloc(F.png_n[img]);
        assert_non_null(r->image.bytes);
        memcpy(r->image.bytes, F.png[img], F.png_n[img]);
        r->image.n_bytes = F.png_n[img];
    }
}

static void run(const struct jev_request *r, bool reuse, enum jev_decide_path path, struct jev_decide_result *res) {
    struct jev_decide_params p = jev_decide_default_params();
    p.reuse_prefix = reuse;
    p.path = path;
    p.batch = 2;
    struct jev_error err = {0};
    if (jev_decide_run(F.d, r, &p, res, &err) != JEV_OK)
        fail_msg("run: %s", err.msg);
}

/* Every probability bit-identical. */
static void same_answers(const struct jev_decide_result *a, const struct jev_decide_result *b) {
    assert_int_equal(a->answers.n, b->answers.n);
    for (int32_t i = 0; i < a->answers.n; i++) {
        assert_int_equal(a->answers.items[i].n, b->answers.items[i].n);
        assert_memory_equal(a->answers.items[i].probs, b->answers.items[i].probs,
                            (size_t)a->answers.items[i].n * sizeof(double));
    }
}

enum reuse { NONE, IMAGE, PREFIX }; /* what a run reused */

/* One run with reuse: what it reused (from its counters, checked), its answers against a run
 * without reuse on a second decider. */
static enum reuse reused(const char *body, int img) {
    struct jev_request r;
    request(body, img, &r);
    struct jev_decide_result kept, fresh;
    run(&r, true, JEV_DECIDE_SHARED, &kept);
    int32_t batches = (r.n_questions + 1) / 2;
    enum reuse what = NONE;
    if (kept.stats.prefix_reused) {
        what = PREFIX;
        assert_int_equal(kept.stats.vision_forwards, 0);
        assert_int_equal(kept.stats.lm_forwards, batches);
        assert_true(kept.stats.prefill_ms == 0.0 && kept.stats.vision_ms == 0.0);
    } else {
        assert_int_equal(kept.stats.lm_forwards, 1 + batches);
        if (r.has_image && kept.stats.vision_forwards == 0)
            what = IMAGE;
        else
            assert_int_equal(kept.stats.vision_forwards, r.has_image ? 1 : 0);
    }
    struct jev_decider *other = NULL;
    struct jev_error err = {0};
    assert_int_equal(jev_decider_init(F.model, F.engine, NULL, &other, &err), JEV_OK);
    struct jev_decide_params p = jev_decide_default_params();
    p.batch = 2;
    assert_int_equal(jev_decide_run(other, &r, &p, &fresh, &err), JEV_OK);
    assert_false(fresh.stats.prefix_reused);
    assert_int_equal(fresh.stats.vision_forwards, r.has_image ? 1 : 0);
    same_answers(&kept, &fresh);
    assert_int_equal(kept.usage.input_tokens, fresh.usage.input_tokens);
    jev_decider_free(other);
    jev_decide_result_free(&kept);
    jev_decide_result_free(&fresh);
    jev_request_free(&r);
    return what;
}

/* A state of its own for number k (the same questions as S2). */
static const char *state_k(int k, char *buf, size_t size) {
    snprintf(buf, size,
             "{\"state\":{\"note\":\"door number %d\"},\"questions\":{"
             "\"door\":{\"type\":\"noul\",\"instructions\":\"Is the door red?\"}}}",
             k);
    return buf;
}

static void test_hits_and_misses(void **state) {
    (void)state;
    assert_int_equal(reused(S1, 0), NONE);   /* nothing kept yet */
    assert_int_equal(reused(S1, 0), PREFIX); /* the same: kept */
    assert_int_equal(reused(S2, 0), IMAGE);  /* same image, another state: the tower's output is kept */
    assert_int_equal(reused(S2, 1), NONE);   /* another image (same size), same state: only the bytes tell */
    assert_int_equal(reused(S1, 1), IMAGE);
    /* four prefixes kept now (S1/0, S2/0, S2/1, S1/1): each of them again, in another order */
    assert_int_equal(reused(S2, 0), PREFIX);
    assert_int_equal(reused(S1, 1), PREFIX);
    assert_int_equal(reused(S1, 0), PREFIX);
    assert_int_equal(reused(S2, 1), PREFIX);
    assert_int_equal(dc_kept_count(F.d), DC_KEPT_MAX);
    /* a fifth (text only) replaces the least recently used, S2/0 */
    assert_int_equal(reused(S1, -1), NONE);
    assert_int_equal(reused(S1, -1), PREFIX);
    assert_int_equal(reused(S2, 0), IMAGE);  /* back, replacing the next least recent, S1/1 */
    assert_int_equal(reused(S1, 0), PREFIX); /* still kept */
    assert_int_equal(reused(S1, 1), IMAGE);
    assert_int_equal(reused(S1, -2), NONE); /* an image path: never kept */
    assert_int_equal(reused(S1, -2), NONE);
    assert_int_equal(F.engine->state.n_live, dc_kept_count(F.d));
}

static void test_kept_sequence_given_back(void **state) {
    (void)state;
    const struct jev_state *st = &F.engine->state;
    assert_true(dc_kept_count(F.d) > 0);
    struct jev_request r;
    request(S2, 1, &r);
    struct jev_decide_result res;
    run(&r, true, JEV_DECIDE_INDEPENDENT, &res); /* another path: every kept slot goes back */
    jev_decide_result_free(&res);
    assert_int_equal(st->n_live, 0);
    run(&r, true, JEV_DECIDE_SHARED, &res);
    assert_false(res.stats.prefix_reused);
    jev_decide_result_free(&res);
    assert_int_equal(st->n_live, 1);
    run(&r, false, JEV_DECIDE_SHARED, &res); /* reuse off: the kept ones go back */
    assert_false(res.stats.prefix_reused);
    jev_decide_result_free(&res);
    assert_int_equal(st->n_live, 0);
    jev_request_free(&r);

    /* slots: four kept prefixes, then a request whose one batch needs 7 of the engine's 9 slots with a
     * DeltaNet state (6 questions at once + its prefix; max_batch 8, so max_states 9): the two least
     * recent kept ones make room, the others stay, and its own prefix is kept. Text scoring, whose
     * forks keep a state (label scoring's light forks take no such slot) */
    char buf[512];
    for (int k = 0; k < DC_KEPT_MAX; k++)
        assert_int_equal(reused(state_k(k, buf, sizeof buf), -1), NONE);
    assert_int_equal(st->n_live, DC_KEPT_MAX);
    const char *six =
        "{\"state\":\"six questions\",\"questions\":{"
        "\"a\":{\"type\":\"noul\",\"instructions\":\"a?\"},\"b\":{\"type\":\"noul\",\"instructions\":\"b?\"},"
        "\"c\":{\"type\":\"noul\",\"instructions\":\"c?\"},\"d\":{\"type\":\"noul\",\"instructions\":\"d?\"},"
        "\"e\":{\"type\":\"noul\",\"instructions\":\"e?\"},\"f\":{\"type\":\"noul\",\"instructions\":\"f?\"}}}";
    request(six, -1, &r);
    struct jev_decide_params p = jev_decide_default_params();
    p.reuse_prefix = true;
    p.batch = 0;
    p.scoring = JEV_SCORING_TEXT;
    struct jev_error err = {0};
    assert_int_equal(jev_decide_run(F.d, &r, &p, &res, &err), JEV_OK);
    jev_decide_result_free(&res);
    jev_request_free(&r);
    assert_int_equal(dc_kept_count(F.d), 3);
    assert_int_equal(reused(state_k(3, buf, sizeof buf), -1), PREFIX); /* the most recent two stayed */
    assert_int_equal(reused(state_k(2, buf, sizeof buf), -1), PREFIX);
    assert_int_equal(reused(state_k(0, buf, sizeof buf), -1), NONE);
}

/* K/V pages: an engine whose pool holds about two prefixes. Kept prefixes fill it; the request that
 * finds no page gets them back and runs once more (jev_decide_run), and every answer is a fresh one's. */
static void test_pages_given_back(void **state) {
    (void)state;
    char buf[512];
    struct jev_request r;
    request(state_k(0, buf, sizeof buf), -1, &r);
    struct jev_decide_result res;
    run(&r, false, JEV_DECIDE_SHARED, &res);
    int32_t need = res.stats.prompt_tokens;
    jev_decide_result_free(&res);
    jev_request_free(&r);
    struct jev_engine_params ep = jev_engine_default_params();
    /* a pool of 2 x max_tokens tokens and a page of slack per slot (4 with a state, 1 light: one question
     * at a time): 8 pages, room for two or three prefixes of 2 pages beside a request's own and its
     * question's, not five; the slots would hold three kept, so the pages are what binds */
    ep.max_batch = 1;
    ep.max_states = 4;
    ep.max_tokens = need;
    struct jev_engine *small = NULL;
    struct jev_decider *d = NULL;
    struct jev_error err = {0};
    assert_int_equal(jev_engine_init(F.model, &ep, &small), JEV_OK);
    assert_int_equal(jev_decider_init(F.model, small, NULL, &d, &err), JEV_OK);
    int32_t most = 0;
    for (int k = 0; k < 6; k++) {
        request(state_k(k, buf, sizeof buf), -1, &r);
        struct jev_decide_params p = jev_decide_default_params();
        p.reuse_prefix = true;
        struct jev_decide_result got, want;
        enum jev_status s = jev_decide_run(d, &r, &p, &got, &err);
        if (s != JEV_OK)
            fail_msg("request %d: %s", k, err.msg);
        int32_t kept = dc_kept_count(d);
        most = kept > most ? kept : most;
        p.reuse_prefix = false;
        struct jev_decider *other = NULL;
        assert_int_equal(jev_decider_init(F.model, F.engine, NULL, &other, &err), JEV_OK);
        assert_int_equal(jev_decide_run(other, &r, &p, &want, &err), JEV_OK);
        same_answers(&got, &want);
        jev_decider_free(other);
        jev_decide_result_free(&got);
        jev_decide_result_free(&want);
        jev_request_free(&r);
    }
    printf("  pool of %d tokens, prompts of %d tokens: at most %d prefixes kept at once\n", 2 * ep.max_tokens, need,
           most);
    assert_true(most >= 1 && most < DC_KEPT_MAX);
    jev_decider_free(d);
    jev_engine_free(small);
}

/* State slots: text scoring forks each question with a DeltaNet state (and its options' branches).
 * An engine with few state slots runs a request's questions in groups that fit them, in more
 * forwards, with the answers of an engine that takes them all at once; one whose slots cannot hold a
 * single question's forks refuses the request naming max_states. */
static void test_states_in_groups(void **state) {
    (void)state;
    struct jev_request r;
    request(S1, -1, &r);
    struct jev_decide_params p = jev_decide_default_params();
    p.scoring = JEV_SCORING_TEXT;
    p.batch = 0; /* all at once where the slots allow */
    p.reuse_prefix = false;
    struct jev_error err = {0};
    int32_t fewest = 0, forwards[2] = {0, 0};
    struct jev_decide_result res[2];
    for (int e = 0; e < 2; e++) {
        struct jev_engine_params ep = jev_engine_default_params();
        ep.max_batch = 8;
        ep.max_tokens = 2048;
        ep.max_states = e == 0 ? 64 : 0; /* the second: the fewest that answer, found below */
        struct jev_engine *eng = NULL;
        struct jev_decider *d = NULL;
        if (e == 1) { /* the fewest slots that answer at all: every smaller engine refuses, naming the limit */
            for (int32_t n = 1; n <= 64 && !fewest; n++) {
                ep.max_states = n;
                assert_int_equal(jev_engine_init(F.model, &ep, &eng), JEV_OK);
                assert_int_equal(jev_decider_init(F.model, eng, NULL, &d, &err), JEV_OK);
                enum jev_status st = jev_decide_run(d, &r, &p, &res[1], &err);
                if (st == JEV_OK) {
                    fewest = n;
                    break;
                }
                assert_int_equal(st, JEV_ERR_CONTEXT_FULL);
                assert_non_null(strstr(err.msg, "max_states"));
                jev_error_clear(&err);
                jev_decider_free(d);
                jev_engine_free(eng);
            }
            assert_true(fewest > 0);
        } else {
            assert_int_equal(jev_engine_init(F.model, &ep, &eng), JEV_OK);
            assert_int_equal(jev_decider_init(F.model, eng, NULL, &d, &err), JEV_OK);
            if (jev_decide_run(d, &r, &p, &res[0], &err) != JEV_OK)
                fail_msg("64 state slots: %s", err.msg);
        }
        forwards[e] = res[e].stats.lm_forwards;
        jev_decider_free(d);
        jev_engine_free(eng);
    }
    printf("  text scoring, 5 questions: %d forwards with 64 state slots, %d with %d (the fewest that answer)\n",
           forwards[0], forwards[1], fewest);
    assert_true(forwards[1] > forwards[0]); /* it did run in smaller groups */
    /* the server's company rule (docs/server.md): within 1e-6, the same choice (a group of one or two
     * tokens takes the few-token products, which sum in another order) */
    assert_int_equal(res[0].answers.n, res[1].answers.n);
    for (int32_t i = 0; i < res[0].answers.n; i++) {
        const struct jev_answer *a = &res[0].answers.items[i], *b = &res[1].answers.items[i];
        assert_int_equal(a->n, b->n);
        int32_t arg_a = 0, arg_b = 0;
        for (int32_t k = 0; k < a->n; k++) {
            if (fabs(a->probs[k] - b->probs[k]) > 1e-6)
                fail_msg("question %d option %d: %.9f in groups against %.9f at once", i, k, b->probs[k], a->probs[k]);
            arg_a = a->probs[k] > a->probs[arg_a] ? k : arg_a;
            arg_b = b->probs[k] > b->probs[arg_b] ? k : arg_b;
        }
        assert_int_equal(arg_a, arg_b);
    }
    jev_decide_result_free(&res[0]);
    jev_decide_result_free(&res[1]);
    jev_request_free(&r);
}

/* The public entry point keeps prefixes by default; the same body answers the same bytes. */
static void test_public_api(void **state) {
    (void)state;
    const struct jev_state *st = &F.engine->state;
    char *a = NULL, *b = NULL;
    int32_t ha = 0, hb = 0;
    jev_decide_json(F.d, S1, strlen(S1), JEV_REQUEST_SYSTEMONE, &a, &ha);
    assert_true(st->n_live >= 1);
    jev_decide_json(F.d, S1, strlen(S1), JEV_REQUEST_SYSTEMONE, &b, &hb);
    assert_int_equal(ha, 200);
    assert_int_equal(hb, 200);
    assert_string_equal(a, b);
    jev_free(a);
    jev_free(b);
    jev_decider_set_prefix_reuse(F.d, false);
    assert_int_equal(st->n_live, 0);
    jev_decide_json(F.d, S1, strlen(S1), JEV_REQUEST_SYSTEMONE, &a, &ha);
    assert_int_equal(st->n_live, 0);
    jev_free(a);
    jev_decider_set_prefix_reuse(F.d, true);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hits_and_misses),  cmocka_unit_test(test_kept_sequence_given_back),
        cmocka_unit_test(test_pages_given_back), cmocka_unit_test(test_states_in_groups),
        cmocka_unit_test(test_public_api),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
