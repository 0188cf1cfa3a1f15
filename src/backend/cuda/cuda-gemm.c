/*
 * cuda-gemm.c - the CUDA backend's cuBLAS products, with one pinned cuBLASLt algorithm per shape so that
 * a row's result does not depend on how many rows share the product.
 *
 * Why: cublasSgemm / cublasGemmEx choose their kernel (tile, split-K, sliced-K) by the whole problem,
 * the batch's row count included, and each kernel orders a dot product's sums its own way: a request
 * batched with others got other bits than alone (up to 1.03e-5 in probability in exact mode, 0.0105 in
 * fast). Here the algorithm is chosen once per (kind, output columns, inner dim, output stride,
 * alignment class), asking cublasLtMatmulAlgoGetHeuristic about PIN_N rows, taking its best config
 * without split-K (SPLITK_NUM 1, REDUCTION_SCHEME NONE), and reused for every row count. A kernel
 * without split-K computes each output from one CTA's tile over the whole inner dimension in a fixed
 * order, so a row's bits are the same wherever the row sits and whatever else is there
 * (tests/cuda/test-cuda-matmul.c checks it, memcmp, and passes on the H200). The math is not changed,
 * only the choice: CUBLAS_COMPUTE_32F with f32 inputs (f32 FMA, no TF32) in exact mode, bf16 inputs
 * with CUBLAS_COMPUTE_32F in fast mode, as the cuBLAS calls before.
 *
 * Why PIN_N = 512 rows and not the largest batches (the vision tower's 1824 patches, the 64-question
 * scoring's ~2300 rows): one algorithm serves every row count, and a split-K-free f32 (SIMT) kernel
 * chosen for 2048 rows has tiles too large for fewer rows (measured on the H200, test-cuda-matmul's
 * cost test, 4-bit weights, exact mode, ms pinned for 512 / for 2048 / cuBLAS's own choice: 1024 x
 * 3584 at 532 rows 0.226 / 0.326 / 0.130, at 16 rows 0.131 / 0.315 / 0.051, at 2300 rows 0.524 /
 * 0.616 / 0.375; 768 x 3072 at 1824 rows 0.290 / 0.273 / 0.209). Fast mode's bf16 tensor-core kernels
 * stay within about 20 us of cuBLAS's choice. Exact mode is slower than before: over the six shapes,
 * 0.96-1.5x at 1824-2300 rows, 1.06-1.74x at 532, 2-4x at 5-64; the whole benchmark (H200, exact, medians
 * of 3): shared 1 decision 78.7 ms unpinned, 100.2 pinned, 64 decisions 299.3 and 390.3.
 *
 * When: only where rows of several requests share products, i.e. once the batcher across requests
 * starts (ops->set_batch_invariant, jev_cuda_gemm_batch_invariant); a single request's forwards have no
 * company and keep cuBLAS's fastest choice. JEV_CUDA_PIN in the environment overrides both ways for the
 * process: 0 never pins (the A/B measurement), 1 always pins, N >= 2 always pins with algorithms chosen
 * for N rows.
 *
 * Not pinned (the cuBLAS call of before, cublasSgemm / cublasSgemv / cublasGemmEx, whose kernel may
 * change with the row count): one row in exact mode (a gemv: decode over an f32 matrix); a shape for
 * which cuBLASLt has no split-K-free algorithm, or whose pinned algorithm cublasLtMatmulAlgoCheck
 * refuses for this call. Each such product of more than one row is counted (jev_cuda_gemm_unpinned)
 * so that tests can require none. Shapes whose rows are not whole 16-byte vectors (odd inner dims or
 * output strides) or whose pointers are not 16-byte aligned are pinned too, on a key of their own
 * chosen for element alignment (align_class).
 *
 * Kinds: JEV_CUDA_GEMM_F32 (exact matmul) and JEV_CUDA_GEMM_BF16 (fast matmul) pin per (output
 * columns, inner dim, output stride); JEV_CUDA_GEMM_ROWS (matmul_rows: the candidates' rows, whose
 * count is the union of a batch's candidates, so it changes with company too) pins per inner dim
 * alone, chosen for PIN_ROWS_M output columns and any output alignment. Exact mode's split products
 * (JEV_CUDA_EXACT_GEMM, cuda-gemm-split.cu) are BF16 products and JEV_CUDA_GEMM_TF32 ones (f32
 * inputs, CUBLAS_COMPUTE_32F_FAST_TF32: their own descriptor) over the first k of rows ld apart,
 * accumulated into Y (beta 1): pinned the same way, the inputs' row stride in the key too. beta
 * changes only the epilogue (Y = acc + Y, element by element), so a pinned partial sum still
 * depends on its own token's row alone.
 */
