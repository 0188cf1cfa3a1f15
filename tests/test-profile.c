/*
 * test-profile.c - the timing op table (backend/profile.h): the wrapped ops
 * give the inner ops' results bit for bit, count their calls and flops per
 * slot, and the report lists them and then starts over.
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
#include "backend/profile.h" // defines: jev_profile_wrap, jev_profile_report

/* The report of the accumulated table as a string (caller frees). */
static char *report_text(void) {
    FILE *f = tmpfile();
    assert_non_null(f);
    jev_profile_report(f);
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
    const struct jev_ops *p = jev_profile_wrap(&jev_cpu_ops);
    assert_true(jev_profile_is_wrapped(p));
    assert_false(jev_profile_is_wrapped(&jev_cpu_ops));
    free(report_text()); /* start from an empty table */

    /* a 16 x 24 f32 matrix against 5 tokens (the many-token regime) and 1 token */
    enum { R = 16, C = 24, T = 5 };
    float w[R * C], x[T * C], want[T * R], got[T * R];
    for (int i = 0; i < R * C; i++)
        w[i] = (float)((i * 37) % 11) / 11.0f - 0.5f;
    for (int i = 0; i < T * C; i++)
        x[i] = (float)((i * 13) % 7) / 7.0f - 0.5f;
    struct jev_matrix m = {.type = JEV_MTYPE_F32, .rows = R, .cols = C, .data = w, .name = "w"};
    jev_cpu_ops.matmul(be, &m, x, T, want);
    p->matmul(be, &m, x, T, got);
    assert_memory_equal(want, got, sizeof want);
    jev_cpu_ops.matmul(be, &m, x, 1, want); /* another regime: compare like with like */
    p->matmul(be, &m, x, 1, got);
    assert_memory_equal(want, got, R * sizeof(float));
    float y1[T * C], y2[T * C], g[C];
    for (int i = 0; i < C; i++)
        g[i] = 1.0f + 0.01f * (float)i;
    jev_cpu_ops.rmsnorm(be, x, g, T, C, 1e-6f, y1);
    p->rmsnorm(be, x, g, T, C, 1e-6f, y2);
    p->rmsnorm(be, x, g, T, C, 1e-6f, y2);
    assert_memory_equal(y1, y2, sizeof y1);

    char *s = report_text();
    printf("%s", s);
    /* slot, calls: the many-token product once, the one-token product once, rmsnorm twice */
    const char *many = strstr(s, "matmul (3+ tokens)"), *few = strstr(s, "matmul (1-2 tokens)"),
               *norm = strstr(s, "rmsnorm");
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
    s = report_text();
    assert_null(strstr(s, "rmsnorm"));
    free(s);
    jev_cpu_backend_free(be);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wrapped_ops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
