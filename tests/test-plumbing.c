/*
 * test-plumbing.c - the build and check plumbing around the code: the Makefile's order, the
 * scripts it and the tests name, and scripts/device/cuda-check.sh's exit status.
 *
 * - setup before anything: `make -j2 setup OBJ OBJ` (what `make -j2 test` does, setup beside
 *   the objects) with a stand-in setup (SETUP_SH) that takes a second and leaves a mark, and a
 *   stand-in compiler (CC) that fails when the mark is not there yet; and `make -n` of every
 *   target that runs something (fuzz, run, bench, test-asan, cuda-build) prints setup's
 *   command first.
 * - every scripts/...sh that the Makefile, README.md, docs/, deploy/, scripts/ and tests/ name
 *   exists (the Makefile and tests/cuda/cuda-test.h named a scripts/device/cuda-test.sh that
 *   never was).
 * - cuda-check.sh (no GPU needed for these steps): `bash -n`; `tests` over planted parity
 *   binaries exits 0 when they all pass and 1 when one fails, naming it, and the steps after
 *   a failed one still run; `sanitize` with a planted compute-sanitizer fails on a report;
 *   `agree` with a planted jev fails on a CPU/CUDA disagreement and on a failed jev verify;
 *   `fast` fails when fast is far from exact or its bench record's peak device memory is over
 *   1.5 GB, and so does `bench` on its record.
 * - kernel-profile.sh's summary of a planted ncu's CSV (units, separators, names, the program's own
 *   output before ncu's header).
 *   What stays unchecked here: the GPU itself (unpack's nvidia-smi, the real binaries).
 *
 * Not here: tests/run.sh (tests/test-runner.c), the deploy files (tests/test-deploy.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <limits.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cmd-test.h" // defines: cmd_run, cmd_write, cmd_slurp

static char root[PATH_MAX]; /* the repository */
static char base[PATH_MAX]; /* $JEV_TEST_DIR/plumbing, absolute */

static int setup(void **state) {
    (void)state;
    const char *r = getenv("JEV_ROOT");
    if (!realpath(r ? r : ".", root))
        return -1;
    const char *t = getenv("JEV_TEST_DIR");
    char rel[PATH_MAX];
    snprintf(rel, sizeof rel, "%s/plumbing", t ? t : "build/test-data");
    char cmd[2 * PATH_MAX + 64];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", rel, rel);
    if (system(cmd) != 0)
        return -1;
    return realpath(rel, base) ? 0 : -1;
}

/* base/NAME as an executable shell script with body text. */
static void script(char *path, size_t size, const char *name, const char *text) {
    snprintf(path, size, "%s/%s", base, name);
    char *slash = strrchr(path, '/');
    *slash = '\0';
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", path);
    assert_int_equal(system(cmd), 0);
    *slash = '/';
    char body[4096];
    snprintf(body, sizeof body, "#!/bin/sh\n%s", text);
    assert_int_equal(cmd_write(path, body, 0755), 0);
}

/* ---- the Makefile ---- */

/* The make that runs this test (make test) passes its flags and variables down through the
 * environment; the makes started here must see only their own command line. */
