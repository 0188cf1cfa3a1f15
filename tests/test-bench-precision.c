/*
 * test-bench-precision.c - the precision fields of the benchmark record (jev-bench/2,
 * docs/bench-schema.md) and what reads them:
 *
 * - settings.precision ("exact", "fast" or null) and agreement[].fast_vs_exact: null on an
 *   exact record, on jev's fast record an entry per path with fast's largest probability delta
 *   and argmax agreement against one exact run of the same request;
 * - jev_bench_vs_exact_compute on a hand-made fast record and exact reference (the expected
 *   numbers are hand arithmetic over the fixture's chosen values), and its refusals;
 * - the validator: a fast record must compare (a peer's may not), an exact one must not, every
 *   path once, values in [0, 1]; jev-bench/1 records still load and may hold neither field;
 * - jev report: the mode in the settings line, fast as its own series ("jev cpu fast"), the
 *   fast-vs-exact line under each count.
 *
 * No model runs here: `jev bench --precision fast` itself runs on the GPU machine
 * (scripts/device/cuda-check.sh); on the CPU it is refused (tests/test-cli-decide.c).
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

#include "common/bench/report.h" // defines: jev_report_markdown
#include "common/bench/schema.h" // defines: jev_bench_record_*, jev_bench_vs_exact_compute, jev_bench_validate

static const char *const k_paths[] = {"generate_json", "independent", "shared"};
static const char *const k_opts[] = {"yes", "no"};
static const char *const k_ids[] = {"q00", "q01", "q02"};
static const double k_ind[] = {0.7, 0.3}, k_sh[] = {0.69, 0.31};
/* the exact reference: q00 answers yes (0.6), q01 no (0.6) */
static const double k_ref0[] = {0.6, 0.4}, k_ref1[] = {0.4, 0.6};

/*
 * A record of one count (2 decisions, q00 and q01), the three paths, 2 repeats. Scoring paths answer
 * yes to both with the fixed distributions above; generate_json answers yes, yes in repeat 0 and yes,
 * no in repeat 1. precision NULL writes null (a peer). total_ms = count x 100 + 10 x repeat.
 */
static struct jev_bench_record *make_record(const char *precision, const char *peer, int32_t count) {
    struct jev_bench_env env = {0};
    env.peer_name = peer;
    env.model_id = "synthetic-0.8B";
    env.backend = "cpu";
    const int32_t counts[] = {count};
    struct jev_bench_settings set = {0};
    set.n_counts = 1;
    set.counts = counts;
    set.repeats = 2;
    set.warmup = 1;
    set.batch = 4;
    set.n_paths = 3;
    set.paths = k_paths;
    set.scoring = "label";
    set.image_max_side = 768;
    set.order = "rotated";
    set.precision = precision;
    struct jev_error err = {0};
    struct jev_bench_record *rec = NULL;
    assert_int_equal(jev_bench_record_init(&rec, &env, &set, &err), JEV_OK);
    for (int pi = 0; pi < 3; pi++)
        for (int r = 0; r < 2; r++) {
            struct jev_bench_decision d[3];
            for (int j = 0; j < count; j++) {
                d[j].id = k_ids[j];
                d[j].n_options = 2;
                d[j].options = k_opts;
                d[j].choice = pi == 0 && r == 1 && j == 1 ? "no" : "yes";
                d[j].probs = pi == 0 ? NULL : pi == 1 ? k_ind : k_sh;
            }
            struct jev_bench_sample s = jev_bench_sample_default();
            s.repeat = r;
            s.total_ms = 100.0 * count + 10.0 * r;
            s.output = pi == 0 ? "{}" : NULL;
            s.n_decisions = count;
            s.decisions = d;
            assert_int_equal(jev_bench_record_add_sample(rec, count, k_paths[pi], &s, &err), JEV_OK);
        }
    return rec;
}

/* The exact reference of one path: q00 yes (0.6), q01 no (0.6); generate_json gives choices only. */
static void reference(int pi, struct jev_bench_decision ref[2]) {
    for (int j = 0; j < 2; j++) {
        ref[j].id = k_ids[j];
        ref[j].n_options = 2;
        ref[j].options = k_opts;
        ref[j].choice = j == 0 ? "yes" : "no";
        ref[j].probs = pi == 0 ? NULL : j == 0 ? k_ref0 : k_ref1;
    }
}

