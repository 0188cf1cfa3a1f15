/*
 * ops.h - the backend op table. The forward passes (model/lm.c,
 * model/vision.c) are written once against this table; every backend
 * (backend/cpu, backend/cuda) fills one. The CPU scalar op is the reference
 * that SIMD and CUDA ops must match (tests/test-ops.c, NMSE).
 *
 * Memory: float tensors passed to an op live in the backend's own memory
 * (host for CPU, device for CUDA), allocated with ops->alloc; so do the
 * K/V rows, conv windows and recurrent states that run descriptors point at,
 * and the data of the weight matrices (the backend's mirror of the model's
 * weights, ops->matrix_mirror). Integer index arrays (ids, row_ids, idx),
 * vision_pos_add's tap weights w and the descriptor arrays themselves (runs,
 * spans) are host memory: they
 * are small and built per call by the model layer; a device backend copies
 * them over as part of the op. Ops are queued in order on the backend's one
 * stream; ops->download waits for everything queued before it. An instance
 * is used from one host thread at a time (the engine's rule); a CUDA instance
 * on a device other than 0 from the thread that created it.
 *
 * Shapes are row-major; `n` counts rows (tokens).
 */
#ifndef JEV_BACKEND_OPS_H
#define JEV_BACKEND_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h" // defines: enum jev_status, struct jev_error

#include "backend/matrix.h" // defines: struct jev_matrix

/* One backend instance, per engine: CPU holds a thread pool, CUDA a stream. */
struct jev_backend;

/* ---- LM op arguments ---- */

/* One contiguous run of cached K/V rows of one attention layer. */
struct jev_kv_span {
    const float *k; /* [n][kv_dim] keys after k_norm and RoPE */
    const float *v; /* [n][kv_dim] values */
    int32_t n;      /* rows */
};

struct jev_attn_shape {
    int32_t n_heads;    /* query heads Hq */
    int32_t n_kv_heads; /* K/V heads (query head h reads K/V head h / (Hq/Hkv)) */
    int32_t head_dim;   /* dh */
    float scale;        /* score scale, f32(dh^-0.5) */
};

/* One sequence's queries in a batch and the K/V they see. */
struct jev_attn_run {
    int64_t row0;                    /* first batch row of the run */
    int32_t n;                       /* query rows */
    int32_t n_past;                  /* cached tokens before the run: query i sees K/V 0..n_past+i */
    const struct jev_kv_span *spans; /* K/V rows 0..n_past+n in token order (the run's own included) */
    int32_t n_spans;                 /* entries of spans */
};

struct jev_gdn_shape {
    int32_t hk;    /* key heads */
    int32_t hv;    /* value heads (multiple of hk; value head j uses key head j / (hv/hk)) */
    int32_t dk;    /* key head dim */
    int32_t dv;    /* value head dim */
    int32_t chunk; /* chunk length of the chunked form (HF: 64) */
};

/*
 * One sequence's tokens in a batch, for the DeltaNet ops. The window and the state are read from
 * conv_in / ssm_in and the updated ones written to conv / ssm; NULL inputs mean in place (an
 * ordinary sequence). Separate inputs serve a light fork (model/state.h), which starts from its
 * parent's state and keeps none of its own: the model layer points the outputs at scratch. The
 * inputs are only read, and never overlap the outputs.
 */
struct jev_gdn_run {
    int64_t row0;         /* first batch row */
    int32_t n;            /* rows */
    bool recurrent;       /* token-by-token recurrence (HF: cached single token) instead of the chunked form */
    float *conv;          /* [kernel-1][conv_dim] window of previous pre-conv inputs, oldest first; written */
    float *ssm;           /* [hv][dk][dv] recurrent state; written */
    const float *conv_in; /* the window before the run; NULL = conv */
    const float *ssm_in;  /* the state before the run; NULL = ssm */
};

struct jev_ops {
    const char *name; /* "cpu", "cuda" */

