/*
 * test-base.c - the foundation: status names, error recording, arenas, the
 * thread pool, half-precision conversion, sha256, the bounded byte buffer
 * and reading a whole file.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/arena.h"     // defines: jev_arena_*
#include "base/buf.h"       // defines: struct jev_buf, jev_buf_*
#include "base/error.h"     // defines: jev_fail
#include "base/half.h"      // defines: jev_bf16_to_f32, ...
#include "base/pool.h"      // defines: jev_pool_*
#include "base/read-file.h" // defines: jev_read_file
#include "base/sha256.h"    // defines: jev_sha256_hex

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

/* ---- the bounded buffer ---- */

/* Within the cap, then exactly at it: both accepted; one byte more fails
 * with a message naming the cap, empties the buffer, and every later append
 * fails until a reset. */
static void test_buf_cap(void **state) {
    (void)state;
    struct jev_error err = {0};
    struct jev_buf b;
    jev_buf_init(&b, 8);
    assert_string_equal(jev_buf_str(&b), "");
    assert_int_equal(jev_buf_add(&b, "abcd", 4, &err), JEV_OK);
    assert_int_equal(jev_buf_room(&b), 4);
    assert_int_equal(jev_buf_add_str(&b, "efgh", &err), JEV_OK); /* 8 bytes: exactly the cap */
    assert_int_equal(b.len, 8);
    assert_string_equal(b.data, "abcdefgh");
    assert_true(b.alloc <= 9); /* never more than cap + the NUL */
    assert_int_equal(jev_buf_room(&b), 0);
    assert_int_equal(jev_buf_add(&b, "", 0, &err), JEV_OK); /* nothing more still fits */
    assert_int_equal(err.status, JEV_OK);

    assert_int_equal(jev_buf_add(&b, "i", 1, &err), JEV_ERR_NOMEM);
    assert_string_equal(err.msg, "buffer: 8 + 1 bytes would pass the limit of 8 bytes");
    assert_null(b.data);
    assert_int_equal(b.len, 0);
    assert_string_equal(jev_buf_str(&b), "");
    assert_int_equal(jev_buf_room(&b), 0);
    jev_error_clear(&err);
    assert_int_equal(jev_buf_add(&b, "x", 1, &err), JEV_ERR_NOMEM); /* a later append fails too */
    assert_string_equal(err.msg, "buffer: an earlier append passed the limit of 8 bytes");
    assert_int_equal(jev_buf_add(&b, "", 0, NULL), JEV_ERR_NOMEM);
    assert_int_equal(jev_buf_printf(&b, NULL, "%d", 1), JEV_ERR_NOMEM);
    assert_null(b.data);
    jev_error_clear(&err);
    assert_int_equal(jev_buf_status(&b, &err), JEV_ERR_NOMEM);
    assert_string_equal(err.msg, "buffer: an earlier append passed the limit of 8 bytes");

    jev_buf_reset(&b); /* the caller starts over */
    assert_int_equal(jev_buf_status(&b, NULL), JEV_OK);
    assert_int_equal(jev_buf_add_str(&b, "again", NULL), JEV_OK);
    assert_string_equal(jev_buf_str(&b), "again");
    jev_buf_reset(&b); /* keeps the memory, empties the text */
    assert_non_null(b.data);
    assert_string_equal(jev_buf_str(&b), "");
    jev_buf_free(&b);
    assert_null(b.data);
    assert_int_equal(b.cap, 8); /* usable again after free */
    assert_int_equal(jev_buf_add_str(&b, "12345678", NULL), JEV_OK);
    jev_buf_free(&b);
}

/* One byte at a time up to a cap that is no power of two: the allocation
 * never passes cap + 1 and the bytes arrive intact. */
static void test_buf_growth(void **state) {
    (void)state;
    struct jev_buf b;
    jev_buf_init(&b, 1000);
    for (int i = 0; i < 1000; i++) {
        char c = (char)('a' + i % 26);
        assert_int_equal(jev_buf_add(&b, &c, 1, NULL), JEV_OK);
        assert_true(b.alloc <= 1001);
        assert_int_equal(b.data[b.len], '\0');
    }
    assert_int_equal(b.len, 1000);
    assert_int_equal(b.alloc, 1001);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(b.data[i], 'a' + i % 26);
    assert_int_equal(jev_buf_add(&b, "z", 1, NULL), JEV_ERR_NOMEM);
    jev_buf_free(&b);
}

/* take hands the bytes over and leaves the buffer empty; an empty buffer
 * hands over ""; a failed one hands over nothing and reports why. */
