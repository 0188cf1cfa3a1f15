/*
 * test-cli-decide.c - `jev decide`, `jev verify` and `jev bench` end to end
 * on the synthesized tiny model ($JEV_JEV_BIN): the table and its counters,
 * the --json response (exactly the request's ids, the model's name), the
 * inputs dump, generate_json's exit status agreeing with its body, the
 * verification record, a short benchmark whose record the schema's
 * validator accepts, fast mode's answers against exact's (or its refusal on
 * a CPU without AVX512-BF16), and every usage error exiting with status 2. Each
 * command opens one engine, sized before it is built (-v reports the sizes and
 * the engines and weight mirrors the process made).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "backend/registry.h"    // defines: jev_backend_find
#include "common/bench/schema.h" // defines: jev_bench_load_file
#include "cpu-flags.h"           // defines: cpu_fast_mode

static char g_dir[512];   /* $JEV_TEST_DIR/cli-decide */
static char g_model[600]; /* the tiny model */
static char g_work[600];  /* the workload with the small photo */

static const char *bin(void) { return getenv("JEV_JEV_BIN") ? getenv("JEV_JEV_BIN") : "build/jev"; }

static int setup(void **state) {
    (void)state;
    const char *tmp = getenv("JEV_TEST_DIR") ? getenv("JEV_TEST_DIR") : "build/test-data";
    snprintf(g_dir, sizeof g_dir, "%s/cli-decide", tmp);
    snprintf(g_model, sizeof g_model, "%s/tiny-hf", g_dir);
    snprintf(g_work, sizeof g_work, "%s/workload.json", g_dir);
    char cmd[2000];
    snprintf(cmd, sizeof cmd, "mkdir -p %s && %s synth --config configs/tiny.json --seed 1 --out %s --force >/dev/null",
             g_dir, bin(), g_model);
    if (system(cmd) != 0)
        return -1;
    json_error_t je;
    json_t *w = json_load_file("bench/dog-workload.json", 0, &je);
    if (!w)
        return -1;
    json_object_set_new(w, "image", json_string("tests/data/rgb8.png"));
    int rc = json_dump_file(w, g_work, 0);
    json_decref(w);
    return rc;
}

