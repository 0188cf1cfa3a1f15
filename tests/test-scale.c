/*
 * test-scale.c - the scale-out deployment (deploy/nginx/jev.conf) as a test: two
 * `jev serve` replicas (children, $JEV_JEV_BIN, port 0) on loopback over the tiny
 * synthetic model, and nginx (a child, in the foreground) in front of them, with a
 * config derived from deploy/nginx/jev.conf in a prefix of its own under
 * $JEV_TEST_DIR. Four client threads send decisions through nginx; once K responses
 * have arrived, one replica is killed with SIGKILL. Every request must still get 200
 * and the body jev_decide_json gives for the same body (a replica batches the
 * requests it has at once: the same bytes where the CPU kernels allow it, else
 * within 1e-6 with the same keys, choices and usage; answer-diff.h); both replicas must
 * have answered before the kill (told apart by their request ids, random per
 * replica); nginx's access log must show a request retried from the dead replica on
 * the live one. A second test checks the body limits of nginx and jev agree (32 MiB
 * passes to jev, one byte more is nginx's 413 in jev's error shape) and that the
 * Authorization header passes through.
 *
 * It is not a benchmark (scripts/bench-serve.sh is) and no clock decides anything:
 * the kill waits on a response count, start-up is polled with a deadline. A missing
 * nginx is a failure that names scripts/setup.sh, never a skip. Every child runs in
 * its own process group, which the teardown kills on every path.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <jansson.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "jev.h"         // defines: jev_model_load, jev_decide_json
#include "answer-diff.h" // defines: answer_same_in_company
#include "serve-test.h"  // defines: struct reply, serve_curl_perform, serve_child_start
#include "tiny-model.h"  // defines: tiny_model_write, tiny_test_dir

#define N_REPLICAS 2
#define N_CLIENTS 4
#define N_BODIES 8
#define API_KEY "scale-test-key"
#define MAX_BODY (32u * 1024u * 1024u) /* jev's limit, and client_max_body_size in jev.conf */

static struct jev_model *model;
static struct jev_engine *engine;
static struct jev_decider *decider;
static char model_dir[1024];
static char nginx_bin[1024];

/* the children of the running test; 0 = none (reaped) */
static pid_t replica_pid[N_REPLICAS];
static pid_t nginx_pid;
static int replica_port[N_REPLICAS];
static char replica_rid[N_REPLICAS][16]; /* "req_" + the replica's 8 hex digits */
static int nginx_port;
static char prefix[1024]; /* nginx's prefix: nginx.conf, its logs and temp folders (jev.conf's relative paths) */

/* ---- small helpers ---- */

static void pause_ms(long ms) { /* a polling interval, never a synchronisation */
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* nginx on $PATH or in the sbin folders Debian puts it in (not on a plain user's PATH). */
static bool find_nginx(char *out, size_t size) {
    const char *path = getenv("PATH");
    char dirs[4096];
    snprintf(dirs, sizeof dirs, "%s:/usr/sbin:/usr/local/sbin:/sbin", path ? path : "");
    for (char *save = NULL, *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        snprintf(out, size, "%s/nginx", d);
        if (access(out, X_OK) == 0)
            return true;
    }
    return false;
}

/* A port that was free a moment ago (nginx cannot take port 0); a lost race shows as nginx
 * failing to bind, and the caller tries another. */
static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t n = sizeof a;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &n), 0);
    close(fd);
    return ntohs(a.sin_port);
}

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    char *b = malloc(cap);
    for (size_t k; b && (k = fread(b + n, 1, cap - n - 1, f)) > 0;) {
        n += k;
        if (cap - n < 2) {
            char *nb = realloc(b, cap *= 2);
            if (!nb) {
                free(b);
                b = NULL;
            } else {
                b = nb;
            }
        }
    }
    fclose(f);
    if (b)
        b[n] = '\0';
    if (len)
        *len = n;
    return b;
}

static void print_file(const char *what, const char *path) {
    char *s = slurp(path, NULL);
    fprintf(stderr, "---- %s (%s) ----\n%s\n----\n", what, path, s ? s : "(unreadable)");
    free(s);
}

/* Kills a child's whole process group (nginx's workers are in its group) and reaps it. */
static void kill_group(pid_t *pid, int sig) {
    if (*pid <= 0)
        return;
    kill(-*pid, sig);
    waitpid(*pid, NULL, 0);
    *pid = 0;
}

