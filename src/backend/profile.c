/*
 * profile.c - the timing op table of profile.h.
 *
 * The profiler is the instance its ops receive: every wrapper turns `be`
 * back into its struct jev_profile, reads the clock, calls the inner
 * instance's op and adds the elapsed time to that profiler's slot, so two
 * profilers never share a slot or an inner backend. The matrix products are
 * split by regime (1-2 tokens stream the weights, more tokens are
 * compute-bound) and also count their multiply-adds, so that the report
 * shows GFLOP/s per regime.
 */
#include "backend/profile.h" // defines: struct jev_profile, jev_profile_report

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
    S_ADD_RMSNORM,
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
    "add_rmsnorm",
    "vision_rope",
    "vision_attention",
    "vision_pos_add",
};

struct slot_sum {
    int64_t calls;
    double ms;
    double flops;
};

struct jev_profile {
    const struct jev_ops *inner;  /* the wrapped instance's table ... */
    struct jev_backend *inner_be; /* ... and the instance */
    struct jev_ops table;         /* the timed table: inner's name and memory kind, these wrappers */
    struct slot_sum slots[S_COUNT];
};

/* The ops receive the profiler as their instance (jev_profile_backend). */
static struct jev_profile *prof(struct jev_backend *be) { return (struct jev_profile *)(void *)be; }

/* A device backend queues its ops: wait for the op before reading the clock (the profile then
 * shows each op's own time, at the price of the overlap the queue would give). */
static void record(struct jev_profile *p, enum slot s, double t0, double flops) {
    if (!p->inner->host_memory)
        p->inner->sync(p->inner_be);
    p->slots[s].calls++;
    p->slots[s].ms += jev_now_ms() - t0;
    p->slots[s].flops += flops;
}

static double mm_flops(const struct jev_matrix *w, int64_t rows, int64_t n) {
    return 2.0 * (double)n * (double)rows * (double)w->cols;
}

static void p_matmul(struct jev_backend *be, const struct jev_matrix *w, const float *x, int64_t n, float *y) {
    struct jev_profile *p = prof(be);
    double t0 = jev_now_ms();
    p->inner->matmul(p->inner_be, w, x, n, y);
    record(p, n <= 2 ? S_MATMUL_FEW : S_MATMUL_MANY, t0, mm_flops(w, w->rows, n));
}

static void p_matmul_rows(struct jev_backend *be, const struct jev_matrix *w, const int32_t *row_ids, int32_t n_rows,
                          const float *x, int64_t n, float *y) {
    struct jev_profile *p = prof(be);
    double t0 = jev_now_ms();
    p->inner->matmul_rows(p->inner_be, w, row_ids, n_rows, x, n, y);
    record(p, S_MATMUL_ROWS, t0, mm_flops(w, n_rows, n));
}

/* The other ops: time the inner instance's op, no flop count. */
#define TIMED(SLOT, OP, ...)                                                                                           \
    do {                                                                                                               \
        struct jev_profile *p = prof(be);                                                                              \
        double t0 = jev_now_ms();                                                                                      \
        p->inner->OP(p->inner_be, __VA_ARGS__);                                                                        \
        record(p, SLOT, t0, 0.0);                                                                                      \
    } while (0)