#include "backend/cuda/cuda-int.h" // defines: struct jev_backend, jev_cuda_check, enum jev_cuda_gemm_kind
#include "base/error.h"            // defines: jev_fail

#include <stdlib.h>
#include <string.h>

#define PIN_N 512                      /* the row count the algorithms are chosen for (JEV_CUDA_PIN=N: N) */
#define PIN_ROWS_M 1024                /* matmul_rows: representative candidate count */
#define PIN_WS_BYTES ((size_t)4 << 20) /* the pinned products' workspace (no split-K: little or none) */
#define PIN_ALIGN 16                   /* inputs' and (but for ROWS) outputs' alignment, bytes */
#define PIN_RESULTS 16                 /* heuristic results looked through for a split-K-free one */

/* One pinned algorithm: the key, and whether cuBLASLt had one (ok false: the shape runs unpinned). */
struct jev_cuda_pin {
    enum jev_cuda_gemm_kind kind;
    int64_t m, k, ldc; /* ROWS: m and ldc 0 (any) */
    int64_t ld;        /* the inputs' row stride (k but for the split products' partial sums) */
    uint32_t al;       /* the inputs' alignment it was chosen for: PIN_ALIGN, or an element's (narrow) */
    bool ok;
    cublasLtMatmulAlgo_t algo;
};

