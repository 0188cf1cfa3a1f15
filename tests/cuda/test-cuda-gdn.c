/*
 * test-cuda-gdn.c - CUDA parity of the Gated DeltaNet ops (backend/cuda/cuda-gdn.cu): gdn_conv and gdn_rule against
 * the CPU op table on the same inputs and initial states, outputs and updated states compared (NMSE; the conv
 * window is a copy, so it must match exactly).
 *
 * Runs of uneven lengths (1, 3, 64, 65, 130 tokens: one chunk, one chunk plus one, more than two chunks), chunked and
 * recurrent runs mixed, fresh (zero) and carried (non-zero) states, grouped value heads, small, odd and the 0.8B
 * model's dims, slow and fast decay. The GPU takes the chunked form for non-recurrent runs of 64 or more tokens and
 * the recurrence for the rest; the CPU the chunked form wherever a run is not recurrent, so the short runs'
 * comparisons also check that the two forms agree. A run longer than the GPU's group of chunk records (about 13
 * chunks at the model's dims) continues in the next group: the long-run case covers a run split across groups
 * and groups that hold several runs.
 */
#include "cuda-test.h"

/* ---- conv ---- */

/* One conv case: runs of len[] tokens over C channels, kernel K; run r starts from a zero window when fresh[r].
 * separate: the GPU's runs read their windows from conv_in (a light fork's parent's, ops.h) and write them to
 * other buffers, which must equal the CPU's in-place update while the inputs stay as they were. */
static void conv_case(int32_t C, int32_t K, const int32_t *len, const bool *fresh, int32_t n_runs, bool separate) {
    int64_t rows = 0;
    for (int32_t r = 0; r < n_runs; r++)
        rows += len[r];
    int64_t win = (int64_t)(K - 1) * C;
    float *mixed = ct_host(rows * C), *taps = ct_host((int64_t)C * K), *windows = ct_host(n_runs * win);
    ct_fill(mixed, rows * C, 1, 1.0f);
    ct_fill(taps, (int64_t)C * K, 2, 0.4f);
    ct_fill(windows, n_runs * win, 3, 1.0f);
    for (int32_t r = 0; r < n_runs; r++)
        if (fresh[r])
            memset(windows + r * win, 0, (size_t)win * sizeof(float));

    float *d_mixed = ct_up(mixed, rows * C), *d_taps = ct_up(taps, (int64_t)C * K), *d_u = ct_up(NULL, rows * C);
    float **d_win = calloc((size_t)n_runs, sizeof(float *)), **d_out = calloc((size_t)n_runs, sizeof(float *));
    struct jev_gdn_run *cpu_runs = calloc((size_t)n_runs, sizeof(*cpu_runs));
    struct jev_gdn_run *gpu_runs = calloc((size_t)n_runs, sizeof(*gpu_runs));
    float *before = ct_host(n_runs * win), *junk = ct_host(win);
    assert_non_null(d_win);
    assert_non_null(d_out);
    assert_non_null(cpu_runs);
    assert_non_null(gpu_runs);
    memcpy(before, windows, (size_t)(n_runs * win) * sizeof(float));
    ct_fill(junk, win, 41, 7.0f);
    int64_t row = 0;
    for (int32_t r = 0; r < n_runs; r++) {
        d_win[r] = ct_up(windows + r * win, win);
        d_out[r] = separate ? ct_up(junk, win) : d_win[r];
        cpu_runs[r] = (struct jev_gdn_run){row, len[r], r % 2 == 1, windows + r * win, NULL, NULL, NULL};
        gpu_runs[r] = (struct jev_gdn_run){row, len[r], r % 2 == 1, d_out[r], NULL, separate ? d_win[r] : NULL, NULL};
        row += len[r];
    }
    float *u = ct_host(rows * C);
    jev_cpu_ops.gdn_conv(ct_cpu, mixed, taps, C, K, cpu_runs, n_runs, u);
    ct_ops->gdn_conv(ct_gpu, d_mixed, d_taps, C, K, gpu_runs, n_runs, d_u);

    char what[96];
    snprintf(what, sizeof what, "gdn_conv out C %d K %d runs %d%s", C, K, n_runs, separate ? " (conv_in)" : "");
    ct_check_dev(what, u, d_u, rows * C, CT_NMSE_F32);
    for (int32_t r = 0; r < n_runs; r++) {
        float *got = ct_down(d_out[r], win);
        if (memcmp(got, windows + r * win, (size_t)win * sizeof(float)) != 0)
            fail_msg("gdn_conv C %d K %d: run %d (%d tokens%s%s) window differs from the CPU's", C, K, r, len[r],
                     fresh[r] ? ", fresh" : "", separate ? ", conv_in" : "");
        free(got);
        if (separate) {
            got = ct_down(d_win[r], win);
            if (memcmp(got, before + r * win, (size_t)win * sizeof(float)) != 0)
                fail_msg("gdn_conv C %d K %d: run %d wrote its conv_in", C, K, r);
            free(got);
            ct_free(d_out[r]);
        }
        ct_free(d_win[r]);
    }
    free(d_out);
    free(before);
    free(junk);
    ct_free(d_mixed);
    ct_free(d_taps);
    ct_free(d_u);
    free(d_win);
    free(cpu_runs);
    free(gpu_runs);
    free(mixed);
    free(taps);
    free(windows);
    free(u);
}

