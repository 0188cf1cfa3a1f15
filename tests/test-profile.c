/*
 * test-profile.c - the op profiler (backend/profile.h): the timed ops give
 * the inner ops' results bit for bit, count their calls and flops per slot,
 * and the report lists them and then starts over. Each profiler keeps its
 * own counts and calls its own inner instance: two profilers over two
 * backends (the CPU and a planted one) at once, and two engines under
 * JEV_PROFILE=1 (two CPU engines and one on the planted backend) each count
 * only their own ops.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h" // defines: jev_cpu_ops, jev_cpu_backend_new
#include "backend/profile.h" // defines: jev_profile_new, jev_profile_report, jev_profile_calls
#include "model/engine.h"    // defines: struct jev_engine, jev_engine_init_on
#include "model/lm.h"        // defines: jev_lm_forward, jev_lm_text_positions
#include "tiny-model.h"      // defines: tiny_model_open

/* The report of p's accumulated table as a string (caller frees). */
static char *report_text(struct jev_profile *p) {
    FILE *f = tmpfile();
    assert_non_null(f);
    jev_profile_report(p, f);
    long n = ftell(f);
    assert_true(n > 0);
    char *s = calloc(1, (size_t)n + 1);
    assert_non_null(s);
    rewind(f);
    assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    return s;
}

static void test_wrapped_ops(void **state) {
    (void)state;
    struct jev_backend *be = jev_cpu_backend_new(NULL);
    assert_non_null(be);
    struct jev_profile *prof = NULL;
    struct jev_error err = {0};
    assert_int_equal(jev_profile_new(&jev_cpu_ops, be, &prof, &err), JEV_OK);
    const struct jev_ops *p = jev_profile_ops(prof);
    struct jev_backend *pb = jev_profile_backend(prof);
    assert_string_equal(p->name, "cpu");
    assert_true(p->host_memory);
    assert_int_equal(p->min_batched_tokens,
                     jev_cpu_ops.min_batched_tokens); /* the batch reads it through the profiler */
    assert_null(p->status); /* the CPU cannot fail and counts no device bytes: the profiler says the same */
    assert_null(p->memory);
    /* the mode goes to the inner instance: fast reaches it (where the CPU has no AVX512-BF16, its
     * refusal comes back), and JEV_CPU_BF16=none's refusal comes back through the profiler */
    assert_non_null(p->set_precision);
    assert_int_equal(p->set_precision(pb, JEV_PRECISION_EXACT, &err), JEV_OK);
    assert_int_equal(p->set_precision(pb, JEV_PRECISION_FAST, &err), jev_cpu_bf16_hw() ? JEV_OK : JEV_ERR_UNSUPPORTED);
    assert_int_equal(be->bf16 != JEV_CPU_BF16_NONE, jev_cpu_bf16_hw() != JEV_CPU_BF16_NONE);
    assert_int_equal(p->set_precision(pb, JEV_PRECISION_EXACT, &err), JEV_OK);
    assert_int_equal(be->bf16, JEV_CPU_BF16_NONE);
    struct jev_error refused = {0};
    assert_int_equal(setenv("JEV_CPU_BF16", "none", 1), 0);
    enum jev_status st = p->set_precision(pb, JEV_PRECISION_FAST, &refused);
    unsetenv("JEV_CPU_BF16");
    assert_int_equal(st, JEV_ERR_UNSUPPORTED);
    assert_non_null(strstr(refused.msg, "cpu backend"));

    /* a 16 x 24 f32 matrix against 5 tokens (the many-token regime) and 1 token */
    enum { R = 16, C = 24, T = 5 };
    float w[R * C], x[T * C], want[T * R], got[T * R];
    for (int i = 0; i < R * C; i++)
        w[i] = (float)((i * 37) % 11) / 11.0f - 0.5f;
    for (int i = 0; i < T * C; i++)
        x[i] = (float)((i * 13) % 7) / 7.0f - 0.5f;
    struct jev_matrix m = {.type = JEV_MTYPE_F32, .rows = R, .cols = C, .data = w, .name = "w"};
    jev_cpu_ops.matmul(be, &m, x, T, want);
    p->matmul(pb, &m, x, T, got);
    assert_memory_equal(want, got, sizeof want);
    jev_cpu_ops.matmul(be, &m, x, 1, want); /* another regime: compare like with like */
    p->matmul(pb, &m, x, 1, got);
    assert_memory_equal(want, got, R * sizeof(float));
    float y1[T * C], y2[T * C], g[C];
    for (int i = 0; i < C; i++)
        g[i] = 1.0f + 0.01f * (float)i;
    jev_cpu_ops.rmsnorm(be, x, g, T, C, 1e-6f, y1);
    p->rmsnorm(pb, x, g, T, C, 1e-6f, y2);
    p->rmsnorm(pb, x, g, T, C, 1e-6f, y2);
    assert_memory_equal(y1, y2, sizeof y1);
    /* memory ops go through to the inner instance, untimed */
    float *buf = p->alloc(pb, sizeof y1);
    assert_non_null(buf);
    p->upload(pb, buf, y1, sizeof y1);
    p->download(pb, y2, buf, sizeof y1);
    assert_memory_equal(y1, y2, sizeof y1);
    p->free(pb, buf);

    char *s = report_text(prof);
    printf("%s", s);
    /* slot, calls: the many-token product once, the one-token product once, rmsnorm twice */
    const char *many = strstr(s, "matmul (3+ tokens)"), *few = strstr(s, "matmul (1-2 tokens)"),
               *norm = strstr(s, "rmsnorm");
    assert_non_null(strstr(s, "jev profile (cpu backend)"));
    assert_non_null(many);
    assert_non_null(few);
    assert_non_null(norm);
    long calls = 0;
    assert_int_equal(sscanf(many + strlen("matmul (3+ tokens)"), "%ld", &calls), 1);
    assert_int_equal(calls, 1);
    assert_int_equal(sscanf(few + strlen("matmul (1-2 tokens)"), "%ld", &calls), 1);
    assert_int_equal(calls, 1);
    assert_int_equal(sscanf(norm + strlen("rmsnorm"), "%ld", &calls), 1);
    assert_int_equal(calls, 2);
    assert_null(strstr(s, "gelu")); /* ops never called are not listed */
    free(s);

    /* the report reset the table */
    assert_int_equal(jev_profile_calls(prof, "rmsnorm"), 0);
    assert_int_equal(jev_profile_calls(prof, "no such op"), -1);
    s = report_text(prof);
    assert_null(strstr(s, "rmsnorm"));
    free(s);
    jev_profile_free(prof);
    jev_cpu_backend_free(be);
}

