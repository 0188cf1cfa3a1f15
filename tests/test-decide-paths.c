/*
 * test-decide-paths.c - the decision pipeline's exactness on a tiny
 * synthetic model (configs/tiny.json, synthesized here into $JEV_TEST_DIR):
 *
 *   - shared vs independent: every probability within 1e-5, argmax equal,
 *     for label scoring and text scoring (sum and mean), with an image;
 *   - the answers do not depend on the batch size (1, 3, all) nor on the
 *     order and company of the other questions;
 *   - generate_json runs, keeps its raw output, and its validity is what
 *     decide's validator says of that output;
 *   - the counters are the numbers of forwards the paths must run,
 *     computed here from the request (and, for text mode, from the
 *     candidates' token ids);
 *   - invalid requests come back through jev_decide_body with exactly the
 *     parser's refusal, and failures of the run itself are mapped;
 *   - jev_verify_run: the trie's log-probabilities equal plain full
 *     forwards' (per token, within 1e-5).
 * The two sides of each comparison are different computations (one prefix
 * prefill + forked suffixes vs one full forward; batched vs single runs), so
 * agreement is not automatic.
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
#include <sys/stat.h>

#include "decide/pipeline.h" // defines: jev_decide_run, jev_decide_body
#include "common/verify.h"   // defines: jev_verify_run
#include "model/engine.h"    // defines: struct jev_engine (its state's live count)
#include "tiny-model.h"      // defines: tiny_model_open
#include "wire/request.h"    // defines: jev_request_parse_*, struct jev_request_error
#include "wire/response.h"   // defines: jev_response_*
#include "wire/route.h"      // defines: jev_decide_body

/* ---- fixture ---- */

struct fx {
    struct jev_model *model;   /* the tiny model */
    struct jev_engine *engine; /* max_batch 16 */
    struct jev_decider *d;     /* over engine */
    bool quick;                /* JEV_TEST_QUICK: fewer cases */
};

static struct fx F;

static const char *REQ =
    "{\"state\":{\"order\":4411,\"message\":\"I was charged twice for my order.\"},\"questions\":{"
    "\"is_refund\":{\"type\":\"noul\",\"instructions\":\"Is the customer asking for a refund?\","
    "\"criteria\":{\"true\":\"asks for money back\",\"false\":\"anything else\"}},"
    "\"team\":{\"type\":\"choice\",\"instructions\":\"Which team should handle this?\",\"criteria\":{"
    "\"billing\":\"payments and refunds\",\"shipping\":null,\"technical\":null,\"New York office\":null,"
    "\"New Delhi office\":null}},"
    "\"frustration\":{\"type\":\"score\",\"instructions\":\"How frustrated is the customer?\","
    "\"criteria\":[\"calm\",\"mildly annoyed\",\"angry\"]},"
    "\"lang\":{\"type\":\"choice\",\"instructions\":\"Which language is the message in?\",\"criteria\":{"
    "\"English\":null,\"\xe4\xb8\xad\xe6\x96\x87\":null,\"\xe4\xb8\xad\xe6\x96\x87\xe7\xb9\x81\xe9\xab\x94\":null}},"
    "\"urgent\":{\"type\":\"noul\",\"instructions\":\"Is it urgent?\"}}}";

/* The same questions in another order, and one of them alone. */
static const char *REQ_REVERSED =
    "{\"state\":{\"order\":4411,\"message\":\"I was charged twice for my order.\"},\"questions\":{"
    "\"urgent\":{\"type\":\"noul\",\"instructions\":\"Is it urgent?\"},"
    "\"lang\":{\"type\":\"choice\",\"instructions\":\"Which language is the message in?\",\"criteria\":{"
    "\"English\":null,\"\xe4\xb8\xad\xe6\x96\x87\":null,\"\xe4\xb8\xad\xe6\x96\x87\xe7\xb9\x81\xe9\xab\x94\":null}},"
    "\"frustration\":{\"type\":\"score\",\"instructions\":\"How frustrated is the customer?\","
    "\"criteria\":[\"calm\",\"mildly annoyed\",\"angry\"]},"
    "\"team\":{\"type\":\"choice\",\"instructions\":\"Which team should handle this?\",\"criteria\":{"
    "\"billing\":\"payments and refunds\",\"shipping\":null,\"technical\":null,\"New York office\":null,"
    "\"New Delhi office\":null}},"
    "\"is_refund\":{\"type\":\"noul\",\"instructions\":\"Is the customer asking for a refund?\","
    "\"criteria\":{\"true\":\"asks for money back\",\"false\":\"anything else\"}}}}";

