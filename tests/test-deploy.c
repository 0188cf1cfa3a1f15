/*
 * test-deploy.c - the deployment files of deploy/ work as written.
 *
 * - deploy/jev@.service: no line carries a comment after its value (systemd takes such text
 *   as part of the value: a KillSignal= that does not parse, an EnvironmentFile= path with
 *   the comment in it), and `systemd-analyze verify` accepts a copy whose ExecStart names the
 *   binary this build made (verify checks that the program exists); deploy/README.md points
 *   to the file rather than carrying a copy of the unit.
 * - deploy/nginx/jev.conf: every `listen` is on loopback, and `nginx -t -p PREFIX -c FILE`
 *   passes as a plain user (nobody, when the test runs as root) with an empty PREFIX: every
 *   file nginx writes (pid, logs, temp folders) is under the prefix, none in /run, /var/log
 *   or /var/lib; both logs appear in the prefix.
 *
 * Not here: running the replicas behind nginx (tests/test-scale.c does, with this config).
 * A missing systemd-analyze or nginx is a failure that names scripts/setup.sh, never a skip.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd-test.h" // defines: cmd_run, cmd_find, cmd_slurp, cmd_write

static char root[PATH_MAX]; /* the repository ($JEV_ROOT, else here) */

static int setup(void **state) {
    (void)state;
    const char *r = getenv("JEV_ROOT");
    if (!realpath(r ? r : ".", root))
        return -1;
    return 0;
}

/* The text after `line`'s value that systemd would read as part of it: a # or ; after a blank. */
static const char *trailing_comment(const char *line) {
    const char *t = line + strspn(line, " \t");
    if (*t == '#' || *t == ';' || *t == '[' || !strchr(t, '='))
        return NULL; /* a comment line, a section header, or no assignment */
    for (const char *p = strchr(t, '=') + 1; *p; p++)
        if ((*p == '#' || *p == ';') && (p[-1] == ' ' || p[-1] == '\t'))
            return p;
    return NULL;
}

static void test_trailing_comment_rule(void **state) {
    (void)state;
    /* the rule itself, on the two lines deploy/README.md used to carry */
    assert_non_null(trailing_comment("EnvironmentFile=/etc/jev/env          # JEV_API_KEY=...\n"));
    assert_non_null(trailing_comment("KillSignal=SIGTERM                    ; jev finishes\n"));
    assert_null(trailing_comment("# on a GPU host, Environment=CUDA_VISIBLE_DEVICES=...\n"));
    assert_null(trailing_comment("ExecStart=/opt/jev/jev serve --port %i\n"));
}

static void test_systemd_unit(void **state) {
    (void)state;
    char unit[PATH_MAX + 32];
    snprintf(unit, sizeof unit, "%s/deploy/jev@.service", root);
    char *text = cmd_slurp(unit);
    if (!text)
        fail_msg("%s: cannot read it", unit);
    /* every line: no comment after a value; ExecStart names /opt/jev/jev once (rewritten below) */
    int n_exec = 0, lineno = 0;
    for (char *save = NULL, *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        lineno++;
        const char *c = trailing_comment(l);
        if (c)
            fail_msg("%s:%d: '%s': systemd reads '%s' as part of the value; put the comment on a line of its own", unit,
                     lineno, l, c);
        n_exec += strncmp(l, "ExecStart=/opt/jev/jev ", 23) == 0;
    }
    free(text);
    if (n_exec != 1)
        fail_msg("%s: expected one ExecStart=/opt/jev/jev line (this test points it at the built binary), found %d",
                 unit, n_exec);

    char tool[PATH_MAX];
    if (!cmd_find("systemd-analyze", tool, sizeof tool))
        fail_msg("systemd-analyze is not installed: this test needs it (Debian's systemd package). Run "
                 "scripts/setup.sh (as root, or with sudo), which installs it.");
    /* the copy: the same unit with the program this build made (verify wants an executable) */
    const char *bin_env = getenv("JEV_JEV_BIN");
    char bin[PATH_MAX];
    if (!realpath(bin_env ? bin_env : "build/jev", bin) || access(bin, X_OK) != 0)
        fail_msg("%s: no jev binary to point ExecStart at (build it: make build/jev)", bin_env ? bin_env : "build/jev");
    const char *tdir = getenv("JEV_TEST_DIR") ? getenv("JEV_TEST_DIR") : "build/test-data";
    char dir[PATH_MAX], copy[PATH_MAX + 32], cmd[3 * PATH_MAX + 200];
    snprintf(dir, sizeof dir, "%s/deploy", tdir);
    mkdir(dir, 0755);
    snprintf(copy, sizeof copy, "%s/jev@.service", dir);
    snprintf(cmd, sizeof cmd, "sed 's|^ExecStart=/opt/jev/jev |ExecStart=%s |' '%s' > '%s'", bin, unit, copy);
    assert_int_equal(system(cmd), 0);
    const char *argv[] = {tool, "verify", copy, NULL};
    struct cmd_result r = cmd_run(argv, NULL, NULL, -1, -1, 60);
    /* verify exits 0 on a line it ignores ("Failed to parse signal name, ignoring"): any word
     * about this unit (its file or its instance jev@i) is a failure too; other units it loads
     * (network.target ...) may have notes of their own on some hosts, which are not ours */
    if (r.code != 0 || strstr(r.out, "jev@"))
        fail_msg("systemd-analyze verify %s (deploy/jev@.service, ExecStart=%s): exit %d:\n%s", copy, bin, r.code,
                 r.out);
    free(r.out);

    /* deploy/README.md points to the file instead of carrying a second copy of the unit */
    char readme[PATH_MAX + 32];
    snprintf(readme, sizeof readme, "%s/deploy/README.md", root);
    char *md = cmd_slurp(readme);
    assert_non_null(md);
    if (!strstr(md, "deploy/jev@.service"))
        fail_msg("%s does not name deploy/jev@.service", readme);
    if (strstr(md, "\n[Service]"))
        fail_msg("%s carries a unit of its own ([Service]): point to deploy/jev@.service instead", readme);
    free(md);
}