    /* ---- memory ---- */
    /* Backend memory is host memory (the CPU backend): callers may read and write it directly
     * and skip the staging that upload/download do for a device. */
    bool host_memory;
    /* Products of fewer tokens than this take other kernels than larger ones (the CPU's fused decode
     * kernels, CUDA's rows read in place), whose sums differ in the last bits from the kernels of
     * many tokens: a batch that answers each request as it would alone (decide/batch-step.c) runs a
     * piece this short in a forward of its own. */
    int32_t min_batched_tokens;
    /* Tokens one forward slice takes when the engine is not told (prefill_chunk 0): the CPU's 512; a
     * GPU keeps busy with more, and every slice re-reads (CUDA: dequantizes) every weight and pays
     * each op's launch, so fewer, larger slices cost less there. Activation memory grows with it. */
    int32_t step_tokens;
    /* bytes of zeroed backend memory, 64-byte aligned (CUDA: 256); NULL when there is not enough.
     * The CPU's comes from calloc, so untouched pages of a large pool cost nothing. */
    void *(*alloc)(struct jev_backend *be, size_t bytes);
    /* Frees what alloc returned; NULL is a no-op. Waits for queued ops that may use it. */
    void (*free)(struct jev_backend *be, void *p);
    /* Host src -> backend dst, queued in order with the ops; src may be reused on return. */
    void (*upload)(struct jev_backend *be, void *dst, const void *src, size_t bytes);
    /* Backend src -> host dst after every op queued before it; dst is filled on return. */
    void (*download)(struct jev_backend *be, void *dst, const void *src, size_t bytes);
    /* dst[0..bytes) = 0 in backend memory, queued. */
    void (*zero)(struct jev_backend *be, void *dst, size_t bytes);
    /* Waits until every queued op has finished (the profiler's timing point). */
    void (*sync)(struct jev_backend *be);
    /* The backend's own copy of a weight matrix, made once per engine: the CPU uses the
     * model's (mmapped) matrix as it is; CUDA uploads its stored form (the same type, bits,
     * group and scale type: 4-bit stays 4-bit) and dequantizes as its kernels read it. Fails
     * with JEV_ERR_NOMEM naming the matrix. Freed by matrix_release. */
    enum jev_status (*matrix_mirror)(struct jev_backend *be, const struct jev_matrix *host, struct jev_matrix *mirror,
                                     struct jev_error *err);
    void (*matrix_release)(struct jev_backend *be, struct jev_matrix *mirror);
    /* JEV_OK, or the first failure of a queued op since the last report (a device fault or
     * launch error; err names the op and the CUDA error). Ops cannot fail one by one (they are
     * queued), so the model layer asks here after each forward. A failure that leaves the device
     * usable is reported once (JEV_ERR_CUDA); one that poisons it is JEV_ERR_DEVICE_LOST, then and
     * on every later call. NULL: the backend cannot fail. */
    enum jev_status (*status)(struct jev_backend *be, struct jev_error *err);
    /* Device memory the backend holds: bytes now and the peak since the last reset_peak
     * (weights mirror, activations, states, scratch). NULL for the CPU, whose figure comes from
     * the arenas (decide/pipeline.c). */
    void (*memory)(struct jev_backend *be, int64_t *now, int64_t *peak, bool reset_peak);

    /* ---- precision (include/jev.h, enum jev_precision) ---- */
    /* Which kernels the matrix products use. Every instance starts in JEV_PRECISION_EXACT. A mode the
     * backend has no kernels for is JEV_ERR_UNSUPPORTED with a message naming what to use instead,
     * and the instance stays as it was: a mode is never silently replaced by another. The weights
     * mirror serves every mode, so this may be called again between forwards (the benchmark runs
     * its exact references on its fast engine). NULL: the backend runs exact only, and the engine
     * refuses any other mode. */
    enum jev_status (*set_precision)(struct jev_backend *be, enum jev_precision p, struct jev_error *err);
    /* on: every product gives each row the same result whatever other rows share its batch (a
     * request's answers then do not depend on the requests batched with it: the server's batching
     * across requests), at a cost in speed where the backend's fastest kernels choose their sums'
     * order by the row count. Every instance starts off. NULL: the backend's products are so always
     * (the CPU's). */
    void (*set_batch_invariant)(struct jev_backend *be, bool on);

