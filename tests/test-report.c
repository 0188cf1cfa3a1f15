/*
 * test-report.c - the benchmark record (jev-bench/2) and `jev report`:
 * builder round trip, validation (every missing and every mistyped field is
 * reported with its JSON path), the median rule, regeneration of the seed's
 * published M4 tables from bench/reference/m4-mlx.json, side-by-side ratios,
 * SVG well-formedness, and the CLI.
 *
 * Expected values come from outside the code under test: the seed's published
 * table rows (copied verbatim below from seeds/001_628e0ba5312d519c.txt) and
 * hand arithmetic over the fixture's chosen sample values. No timing is
 * asserted.
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

#include "common/bench/report.h" // defines: jev_report_markdown, jev_report_svg, jev_report_median
#include "common/bench/schema.h" // defines: jev_bench_record_*, jev_bench_validate, jev_bench_load_*

/* ---- fixture ---- */

static const char *const k_paths[] = {"generate_json", "independent", "shared"};
static const int32_t k_counts[] = {1, 4};
static const char *const k_opts[] = {"yes", "no"};
static const double k_probs_ind[] = {0.7, 0.3};
static const double k_probs_sh[] = {0.69, 0.31};
#define SHA_A "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static const char *test_dir(void) {
    const char *d = getenv("JEV_TEST_DIR");
    return d && d[0] ? d : "build/test-data";
}

/* The fixture's total for (count index, path index, repeat): hand-checkable. */
static double fixture_total(double scale, int ci, int pi, int r) {
    return scale * (100.0 * (pi + 1) * k_counts[ci] + 10.0 * r);
}

/* A complete record: counts {1, 4}, the three paths, `repeats` samples each.
 * generate_json is valid at 1 decision and fails the schema at 4. */
static struct jev_bench_record *make_record(int32_t repeats, double scale, const char *peer) {
    struct jev_bench_weight w = {"model.safetensors", 1234, SHA_A};
    const char *lib_names[] = {"jansson"}, *lib_versions[] = {"2.14"};
    struct jev_bench_env env = {0};
    env.peer_name = peer;
    env.peer_version = peer ? "5.17.0" : NULL;
    env.jev_version = "0.1.0";
    env.git_commit = "0123abc";
    env.model_id = "synthetic-0.8B";
    env.model_dir = "build/test-data/model";
    env.model_synthetic = 1;
    env.n_weights = 1;
    env.weights = &w;
    env.image_path = "assets/dog.jpg";
    env.image_sha256 = SHA_A;
    env.image_width = 1546;
    env.image_height = 1213;
    env.resized_width = 768;
    env.resized_height = 608;
    env.n_libraries = 1;
    env.library_names = lib_names;
    env.library_versions = lib_versions;
    env.compiler = "gcc 12.2.0";
    env.cpu_model = "Test CPU";
    env.cpu_cores = 2;
    env.threads = 2;
    env.backend = peer ? "cuda" : "cpu";
    env.gpu_name = peer ? "Test GPU" : NULL;
    env.date = "2025-01-01T00:00:00Z";
    env.machine = "testhost";
    env.os = "Linux";
    struct jev_bench_settings set = {0};
    set.n_counts = 2;
    set.counts = k_counts;
    set.repeats = repeats;
    set.warmup = 1;
    set.batch = 4;
    set.n_paths = 3;
    set.paths = k_paths;
    set.scoring = "label";
    set.image_max_side = 768;
    set.prefill_chunk = 512;
    set.max_new_tokens_min = 128;
    set.max_new_tokens_per_decision = 24;
    set.order = "rotated";
    set.workload = "bench/dog-workload.json";
    set.precision = peer ? NULL : "exact";

    struct jev_error err = {0};
    struct jev_bench_record *rec = NULL;
    assert_int_equal(jev_bench_record_init(&rec, &env, &set, &err), JEV_OK);
    for (int ci = 0; ci < 2; ci++) {
        int32_t c = k_counts[ci];
        for (int pi = 0; pi < 3; pi++) {
            for (int r = 0; r < repeats; r++) {
                struct jev_bench_decision d[4];
                for (int j = 0; j < c; j++) {
                    d[j].id = j == 0 ? "q00" : j == 1 ? "q01" : j == 2 ? "q02" : "q03";
                    d[j].choice = "yes";
                    d[j].n_options = 2;
                    d[j].options = k_opts;
                    d[j].probs = pi == 0 ? NULL : pi == 1 ? k_probs_ind : k_probs_sh;
                }
                struct jev_bench_sample s = jev_bench_sample_default();
                s.repeat = r;
                s.order = (pi + r) % 3;
                s.total_ms = fixture_total(scale, ci, pi, r);
                s.vision_ms = 10.0;
                s.prefill_ms = 20.0;
                s.scoring_ms = 5.0;
                s.lm_forwards = pi == 1 ? c : 2;
                s.vision_forwards = pi == 1 ? c : 1;
                s.peak_bytes = 1500000000;
                s.peak_where = peer ? "cuda" : "cpu";
                bool gen = pi == 0;
                s.valid = !(gen && c == 4);
                s.output = gen ? (c == 4 ? "{\"q00\": \"maybe\"}" : "{\"q00\": \"yes\"}") : NULL;
                s.n_decisions = c;
                s.decisions = s.valid ? d : NULL;
                assert_int_equal(jev_bench_record_add_sample(rec, c, k_paths[pi], &s, &err), JEV_OK);
            }
        }
        struct jev_bench_agreement a;
        assert_int_equal(jev_bench_agreement_compute(rec, c, &a, &err), JEV_OK);
        assert_int_equal(jev_bench_record_add_agreement(rec, &a, &err), JEV_OK);
    }
    return rec;
}

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    assert_non_null(s);
    assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = '\0';
    fclose(f);
    return s;
}

/* ---- builder, loader ---- */

