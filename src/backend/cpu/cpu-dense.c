/*
 * cpu-dense.c - matrix products and embedding lookup on the CPU.
 *
 * Reference form: each task owns a block of output rows of W, dequantizes
 * one row at a time into per-thread scratch (backend/matrix.c's formula) and
 * dots it with every input row, accumulating in f32 in index order.
 * Faster kernels must match this within the op-parity tolerance.
 */
#include "backend/cpu/cpu.h" // defines: jev_cpu_matmul, jev_cpu_scratch

#include <string.h>

#define ROWS_PER_TASK 16

struct matmul_job {
    struct jev_backend *be;
    const struct jev_matrix *w;
    const int32_t *row_ids; /* NULL: all rows in order */
    int64_t n_out;          /* output columns of y */
    const float *x;
    int64_t n;
    float *y;
};

static void matmul_task(void *arg, int64_t task, int thread) {
    struct matmul_job *j = arg;
    float *row = jev_cpu_scratch(j->be, thread);
    int64_t cols = j->w->cols;
    int64_t r0 = task * ROWS_PER_TASK;
    int64_t r1 = r0 + ROWS_PER_TASK < j->n_out ? r0 + ROWS_PER_TASK : j->n_out;
    for (int64_t r = r0; r < r1; r++) {
        jev_matrix_row(j->w, j->row_ids ? j->row_ids[r] : r, row);
        for (int64_t t = 0; t < j->n; t++) {
            const float *xt = j->x + t * cols;
            float acc = 0.0f;
            for (int64_t c = 0; c < cols; c++)
                acc += row[c] * xt[c];
            j->y[t * j->n_out + r] = acc;
        }
    }
}

static void run_matmul(struct matmul_job *j) {
    JEV_ASSERT(j->w->cols <= JEV_CPU_SCRATCH_FLOATS);
    int64_t tasks = (j->n_out + ROWS_PER_TASK - 1) / ROWS_PER_TASK;
    jev_pool_run(j->be->pool, tasks, matmul_task, j);
}

void jev_cpu_matmul(struct jev_backend *be, const struct jev_matrix *w, const float *x, int64_t n, float *y) {
    struct matmul_job j = {be, w, NULL, w->rows, x, n, y};
    run_matmul(&j);
}

void jev_cpu_matmul_rows(struct jev_backend *be, const struct jev_matrix *w, const int32_t *row_ids, int32_t n_rows,
                         const float *x, int64_t n, float *y) {
    struct matmul_job j = {be, w, row_ids, n_rows, x, n, y};
    run_matmul(&j);
}

void jev_cpu_embed(struct jev_backend *be, const struct jev_matrix *w, const int32_t *ids, int64_t n, float *out) {
    (void)be;
    for (int64_t t = 0; t < n; t++)
        jev_matrix_row(w, ids[t], out + t * w->cols);
}