    /* ---- dense algebra ---- */
    /* y[n][w->rows] = x[n][w->cols] . W^T, any matrix type. */
    void (*matmul)(struct jev_backend *be, const struct jev_matrix *w, const float *x, int64_t n, float *y);
    /* y[n][n_rows] = x[n][w->cols] . W[row_ids]^T: the LM head over candidate rows only. */
    void (*matmul_rows)(struct jev_backend *be, const struct jev_matrix *w, const int32_t *row_ids, int32_t n_rows,
                        const float *x, int64_t n, float *y);
    /* out[n][w->cols] = rows ids[0..n) of w, dequantized. */
    void (*embed)(struct jev_backend *be, const struct jev_matrix *w, const int32_t *ids, int64_t n, float *out);

    /* ---- elementwise and norms ---- */
    /* y = x / sqrt(mean(x^2) + eps) * w per row of d (w is the multiplier). y may be x. */
    void (*rmsnorm)(struct jev_backend *be, const float *x, const float *w, int64_t n, int32_t d, float eps, float *y);
    /* y = (x - mean) / sqrt(var + eps) * w + b per row of d. y may be x. */
    void (*layernorm)(struct jev_backend *be, const float *x, const float *w, const float *b, int64_t n, int32_t d,
                      float eps, float *y);
    /* x[i] += y[i] for i < n. */
    void (*add)(struct jev_backend *be, float *x, const float *y, int64_t n);
    /* The residual add and the next norm in one pass: x += y, then h = rmsnorm(x) * w per row of d; the
     * same bits as add, then rmsnorm (a decoder layer does this twice: one launch less each on a GPU). */
    void (*add_rmsnorm)(struct jev_backend *be, float *x, const float *y, const float *w, int64_t n, int32_t d,
                        float eps, float *h);
    /* y[r][c] += b[c], r < n, c < d. */
    void (*add_bias)(struct jev_backend *be, float *y, const float *b, int64_t n, int32_t d);
    /* out[i] = silu(gate[i]) * up[i], i < n. out may be gate. */
    void (*swiglu)(struct jev_backend *be, const float *gate, const float *up, int64_t n, float *out);
    /* x[i] = gelu(x[i]), tanh form (gelu_pytorch_tanh) or exact erf form. */
    void (*gelu)(struct jev_backend *be, float *x, int64_t n, bool tanh_form);