static void test_builder_round_trip(void **state) {
    (void)state;
    struct jev_bench_record *rec = make_record(3, 1.0, NULL);
    struct jev_error err = {0};
    char path[512];
    snprintf(path, sizeof path, "%s/report-test/good.json", test_dir());
    remove(path);
    assert_int_equal(jev_bench_record_write(rec, path, &err), JEV_OK);
    json_t *doc = NULL;
    assert_int_equal(jev_bench_load_file(path, &doc, &err), JEV_OK);
    assert_string_equal(json_string_value(json_object_get(doc, "schema")), "jev-bench/2");
    assert_string_equal(json_string_value(json_object_get(json_object_get(doc, "settings"), "precision")), "exact");

    /* runs[3] is (4, generate_json): failed schema, valid dps 0, requested = 4 / 0.4 s */
    const json_t *run = json_array_get(json_object_get(doc, "runs"), 3);
    assert_int_equal(json_integer_value(json_object_get(run, "decisions")), 4);
    const json_t *s0 = json_array_get(json_object_get(run, "samples"), 0);
    assert_true(json_is_false(json_object_get(s0, "valid")));
    assert_true(fabs(json_number_value(json_object_get(s0, "requested_decisions_per_s")) - 10.0) < 1e-9);
    assert_true(json_number_value(json_object_get(s0, "valid_decisions_per_s")) == 0.0);
    assert_string_equal(json_string_value(json_object_get(s0, "output")), "{\"q00\": \"maybe\"}");

    /* agreement from the samples: |0.7 - 0.69| = 0.01; argmax equal; generated valid only at 1 */
    const json_t *ag = json_object_get(doc, "agreement");
    const json_t *a1 = json_array_get(ag, 0), *a4 = json_array_get(ag, 1);
    assert_true(fabs(json_number_value(json_object_get(a1, "direct_shared_max_prob_delta")) - 0.01) < 1e-12);
    assert_true(json_number_value(json_object_get(a1, "argmax_agreement")) == 1.0);
    assert_true(json_number_value(json_object_get(a1, "generated_shared_agreement")) == 1.0);
    assert_true(json_is_null(json_object_get(a4, "generated_shared_agreement")));
    json_decref(doc);
    jev_bench_record_free(rec);
}

static void test_builder_refuses(void **state) {
    (void)state;
    struct jev_bench_record *rec = make_record(2, 1.0, NULL);
    struct jev_error err = {0};
    struct jev_bench_sample s = jev_bench_sample_default();
    s.total_ms = 5.0;
    assert_int_equal(jev_bench_record_add_sample(rec, 16, "shared", &s, &err), JEV_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "settings.counts"));
    jev_error_clear(&err);
    assert_int_equal(jev_bench_record_add_sample(rec, 1, "dedup", &s, &err), JEV_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "settings.paths"));
    jev_error_clear(&err);
    assert_int_equal(jev_bench_record_add_sample(rec, 1, "shared", &s, &err), JEV_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "added twice"));
    jev_error_clear(&err);
    s.repeat = 2;
    assert_int_equal(jev_bench_record_add_sample(rec, 1, "shared", &s, &err), JEV_ERR_INVALID_ARG);
    jev_bench_record_free(rec);

    /* an incomplete record is not written: no file appears */
    const int32_t counts[] = {1};
    const char *paths[] = {"shared"};
    struct jev_bench_env env = {0};
    env.model_id = "m";
    env.backend = "cpu";
    struct jev_bench_settings set = {0};
    set.n_counts = 1;
    set.counts = counts;
    set.repeats = 1;
    set.n_paths = 1;
    set.paths = paths;
    set.image_max_side = 768;
    jev_error_clear(&err);
    assert_int_equal(jev_bench_record_init(&rec, &env, &set, &err), JEV_OK);
    char path[512];
    snprintf(path, sizeof path, "%s/report-test/incomplete.json", test_dir());
    remove(path);
    assert_int_equal(jev_bench_record_write(rec, path, &err), JEV_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "$.runs: no run for 1 decisions, path shared"));
    struct stat st;
    assert_int_not_equal(stat(path, &st), 0);
    jev_bench_record_free(rec);
}

static void test_bad_utf8_output_kept(void **state) {
    (void)state;
    /* generation stopped inside a 3-byte sequence: the rest is kept, the cut bytes become U+FFFD */
    const int32_t counts[] = {1};
    const char *paths[] = {"generate_json"};
    struct jev_bench_env env = {0};
    env.model_id = "m";
    env.backend = "cpu";
    struct jev_bench_settings set = {0};
    set.n_counts = 1;
    set.counts = counts;
    set.repeats = 1;
    set.n_paths = 1;
    set.paths = paths;
    set.image_max_side = 768;
    struct jev_error err = {0};
    struct jev_bench_record *rec = NULL;
    assert_int_equal(jev_bench_record_init(&rec, &env, &set, &err), JEV_OK);
    struct jev_bench_sample s = jev_bench_sample_default();
    s.total_ms = 12.5;
    s.valid = false;
    s.output = "{\"q00\": \"\xe2\x82";
    assert_int_equal(jev_bench_record_add_sample(rec, 1, "generate_json", &s, &err), JEV_OK);
    struct jev_bench_agreement a = {
        .decisions = 1, .max_prob_delta = NAN, .argmax_agreement = NAN, .generated_agreement = NAN};
    assert_int_equal(jev_bench_record_add_agreement(rec, &a, &err), JEV_OK);
    json_t *root = jev_bench_record_json(rec);
    assert_int_equal(jev_bench_validate(root, &err), JEV_OK);
    const json_t *sample =
        json_array_get(json_object_get(json_array_get(json_object_get(root, "runs"), 0), "samples"), 0);
    assert_string_equal(json_string_value(json_object_get(sample, "output")), "{\"q00\": \"\xef\xbf\xbd\xef\xbf\xbd");
    jev_bench_record_free(rec);
}

static void test_env_detect(void **state) {
    (void)state;
    struct jev_bench_env env = {0};
    struct jev_bench_host host;
    env.cpu_cores = JEV_BENCH_NONE;
    jev_bench_env_detect(&env, &host);
    assert_true(env.cpu_cores >= 1);
    assert_non_null(env.compiler);
    assert_non_null(env.jev_version);
    assert_int_equal(env.n_libraries, 7);
    assert_string_equal(env.library_names[0], "jansson");
    assert_non_null(env.date);
    assert_int_equal(strlen(env.date), 20); /* YYYY-MM-DDTHH:MM:SSZ */
    assert_int_equal(env.date[19], 'Z');
}

