/*
 * cuda-gemm-split.cu - exact mode's error-compensated products: Y = X W^T from f32 values split
 * exactly into tensor-core pieces (cuda-split-int.h), the piece products summed in f32, smallest
 * first. Chosen by JEV_CUDA_EXACT_GEMM when the backend is made (cuda-gemm.c), for A/B measurement
 * against the f32 SIMT product (the default, unchanged); jev_cuda_matmul's exact branch calls
 * jev_cuda_matmul_split for more than JEV_CUDA_DIRECT_MAX_N tokens (any weight type, f32 included).
 *
 * - bf16x6 (BF16X3 pieces, bf16 in, f32 accumulation, CUBLAS_COMPUTE_32F): x = x1 + x2 + x3 and
 *   w = w1 + w2 + w3 exactly; each piece product is exact in f32 (8 x 8 bits); the six kept,
 *   grouped by size, are three products over concatenated pieces (the layout of cuda-split-int.h:
 *   weights w1 | w2 | w3, activations x3 | x2 | x1, rows 3k apart):
 *     Y  = [x3 x2 x1] . [w1 w2 w3]   (k' = 3k: x3 w1 + x2 w2 + x1 w3, each <= 2^-16 |x w|)
 *     Y += [x2 x1]    . [w1 w2]      (k' = 2k: x2 w1 + x1 w2, <= 2^-8 |x w|)
 *     Y += [x1]       . [w1]         (k' = k)
 *   the six products that matter, smallest first, in three calls (one accumulator per group, two
 *   epilogue additions instead of five, three launches instead of six). Dropped: x2 w3 + x3 w2 +
 *   x3 w3, at most 2^-24 + 2^-24 + 2^-32 of |x w| (bf16 rounds to 8 bits: |v2| <= 2^-8 |v|, |v3| <=
 *   2^-16 |v|), about one f32 rounding of the product.
 * - 3xtf32 (TF32X2 pieces, f32 in holding TF32 values, CUBLAS_COMPUTE_32F_FAST_TF32): x = x_hi +
 *   x_lo + r with |r| <= 2^-22 |x| (cuda-split-int.h), the same for w; rows 2k apart:
 *     Y  = [x_lo x_hi] . [w_hi w_lo] (k' = 2k: x_lo w_hi + x_hi w_lo)
 *     Y += [x_hi]      . [w_hi]      (k' = k)
 *   Each piece product is exact in f32 (11 x 11 bits). Dropped: x_lo w_lo and the pieces' rounding,
 *   at most about 3 * 2^-22 |x w| a product.
 * What both leave to the hardware is the f32 accumulation inside a product: on tensor cores, blocks
 * of products summed at once into the accumulator, with the accumulator's rounding the tensor
 * core's (truncation on V100, T4 and A100: Fasi et al., "Numerical behavior of NVIDIA tensor cores",
 * 2021; not known here for Hopper), not the SIMT FMA's round to nearest. The test
 * (tests/cuda/test-cuda-matmul.c, test_split_accuracy) measures the result against a double
 * reference; it does not assume either.
 *
 * Scratch: none of its own. The dequantization scratch dq (64 MiB for the 0.8B model, capped by its
 * LM head; the mirror sizes it for the pieces, 6 or 8 bytes a value, when the variant is set at
 * creation) holds a weight chunk's pieces (at most JEV_CUDA_SPLIT_W_SHARE of it) and after them a
 * slice of the activations' pieces. For the 0.8B model every matrix but the LM head and the vision
 * merger's 3072 x 3072 is one chunk, and every product of its 1024-token slices and of the photo's
 * 1824 patches one slice of tokens, in both forms (3xtf32's largest: the DeltaNet qkv's 6144 x 1024
 * pieces, 48 MiB, with 1024 tokens' 8 MiB; the vision fc2's 1824 x 3072 tokens, 42.75 MiB, with its
 * 18 MiB of weights). Peak device memory is unchanged.
 *
 * Company: every piece product is a jev_cuda_gemm_ld call, pinned per (kind, m, k', ld, ldy,
 * alignment) like every product (cuda-gemm.c); the pieces' offsets and strides depend on k alone and
 * the splits are per element, so a token's outputs are the same bits alone or in company, in any
 * slice (test-cuda-matmul.c's company test runs both variants).
 */
#include "backend/cuda/cuda-int.h"         // defines: struct jev_backend, jev_cuda_gemm_ld, jev_cuda_check
#include "backend/cuda/cuda-split-int.h"   // defines: enum jev_cuda_split, jev_cuda_dequant_split, jev_cuda_split_rows
#include "backend/cuda/cuda-weights-int.h" // defines: jev_cuda_chunk_rows

#include <stdint.h>