    /* ---- language model ops (model/lm.c) ---- */
    /* LM-OPS: the language-model helper adds its fields below this line. */
    /* dst[i] = src[i], i < n (K/V cache writes). */
    void (*copy)(struct jev_backend *be, float *dst, const float *src, int64_t n);
    /* From qg[n][heads][2*dh] (per head [query dh | gate dh]): q[n][heads][dh], gate[n][heads*dh]. */
    void (*split_qgate)(struct jev_backend *be, const float *qg, int64_t n, int32_t heads, int32_t dh, float *q,
                        float *gate);
    /* NeoX rotation of dims [0, 2*n_freq) of every head of x[n][heads][dh]; cos/sin [n][n_freq]:
     * x'[d] = x[d]*c - x[d+n_freq]*s, x'[d+n_freq] = x[d+n_freq]*c + x[d]*s. */
    void (*rope)(struct jev_backend *be, float *x, int64_t n, int32_t heads, int32_t dh, int32_t n_freq,
                 const float *cos, const float *sin);
    /* x[i] *= sigmoid(gate[i]), i < n. */
    void (*sigmoid_mul)(struct jev_backend *be, float *x, const float *gate, int64_t n);
    /* Causal softmax attention of every run's queries over its K/V spans (GQA, f32 softmax):
     * o[row][h][:] = softmax_j(q[row][h] . k_j * scale) . v_j over cached rows j <= n_past + i. */
    void (*attention)(struct jev_backend *be, const struct jev_attn_shape *s, const float *q,
                      const struct jev_attn_run *runs, int32_t n_runs, float *o);
    /* Gated DeltaNet causal depthwise conv + SiLU per run, with the run's window state (updated):
     * u[t][c] = silu(sum_j taps[c][j] * in[t-K+1+j][c]), in = window ++ mixed rows. */
    void (*gdn_conv)(struct jev_backend *be, const float *mixed, const float *taps, int32_t conv_dim, int32_t kernel,
                     const struct jev_gdn_run *runs, int32_t n_runs, float *u);
    /* g = -exp(a_log) * softplus(a + dt_bias) (torch threshold 20), beta = sigmoid(b); [n][hv]. */
    void (*gdn_gates)(struct jev_backend *be, const float *a, const float *b, const float *a_log, const float *dt_bias,
                      int64_t n, int32_t hv, float *g, float *beta);
    /* The gated delta rule per run and value head, from u[rows][conv_dim] = [q | k | v] after the conv:
     * L2-normalised q, k (q scaled by dk^-0.5), grouped value heads, chunked form (HF
     * torch_chunk_gated_delta_rule) or the recurrence (run->recurrent); o[rows][hv*dv]; state updated. */
    void (*gdn_rule)(struct jev_backend *be, const struct jev_gdn_shape *s, const float *u, const float *g,
                     const float *beta, const struct jev_gdn_run *runs, int32_t n_runs, float *o);
    /* y = w * (x / sqrt(mean(x^2) + eps)) * silu(z) per row of d (HF Qwen3_5RMSNormGated). y may be x. */
    void (*gated_rmsnorm)(struct jev_backend *be, const float *x, const float *z, const float *w, int64_t n, int32_t d,
                          float eps, float *y);

    /* ---- vision ops (model/vision.c) ---- */
    /* VISION-OPS: the vision helper adds its fields below this line. */
    /* 2-D rotary in place on q and k of qkv[n][3*H*hd] ([q | k | v], heads of hd inside each part):
     * x' = x * cos + rotate_half(x) * sin with cos/sin[n][hd] (rotate_half pairs d with d + hd/2). */
    void (*vision_rope)(struct jev_backend *be, float *qkv, const float *cos, const float *sin, int64_t n,
                        int32_t n_heads, int32_t head_dim);
    /* out[n][H*hd] = softmax(q k^T * scale) v for every head, bidirectional over all n rows of qkv[n][3*H*hd]. */
    void (*vision_attention)(struct jev_backend *be, const float *qkv, int64_t n, int32_t n_heads, int32_t head_dim,
                             float scale, float *out);
    /* x[r][:] += ((t0*w0 + t1*w1) + t2*w2) + t3*w3, t_k = row idx[r][k] of table (dequantized), w = w[r][k];
     * r < n: the bilinear learned position embedding. idx and w are host arrays. */
    void (*vision_pos_add)(struct jev_backend *be, const struct jev_matrix *table, const int32_t *idx, const float *w,
                           int64_t n, float *x);
};

/* The CPU backend: its op table and instance (backend/cpu/cpu.c), for tests and tools that run the
 * CPU ops directly. Every other backend is reached through the registry (backend/registry.h): its
 * entry gives the op table and makes instances, and only the registry knows which are built. */
extern const struct jev_ops jev_cpu_ops;
struct jev_pool;
/* Creates a CPU backend over a thread pool (not owned). */
struct jev_backend *jev_cpu_backend_new(struct jev_pool *pool);
void jev_cpu_backend_free(struct jev_backend *be);
/* The pool of a CPU backend (NULL for other backends). */
struct jev_pool *jev_cpu_backend_pool(struct jev_backend *be);

#endif