/* Runs `jev ARGS` (stdout, and stderr unless the args redirect it, into out); returns the exit status. */
static int jev(const char *args, char *out, size_t size) {
    char cmd[3000];
    snprintf(cmd, sizeof cmd, "%s %s%s", bin(), args, strstr(args, "2>") ? "" : " 2>&1");
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    size_t n = fread(out, 1, size - 1, f);
    out[n] = '\0';
    int st = pclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_decide(void **state) {
    (void)state;
    static char out[65536];
    char args[2000];
    /* the workload, 8 decisions: shared path, batches of 4 -> 1 + 2 LM forwards, 1 vision forward */
    snprintf(args, sizeof args, "decide --model %s --workload %s --decisions 8", g_model, g_work);
    assert_int_equal(jev(args, out, sizeof out), 0);
    assert_non_null(strstr(out, "shared path, label scoring: 8 questions"));
    assert_non_null(strstr(out, "LM forwards 3, vision forwards 1"));
    assert_non_null(strstr(out, "q07 "));
    /* independent, text scoring */
    snprintf(args, sizeof args, "decide --model %s --workload %s --decisions 3 --path independent --scoring text",
             g_model, g_work);
    assert_int_equal(jev(args, out, sizeof out), 0);
    assert_non_null(strstr(out, "independent path, text scoring (sum): 3 questions"));
    assert_non_null(strstr(out, "vision forwards 3"));
    /* --json: the System One response with exactly the request's ids */
    snprintf(args, sizeof args, "decide --model %s --request tests/data/decide/golden-text.json --json --batch all",
             g_model);
    assert_int_equal(jev(args, out, sizeof out), 0);
    json_error_t je;
    json_t *r = json_loads(out, 0, &je);
    if (!r)
        fail_msg("not JSON: %s\n%s", je.text, out);
    assert_string_equal(json_string_value(json_object_get(r, "model")), "tiny-hf");
    json_t *ans = json_object_get(r, "answers");
    assert_int_equal(json_object_size(ans), 5);
    const char *ids[] = {"is_refund", "team", "frustration", "city", "urgent"};
    for (int i = 0; i < 5; i++)
        assert_non_null(json_object_get(ans, ids[i]));
    assert_string_equal(json_string_value(json_object_get(json_object_get(ans, "team"), "type")), "choice");
    json_decref(r);
    /* the inputs dump */
    snprintf(args, sizeof args,
             "decide --model %s --request tests/data/decide/golden-image.json --image "
             "tests/data/rgb8.png --dump-ids %s/dump.json",
             g_model, g_dir);
    assert_int_equal(jev(args, out, sizeof out), 0);
    snprintf(args, sizeof args, "%s/dump.json", g_dir);
    json_t *d = json_load_file(args, 0, &je);
    assert_non_null(d);
    assert_string_equal(json_string_value(json_object_get(d, "format")), "jev-decide-inputs/1");
    assert_true(json_is_object(json_object_get(d, "image")));
    json_decref(d);
    /* generate_json: the exit status says whether the output met the schema, the body the same */
    snprintf(args, sizeof args,
             "decide --model %s --workload %s --decisions 2 --path generate --json "
             "--max-new-tokens 16 2>/dev/null",
             g_model, g_work);
    int st = jev(args, out, sizeof out);
    json_t *g = json_loads(out, 0, &je);
    assert_non_null(g);
    assert_int_equal(st != 0, json_object_get(g, "error") != NULL);
    json_decref(g);
}

/* One engine per command, built once with the planned sizes: 100 questions in one batch need 100
 * forked sequences, more than the default engine's 64 (light forks: the prefix alone holds a DeltaNet
 * state, so max_states is 1), and the plan comes from the model's own
 * tokenizer before any engine exists (a default engine to plan with, then a second of the right
 * size, was two engines and two weight mirrors: on CUDA two device copies of the weights). */
static void test_decide_one_engine(void **state) {
    (void)state;
    static char out[65536];
    char args[2000];
    snprintf(args, sizeof args, "decide --model %s --workload %s --decisions 100 --batch all -v 2>&1 >/dev/null",
             g_model, g_work);
    assert_int_equal(jev(args, out, sizeof out), 0);
    if (!strstr(out, "jev decide: engine: cpu backend") || !strstr(out, "max_batch 100, max_states 1, max_tokens 8192"))
        fail_msg("no engine line with the planned sizes:\n%s", out);
    if (!strstr(out, "jev decide: engines made 1, weight mirrors made 1"))
        fail_msg("not one engine and one weights mirror:\n%s", out);
    /* a small request gets the sequences it needs (a prefix and 3 forks), not the default 64; still one
     * engine */
    snprintf(args, sizeof args, "decide --model %s --workload %s --decisions 3 -v 2>&1 >/dev/null", g_model, g_work);
    assert_int_equal(jev(args, out, sizeof out), 0);
    assert_non_null(strstr(out, "max_batch 3, max_states 1, max_tokens 8192"));
    assert_non_null(strstr(out, "engines made 1, weight mirrors made 1"));
}

static void test_decide_errors(void **state) {
    (void)state;
    static char out[16384];
    char args[2000];
    assert_int_equal(jev("decide --request x.json", out, sizeof out), 2); /* no model */
    snprintf(args, sizeof args, "decide --model %s", g_model);
    assert_int_equal(jev(args, out, sizeof out), 2); /* no request */
    snprintf(args, sizeof args, "decide --model %s --workload %s --decisions 2 --path sideways", g_model, g_work);
    assert_int_equal(jev(args, out, sizeof out), 2);
    snprintf(args, sizeof args, "decide --model %s --workload %s --decisions 0", g_model, g_work);
    assert_int_equal(jev(args, out, sizeof out), 2);
    snprintf(args, sizeof args, "decide --model %s --workload %s --decisions 2 --batch -3", g_model, g_work);
    assert_int_equal(jev(args, out, sizeof out), 2);
    snprintf(args, sizeof args, "decide --model %s --request /nonexistent.json", g_model);
    assert_int_equal(jev(args, out, sizeof out), 1);
    assert_non_null(strstr(out, "cannot read"));
    snprintf(args, sizeof args, "%s/bad.json", g_dir);
    FILE *f = fopen(args, "w");
    assert_non_null(f);
    fputs("{\"state\":\"s\",\"questions\":{\"a\":{\"type\":\"score\",\"instructions\":\"x\",\"criteria\":[\"1\"]}}}",
          f);
    fclose(f);
    snprintf(args, sizeof args, "decide --model %s --request %s/bad.json", g_model, g_dir);
    assert_int_equal(jev(args, out, sizeof out), 1);
    assert_non_null(strstr(out, "refused (422 unprocessable_entity_error)"));
    /* --precision: a name outside exact|fast is a usage error; fast where the CPU backend cannot run it
     * (JEV_CPU_BF16=none here; test_decide_fast for a CPU without AVX512-BF16) is refused at the engine,
     * saying what to use instead (never answered in exact under fast's name); exact is the default */
    snprintf(args, sizeof args, "decide --model %s --workload %s --decisions 2 --precision bf16", g_model, g_work);
    assert_int_equal(jev(args, out, sizeof out), 2);
    assert_non_null(strstr(out, "--precision"));
    assert_int_equal(setenv("JEV_CPU_BF16", "none", 1), 0);
    snprintf(args, sizeof args, "decide --model %s --workload %s --decisions 2 --precision fast", g_model, g_work);
    int st = jev(args, out, sizeof out);
    unsetenv("JEV_CPU_BF16");
    assert_int_equal(st, 1);
    if (!strstr(out, "cpu backend: precision \"fast\"") || !strstr(out, "use precision exact"))
        fail_msg("jev decide --precision fast under JEV_CPU_BF16=none: %s", out);
    snprintf(args, sizeof args, "decide --model %s --workload %s --decisions 2 --precision exact -v 2>&1 >/dev/null",
             g_model, g_work);
    assert_int_equal(jev(args, out, sizeof out), 0);
    assert_non_null(strstr(out, "cpu backend, exact precision,"));
}

/* The largest |fast - exact| of the probabilities of two --json responses to the same request (fails
 * unless both hold the same answers and at least one probability); *same: every one bit-identical. */
static double max_probability_delta(const char *exact, const char *fast, bool *same) {
    json_error_t je;
    json_t *a = json_loads(exact, 0, &je), *b = json_loads(fast, 0, &je);
    if (!a || !b)
        fail_msg("not JSON:\n%s\n%s", exact, fast);
    json_t *aa = json_object_get(a, "answers"), *ba = json_object_get(b, "answers"), *q;
    const char *id;
    double worst = 0;
    int compared = 0;
    *same = true;
    assert_int_equal(json_object_size(aa), json_object_size(ba));
    json_object_foreach(aa, id, q) {
        json_t *pa = json_object_get(q, "probabilities"),
               *pb = json_object_get(json_object_get(ba, id), "probabilities");
        const char *label;
        json_t *v;
        json_object_foreach(pa, label, v) {
            json_t *w = json_object_get(pb, label);
            if (!json_is_number(v) || !json_is_number(w))
                fail_msg("answer %s, label %s: no probability in both", id, label);
            double d = fabs(json_number_value(v) - json_number_value(w));
            worst = d > worst ? d : worst;
            *same = *same && json_number_value(v) == json_number_value(w);
            compared++;
        }
    }
    assert_true(compared > 0);
    json_decref(a);
    json_decref(b);
    return worst;
}

/* Fast mode on the CPU backend, where the CPU has AVX512-BF16 (tests/cpu-flags.h): jev decide answers
 * the 8 questions of the workload with probabilities within 0.01 of exact's, and not exact's bits (bf16
 * products did run); measured 3.6e-4 on this model, while a product that wrote each token's outputs to
 * its neighbour's row moved them by 0.065. jev verify runs in fast (its comparison then holds the
 * bf16 LM head against the f32 scoring rows: --tolerance 0.01), jev bench records fast against exact.
 * Elsewhere each is refused at the engine, naming the missing feature. */
static void test_decide_fast(void **state) {
    (void)state;
    static char exact[65536], fast[65536], out[65536];
    char args[2000], path[700];
    const bool can = cpu_fast_mode();
    snprintf(args, sizeof args, "decide --model %s --workload %s --decisions 8 --json 2>/dev/null", g_model, g_work);
    assert_int_equal(jev(args, exact, sizeof exact), 0);
    snprintf(args, sizeof args, "decide --model %s --workload %s --decisions 8 --precision fast --json", g_model,
             g_work);
    if (!can) {
        assert_int_equal(jev(args, out, sizeof out), 1);
        if (!strstr(out, "cpu backend: precision \"fast\"") || !strstr(out, "AVX512-BF16") ||
            !strstr(out, "use precision exact"))
            fail_msg("jev decide --precision fast on a CPU without AVX512-BF16: %s", out);
        snprintf(args, sizeof args, "verify --model %s --precision fast", g_model);
        assert_int_equal(jev(args, out, sizeof out), 1);
        assert_non_null(strstr(out, "AVX512-BF16"));
        return;
    }
    strcat(args, " 2>/dev/null");
    assert_int_equal(jev(args, fast, sizeof fast), 0);
    bool same = false;
    double d = max_probability_delta(exact, fast, &same);
    printf("  jev decide --precision fast: largest probability delta against exact %.3g\n", d);
    assert_false(same);
    if (!(d <= 0.01))
        fail_msg("fast moved a probability by %.3g (bound 0.01)", d);
    snprintf(args, sizeof args, "decide --model %s --workload %s --decisions 2 --precision fast -v 2>&1 >/dev/null",
             g_model, g_work);
    assert_int_equal(jev(args, out, sizeof out), 0);
    assert_non_null(strstr(out, "cpu backend, fast precision,"));
    snprintf(path, sizeof path, "%s/verification-fast.json", g_dir);
    snprintf(args, sizeof args, "verify --model %s --output %s --precision fast --tolerance 0.01", g_model, path);
    assert_int_equal(jev(args, out, sizeof out), 0);
    assert_non_null(strstr(out, "jev verify (fast):"));
    json_error_t je;
    json_t *v = json_load_file(path, 0, &je);
    assert_non_null(v);
    assert_string_equal(json_string_value(json_object_get(v, "precision")), "fast");
    json_decref(v);
    snprintf(path, sizeof path, "%s/bench-fast.json", g_dir);
    snprintf(args, sizeof args, "bench --model %s --workload %s --counts 1 --repeats 1 --output %s --precision fast",
             g_model, g_work, path);
    assert_int_equal(jev(args, out, sizeof out), 0);
    assert_non_null(strstr(out, "fast vs exact, shared: max probability delta"));
    json_t *rec = NULL;
    struct jev_error err = {0};
    if (jev_bench_load_file(path, &rec, &err) != JEV_OK)
        fail_msg("record: %s", err.msg);
    assert_string_equal(json_string_value(json_object_get(json_object_get(rec, "settings"), "precision")), "fast");
    json_decref(rec);
}

static void test_verify(void **state) {
    (void)state;
    static char out[16384];
    char args[2000], path[700];
    snprintf(path, sizeof path, "%s/verification.json", g_dir);
    snprintf(args, sizeof args, "verify --model %s --output %s -v", g_model, path);
    assert_int_equal(jev(args, out, sizeof out), 0);
    assert_non_null(strstr(out, "-> PASS"));
    assert_non_null(strstr(out, "jev verify: engines made 1, weight mirrors made 1"));
    json_error_t je;
    json_t *v = json_load_file(path, 0, &je);
    assert_non_null(v);
    assert_true(json_is_true(json_object_get(json_object_get(v, "summary"), "pass")));
    assert_int_equal(json_array_size(json_object_get(v, "cases")), 4);
    json_decref(v);
    snprintf(args, sizeof args, "verify --model %s --norm median", g_model);
    assert_int_equal(jev(args, out, sizeof out), 2);
    /* the mode is the engine's, in the record and the summary line; fast is refused on the CPU */
    assert_non_null(strstr(out, "--precision M"));
    v = json_load_file(path, 0, &je);
    assert_non_null(v);
    assert_string_equal(json_string_value(json_object_get(v, "precision")), "exact");
    json_decref(v);
    snprintf(args, sizeof args, "verify --model %s --output %s --precision exact", g_model, path);
    assert_int_equal(jev(args, out, sizeof out), 0);
    assert_non_null(strstr(out, "jev verify (exact):"));
    assert_int_equal(setenv("JEV_CPU_BF16", "none", 1), 0); /* fast where the CPU backend cannot: refused */
    snprintf(args, sizeof args, "verify --model %s --output %s --precision fast", g_model, path);
    int st = jev(args, out, sizeof out);
    unsetenv("JEV_CPU_BF16");
    assert_int_equal(st, 1);
    assert_non_null(strstr(out, "cpu backend: precision \"fast\""));
}

static void test_bench(void **state) {
    (void)state;
    static char out[65536];
    char args[4000], path[700];
    snprintf(path, sizeof path, "%s/bench.json", g_dir);
    snprintf(args, sizeof args,
             "bench --model %s --workload %s --counts 1 3 --repeats 1 --output %s --synthetic yes -v", g_model, g_work,
             path);
    assert_int_equal(jev(args, out, sizeof out), 0);
    assert_non_null(strstr(out, "jev bench: engines made 1, weight mirrors made 1"));
    assert_non_null(strstr(out, "6 samples"));
    assert_non_null(strstr(out, "generate_json"));
    assert_non_null(strstr(out, "argmax agreement 100.0%"));
    json_t *rec = NULL;
    struct jev_error err = {0};
    if (jev_bench_load_file(path, &rec, &err) != JEV_OK)
        fail_msg("record: %s", err.msg);
    assert_non_null(strstr(json_string_value(json_object_get(rec, "note")), "meaningless"));
    /* the engine's slice as the engine chose it: the CPU backend's 512 when not told */
    json_t *set = json_object_get(json_object_get(rec, "settings"), "prefill_chunk");
    assert_int_equal(json_integer_value(set), 512);
    json_decref(rec);
    /* environment.extra.knobs: the variables that change the computation, those set (exact mode does not
     * read JEV_CPU_BF16, so setting it changes nothing here but the record) */
    assert_int_equal(setenv("JEV_CPU_BF16", "avx512", 1), 0);
    snprintf(args, sizeof args, "bench --model %s --workload %s --counts 1 --repeats 1 --output %s --paths shared",
             g_model, g_work, path);
    int knob_rc = jev(args, out, sizeof out);
    unsetenv("JEV_CPU_BF16");
    assert_int_equal(knob_rc, 0);
    if (jev_bench_load_file(path, &rec, &err) != JEV_OK)
        fail_msg("record: %s", err.msg);
    json_t *knobs = json_object_get(json_object_get(json_object_get(rec, "environment"), "extra"), "knobs");
    assert_non_null(knobs);
    assert_string_equal(json_string_value(json_object_get(knobs, "JEV_CPU_BF16")), "avx512");
    assert_null(json_object_get(knobs, "JEV_CUDA_EXACT_GEMM"));
    json_decref(rec);
    /* --step-tokens sets the engine's slice, and the record says so (the -v line names the engine's) */
    snprintf(args, sizeof args,
             "bench --model %s --workload %s --counts 1 --repeats 1 --output %s --synthetic yes --step-tokens 64 -v",
             g_model, g_work, path);
    assert_int_equal(jev(args, out, sizeof out), 0);
    assert_non_null(strstr(out, "prefill_chunk 64"));
    if (jev_bench_load_file(path, &rec, &err) != JEV_OK)
        fail_msg("record: %s", err.msg);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(rec, "settings"), "prefill_chunk")), 64);
    json_decref(rec);
    snprintf(args, sizeof args, "bench --model %s --step-tokens 8", g_model);
    assert_int_equal(jev(args, out, sizeof out), 2);
    /* --paths: only those paths are measured, and the record's settings list them */
    snprintf(args, sizeof args,
             "bench --model %s --workload %s --counts 1 2 --repeats 2 --output %s --synthetic yes --paths "
             "shared,independent",
             g_model, g_work, path);
    assert_int_equal(jev(args, out, sizeof out), 0);
    assert_non_null(strstr(out, "8 samples"));
    assert_null(strstr(out, "generate_json"));
    if (jev_bench_load_file(path, &rec, &err) != JEV_OK)
        fail_msg("record: %s", err.msg);
    json_t *paths = json_object_get(json_object_get(rec, "settings"), "paths");
    assert_int_equal(json_array_size(paths), 2);
    assert_string_equal(json_string_value(json_array_get(paths, 0)), "independent");
    assert_string_equal(json_string_value(json_array_get(paths, 1)), "shared");
    size_t i;
    json_t *run;
    json_array_foreach(json_object_get(rec, "runs"), i, run)
        assert_string_not_equal(json_string_value(json_object_get(run, "path")), "generate_json");
    json_decref(rec);
    snprintf(args, sizeof args, "bench --model %s --paths shared,shared", g_model);
    assert_int_equal(jev(args, out, sizeof out), 2);
    snprintf(args, sizeof args, "bench --model %s --paths shared,", g_model);
    assert_int_equal(jev(args, out, sizeof out), 2);
    /* usage errors */
    snprintf(args, sizeof args, "bench --model %s --counts 4 2", g_model);
    assert_int_equal(jev(args, out, sizeof out), 2);
    /* a backend this build cannot run, or no backend at all: refused at model load, by name */
    snprintf(args, sizeof args, "bench --model %s --backend cuda --counts 1 --repeats 1", g_model);
    if (!jev_backend_find("cuda")) { /* (a CUDA build would run it where there is a device) */
        assert_int_equal(jev(args, out, sizeof out), 1);
        assert_non_null(strstr(out, "make CUDA=1"));
    }
    snprintf(args, sizeof args, "bench --model %s --backend tpu --counts 1 --repeats 1", g_model);
    assert_int_equal(jev(args, out, sizeof out), 1);
    assert_non_null(strstr(out, "expected cpu, cuda or cuda:N"));
    snprintf(args, sizeof args, "bench --model %s --batch 0", g_model);
    assert_int_equal(jev(args, out, sizeof out), 2);
    snprintf(args, sizeof args, "bench --model %s --repeats", g_model);
    assert_int_equal(jev(args, out, sizeof out), 2);
    /* fast where the CPU backend cannot run it: refused before anything is measured, saying what to use */
    assert_int_equal(setenv("JEV_CPU_BF16", "none", 1), 0);
    snprintf(args, sizeof args, "bench --model %s --workload %s --counts 1 --repeats 1 --output %s --precision fast",
             g_model, g_work, path);
    int st = jev(args, out, sizeof out);
    unsetenv("JEV_CPU_BF16");
    assert_int_equal(st, 1);
    assert_non_null(strstr(out, "cpu backend: precision \"fast\""));
    snprintf(args, sizeof args, "bench --model %s --precision half", g_model);
    assert_int_equal(jev(args, out, sizeof out), 2);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_decide),        cmocka_unit_test(test_decide_one_engine),
                                       cmocka_unit_test(test_decide_errors), cmocka_unit_test(test_decide_fast),
                                       cmocka_unit_test(test_verify),        cmocka_unit_test(test_bench)};
    return cmocka_run_group_tests(tests, setup, NULL);
}
