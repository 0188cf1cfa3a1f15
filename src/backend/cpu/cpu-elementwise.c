/*
 * cpu-elementwise.c - norms and pointwise ops on the CPU, in f32.
 *
 * Sums run in index order in f32 with the same operation order as the
 * reference's torch code where that matters (mean of squares, then add eps,
 * then rsqrt). Large ops are split by rows over the pool
 * (jev_cpu_for_rows); every value is computed by the same code on any
 * thread count.
 */
#include "backend/cpu/cpu.h" // defines: jev_cpu_rmsnorm, ...

#include <math.h>
#include <string.h>

#include "backend/cpu/cpu-simd.h" // defines: jev_exp8, jev_silu8

/* The arguments of every op below; each uses the fields it names. */
struct pw_job {
    const float *x, *w, *b;
    float *y;
    float *res; /* add_rmsnorm: the residual, added to and then normed (x points at it too) */
    int32_t d;
    float eps;
};

static void rmsnorm_rows(void *arg, int64_t r0, int64_t r1, int thread) {
    (void)thread;
    const struct pw_job *j = arg;
    const int32_t d = j->d;
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = j->x + r * d;
        float *yr = j->y + r * d;
        float inv = jev_cpu_rms_inv(xr, d, j->eps);
        for (int32_t i = 0; i < d; i++)
            yr[i] = xr[i] * inv * j->w[i];
    }
}

void jev_cpu_rmsnorm(struct jev_backend *be, const float *x, const float *w, int64_t n, int32_t d, float eps,
                     float *y) {
    struct pw_job j = {.x = x, .w = w, .y = y, .d = d, .eps = eps};
    jev_cpu_for_rows(be, n, d, rmsnorm_rows, &j);
}

/* The residual row first (x += b: the add's one rounding per element), then rmsnorm_rows' arithmetic on it. */
static void add_rmsnorm_rows(void *arg, int64_t r0, int64_t r1, int thread) {
    const struct pw_job *j = arg;
    const int32_t d = j->d;
    for (int64_t r = r0; r < r1; r++) {
        float *xr = j->res + r * d;
        const float *yr = j->b + r * d;
        for (int32_t i = 0; i < d; i++)
            xr[i] += yr[i];
    }
    rmsnorm_rows(arg, r0, r1, thread);
}

void jev_cpu_add_rmsnorm(struct jev_backend *be, float *x, const float *y, const float *w, int64_t n, int32_t d,
                         float eps, float *h) {
    struct pw_job j = {.x = x, .res = x, .b = y, .w = w, .y = h, .d = d, .eps = eps};
    jev_cpu_for_rows(be, n, d, add_rmsnorm_rows, &j);
}

static void layernorm_rows(void *arg, int64_t r0, int64_t r1, int thread) {
    (void)thread;
    const struct pw_job *j = arg;
    const int32_t d = j->d;
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = j->x + r * d;
        float *yr = j->y + r * d;
        float mean = 0.0f;
        for (int32_t i = 0; i < d; i++)
            mean += xr[i];
        mean /= (float)d;
        float var = 0.0f;
        for (int32_t i = 0; i < d; i++)
            var += (xr[i] - mean) * (xr[i] - mean);
        var /= (float)d;
        float inv = 1.0f / sqrtf(var + j->eps);
        for (int32_t i = 0; i < d; i++)
            yr[i] = (xr[i] - mean) * inv * j->w[i] + j->b[i];
    }
}

void jev_cpu_layernorm(struct jev_backend *be, const float *x, const float *w, const float *b, int64_t n, int32_t d,
                       float eps, float *y) {
    struct pw_job j = {.x = x, .w = w, .b = b, .y = y, .d = d, .eps = eps};
    jev_cpu_for_rows(be, n, d, layernorm_rows, &j);
}

/* y[i] += x[i] over elements [i0, i1) */
static void add_elems(void *arg, int64_t i0, int64_t i1, int thread) {
    (void)thread;
    const struct pw_job *j = arg;
    for (int64_t i = i0; i < i1; i++)
        j->y[i] += j->x[i];
}

void jev_cpu_add(struct jev_backend *be, float *x, const float *y, int64_t n) {
    struct pw_job j = {.x = y, .y = x};
    jev_cpu_for_rows(be, n, 1, add_elems, &j);
}

static void add_bias_rows(void *arg, int64_t r0, int64_t r1, int thread) {
    (void)thread;
    const struct pw_job *j = arg;
    for (int64_t r = r0; r < r1; r++)
        for (int32_t c = 0; c < j->d; c++)
            j->y[r * j->d + c] += j->b[c];
}