/* /proc/driver/nvidia/version as the open and the proprietary kernel modules word it */
static void test_nvidia_driver(void **state) {
    (void)state;
    char v[64];
    jev_bench_nvidia_driver("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  "
                            "(dvs-builder@U22-I3-AF03-09-1)  Thu Jul 31 2025\n",
                            v, sizeof v);
    assert_string_equal(v, "580.159.04");
    jev_bench_nvidia_driver(
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 19:39:15 UTC 2024\n", v, sizeof v);
    assert_string_equal(v, "535.183.01");
    jev_bench_nvidia_driver("NVRM version: NVIDIA UNIX Kernel Module for aarch64 2024\n", v, sizeof v);
    assert_string_equal(v, ""); /* no dotted number */
    jev_bench_nvidia_driver("GCC version:  gcc version 12.2.0\n", v, sizeof v);
    assert_string_equal(v, "");
    jev_bench_nvidia_driver("Kernel Module 1.2.3.4.5.6.7.8.9", v, 6);
    assert_string_equal(v, "1.2.3"); /* cut to the buffer */
}

/* ---- validation ---- */

/* One step of a JSON path: an object key, or an array index when key is NULL. */
struct step {
    const char *key; /* object key, NULL for an array index */
    size_t index;    /* array index */
};

static json_t *nav(json_t *root, const struct step *steps, int n) {
    json_t *j = root;
    for (int i = 0; i < n; i++)
        j = steps[i].key ? json_object_get(j, steps[i].key) : json_array_get(j, steps[i].index);
    return j;
}

static void path_text(const struct step *steps, int n, char *out, size_t size) {
    size_t len = (size_t)snprintf(out, size, "$");
    for (int i = 0; i < n && len < size; i++)
        len += (size_t)(steps[i].key ? snprintf(out + len, size - len, ".%s", steps[i].key)
                                     : snprintf(out + len, size - len, "[%zu]", steps[i].index));
}

/* The error must start with the JSON path of the change and say why. */
static void expect_error_at(const json_t *root, const char *path, const char *why) {
    struct jev_error err = {0};
    enum jev_status s = jev_bench_validate(root, &err);
    size_t n = strlen(path);
    if (s != JEV_ERR_FORMAT || strncmp(err.msg, path, n) || err.msg[n] != ':' || !strstr(err.msg, why))
        fail_msg("change at %s (%s): validator said status %d '%s'", path, why, s, err.msg);
}

static int g_missing, g_mistyped;

/* Deletes, then mistypes, every field below the node at steps[0..n), one at a time. */
static void walk(json_t *good, struct step *steps, int n) {
    json_t *node = nav(good, steps, n);
    char path[512];
    if (json_is_object(node)) {
        const char *key;
        json_t *v;
        json_object_foreach(node, key, v) {
            if (!strcmp(key, "extra"))
                continue;
            steps[n].key = key;
            path_text(steps, n + 1, path, sizeof path);
            bool optional = !strcmp(key, "note") || !strcmp(key, "published_medians");
            bool free_map = n > 0 && steps[n - 1].key && !strcmp(steps[n - 1].key, "libraries");
            if (!optional && !free_map) {
                json_t *copy = json_deep_copy(good);
                json_object_del(nav(copy, steps, n), key);
                expect_error_at(copy, path, "missing field");
                json_decref(copy);
                g_missing++;
            }
            /* a type the field never takes: arrays for scalars/objects, a string for arrays */
            json_t *copy = json_deep_copy(good);
            json_object_set_new(nav(copy, steps, n), key, json_is_array(v) ? json_string("x") : json_array());
            expect_error_at(copy, path, "expected");
            json_decref(copy);
            g_mistyped++;
            walk(good, steps, n + 1);
        }
    } else if (json_is_array(node)) {
        for (size_t i = 0; i < json_array_size(node); i++) {
            json_t *v = json_array_get(node, i);
            steps[n].key = NULL;
            steps[n].index = i;
            path_text(steps, n + 1, path, sizeof path);
            json_t *copy = json_deep_copy(good);
            json_array_set_new(nav(copy, steps, n), i, json_is_string(v) ? json_integer(7) : json_string("x"));
            expect_error_at(copy, path, "expected");
            json_decref(copy);
            g_mistyped++;
            walk(good, steps, n + 1);
        }
    }
}

static void test_every_field_missing_or_mistyped(void **state) {
    (void)state;
    struct jev_bench_record *rec = make_record(2, 1.0, NULL);
    json_t *good = jev_bench_record_json(rec);
    struct jev_error err = {0};
    assert_int_equal(jev_bench_validate(good, &err), JEV_OK);
    struct step steps[16];
    g_missing = g_mistyped = 0;
    walk(good, steps, 0);
    /* the walk reached the whole tree: every sample field, every decision field */
    assert_true(g_missing > 300);
    assert_true(g_mistyped > g_missing);
    jev_bench_record_free(rec);
}

/* Sets root[path] (dotted keys, [i] indexes) to v, for the targeted cases. */
static void set_at(json_t *root, const char *path, json_t *v) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    json_t *j = root;
    char *save = NULL, *tok = strtok_r(buf, ".", &save);
    while (tok) {
        char *next = strtok_r(NULL, ".", &save);
        char *br = strchr(tok, '[');
        size_t idx = 0;
        if (br) {
            idx = strtoul(br + 1, NULL, 10);
            *br = '\0';
        }
        if (next == NULL && !br) {
            json_object_set_new(j, tok, v);
            return;
        }
        j = json_object_get(j, tok);
        if (br) {
            if (next == NULL) {
                json_array_set_new(j, idx, v);
                return;
            }
            j = json_array_get(j, idx);
        }
        tok = next;
    }
}

