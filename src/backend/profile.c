/*
 * profile.c - the timing op table of profile.h.
 *
 * Every wrapper reads the clock, calls the inner op and adds the elapsed
 * time to its op's slot. The matrix products are split by regime (1-2
 * tokens stream the weights, more tokens are compute-bound) and also count
 * their multiply-adds, so that the report shows GFLOP/s per regime.
 */
#include "backend/profile.h" // defines: jev_profile_wrap, jev_profile_report

#include <stdlib.h>
#include <string.h>

#include "base/timing.h" // defines: jev_now_ms

enum slot {
    S_MATMUL_FEW,
    S_MATMUL_MANY,
    S_MATMUL_ROWS,
    S_EMBED,
    S_RMSNORM,
    S_LAYERNORM,
    S_ADD,
    S_ADD_BIAS,
    S_SWIGLU,
    S_GELU,
    S_COPY,
    S_SPLIT_QGATE,
    S_ROPE,
    S_SIGMOID_MUL,
    S_ATTENTION,
    S_GDN_CONV,
    S_GDN_GATES,
    S_GDN_RULE,
    S_GATED_RMSNORM,
    S_VISION_ROPE,
    S_VISION_ATTENTION,
    S_VISION_POS_ADD,
    S_COUNT
};

static const char *const slot_names[S_COUNT] = {
    "matmul (1-2 tokens)",
    "matmul (3+ tokens)",
    "matmul_rows",
    "embed",
    "rmsnorm",
    "layernorm",
    "add",
    "add_bias",
    "swiglu",
    "gelu",
    "copy",
    "split_qgate",
    "rope",
    "sigmoid_mul",
    "attention",
    "gdn_conv",
    "gdn_gates",
    "gdn_rule",
    "gated_rmsnorm",
    "vision_rope",
    "vision_attention",
    "vision_pos_add",
};

static struct {
    int64_t calls;
    double ms;
    double flops;
} slots[S_COUNT];

static const struct jev_ops *inner;

/* A device backend queues its ops: wait for the op before reading the clock (the profile then
 * shows each op's own time, at the price of the overlap the queue would give). */
static void record(struct jev_backend *be, enum slot s, double t0, double flops) {
    if (!inner->host_memory)
        inner->sync(be);
    slots[s].calls++;
    slots[s].ms += jev_now_ms() - t0;
    slots[s].flops += flops;
}

static double mm_flops(const struct jev_matrix *w, int64_t rows, int64_t n) {
    return 2.0 * (double)n * (double)rows * (double)w->cols;
}

static void p_matmul(struct jev_backend *be, const struct jev_matrix *w, const float *x, int64_t n, float *y) {
    double t0 = jev_now_ms();
    inner->matmul(be, w, x, n, y);
    record(be, n <= 2 ? S_MATMUL_FEW : S_MATMUL_MANY, t0, mm_flops(w, w->rows, n));
}

static void p_matmul_rows(struct jev_backend *be, const struct jev_matrix *w, const int32_t *row_ids, int32_t n_rows,
                          const float *x, int64_t n, float *y) {
    double t0 = jev_now_ms();
    inner->matmul_rows(be, w, row_ids, n_rows, x, n, y);
    record(be, S_MATMUL_ROWS, t0, mm_flops(w, n_rows, n));
}

/* The other ops: time the call, no flop count. */
#define TIMED(SLOT, CALL)                                                                                              \
    do {                                                                                                               \
        double t0 = jev_now_ms();                                                                                      \
        CALL;                                                                                                          \
        record(be, SLOT, t0, 0.0);                                                                                     \
    } while (0)

