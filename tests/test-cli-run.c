/*
 * test-cli-run.c - `jev run` end to end on the synthesized tiny model: the
 * summary line is there and the logits hash is the same for two runs and
 * for two chunk sizes' greedy tokens (the tokens, not the hash: chunking
 * changes rounding), forks run, and bad arguments exit with status 2.
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

static char g_model[512];

static const char *bin(void) { return getenv("JEV_JEV_BIN") ? getenv("JEV_JEV_BIN") : "build/jev"; }

static int setup(void **state) {
    (void)state;
    const char *tmp = getenv("JEV_TEST_DIR") ? getenv("JEV_TEST_DIR") : "build/test-data";
    snprintf(g_model, sizeof g_model, "%s/cli-run-tiny-mlx4", tmp);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "%s synth --config configs/tiny.json --seed 1 --layout mlx4 --out %s --force >/dev/null",
             bin(), g_model);
    return system(cmd) == 0 ? 0 : -1;
}

/* Runs `jev run ARGS`, stdout into out; returns the exit status. */
static int run(const char *args, char *out, size_t size) {
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "%s run --model %s %s 2>&1", bin(), g_model, args);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    size_t n = fread(out, 1, size - 1, f);
    out[n] = '\0';
    int st = pclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static const char *field(const char *out, const char *key) {
    const char *p = strstr(out, key);
    if (!p)
        fail_msg("no '%s' in:\n%s", key, out);
    return p + strlen(key);
}

static void test_summary_and_determinism(void **state) {
    (void)state;
    static char a[8192], b[8192], c[8192];
    assert_int_equal(run("--random-tokens 70 --decode 5 --chunk 512", a, sizeof a), 0);
    assert_int_equal(run("--random-tokens 70 --decode 5 --chunk 512", b, sizeof b), 0);
    assert_int_equal(run("--random-tokens 70 --decode 5 --chunk 16", c, sizeof c), 0);
    assert_non_null(strstr(c, "in chunks of 16"));
    /* --step-tokens sets the same slice; the last of the two given wins */
    static char d[8192];
    assert_int_equal(run("--random-tokens 70 --decode 5 --chunk 512 --step-tokens 16", d, sizeof d), 0);
    assert_non_null(strstr(d, "in chunks of 16"));
    assert_memory_equal(field(c, "| logits "), field(d, "| logits "), 16);
    const char *ha = field(a, "| logits "), *hb = field(b, "| logits ");
    assert_memory_equal(ha, hb, 16);
    assert_non_null(strstr(a, "tok/s"));
    assert_non_null(strstr(a, "GB/s weights"));
    /* the greedy tokens agree across chunk sizes */
    const char *da = field(a, "decode:"), *dc = field(c, "decode:");
    size_t la = strcspn(da, "\n"), lc = strcspn(dc, "\n");
    assert_int_equal(la, lc);
    assert_memory_equal(da, dc, la);
}

static void test_forks_and_errors(void **state) {
    (void)state;
    static char out[8192];
    assert_int_equal(run("--ids 1,2,3,4,5 --decode 1 --forks 3 --suffix 4", out, sizeof out), 0);
    assert_non_null(strstr(out, "forks: 3 forks of 5 tokens"));
    assert_int_equal(run("--ids 1,x,3", out, sizeof out), 2);
    assert_int_equal(run("--chunk 0", out, sizeof out), 2);
    assert_int_equal(run("--bogus", out, sizeof out), 2);
    /* the CPU's FMA peak is no yardstick for another backend */
    assert_int_equal(run("--random-tokens 4 --peak --backend cuda", out, sizeof out), 2);
    assert_non_null(strstr(out, "--peak measures the CPU"));
    assert_int_equal(run("--ids 999999999", out, sizeof out), 1); /* outside the vocabulary */
    assert_non_null(strstr(out, "outside the vocabulary"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_summary_and_determinism),
        cmocka_unit_test(test_forks_and_errors),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
