/*
 * test-runner.c - tests/run.sh itself, on planted test binaries (small shell scripts that print
 * what a cmocka binary prints): one that hangs, one that ignores SIGTERM while hanging, one
 * that stops after 1 of its 3 tests, one that crashes mid-way, one that skips a test, one that
 * prints nothing - each must be reported as failed, by name, with its reason - next to good
 * ones (two groups in one binary included) that must pass. The time limit is set to 1 s here
 * (JEV_TEST_TIMEOUT, JEV_TEST_KILL_AFTER), so the whole test takes about 3 s.
 *
 * Not here: the real suite (the runner runs it every time).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cmd-test.h" // defines: cmd_run, cmd_write

static char base[PATH_MAX]; /* $JEV_TEST_DIR/runner */

#define RUNNING(n) "echo '[==========] Running " #n " test(s).'\n"
#define PASSED(n) "echo '[  PASSED  ] " #n " test(s).'\n"

static const struct {
    const char *name;   /* test-NAME in the planted build folder */
    const char *script; /* its body after the #! line */
} planted[] = {
    {"good", RUNNING(2) PASSED(2)},
    {"twogroups", RUNNING(2) PASSED(2) RUNNING(1) PASSED(1)},
    {"hang", RUNNING(1) "exec sleep 600\n"},
    {"stubborn", "trap '' TERM\n" RUNNING(1) "sleep 600\n"},
    {"early", RUNNING(3) PASSED(1)},
    {"crash", RUNNING(3) "kill -SEGV $$\n"},
    {"skip", RUNNING(2) "echo '[  SKIPPED ] 1 test(s), listed below:'\n" PASSED(1)},
    {"silent", ""},
};

/* A build folder DIR/tests holding the planted scripts whose names are in `which` (space-separated). */
static void plant(const char *dir, const char *which) {
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/tests", dir);
    char cmd[2 * PATH_MAX];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s' '%s/data'", dir, path, dir);
    assert_int_equal(system(cmd), 0);
    for (size_t i = 0; i < sizeof planted / sizeof planted[0]; i++) {
        char word[64];
        snprintf(word, sizeof word, " %s ", planted[i].name);
        char padded[256];
        snprintf(padded, sizeof padded, " %s ", which);
        if (!strstr(padded, word))
            continue;
        char text[1024];
        snprintf(text, sizeof text, "#!/bin/sh\n%s", planted[i].script);
        snprintf(path, sizeof path, "%s/tests/test-%s", dir, planted[i].name);
        assert_int_equal(cmd_write(path, text, 0755), 0);
    }
}

/* Runs tests/run.sh on DIR with a 1 s limit per binary. */
static struct cmd_result run_on(const char *dir) {
    char tdir[PATH_MAX + 16];
    snprintf(tdir, sizeof tdir, "JEV_TEST_DIR=%s/data", dir);
    const char *env[] = {"JEV_TEST_TIMEOUT=1", "JEV_TEST_KILL_AFTER=1", tdir, NULL};
    const char *argv[] = {"bash", "tests/run.sh", dir, NULL};
    struct cmd_result r = cmd_run(argv, NULL, env, -1, -1, 120);
    cmd_print(dir, &r);
    if (r.timed_out)
        fail_msg("tests/run.sh %s did not finish in 120 s (a planted binary hangs it)", dir);
    return r;
}

static void expect_line(const struct cmd_result *r, const char *line) {
    if (!strstr(r->out, line))
        fail_msg("tests/run.sh printed no line with '%s'", line);
}

static int setup(void **state) {
    (void)state;
    const char *t = getenv("JEV_TEST_DIR");
    char rel[PATH_MAX];
    snprintf(rel, sizeof rel, "%s/runner", t ? t : "build/test-data");
    mkdir(rel, 0755);
    return realpath(rel, base) ? 0 : -1;
}

static void test_failures_are_named(void **state) {
    (void)state;
    char dir[PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s/bad", base);
    plant(dir, "good twogroups hang stubborn early crash skip silent");
    struct cmd_result r = run_on(dir);
    assert_int_not_equal(r.code, 0);
    expect_line(&r, "ok   test-good (2 passed,");
    expect_line(&r, "ok   test-twogroups (3 passed,");
    expect_line(&r, "FAIL test-hang (0 passed, 1 failed, timed out after 1s");
    expect_line(&r, "FAIL test-stubborn (0 passed, 1 failed, timed out after 1s");
    expect_line(&r, "FAIL test-early (1 passed, 2 failed, ran 1 of 3 registered tests (exit 0)");
    expect_line(&r, "FAIL test-crash (0 passed, 3 failed, ran 0 of 3 registered tests (exit 139)");
    expect_line(&r, "FAIL test-skip (1 passed, 1 failed, ran 1 of 2 registered tests (exit 0)");
    expect_line(&r, "FAIL test-silent (0 passed, 1 failed, no cmocka report (exit 0)");
    expect_line(&r, "failed: test-crash test-early test-hang test-silent test-skip test-stubborn\n");
    expect_line(&r, "\n7 passed, 9 failed\n");
    free(r.out);
}

static void test_all_good_passes(void **state) {
    (void)state;
    char dir[PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s/good", base);
    plant(dir, "good twogroups");
    struct cmd_result r = run_on(dir);
    assert_int_equal(r.code, 0);
    expect_line(&r, "\n5 passed, 0 failed\n");
    assert_null(strstr(r.out, "failed:"));
    free(r.out);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_failures_are_named),
        cmocka_unit_test(test_all_good_passes),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