static const char *const clean_make_env[] = {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", NULL};

static void test_setup_before_compiling(void **state) {
    (void)state;
    char mark[PATH_MAX + 16], setup_sh[PATH_MAX + 16], cc[PATH_MAX + 16], text[3 * PATH_MAX];
    snprintf(mark, sizeof mark, "%s/setup-done", base);
    unlink(mark);
    snprintf(text, sizeof text, "sleep 1\ntouch '%s'\n", mark);
    script(setup_sh, sizeof setup_sh, "setup.sh", text);
    /* the stand-in compiler: refuses to run before setup has finished, else writes its -o file */
    snprintf(text, sizeof text,
             "[ -f '%s' ] || { echo \"cc: compiling before setup finished\" >&2; exit 1; }\n"
             "while [ $# -gt 0 ]; do [ \"$1\" = -o ] && { : > \"$2\"; exit 0; }; shift; done\nexit 1\n",
             mark);
    script(cc, sizeof cc, "cc.sh", text);
    char build[PATH_MAX + 16], obj1[PATH_MAX + 64], obj2[PATH_MAX + 64], v1[PATH_MAX + 32], v2[PATH_MAX + 32],
        v3[PATH_MAX + 32];
    snprintf(build, sizeof build, "%s/build", base);
    snprintf(obj1, sizeof obj1, "%s/src/base/arena.o", build);
    snprintf(obj2, sizeof obj2, "%s/src/base/error.o", build);
    snprintf(v1, sizeof v1, "BUILD=%s", build);
    snprintf(v2, sizeof v2, "SETUP_SH=%s", setup_sh);
    snprintf(v3, sizeof v3, "CC=%s", cc);
    /* setup named beside the objects, as `test: setup all` had it: -j2 starts both at once */
    const char *argv[] = {"make", "--no-print-directory", "-j2", v1, v2, v3, "setup", obj1, obj2, NULL};
    struct cmd_result r = cmd_run(argv, root, clean_make_env, -1, -1, 120);
    if (r.code != 0)
        fail_msg("make -j2 setup %s %s (setup takes 1 s): exit %d:\n%s", obj1, obj2, r.code, r.out);
    free(r.out);
    assert_int_equal(access(obj1, F_OK), 0);
    assert_int_equal(access(obj2, F_OK), 0);
    /* and an object alone still waits for setup (it is a prerequisite, not only a sibling) */
    unlink(mark);
    unlink(obj1);
    const char *argv1[] = {"make", "--no-print-directory", "-j2", v1, v2, v3, obj1, NULL};
    r = cmd_run(argv1, root, clean_make_env, -1, -1, 120);
    if (r.code != 0)
        fail_msg("make -j2 %s without setup run first: exit %d:\n%s", obj1, r.code, r.out);
    free(r.out);
}

static void test_setup_before_running(void **state) {
    (void)state;
    char v1[PATH_MAX + 32], v2[64];
    snprintf(v1, sizeof v1, "BUILD=%s/build-n", base);
    snprintf(v2, sizeof v2, "SETUP_SH=/nonexistent/planted-setup.sh");
    /* each target's first command under make -n must be setup's; the second names the target's own work */
    static const struct {
        const char *target, *own; /* a target that runs something, a word of its own recipe */
    } cases[] = {
        {"fuzz", "fuzz/run.sh"},  {"run", "-c"}, {"bench", "-c"}, {"test", "-c"}, {"test-asan", "build-asan"},
        {"cuda-build", "CUDA=1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *argv[] = {"make", "--no-print-directory", "-n", v1, v2, cases[i].target, NULL};
        struct cmd_result r = cmd_run(argv, root, clean_make_env, -1, -1, 120);
        const char *set = strstr(r.out, "bash /nonexistent/planted-setup.sh");
        const char *own = strstr(r.out, cases[i].own);
        if (r.code != 0 || !set || !own || own < set)
            fail_msg("make -n %s: setup's command (bash $SETUP_SH) must come first; exit %d:\n%.3000s", cases[i].target,
                     r.code, r.out);
        /* once per make: the sub-makes of test-asan and cuda-build do not run it again */
        if (strstr(set + 1, "bash /nonexistent/planted-setup.sh"))
            fail_msg("make -n %s runs setup twice:\n%.3000s", cases[i].target, r.out);
        free(r.out);
    }
}

/* ---- script names ---- */

/* The first scripts/...sh named in text that does not exist under the root (into name), or false. */
static bool first_missing_script(const char *text, char name[256]) {
    regex_t re;
    assert_int_equal(regcomp(&re, "scripts/[A-Za-z0-9_./-]*\\.sh", REG_EXTENDED), 0);
    regmatch_t m;
    bool missing = false;
    for (const char *p = text; !missing && regexec(&re, p, 1, &m, 0) == 0; p += m.rm_eo) {
        char path[PATH_MAX + 300];
        int n = (int)(m.rm_eo - m.rm_so);
        snprintf(name, 256, "%.*s", n < 255 ? n : 255, p + m.rm_so);
        snprintf(path, sizeof path, "%s/%s", root, name);
        missing = access(path, F_OK) != 0;
    }
    regfree(&re);
    return missing;
}

static void check_script_names(const char *file, const char *text) {
    char name[256];
    if (first_missing_script(text, name))
        fail_msg("%s names %s, which does not exist", file, name);
}

/* Walks dir (relative to root), checking every file whose name ends in one of exts. */
static int walk(const char *dir, const char *const *exts) {
    char path[2 * PATH_MAX + 300];
    snprintf(path, sizeof path, "%s/%s", root, dir);
    DIR *d = opendir(path);
    if (!d)
        fail_msg("%s: cannot list it", path);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char rel[PATH_MAX + 300];
        snprintf(rel, sizeof rel, "%s/%s", dir, e->d_name);
        snprintf(path, sizeof path, "%s/%s", root, rel);
        struct stat st;
        if (stat(path, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            /* the goldens record the commands of their own day; they are data, not references */
            if (strcmp(e->d_name, "golden") != 0 && strcmp(e->d_name, "node_modules") != 0)
                n += walk(rel, exts);
            continue;
        }
        /* this file names a missing script on purpose (the rule's own check) */
        if (strcmp(rel, "tests/test-plumbing.c") == 0)
            continue;
        size_t len = strlen(e->d_name);
        for (const char *const *x = exts; *x; x++) {
            size_t xl = strlen(*x);
            if (len >= xl && strcmp(e->d_name + len - xl, *x) == 0) {
                char *text = cmd_slurp(path);
                assert_non_null(text);
                check_script_names(rel, text);
                free(text);
                n++;
                break;
            }
        }
    }
    closedir(d);
    return n;
}

static void test_named_scripts_exist(void **state) {
    (void)state;
    /* the rule itself: the name the Makefile had is reported, the script's own name is not */
    char name[256];
    assert_true(first_missing_script("run on the GPU machine (scripts/device/cuda-test.sh)", name));
    assert_string_equal(name, "scripts/device/cuda-test.sh");
    assert_false(first_missing_script("run on the GPU machine (scripts/device/cuda-check.sh)", name));
    static const char *const any[] = {"Makefile", ".md", ".sh", ".c", ".h", ".service", ".conf", NULL};
    char *mk = cmd_slurp("Makefile");
    assert_non_null(mk);
    check_script_names("Makefile", mk);
    free(mk);
    char *readme = cmd_slurp("README.md");
    assert_non_null(readme);
    check_script_names("README.md", readme);
    free(readme);
    int n = walk("docs", any) + walk("deploy", any) + walk("scripts", any) + walk("tests", any);
    assert_true(n > 50);
}

/* ---- cuda-check.sh ---- */

/* Runs cuda-check.sh STEPS with WORK=base/cuda-NAME (planted bin/), OUT under it; two extra env entries
 * (either may be NULL; the first NULL ends the list). */
static struct cmd_result cuda_check_env(const char *name, const char *steps, const char *extra_env,
                                        const char *extra_env2) {
    char work[PATH_MAX + 64], out[PATH_MAX + 80], cuda[PATH_MAX + 80];
    snprintf(work, sizeof work, "WORK=%s/cuda-%s", base, name);
    snprintf(out, sizeof out, "OUT=%s/cuda-%s/out", base, name);
    snprintf(cuda, sizeof cuda, "CUDA_HOME=%s/cuda-%s/cuda", base, name);
    const char *env[] = {work, out, cuda, extra_env, extra_env2, NULL};
    char cmd[512];
    snprintf(cmd, sizeof cmd, "bash scripts/device/cuda-check.sh %s", steps);
    const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    struct cmd_result r = cmd_run(argv, root, env, -1, -1, 120);
    char title[600];
    snprintf(title, sizeof title, "cuda-check.sh %s (%s)", steps, name);
    cmd_print(title, &r);
    return r;
}

static struct cmd_result cuda_check(const char *name, const char *steps, const char *extra_env) {
    return cuda_check_env(name, steps, extra_env, NULL);
}

#define CMOCKA_OK "echo '[==========] Running 1 test(s).'; echo '[  PASSED  ] 1 test(s).'\n"

static void test_cuda_check_syntax(void **state) {
    (void)state;
    const char *argv[] = {"bash", "-n", "scripts/device/cuda-check.sh", NULL};
    struct cmd_result r = cmd_run(argv, root, NULL, -1, -1, 30);
    if (r.code != 0)
        fail_msg("bash -n scripts/device/cuda-check.sh: %s", r.out);
    free(r.out);
    /* no step: the usage text, exit 0; an unknown step: exit 1 before anything runs */
    r = cuda_check("usage", "", NULL);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "Steps:"));
    free(r.out);
    r = cuda_check("usage", "tests nope", NULL);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "unknown step 'nope'"));
    assert_null(strstr(r.out, "step tests"));
    free(r.out);
}