static cudaDataType_t in_type(enum jev_cuda_gemm_kind kind) {
    return kind == JEV_CUDA_GEMM_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

static size_t in_bytes(enum jev_cuda_gemm_kind kind) { return kind == JEV_CUDA_GEMM_BF16 ? 2 : 4; }

/* The kind's descriptor: TF32's computes on TF32 tensor cores, every other kind's in f32. */
static cublasLtMatmulDesc_t desc_of(const struct jev_backend *be, enum jev_cuda_gemm_kind kind) {
    return kind == JEV_CUDA_GEMM_TF32 ? be->lt_desc_tf32 : be->lt_desc;
}

/* A descriptor of compute type ct, f32 scale, W transposed (Y^T = op_T(W^T) . X^T: the file header of
 * cuda-matmul.cu); false when cuBLASLt refuses. */
static bool desc_make(cublasLtMatmulDesc_t *d, cublasComputeType_t ct) {
    const cublasOperation_t t = CUBLAS_OP_T, n = CUBLAS_OP_N;
    return cublasLtMatmulDescCreate(d, ct, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS &&
           cublasLtMatmulDescSetAttribute(*d, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t) == CUBLAS_STATUS_SUCCESS &&
           cublasLtMatmulDescSetAttribute(*d, CUBLASLT_MATMUL_DESC_TRANSB, &n, sizeof n) == CUBLAS_STATUS_SUCCESS;
}

/* JEV_CUDA_EXACT_GEMM's value; false when it names no variant. */
static bool exact_gemm_parse(const char *v, enum jev_cuda_exact_gemm *out) {
    static const struct {
        const char *name;
        enum jev_cuda_exact_gemm gemm;
    } names[] = {{"f32", JEV_CUDA_EXACT_F32}, {"bf16x6", JEV_CUDA_EXACT_BF16X6}, {"3xtf32", JEV_CUDA_EXACT_TF32X3}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(v, names[i].name) == 0) {
            *out = names[i].gemm;
            return true;
        }
    return false;
}

/* Records a failed cuBLAS(Lt) call like a CUDA error: cudaErrorUnknown with the call in where. */
static bool lt_ok(struct jev_backend *be, cublasStatus_t st, const char *where) {
    if (st != CUBLAS_STATUS_SUCCESS)
        jev_cuda_check(be, cudaErrorUnknown, where);
    return st == CUBLAS_STATUS_SUCCESS;
}

/* ---- lifetime ---- */

enum jev_status jev_cuda_gemm_init(struct jev_backend *be, struct jev_error *err) {
    /* unset: off until the batcher asks (set_batch_invariant); set: the environment decides, whoever asks */
    const char *pin = getenv("JEV_CUDA_PIN");
    be->pin_forced = pin && *pin;
    long pn = be->pin_forced ? strtol(pin, NULL, 10) : 0;
    be->pin = pn != 0;
    be->pin_n = pn >= 2 && pn <= (1L << 20) ? pn : PIN_N;
    /* unset or empty: the f32 product of before; the split ones are for A/B measurement (cuda-gemm-split.cu) */
    const char *eg = getenv("JEV_CUDA_EXACT_GEMM");
    be->exact_gemm = JEV_CUDA_EXACT_F32;
    if (eg && *eg && !exact_gemm_parse(eg, &be->exact_gemm))
        return jev_fail(err, JEV_ERR_INVALID_ARG, "cuda: JEV_CUDA_EXACT_GEMM=%s is not one of f32, bf16x6, 3xtf32", eg);
    if (cublasLtCreate(&be->lt) != CUBLAS_STATUS_SUCCESS)
        return jev_fail(err, JEV_ERR_CUDA, "cuda: cuBLASLt on device %d: cannot create its handle", be->device);
    if (!desc_make(&be->lt_desc, CUBLAS_COMPUTE_32F) || !desc_make(&be->lt_desc_tf32, CUBLAS_COMPUTE_32F_FAST_TF32))
        return jev_fail(err, JEV_ERR_CUDA, "cuda: cuBLASLt on device %d: cannot make the products' descriptors",
                        be->device);
    if (!(be->lt_ws = jev_cuda_malloc(be, PIN_WS_BYTES)))
        return jev_fail(err, JEV_ERR_NOMEM, "cuda: device %d: cannot allocate %zu bytes of cuBLASLt workspace",
                        be->device, PIN_WS_BYTES);
    be->lt_ws_bytes = PIN_WS_BYTES;
    return JEV_OK;
}

void jev_cuda_gemm_free(struct jev_backend *be) {
    jev_cuda_free(be, be->lt_ws);
    be->lt_ws = NULL;
    if (be->lt_desc)
        cublasLtMatmulDescDestroy(be->lt_desc);
    if (be->lt_desc_tf32)
        cublasLtMatmulDescDestroy(be->lt_desc_tf32);
    if (be->lt)
        cublasLtDestroy(be->lt);
    free(be->pins);
    be->pins = NULL;
    be->n_pins = be->cap_pins = 0;
}

int64_t jev_cuda_gemm_unpinned(const struct jev_backend *be) { return be->unpinned; }

int64_t jev_cuda_gemm_set_pin_n(struct jev_backend *be, int64_t n) {
    int64_t was = be->pin_n;
    if (n != was)
        be->n_pins = 0; /* chosen again on next use */
    be->pin_n = n;
    return was;
}

void jev_cuda_gemm_batch_invariant(struct jev_backend *be, bool on) {
    if (!be->pin_forced)
        be->pin = on;
}

bool jev_cuda_gemm_set_pin(struct jev_backend *be, bool on) {
    bool was = be->pin;
    be->pin = on;
    return was;
}

/* ---- the cuBLAS calls of before ---- */

/* beta 0 (Y =) or 1 (Y +=, the split products' partial sums); inputs' rows ld apart. */
static void legacy(struct jev_backend *be, enum jev_cuda_gemm_kind kind, const void *w, int64_t m, int64_t k,
                   int64_t ld, const void *x, int64_t n, float *y, int64_t ldy, float beta, const char *where) {
    const float one = 1.0f;
    cublasStatus_t st;
    if (kind == JEV_CUDA_GEMM_BF16 || kind == JEV_CUDA_GEMM_TF32) {
        cudaDataType_t t = kind == JEV_CUDA_GEMM_BF16 ? CUDA_R_16BF : CUDA_R_32F;
        cublasComputeType_t ct = kind == JEV_CUDA_GEMM_BF16 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32F_FAST_TF32;
        st = cublasGemmEx(be->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)m, (int)n, (int)k, &one, w, t, (int)ld, x, t,
                          (int)ld, &beta, y, CUDA_R_32F, (int)ldy, ct, CUBLAS_GEMM_DEFAULT);
    } else if (n == 1) { /* one token: a gemv into the contiguous y[0..m) whatever ldy is */
        st = cublasSgemv(be->blas, CUBLAS_OP_T, (int)k, (int)m, &one, (const float *)w, (int)ld, (const float *)x, 1,
                         &beta, y, 1);
    } else {
        st = cublasSgemm(be->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)m, (int)n, (int)k, &one, (const float *)w, (int)ld,
                         (const float *)x, (int)ld, &beta, y, (int)ldy);
    }
    lt_ok(be, st, where);
}