static void test_targeted_errors(void **state) {
    (void)state;
    struct jev_bench_record *rec = make_record(2, 1.0, NULL);
    const json_t *good = jev_bench_record_json(rec);
    static const struct {
        const char *at;    /* where to change */
        const char *value; /* JSON text of the new value */
        const char *path;  /* the path the error must name */
        const char *why;   /* a piece of the message */
    } cases[] = {
        {"schema", "\"jev-bench/3\"", "$.schema", "unsupported version"},
        {"schema", "\"other\"", "$.schema", "not a jev benchmark record"},
        {"surprise", "1", "$.surprise", "unknown field"},
        {"runs[0].samples[0].totl_ms", "1", "$.runs[0].samples[0].totl_ms", "unknown field"},
        {"runs[0].samples[0].total_ms", "-5", "$.runs[0].samples[0].total_ms", "out of range"},
        {"runs[0].samples[0].total_ms", "1e12", "$.runs[0].samples[0].total_ms", "out of range"},
        {"runs[0].samples[0].lm_forwards", "2.5", "$.runs[0].samples[0].lm_forwards", "expected an integer or null"},
        {"runs[0].samples[0].requested_decisions_per_s", "99", "$.runs[0].samples[0].requested_decisions_per_s",
         "not decisions / total time"},
        {"runs[3].samples[0].valid_decisions_per_s", "10", "$.runs[3].samples[0].valid_decisions_per_s",
         "0 for an invalid sample"},
        {"runs[0].samples[1].repeat", "0", "$.runs[0].samples[1].repeat", "appears twice"},
        {"runs[0].samples[1].peak_where", "\"cuda\"", "$.runs[0].samples[1].peak_where", "differs"},
        {"runs[0].samples[0].peak_where", "\"disk\"", "$.runs[0].samples[0].peak_where", "is not one of"},
        {"runs[1].samples[0].output", "\"x\"", "$.runs[1].samples[0].output", "only generate_json"},
        {"runs[1].samples[0].decisions[0].probs[0]", "0.9", "$.runs[1].samples[0].decisions[0].probs", "sum to"},
        {"runs[1].samples[0].decisions[0].probs[0]", "1.5", "$.runs[1].samples[0].decisions[0].probs[0]",
         "out of range"},
        {"runs[1].samples[0].decisions[0].choice", "\"maybe\"", "$.runs[1].samples[0].decisions[0].choice",
         "not one of the options"},
        {"runs[1].samples[0].decisions[0].options[1]", "\"yes\"", "$.runs[1].samples[0].decisions[0].options[1]",
         "listed twice"},
        {"runs[1].samples[0].decisions", "[]", "$.runs[1].samples[0].decisions", "one per decision"},
        {"runs[1].samples", "[]", "$.runs[1].samples", "settings.repeats"},
        {"runs[1].decisions", "16", "$.runs[1].decisions", "not in settings.counts"},
        {"runs[1].path", "\"dedup\"", "$.runs[1].path", "not in settings.paths"},
        {"runs[1].path", "\"generate_json\"", "$.runs[1]", "a second run"},
        {"runs[1].published_medians", "{\"total_ms\": \"x\"}", "$.runs[1].published_medians.total_ms", "expected"},
        {"settings.counts", "[4, 1]", "$.settings.counts[1]", "strictly increasing"},
        {"settings.counts", "[]", "$.settings.counts", "expected 1 to"},
        {"settings.paths[0]", "\"Gen\"", "$.settings.paths[0]", "[a-z]"},
        {"settings.batch", "\"some\"", "$.settings.batch", "is not one of"},
        {"settings.scoring", "\"exact\"", "$.settings.scoring", "is not one of"},
        {"environment.model.weights[0].sha256", "\"ABC\"", "$.environment.model.weights[0].sha256", "hex"},
        {"environment.backend", "\"\"", "$.environment.backend", "must not be empty"},
        {"agreement[1].decisions", "1", "$.agreement[1].decisions", "a second entry"},
        {"agreement[0].argmax_agreement", "1.5", "$.agreement[0].argmax_agreement", "out of range"},
        {"agreement", "[]", "$.agreement", "no entry for 1 decisions"},
        {"runs", "[]", "$.runs", "no run for 1 decisions"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *copy = json_deep_copy(good);
        json_error_t jerr;
        json_t *v = json_loads(cases[i].value, JSON_DECODE_ANY, &jerr);
        assert_non_null(v);
        set_at(copy, cases[i].at, v);
        expect_error_at(copy, cases[i].path, cases[i].why);
        json_decref(copy);
    }
    jev_bench_record_free(rec);

    /* parse-level problems */
    struct jev_error err = {0};
    json_t *doc = NULL;
    assert_int_equal(jev_bench_load_buffer("{\"schema\": 1, \"schema\": 2}", 26, &doc, &err), JEV_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "duplicate"));
    jev_error_clear(&err);
    assert_int_equal(jev_bench_load_buffer("[1,", 3, &doc, &err), JEV_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "not valid JSON"));
    jev_error_clear(&err);
    assert_int_equal(jev_bench_load_buffer("[]", 2, &doc, &err), JEV_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "$: expected an object"));
    jev_error_clear(&err);
    assert_int_equal(jev_bench_load_file("no/such/file.json", &doc, &err), JEV_ERR_IO);
    assert_non_null(strstr(err.msg, "no/such/file.json"));
    assert_null(doc);
}

/* ---- medians ---- */

static void test_median_rule(void **state) {
    (void)state;
    double odd[] = {3.0, 1.0, 2.0};
    assert_true(jev_report_median(odd, 3) == 2.0);
    double even[] = {4.0, 1.0, 3.0, 2.0};
    assert_true(jev_report_median(even, 4) == 2.5); /* mean of the two middle ones */
    double one[] = {5.0};
    assert_true(jev_report_median(one, 1) == 5.0);
    double ties[] = {2.0, 2.0, 1.0, 1.0};
    assert_true(jev_report_median(ties, 4) == 1.5);
    assert_true(isnan(jev_report_median(NULL, 0)));

    /* in the report: 2 repeats of (1, shared) are 300 and 310 -> 305.0 */
    struct jev_bench_record *rec = make_record(2, 1.0, NULL);
    struct jev_report_source src = {jev_bench_record_json(rec), "even.json"};
    struct jev_report_params p = {&src, 1, NULL, NULL};
    struct jev_error err = {0};
    char *md = NULL;
    size_t len = 0;
    assert_int_equal(jev_report_markdown(&p, &md, &len, &err), JEV_OK);
    assert_non_null(strstr(md, "| 1 | shared | 305.0 | 10.0 | 20.0 | 5.0 | 2 | 1 | 1.50 | 3.28 | 2/2 |"));
    assert_non_null(strstr(md, "| 4 | generate_json | 405.0 |"));
    assert_non_null(strstr(md, "| 4 | generate_json | 400.0, 410.0 |"));
    assert_non_null(strstr(md, "even count: the mean of the two middle samples"));
    assert_non_null(strstr(md, "| Peak CPU GB |"));
    assert_non_null(strstr(md, "Example failed generate output (4 decisions, repeat 0):"));
    assert_non_null(strstr(md, "{\"q00\": \"maybe\"}"));
    free(md);
    jev_bench_record_free(rec);
}