static void test_cuda_check_tests_step(void **state) {
    (void)state;
    char p[PATH_MAX + 64];
    script(p, sizeof p, "cuda-pass/bin/test-cuda-a", CMOCKA_OK);
    script(p, sizeof p, "cuda-pass/bin/test-cuda-b", CMOCKA_OK);
    struct cmd_result r = cuda_check("pass", "tests", NULL);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "every step passed"));
    free(r.out);

    /* a parity binary that fails (the attention one that exited 139 on the GPU machine), then a step that passes */
    script(p, sizeof p, "cuda-fail/bin/test-cuda-a", CMOCKA_OK);
    script(p, sizeof p, "cuda-fail/bin/test-cuda-attention", "kill -SEGV $$\n");
    script(p, sizeof p, "cuda-fail/bin/test-cuda-z", CMOCKA_OK);
    script(p, sizeof p, "cuda-fail/cuda/bin/compute-sanitizer", "for a; do :; done; exec \"$a\"\n");
    r = cuda_check("fail", "tests sanitize", NULL);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "test-cuda-attention: exit 139"));
    assert_non_null(strstr(r.out, "test-cuda-z: exit 0")); /* the binaries after it still ran */
    assert_non_null(strstr(r.out, "step tests FAILED"));
    assert_non_null(strstr(r.out, "step sanitize"));                                  /* so did the next step, */
    assert_non_null(strstr(r.out, "compute-sanitizer --tool racecheck test-cuda-z")); /* to its end */
    assert_non_null(strstr(r.out, "failed steps: tests sanitize"));
    free(r.out);

    /* no parity binaries at all is a failure, not a pass */
    r = cuda_check("empty", "tests", NULL);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "no parity binaries"));
    free(r.out);
}