static void test_gdn_conv(void **state) {
    (void)state;
    /* runs shorter than the window (1, 2 with K = 4), around a token block (16, 17) and long */
    const int32_t len[7] = {1, 3, 64, 65, 130, 2, 17};
    const bool fresh[7] = {false, true, false, false, true, false, false};
    conv_case(300, 4, len, fresh, 7, false);  /* channels not a multiple of a block */
    conv_case(6144, 4, len, fresh, 7, false); /* the 0.8B model's conv_dim = 2*16*128 + 16*128 */
    conv_case(96, 2, len, fresh, 7, false);   /* a one-row window */
    /* one decode token per run, 65 runs (the decision path's batch) */
    int32_t one[65];
    bool carried[65];
    for (int32_t r = 0; r < 65; r++) {
        one[r] = 1;
        carried[r] = r % 5 == 0;
    }
    conv_case(6144, 4, one, carried, 65, false);
    /* no runs: nothing queued, nothing fails */
    ct_ops->gdn_conv(ct_gpu, NULL, NULL, 6144, 4, NULL, 0, NULL);
    ct_ops->sync(ct_gpu);
}

/* ---- delta rule ---- */

/* One rule case over shape s: runs of len[] tokens, rec[] recurrent, fresh[] from a zero state; fast: log decay in
 * (-5.1, -1.1) per token (e^cum underflows within a chunk), else in (-0.26, -0.016). */