static void p_embed(struct jev_backend *be, const struct jev_matrix *w, const int32_t *ids, int64_t n, float *out) {
    TIMED(S_EMBED, inner->embed(be, w, ids, n, out));
}
static void p_rmsnorm(struct jev_backend *be, const float *x, const float *w, int64_t n, int32_t d, float eps,
                      float *y) {
    TIMED(S_RMSNORM, inner->rmsnorm(be, x, w, n, d, eps, y));
}
static void p_layernorm(struct jev_backend *be, const float *x, const float *w, const float *b, int64_t n, int32_t d,
                        float eps, float *y) {
    TIMED(S_LAYERNORM, inner->layernorm(be, x, w, b, n, d, eps, y));
}
static void p_add(struct jev_backend *be, float *x, const float *y, int64_t n) {
    TIMED(S_ADD, inner->add(be, x, y, n));
}
static void p_add_bias(struct jev_backend *be, float *y, const float *b, int64_t n, int32_t d) {
    TIMED(S_ADD_BIAS, inner->add_bias(be, y, b, n, d));
}
static void p_swiglu(struct jev_backend *be, const float *gate, const float *up, int64_t n, float *out) {
    TIMED(S_SWIGLU, inner->swiglu(be, gate, up, n, out));
}
static void p_gelu(struct jev_backend *be, float *x, int64_t n, bool tanh_form) {
    TIMED(S_GELU, inner->gelu(be, x, n, tanh_form));
}
static void p_copy(struct jev_backend *be, float *dst, const float *src, int64_t n) {
    TIMED(S_COPY, inner->copy(be, dst, src, n));
}
static void p_split_qgate(struct jev_backend *be, const float *qg, int64_t n, int32_t heads, int32_t dh, float *q,
                          float *gate) {
    TIMED(S_SPLIT_QGATE, inner->split_qgate(be, qg, n, heads, dh, q, gate));
}
static void p_rope(struct jev_backend *be, float *x, int64_t n, int32_t heads, int32_t dh, int32_t n_freq,
                   const float *cos, const float *sin) {
    TIMED(S_ROPE, inner->rope(be, x, n, heads, dh, n_freq, cos, sin));
}
static void p_sigmoid_mul(struct jev_backend *be, float *x, const float *gate, int64_t n) {
    TIMED(S_SIGMOID_MUL, inner->sigmoid_mul(be, x, gate, n));
}
static void p_attention(struct jev_backend *be, const struct jev_attn_shape *s, const float *q,
                        const struct jev_attn_run *runs, int32_t n_runs, float *o) {
    TIMED(S_ATTENTION, inner->attention(be, s, q, runs, n_runs, o));
}
static void p_gdn_conv(struct jev_backend *be, const float *mixed, const float *taps, int32_t conv_dim, int32_t kernel,
                       const struct jev_gdn_run *runs, int32_t n_runs, float *u) {
    TIMED(S_GDN_CONV, inner->gdn_conv(be, mixed, taps, conv_dim, kernel, runs, n_runs, u));
}
static void p_gdn_gates(struct jev_backend *be, const float *a, const float *b, const float *a_log,
                        const float *dt_bias, int64_t n, int32_t hv, float *g, float *beta) {
    TIMED(S_GDN_GATES, inner->gdn_gates(be, a, b, a_log, dt_bias, n, hv, g, beta));
}
static void p_gdn_rule(struct jev_backend *be, const struct jev_gdn_shape *s, const float *u, const float *g,
                       const float *beta, const struct jev_gdn_run *runs, int32_t n_runs, float *o) {
    TIMED(S_GDN_RULE, inner->gdn_rule(be, s, u, g, beta, runs, n_runs, o));
}
static void p_gated_rmsnorm(struct jev_backend *be, const float *x, const float *z, const float *w, int64_t n,
                            int32_t d, float eps, float *y) {
    TIMED(S_GATED_RMSNORM, inner->gated_rmsnorm(be, x, z, w, n, d, eps, y));
}
static void p_vision_rope(struct jev_backend *be, float *qkv, const float *cos, const float *sin, int64_t n,
                          int32_t n_heads, int32_t head_dim) {
    TIMED(S_VISION_ROPE, inner->vision_rope(be, qkv, cos, sin, n, n_heads, head_dim));
}
static void p_vision_attention(struct jev_backend *be, const float *qkv, int64_t n, int32_t n_heads, int32_t head_dim,
                               float scale, float *out) {
    TIMED(S_VISION_ATTENTION, inner->vision_attention(be, qkv, n, n_heads, head_dim, scale, out));
}
static void p_vision_pos_add(struct jev_backend *be, const struct jev_matrix *table, const int32_t *idx, const float *w,
                             int64_t n, float *x) {
    TIMED(S_VISION_POS_ADD, inner->vision_pos_add(be, table, idx, w, n, x));
}

/* The compute ops timed; the memory ops are the inner backend's own (filled by jev_profile_wrap). */
static struct jev_ops profiled = {
    .name = "profiled",
    .matmul = p_matmul,
    .matmul_rows = p_matmul_rows,
    .embed = p_embed,
    .rmsnorm = p_rmsnorm,
    .layernorm = p_layernorm,
    .add = p_add,
    .add_bias = p_add_bias,
    .swiglu = p_swiglu,
    .gelu = p_gelu,
    .copy = p_copy,
    .split_qgate = p_split_qgate,
    .rope = p_rope,
    .sigmoid_mul = p_sigmoid_mul,
    .attention = p_attention,
    .gdn_conv = p_gdn_conv,
    .gdn_gates = p_gdn_gates,
    .gdn_rule = p_gdn_rule,
    .gated_rmsnorm = p_gated_rmsnorm,
    .vision_rope = p_vision_rope,
    .vision_attention = p_vision_attention,
    .vision_pos_add = p_vision_pos_add,
};

bool jev_profile_requested(void) {
    const char *v = getenv("JEV_PROFILE");
    return v && *v && strcmp(v, "0") != 0;
}

const struct jev_ops *jev_profile_wrap(const struct jev_ops *ops) {
    inner = ops;
    profiled.name = ops->name; /* records and messages name the backend that ran */
    profiled.host_memory = ops->host_memory;
    profiled.alloc = ops->alloc;
    profiled.free = ops->free;
    profiled.upload = ops->upload;
    profiled.download = ops->download;
    profiled.zero = ops->zero;
    profiled.sync = ops->sync;
    profiled.matrix_mirror = ops->matrix_mirror;
    profiled.matrix_release = ops->matrix_release;
    profiled.status = ops->status;
    profiled.memory = ops->memory;
    return &profiled;
}

bool jev_profile_is_wrapped(const struct jev_ops *ops) { return ops == &profiled; }

void jev_profile_report(FILE *f) {
    double total = 0.0;
    for (int s = 0; s < S_COUNT; s++)
        total += slots[s].ms;
    fprintf(f, "jev profile (%s backend): %.1f ms in ops\n", inner ? inner->name : "?", total);
    fprintf(f, "  %-22s %9s %11s %6s %9s\n", "op", "calls", "ms", "share", "GFLOP/s");
    bool done[S_COUNT] = {false};
    for (int k = 0; k < S_COUNT; k++) {
        int best = -1;
        for (int s = 0; s < S_COUNT; s++)
            if (!done[s] && slots[s].calls > 0 && (best < 0 || slots[s].ms > slots[best].ms))
                best = s;
        if (best < 0)
            break;
        done[best] = true;
        fprintf(f, "  %-22s %9lld %11.1f %5.1f%%", slot_names[best], (long long)slots[best].calls, slots[best].ms,
                total > 0 ? 100.0 * slots[best].ms / total : 0.0);
        if (slots[best].flops > 0 && slots[best].ms > 0)
            fprintf(f, " %9.1f", slots[best].flops / (slots[best].ms * 1e6));
        fputc('\n', f);
    }
    memset(slots, 0, sizeof slots);
}