/* ---- the seed's published table ---- */

/* Verbatim from seeds/001_628e0ba5312d519c.txt (tab-separated in the seed). */
static const char *const seed_medians[] = {
    "1\tgenerate_json\t810.6\t235.7\t443.6\t83.0\t12\t1\t2.60\t1.23\t3/3",
    "1\tindependent\t598.5\t235.7\t324.1\t4.8\t1\t1\t2.37\t1.67\t3/3",
    "1\tshared\t630.0\t240.0\t294.7\t37.6\t2\t1\t2.37\t1.59\t3/3",
    "4\tgenerate_json\t1123.0\t237.6\t508.5\t328.4\t38\t1\t2.60\t3.56\t0/3",
    "4\tindependent\t2351.5\t967.6\t1278.5\t14.9\t4\t4\t2.37\t1.70\t3/3",
    "4\tshared\t678.6\t239.7\t289.4\t108.4\t2\t1\t2.37\t5.89\t3/3",
    "16\tgenerate_json\t1276.9\t242.9\t880.5\t97.1\t14\t1\t2.68\t12.53\t0/3",
    "16\tindependent\t9313.5\t3877.9\t5085.7\t70.3\t16\t16\t2.37\t1.72\t3/3",
    "16\tshared\t1051.5\t246.9\t300.1\t438.1\t5\t1\t2.37\t15.22\t3/3",
    "64\tgenerate_json\t2732.2\t236.7\t2340.4\t79.6\t15\t1\t2.85\t23.42\t0/3",
    "64\tindependent\t37298.1\t15538.7\t20489.8\t291.1\t64\t64\t2.37\t1.72\t3/3",
    "64\tshared\t2399.1\t240.1\t292.6\t1777.2\t17\t1\t2.36\t26.68\t3/3",
};
static const char *const seed_samples[] = {
    "1\tgenerate_json\t813.5, 805.1, 810.6",
    "1\tindependent\t630.0, 598.5, 585.5",
    "1\tshared\t630.0, 599.5, 635.5",
    "4\tgenerate_json\t1099.1, 1134.8, 1123.0",
    "4\tindependent\t2351.5, 2324.1, 2370.9",
    "4\tshared\t692.1, 678.6, 674.6",
    "16\tgenerate_json\t1276.9, 1243.1, 1283.8",
    "16\tindependent\t10001.9, 9313.5, 9212.6",
    "16\tshared\t1052.8, 1051.5, 1021.3",
    "64\tgenerate_json\t2757.3, 2732.2, 2590.7",
    "64\tindependent\t37298.1, 37828.3, 36035.7",
    "64\tshared\t2399.1, 2390.8, 2409.4",
};
static const char *const seed_header =
    "Decisions\tPath\tTotal ms\tVision ms\tPrefill ms\tScoring/decode ms\tLM forwards\tVision forwards\tPeak Metal "
    "GB\tRequested decisions/s\tValid runs";

/* A Markdown table row "| a | b |" as "a\tb". */
static void md_row_cells(const char *line, size_t n, char *out, size_t size) {
    size_t o = 0;
    bool first = true;
    for (size_t i = 1; i < n && o + 1 < size;) { /* skip the leading '|' */
        size_t j = i;
        while (j < n && line[j] != '|')
            j++;
        if (j >= n)
            break;
        size_t a = i, b = j;
        while (a < b && line[a] == ' ')
            a++;
        while (b > a && line[b - 1] == ' ')
            b--;
        if (!first)
            out[o++] = '\t';
        first = false;
        for (size_t k = a; k < b && o + 1 < size; k++)
            out[o++] = line[k];
        i = j + 1;
    }
    out[o] = '\0';
}

/* The rows of the first table after `heading`, each as tab-joined cells. */
static int md_table(const char *md, const char *heading, char rows[][256], int max, char *header, size_t hsize) {
    const char *p = strstr(md, heading);
    assert_non_null(p);
    p = strstr(p, "\n|");
    assert_non_null(p);
    p++;
    int n = -2; /* the header, then the separator */
    while (*p == '|' && n < max) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (n == -2)
            md_row_cells(p, len, header, hsize);
        else if (n >= 0)
            md_row_cells(p, len, rows[n], sizeof rows[n]);
        n++;
        p += len + (e != NULL);
    }
    return n;
}

static void test_seed_tables_regenerate(void **state) {
    (void)state;
    struct jev_error err = {0};
    json_t *doc = NULL;
    assert_int_equal(jev_bench_load_file("bench/reference/m4-mlx.json", &doc, &err), JEV_OK);
    struct jev_report_source src = {doc, "bench/reference/m4-mlx.json"};
    struct jev_report_params p = {&src, 1, NULL, NULL};
    char *md = NULL;
    size_t len = 0;
    assert_int_equal(jev_report_markdown(&p, &md, &len, &err), JEV_OK);

    char rows[16][256], header[512];
    assert_int_equal(md_table(md, "### Medians", rows, 16, header, sizeof header), 12);
    assert_string_equal(header, seed_header);
    for (int i = 0; i < 12; i++)
        assert_string_equal(rows[i], seed_medians[i]);
    assert_int_equal(md_table(md, "### Every latency sample (ms)", rows, 16, header, sizeof header), 12);
    for (int i = 0; i < 12; i++)
        assert_string_equal(rows[i], seed_samples[i]);

    /* agreement lines and the three example failed outputs, as published */
    assert_non_null(strstr(md, "- 1 decisions: direct/shared maximum probability delta 0.00000009; argmax agreement "
                               "100.0%; generated/shared agreement 1.0."));
    assert_non_null(strstr(md, "- 4 decisions: direct/shared maximum probability delta 0.00000050; argmax agreement "
                               "100.0%; generated/shared agreement null."));
    assert_non_null(strstr(md, "- 16 decisions: direct/shared maximum probability delta 0.00000274;"));
    assert_non_null(strstr(md, "- 64 decisions: direct/shared maximum probability delta 0.00000274;"));
    assert_non_null(strstr(md,
                           "Example failed generate output (4 decisions, repeat 0):\n\n```text\n"
                           "{\"q00\": \"A dog\", \"q01\": \"White\", \"q02\": \"Outdoors\", \"q03\": \"Yes\"}\n```"));
    assert_non_null(strstr(md, "Example failed generate output (16 decisions, repeat 0):\n\n```text\n"
                               "{\"q00\": \"A dog\"}\n```"));
    assert_non_null(strstr(md, "Example failed generate output (64 decisions, repeat 0):\n\n```text\n"
                               "{\"other\": \"Another surface\"}\n```"));
    /* the medians-only columns are named, and the published totals agree with the samples */
    assert_non_null(strstr(md, "Medians only: the file publishes no samples for Vision ms, Prefill ms"));
    assert_null(strstr(md, "Warning:"));
    free(md);
    json_decref(doc);
}