/* ---- choosing and finding a pin ---- */

/* The three layouts of Y^T (m x n, ld ldc) = op_T(W^T (k x m, ld ld)) . X^T (k x n, ld ld); false
 * (nothing to destroy) when one cannot be made. */
struct layouts {
    cublasLtMatrixLayout_t a, b, c;
};

static bool layouts_make(struct layouts *l, enum jev_cuda_gemm_kind kind, int64_t m, int64_t k, int64_t ld, int64_t n,
                         int64_t ldc) {
    memset(l, 0, sizeof *l);
    cudaDataType_t t = in_type(kind);
    if (cublasLtMatrixLayoutCreate(&l->a, t, (uint64_t)k, (uint64_t)m, ld) == CUBLAS_STATUS_SUCCESS &&
        cublasLtMatrixLayoutCreate(&l->b, t, (uint64_t)k, (uint64_t)n, ld) == CUBLAS_STATUS_SUCCESS &&
        cublasLtMatrixLayoutCreate(&l->c, CUDA_R_32F, (uint64_t)m, (uint64_t)n, ldc) == CUBLAS_STATUS_SUCCESS)
        return true;
    if (l->a)
        cublasLtMatrixLayoutDestroy(l->a);
    if (l->b)
        cublasLtMatrixLayoutDestroy(l->b);
    return false;
}

static void layouts_free(struct layouts *l) {
    cublasLtMatrixLayoutDestroy(l->a);
    cublasLtMatrixLayoutDestroy(l->b);
    cublasLtMatrixLayoutDestroy(l->c);
}

/* Whether an algorithm's config reduces over split parts (the kernels whose sums depend on the shape). */
static bool splits_k(const cublasLtMatmulAlgo_t *algo) {
    int32_t splits = 1;
    uint32_t scheme = CUBLASLT_REDUCTION_SCHEME_NONE;
    size_t got = 0;
    if (cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits, sizeof splits, &got) !=
            CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme, sizeof scheme,
                                             &got) != CUBLAS_STATUS_SUCCESS)
        return true; /* unknown: treated as splitting */
    return splits > 1 || scheme != CUBLASLT_REDUCTION_SCHEME_NONE;
}

/* The heuristic's preference: the workspace we have and the alignments the key's calls keep (the
 * outputs of ROWS and of a narrow key only 4 bytes). */