/* ---- a planted second backend: the CPU's ops under another name, counting what reaches it ---- */

static struct jev_ops planted_ops;
static int64_t planted_calls;            /* compute ops that reached the planted backend */
static struct jev_backend *planted_seen; /* the instance its last op received */

static void planted_add(struct jev_backend *be, float *x, const float *y, int64_t n) {
    planted_calls++;
    planted_seen = be;
    jev_cpu_ops.add(be, x, y, n);
}

static void planted_rmsnorm(struct jev_backend *be, const float *x, const float *w, int64_t n, int32_t d, float eps,
                            float *y) {
    planted_calls++;
    planted_seen = be;
    jev_cpu_ops.rmsnorm(be, x, w, n, d, eps, y);
}

static void planted_matmul(struct jev_backend *be, const struct jev_matrix *w, const float *x, int64_t n, float *y) {
    planted_calls++;
    planted_seen = be;
    jev_cpu_ops.matmul(be, w, x, n, y);
}

static void plant(void) {
    planted_ops = jev_cpu_ops;
    planted_ops.name = "planted";
    planted_ops.add = planted_add;
    planted_ops.rmsnorm = planted_rmsnorm;
    planted_ops.matmul = planted_matmul;
    planted_calls = 0;
    planted_seen = NULL;
}

/* Two profilers at once, over the CPU and over the planted backend: interleaved calls land in the right
 * instance and the right profiler's slots (one process-wide table sent both profilers' ops to whichever
 * backend was wrapped last and mixed their counts). */
static void test_two_profilers(void **state) {
    (void)state;
    plant();
    struct jev_backend *be1 = jev_cpu_backend_new(NULL), *be2 = jev_cpu_backend_new(NULL);
    assert_true(be1 && be2);
    struct jev_profile *a = NULL, *b = NULL;
    struct jev_error err = {0};
    assert_int_equal(jev_profile_new(&jev_cpu_ops, be1, &a, &err), JEV_OK);
    assert_int_equal(jev_profile_new(&planted_ops, be2, &b, &err), JEV_OK);
    const struct jev_ops *pa = jev_profile_ops(a), *pb = jev_profile_ops(b);
    struct jev_backend *ia = jev_profile_backend(a), *ib = jev_profile_backend(b);
    assert_string_equal(pa->name, "cpu");
    assert_string_equal(pb->name, "planted");

    enum { N = 8 };
    float x[N] = {1, 2, 3, 4, 5, 6, 7, 8}, y[N] = {1, 1, 1, 1, 1, 1, 1, 1}, w[N], out[N];
    for (int i = 0; i < N; i++)
        w[i] = 1.0f;
    for (int k = 0; k < 3; k++) {
        pa->add(ia, x, y, N); /* the CPU's: never the planted backend */
        if (k < 2)
            pb->rmsnorm(ib, x, w, 1, N, 1e-6f, out);
    }
    assert_int_equal(planted_calls, 2);
    pb->add(ib, x, y, N);
    assert_int_equal(planted_calls, 3);
    assert_ptr_equal(planted_seen, be2); /* the planted backend got its own instance, not the profiler */
    assert_true(x[0] == 5.0f);           /* four adds of 1, whichever table ran them */

    assert_int_equal(jev_profile_calls(a, "add"), 3);
    assert_int_equal(jev_profile_calls(a, "rmsnorm"), 0);
    assert_int_equal(jev_profile_calls(b, "add"), 1);
    assert_int_equal(jev_profile_calls(b, "rmsnorm"), 2);
    char *sa = report_text(a), *sb = report_text(b);
    assert_non_null(strstr(sa, "jev profile (cpu backend)"));
    assert_non_null(strstr(sb, "jev profile (planted backend)"));
    assert_null(strstr(sa, "rmsnorm"));
    free(sa);
    free(sb);
    jev_profile_free(a);
    jev_profile_free(b);
    jev_cpu_backend_free(be1);
    jev_cpu_backend_free(be2);
}