static void rule_case(struct jev_gdn_shape s, const int32_t *len, const bool *rec, const bool *fresh, int32_t n_runs,
                      bool separate, bool fast) {
    int32_t conv_dim = 2 * s.hk * s.dk + s.hv * s.dv;
    int64_t rows = 0;
    for (int32_t r = 0; r < n_runs; r++)
        rows += len[r];
    int64_t ssm = (int64_t)s.hv * s.dk * s.dv, out_n = rows * s.hv * s.dv;
    float *u = ct_host(rows * conv_dim), *g = ct_host(rows * s.hv), *beta = ct_host(rows * s.hv);
    float *states = ct_host(n_runs * ssm);
    ct_fill(u, rows * conv_dim, 9, 1.0f);
    for (int64_t i = 0; i < rows * s.hv; i++) {
        float d = ct_det(i) + 2.0f; /* (0.1, 4.1) */
        g[i] = fast ? -1.0f - d : -0.01f - 0.06f * d;
        beta[i] = 0.5f + 0.2f * ct_det(i + 5); /* (0.12, 0.92) */
    }
    ct_fill(states, n_runs * ssm, 77, 0.1f);
    for (int32_t r = 0; r < n_runs; r++)
        if (fresh[r])
            memset(states + r * ssm, 0, (size_t)ssm * sizeof(float));

    float *d_u = ct_up(u, rows * conv_dim), *d_g = ct_up(g, rows * s.hv), *d_beta = ct_up(beta, rows * s.hv);
    float *d_o = ct_up(NULL, out_n);
    float **d_state = calloc((size_t)n_runs, sizeof(float *)), **d_out = calloc((size_t)n_runs, sizeof(float *));
    struct jev_gdn_run *cpu_runs = calloc((size_t)n_runs, sizeof(*cpu_runs));
    struct jev_gdn_run *gpu_runs = calloc((size_t)n_runs, sizeof(*gpu_runs));
    float *before = ct_host(n_runs * ssm), *junk = ct_host(ssm);
    assert_non_null(d_state);
    assert_non_null(d_out);
    assert_non_null(cpu_runs);
    assert_non_null(gpu_runs);
    memcpy(before, states, (size_t)(n_runs * ssm) * sizeof(float));
    ct_fill(junk, ssm, 43, 5.0f);
    int64_t row = 0;
    for (int32_t r = 0; r < n_runs; r++) {
        d_state[r] = ct_up(states + r * ssm, ssm);
        d_out[r] = separate ? ct_up(junk, ssm) : d_state[r]; /* separate: read ssm_in, write elsewhere */
        cpu_runs[r] = (struct jev_gdn_run){row, len[r], rec[r], NULL, states + r * ssm, NULL, NULL};
        gpu_runs[r] = (struct jev_gdn_run){row, len[r], rec[r], NULL, d_out[r], NULL, separate ? d_state[r] : NULL};
        row += len[r];
    }
    float *o = ct_host(out_n);
    jev_cpu_ops.gdn_rule(ct_cpu, &s, u, g, beta, cpu_runs, n_runs, o);
    ct_ops->gdn_rule(ct_gpu, &s, d_u, d_g, d_beta, gpu_runs, n_runs, d_o);

    char what[128];
    snprintf(what, sizeof what, "gdn_rule out hk %d hv %d dk %d dv %d runs %d%s%s", s.hk, s.hv, s.dk, s.dv, n_runs,
             fast ? " fast decay" : "", separate ? " ssm_in" : "");
    ct_check_dev(what, o, d_o, out_n, CT_NMSE_F32);
    for (int32_t r = 0; r < n_runs; r++) {
        snprintf(what, sizeof what, "gdn_rule state hk %d hv %d dk %d dv %d run %d (%d tokens%s%s)%s%s", s.hk, s.hv,
                 s.dk, s.dv, r, len[r], rec[r] ? ", recurrent" : "", fresh[r] ? ", fresh" : "",
                 fast ? " fast decay" : "", separate ? " written" : "");
        ct_check_dev(what, states + r * ssm, d_out[r], ssm, CT_NMSE_F32);
        if (separate) { /* the input state: read, never written */
            float *got = ct_down(d_state[r], ssm);
            if (memcmp(got, before + r * ssm, (size_t)ssm * sizeof(float)) != 0)
                fail_msg("gdn_rule: run %d (%d tokens) wrote its ssm_in", r, len[r]);
            free(got);
            ct_free(d_state[r]);
        }
    }
    free(d_out);
    free(before);
    free(junk);
    ct_free(d_u);
    ct_free(d_g);
    ct_free(d_beta);
    ct_free(d_o);
    free(d_state);
    free(cpu_runs);
    free(gpu_runs);
    free(u);
    free(g);
    free(beta);
    free(states);
    free(o);
}

