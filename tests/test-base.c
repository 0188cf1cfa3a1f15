/*
 * test-base.c - the foundation: status names, error recording, arenas, the
 * thread pool, half-precision conversion and sha256.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "base/arena.h"  // defines: jev_arena_*
#include "base/error.h"  // defines: jev_fail
#include "base/half.h"   // defines: jev_bf16_to_f32, ...
#include "base/pool.h"   // defines: jev_pool_*
#include "base/sha256.h" // defines: jev_sha256_hex

static void test_status_names(void **state) {
    (void)state;
    assert_string_equal(jev_status_str(JEV_OK), "ok");
    assert_string_equal(jev_status_str(JEV_ERR_FORMAT), "malformed input");
    assert_string_equal(jev_status_str((enum jev_status)999), "unknown status");
    assert_int_equal(JEV_ERR_ABORTED, 7); /* numbers are part of the ABI */
}

static void test_first_failure_sticks(void **state) {
    (void)state;
    struct jev_error err = {0};
    assert_int_equal(jev_fail(&err, JEV_ERR_IO, "first %d", 1), JEV_ERR_IO);
    assert_int_equal(jev_fail(&err, JEV_ERR_FORMAT, "second"), JEV_ERR_IO);
    assert_string_equal(err.msg, "first 1");
    char buf[4];
    jev_error_copy(&err, buf, sizeof buf);
    assert_string_equal(buf, "fir");
}

static void test_arena(void **state) {
    (void)state;
    struct jev_error err = {0};
    struct jev_arena a;
    assert_int_equal(jev_arena_init(&a, 256, &err), JEV_OK);
    void *p = jev_arena_alloc(&a, 10, &err);
    void *q = jev_arena_alloc(&a, 100, &err);
    assert_non_null(p);
    assert_non_null(q);
    assert_int_equal((uintptr_t)q % 64, 0);
    assert_int_equal(a.used, 64 + 128);
    assert_null(jev_arena_alloc(&a, 100, &err));
    assert_int_equal(err.status, JEV_ERR_NOMEM);
    assert_non_null(strstr(err.msg, "arena full"));
    jev_error_clear(&err);
    assert_null(jev_arena_alloc_array(&a, SIZE_MAX / 2, 4, &err));
    assert_non_null(strstr(err.msg, "overflow"));
    jev_arena_reset(&a);
    assert_int_equal(a.peak, 192);
    jev_arena_free(&a);
}

static void sum_task(void *arg, int64_t i, int thread) {
    (void)thread;
    int64_t *out = arg;
    out[i] = i * i;
}

static void test_pool_covers_every_index(void **state) {
    (void)state;
    struct jev_error err = {0};
    struct jev_pool *pool;
    assert_int_equal(jev_pool_init(&pool, 4, &err), JEV_OK);
    assert_int_equal(jev_pool_size(pool), 4);
    static int64_t out[10007];
    for (int rep = 0; rep < 20; rep++) {
        memset(out, 0xff, sizeof out);
        jev_pool_run(pool, 10007, sum_task, out);
        for (int64_t i = 0; i < 10007; i++)
            assert_int_equal(out[i], i * i);
    }
    jev_pool_free(pool);
}

static void test_half_conversions(void **state) {
    (void)state;
    assert_true(jev_bf16_to_f32(0x3f80) == 1.0f);
    assert_int_equal(jev_f32_to_bf16(1.0f), 0x3f80);
    /* round to nearest even: 1 + 2^-8 is a tie between 0x3f80 and 0x3f81 */
    assert_int_equal(jev_f32_to_bf16(1.00390625f), 0x3f80);
    assert_int_equal(jev_f32_to_bf16(1.01171875f), 0x3f82);
    assert_true(isnan(jev_bf16_to_f32(jev_f32_to_bf16(NAN))));
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = jev_f16_to_f32((uint16_t)h);
        if (!isnan(f))
            assert_int_equal(jev_f32_to_f16(f), h);
    }
    assert_true(jev_f16_to_f32(0x0001) == 5.9604644775390625e-8f);
}

static void test_sha256(void **state) {
    (void)state;
    char hex[JEV_SHA256_HEX];
    jev_sha256_hex("abc", 3, hex);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_names),
        cmocka_unit_test(test_first_failure_sticks),
        cmocka_unit_test(test_arena),
        cmocka_unit_test(test_pool_covers_every_index),
        cmocka_unit_test(test_half_conversions),
        cmocka_unit_test(test_sha256),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