/* Waits for a child to exit, up to `secs`; its wait status, or -1 (still running). */
static int wait_exit(pid_t pid, double secs) {
    double end = now_s() + secs;
    for (;;) {
        int st = 0;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            return st;
        if (r < 0 || now_s() > end)
            return -1;
        pause_ms(20);
    }
}

/* ---- HTTP through libcurl ---- */

/* One exchange on handle h (reused: keepalive to nginx). body NULL = GET. quiet: no line for a
 * failed transfer (polling). */
static struct reply http(CURL *h, int port, const char *path, const char *body, size_t body_len, bool auth,
                         long timeout_ms, bool quiet) {
    struct reply r = {0};
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
    if (auth)
        hdr = curl_slist_append(hdr, "Authorization: Bearer " API_KEY);
    curl_easy_reset(h);
    if (body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
        /* large bodies: wait for nginx's 100 Continue (or its 413), never a guessed delay */
        curl_easy_setopt(h, CURLOPT_EXPECT_100_TIMEOUT_MS, 600000L);
    }
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms); /* a safety net against a hang, not a check */
    CURLcode rc = serve_curl_perform(h, url, hdr, &r);
    if (!r.curl_ok && !quiet)
        fprintf(stderr, "curl %s %s: %s\n", body ? "POST" : "GET", path, curl_easy_strerror(rc));
    curl_slist_free_all(hdr);
    return r;
}

static struct reply http1(int port, const char *path, const char *body, size_t body_len, bool auth) {
    CURL *h = curl_easy_init();
    assert_non_null(h);
    struct reply r = http(h, port, path, body, body_len, auth, 120000L, false);
    curl_easy_cleanup(h);
    return r;
}

/* ---- the replicas and nginx ---- */

/* `jev serve` on port 0 as a child in its own process group; its start line names the port. */
static void start_replica(int i) {
    struct serve_child c = serve_child_start(model_dir, API_KEY, NULL);
    replica_pid[i] = c.pid;
    replica_port[i] = c.port;
    if (c.out)
        fclose(c.out); /* it prints nothing after the start line */
    if (c.pid <= 0 || c.port <= 0)
        fail_msg("replica %d (jev serve): no start line naming its port (got '%s')", i, c.line);
    /* its request-id prefix, random per server start: tells the replicas apart behind nginx */
    struct reply r = http1(replica_port[i], "/health", NULL, 0, false);
    assert_int_equal(r.status, 200);
    free(r.body);
    assert_true(strlen(r.id) >= 12);
    snprintf(replica_rid[i], sizeof replica_rid[i], "%.12s", r.id);
}

