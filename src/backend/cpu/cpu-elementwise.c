/*
 * cpu-elementwise.c - norms and pointwise ops on the CPU, in f32.
 *
 * Sums run in index order in f32 with the same operation order as the
 * reference's torch code where that matters (mean of squares, then add eps,
 * then rsqrt).
 */
#include "backend/cpu/cpu.h" // defines: jev_cpu_rmsnorm, ...

#include <math.h>

void jev_cpu_rmsnorm(struct jev_backend *be, const float *x, const float *w, int64_t n, int32_t d, float eps,
                     float *y) {
    (void)be;
    for (int64_t r = 0; r < n; r++) {
        const float *xr = x + r * d;
        float *yr = y + r * d;
        float ss = 0.0f;
        for (int32_t i = 0; i < d; i++)
            ss += xr[i] * xr[i];
        float inv = 1.0f / sqrtf(ss / (float)d + eps);
        for (int32_t i = 0; i < d; i++)
            yr[i] = xr[i] * inv * w[i];
    }
}

void jev_cpu_layernorm(struct jev_backend *be, const float *x, const float *w, const float *b, int64_t n,
                       int32_t d, float eps, float *y) {
    (void)be;
    for (int64_t r = 0; r < n; r++) {
        const float *xr = x + r * d;
        float *yr = y + r * d;
        float mean = 0.0f;
        for (int32_t i = 0; i < d; i++)
            mean += xr[i];
        mean /= (float)d;
        float var = 0.0f;
        for (int32_t i = 0; i < d; i++)
            var += (xr[i] - mean) * (xr[i] - mean);
        var /= (float)d;
        float inv = 1.0f / sqrtf(var + eps);
        for (int32_t i = 0; i < d; i++)
            yr[i] = (xr[i] - mean) * inv * w[i] + b[i];
    }
}

void jev_cpu_add(struct jev_backend *be, float *x, const float *y, int64_t n) {
    (void)be;
    for (int64_t i = 0; i < n; i++)
        x[i] += y[i];
}

void jev_cpu_add_bias(struct jev_backend *be, float *y, const float *b, int64_t n, int32_t d) {
    (void)be;
    for (int64_t r = 0; r < n; r++)
        for (int32_t c = 0; c < d; c++)
            y[r * d + c] += b[c];
}

void jev_cpu_swiglu(struct jev_backend *be, const float *gate, const float *up, int64_t n, float *out) {
    (void)be;
    for (int64_t i = 0; i < n; i++) {
        float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

/* GELU over chunks of GELU_CHUNK elements, spread over the pool: the same per-element math on any thread
 * count (the vision MLP runs it over N x 3072 values per block). */
#define GELU_CHUNK 32768

struct gelu_job {
    float *x;       /* the values, in place */
    int64_t n;      /* count */
    bool tanh_form; /* gelu_pytorch_tanh, else erf */
};

static void gelu_task(void *arg, int64_t task, int thread) {
    (void)thread;
    const struct gelu_job *j = arg;
    int64_t i0 = task * GELU_CHUNK, i1 = i0 + GELU_CHUNK < j->n ? i0 + GELU_CHUNK : j->n;
    float *x = j->x;
    if (j->tanh_form) {
        const float k = 0.7978845608028654f; /* sqrt(2/pi) */
        for (int64_t i = i0; i < i1; i++) {
            float v = x[i];
            x[i] = 0.5f * v * (1.0f + tanhf(k * (v + 0.044715f * v * v * v)));
        }
    } else {
        for (int64_t i = i0; i < i1; i++)
            x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.7071067811865476f));
    }
}

void jev_cpu_gelu(struct jev_backend *be, float *x, int64_t n, bool tanh_form) {
    struct gelu_job j = {x, n, tanh_form};
    jev_pool_run(be ? be->pool : NULL, (n + GELU_CHUNK - 1) / GELU_CHUNK, gelu_task, &j);
}
