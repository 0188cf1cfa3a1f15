/*
 * test-cuda-fault.c - the CUDA backend's two kinds of fault (backend/ops.h, status).
 *
 * - Recoverable: scratch memory larger than the device fails to allocate; status reports
 *   JEV_ERR_CUDA naming the scratch allocation once, then JEV_OK, and an op runs right after.
 * - Sticky: an op writes through an address that is not device memory (an illegal address in a
 *   kernel poisons the context); status reports JEV_ERR_DEVICE_LOST, and again on the next call.
 * The sticky case ends the context, so it runs last and alone in this binary.
 */
#include "cuda-test.h" // defines: ct_setup, ct_up, ct_down, ct_ops

/* backend/cuda/cuda-int.h's scratch block (that header's struct jev_backend clashes with the CPU's
 * that cuda-test.h includes; the pointer is the same opaque one) */
float *jev_cuda_work(struct jev_backend *be, size_t bytes);

static void test_recoverable(void **state) {
    (void)state;
    struct jev_error err = {0};
    assert_int_equal(ct_ops->status(ct_gpu, &err), JEV_OK);
    assert_null(jev_cuda_work(ct_gpu, (size_t)1 << 50)); /* a petabyte */
    assert_int_equal(ct_ops->status(ct_gpu, &err), JEV_ERR_CUDA);
    printf("  recoverable: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "scratch allocation"));
    struct jev_error again = {0};
    assert_int_equal(ct_ops->status(ct_gpu, &again), JEV_OK);
    /* the device still computes */
    float one[4] = {1, 2, 3, 4}, got[4];
    float *x = ct_up(one, 4), *y = ct_up(one, 4);
    ct_ops->add(ct_gpu, x, y, 4);
    ct_ops->download(ct_gpu, got, x, sizeof got);
    assert_int_equal(ct_ops->status(ct_gpu, &again), JEV_OK);
    for (int i = 0; i < 4; i++)
        assert_true(got[i] == 2 * one[i]);
    ct_free(x);
    ct_free(y);
}

static void test_sticky(void **state) {
    (void)state;
    float one[256];
    for (int i = 0; i < 256; i++)
        one[i] = 1.0f;
    float *y = ct_up(one, 256);
    float *bogus = (float *)(uintptr_t)0x1000; /* not device memory */
    ct_ops->add(ct_gpu, bogus, y, 256);
    struct jev_error err = {0};
    assert_int_equal(ct_ops->status(ct_gpu, &err), JEV_ERR_DEVICE_LOST);
    printf("  sticky: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "restart the process"));
    struct jev_error again = {0};
    assert_int_equal(ct_ops->status(ct_gpu, &again), JEV_ERR_DEVICE_LOST);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_recoverable),
        cmocka_unit_test(test_sticky),
    };
    return cmocka_run_group_tests(tests, ct_setup, ct_teardown);
}