static bool starts_with(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

/*
 * prefix/nginx.conf from deploy/nginx/jev.conf: only the lines that name the machine change
 * (user, listen, the upstream's server lines). The pid file, logs and temp folders are relative
 * paths in jev.conf, so nginx puts them under the prefix as written. Each rewritten line must
 * be found, so that a change of the file cannot quietly leave the test running something else.
 * Comment lines pass unchanged.
 */
static void write_conf(void) {
    const char *root = getenv("JEV_ROOT");
    char src[1024], dst[1100];
    snprintf(src, sizeof src, "%s/deploy/nginx/jev.conf", root ? root : ".");
    snprintf(dst, sizeof dst, "%s/nginx.conf", prefix);
    FILE *in = fopen(src, "r");
    if (!in)
        fail_msg("cannot read %s: %s", src, strerror(errno));
    FILE *out = fopen(dst, "w");
    assert_non_null(out);
    char line[1024];
    int n_user = 0, n_listen = 0, n_server = 0;
    bool in_upstream = false;
    while (fgets(line, sizeof line, in)) {
        const char *t = line + strspn(line, " \t");
        int ind = (int)(t - line);
        if (*t == '#' || *t == '\n') {
            fputs(line, out);
        } else if (starts_with(t, "user ")) {
            n_user++;
            /* as root, nginx's workers would switch to the file's user (www-data), who may not
             * reach this prefix: run them as ourselves. As anyone else, `user` is ignored. */
            if (geteuid() == 0) {
                struct passwd *pw = getpwuid(geteuid());
                struct group *gr = getgrgid(getegid());
                fprintf(out, "user %s %s;\n", pw ? pw->pw_name : "root", gr ? gr->gr_name : "root");
            }
        } else if (starts_with(t, "listen ")) {
            n_listen++;
            fprintf(out, "%*slisten 127.0.0.1:%d;\n", ind, "", nginx_port);
        } else if (starts_with(t, "upstream ")) {
            in_upstream = true;
            fputs(line, out);
        } else if (in_upstream && *t == '}') {
            in_upstream = false;
            fputs(line, out);
        } else if (in_upstream && starts_with(t, "server ")) {
            /* the first replica line is the template for ours, parameters kept; the rest go */
            if (n_server++ == 0) {
                const char *params = t + strlen("server ");
                params += strcspn(params, " ;");
                for (int i = 0; i < N_REPLICAS; i++)
                    fprintf(out, "%*sserver 127.0.0.1:%d%s", ind, "", replica_port[i], params);
            }
        } else {
            fputs(line, out);
        }
    }
    fclose(in);
    assert_int_equal(fclose(out), 0);
    if (n_user != 1 || n_listen != 1 || n_server < 1)
        fail_msg("%s no longer has the lines this test rewrites (user %d, listen %d, upstream server %d): update "
                 "write_conf in tests/test-scale.c",
                 src, n_user, n_listen, n_server);
}

/* nginx in the foreground as a child (own process group), until it answers /health. */
static void start_nginx(void) {
    char path[1200];
    for (int attempt = 0;; attempt++) {
        nginx_port = free_port();
        write_conf();
        snprintf(path, sizeof path, "%s/jev-error.log", prefix);
        unlink(path);
        snprintf(path, sizeof path, "%s/jev-access.log", prefix);
        unlink(path);
        char conf[1100], elog[1100], out[1100];
        snprintf(conf, sizeof conf, "%s/nginx.conf", prefix);
        snprintf(elog, sizeof elog, "%s/jev-error.log", prefix);
        snprintf(out, sizeof out, "%s/nginx.out", prefix);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            setpgid(0, 0);
            prctl(PR_SET_PDEATHSIG, SIGTERM); /* the master then stops its workers */
            int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (fd >= 0) {
                dup2(fd, 1);
                dup2(fd, 2);
                close(fd);
            }
            execl(nginx_bin, nginx_bin, "-p", prefix, "-e", elog, "-c", conf, "-g", "daemon off;", (char *)NULL);
            fprintf(stderr, "exec %s: %s\n", nginx_bin, strerror(errno));
            _exit(127);
        }
        setpgid(pid, pid);
        nginx_pid = pid;
        /* poll /health with a deadline; nginx exiting ends the wait at once */
        double end = now_s() + 60;
        bool up = false, exited = false;
        CURL *h = curl_easy_init();
        assert_non_null(h);
        while (!up && !exited && now_s() < end) {
            int st = 0;
            if (waitpid(nginx_pid, &st, WNOHANG) == nginx_pid) {
                nginx_pid = 0;
                exited = true;
                break;
            }
            struct reply r = http(h, nginx_port, "/health", NULL, 0, false, 2000L, true); /* refused until it listens */
            up = r.curl_ok && r.status == 200;
            free(r.body);
            if (!up)
                pause_ms(20);
        }
        curl_easy_cleanup(h);
        if (up)
            return;
        char *elog_text = slurp(elog, NULL);
        bool port_taken = elog_text && strstr(elog_text, "Address already in use");
        free(elog_text);
        if (exited && port_taken && attempt < 5)
            continue; /* lost the race for the port: another one */
        print_file("nginx output", out);
        print_file("nginx error log", elog);
        print_file("nginx.conf derived from deploy/nginx/jev.conf", conf);
        fail_msg("nginx (%s) did not answer /health on port %d: %s", nginx_bin, nginx_port,
                 exited ? "it exited (see its error log above)" : "not within 60 s");
    }
}