static void test_gdn_rule(void **state) {
    (void)state;
    /* (hk, hv, dk, dv, chunk): small; grouped small; odd dims (dv not a multiple of a column slice); the 0.8B
     * model's; grouped at the model's head dims; a key dim above 128 (the kernel's 32-row form) */
    const struct jev_gdn_shape shapes[6] = {
        {2, 2, 16, 16, 64},     {2, 4, 16, 16, 64},   {1, 3, 24, 40, 64},
        {16, 16, 128, 128, 64}, {2, 4, 128, 128, 64}, {1, 2, 256, 64, 64},
    };
    /* chunked 130 (three chunks), recurrent 1, chunked 64 (one chunk), recurrent 3, chunked 65, chunked 1 */
    const int32_t len[6] = {130, 1, 64, 3, 65, 1};
    const bool rec[6] = {false, true, false, true, false, false};
    const bool fresh[6] = {false, false, true, false, false, true};
    for (int it = 0; it < 12; it++)
        rule_case(shapes[it % 6], len, rec, fresh, 6, false, it >= 6);
}

/* The decision path's batch (65 runs of ~10 tokens) and a decode step (65 runs of one cached token). */
static void test_gdn_rule_many_runs(void **state) {
    (void)state;
    const struct jev_gdn_shape model = {16, 16, 128, 128, 64};
    int32_t len[65], one[65];
    bool rec[65], fresh[65], all[65];
    for (int32_t r = 0; r < 65; r++) {
        len[r] = 6 + (r * 7) % 9; /* 6..14 */
        rec[r] = false;
        fresh[r] = r % 3 == 0;
        one[r] = 1;
        all[r] = true;
    }
    rule_case(model, len, rec, fresh, 65, false, false);
    rule_case(model, one, all, fresh, 65, false, false);
    rule_case(model, one, all, fresh, 65, false, true);
    /* no runs: nothing queued, nothing fails */
    ct_ops->gdn_rule(ct_gpu, &model, NULL, NULL, NULL, NULL, 0, NULL);
    ct_ops->sync(ct_gpu);
}

/* A prefill longer than one group of chunk records (1000 tokens: 16 chunks) beside shorter chunked runs and a
 * recurrent one, so that a run's chunks continue in a second launch and a group holds segments of several runs. */
static void test_gdn_rule_long_runs(void **state) {
    (void)state;
    const struct jev_gdn_shape model = {16, 16, 128, 128, 64};
    const int32_t len[4] = {1000, 5, 70, 200};
    const bool rec[4] = {false, true, false, false};
    const bool fresh[4] = {true, false, false, false};
    rule_case(model, len, rec, fresh, 4, false, false);
    rule_case(model, len, rec, fresh, 4, false, true);
}

/* Light forks' runs (ops.h: conv_in, ssm_in): the windows and states read from one buffer and written to
 * another, through every kernel: conv rows and window, the recurrence, the chunked form with a run over two
 * launch groups (the second group continues from what the first wrote). */
static void test_gdn_separate_state(void **state) {
    (void)state;
    const int32_t len[7] = {1, 3, 64, 65, 130, 2, 17};
    const bool fresh[7] = {false, true, false, false, true, false, false};
    conv_case(6144, 4, len, fresh, 7, true);
    const struct jev_gdn_shape model = {16, 16, 128, 128, 64};
    int32_t many[65];
    bool rec[65], no[65];
    for (int32_t r = 0; r < 65; r++) {
        many[r] = 6 + (r * 7) % 9;
        rec[r] = false;
        no[r] = false;
    }
    rule_case(model, many, rec, no, 65, true, false);
    const int32_t longs[4] = {1000, 5, 70, 200};
    const bool lrec[4] = {false, true, false, false};
    rule_case(model, longs, lrec, no, 4, true, false);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gdn_conv),           cmocka_unit_test(test_gdn_rule),
        cmocka_unit_test(test_gdn_rule_many_runs), cmocka_unit_test(test_gdn_rule_long_runs),
        cmocka_unit_test(test_gdn_separate_state),
    };
    return cmocka_run_group_tests(tests, ct_setup, ct_teardown);
}