enum jev_cuda_exact_gemm jev_cuda_exact_gemm_set(struct jev_backend *be, enum jev_cuda_exact_gemm gemm) {
    enum jev_cuda_exact_gemm was = be->exact_gemm;
    be->exact_gemm = gemm;
    return was;
}

/* The piece products of one weight chunk (wp: [m][P * k], largest first) and one slice of tokens
 * (xp: [n][P * k], smallest first) into Y's columns y[.][0, m), rows ldy apart: the groups of the
 * file header, smallest first; group j (of P) multiplies the first j * k values of the weight rows
 * with the last j * k values of the token rows. */
static void piece_products(struct jev_backend *be, enum jev_cuda_split split, const void *wp, int64_t m, int64_t k,
                           const void *xp, int64_t n, float *y, int64_t ldy) {
    const int P = JEV_CUDA_SPLIT_PIECES(split);
    const enum jev_cuda_gemm_kind kind = split == JEV_CUDA_SPLIT_BF16X3 ? JEV_CUDA_GEMM_BF16 : JEV_CUDA_GEMM_TF32;
    const char *where = split == JEV_CUDA_SPLIT_BF16X3 ? "cuBLAS bf16 piece product (matmul, exact bf16x6)"
                                                       : "cuBLAS TF32 piece product (matmul, exact 3xtf32)";
    const size_t eb = (size_t)JEV_CUDA_SPLIT_ELEM(split);
    for (int j = P; j >= 1; j--) {
        const char *xj = (const char *)xp + (size_t)(P - j) * (size_t)k * eb; /* the last j pieces of a row */
        jev_cuda_gemm_ld(be, kind, wp, m, j * k, P * k, xj, n, y, ldy, j < P, where);
    }
}

void jev_cuda_matmul_split(struct jev_backend *be, const struct jev_matrix *w, const float *x, int64_t n, float *y) {
    const enum jev_cuda_split split =
        be->exact_gemm == JEV_CUDA_EXACT_BF16X6 ? JEV_CUDA_SPLIT_BF16X3 : JEV_CUDA_SPLIT_TF32X2;
    const int64_t rows = w->rows, k = w->cols;
    const size_t row_bytes = (size_t)JEV_CUDA_SPLIT_PIECES(split) * (size_t)JEV_CUDA_SPLIT_ELEM(split) * (size_t)k;
    /* dq holds a weight chunk's pieces, then a slice of tokens' pieces (256-byte aligned). The chunk is
     * the whole matrix or the most rows that fit in JEV_CUDA_SPLIT_W_SHARE of dq, a whole number of 8
     * when there are several (cuda-matmul.cu's chunk_rows: every chunk's y + r0 keeps its 16-byte
     * alignment); it depends on the matrix and dq alone, never on n: the chunks' products are pinned
     * per row count (m), so a chunk that changed with the tokens would change their bits. */
    size_t w_room = (size_t)((double)be->dq_bytes * JEV_CUDA_SPLIT_W_SHARE);
    if ((size_t)rows * row_bytes < w_room)
        w_room = (size_t)rows * row_bytes;
    int64_t chunk = jev_cuda_chunk_rows(w_room, row_bytes, rows, 1);
    if (chunk < rows && chunk >= 8)
        chunk &= ~(int64_t)7;
    const size_t x_at = ((size_t)chunk * row_bytes + 255) & ~(size_t)255;
    const int64_t most = x_at < be->dq_bytes ? (int64_t)((be->dq_bytes - x_at) / row_bytes) : 0;
    if (chunk <= 0 || most <= 0) {
        jev_cuda_check(be, cudaErrorInvalidValue, "matmul (exact, split): no room in the dequantization scratch");
        return;
    }
    void *wp = be->dq, *xp = (char *)be->dq + x_at;
    /* tokens in equal slices of at most `most` (each token's outputs the same bits in any slice) */
    const int64_t n_slices = (n + most - 1) / most, slice = (n + n_slices - 1) / n_slices;
    if (n_slices == 1) /* split once for every chunk */
        jev_cuda_split_rows(be, x, n, k, xp, split, true);
    /* the queued order makes the reuse of dq safe: each split runs after the products before it */
    for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
        const int64_t nr = rows - r0 < chunk ? rows - r0 : chunk;
        if (w->type == JEV_MTYPE_F32)
            jev_cuda_split_rows(be, (const float *)w->data + r0 * k, nr, k, wp, split, false);
        else
            jev_cuda_dequant_split(be, w, r0, nr, wp, split);
        for (int64_t t0 = 0; t0 < n; t0 += slice) {
            const int64_t nt = n - t0 < slice ? n - t0 : slice;
            if (n_slices > 1)
                jev_cuda_split_rows(be, x + t0 * k, nt, k, xp, split, true);
            piece_products(be, split, wp, nr, k, xp, nt, y + t0 * rows + r0, rows);
        }
    }
}