static void p_embed(struct jev_backend *be, const struct jev_matrix *w, const int32_t *ids, int64_t n, float *out) {
    TIMED(S_EMBED, embed, w, ids, n, out);
}
static void p_rmsnorm(struct jev_backend *be, const float *x, const float *w, int64_t n, int32_t d, float eps,
                      float *y) {
    TIMED(S_RMSNORM, rmsnorm, x, w, n, d, eps, y);
}
static void p_layernorm(struct jev_backend *be, const float *x, const float *w, const float *b, int64_t n, int32_t d,
                        float eps, float *y) {
    TIMED(S_LAYERNORM, layernorm, x, w, b, n, d, eps, y);
}
static void p_add(struct jev_backend *be, float *x, const float *y, int64_t n) { TIMED(S_ADD, add, x, y, n); }
static void p_add_rmsnorm(struct jev_backend *be, float *x, const float *y, const float *w, int64_t n, int32_t d,
                          float eps, float *h) {
    TIMED(S_ADD_RMSNORM, add_rmsnorm, x, y, w, n, d, eps, h);
}
static void p_add_bias(struct jev_backend *be, float *y, const float *b, int64_t n, int32_t d) {
    TIMED(S_ADD_BIAS, add_bias, y, b, n, d);
}
static void p_swiglu(struct jev_backend *be, const float *gate, const float *up, int64_t n, float *out) {
    TIMED(S_SWIGLU, swiglu, gate, up, n, out);
}
static void p_gelu(struct jev_backend *be, float *x, int64_t n, bool tanh_form) {
    TIMED(S_GELU, gelu, x, n, tanh_form);
}
static void p_copy(struct jev_backend *be, float *dst, const float *src, int64_t n) {
    TIMED(S_COPY, copy, dst, src, n);
}
static void p_split_qgate(struct jev_backend *be, const float *qg, int64_t n, int32_t heads, int32_t dh, float *q,
                          float *gate) {
    TIMED(S_SPLIT_QGATE, split_qgate, qg, n, heads, dh, q, gate);
}
static void p_rope(struct jev_backend *be, float *x, int64_t n, int32_t heads, int32_t dh, int32_t n_freq,
                   const float *cos, const float *sin) {
    TIMED(S_ROPE, rope, x, n, heads, dh, n_freq, cos, sin);
}
static void p_sigmoid_mul(struct jev_backend *be, float *x, const float *gate, int64_t n) {
    TIMED(S_SIGMOID_MUL, sigmoid_mul, x, gate, n);
}
static void p_attention(struct jev_backend *be, const struct jev_attn_shape *s, const float *q,
                        const struct jev_attn_run *runs, int32_t n_runs, float *o) {
    TIMED(S_ATTENTION, attention, s, q, runs, n_runs, o);
}
static void p_gdn_conv(struct jev_backend *be, const float *mixed, const float *taps, int32_t conv_dim, int32_t kernel,
                       const struct jev_gdn_run *runs, int32_t n_runs, float *u) {
    TIMED(S_GDN_CONV, gdn_conv, mixed, taps, conv_dim, kernel, runs, n_runs, u);
}
static void p_gdn_gates(struct jev_backend *be, const float *a, const float *b, const float *a_log,
                        const float *dt_bias, int64_t n, int32_t hv, float *g, float *beta) {
    TIMED(S_GDN_GATES, gdn_gates, a, b, a_log, dt_bias, n, hv, g, beta);
}
static void p_gdn_rule(struct jev_backend *be, const struct jev_gdn_shape *s, const float *u, const float *g,
                       const float *beta, const struct jev_gdn_run *runs, int32_t n_runs, float *o) {
    TIMED(S_GDN_RULE, gdn_rule, s, u, g, beta, runs, n_runs, o);
}
static void p_gated_rmsnorm(struct jev_backend *be, const float *x, const float *z, const float *w, int64_t n,
                            int32_t d, float eps, float *y) {
    TIMED(S_GATED_RMSNORM, gated_rmsnorm, x, z, w, n, d, eps, y);
}
static void p_vision_rope(struct jev_backend *be, float *qkv, const float *cos, const float *sin, int64_t n,
                          int32_t n_heads, int32_t head_dim) {
    TIMED(S_VISION_ROPE, vision_rope, qkv, cos, sin, n, n_heads, head_dim);
}
static void p_vision_attention(struct jev_backend *be, const float *qkv, int64_t n, int32_t n_heads, int32_t head_dim,
                               float scale, float *out) {
    TIMED(S_VISION_ATTENTION, vision_attention, qkv, n, n_heads, head_dim, scale, out);
}
static void p_vision_pos_add(struct jev_backend *be, const struct jev_matrix *table, const int32_t *idx, const float *w,
                             int64_t n, float *x) {
    TIMED(S_VISION_POS_ADD, vision_pos_add, table, idx, w, n, x);
}

/* ---- memory: straight through to the inner instance, untimed ---- */