static void start_cluster(const char *name) {
    if (!nginx_bin[0])
        fail_msg("nginx is not installed (not on $PATH, not in /usr/sbin): this test needs it. "
                 "Run scripts/setup.sh (as root, or with sudo), which installs nginx and wrk.");
    char rel[1024];
    tiny_test_dir("scale", name, rel, sizeof rel);
    mkdir(rel, 0755);
    char abs[PATH_MAX]; /* absolute: nginx resolves relative paths against its prefix */
    if (!realpath(rel, abs) || strlen(abs) >= sizeof prefix)
        fail_msg("%s: %s", rel, strerror(errno));
    memcpy(prefix, abs, strlen(abs) + 1);
    for (int i = 0; i < N_REPLICAS; i++)
        start_replica(i);
    assert_string_not_equal(replica_rid[0], replica_rid[1]); /* 1 in 2^32 to collide */
    start_nginx();
}

/* ---- fixtures ---- */

static int group_setup(void **state) {
    (void)state;
    if (!find_nginx(nginx_bin, sizeof nginx_bin))
        nginx_bin[0] = '\0'; /* each test fails on it with the message, none is skipped */
    /* the same model, thread count and engine sizes as the replicas (`jev serve --threads 1`
     * with default engine params), so the direct answer is the replicas' byte for byte */
    if (tiny_decider_open("scale", 1, NULL, model_dir, sizeof model_dir, &model, &engine, &decider) != 0)
        return -1;
    return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -1;
}

static int group_teardown(void **state) {
    (void)state;
    curl_global_cleanup();
    jev_decider_close(decider);
    jev_engine_free(engine);
    jev_model_free(model);
    return 0;
}

/* Every path, a failed assertion included: no child outlives the test. */
static int teardown(void **state) {
    (void)state;
    kill_group(&nginx_pid, SIGKILL);
    for (int i = 0; i < N_REPLICAS; i++)
        kill_group(&replica_pid[i], SIGKILL);
    return 0;
}

/* ---- the load, with a replica killed in the middle ---- */

struct result {
    long status;
    bool body_ok;
    bool before_kill; /* arrived before the kill was decided */
    char id[64];
};

struct load {
    const char *body[N_BODIES];
    const char *path[N_BODIES];
    char *want[N_BODIES];
    int n;              /* requests in all */
    atomic_int next;    /* the next request to send */
    struct result *res; /* n */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;    /* responses (or failures) so far */
    bool killed; /* the kill has been decided */
};

static void *client(void *u) {
    struct load *L = u;
    CURL *h = curl_easy_init();
    if (!h)
        return NULL;
    for (int i; (i = atomic_fetch_add(&L->next, 1)) < L->n;) {
        int b = i % N_BODIES;
        struct reply r = http(h, nginx_port, L->path[b], L->body[b], strlen(L->body[b]), true, 120000L, false);
        struct result *res = &L->res[i];
        res->status = r.curl_ok ? r.status : -1;
        res->body_ok = answer_same_in_company(r.body, L->want[b], NULL);
        snprintf(res->id, sizeof res->id, "%s", r.id);
        if (r.curl_ok && !res->body_ok)
            fprintf(stderr, "request %d: body differs:\n  got  %s\n  want %s\n", i, r.body ? r.body : "(none)",
                    L->want[b]);
        free(r.body);
        pthread_mutex_lock(&L->mu);
        res->before_kill = !L->killed;
        L->done++;
        pthread_cond_broadcast(&L->cv);
        pthread_mutex_unlock(&L->mu);
    }
    curl_easy_cleanup(h);
    return NULL;
}

static int replica_of(const char *id) {
    for (int i = 0; i < N_REPLICAS; i++)
        if (starts_with(id, replica_rid[i]))
            return i;
    return -1;
}