static const char *REQ_ALONE =
    "{\"state\":{\"order\":4411,\"message\":\"I was charged twice for my order.\"},\"questions\":{"
    "\"team\":{\"type\":\"choice\",\"instructions\":\"Which team should handle this?\",\"criteria\":{"
    "\"billing\":\"payments and refunds\",\"shipping\":null,\"technical\":null,\"New York office\":null,"
    "\"New Delhi office\":null}}}}";

static int setup(void **state) {
    (void)state;
    char dir[1024];
    if (tiny_model_open("decide-paths", 2, dir, sizeof dir, &F.model) != 0)
        return -1;
    struct jev_error err = {0};
    struct jev_engine_params ep = jev_engine_default_params();
    ep.max_batch = 16;
    ep.max_tokens = 2048;
    if (jev_engine_init(F.model, &ep, &F.engine) != JEV_OK) {
        fprintf(stderr, "engine: %s\n", jev_engine_last_error(F.engine));
        return -1;
    }
    if (jev_decider_init(F.model, F.engine, NULL, &F.d, &err) != JEV_OK) {
        fprintf(stderr, "decider: %s\n", err.msg);
        return -1;
    }
    F.quick = getenv("JEV_TEST_QUICK") != NULL;
    return 0;
}

static int teardown(void **state) {
    (void)state;
    jev_decider_free(F.d);
    jev_engine_free(F.engine);
    jev_model_free(F.model);
    return 0;
}

/* ---- helpers ---- */

static void parse(const char *body, bool image, struct jev_request *r) {
    struct jev_request_error rerr = {0};
    if (jev_request_parse_systemone(body, strlen(body), NULL, r, &rerr) != JEV_OK)
        fail_msg("parse: %s", rerr.message);
    if (image && jev_request_set_image_path(r, "tests/data/rgb8.png", &rerr) != JEV_OK)
        fail_msg("image: %s", rerr.message);
}

static void run(const struct jev_request *r, enum jev_decide_path path, enum jev_decide_scoring sc,
                enum jev_trie_norm norm, int32_t batch, struct jev_decide_result *res) {
    struct jev_decide_params p = jev_decide_default_params();
    p.path = path;
    p.scoring = sc;
    p.norm = norm;
    p.batch = batch;
    struct jev_error err = {0};
    if (jev_decide_run(F.d, r, &p, res, &err) != JEV_OK)
        fail_msg("%s / %s: %s", jev_decide_path_name(path), jev_decide_scoring_name(sc), err.msg);
}

/* Largest |pa - pb| over questions matched by id; *argmax_ok = every winner equal. */
static double compare(const struct jev_request *ra, const struct jev_decide_result *a, const struct jev_request *rb,
                      const struct jev_decide_result *b, bool *argmax_ok) {
    double m = 0.0;
    *argmax_ok = true;
    for (int32_t i = 0; i < ra->n_questions; i++) {
        int32_t j = jev_request_find(rb, ra->questions[i].id);
        if (j < 0)
            continue;
        const struct jev_answer *x = &a->answers.items[i], *y = &b->answers.items[j];
        assert_int_equal(x->n, y->n);
        for (int32_t k = 0; k < x->n; k++)
            m = fmax(m, fabs(x->probs[k] - y->probs[k]));
        *argmax_ok = *argmax_ok && x->winner == y->winner;
    }
    return m;
}

/* Rounds of trie forwards a question's candidates need (score.c's chains, computed from the ids):
 * a chain starts at an interior node whose parent is the root or has two or more interior children. */