/* n tokens of ids through e on a fresh sequence, logits of the last one. */
static void forward(struct jev_engine *e, const int32_t *ids, int32_t n) {
    struct jev_error err = {0};
    struct jev_seq *seq = NULL;
    assert_int_equal(jev_seq_new(&e->state, &seq, &err), JEV_OK);
    int32_t pos[3 * 8], last = n - 1;
    assert_true(n <= 8);
    jev_lm_text_positions(seq, n, pos);
    float *logits = malloc((size_t)e->model->config.text.vocab_size * sizeof(float));
    assert_non_null(logits);
    struct jev_lm_batch b = {.n_tokens = n,
                             .ids = ids,
                             .pos = pos,
                             .n_runs = 1,
                             .seqs = &seq,
                             .seq_len = &n,
                             .n_out = 1,
                             .out_idx = &last,
                             .logits = logits};
    if (jev_lm_forward(&e->lm, &b, &err) != JEV_OK)
        fail_msg("forward: %s", err.msg);
    free(logits);
    jev_seq_free(seq);
}

/* JEV_PROFILE=1: every engine gets its own profiler. Two CPU engines of one model and one engine on the
 * planted backend run different numbers of forwards at the same time; each profile counts its own. */
static void test_engines_profile_apart(void **state) {
    (void)state;
    setenv("JEV_PROFILE", "1", 1);
    plant();
    char dir[512];
    struct jev_model *model = NULL;
    assert_int_equal(tiny_model_open("profile", 1, dir, sizeof dir, &model), 0);
    struct jev_engine_params ep = jev_engine_default_params();
    ep.max_tokens = 256;
    ep.max_batch = 2;
    struct jev_engine *e1 = NULL, *e2 = NULL, *e3 = NULL;
    assert_int_equal(jev_engine_init(model, &ep, &e1), JEV_OK);
    assert_int_equal(jev_engine_init(model, &ep, &e2), JEV_OK);
    struct jev_backend *be3 = jev_cpu_backend_new(NULL);
    assert_non_null(be3);
    assert_int_equal(jev_engine_init_on(model, &ep, &planted_ops, be3, &e3), JEV_OK);
    assert_true(e1->profile && e2->profile && e3->profile);
    assert_true(e1->profile != e2->profile);
    assert_string_equal(e3->ops->name, "planted");

    int32_t ids[4] = {1, 2, 3, 4};
    forward(e1, ids, 4);
    forward(e2, ids, 2);
    forward(e2, ids, 3);
    assert_int_equal(planted_calls, 0); /* the CPU engines never reached the planted backend */
    forward(e3, ids, 1);
    forward(e3, ids, 1);
    forward(e3, ids, 1);
    assert_true(planted_calls > 0);

    /* one embedding lookup per forward */
    assert_int_equal(jev_profile_calls(e1->profile, "embed"), 1);
    assert_int_equal(jev_profile_calls(e2->profile, "embed"), 2);
    assert_int_equal(jev_profile_calls(e3->profile, "embed"), 3);
    /* e1's 4-token prefill has many-token products; e3's one-token forwards have none */
    assert_true(jev_profile_calls(e1->profile, "matmul (3+ tokens)") > 0);
    assert_int_equal(jev_profile_calls(e3->profile, "matmul (3+ tokens)"), 0);
    int64_t e3_matmuls = jev_profile_calls(e3->profile, "matmul (1-2 tokens)");
    assert_true(e3_matmuls > 0);
    assert_true(planted_calls >= e3_matmuls); /* every one of e3's matmuls ran on the planted backend */

    jev_engine_free(e1); /* each prints its own table to stderr */
    jev_engine_free(e2);
    jev_engine_free(e3);
    jev_cpu_backend_free(be3);
    jev_model_free(model);
    unsetenv("JEV_PROFILE");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wrapped_ops),
        cmocka_unit_test(test_two_profilers),
        cmocka_unit_test(test_engines_profile_apart),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