static void test_nginx_conf(void **state) {
    (void)state;
    char conf[PATH_MAX + 32];
    snprintf(conf, sizeof conf, "%s/deploy/nginx/jev.conf", root);
    char *text = cmd_slurp(conf);
    if (!text)
        fail_msg("%s: cannot read it", conf);
    /* loopback by default: every listen directive names 127.0.0.1 or [::1] */
    int n_listen = 0;
    for (char *save = NULL, *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        const char *t = l + strspn(l, " \t");
        if (strncmp(t, "listen ", 7) != 0)
            continue;
        n_listen++;
        const char *a = t + 7 + strspn(t + 7, " ");
        if (strncmp(a, "127.0.0.1:", 10) != 0 && strncmp(a, "[::1]:", 6) != 0)
            fail_msg("%s: '%s' is not on loopback (the shipped default must be; the file says how to open it)", conf,
                     t);
    }
    free(text);
    assert_true(n_listen >= 1);

    char nginx[PATH_MAX];
    if (!cmd_find("nginx", nginx, sizeof nginx))
        fail_msg("nginx is not installed (not on $PATH, not in /usr/sbin): this test needs it. Run scripts/setup.sh "
                 "(as root, or with sudo), which installs nginx.");
    /* A folder a plain user can reach (the test folder may sit under a home only root can enter),
     * holding a byte-identical copy of the config and an empty prefix. */
    char tmp[] = "/tmp/jev-deploy-XXXXXX";
    assert_non_null(mkdtemp(tmp));
    assert_int_equal(chmod(tmp, 0755), 0);
    char copy[64], prefix[64];
    snprintf(copy, sizeof copy, "%s/jev.conf", tmp);
    snprintf(prefix, sizeof prefix, "%s/prefix", tmp);
    char *bytes = cmd_slurp(conf);
    assert_non_null(bytes);
    assert_int_equal(cmd_write(copy, bytes, 0644), 0);
    free(bytes);
    assert_int_equal(mkdir(prefix, 0755), 0);
    int uid = -1, gid = -1;
    if (geteuid() == 0) {
        /* as root every path is writable and the check would prove nothing: run it as nobody */
        struct passwd *pw = getpwnam("nobody");
        uid = pw ? (int)pw->pw_uid : 65534;
        gid = pw ? (int)pw->pw_gid : 65534;
        assert_int_equal(chown(prefix, (uid_t)uid, (gid_t)gid), 0);
    }
    const char *argv[] = {nginx, "-t", "-p", prefix, "-c", copy, NULL};
    struct cmd_result r = cmd_run(argv, "/", NULL, uid, gid, 60);
    char log[96];
    snprintf(log, sizeof log, "%s/jev-error.log", prefix);
    bool have_error_log = access(log, F_OK) == 0;
    snprintf(log, sizeof log, "%s/jev-access.log", prefix);
    bool have_access_log = access(log, F_OK) == 0;
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    assert_int_equal(system(cmd), 0);
    if (r.code != 0 || !strstr(r.out, "test is successful"))
        fail_msg("nginx -t -p PREFIX -c deploy/nginx/jev.conf as %s: exit %d:\n%s", uid >= 0 ? "nobody" : "this user",
                 r.code, r.out);
    free(r.out);
    if (!have_error_log || !have_access_log)
        fail_msg("nginx -t wrote %s%s outside the prefix: jev.conf's logs must be relative paths",
                 have_error_log ? "" : "jev-error.log ", have_access_log ? "" : "jev-access.log");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trailing_comment_rule),
        cmocka_unit_test(test_systemd_unit),
        cmocka_unit_test(test_nginx_conf),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