static void test_cuda_check_sanitize_step(void **state) {
    (void)state;
    char p[PATH_MAX + 64];
    script(p, sizeof p, "cuda-san/bin/test-cuda-a", CMOCKA_OK);
    script(p, sizeof p, "cuda-san/bin/test-cuda-b", CMOCKA_OK);
    /* compute-sanitizer runs the binary (its last argument); racecheck finds a hazard in b */
    script(p, sizeof p, "cuda-san/cuda/bin/compute-sanitizer",
           "for a; do :; done\n\"$a\" || exit $?\ncase \"$2 $a\" in\n"
           "\"racecheck \"*test-cuda-b) echo '========= ERROR: Race reported'; exit 9;;\nesac\n");
    struct cmd_result r = cuda_check("san", "tests sanitize", NULL);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "test-cuda-b under racecheck: exit 9"));
    assert_non_null(strstr(r.out, "failed steps: sanitize"));
    free(r.out);
}

static void test_cuda_check_agree_step(void **state) {
    (void)state;
    char p[PATH_MAX + 64];
    /* a jev whose CPU and CUDA answers differ by 2e-3 (AGREE_TOL 1e-4), and whose verify passes */
    const char *jev = "case \"$*\" in\n"
                      "*verify*) echo 'jev verify: -> PASS';;\n"
                      "*'--backend cpu'*) echo '{\"answers\":{\"q0\":{\"choice\":\"A\",\"probabilities\":"
                      "{\"A\":0.9,\"B\":0.1}}}}';;\n"
                      "*) echo \"{\\\"answers\\\":{\\\"q0\\\":{\\\"choice\\\":\\\"A\\\",\\\"probabilities\\\":"
                      "{\\\"A\\\":${P:-0.898},\\\"B\\\":0.1}}}}\";;\nesac\n";
    script(p, sizeof p, "cuda-agree/bin/jev", jev);
    struct cmd_result r = cuda_check("agree", "agree", NULL);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "max probability delta 0.002"));
    assert_non_null(strstr(r.out, "agree: FAILED"));
    free(r.out);
    r = cuda_check("agree", "agree", "P=0.9");
    assert_int_equal(r.code, 0);
    free(r.out);
    /* the same answers, but jev verify fails */
    script(p, sizeof p, "cuda-agree/bin/jev",
           "case \"$*\" in *verify*) echo 'jev verify: -> FAIL'; exit 1;; esac\n"
           "echo '{\"answers\":{\"q0\":{\"choice\":\"A\",\"probabilities\":{\"A\":0.9,\"B\":0.1}}}}'\n");
    r = cuda_check("agree", "agree", NULL);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "-> FAIL"));
    free(r.out);
}