static void *p_alloc(struct jev_backend *be, size_t bytes) {
    struct jev_profile *p = prof(be);
    return p->inner->alloc(p->inner_be, bytes);
}
static void p_free(struct jev_backend *be, void *ptr) {
    struct jev_profile *p = prof(be);
    p->inner->free(p->inner_be, ptr);
}
static void p_upload(struct jev_backend *be, void *dst, const void *src, size_t bytes) {
    struct jev_profile *p = prof(be);
    p->inner->upload(p->inner_be, dst, src, bytes);
}
static void p_download(struct jev_backend *be, void *dst, const void *src, size_t bytes) {
    struct jev_profile *p = prof(be);
    p->inner->download(p->inner_be, dst, src, bytes);
}
static void p_zero(struct jev_backend *be, void *dst, size_t bytes) {
    struct jev_profile *p = prof(be);
    p->inner->zero(p->inner_be, dst, bytes);
}
static void p_sync(struct jev_backend *be) {
    struct jev_profile *p = prof(be);
    p->inner->sync(p->inner_be);
}
static enum jev_status p_matrix_mirror(struct jev_backend *be, const struct jev_matrix *host, struct jev_matrix *mirror,
                                       struct jev_error *err) {
    struct jev_profile *p = prof(be);
    return p->inner->matrix_mirror(p->inner_be, host, mirror, err);
}
static void p_matrix_release(struct jev_backend *be, struct jev_matrix *mirror) {
    struct jev_profile *p = prof(be);
    p->inner->matrix_release(p->inner_be, mirror);
}
static enum jev_status p_status(struct jev_backend *be, struct jev_error *err) {
    struct jev_profile *p = prof(be);
    return p->inner->status(p->inner_be, err);
}
static void p_memory(struct jev_backend *be, int64_t *now, int64_t *peak, bool reset_peak) {
    struct jev_profile *p = prof(be);
    p->inner->memory(p->inner_be, now, peak, reset_peak);
}
static enum jev_status p_set_precision(struct jev_backend *be, enum jev_precision mode, struct jev_error *err) {
    struct jev_profile *p = prof(be);
    return p->inner->set_precision(p->inner_be, mode, err);
}

/* Every slot of the timed table; the optional ones (status, memory, set_precision) are filled per
 * profiler, only where the inner table has them (NULL keeps its meaning: cannot fail, counts no
 * device bytes, runs exact only). */
static const struct jev_ops timed = {
    .alloc = p_alloc,
    .free = p_free,
    .upload = p_upload,
    .download = p_download,
    .zero = p_zero,
    .sync = p_sync,
    .matrix_mirror = p_matrix_mirror,
    .matrix_release = p_matrix_release,
    .matmul = p_matmul,
    .matmul_rows = p_matmul_rows,
    .embed = p_embed,
    .rmsnorm = p_rmsnorm,
    .layernorm = p_layernorm,
    .add = p_add,
    .add_rmsnorm = p_add_rmsnorm,
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

enum jev_status jev_profile_new(const struct jev_ops *ops, struct jev_backend *be, struct jev_profile **out,
                                struct jev_error *err) {
    *out = NULL;
    if (!ops || !be)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "profile: needs a backend's op table and instance");
    struct jev_profile *p = calloc(1, sizeof *p);
    if (!p)
        return jev_fail(err, JEV_ERR_NOMEM, "profile: out of memory");
    p->inner = ops;
    p->inner_be = be;
    p->table = timed;
    p->table.name = ops->name; /* records and messages name the backend that ran */
    p->table.host_memory = ops->host_memory;
    p->table.min_batched_tokens = ops->min_batched_tokens;
    p->table.step_tokens = ops->step_tokens;
    p->table.status = ops->status ? p_status : NULL;
    p->table.memory = ops->memory ? p_memory : NULL;
    p->table.set_precision = ops->set_precision ? p_set_precision : NULL;
    *out = p;
    return JEV_OK;
}

void jev_profile_free(struct jev_profile *p) { free(p); }

const struct jev_ops *jev_profile_ops(const struct jev_profile *p) { return &p->table; }

struct jev_backend *jev_profile_backend(struct jev_profile *p) {
    return (struct jev_backend *)(void *)p;
}

int64_t jev_profile_calls(const struct jev_profile *p, const char *op) {
    for (int s = 0; op && s < S_COUNT; s++)
        if (!strcmp(op, slot_names[s]))
            return p->slots[s].calls;
    return -1;
}

void jev_profile_report(struct jev_profile *p, FILE *f) {
    const struct slot_sum *slots = p->slots;
    double total = 0.0;
    for (int s = 0; s < S_COUNT; s++)
        total += slots[s].ms;
    fprintf(f, "jev profile (%s backend): %.1f ms in ops\n", p->inner->name, total);
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
    memset(p->slots, 0, sizeof p->slots);
}