static int32_t rounds_of(json_t *cands) {
    /* nodes: distinct prefixes; interior = a prefix that a longer candidate extends */
    size_t n = json_array_size(cands);
    int32_t best = 0;
    for (size_t c = 0; c < n; c++) {
        json_t *ids = json_array_get(cands, c);
        size_t len = json_array_size(ids);
        int32_t starts = 0;
        /* walk the prefixes of candidate c of length d = 1 .. len-1 (the interior nodes on its path) */
        for (size_t d = 1; d < len; d++) {
            /* count interior children of the parent prefix (length d-1): distinct tokens at d-1 among candidates
             * sharing the parent and longer than d */
            int32_t ic = 0;
            int64_t seen[64];
            for (size_t o = 0; o < n; o++) {
                json_t *x = json_array_get(cands, o);
                if (json_array_size(x) <= d)
                    continue;
                bool same = true;
                for (size_t k = 0; k + 1 < d && same; k++)
                    same = json_integer_value(json_array_get(x, k)) == json_integer_value(json_array_get(ids, k));
                if (!same)
                    continue;
                int64_t t = json_integer_value(json_array_get(x, d - 1));
                bool dup = false;
                for (int32_t s = 0; s < ic; s++)
                    dup |= seen[s] == t;
                if (!dup && ic < 64)
                    seen[ic++] = t;
            }
            if (d == 1 || ic >= 2)
                starts++;
        }
        best = starts > best ? starts : best;
    }
    return best;
}

/* ---- shared vs independent ---- */

static void shared_vs_independent(enum jev_decide_scoring sc, enum jev_trie_norm norm) {
    struct jev_request r;
    parse(REQ, true, &r);
    struct jev_decide_result a, b;
    run(&r, JEV_DECIDE_SHARED, sc, norm, 4, &a);
    run(&r, JEV_DECIDE_INDEPENDENT, sc, norm, 4, &b);
    bool ok = false;
    double m = compare(&r, &a, &r, &b, &ok);
    printf("%s scoring%s: shared vs independent max |dp| = %.3g\n", jev_decide_scoring_name(sc),
           sc == JEV_SCORING_TEXT ? (norm == JEV_TRIE_MEAN ? " (mean)" : " (sum)") : "", m);
    assert_true(m <= 1e-5);
    assert_true(ok);
    /* every answer is a distribution */
    for (int32_t i = 0; i < r.n_questions; i++) {
        double s = 0;
        for (int32_t k = 0; k < a.answers.items[i].n; k++)
            s += a.answers.items[i].probs[k];
        assert_true(fabs(s - 1.0) < 1e-9);
    }
    /* counters: 5 questions in batches of 4 */
    int32_t n = r.n_questions, batches = (n + 3) / 4;
    assert_int_equal(a.stats.vision_forwards, 1);
    assert_int_equal(b.stats.vision_forwards, n);
    if (sc == JEV_SCORING_LABEL) {
        assert_int_equal(a.stats.lm_forwards, 1 + batches);
        assert_int_equal(b.stats.lm_forwards, n);
        assert_int_equal(a.stats.peak_seqs, 1 + 4); /* the prefix and one batch of forks */
        assert_int_equal(b.stats.peak_seqs, 1);
    } else {
        /* the trie rounds: per batch the longest, per question its own (from the candidates' ids) */
        json_t *dump = NULL;
        struct jev_error err = {0};
        struct jev_decide_params p = jev_decide_default_params();
        assert_int_equal(jev_decide_dump(F.d, &r, &p, &dump, &err), JEV_OK);
        json_t *qs = json_object_get(dump, "questions");
        int32_t want_a = 1, want_b = 0;
        for (int32_t b0 = 0; b0 < n; b0 += 4) {
            int32_t worst = 0;
            for (int32_t i = b0; i < b0 + 4 && i < n; i++) {
                int32_t rr =
                    rounds_of(json_object_get(json_object_get(json_array_get(qs, (size_t)i), "text"), "candidates"));
                worst = rr > worst ? rr : worst;
                want_b += 1 + rr;
            }
            want_a += 1 + worst;
        }
        json_decref(dump);
        assert_int_equal(a.stats.lm_forwards, want_a);
        assert_int_equal(b.stats.lm_forwards, want_b);
        assert_true(want_a > 1 + batches); /* the request does have multi-token candidates */
    }
    assert_int_equal(a.stats.image_tokens, 70); /* 7x5 -> smart_resize 224x320 -> 14x20 patches / 4 */
    assert_true(a.stats.peak_bytes > (int64_t)F.engine->lm.arena.cap);
    assert_true(a.stats.lm_tokens < b.stats.lm_tokens); /* the prefix ran once */
    jev_decide_result_free(&a);
    jev_decide_result_free(&b);
    jev_request_free(&r);
}