/* The fast step and the bench records' memory: a jev whose fast answers differ from exact by 0.002 (or
 * P), whose bench records peak at 1.0 GB (or PEAK bytes), with fast vs exact in the fast record. */
/* collect, last: $OUT holds results.tar.gz alone, and it holds what the steps before wrote (the device tool
 * brings back 8 files a call), and the script's messages after it stay out of $OUT. */
static void test_cuda_check_collect_step(void **state) {
    (void)state;
    char p[PATH_MAX + 64];
    script(p, sizeof p, "cuda-collect/bin/test-cuda-a", CMOCKA_OK);
    struct cmd_result r = cuda_check("collect", "tests collect", NULL);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "collect: results.tar.gz holds log.txt tests.txt"));
    free(r.out);
    char cmd[3 * PATH_MAX];
    snprintf(cmd, sizeof cmd, "cd '%s/cuda-collect/out' && ls && tar tzf results.tar.gz | sort", base);
    const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    r = cmd_run(argv, root, NULL, -1, -1, 30);
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "results.tar.gz\nlog.txt\ntests.txt\n");
    free(r.out);
}

static void test_cuda_check_fast_step(void **state) {
    (void)state;
    char p[PATH_MAX + 64];
    const char *jev =
        "case \"$1 $*\" in\n"
        "bench\\ *) o=; prev=; for a; do [ \"$prev\" = --output ] && o=$a; prev=$a; done\n"
        "  fx=null; case \"$*\" in *'--precision fast'*) "
        "fx='{\"shared\":{\"max_prob_delta\":0.004,\"argmax_agreement\":1.0}}';; esac\n"
        "  echo \"{\\\"runs\\\":[{\\\"decisions\\\":64,\\\"path\\\":\\\"shared\\\",\\\"samples\\\":"
        "[{\\\"peak_bytes\\\":${PEAK:-1000000000}}]}],\\\"agreement\\\":[{\\\"decisions\\\":64,"
        "\\\"fast_vs_exact\\\":$fx}]}\" > \"$o\"; echo 'jev bench: 1 samples';;\n"
        "verify\\ *) echo 'jev verify (fast): 4 cases -> PASS';;\n"
        "*'--precision fast'*) echo \"{\\\"answers\\\":{\\\"q0\\\":{\\\"choice\\\":\\\"A\\\",\\\"probabilities\\\":"
        "{\\\"A\\\":${P:-0.898},\\\"B\\\":0.1}}}}\";;\n"
        "*) echo '{\"answers\":{\"q0\":{\"choice\":\"A\",\"probabilities\":{\"A\":0.9,\"B\":0.1}}}}';;\n"
        "esac\n";
    script(p, sizeof p, "cuda-fast/bin/jev", jev);
    struct cmd_result r = cuda_check("fast", "fast", NULL);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "exact vs fast on cuda, 1 questions: max probability delta 0.002, same answers 1/1"));
    assert_non_null(strstr(r.out, "jev verify (fast)"));
    assert_non_null(strstr(r.out, "fast vs exact, 64 decisions, shared: max probability delta 0.004"));
    assert_non_null(strstr(r.out, "peak device memory 1.000 GB"));
    free(r.out);
    /* fast far from exact (a wrong product): the step fails, the bench still runs */
    r = cuda_check("fast", "fast", "P=0.5");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "fast: FAILED"));
    assert_non_null(strstr(r.out, "peak device memory"));
    free(r.out);
    /* over 1.5 GB of device memory: the fast step and the exact bench step fail */
    r = cuda_check("fast", "fast", "PEAK=1600000000");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "memory: FAILED"));
    free(r.out);
    r = cuda_check_env("fast", "bench", "PEAK=1600000000", "PEER_RECORD=/nonexistent/peer.json");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "memory: FAILED"));
    assert_non_null(strstr(r.out, "failed steps: bench"));
    free(r.out);
    r = cuda_check_env("fast", "bench", "PEAK=1400000000", "PEER_RECORD=/nonexistent/peer.json");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "peak device memory 1.400 GB"));
    free(r.out);
}

