/*
 * test-peer.c - the transformers peer's record against jev's own reader.
 *
 * bench/peers/transformers.py cannot run here (no torch), but everything it
 * writes goes through bench/peers/jevbench.py, which its self-test exercises
 * with the standard library alone. This test runs that self-test (its own
 * known-answer checks, and `jev report` on the record it builds), then loads
 * the record with jev_bench_load_file and checks what a peer record must
 * carry, so that a change of the C schema that the Python side does not
 * follow fails here, not on the GPU machine.
 *
 * Needs python3 on PATH (standard library only). No timing is asserted.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "common/bench/schema.h" // defines: jev_bench_load_file, JEV_BENCH_SCHEMA

/* ---- helpers ---- */

static const char *test_dir(void) {
    const char *d = getenv("JEV_TEST_DIR");
    return d && d[0] ? d : "build/test-data";
}

/* The whole file as a NUL-terminated string, or NULL. */
static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    char *buf = NULL;
    size_t len = 0, cap = 0, got;
    char chunk[4096];
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (len + got + 1 > cap) {
            cap = (len + got + 1) * 2;
            char *nb = realloc(buf, cap);
            if (nb == NULL) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        memcpy(buf + len, chunk, got);
        len += got;
    }
    fclose(f);
    if (buf)
        buf[len] = '\0';
    return buf;
}

/* Runs a shell command; its exit status, or -1 when it did not exit normally. */
static int run(const char *cmd) {
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* ---- tests ---- */

/* The self-test passes, jev's validator accepted the record it built, and
 * the record loads here with the fields a peer record must have. */
static void test_selftest_record_loads(void **state) {
    (void)state;
    const char *bin = getenv("JEV_JEV_BIN");
    assert_non_null(bin);
    char rec[512], log[512], cmd[2048];
    snprintf(rec, sizeof rec, "%s/peer-selftest.json", test_dir());
    snprintf(log, sizeof log, "%s/peer-selftest.log", test_dir());
    remove(rec);
    snprintf(cmd, sizeof cmd,
             "JEV_JEV_BIN='%s' PEER_SELFTEST_RECORD='%s' python3 bench/peers/transformers.py --selftest >'%s' 2>&1",
             bin, rec, log);
    int rc = run(cmd);
    char *out = read_text(log);
    if (rc != 0 && out)
        fprintf(stderr, "%s", out);
    assert_int_equal(rc, 0);
    assert_non_null(out);
    assert_non_null(strstr(out, "selftest: ok"));
    assert_non_null(strstr(out, "C validator also checked the record"));
    free(out);

    json_t *root = NULL;
    struct jev_error err = {0};
    enum jev_status s = jev_bench_load_file(rec, &root, &err);
    if (s != JEV_OK)
        fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(s, JEV_OK);
    json_t *env = json_object_get(root, "environment");
    assert_string_equal(json_string_value(json_object_get(json_object_get(env, "peer"), "name")), "transformers");
    assert_string_equal(json_string_value(json_object_get(root, "schema")), JEV_BENCH_SCHEMA);
    /* 2 counts x 3 paths, each with settings.repeats samples of integer counts */
    json_t *runs = json_object_get(root, "runs");
    assert_int_equal(json_array_size(runs), 6);
    json_t *s0 = json_array_get(json_object_get(json_array_get(runs, 0), "samples"), 0);
    assert_true(json_is_integer(json_object_get(s0, "lm_forwards")));
    assert_true(json_is_integer(json_object_get(s0, "peak_bytes")));
    json_decref(root);
}

/* The comparison mode refuses a record that is not one, naming the file. */
static void test_compare_refuses_bad_record(void **state) {
    (void)state;
    char bad[512], log[512], cmd[2048];
    snprintf(bad, sizeof bad, "%s/peer-bad.json", test_dir());
    snprintf(log, sizeof log, "%s/peer-bad.log", test_dir());
    FILE *f = fopen(bad, "w");
    assert_non_null(f);
    fputs("{\"schema\": \"jev-bench/1\", \"environment\": {}}", f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "python3 bench/peers/transformers.py --compare-with '%s' --record '%s' >'%s' 2>&1", bad,
             bad, log);
    assert_int_equal(run(cmd), 1);
    char *out = read_text(log);
    assert_non_null(out);
    assert_non_null(strstr(out, "peer-bad.json"));
    assert_non_null(strstr(out, "$.settings: missing field"));
    free(out);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_selftest_record_loads),
        cmocka_unit_test(test_compare_refuses_bad_record),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