static void test_buf_take(void **state) {
    (void)state;
    struct jev_error err = {0};
    struct jev_buf b;
    jev_buf_init(&b, 16);
    char *out = (char *)1;
    size_t len = 99;
    assert_int_equal(jev_buf_take(&b, &out, &len, &err), JEV_OK);
    assert_non_null(out);
    assert_string_equal(out, "");
    assert_int_equal(len, 0);
    free(out);

    assert_int_equal(jev_buf_add_str(&b, "hello", NULL), JEV_OK);
    assert_int_equal(jev_buf_take(&b, &out, &len, &err), JEV_OK);
    assert_string_equal(out, "hello");
    assert_int_equal(len, 5);
    assert_null(b.data); /* the bytes are the caller's now */
    assert_int_equal(b.len, 0);
    assert_int_equal(jev_buf_add_str(&b, "next", NULL), JEV_OK);
    assert_string_equal(b.data, "next");
    free(out);

    assert_int_equal(jev_buf_add_str(&b, "0123456789abcdef", NULL), JEV_ERR_NOMEM);
    assert_int_equal(jev_buf_take(&b, &out, NULL, &err), JEV_ERR_NOMEM);
    assert_null(out);
    assert_string_equal(err.msg, "buffer: an earlier append passed the limit of 16 bytes");
    assert_int_equal(jev_buf_add_str(&b, "fresh", NULL), JEV_OK); /* take cleared the failure */
    jev_buf_free(&b);
}

/* printf: short text in place, long text in a second pass, the cap checked
 * on the formatted length (exactly at it accepted, one over refused). */
static void test_buf_printf(void **state) {
    (void)state;
    struct jev_error err = {0};
    struct jev_buf b;
    jev_buf_init(&b, 300);
    assert_int_equal(jev_buf_printf(&b, &err, "%d-%s", 42, "x"), JEV_OK);
    assert_string_equal(b.data, "42-x");
    char big[201];
    memset(big, 'q', 200);
    big[200] = '\0';
    assert_int_equal(jev_buf_printf(&b, &err, "[%s]", big), JEV_OK); /* past the first allocation */
    assert_int_equal(b.len, 4 + 202);
    assert_int_equal(b.data[4], '[');
    assert_int_equal(b.data[205], ']');
    assert_int_equal(b.data[206], '\0');
    assert_int_equal(jev_buf_printf(&b, &err, "%94s", ""), JEV_OK); /* 300: exactly the cap */
    assert_int_equal(b.len, 300);
    assert_int_equal(jev_buf_printf(&b, &err, "%s", ""), JEV_OK);
    assert_int_equal(jev_buf_printf(&b, &err, "%c", 'z'), JEV_ERR_NOMEM);
    assert_string_equal(err.msg, "buffer: 300 + 1 bytes would pass the limit of 300 bytes");
    assert_null(b.data);
    jev_buf_free(&b);
}

/* A buffer never initialized (= {0}) or given a zero cap holds nothing:
 * there is no unbounded buffer to fall back to. */
static void test_buf_zero_cap(void **state) {
    (void)state;
    struct jev_error err = {0};
    struct jev_buf z = {0};
    assert_int_equal(jev_buf_add(&z, "a", 1, &err), JEV_ERR_NOMEM);
    assert_string_equal(err.msg, "buffer: 1 bytes would pass the limit of 0 bytes (jev_buf_init gives the limit)");
    jev_buf_free(&z);
    jev_buf_init(&z, 0);
    char *out = NULL;
    assert_int_equal(jev_buf_take(&z, &out, NULL, NULL), JEV_OK); /* the empty string fits */
    assert_string_equal(out, "");
    free(out);
    assert_int_equal(jev_buf_printf(&z, NULL, "%d", 7), JEV_ERR_NOMEM);
    jev_buf_free(&z);
}

/* A part built aside joins the whole, and so does its failure. */
static void test_buf_add_buf(void **state) {
    (void)state;
    struct jev_error err = {0};
    struct jev_buf whole, part;
    jev_buf_init(&whole, 64);
    jev_buf_init(&part, 4);
    jev_buf_add_str(&whole, "a:", NULL);
    jev_buf_add_str(&part, "bc", NULL);
    assert_int_equal(jev_buf_add_buf(&whole, &part, &err), JEV_OK);
    assert_string_equal(whole.data, "a:bc");
    assert_int_equal(jev_buf_add_str(&part, "def", NULL), JEV_ERR_NOMEM);
    assert_int_equal(jev_buf_add_buf(&whole, &part, &err), JEV_ERR_NOMEM);
    assert_string_equal(err.msg, "buffer: an earlier append passed the limit of 4 bytes");
    assert_null(whole.data);
    assert_int_equal(jev_buf_add_str(&whole, "x", NULL), JEV_ERR_NOMEM);
    jev_buf_free(&whole);
    jev_buf_free(&part);
}