static void test_label(void **state) {
    (void)state;
    shared_vs_independent(JEV_SCORING_LABEL, JEV_TRIE_SUM);
}

static void test_text(void **state) {
    (void)state;
    shared_vs_independent(JEV_SCORING_TEXT, JEV_TRIE_SUM);
    if (!F.quick)
        shared_vs_independent(JEV_SCORING_TEXT, JEV_TRIE_MEAN);
    /* the normalisation matters where candidates differ in length ("team" has 1- to 3-token options) */
    struct jev_request r;
    parse(REQ, true, &r);
    struct jev_decide_result a, b;
    run(&r, JEV_DECIDE_SHARED, JEV_SCORING_TEXT, JEV_TRIE_SUM, 4, &a);
    run(&r, JEV_DECIDE_SHARED, JEV_SCORING_TEXT, JEV_TRIE_MEAN, 4, &b);
    bool ok;
    assert_true(compare(&r, &a, &r, &b, &ok) > 1e-3);
    jev_decide_result_free(&a);
    jev_decide_result_free(&b);
    jev_request_free(&r);
}

/* ---- batch size, order and company ---- */

static void test_batch_order_company(void **state) {
    (void)state;
    const enum jev_decide_scoring modes[] = {JEV_SCORING_LABEL, JEV_SCORING_TEXT};
    for (int mi = 0; mi < 2; mi++) {
        enum jev_decide_scoring sc = modes[mi];
        struct jev_request r, rr, ra;
        parse(REQ, true, &r);
        parse(REQ_REVERSED, true, &rr);
        parse(REQ_ALONE, true, &ra);
        struct jev_decide_result base, x;
        run(&r, JEV_DECIDE_SHARED, sc, JEV_TRIE_SUM, 1, &base);
        const int32_t batches[] = {3, 0};
        double worst = 0.0;
        bool ok = true, ok1;
        for (int bi = 0; bi < 2; bi++) {
            run(&r, JEV_DECIDE_SHARED, sc, JEV_TRIE_SUM, batches[bi], &x);
            worst = fmax(worst, compare(&r, &base, &r, &x, &ok1));
            ok = ok && ok1;
            jev_decide_result_free(&x);
        }
        run(&rr, JEV_DECIDE_SHARED, sc, JEV_TRIE_SUM, 3, &x);
        worst = fmax(worst, compare(&r, &base, &rr, &x, &ok1));
        ok = ok && ok1;
        jev_decide_result_free(&x);
        run(&ra, JEV_DECIDE_SHARED, sc, JEV_TRIE_SUM, 0, &x);
        worst = fmax(worst, compare(&r, &base, &ra, &x, &ok1));
        ok = ok && ok1;
        jev_decide_result_free(&x);
        printf("%s: batch 1 vs 3 / all / reversed / alone: max |dp| = %.3g\n", jev_decide_scoring_name(sc), worst);
        assert_true(worst <= 1e-6);
        assert_true(ok);
        jev_decide_result_free(&base);
        jev_request_free(&r);
        jev_request_free(&rr);
        jev_request_free(&ra);
        if (F.quick)
            break;
    }
}

/* ---- generate_json ---- */

