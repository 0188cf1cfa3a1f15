/*
 * cmd-test.h - running a program from a test: argv (no shell unless the caller asks for
 * /bin/sh -c), stdout and stderr captured together, optionally as another user (a test
 * running as root checks what a plain user can do), with a deadline. Header-only (static
 * functions) for the tests of the deployment files and the build plumbing
 * (tests/test-deploy.c, tests/test-plumbing.c).
 *
 * Not a process manager: one child at a time, its own process group killed on the deadline.
 * Include after <cmocka.h> (failures to start are test failures).
 */
#ifndef JEV_TESTS_CMD_TEST_H
#define JEV_TESTS_CMD_TEST_H

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* What a finished command left: its exit code (-1 when killed by a signal or the deadline), its output. */
struct cmd_result {
    int code;       /* exit status, or -1 */
    bool timed_out; /* killed at the deadline */
    char *out;      /* stdout + stderr, NUL-terminated (owned; free it) */
    size_t len;     /* bytes of out */
};

/* Searches $PATH and the sbin folders a plain user's PATH lacks (nginx is in /usr/sbin). */
static inline bool cmd_find(const char *name, char *out, size_t size) {
    const char *path = getenv("PATH");
    char dirs[4096];
    snprintf(dirs, sizeof dirs, "%s:/usr/sbin:/usr/local/sbin:/sbin:/usr/bin:/bin", path ? path : "");
    for (char *save = NULL, *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        snprintf(out, size, "%s/%s", d, name);
        if (access(out, X_OK) == 0)
            return true;
    }
    return false;
}

/*
 * Runs argv[0] (a path, or a name looked up on $PATH) with argv in directory dir (NULL: here),
 * as uid/gid when uid >= 0 (only root can), environment changes in env (NULL-ended, may be NULL:
 * "K=V" sets, a bare "K" removes), for at most secs seconds.
 */
static inline struct cmd_result cmd_run(const char *const *argv, const char *dir, const char *const *env, int uid,
                                        int gid, double secs) {
    struct cmd_result r = {.code = -1};
    char tmpl[] = "/tmp/jev-cmd-XXXXXX";
    int fd = mkstemp(tmpl);
    assert_true(fd >= 0);
    unlink(tmpl); /* the child writes through the descriptor; the name is not needed */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setpgid(0, 0);
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0)
            dup2(devnull, 0);
        if (dir && chdir(dir) != 0)
            _exit(126);
        for (const char *const *e = env; e && *e; e++)
            if (strchr(*e, '='))
                putenv((char *)(uintptr_t)*e);
            else
                unsetenv(*e);
        if (uid >= 0 && (setgroups(0, NULL) != 0 || setgid((gid_t)gid) != 0 || setuid((uid_t)uid) != 0)) {
            fprintf(stderr, "cmd_run: cannot become uid %d: %s\n", uid, strerror(errno));
            _exit(126);
        }
        execvp(argv[0], (char *const *)(uintptr_t)argv);
        fprintf(stderr, "cmd_run: exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int st = 0;
    for (;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid)
            break;
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) * 1e-9 > secs) {
            kill(-pid, SIGKILL);
            waitpid(pid, &st, 0);
            r.timed_out = true;
            break;
        }
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (!r.timed_out && WIFEXITED(st))
        r.code = WEXITSTATUS(st);
    off_t n = lseek(fd, 0, SEEK_END);
    r.len = n > 0 ? (size_t)n : 0;
    r.out = malloc(r.len + 1);
    assert_non_null(r.out);
    r.len = (size_t)pread(fd, r.out, r.len, 0) == r.len ? r.len : 0;
    r.out[r.len] = '\0';
    close(fd);
    return r;
}

/* Prints a command's output indented, so that a cmocka report inside it (a planted test binary's)
 * is not read by tests/run.sh as this binary's own counts. */
static inline void cmd_print(const char *title, const struct cmd_result *r) {
    printf("---- %s: exit %d\n", title, r->code);
    for (const char *p = r->out; *p;) {
        const char *nl = strchr(p, '\n');
        int n = nl ? (int)(nl - p) : (int)strlen(p);
        printf("    %.*s\n", n, p);
        p += n + (nl != NULL);
    }
}

/* The whole of a small text file (NUL-terminated, owned), or NULL. */
static inline char *cmd_slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    if (b)
        b[n] = '\0';
    fclose(f);
    return b;
}

/* Writes text to path (mode for the new file); 0, or -1. */
static inline int cmd_write(const char *path, const char *text, mode_t mode) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    if (fd < 0)
        return -1;
    size_t n = strlen(text);
    int ok = write(fd, text, n) == (ssize_t)n;
    ok = close(fd) == 0 && ok;
    chmod(path, mode); /* the umask does not take bits the caller asked for */
    return ok ? 0 : -1;
}

#endif
