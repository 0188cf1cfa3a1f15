/*
 * serve-test.h - what the HTTP tests (test-server.c, test-scale.c,
 * test-sdk.c) share: a libcurl reply that keeps the body and the headers jev
 * sends, and `jev serve --port 0` as a child process whose start line names
 * its port.
 *
 * What it is not: a general HTTP client (serve_http makes one plain call on a
 * fresh connection; a test that needs more sets up its own curl handle), or a
 * process supervisor: the caller stops and reaps
 * the child. Header-only (static inline functions).
 *
 * The child may get environment variables (the test hook of tools/cmd-serve.c)
 * and its stderr may go to a file (the -v log lines, the exit messages).
 */
#ifndef JEV_TESTS_SERVE_TEST_H
#define JEV_TESTS_SERVE_TEST_H

#include <curl/curl.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- a reply ---- */

struct reply {
    long status;
    char *body; /* malloc'd, NUL-terminated; NULL when empty */
    size_t len;
    char id[64];    /* x-typesafe-request-id */
    char ctype[64]; /* Content-Type */
    char allow[64]; /* Allow */
    char retry[16]; /* Retry-After */
    bool curl_ok;   /* the transfer completed */
};

/* CURLOPT_WRITEFUNCTION with CURLOPT_WRITEDATA = struct reply *. */
static inline size_t reply_on_body(char *p, size_t size, size_t n, void *u) {
    struct reply *r = u;
    char *b = realloc(r->body, r->len + size * n + 1);
    if (!b)
        return 0;
    memcpy(b + r->len, p, size * n);
    r->body = b;
    r->len += size * n;
    r->body[r->len] = '\0';
    return size * n;
}

/* The value of header `name` when line (n bytes, CRLF included) is that header. */
static inline void reply_header_value(const char *line, size_t n, const char *name, char *out, size_t size) {
    size_t k = strlen(name);
    if (n <= k + 1 || strncasecmp(line, name, k) != 0 || line[k] != ':')
        return;
    const char *v = line + k + 1;
    size_t m = n - k - 1;
    while (m && *v == ' ')
        v++, m--;
    while (m && (v[m - 1] == '\r' || v[m - 1] == '\n'))
        m--;
    snprintf(out, size, "%.*s", (int)m, v);
}

/* CURLOPT_HEADERFUNCTION with CURLOPT_HEADERDATA = struct reply *. */
static inline size_t reply_on_header(char *p, size_t size, size_t n, void *u) {
    struct reply *r = u;
    reply_header_value(p, size * n, "x-typesafe-request-id", r->id, sizeof r->id);
    reply_header_value(p, size * n, "Content-Type", r->ctype, sizeof r->ctype);
    reply_header_value(p, size * n, "Allow", r->allow, sizeof r->allow);
    reply_header_value(p, size * n, "Retry-After", r->retry, sizeof r->retry);
    return size * n;
}

/* ---- one call ---- */

/* METHOD PATH (with body as JSON when not NULL) to 127.0.0.1:port on a fresh connection (closed after
 * it); the reply with its body and headers; curl_ok false when the transfer failed. */
/* The options every test request shares (the URL, the headers, the reply's callbacks, no signals),
 * then the call: fills r's curl_ok and status and returns curl's code. The caller sets the method,
 * the body and its own options before, and frees hdr and h after. */
static inline CURLcode serve_curl_perform(CURL *h, const char *url, struct curl_slist *hdr, struct reply *r) {
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, reply_on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, reply_on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    CURLcode rc = curl_easy_perform(h);
    r->curl_ok = rc == CURLE_OK;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
    return rc;
}

static inline struct reply serve_http(int port, const char *method, const char *path, const char *body) {
    struct reply r = {0};
    CURL *h = curl_easy_init();
    if (!h)
        return r;
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
    hdr = curl_slist_append(hdr, "Expect:");
    if (body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
    }
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_FORBID_REUSE, 1L);
    serve_curl_perform(h, url, hdr, &r);
    curl_slist_free_all(hdr);
    curl_easy_cleanup(h);
    return r;
}

/* ---- `jev serve` as a child ---- */