static void test_generate(void **state) {
    (void)state;
    struct jev_request r;
    parse(REQ, true, &r);
    struct jev_decide_params p = jev_decide_default_params();
    p.path = JEV_DECIDE_GENERATE;
    p.max_new_tokens = F.quick ? 12 : 0; /* 0: max(128, 24 x 5) = 128 */
    struct jev_decide_result res;
    struct jev_error err = {0};
    assert_int_equal(jev_decide_run(F.d, &r, &p, &res, &err), JEV_OK);
    assert_true(res.generated);
    assert_non_null(res.gen.raw);
    int32_t budget = F.quick ? 12 : 128;
    assert_true(res.n_gen_ids >= 0 && res.n_gen_ids <= budget);
    assert_int_equal(res.stats.output_tokens, res.n_gen_ids);
    /* validity is exactly decide's validator on the kept text */
    struct jev_genjson_result chk;
    assert_int_equal(jev_genjson_check(&r, res.gen.raw, res.gen.raw_len, &chk, &err), JEV_OK);
    assert_int_equal(chk.valid, res.valid);
    assert_string_equal(chk.reason, res.gen.reason);
    printf("generate: %d new tokens, %s (%s)\n", res.n_gen_ids, res.valid ? "valid" : "invalid", res.gen.reason);
    /* forwards: the prompt chunks, then one per new token after the first (and one for a final EOS) */
    int32_t chunks = (res.stats.prompt_tokens + 511) / 512;
    int32_t want = chunks + res.n_gen_ids - (res.n_gen_ids == budget ? 1 : 0);
    assert_int_equal(res.stats.lm_forwards, want);
    assert_int_equal(res.stats.vision_forwards, 1);
    jev_genjson_result_free(&chk);
    jev_decide_result_free(&res);
    /* a small chunk gives more prefill forwards and the same first token */
    p.max_new_tokens = 4;
    p.prefill_chunk = 64;
    struct jev_decide_result res2;
    assert_int_equal(jev_decide_run(F.d, &r, &p, &res2, &err), JEV_OK);
    chunks = (res2.stats.prompt_tokens + 63) / 64;
    assert_int_equal(res2.stats.lm_forwards, chunks + res2.n_gen_ids - (res2.n_gen_ids == 4 ? 1 : 0));
    jev_decide_result_free(&res2);
    jev_request_free(&r);
}

/* ---- errors through the entry point ---- */

static void expect_refusal(const char *body, enum jev_request_shape shape) {
    struct jev_request r;
    struct jev_request_error want = {0}, got = {0};
    struct jev_request_opts opts = {.no_vision = false};
    enum jev_status ws = shape == JEV_SHAPE_OPENAI ? jev_request_parse_openai(body, strlen(body), &opts, &r, &want)
                                                   : jev_request_parse_systemone(body, strlen(body), &opts, &r, &want);
    assert_int_not_equal(ws, JEV_OK);
    char *resp = NULL;
    struct jev_decide_params p = jev_decide_default_params();
    enum jev_status gs = jev_decide_body(F.d, body, strlen(body), shape, &p, &resp, &got, NULL);
    assert_int_equal(gs, ws);
    assert_int_equal(got.http_status, want.http_status);
    assert_string_equal(got.type, want.type);
    assert_string_equal(got.message, want.message);
    char *want_body = jev_response_request_error(&want);
    assert_string_equal(resp, want_body);
    free(want_body);
    free(resp);
}