static void test_replica_killed_mid_load(void **state) {
    (void)state;
    start_cluster("nginx-kill");
    /* 8 different requests, both shapes, so that an answer sent to the wrong request shows */
    static char bodies[N_BODIES][512];
    struct load *L = calloc(1, sizeof *L);
    assert_non_null(L);
    for (int b = 0; b < N_BODIES; b++) {
        if (b % 2 == 0) {
            snprintf(bodies[b], sizeof bodies[b],
                     "{\"model\":\"jev-latest\",\"state\":{\"note\":\"door number %d\"},\"questions\":{"
                     "\"door\":{\"type\":\"noul\",\"instructions\":\"Is door %d red?\"},"
                     "\"color\":{\"type\":\"choice\",\"instructions\":\"Which color?\","
                     "\"criteria\":{\"red\":null,\"blue\":\"like the sky\",\"green\":null}}}}",
                     b, b);
            L->path[b] = "/v1/systemone";
        } else {
            snprintf(bodies[b], sizeof bodies[b],
                     "{\"model\":\"jev-latest\",\"input\":\"ticket %d\",\"questions\":["
                     "{\"type\":\"predicate\",\"instructions\":\"Refund %d?\",\"name\":\"refund\"},"
                     "{\"type\":\"score\",\"instructions\":\"Mood?\",\"name\":\"mood\",\"levels\":[{\"label\":"
                     "\"calm\"},{\"label\":\"angry\"}]}]}",
                     b, b);
            L->path[b] = "/v1/decisions";
        }
        L->body[b] = bodies[b];
        int32_t st = 0;
        jev_decide_json(decider, bodies[b], strlen(bodies[b]), b % 2 ? JEV_REQUEST_OPENAI : JEV_REQUEST_SYSTEMONE,
                        &L->want[b], &st);
        assert_non_null(L->want[b]);
        assert_int_equal(st, 200);
    }
    for (int a = 0; a < N_BODIES; a++) /* the answers differ, so a mix-up cannot pass */
        for (int b = a + 1; b < N_BODIES; b++)
            assert_string_not_equal(L->want[a], L->want[b]);

    const char *quick = getenv("JEV_TEST_QUICK");
    L->n = quick && quick[0] == '1' ? 160 : 480;
    int kill_after = L->n / 3;
    L->res = calloc((size_t)L->n, sizeof *L->res);
    assert_non_null(L->res);
    atomic_init(&L->next, 0);
    pthread_mutex_init(&L->mu, NULL);
    pthread_cond_init(&L->cv, NULL);
    pthread_t th[N_CLIENTS];
    for (int i = 0; i < N_CLIENTS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, client, L), 0);

    /* the kill: after kill_after responses, whatever the clock says */
    const int victim = 1, survivor = 0;
    pthread_mutex_lock(&L->mu);
    while (L->done < kill_after)
        pthread_cond_wait(&L->cv, &L->mu);
    L->killed = true;
    int done_at_kill = L->done;
    pthread_mutex_unlock(&L->mu);
    pid_t v = replica_pid[victim];
    assert_int_equal(kill(v, SIGKILL), 0);
    int st = 0;
    assert_int_equal(waitpid(v, &st, 0), v);
    replica_pid[victim] = 0;
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL); /* it died by the kill, not before */

    for (int i = 0; i < N_CLIENTS; i++)
        pthread_join(th[i], NULL);

    /* every request: 200 and the direct answer (answer_same_in_company) */
    int served_before[N_REPLICAS] = {0}, bad = 0;
    for (int i = 0; i < L->n; i++) {
        const struct result *r = &L->res[i];
        if (r->status != 200 || !r->body_ok) {
            if (bad++ < 10)
                fprintf(stderr, "request %d: status %ld, body %s, id '%s'\n", i, r->status,
                        r->body_ok ? "right" : "wrong", r->id);
            continue;
        }
        int k = replica_of(r->id);
        if (k < 0 && bad++ < 10)
            fprintf(stderr, "request %d: id '%s' from neither replica (%s, %s)\n", i, r->id, replica_rid[0],
                    replica_rid[1]);
        if (k >= 0 && r->before_kill)
            served_before[k]++;
    }
    fprintf(stderr, "scale: %d requests, kill after %d; before it replica 0 answered %d, replica 1 %d\n", L->n,
            done_at_kill, served_before[0], served_before[1]);
    assert_int_equal(bad, 0);
    assert_true(served_before[0] > 0);
    assert_true(served_before[1] > 0);

    /* nginx stops gracefully (SIGQUIT) and exits 0; then its access log is complete */
    assert_int_equal(kill(nginx_pid, SIGQUIT), 0);
    st = wait_exit(nginx_pid, 60);
    assert_true(st != -1);
    nginx_pid = 0;
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    char path[1100];
    snprintf(path, sizeof path, "%s/jev-access.log", prefix);
    char *log = slurp(path, NULL);
    assert_non_null(log);
    char dead[64], live[64], retried[160];
    snprintf(dead, sizeof dead, "127.0.0.1:%d", replica_port[victim]);
    snprintf(live, sizeof live, "127.0.0.1:%d", replica_port[survivor]);
    snprintf(retried, sizeof retried, "upstream=\"%s, %s\"", dead, live);
    int posts = 0, ok = 0, retries = 0, by[N_REPLICAS] = {0};
    for (char *save = NULL, *l = strtok_r(log, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        if (!strstr(l, "\"POST /v1/"))
            continue;
        posts++;
        ok += strstr(l, "\" 200 ") != NULL;
        retries += strstr(l, retried) != NULL;
        for (int i = 0; i < N_REPLICAS; i++) {
            char first[96];
            snprintf(first, sizeof first, "upstream=\"127.0.0.1:%d", replica_port[i]);
            by[i] += strstr(l, first) != NULL;
        }
    }
    free(log);
    fprintf(stderr,
            "scale: access log: %d POSTs, %d answered 200, first sent to replica 0: %d, replica 1: %d, "
            "retried from the killed replica on the live one: %d\n",
            posts, ok, by[0], by[1], retries);
    assert_int_equal(posts, L->n);
    assert_int_equal(ok, L->n);
    assert_true(by[0] > 0 && by[1] > 0);
    /* after the kill, the dead replica is tried at least once (least_conn prefers it: it has
     * nothing in flight) and the request goes on to the live one */
    assert_true(retries >= 1);

    /* the survivor stops on SIGTERM with status 0 (under ASan: with nothing leaked) */
    assert_int_equal(kill(replica_pid[survivor], SIGTERM), 0);
    st = wait_exit(replica_pid[survivor], 60);
    assert_true(st != -1);
    replica_pid[survivor] = 0;
    serve_child_expect_clean_exit(st);

    for (int b = 0; b < N_BODIES; b++)
        jev_free(L->want[b]);
    pthread_mutex_destroy(&L->mu);
    pthread_cond_destroy(&L->cv);
    free(L->res);
    free(L);
}