/* The fast record of make_record with its agreement, fast_vs_exact computed against reference(). */
static struct jev_bench_record *fast_record(struct jev_bench_agreement *a) {
    struct jev_bench_record *rec = make_record("fast", NULL, 2);
    struct jev_error err = {0};
    assert_int_equal(jev_bench_agreement_compute(rec, 2, a, &err), JEV_OK);
    assert_false(a->has_vs_exact);
    a->has_vs_exact = true;
    for (int pi = 0; pi < 3; pi++) {
        struct jev_bench_decision ref[2];
        reference(pi, ref);
        assert_int_equal(jev_bench_vs_exact_compute(rec, 2, k_paths[pi], ref, 2, &a->vs_exact[pi], &err), JEV_OK);
    }
    assert_int_equal(jev_bench_record_add_agreement(rec, a, &err), JEV_OK);
    return rec;
}

static void close_to(double got, double want) {
    if (!(fabs(got - want) < 1e-12))
        fail_msg("got %.17g, want %.17g", got, want);
}

/* ---- compute ---- */

static void test_vs_exact_compute(void **state) {
    (void)state;
    struct jev_bench_agreement a;
    struct jev_bench_record *rec = fast_record(&a);
    /* generate_json: no probabilities; yes,yes then yes,no against yes,no: 1 + 2 of 4 agree */
    assert_true(isnan(a.vs_exact[0].max_prob_delta));
    close_to(a.vs_exact[0].argmax_agreement, 0.75);
    /* independent: |0.7 - 0.4| = |0.3 - 0.6| = 0.3 at q01; q00 agrees, q01 does not, in both repeats */
    close_to(a.vs_exact[1].max_prob_delta, 0.3);
    close_to(a.vs_exact[1].argmax_agreement, 0.5);
    /* shared: |0.69 - 0.4| = 0.29 */
    close_to(a.vs_exact[2].max_prob_delta, 0.29);
    close_to(a.vs_exact[2].argmax_agreement, 0.5);

    /* written, validated, loaded back: the entries under their path names, null for a missing delta */
    json_t *root = jev_bench_record_json(rec);
    struct jev_error err = {0};
    assert_int_equal(jev_bench_validate(root, &err), JEV_OK);
    assert_string_equal(json_string_value(json_object_get(root, "schema")), "jev-bench/2");
    assert_string_equal(json_string_value(json_object_get(json_object_get(root, "settings"), "precision")), "fast");
    json_t *fx = json_object_get(json_array_get(json_object_get(root, "agreement"), 0), "fast_vs_exact");
    assert_true(json_is_null(json_object_get(json_object_get(fx, "generate_json"), "max_prob_delta")));
    close_to(json_number_value(json_object_get(json_object_get(fx, "shared"), "max_prob_delta")), 0.29);
    jev_bench_record_free(rec);

    /* an exact record's agreement says null */
    rec = make_record("exact", NULL, 2);
    assert_int_equal(jev_bench_agreement_compute(rec, 2, &a, &err), JEV_OK);
    assert_int_equal(jev_bench_record_add_agreement(rec, &a, &err), JEV_OK);
    root = jev_bench_record_json(rec);
    assert_int_equal(jev_bench_validate(root, &err), JEV_OK);
    assert_true(json_is_null(json_object_get(json_array_get(json_object_get(root, "agreement"), 0), "fast_vs_exact")));
    jev_bench_record_free(rec);
}

/* A reference that is not the same request: refused, naming what differs. */
static void test_vs_exact_refuses(void **state) {
    (void)state;
    struct jev_bench_record *rec = make_record("fast", NULL, 2);
    struct jev_bench_decision ref[2];
    struct jev_bench_vs_exact out;
    struct jev_error err = {0};
    reference(2, ref);
    ref[1].id = "q07";
    assert_int_equal(jev_bench_vs_exact_compute(rec, 2, "shared", ref, 2, &out, &err), JEV_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "decision 1 is q01 here, q07 in the exact run"));
    jev_error_clear(&err);
    reference(2, ref);
    assert_int_equal(jev_bench_vs_exact_compute(rec, 2, "shared", ref, 1, &out, &err), JEV_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "2 decisions in repeat 0, 1 in the exact run"));
    jev_error_clear(&err);
    ref[0].n_options = 1;
    assert_int_equal(jev_bench_vs_exact_compute(rec, 2, "shared", ref, 2, &out, &err), JEV_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "decision q00 has 2 candidates, 1 in the exact run"));
    jev_error_clear(&err);
    reference(2, ref);
    assert_int_equal(jev_bench_vs_exact_compute(rec, 2, "dedup", ref, 2, &out, &err), JEV_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "no dedup run"));
    jev_bench_record_free(rec);
}

