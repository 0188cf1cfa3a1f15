/*
 * test-install.c - `make install` as an embedder meets it: the CLI, the
 * static and shared library with their soname links, jev.h and jev.pc land
 * under PREFIX (and under DESTDIR when staging, with jev.pc still naming
 * PREFIX); a program built with `pkg-config --cflags --libs jev` alone
 * (tests/data/install-probe.c) links against the installed copy, loads the
 * tiny model and answers a request; pkg-config's version is jev_version();
 * the shared library exports the public header's functions only.
 *
 * The install copies the build folder this test belongs to (the folder of
 * JEV_JEV_BIN) without rebuilding anything (make -o). A sanitized build's
 * library needs the sanitizer runtime, so the probe is then compiled with the
 * same -fsanitize flags; nothing else is added to pkg-config's flags.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jev.h"        // defines: jev_version
#include "tiny-model.h" // defines: tiny_test_dir, tiny_model_write

#if defined(__SANITIZE_ADDRESS__)
#define PROBE_SANITIZE "-fsanitize=address,undefined"
#else
#define PROBE_SANITIZE ""
#endif

static char build_dir[1024]; /* the build folder of this test binary's run */
static char work[1024];      /* $JEV_TEST_DIR/install */

/* Runs cmd through the shell; its exit status, and its output (stdout + stderr) in out. */
static int run(const char *cmd, char *out, size_t cap) {
    char full[8192];
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int rc = pclose(p);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void expect_file(const char *dir, const char *name) {
    char path[2048];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (stat(path, &st) != 0)
        fail_msg("make install did not write %s", path);
}

/* make install from the repository root, copying the existing build (nothing is rebuilt). */
static void install(const char *vars, char *out, size_t cap) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "make -s --no-print-directory install BUILD=%s %s -o %s/jev -o %s/libjev.a -o %s/libjev.so", build_dir,
             vars, build_dir, build_dir, build_dir);
    int rc = run(cmd, out, cap);
    if (rc != 0)
        fail_msg("`%s` failed (%d):\n%s", cmd, rc, out);
}

static int setup(void **state) {
    (void)state;
    const char *bin = getenv("JEV_JEV_BIN");
    char copy[1024];
    snprintf(copy, sizeof copy, "%s", bin ? bin : "build/jev");
    snprintf(build_dir, sizeof build_dir, "%s", dirname(copy));
    const char *td = getenv("JEV_TEST_DIR");
    snprintf(work, sizeof work, "%s/install", td ? td : "build/test-data");
    char cmd[2200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", work, work);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_install_and_build_against_it(void **state) {
    (void)state;
    char prefix[1100], out[16384], cmd[8192];
    snprintf(prefix, sizeof prefix, "%s/prefix", work);
    install(strcat(strcpy(cmd, "PREFIX="), prefix), out, sizeof out);
    expect_file(prefix, "bin/jev");
    expect_file(prefix, "include/jev.h");
    expect_file(prefix, "lib/libjev.a");
    expect_file(prefix, "lib/libjev.so");
    expect_file(prefix, "lib/libjev.so.0");
    char versioned[64];
    snprintf(versioned, sizeof versioned, "lib/libjev.so.%s", jev_version());
    expect_file(prefix, versioned);
    expect_file(prefix, "lib/pkgconfig/jev.pc");

    /* pkg-config finds it, and its version is the library's */
    snprintf(cmd, sizeof cmd, "PKG_CONFIG_PATH='%s/lib/pkgconfig' pkg-config --modversion jev", prefix);
    assert_int_equal(run(cmd, out, sizeof out), 0);
    out[strcspn(out, "\n")] = '\0';
    assert_string_equal(out, jev_version());

    /* an embedder's program, built with pkg-config's flags alone */
    char probe[1200];
    snprintf(probe, sizeof probe, "%s/install-probe", work);
    snprintf(cmd, sizeof cmd,
             "cc -std=c11 -Wall -Werror %s -o '%s' tests/data/install-probe.c "
             "$(PKG_CONFIG_PATH='%s/lib/pkgconfig' pkg-config --cflags --libs jev)",
             PROBE_SANITIZE, probe, prefix);
    int rc = run(cmd, out, sizeof out);
    if (rc != 0)
        fail_msg("building against the installed jev failed (%d): %s\n%s", rc, cmd, out);
    /* it uses the installed shared library, not one from the build folder */
    snprintf(cmd, sizeof cmd, "LD_LIBRARY_PATH='%s/lib' ldd '%s'", prefix, probe);
    assert_int_equal(run(cmd, out, sizeof out), 0);
    char want[1300];
    snprintf(want, sizeof want, "%s/lib/libjev.so.0", prefix);
    if (!strstr(out, want))
        fail_msg("the probe does not load %s:\n%s", want, out);

    char model[1024];
    tiny_test_dir("install", "tiny-hf", model, sizeof model);
    assert_int_equal(tiny_model_write(model, JEV_SYNTH_HF), 0);
    snprintf(cmd, sizeof cmd, "LD_LIBRARY_PATH='%s/lib' '%s' '%s'", prefix, probe, model);
    rc = run(cmd, out, sizeof out);
    if (rc != 0 || !strstr(out, ": 200 {\"model\":\"tiny-hf\",\"answers\":{\"red\":{\"type\":\"noul\",\"noul\":"))
        fail_msg("the probe (exit %d) printed:\n%s", rc, out);

    /* the shared library exports the public functions only */
    snprintf(cmd, sizeof cmd, "nm -D --defined-only '%s/lib/libjev.so' | awk '{print $3}' | grep -v '^jev_'", prefix);
    rc = run(cmd, out, sizeof out);
    if (rc == 0) /* grep found a symbol that is not jev_* */
        fail_msg("libjev.so exports symbols outside the public API:\n%s", out);
    snprintf(cmd, sizeof cmd, "nm -D --defined-only '%s/lib/libjev.so' | grep -c ' T jev_decide_json$'", prefix);
    assert_int_equal(run(cmd, out, sizeof out), 0);
}

static void test_destdir_stages_under_prefix(void **state) {
    (void)state;
    char dest[1100], vars[2400], out[16384];
    snprintf(dest, sizeof dest, "%s/stage", work);
    snprintf(vars, sizeof vars, "PREFIX=/opt/jev DESTDIR=%s", dest);
    install(vars, out, sizeof out);
    char root[1200];
    snprintf(root, sizeof root, "%s/opt/jev", dest);
    expect_file(root, "bin/jev");
    expect_file(root, "lib/libjev.so");
    expect_file(root, "include/jev.h");
    char pc[1300];
    snprintf(pc, sizeof pc, "%s/lib/pkgconfig/jev.pc", root);
    FILE *f = fopen(pc, "r");
    assert_non_null(f);
    char line[256];
    assert_non_null(fgets(line, sizeof line, f));
    fclose(f);
    assert_string_equal(line, "prefix=/opt/jev\n"); /* the final location, not the staging folder */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_install_and_build_against_it),
        cmocka_unit_test(test_destdir_stages_under_prefix),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