/* ---- limits and headers through nginx ---- */

static void test_limits_and_auth_through_nginx(void **state) {
    (void)state;
    start_cluster("nginx-limits");
    /* exactly 32 MiB reaches jev, which gives its own answer (the decide layer's) */
    char *big = malloc(MAX_BODY + 2);
    assert_non_null(big);
    memset(big, ' ', MAX_BODY + 1);
    big[MAX_BODY + 1] = '\0';
    char *want = NULL;
    int32_t want_status = 0;
    jev_decide_json(decider, big, MAX_BODY, JEV_REQUEST_SYSTEMONE, &want, &want_status);
    assert_non_null(want);
    struct reply r = http1(nginx_port, "/v1/systemone", big, MAX_BODY, true);
    assert_true(r.curl_ok);
    assert_int_equal(r.status, want_status);
    assert_string_equal(r.body, want);
    assert_true(replica_of(r.id) >= 0); /* answered by a replica, not by nginx */
    free(r.body);
    jev_free(want);
    /* one byte more: nginx's 413, in jev's error shape */
    r = http1(nginx_port, "/v1/systemone", big, MAX_BODY + 1, true);
    assert_true(r.curl_ok);
    assert_int_equal(r.status, 413);
    assert_string_equal(r.ctype, "application/json");
    json_t *j = json_loads(r.body ? r.body : "", 0, NULL);
    assert_non_null(j);
    json_t *e = json_object_get(j, "error");
    assert_string_equal(json_string_value(json_object_get(e, "type")), "request_too_large_error");
    assert_int_equal(json_integer_value(json_object_get(e, "code")), 413);
    json_decref(j);
    free(r.body);
    free(big);

    /* the key reaches jev: without it 401 (jev's), with it 200; /health needs none */
    r = http1(nginx_port, "/v1/models", NULL, 0, false);
    assert_int_equal(r.status, 401);
    assert_true(replica_of(r.id) >= 0);
    free(r.body);
    r = http1(nginx_port, "/v1/models", NULL, 0, true);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.ctype, "application/json");
    free(r.body);
    r = http1(nginx_port, "/health", NULL, 0, false);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "{\"status\":\"ok\"}");
    free(r.body);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_replica_killed_mid_load, teardown),
        cmocka_unit_test_teardown(test_limits_and_auth_through_nginx, teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