/* ncu's CSV header, as `ncu --csv` prints it. */
static const char *const NCU_HEADER =
    "\"ID\",\"Process ID\",\"Process Name\",\"Host Name\",\"Kernel Name\",\"Context\",\"Stream\","
    "\"Block Size\",\"Grid Size\",\"Device\",\"CC\",\"Section Name\",\"Metric Name\",\"Metric Unit\","
    "\"Metric Value\"";

/* A planted ncu (base/DIR/ncu) that runs the shell lines pre (the program's own output), prints the CSV
 * header, then runs body, in which `row ID NAME METRIC UNIT VALUE` prints one CSV row; then
 * kernel-profile.sh 1 MODE with env_more (or NULL) beside WORK, OUT and NCU; returns the summary it
 * wrote (malloc'd). */
static char *kernel_profile(const char *dir, const char *mode, const char *env_more, const char *pre,
                            const char *body) {
    char p[PATH_MAX + 64], text[4096];
    snprintf(text, sizeof text,
             "%secho '%s'\n"
             "row() { echo \"\\\"$1\\\",\\\"1\\\",\\\"jev\\\",\\\"h\\\",\\\"$2\\\",\\\"1\\\",\\\"7\\\","
             "\\\"(256, 1, 1)\\\",\\\"(9, 16, 1)\\\",\\\"0\\\",\\\"9.0\\\",\\\"Command line profiler metrics\\\","
             "\\\"$3\\\",\\\"$4\\\",\\\"$5\\\"\"; }\n%s",
             pre, NCU_HEADER, body);
    char ncu_rel[64];
    snprintf(ncu_rel, sizeof ncu_rel, "%s/ncu", dir);
    script(p, sizeof p, ncu_rel, text);
    char work[PATH_MAX + 64], out[PATH_MAX + 80], ncu[PATH_MAX + 80];
    snprintf(work, sizeof work, "WORK=%s/%s", base, dir);
    snprintf(out, sizeof out, "OUT=%s/%s/out", base, dir);
    snprintf(ncu, sizeof ncu, "NCU=%s/%s/ncu", base, dir);
    const char *env[] = {work, out, ncu, env_more, NULL};
    const char *argv[] = {"bash", "scripts/device/kernel-profile.sh", "1", mode, NULL};
    struct cmd_result r = cmd_run(argv, root, env, -1, -1, 60);
    cmd_print("kernel-profile.sh", &r);
    assert_int_equal(r.code, 0);
    free(r.out);
    char path[PATH_MAX + 96];
    snprintf(path, sizeof path, "%s/%s/out/kernels-%s.txt", base, dir, mode);
    char *txt = cmd_slurp(path);
    assert_non_null(txt);
    return txt;
}

