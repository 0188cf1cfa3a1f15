/*
 * test-cuda-backends.c - the registry's op parity loop (tests/backend-parity.h)
 * in the CUDA build: the registry must hold the CPU and CUDA, and every op of
 * the set runs on each against the CPU scalar reference. Built by `make CUDA=1
 * cuda-tests`, run on the GPU machine (scripts/device/cuda-check.sh runs every
 * tests-cuda binary); tests/test-backends.c runs the same loop in the CPU build.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../backend-parity.h" // defines: bp_run_all

static void test_registry_has_cuda(void **state) {
    (void)state;
    assert_int_equal(jev_backend_count(), 2);
    assert_string_equal(jev_backend_at(0)->name, "cpu");
    assert_string_equal(jev_backend_at(1)->name, "cuda");
    const struct jev_backend_reg *reg = NULL;
    int32_t device = -1;
    struct jev_error err = {0};
    assert_int_equal(jev_backend_parse("cuda:0", &reg, &device, &err), JEV_OK);
    assert_ptr_equal(reg, jev_backend_at(1));
    /* describe: the device, its memory and the libraries the benchmark records */
    struct jev_backend *be = NULL;
    assert_int_equal(reg->create(0, NULL, &be, &err), JEV_OK);
    struct jev_backend_info info;
    jev_backend_describe(reg, be, &info);
    printf("cuda device 0: %s, %lld bytes, %s, %s %s, %s %s\n", info.device, (long long)info.memory_bytes, info.driver,
           info.lib_names[0], info.lib_versions[0], info.lib_names[1], info.lib_versions[1]);
    assert_true(info.device[0] != '\0');
    assert_true(info.memory_bytes > 0);
    assert_int_equal(info.n_libs, 2);
    reg->destroy(be);
}

static void test_parity_loop(void **state) {
    (void)state;
    assert_int_equal(bp_run_all(), 2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registry_has_cuda),
        cmocka_unit_test(test_parity_loop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