/* ---- side by side ---- */

/* The report of p as Markdown (freed by the caller) and the rows of its side-by-side table;
 * returns the row count. */
static int side_by_side(const struct jev_report_params *p, char **md, char rows[][256], char *header, size_t hsize) {
    struct jev_error err = {0};
    size_t len = 0;
    assert_int_equal(jev_report_markdown(p, md, &len, &err), JEV_OK);
    return md_table(*md, "## Side by side", rows, 16, header, hsize);
}

static void test_side_by_side_ratio(void **state) {
    (void)state;
    struct jev_bench_record *jev = make_record(3, 1.0, NULL);
    struct jev_bench_record *peer = make_record(3, 2.5, "transformers");
    /* the peer first: the base is still jev's own record */
    struct jev_report_source src[2] = {{jev_bench_record_json(peer), "peer.json"},
                                       {jev_bench_record_json(jev), "jev.json"}};
    struct jev_report_params p = {src, 2, NULL, NULL};
    struct jev_error err = {0};
    char *md = NULL, rows[16][256], header[512];
    assert_int_equal(side_by_side(&p, &md, rows, header, sizeof header), 6);
    assert_string_equal(header, "Decisions\tPath\tjev cpu total ms\ttransformers cuda total ms\ttransformers cuda / "
                                "jev cpu");
    /* medians: (1, shared) jev 300 + 10 = 310, peer 2.5 x 310 = 775 */
    assert_string_equal(rows[2], "1\tshared\t310.0\t775.0\t2.50");
    assert_string_equal(rows[3], "4\tgenerate_json\t410.0\t1025.0\t2.50");
    free(md);

    /* with the reference: a third column pair; counts 16 and 64 only it has */
    json_t *ref = NULL;
    assert_int_equal(jev_bench_load_file("bench/reference/m4-mlx.json", &ref, &err), JEV_OK);
    struct jev_report_source rs = {ref, "bench/reference/m4-mlx.json"};
    p.reference = &rs;
    assert_int_equal(side_by_side(&p, &md, rows, header, sizeof header), 12);
    /* (1, generate_json): M4 810.6 / jev 110.0 = 7.369... */
    assert_string_equal(rows[0], "1\tgenerate_json\t110.0\t275.0\t2.50\t810.6\t7.37");
    assert_string_equal(rows[11], "64\tshared\tn/a\tn/a\tn/a\t2399.1\tn/a");
    free(md);
    json_decref(ref);
    jev_bench_record_free(jev);
    jev_bench_record_free(peer);
}

/* ---- SVG ---- */

/* Tags balance, every numeric attribute is a finite number; returns polylines and dashed ones. */
static void svg_check(const char *svg, int *polylines, int *dashed) {
    static const char *const numeric[] = {"x",  "y",  "x1", "y1",    "x2",     "y2",
                                          "cx", "cy", "r",  "width", "height", "points"};
    char stack[64][32];
    int depth = 0;
    *polylines = *dashed = 0;
    assert_true(strncmp(svg, "<?xml", 5) == 0);
    for (const char *p = strchr(svg, '<'); p; p = strchr(p + 1, '<')) {
        const char *end = strchr(p, '>');
        assert_non_null(end);
        if (p[1] == '?')
            continue;
        bool closing = p[1] == '/', self = end[-1] == '/';
        const char *name = p + 1 + closing;
        size_t nlen = strcspn(name, " />");
        assert_true(nlen > 0 && nlen < 32);
        if (closing) {
            assert_true(depth > 0);
            depth--;
            assert_true(strlen(stack[depth]) == nlen && !strncmp(stack[depth], name, nlen));
            continue;
        }
        if (nlen == 8 && !strncmp(name, "polyline", 8)) {
            (*polylines)++;
            const char *d = strstr(name, "stroke-dasharray=\"7 4\"");
            *dashed += d && d < end;
        }
        /* attributes: name="value" pairs up to the tag's end */
        for (const char *a = name + nlen; a < end;) {
            while (a < end && (*a == ' ' || *a == '/'))
                a++;
            const char *eq = memchr(a, '=', (size_t)(end - a));
            if (eq == NULL)
                break;
            size_t alen = (size_t)(eq - a);
            assert_true(eq[1] == '"');
            const char *v = eq + 2, *q = memchr(v, '"', (size_t)(end - v));
            assert_non_null(q);
            for (size_t k = 0; k < sizeof numeric / sizeof numeric[0]; k++) {
                if (strlen(numeric[k]) != alen || strncmp(numeric[k], a, alen))
                    continue;
                for (const char *t = v; t < q;) { /* "1.0,2.0 3.0,4.0" or "12" */
                    char *after;
                    double x = strtod(t, &after);
                    assert_true(after > t);
                    assert_true(isfinite(x));
                    t = after;
                    while (t < q && (*t == ',' || *t == ' '))
                        t++;
                }
            }
            a = q + 1;
        }
        if (!self) {
            assert_true(depth < 64);
            memcpy(stack[depth], name, nlen);
            stack[depth][nlen] = '\0';
            depth++;
        }
    }
    assert_int_equal(depth, 0);
}