static cublasLtMatmulPreference_t preference(enum jev_cuda_gemm_kind kind, uint32_t al, size_t ws) {
    cublasLtMatmulPreference_t p = NULL;
    if (cublasLtMatmulPreferenceCreate(&p) != CUBLAS_STATUS_SUCCESS)
        return NULL;
    const uint64_t wsb = ws;
    const uint32_t in_al = al, out_al = kind == JEV_CUDA_GEMM_ROWS || al < PIN_ALIGN ? 4 : PIN_ALIGN;
    if (cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb) ||
        cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &in_al, sizeof in_al) ||
        cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &in_al, sizeof in_al) ||
        cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &out_al, sizeof out_al) ||
        cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &out_al, sizeof out_al)) {
        cublasLtMatmulPreferenceDestroy(p);
        return NULL;
    }
    return p;
}

/* The heuristic's split-K-free results for the key's shape at n rows, best first (at most PIN_RESULTS):
 * how many. */
static int candidates(struct jev_backend *be, const struct jev_cuda_pin *pin, int64_t n,
                      cublasLtMatmulAlgo_t out[PIN_RESULTS]) {
    int64_t m = pin->kind == JEV_CUDA_GEMM_ROWS ? PIN_ROWS_M : pin->m;
    int64_t ldc = pin->kind == JEV_CUDA_GEMM_ROWS ? PIN_ROWS_M : pin->ldc;
    struct layouts l;
    if (!layouts_make(&l, pin->kind, m, pin->k, pin->ld, n, ldc))
        return 0;
    cublasLtMatmulPreference_t pref = preference(pin->kind, pin->al, be->lt_ws_bytes);
    cublasLtMatmulHeuristicResult_t res[PIN_RESULTS];
    int got = 0, kept = 0;
    if (!pref || cublasLtMatmulAlgoGetHeuristic(be->lt, desc_of(be, pin->kind), l.a, l.b, l.c, l.c, pref, PIN_RESULTS,
                                                res, &got) != CUBLAS_STATUS_SUCCESS)
        got = 0;
    for (int i = 0; i < got; i++)
        if (res[i].state == CUBLAS_STATUS_SUCCESS && res[i].workspaceSize <= be->lt_ws_bytes && !splits_k(&res[i].algo))
            out[kept++] = res[i].algo;
    if (pref)
        cublasLtMatmulPreferenceDestroy(pref);
    layouts_free(&l);
    return kept;
}

/* The heuristic's best split-K-free algorithm for the key at be->pin_n rows; false when cuBLASLt has
 * none. */
static bool pin_choose(struct jev_backend *be, struct jev_cuda_pin *pin) {
    cublasLtMatmulAlgo_t list[PIN_RESULTS];
    if (candidates(be, pin, be->pin_n, list) <= 0)
        return false;
    pin->algo = list[0];
    return true;
}

/* The pin of this key, chosen on first use (NULL: no room for the table; the call runs unpinned). */
static const struct jev_cuda_pin *pin_find(struct jev_backend *be, enum jev_cuda_gemm_kind kind, int64_t m, int64_t k,
                                           int64_t ld, int64_t ldc, uint32_t al) {
    if (kind == JEV_CUDA_GEMM_ROWS)
        m = ldc = 0;
    for (int32_t i = 0; i < be->n_pins; i++) {
        const struct jev_cuda_pin *p = &be->pins[i];
        if (p->kind == kind && p->m == m && p->k == k && p->ld == ld && p->ldc == ldc && p->al == al)
            return p;
    }
    if (be->n_pins == be->cap_pins) {
        int32_t cap = be->cap_pins ? 2 * be->cap_pins : 32;
        struct jev_cuda_pin *t = realloc(be->pins, (size_t)cap * sizeof *t);
        if (!t)
            return NULL;
        be->pins = t;
        be->cap_pins = cap;
    }
    struct jev_cuda_pin *p = &be->pins[be->n_pins++];
    *p = (struct jev_cuda_pin){.kind = kind, .m = m, .k = k, .ld = ld, .ldc = ldc, .al = al};
    p->ok = pin_choose(be, p);
    return p;
}