/* ---- reading a whole file ---- */

static const char *test_dir(void) {
    const char *d = getenv("JEV_TEST_DIR");
    return d && *d ? d : "build/test-data";
}

static void write_bytes(const char *path, const char *s, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(s, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

/* A regular file: exactly at the limit read, one byte over refused before
 * reading, with the size and the limit in the message; empty files work. */
static void test_read_file_limit(void **state) {
    (void)state;
    char path[4096];
    snprintf(path, sizeof path, "%s/read-file-10.bin", test_dir());
    write_bytes(path,
                "0123\0"
                "56789",
                10);
    struct jev_error err = {0};
    char *data = NULL;
    size_t n = 0;
    assert_int_equal(jev_read_file(path, 10, &data, &n, &err), JEV_OK);
    assert_int_equal(n, 10);
    assert_memory_equal(data,
                        "0123\0"
                        "56789",
                        10);
    assert_int_equal(data[10], '\0');
    free(data);
    assert_int_equal(jev_read_file(path, 9, &data, &n, &err), JEV_ERR_NOMEM);
    assert_null(data);
    char want[4200];
    snprintf(want, sizeof want, "%s: 10 bytes is over the limit of 9 bytes", path);
    assert_string_equal(err.msg, want);

    write_bytes(path, "", 0);
    jev_error_clear(&err);
    assert_int_equal(jev_read_file(path, 0, &data, &n, &err), JEV_OK);
    assert_int_equal(n, 0);
    assert_string_equal(data, "");
    free(data);
    unlink(path);
}

/* Reads path_of(fd) of a pipe holding n bytes. */
static enum jev_status read_pipe(const char *bytes, size_t n, size_t limit, char **data, size_t *len,
                                 struct jev_error *err) {
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    assert_int_equal(write(fd[1], bytes, n), (ssize_t)n);
    close(fd[1]);
    char path[64];
    snprintf(path, sizeof path, "/dev/fd/%d", fd[0]);
    enum jev_status s = jev_read_file(path, limit, data, len, err);
    close(fd[0]);
    return s;
}

/* A pipe has no size to stat: the limit is checked on the bytes read,
 * exactly at it accepted, one over refused; an endless device stops there. */
static void test_read_file_stream(void **state) {
    (void)state;
    struct jev_error err = {0};
    char *data = NULL;
    size_t n = 0;
    char bytes[40000];
    for (size_t i = 0; i < sizeof bytes; i++)
        bytes[i] = (char)(i * 7);
    assert_int_equal(read_pipe(bytes, sizeof bytes, sizeof bytes, &data, &n, &err), JEV_OK);
    assert_int_equal(n, sizeof bytes);
    assert_memory_equal(data, bytes, sizeof bytes);
    free(data);
    assert_int_equal(read_pipe(bytes, sizeof bytes, sizeof bytes - 1, &data, &n, &err), JEV_ERR_NOMEM);
    assert_null(data);
    assert_non_null(strstr(err.msg, ": more than the limit of 39999 bytes"));
    jev_error_clear(&err);
    assert_int_equal(jev_read_file("/dev/zero", 100000, &data, &n, &err), JEV_ERR_NOMEM);
    assert_string_equal(err.msg, "/dev/zero: more than the limit of 100000 bytes");
}

static void test_read_file_errors(void **state) {
    (void)state;
    struct jev_error err = {0};
    char *data = NULL;
    size_t n = 0;
    assert_int_equal(jev_read_file("tests/data/no-such-file.json", 100, &data, &n, &err), JEV_ERR_IO);
    assert_string_equal(err.msg, "tests/data/no-such-file.json: cannot open: No such file or directory");
    assert_null(data);
    jev_error_clear(&err);
    assert_int_equal(jev_read_file("tests/data", 100, &data, &n, &err), JEV_ERR_IO); /* a folder */
    assert_string_equal(err.msg, "tests/data: read error: Is a directory");
    assert_null(data);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_names),
        cmocka_unit_test(test_first_failure_sticks),
        cmocka_unit_test(test_arena),
        cmocka_unit_test(test_pool_covers_every_index),
        cmocka_unit_test(test_half_conversions),
        cmocka_unit_test(test_sha256),
        cmocka_unit_test(test_buf_cap),
        cmocka_unit_test(test_buf_growth),
        cmocka_unit_test(test_buf_take),
        cmocka_unit_test(test_buf_printf),
        cmocka_unit_test(test_buf_zero_cap),
        cmocka_unit_test(test_buf_add_buf),
        cmocka_unit_test(test_read_file_limit),
        cmocka_unit_test(test_read_file_stream),
        cmocka_unit_test(test_read_file_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