/* Every sample's extra.gflop set to g (negative: the last sample of the first run left without one). */
static void set_gflop(struct jev_bench_record *rec, double g) {
    json_t *runs = json_object_get(jev_bench_record_json(rec), "runs");
    for (size_t r = 0; r < json_array_size(runs); r++) {
        json_t *samples = json_object_get(json_array_get(runs, r), "samples");
        for (size_t i = 0; i < json_array_size(samples); i++) {
            if (g < 0 && r == 0 && i + 1 == json_array_size(samples))
                continue;
            json_t *ex = json_object();
            json_object_set_new(ex, "gflop", json_real(fabs(g)));
            json_object_set_new(json_array_get(samples, i), "extra", ex);
        }
    }
}

/* The compute-rate section: GFLOP/s over the total and the model phases, medians of the samples, and
 * the share of the same-run peak; absent where a sample has no gflop. */
static void test_compute_rate(void **state) {
    (void)state;
    struct jev_bench_record *rec = make_record(3, 1.0, NULL);
    struct jev_report_source src = {jev_bench_record_json(rec), "jev.json"};
    struct jev_report_params p = {&src, 1, NULL, NULL};
    struct jev_error err = {0};
    char *md = NULL, rows[16][256], header[512];
    size_t len = 0;
    assert_int_equal(jev_report_markdown(&p, &md, &len, &err), JEV_OK);
    assert_null(strstr(md, "### Compute rate")); /* no gflop: no section */
    free(md);

    set_gflop(rec, -7.0); /* one sample without: still none (a median over a subset mixes populations) */
    assert_int_equal(jev_report_markdown(&p, &md, &len, &err), JEV_OK);
    assert_null(strstr(md, "### Compute rate"));
    free(md);

    set_gflop(rec, 7.0);
    assert_int_equal(jev_report_markdown(&p, &md, &len, &err), JEV_OK);
    assert_int_equal(md_table(md, "### Compute rate", rows, 16, header, sizeof header), 6);
    assert_string_equal(header, "Decisions\tPath\tGFLOP\tGFLOP/s, total\tGFLOP/s, model phases");
    /* (1, shared): totals 300 / 310 / 320 ms -> 7 GFLOP over 0.31 s = 22.6 (the median); phases 35 ms */
    assert_string_equal(rows[2], "1\tshared\t7.0\t22.6\t200.0");
    assert_string_equal(rows[4], "4\tindependent\t7.0\t8.6\t200.0");
    free(md);

    json_t *ex = json_object();
    json_object_set_new(ex, "fma_peak_gflops", json_real(400.0));
    json_object_set_new(ex, "fma_peak_isa", json_string("avx512"));
    json_object_set_new(ex, "fma_peak_threads", json_integer(2));
    json_object_set_new(json_object_get(jev_bench_record_json(rec), "environment"), "extra", ex);
    assert_int_equal(jev_report_markdown(&p, &md, &len, &err), JEV_OK);
    assert_int_equal(md_table(md, "### Compute rate", rows, 16, header, sizeof header), 6);
    assert_string_equal(header, "Decisions\tPath\tGFLOP\tGFLOP/s, total\tGFLOP/s, model phases\t% of peak, "
                                "total\t% of peak, model phases");
    assert_string_equal(rows[2], "1\tshared\t7.0\t22.6\t200.0\t6 %\t50 %");
    assert_non_null(strstr(md, "Peak = 400.0 GFLOP/s: the f32 FMA peak (avx512 vectors) on 2 threads"));
    free(md);
    jev_bench_record_free(rec);
}

static void test_svg_well_formed(void **state) {
    (void)state;
    struct jev_bench_record *jev = make_record(3, 1.0, NULL);
    struct jev_bench_record *peer = make_record(3, 2.5, "hf <peer> & \"co\"");
    json_t *ref = NULL;
    struct jev_error err = {0};
    assert_int_equal(jev_bench_load_file("bench/reference/m4-mlx.json", &ref, &err), JEV_OK);
    struct jev_report_source src[2] = {{jev_bench_record_json(jev), "jev.json"},
                                       {jev_bench_record_json(peer), "peer.json"}};
    struct jev_report_source rs = {ref, "m4 <&> \"ref\""};
    struct jev_report_params p = {src, 2, &rs, NULL};
    char *svg = NULL;
    size_t len = 0;
    assert_int_equal(jev_report_svg(&p, &svg, &len, &err), JEV_OK);
    assert_int_equal(strlen(svg), len);
    int polylines, dashed;
    svg_check(svg, &polylines, &dashed);
    assert_int_equal(polylines, 9); /* 3 sources x 3 paths */
    assert_int_equal(dashed, 3);    /* the reference's three paths */
    assert_non_null(strstr(svg, "mlx-vlm metal (reference): shared"));
    free(svg);

    /* one file, one count: the x range still has width, numbers stay finite */
    p.n_files = 1;
    p.reference = NULL;
    assert_int_equal(jev_report_svg(&p, &svg, &len, &err), JEV_OK);
    svg_check(svg, &polylines, &dashed);
    assert_int_equal(polylines, 3);
    assert_int_equal(dashed, 0);
    free(svg);
    json_decref(ref);
    jev_bench_record_free(jev);
    jev_bench_record_free(peer);
}

/* A copy of a record with only the rows of `decisions` (runs, agreement and settings.counts). */
static json_t *only_count(const json_t *doc, long long decisions) {
    json_t *c = json_deep_copy(doc);
    assert_non_null(c);
    json_t *runs = json_object_get(c, "runs"), *ag = json_object_get(c, "agreement");
    for (size_t i = json_array_size(runs); i-- > 0;)
        if (json_integer_value(json_object_get(json_array_get(runs, i), "decisions")) != decisions)
            json_array_remove(runs, i);
    for (size_t i = json_array_size(ag); i-- > 0;)
        if (json_integer_value(json_object_get(json_array_get(ag, i), "decisions")) != decisions)
            json_array_remove(ag, i);
    json_object_set_new(json_object_get(c, "settings"), "counts", json_pack("[I]", (json_int_t)decisions));
    return c;
}

/* One system measured in two runs with disjoint rows shares a column and a line per path; files
 * with the same rows stay apart (" #2"); a GPU peer's ratio is against jev on the GPU. */