/* ---- the product ---- */

static bool aligned(const void *p, size_t to) { return (uintptr_t)p % to == 0; }

/* The alignment class of a call: PIN_ALIGN when its inputs' pointers and rows are 16-byte aligned
 * and its output's too (but for ROWS, whose output may sit anywhere), else an element's size (narrow:
 * odd shapes, pinned on a key of their own; the engine's buffers are 64-byte aligned, so a shape's
 * class does not change with the batch; nor do the split products' pieces, whose offsets depend on
 * the inner dim alone). */
static uint32_t align_class(enum jev_cuda_gemm_kind kind, int64_t ld, const void *w, const void *x, const float *y,
                            int64_t ldc) {
    bool wide = (size_t)ld * in_bytes(kind) % PIN_ALIGN == 0 && aligned(w, PIN_ALIGN) && aligned(x, PIN_ALIGN);
    if (kind != JEV_CUDA_GEMM_ROWS)
        wide = wide && aligned(y, PIN_ALIGN) && (size_t)ldc * sizeof(float) % PIN_ALIGN == 0;
    return wide ? PIN_ALIGN : (uint32_t)in_bytes(kind);
}

/* The pinned product; false (nothing queued, nothing recorded) when this call cannot run pinned. */
static bool pinned(struct jev_backend *be, enum jev_cuda_gemm_kind kind, const void *w, int64_t m, int64_t k,
                   int64_t ld, const void *x, int64_t n, float *y, int64_t ldy, float beta, const char *where) {
    const struct jev_cuda_pin *pin = pin_find(be, kind, m, k, ld, ldy, align_class(kind, ld, w, x, y, ldy));
    if (!pin || !pin->ok)
        return false;
    struct layouts l;
    if (!layouts_make(&l, kind, m, k, ld, n, ldy))
        return false;
    cublasLtMatmulDesc_t desc = desc_of(be, kind);
    cublasLtMatmulHeuristicResult_t chk;
    bool ok = cublasLtMatmulAlgoCheck(be->lt, desc, l.a, l.b, l.c, l.c, &pin->algo, &chk) == CUBLAS_STATUS_SUCCESS &&
              chk.workspaceSize <= be->lt_ws_bytes;
    if (ok) {
        const float one = 1.0f;
        lt_ok(be,
              cublasLtMatmul(be->lt, desc, &one, w, l.a, x, l.b, &beta, y, l.c, y, l.c, &pin->algo, be->lt_ws,
                             be->lt_ws_bytes, be->stream),
              where);
    }
    layouts_free(&l);
    return ok;
}

void jev_cuda_gemm_ld(struct jev_backend *be, enum jev_cuda_gemm_kind kind, const void *w, int64_t m, int64_t k,
                      int64_t ld, const void *x, int64_t n, float *y, int64_t ldy, bool accumulate, const char *where) {
    if (n <= 0 || m <= 0)
        return;
    const float beta = accumulate ? 1.0f : 0.0f;
    /* decode over an f32 matrix: not pinned */
    bool gemv = n == 1 && (kind == JEV_CUDA_GEMM_F32 || kind == JEV_CUDA_GEMM_ROWS);
    if (be->pin && !gemv && pinned(be, kind, w, m, k, ld, x, n, y, ldy, beta, where))
        return;
    if (be->pin && !gemv)
        be->unpinned++;
    legacy(be, kind, w, m, k, ld, x, n, y, ldy, beta, where);
}

void jev_cuda_gemm(struct jev_backend *be, enum jev_cuda_gemm_kind kind, const void *w, int64_t m, int64_t k,
                   const void *x, int64_t n, float *y, int64_t ldy, const char *where) {
    jev_cuda_gemm_ld(be, kind, w, m, k, k, x, n, y, ldy, false, where);
}