/* ---- validation ---- */

static void expect_error_at(const json_t *root, const char *path, const char *why) {
    struct jev_error err = {0};
    enum jev_status s = jev_bench_validate(root, &err);
    size_t n = strlen(path);
    if (s != JEV_ERR_FORMAT || strncmp(err.msg, path, n) || err.msg[n] != ':' || !strstr(err.msg, why))
        fail_msg("change at %s (%s): validator said status %d '%s'", path, why, s, err.msg);
}

/* A copy of root with the value at settings or agreement[0] (key, then sub-keys) replaced by JSON text. */
static json_t *changed(const json_t *root, const char *obj, const char *key, const char *sub, const char *value) {
    json_t *c = json_deep_copy(root);
    json_t *o =
        !strcmp(obj, "settings") ? json_object_get(c, "settings") : json_array_get(json_object_get(c, "agreement"), 0);
    if (sub)
        o = json_object_get(o, key);
    json_t *v = value ? json_loads(value, JSON_DECODE_ANY, NULL) : NULL;
    if (value)
        assert_non_null(v);
    const char *k = sub ? sub : key;
    if (v)
        json_object_set_new(o, k, v);
    else
        json_object_del(o, k);
    return c;
}

static void test_validation(void **state) {
    (void)state;
    struct jev_bench_agreement a;
    struct jev_bench_record *rec = fast_record(&a);
    const json_t *fast = jev_bench_record_json(rec);
    static const struct {
        const char *obj, *key, *sub, *value, *path, *why;
    } cases[] = {
        {"agreement", "fast_vs_exact", NULL, "null", "$.agreement[0].fast_vs_exact", "must compare with exact"},
        {"agreement", "fast_vs_exact", "shared", NULL, "$.agreement[0].fast_vs_exact", "no entry for path shared"},
        {"agreement", "fast_vs_exact", "dedup", "{\"max_prob_delta\": 0, \"argmax_agreement\": 1}",
         "$.agreement[0].fast_vs_exact.dedup", "not in settings.paths"},
        {"agreement", "fast_vs_exact", "shared", "{\"max_prob_delta\": 2, \"argmax_agreement\": 1}",
         "$.agreement[0].fast_vs_exact.shared.max_prob_delta", "out of range"},
        {"agreement", "fast_vs_exact", "shared", "{\"max_prob_delta\": 0}",
         "$.agreement[0].fast_vs_exact.shared.argmax_agreement", "missing field"},
        {"agreement", "fast_vs_exact", "shared", "{\"max_prob_delta\": 0, \"argmax_agreement\": 1, \"n\": 3}",
         "$.agreement[0].fast_vs_exact.shared.n", "unknown field"},
        {"agreement", "fast_vs_exact", "shared", "[]", "$.agreement[0].fast_vs_exact.shared", "expected an object"},
        {"settings", "precision", NULL, "\"half\"", "$.settings.precision", "is not one of"},
        {"settings", "precision", NULL, NULL, "$.settings.precision", "missing field"},
        /* the same entries on a record that says exact */
        {"settings", "precision", NULL, "\"exact\"", "$.agreement[0].fast_vs_exact", "only a record of"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *c = changed(fast, cases[i].obj, cases[i].key, cases[i].sub, cases[i].value);
        expect_error_at(c, cases[i].path, cases[i].why);
        json_decref(c);
    }
    /* a peer's record may say fast without comparing (a peer has no exact run of jev's to compare with) */
    struct jev_bench_record *peer = make_record("fast", "transformers", 2);
    struct jev_error err = {0};
    struct jev_bench_agreement pa;
    assert_int_equal(jev_bench_agreement_compute(peer, 2, &pa, &err), JEV_OK);
    assert_int_equal(jev_bench_record_add_agreement(peer, &pa, &err), JEV_OK);
    assert_int_equal(jev_bench_validate(jev_bench_record_json(peer), &err), JEV_OK);
    jev_bench_record_free(peer);
    jev_bench_record_free(rec);
}

/* jev-bench/1 (every record before the modes) still loads; it has neither field, and another version is
 * refused naming the two this build reads. */
static void test_version_1(void **state) {
    (void)state;
    struct jev_bench_record *rec = make_record("exact", NULL, 2);
    struct jev_error err = {0};
    struct jev_bench_agreement a;
    assert_int_equal(jev_bench_agreement_compute(rec, 2, &a, &err), JEV_OK);
    assert_int_equal(jev_bench_record_add_agreement(rec, &a, &err), JEV_OK);
    json_t *v1 = json_deep_copy(jev_bench_record_json(rec));
    json_object_set_new(v1, "schema", json_string("jev-bench/1"));
    json_t *with_precision = json_deep_copy(v1);
    json_object_del(json_object_get(v1, "settings"), "precision");
    json_t *with_fx = json_deep_copy(v1);
    json_object_del(json_array_get(json_object_get(v1, "agreement"), 0), "fast_vs_exact");
    assert_int_equal(jev_bench_validate(v1, &err), JEV_OK);
    expect_error_at(with_precision, "$.settings.precision", "unknown field");
    expect_error_at(with_fx, "$.agreement[0].fast_vs_exact", "unknown field");
    json_object_set_new(v1, "schema", json_string("jev-bench/3"));
    expect_error_at(v1, "$.schema", "reads jev-bench/2 and jev-bench/1");
    json_decref(v1);
    json_decref(with_precision);
    json_decref(with_fx);
    /* a committed record of the run before the modes */
    json_t *old = NULL;
    assert_int_equal(jev_bench_load_file("bench/results/2026-12-02-h200-vm-16core-run5/jev-cuda.json", &old, &err),
                     JEV_OK);
    json_decref(old);
    jev_bench_record_free(rec);
}

/* ---- the report ---- */

static void test_report(void **state) {
    (void)state;
    struct jev_bench_agreement a;
    struct jev_bench_record *fast = fast_record(&a);
    struct jev_bench_record *exact = make_record("exact", NULL, 3);
    struct jev_error err = {0};
    assert_int_equal(jev_bench_agreement_compute(exact, 3, &a, &err), JEV_OK);
    assert_int_equal(jev_bench_record_add_agreement(exact, &a, &err), JEV_OK);
    /* rows disjoint (counts 3 and 2): the same label would make them one series; fast keeps its own */
    struct jev_report_source src[2] = {{jev_bench_record_json(exact), "exact.json"},
                                       {jev_bench_record_json(fast), "fast.json"}};
    struct jev_report_params p = {src, 2, NULL, NULL};
    char *md = NULL;
    size_t len = 0;
    assert_int_equal(jev_report_markdown(&p, &md, &len, &err), JEV_OK);
    const char *want[] = {
        "## jev cpu fast",
        "; precision fast\n",
        "; precision exact\n",
        "- 2 decisions: direct/shared",
        "  - fast vs exact: generate_json maximum probability delta n/a, argmax agreement 75.0%; independent maximum "
        "probability delta 0.30000000, argmax agreement 50.0%; shared maximum probability delta 0.29000000, argmax "
        "agreement 50.0%.\n",
        "| jev cpu total ms | jev cpu fast total ms |",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(md, want[i]))
            fail_msg("the report lacks \"%s\":\n%s", want[i], md);
    /* the exact record's count has no fast-vs-exact line */
    const char *three = strstr(md, "- 3 decisions: direct/shared");
    assert_non_null(three);
    assert_true(strncmp(strchr(three, '\n') + 1, "  - fast vs exact", 17) != 0);
    free(md);
    jev_bench_record_free(fast);
    jev_bench_record_free(exact);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vs_exact_compute), cmocka_unit_test(test_vs_exact_refuses),
        cmocka_unit_test(test_validation),       cmocka_unit_test(test_version_1),
        cmocka_unit_test(test_report),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