void jev_cpu_add_bias(struct jev_backend *be, float *y, const float *b, int64_t n, int32_t d) {
    struct pw_job j = {.b = b, .y = y, .d = d};
    jev_cpu_for_rows(be, n, d, add_bias_rows, &j);
}

/*
 * The AVX2 forms of SwiGLU and tanh-GELU run 8 values at a time through jev_exp8 (within 2 ulp of expf; the
 * torch reference uses its own vectorised exp); a tail shorter than 8 goes through the same code in a padded
 * copy, so every value gets the same formula.
 *   silu(g) * up = g / (1 + e^-g) * up
 *   gelu_tanh(v) = 0.5 v (1 + tanh(y)) = v / (1 + e^-2y),  y = sqrt(2/pi) (v + 0.044715 v^3)
 */
JEV_AVX2 static inline __m256 swiglu8(__m256 g, __m256 up) { return _mm256_mul_ps(jev_silu8(g), up); }

JEV_AVX2 static inline __m256 gelu_tanh8(__m256 v) {
    const __m256 k2 = _mm256_set1_ps(-2.0f * 0.7978845608028654f), c = _mm256_set1_ps(0.044715f);
    __m256 inner = _mm256_fmadd_ps(_mm256_mul_ps(c, v), _mm256_mul_ps(v, v), v); /* v + 0.044715 v^3 */
    __m256 e = jev_exp8(_mm256_mul_ps(k2, inner));
    return _mm256_div_ps(v, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

JEV_AVX2 static void swiglu_avx2(const float *gate, const float *up, int64_t i0, int64_t i1, float *out) {
    int64_t i = i0;
    for (; i + 8 <= i1; i += 8)
        _mm256_storeu_ps(out + i, swiglu8(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
    if (i < i1) {
        float g[8] = {0}, u[8] = {0}, o[8];
        memcpy(g, gate + i, (size_t)(i1 - i) * sizeof(float));
        memcpy(u, up + i, (size_t)(i1 - i) * sizeof(float));
        _mm256_storeu_ps(o, swiglu8(_mm256_loadu_ps(g), _mm256_loadu_ps(u)));
        memcpy(out + i, o, (size_t)(i1 - i) * sizeof(float));
    }
}

JEV_AVX2 static void gelu_tanh_avx2(float *x, int64_t i0, int64_t i1) {
    int64_t i = i0;
    for (; i + 8 <= i1; i += 8)
        _mm256_storeu_ps(x + i, gelu_tanh8(_mm256_loadu_ps(x + i)));
    if (i < i1) {
        float v[8] = {0};
        memcpy(v, x + i, (size_t)(i1 - i) * sizeof(float));
        _mm256_storeu_ps(v, gelu_tanh8(_mm256_loadu_ps(v)));
        memcpy(x + i, v, (size_t)(i1 - i) * sizeof(float));
    }
}

/* y[i] = silu(x[i]) * w[i] (x = gate, w = up) */
static void swiglu_elems(void *arg, int64_t i0, int64_t i1, int thread) {
    (void)thread;
    const struct pw_job *j = arg;
    if (jev_cpu_has_avx2()) {
        swiglu_avx2(j->x, j->w, i0, i1, j->y);
        return;
    }
    for (int64_t i = i0; i < i1; i++) {
        float g = j->x[i];
        j->y[i] = g / (1.0f + expf(-g)) * j->w[i];
    }
}

void jev_cpu_swiglu(struct jev_backend *be, const float *gate, const float *up, int64_t n, float *out) {
    struct pw_job j = {.x = gate, .w = up, .y = out};
    jev_cpu_for_rows(be, n, 1, swiglu_elems, &j);
}

/* GELU in place over elements [i0, i1): tanh form when j->d != 0 (gelu_pytorch_tanh), else the erf form.
 * The vision MLP runs it over N x 3072 values per block. */
static void gelu_elems(void *arg, int64_t i0, int64_t i1, int thread) {
    (void)thread;
    const struct pw_job *j = arg;
    float *x = j->y;
    if (j->d && jev_cpu_has_avx2()) {
        gelu_tanh_avx2(x, i0, i1);
    } else if (j->d) {
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
    struct pw_job j = {.y = x, .d = tanh_form ? 1 : 0};
    jev_cpu_for_rows(be, n, 1, gelu_elems, &j);
}