struct serve_child {
    pid_t pid;      /* the child, leader of its own process group */
    int port;       /* from its start line; 0 when it did not start */
    FILE *out;      /* its stdout after the start line (kept open so that it never gets SIGPIPE) */
    char line[512]; /* the start line as read, for messages */
};

/* How to start the child: serve_child_run. */
struct serve_opts {
    const char *model_dir;
    const char *key;          /* --api-key KEY; NULL = none (JEV_API_KEY is cleared in the child) */
    const char *const *extra; /* more arguments, NULL-terminated (NULL = none); a later option wins */
    const char *const *env;   /* "NAME=VALUE" set in the child, NULL-terminated (NULL = none) */
    const char *stderr_path;  /* the child's stderr into this file (truncated); NULL = this process's */
};

/* The port of the start line's "http://HOST:PORT" ("[V6]:PORT" too); 0 when it names none. */
static inline int serve_line_port(const char *line) {
    const char *at = strstr(line, "http://");
    if (!at)
        return 0;
    at += 7;
    if (*at == '[')
        at = strstr(at, "]");
    const char *colon = at ? strchr(at, ':') : NULL;
    return colon ? atoi(colon + 1) : 0;
}

/*
 * Starts JEV_JEV_BIN (default build/jev) `serve --model DIR --port 0 --threads 1` plus `--api-key KEY`
 * when o->key is set plus o->extra, in its own process group, killed should the test process die.
 * Blocks until the child prints its start line or exits; .port is 0 when no line named a port (the
 * caller fails with .line).
 */
static inline struct serve_child serve_child_run(const struct serve_opts *o) {
    const char *bin = getenv("JEV_JEV_BIN") ? getenv("JEV_JEV_BIN") : "build/jev";
    struct serve_child c = {0};
    const char *argv[40] = {bin, "serve", "--model", o->model_dir, "--port", "0", "--threads", "1"};
    int argc = 8;
    if (o->key) {
        argv[argc++] = "--api-key";
        argv[argc++] = o->key;
    }
    for (int i = 0; o->extra && o->extra[i] && argc < 39; i++)
        argv[argc++] = o->extra[i];
    argv[argc] = NULL;
    int fds[2];
    if (pipe(fds) != 0)
        return c;
    c.pid = fork();
    if (c.pid < 0) {
        close(fds[0]);
        close(fds[1]);
        c.pid = 0;
        return c;
    }
    if (c.pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        unsetenv("JEV_API_KEY");
        for (int i = 0; o->env && o->env[i]; i++)
            putenv((char *)(uintptr_t)o->env[i]);
        if (o->stderr_path && !freopen(o->stderr_path, "w", stderr))
            _exit(126);
        execv(bin, (char *const *)(uintptr_t)argv);
        fprintf(stderr, "exec %s: %s\n", bin, strerror(errno));
        _exit(127);
    }
    setpgid(c.pid, c.pid); /* also here, so the group exists before a teardown could need it */
    close(fds[1]);
    c.out = fdopen(fds[0], "r");
    if (!c.out) {
        close(fds[0]);
        return c;
    }
    if (fgets(c.line, sizeof c.line, c.out)) /* blocks until it listens or exits */
        c.port = serve_line_port(c.line);
    return c;
}

/* serve_child_run with a model, a key (NULL = none) and extra arguments (NULL = none). */
static inline struct serve_child serve_child_start(const char *model_dir, const char *key, const char *const *extra) {
    struct serve_opts o = {.model_dir = model_dir, .key = key, .extra = extra};
    return serve_child_run(&o);
}

/* Fails the test unless the child's wait status is a clean exit 0, saying how it ended. */
static inline void serve_child_expect_clean_exit(int status) {
    if (status == -1)
        fail_msg("jev serve: no child to reap");
    if (WIFSIGNALED(status))
        fail_msg("jev serve: ended by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("jev serve: exit status %d", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

/* Sends sig to the child's group and reaps it; returns its wait status (-1 when there is no child). */
static inline int serve_child_stop(struct serve_child *c, int sig) {
    int status = -1;
    if (c->pid > 0) {
        kill(-c->pid, sig);
        if (waitpid(c->pid, &status, 0) != c->pid)
            status = -1;
        c->pid = 0;
    }
    if (c->out) {
        fclose(c->out);
        c->out = NULL;
    }
    return status;
}

#endif