/* Fails unless txt has a line matching the extended regular expression pattern. */
static void assert_line(const char *txt, const char *pattern) {
    regex_t re;
    assert_int_equal(regcomp(&re, pattern, REG_EXTENDED), 0);
    int found = regexec(&re, txt, 0, NULL, 0) == 0;
    regfree(&re);
    if (!found)
        fail_msg("no line /%s/ in:\n%s", pattern, txt);
}

/* scripts/device/kernel-profile.sh's summary from a planted ncu: the program's own output before ncu's CSV header
 * is skipped, times in ns / us / ms (with thousands separators) are summed by kernel name (templates and
 * arguments cut), and the table lists calls, ms and shares. */
static void test_kernel_profile_summary(void **state) {
    (void)state;
    char *txt = kernel_profile("kprof", "exact", NULL,
                               "echo '==PROF== Connected to process 1'\n"
                               "echo 'question         type    answer'\n",
                               "row 0 'void chunk_prepare(chunk_args)' gpu__time_duration.sum us 76.40\n"
                               "row 1 'void chunk_prepare(chunk_args)' gpu__time_duration.sum ns '23,600'\n"
                               "row 2 'sm80_xmma_gemm_f32f32(int)' gpu__time_duration.sum ms 1.5\n");
    assert_non_null(strstr(txt, "3 launches, 1.60 ms of device time"));
    assert_line(txt, "\nchunk_prepare +2 +0\\.100 +6\\.2% +50\\.0\n");
    assert_non_null(strstr(txt, "\nsm80_xmma_gemm_f32f32 "));
    free(txt);
}

/* DETAIL=1: ncu's rows come one per (launch, metric); the summary weighs each launch's DRAM and SM
 * throughput by its time (chunk_prepare: (80 * 0.3 + 20 * 0.1) / 0.4 = 65 % DRAM), and a kernel
 * without them shows dashes. */
static void test_kernel_profile_detail(void **state) {
    (void)state;
    char *txt = kernel_profile(
        "kdetail", "fast", "DETAIL=1", "",
        "row 0 'void chunk_prepare(chunk_args)' gpu__time_duration.sum us 300\n"
        "row 0 'void chunk_prepare(chunk_args)' dram__throughput.avg.pct_of_peak_sustained_elapsed % 80\n"
        "row 0 'void chunk_prepare(chunk_args)' sm__throughput.avg.pct_of_peak_sustained_elapsed % 10\n"
        "row 1 'void chunk_prepare(chunk_args)' gpu__time_duration.sum us 100\n"
        "row 1 'void chunk_prepare(chunk_args)' dram__throughput.avg.pct_of_peak_sustained_elapsed % 20\n"
        "row 1 'void chunk_prepare(chunk_args)' sm__throughput.avg.pct_of_peak_sustained_elapsed % 50\n"
        "row 2 'gemm(int)' gpu__time_duration.sum ms 1.6\n");
    assert_non_null(strstr(txt, "3 launches, 2.00 ms of device time"));
    assert_line(txt, "\nchunk_prepare +2 +0\\.400 +20\\.0% +200\\.0 +65\\.0 +20\\.0\n");
    assert_non_null(strstr(txt, "\ngemm "));
    assert_non_null(strstr(txt, "     -     -\n"));
    free(txt);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_setup_before_compiling), cmocka_unit_test(test_setup_before_running),
        cmocka_unit_test(test_named_scripts_exist),    cmocka_unit_test(test_cuda_check_syntax),
        cmocka_unit_test(test_cuda_check_tests_step),  cmocka_unit_test(test_cuda_check_sanitize_step),
        cmocka_unit_test(test_cuda_check_agree_step),  cmocka_unit_test(test_cuda_check_fast_step), cmocka_unit_test(test_cuda_check_collect_step),
        cmocka_unit_test(test_kernel_profile_summary), cmocka_unit_test(test_kernel_profile_detail),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
