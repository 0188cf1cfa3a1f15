/*
 * test-layers.c - the layering rule of docs/design.md, checked by
 * scripts/check-layers.sh: the repository's own sources pass it, and a tree
 * with each kind of violation planted (an upward include, an include between
 * siblings, another folder's internal header, a file in no layer) fails it
 * with a line naming the file and the header.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

/* Runs the checker on root; its exit status, and its output in out (cap bytes). */
static int check(const char *root, char *out, size_t cap) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "bash scripts/check-layers.sh '%s' 2>&1", root);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int rc = pclose(p);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void put(const char *root, const char *path, const char *text) {
    char full[1536], cmd[1700];
    snprintf(full, sizeof full, "%s/%s", root, path);
    snprintf(cmd, sizeof cmd, "mkdir -p \"$(dirname '%s')\"", full);
    assert_int_equal(system(cmd), 0);
    FILE *f = fopen(full, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_tree_follows_the_layers(void **state) {
    (void)state;
    char out[8192];
    int rc = check(".", out, sizeof out);
    if (rc != 0)
        fail_msg("scripts/check-layers.sh found (exit %d):\n%s", rc, out);
}

static void test_planted_violations_fail(void **state) {
    (void)state;
    char root[1024], cmd[2200], out[8192];
    const char *dir = getenv("JEV_TEST_DIR");
    snprintf(root, sizeof root, "%s/layers", dir ? dir : "build/test-data");
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", root, root);
    assert_int_equal(system(cmd), 0);
    /* a clean tree first: the checker must pass what is allowed */
    put(root, "src/base/ok.h", "#include <stdio.h>\n");
    put(root, "src/model/ok.c", "#include \"base/ok.h\"\n#include \"jev.h\"\n#include \"model/ok-int.h\"\n");
    put(root, "src/model/ok-int.h", "\n");
    put(root, "common/ok.c", "#include \"model/ok.h\"\n#include \"common/x.h\"\n");
    put(root, "tools/ok.c", "#include \"common/x.h\"\n#include \"commands.h\"\n");
    int rc = check(root, out, sizeof out);
    if (rc != 0)
        fail_msg("a tree without violations failed (exit %d):\n%s", rc, out);
    /* then each kind of violation, each named */
    put(root, "src/base/up.c", "#include \"model/model.h\"\n");
    put(root, "src/io/side.c", "#include \"text/tokenizer.h\"\n");
    put(root, "common/peek.c", "#include \"model/ok-int.h\"\n");
    put(root, "src/wire/up2.c", "#include \"common/bench/schema.h\"\n");
    put(root, "src/nowhere/x.c", "\n");
    rc = check(root, out, sizeof out);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(out, "src/base/up.c: includes \"model/model.h\" (model above base)"));
    assert_non_null(strstr(out, "src/io/side.c: includes \"text/tokenizer.h\" (text and io are siblings)"));
    assert_non_null(strstr(out, "common/peek.c: includes \"model/ok-int.h\", an internal header of src/model/"));
    assert_non_null(strstr(out, "src/wire/up2.c: includes \"common/bench/schema.h\" (common above wire)"));
    assert_non_null(strstr(out, "src/nowhere/x.c: not in a known layer"));
    assert_null(strstr(out, "ok.c"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tree_follows_the_layers),
        cmocka_unit_test(test_planted_violations_fail),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