static void test_side_by_side_series(void **state) {
    (void)state;
    struct jev_bench_record *jev = make_record(3, 1.0, NULL), *gpu = make_record(3, 0.1, NULL);
    struct jev_bench_record *peer = make_record(3, 0.25, "transformers");
    json_t *part1 = only_count(jev_bench_record_json(jev), 1), *part4 = only_count(jev_bench_record_json(jev), 4);
    json_t *gpu_doc = json_deep_copy(jev_bench_record_json(gpu));
    json_object_set_new(json_object_get(gpu_doc, "environment"), "backend", json_string("cuda"));
    struct jev_report_source src[4] = {{part1, "jev-1.json"},
                                       {part4, "jev-4.json"},
                                       {gpu_doc, "jev-cuda.json"},
                                       {jev_bench_record_json(peer), "peer.json"}};
    struct jev_report_params p = {src, 4, NULL, NULL};
    char *md = NULL, rows[16][256], header[512];
    assert_int_equal(side_by_side(&p, &md, rows, header, sizeof header), 6);
    assert_string_equal(header, "Decisions\tPath\tjev cpu total ms\tjev cuda total ms\tjev cuda / jev cpu\t"
                                "transformers cuda total ms\ttransformers cuda / jev cuda");
    /* (1, shared): cpu 310 from jev-1.json; cuda 31; peer 77.5 = 2.5 x jev cuda */
    assert_string_equal(rows[2], "1\tshared\t310.0\t31.0\t0.10\t77.5\t2.50");
    /* (4, shared): cpu 1210 from jev-4.json */
    assert_string_equal(rows[5], "4\tshared\t1210.0\t121.0\t0.10\t302.5\t2.50");
    assert_non_null(strstr(md, "- jev cpu: jev-1.json (machine: testhost); jev-4.json (machine: testhost)\n"));
    free(md);

    char *svg = NULL;
    size_t len = 0;
    struct jev_error err = {0};
    assert_int_equal(jev_report_svg(&p, &svg, &len, &err), JEV_OK);
    int polylines, dashed;
    svg_check(svg, &polylines, &dashed);
    assert_int_equal(polylines, 9); /* 3 series x 3 paths: the two cpu files draw one line per path */
    free(svg);

    /* the same rows twice: two columns, the second labelled #2 */
    src[1] = (struct jev_report_source){part1, "jev-1-again.json"};
    assert_int_equal(side_by_side(&p, &md, rows, header, sizeof header), 6);
    assert_string_equal(header, "Decisions\tPath\tjev cpu total ms\tjev cpu #2 total ms\tjev cpu #2 / jev cpu\t"
                                "jev cuda total ms\tjev cuda / jev cpu\ttransformers cuda total ms\t"
                                "transformers cuda / jev cuda");
    /* no jev cpu row at 4: its ratio is n/a, the peer still has jev cuda */
    assert_string_equal(rows[5], "4\tshared\tn/a\tn/a\tn/a\t121.0\tn/a\t302.5\t2.50");
    free(md);
    json_decref(part1);
    json_decref(part4);
    json_decref(gpu_doc);
    jev_bench_record_free(jev);
    jev_bench_record_free(gpu);
    jev_bench_record_free(peer);
}

/* ---- CLI ---- */

static void test_cli(void **state) {
    (void)state;
    const char *bin = getenv("JEV_JEV_BIN");
    assert_non_null(bin);
    char cmd[2048], md[512], svg[512], bad[512], log[512];
    snprintf(md, sizeof md, "%s/report-test/m4.md", test_dir());
    snprintf(svg, sizeof svg, "%s/report-test/m4.svg", test_dir());
    snprintf(bad, sizeof bad, "%s/report-test/bad.json", test_dir());
    snprintf(log, sizeof log, "%s/report-test/cli.log", test_dir());
    remove(md);
    remove(svg);
    snprintf(cmd, sizeof cmd, "'%s' report bench/reference/m4-mlx.json --output '%s' --svg '%s' 2>'%s'", bin, md, svg,
             log);
    assert_int_equal(system(cmd), 0);
    char *text = read_text(md);
    assert_non_null(text);
    assert_non_null(strstr(text, "| 64 | shared | 2399.1 | 240.1 | 292.6 | 1777.2 | 17 | 1 | 2.36 | 26.68 | 3/3 |"));
    assert_non_null(strstr(text, "![median total ms vs decisions, log-log](m4.svg)"));
    free(text);
    text = read_text(svg);
    assert_non_null(text);
    assert_non_null(strstr(text, "</svg>"));
    free(text);

    /* a bad file: exit 1, the message names the file and the JSON path; nothing written */
    FILE *f = fopen(bad, "w");
    assert_non_null(f);
    fputs("{\"schema\": \"jev-bench/1\", \"environment\": {}, \"settings\": {}, \"runs\": [], \"agreement\": []}", f);
    fclose(f);
    remove(md);
    snprintf(cmd, sizeof cmd, "'%s' report '%s' --output '%s' 2>'%s'", bin, bad, md, log);
    int rc = system(cmd);
    assert_true(WIFEXITED(rc) && WEXITSTATUS(rc) == 1);
    text = read_text(log);
    assert_non_null(text);
    assert_non_null(strstr(text, "bad.json: $.environment.peer: missing field"));
    free(text);
    struct stat st;
    assert_int_not_equal(stat(md, &st), 0);

    snprintf(cmd, sizeof cmd, "'%s' report --frobnicate 2>/dev/null", bin);
    rc = system(cmd);
    assert_true(WIFEXITED(rc) && WEXITSTATUS(rc) == 2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builder_round_trip),
        cmocka_unit_test(test_builder_refuses),
        cmocka_unit_test(test_bad_utf8_output_kept),
        cmocka_unit_test(test_env_detect),
        cmocka_unit_test(test_nvidia_driver),
        cmocka_unit_test(test_every_field_missing_or_mistyped),
        cmocka_unit_test(test_targeted_errors),
        cmocka_unit_test(test_median_rule),
        cmocka_unit_test(test_seed_tables_regenerate),
        cmocka_unit_test(test_side_by_side_ratio),
        cmocka_unit_test(test_side_by_side_series),
        cmocka_unit_test(test_svg_well_formed),
        cmocka_unit_test(test_compute_rate),
        cmocka_unit_test(test_cli),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
