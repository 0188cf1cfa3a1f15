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
 * scripts/device/fla-carry.sh runs here on a stand-in fla git repository and a stand-in
 * python3-einops package, and the carry it writes is activated by
 * bench/peers/fla_kernels.py (check-carry): the layout, SOURCE, the dist-info that
 * importlib.metadata resolves for `fla`, sys.path order; and a revision without the
 * recurrent delta rule is refused.
 *
 * Needs python3, git and dpkg-deb on PATH (standard library only). No timing is asserted.
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

/* A stand-in fla repository (v0.4.0 lacks the recurrent rule, v0.5.2 has both) and einops .deb. */
static const char fla_fixture[] =
    "set -e; D=$1; rm -rf \"$D\"; mkdir -p \"$D/src/fla/ops/gated_delta_rule\" \"$D/deb/DEBIAN\" "
    "\"$D/deb/usr/lib/python3/dist-packages/einops\" \"$D/deb/usr/lib/python3/dist-packages/einops-0.8.1.dist-info\"\n"
    "cd \"$D/src\"; git init -q .; g() { git -c user.name=t -c user.email=t@t \"$@\"; }\n"
    "printf '__version__ = \"0.4.0\"\\n' > fla/__init__.py; echo MIT > LICENSE\n"
    "echo 'from .chunk import chunk_gated_delta_rule' > fla/ops/gated_delta_rule/__init__.py\n"
    "g add -A; g commit -qm a; g tag v0.4.0\n"
    "printf '__version__ = \"0.5.2\"\\n' > fla/__init__.py\n"
    "echo 'from .fused_recurrent import fused_recurrent_gated_delta_rule' >> fla/ops/gated_delta_rule/__init__.py\n"
    "g add -A; g commit -qm b; g tag v0.5.2\n"
    "printf 'Package: python3-einops\\nVersion: 0.8.1-1\\nArchitecture: all\\nMaintainer: t <t@t>\\n"
    "Description: stand-in\\n' > \"$D/deb/DEBIAN/control\"\n"
    "echo '__version__ = \"0.8.1\"' > \"$D/deb/usr/lib/python3/dist-packages/einops/__init__.py\"\n"
    "printf 'Metadata-Version: 2.1\\nName: einops\\nVersion: 0.8.1\\n' "
    "> \"$D/deb/usr/lib/python3/dist-packages/einops-0.8.1.dist-info/METADATA\"\n"
    "dpkg-deb -Zgzip --build \"$D/deb\" \"$D/einops.deb\" > /dev/null\n";

/* fla-carry.sh packs the release and refuses a revision without the recurrent rule; the carry activates. */
static void test_fla_carry(void **state) {
    (void)state;
    char dir[512], script[600], log[600], cmd[4096];
    snprintf(dir, sizeof dir, "%s/fla-carry", test_dir());
    snprintf(script, sizeof script, "%s-fixture.sh", dir);
    snprintf(log, sizeof log, "%s.log", dir);
    FILE *f = fopen(script, "w");
    assert_non_null(f);
    fputs(fla_fixture, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "bash '%s' '%s' >'%s' 2>&1", script, dir, log);
    assert_int_equal(run(cmd), 0);

    snprintf(
        cmd, sizeof cmd,
        "EINOPS_DEB='%s/einops.deb' DEST='%s/old' bash scripts/device/fla-carry.sh '%s/src/.git' v0.4.0 >'%s' 2>&1",
        dir, dir, dir, log);
    assert_int_equal(run(cmd), 1);
    char *out = read_text(log);
    assert_non_null(out);
    assert_non_null(strstr(out, "does not export fused_recurrent_gated_delta_rule"));
    free(out);

    snprintf(cmd, sizeof cmd,
             "EINOPS_DEB='%s/einops.deb' DEST='%s/carry' bash scripts/device/fla-carry.sh '%s/src/.git' >'%s' 2>&1 && "
             "python3 bench/peers/fla_kernels.py check-carry '%s/carry' >>'%s' 2>&1",
             dir, dir, dir, log, dir, log);
    int rc = run(cmd);
    out = read_text(log);
    if (rc != 0 && out)
        fprintf(stderr, "%s", out);
    assert_int_equal(rc, 0);
    assert_non_null(out);
    assert_non_null(strstr(out, "flash-linear-attention 0.5.2 (v0.5.2"));
    assert_non_null(strstr(out, "\"distributions\": [\"flash-linear-attention\"]"));
    assert_non_null(strstr(out, "\"version\": \"0.5.2\""));
    assert_non_null(strstr(out, "\"deps_last\": true"));
    assert_non_null(strstr(out, "\"site_index\": 0"));
    assert_non_null(strstr(out, "\"einops_package\": \"python3-einops_0.8.1-1\""));
    free(out);
    char path[700];
    snprintf(path, sizeof path, "%s/carry/site/fla/__init__.py", dir);
    char *init = read_text(path);
    assert_non_null(init);
    free(init);
    snprintf(path, sizeof path, "%s/carry/deps/einops/__init__.py", dir);
    char *einops = read_text(path);
    assert_non_null(einops);
    free(einops);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_selftest_record_loads),
        cmocka_unit_test(test_compare_refuses_bad_record),
        cmocka_unit_test(test_fla_carry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