static void test_errors(void **state) {
    (void)state;
    const char *bad[] = {
        "",
        "{",
        "[]",
        "{\"questions\":{\"a\":{\"type\":\"noul\",\"instructions\":\"x\"}}}",
        "{\"state\":\"s\"}",
        "{\"state\":\"s\",\"questions\":{}}",
        "{\"state\":5,\"questions\":{\"a\":{\"type\":\"noul\",\"instructions\":\"x\"}}}",
        "{\"state\":\"s\",\"questions\":{\"a\":{\"type\":\"box\",\"instructions\":\"x\"}}}",
        "{\"state\":\"s\",\"questions\":{\"a\":{\"type\":\"choice\",\"instructions\":\"x\",\"criteria\":{}}}}",
        "{\"state\":\"s\",\"questions\":{\"a\":{\"type\":\"score\",\"instructions\":\"x\",\"criteria\":[\"one\"]}}}",
        "{\"state\":\"s\",\"questions\":{\"a\":{\"type\":\"noul\",\"instructions\":\"\"}}}",
        "{\"state\":\"s\",\"questions\":{\"a\":{\"type\":\"noul\",\"instructions\":\"x\",\"bogus\":1}}}",
        "{\"state\":\"s\",\"images\":[\"https://example.com/a.png\"],\"questions\":{\"a\":{\"type\":\"noul\","
        "\"instructions\":\"x\"}}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_refusal(bad[i], JEV_SHAPE_SYSTEMONE);
    expect_refusal("{\"model\":\"m\",\"input\":\"x\",\"questions\":[]}", JEV_SHAPE_OPENAI);

    /* failures of the run itself: an image that does not decode is a 400 naming it */
    /* a PNG whose IDAT is not zlib data (signature, IHDR and CRCs intact) */
    const char *garbage_png = "{\"state\":\"s\",\"images\":[\"data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAABAAAAAQ"
                              "CAIAAACQkWg2AAAAE0lEQVR4nCBnYXJiYWdlIG5vdCB6bGli148WoQAAAABJRU5ErkJggg==\"],"
                              "\"questions\":{\"a\":{\"type\":\"noul\",\"instructions\":\"x\"}}}";
    char *resp = NULL;
    struct jev_request_error got = {0};
    struct jev_decide_params p = jev_decide_default_params();
    enum jev_status s =
        jev_decide_body(F.d, garbage_png, strlen(garbage_png), JEV_SHAPE_SYSTEMONE, &p, &resp, &got, NULL);
    printf("bad image: %d %s: %s\n", got.http_status, got.type, got.message);
    assert_int_equal(s, JEV_ERR_FORMAT);
    assert_int_equal(got.http_status, 400);
    assert_string_equal(got.type, "invalid_request_error");
    assert_non_null(strstr(got.message, "PNG"));
    assert_non_null(strstr(resp, "\"code\":400"));
    free(resp);

    /* a prompt longer than the engine holds: 400 exceed_context_size_error, naming the limit */
    struct jev_engine_params ep = jev_engine_default_params();
    ep.max_batch = 4;
    ep.max_tokens = 64;
    struct jev_engine *small = NULL;
    struct jev_decider *ds = NULL;
    struct jev_error err = {0};
    assert_int_equal(jev_engine_init(F.model, &ep, &small), JEV_OK);
    assert_int_equal(jev_decider_init(F.model, small, NULL, &ds, &err), JEV_OK);
    s = jev_decide_body(ds, REQ, strlen(REQ), JEV_SHAPE_SYSTEMONE, &p, &resp, &got, NULL);
    printf("too long: %d %s: %s\n", got.http_status, got.type, got.message);
    assert_int_equal(s, JEV_ERR_CONTEXT_FULL);
    assert_int_equal(got.http_status, 400);
    assert_string_equal(got.type, "exceed_context_size_error");
    assert_non_null(strstr(got.message, "64"));
    free(resp);
    /* more questions than the engine's fork slots: in groups that fit (2 at a time), the answers of
     * the engine that takes them at once */
    ep.max_tokens = 2048;
    struct jev_engine *few = NULL;
    struct jev_decider *df = NULL;
    ep.max_batch = 2;
    assert_int_equal(jev_engine_init(F.model, &ep, &few), JEV_OK);
    assert_int_equal(jev_decider_init(F.model, few, NULL, &df, &err), JEV_OK);
    struct jev_decide_result grouped, whole;
    s = jev_decide_body(df, REQ, strlen(REQ), JEV_SHAPE_SYSTEMONE, &p, &resp, &got, &grouped);
    assert_int_equal(s, JEV_OK);
    free(resp);
    s = jev_decide_body(F.d, REQ, strlen(REQ), JEV_SHAPE_SYSTEMONE, &p, &resp, &got, &whole);
    assert_int_equal(s, JEV_OK);
    free(resp);
    printf("2 fork slots: %lld forwards, against %lld\n", (long long)grouped.stats.lm_forwards,
           (long long)whole.stats.lm_forwards);
    assert_true(grouped.stats.lm_forwards > whole.stats.lm_forwards);
    assert_int_equal(grouped.answers.n, whole.answers.n);
    for (int32_t i = 0; i < whole.answers.n; i++)
        for (int32_t k = 0; k < whole.answers.items[i].n; k++)
            assert_true(fabs(grouped.answers.items[i].probs[k] - whole.answers.items[i].probs[k]) <= 1e-6);
    jev_decide_result_free(&grouped);
    jev_decide_result_free(&whole);
    /* text scoring forks each question with a DeltaNet state: an engine with only the prefix's
     * refuses it, the same class, naming max_states */
    struct jev_engine *one = NULL;
    struct jev_decider *d1 = NULL;
    ep.max_states = 1;
    assert_int_equal(jev_engine_init(F.model, &ep, &one), JEV_OK);
    assert_int_equal(jev_decider_init(F.model, one, NULL, &d1, &err), JEV_OK);
    struct jev_decide_params pt = p;
    pt.scoring = JEV_SCORING_TEXT;
    s = jev_decide_body(d1, REQ, strlen(REQ), JEV_SHAPE_SYSTEMONE, &pt, &resp, &got, NULL);
    printf("text scoring, one state slot: %d %s: %s\n", got.http_status, got.type, got.message);
    assert_int_equal(s, JEV_ERR_CONTEXT_FULL);
    assert_int_equal(got.http_status, 400);
    assert_non_null(strstr(got.message, "max_states"));
    free(resp);
    jev_decider_free(d1);
    jev_engine_free(one);
    /* and the same request through the right engine answers, with the System One envelope */
    struct jev_decide_result res;
    s = jev_decide_body(F.d, REQ, strlen(REQ), JEV_SHAPE_SYSTEMONE, &p, &resp, &got, &res);
    assert_int_equal(s, JEV_OK);
    assert_non_null(strstr(resp, "\"answers\":{\"is_refund\":{\"type\":\"noul\""));
    assert_int_equal(res.answers.n, 5);
    free(resp);
    jev_decide_result_free(&res);
    jev_decider_free(df);
    jev_engine_free(few);
    jev_decider_free(ds);
    jev_engine_free(small);
    /* bad params are refused before any work */
    struct jev_request r;
    parse(REQ, false, &r);
    p.batch = -1;
    struct jev_decide_result none;
    assert_int_equal(jev_decide_run(F.d, &r, &p, &none, &err), JEV_ERR_INVALID_ARG);
    assert_int_equal(none.answers.n, 0);
    jev_request_free(&r);
}

/* ---- multi-token scoring verification ---- */

static void test_verify(void **state) {
    (void)state;
    json_t *rec = NULL;
    struct jev_verify_summary sum;
    struct jev_error err = {0};
    struct jev_verify_opts o = {.norm = JEV_TRIE_SUM, .tolerance = 1e-5};
    assert_int_equal(jev_verify_run(F.d, &o, &rec, &sum, &err), JEV_OK);
    printf("verify: %d cases, %d tokens, max |dlogp| = %.3g\n", sum.n_cases, sum.n_tokens, sum.max_abs_diff);
    assert_int_equal(sum.n_cases, 4);
    assert_true(sum.n_tokens > 10);
    assert_true(sum.max_abs_diff <= 1e-5);
    assert_true(sum.argmax_agreement == 1.0);
    assert_true(sum.pass);
    /* the record carries each candidate's tokens: some share their first token (the trie's case) */
    json_t *c0 = json_array_get(json_object_get(rec, "cases"), 0);
    json_t *cands = json_object_get(c0, "candidates");
    json_int_t t0 = json_integer_value(json_array_get(json_object_get(json_array_get(cands, 0), "token_ids"), 0));
    json_int_t t1 = json_integer_value(json_array_get(json_object_get(json_array_get(cands, 1), "token_ids"), 0));
    assert_true(t0 == t1);
    json_decref(rec);
}

/* The time limit on every path: the request stops with JEV_ERR_ABORTED naming the limit, every
 * sequence it took goes back to the engine, and the next request runs normally. */
static void test_time_limit(void **state) {
    (void)state;
    const enum jev_decide_path paths[] = {JEV_DECIDE_SHARED, JEV_DECIDE_INDEPENDENT, JEV_DECIDE_GENERATE};
    struct jev_request r;
    parse(REQ, true, &r);
    for (int k = 0; k < 3; k++) {
        struct jev_decide_params p = jev_decide_default_params();
        p.path = paths[k];
        p.timeout_ms = 0.001;
        struct jev_decide_result res;
        struct jev_error err = {0};
        assert_int_equal(jev_decide_run(F.d, &r, &p, &res, &err), JEV_ERR_ABORTED);
        assert_non_null(strstr(err.msg, "time limit"));
        assert_int_equal(F.engine->state.n_live, 0);
    }
    struct jev_decide_result ok;
    run(&r, JEV_DECIDE_SHARED, JEV_SCORING_LABEL, JEV_TRIE_SUM, 2, &ok);
    assert_int_equal(ok.answers.n, r.n_questions);
    jev_decide_result_free(&ok);
    jev_request_free(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_label),      cmocka_unit_test(test_text),   cmocka_unit_test(test_batch_order_company),
        cmocka_unit_test(test_generate),   cmocka_unit_test(test_errors), cmocka_unit_test(test_verify),
        cmocka_unit_test(test_time_limit),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
