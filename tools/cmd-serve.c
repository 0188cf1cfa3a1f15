/*
 * cmd-serve.c - `jev serve`: the HTTP server (src/server/server.h) over one
 * model, one engine and one decider, until SIGINT or SIGTERM; then it drains
 * (no new requests: 503 with Retry-After; every admitted request answered)
 * and exits 0. A second signal during the drain stops at once (the requests
 * not started are answered 503).
 *
 * Stopping: SIGINT and SIGTERM run a handler that only writes one byte to a
 * pipe, which the main thread waits on. A handler, not a blocked mask and
 * sigwait: threads that exist before main can block anything (OpenBLAS
 * starts its own when the library loads) would take a process-directed
 * signal with its default action and kill the server mid-request. SA_RESTART
 * keeps the interrupted calls of whichever thread ran the handler going.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/ops.h"      // defines: jev_cpu_ops, jev_cpu_backend_new (the test hook)
#include "base/pool.h"        // defines: jev_pool_init (the test hook)
#include "common/cli-args.h"  // defines: cli_parse_long
#include "common/cli-setup.h" // defines: struct cli_setup, cli_setup_open
#include "commands.h"         // defines: cmd_serve
#include "jev.h"              // defines: jev_decider_open, jev_decider_set_timeout, jev_decider_set_prefix_reuse
#include "model/engine.h"     // defines: jev_engine_init_on (the test hook)
#include "server/server.h"    // defines: jev_server_start, jev_server_stop

static void usage(FILE *f) {
    fprintf(f,
            "usage: jev serve --model DIR [options]\n\n"
            "  --model DIR          a model directory (HF bf16 or MLX 4-bit layout)\n"
            "  --host H             address to bind (default 127.0.0.1)\n"
            "  --port N             TCP port (default 8080; 0 = any free port)\n"
            "  --api-key K          require \"Authorization: Bearer K\" (default: $JEV_API_KEY; none = open)\n"
            "  --threads N          compute threads (default: all cores)\n"
            "  --backend B          cpu (default), cuda or cuda:N (a CUDA build: make CUDA=1)\n"
            "  --precision M        exact (default: f32 math) or fast (bf16 matrix products: CUDA, AVX512-BF16 CPUs);\n"
            "                       GET /v1/models names it\n"
            "  --http-threads N     threads that serve the connections (default 4)\n"
            "  --max-body BYTES     largest request body (default and most 33554432 = 32 MiB)\n"
            "  --max-running N      requests batched together at once (default 32)\n"
            "  --max-queue N        requests that may wait besides those running (default 64; more get 429)\n"
            "  --idle-timeout S     close a connection silent for S seconds (default 60; 0 = never)\n"
            "  --read-timeout S     a request's head and body must arrive within S seconds of its first byte,\n"
            "                       else 408 (default 30; 0 = never)\n"
            "  --max-connections N  open connections at most; one more is answered 503 (default: the\n"
            "                       descriptor limit less 64, at most 10000)\n"
            "  --request-timeout S  a request still running after S seconds (fractions allowed) stops with 504\n"
            "                       (default 0 = none)\n"
            "  --max-tokens N       longest sequence (image + context + question) the engine holds (default 8192)\n"
            "  --max-batch N        question suffixes in one batched forward, over all requests (default 64)\n"
            "  --step-tokens N      tokens in one step's forward, the engine's slice (default: the backend's,\n"
            "                       512 on the CPU, 1024 on CUDA)\n"
            "  --prep-threads N     threads that decode images and tokenize beside the model (default: half\n"
            "                       the CPUs, 1..8)\n"
            "  --no-prefix-reuse    run every request's image and state afresh (by default the 4 most recent\n"
            "                       prefixes are kept: the same image bytes and state again skip vision and prefill)\n"
            "  -v                   one log line per request on stderr (and the engine's sizes at start)\n\n"
            "Routes: POST /v1/systemone, POST /v1/decisions, GET /v1/models, GET /health, GET /ready,\n"
            "GET /metrics.\n"
            "Exit status: 0 after SIGINT or SIGTERM (once every admitted request is answered; a second signal\n"
            "stops at once), 1 when it cannot start, 2 for a bad option, 3 when the device is lost (a GPU\n"
            "fault: every request would answer 503; a supervisor should start it again).\n");
}

/* ---- the test hook (above) ---- */

static struct jev_ops lost_ops;

static enum jev_status lost_status(struct jev_backend *be, struct jev_error *err) {
    (void)be;
    return jev_fail(err, JEV_ERR_DEVICE_LOST, "JEV_SERVE_TEST_LOSE_DEVICE: a planted device loss");
}

/* The engine over the CPU ops with lost_status, its pool and backend in *pool and *be. */
static enum jev_status lost_engine(struct jev_model *model, const struct jev_engine_params *ep, struct jev_pool **pool,
                                   struct jev_backend **be, struct jev_engine **engine) {
    struct jev_error err = {0};
    lost_ops = jev_cpu_ops;
    lost_ops.status = lost_status;
    if (jev_pool_init(pool, 1, &err) != JEV_OK || !(*be = jev_cpu_backend_new(*pool)))
        return JEV_ERR_NOMEM;
    return jev_engine_init_on(model, ep, &lost_ops, *be, engine);
}

/* Seconds as a decimal number (fractions allowed) in [0, 86400]; 0, or -1 when s is not one. */
static int parse_seconds(const char *s, double *out) {
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= 0.0 && v <= 86400.0))
        return -1;
    *out = v;
    return 0;
}

/* The stop pipe: the signal handler's only effect (write is async-signal-safe). */
static int stop_pipe[2] = {-1, -1};

static void on_stop_signal(int sig) {
    unsigned char b = (unsigned char)sig;
    ssize_t n = write(stop_pipe[1], &b, 1);
    (void)n; /* a full pipe already holds a stop request */
}

int cmd_serve(int argc, char **argv) {
    struct jev_server_params sp = jev_server_default_params();
    long port = sp.port, http_threads = sp.http_threads, max_queue = sp.max_queue, max_running = sp.max_running;
    long idle_timeout = sp.idle_timeout_s, read_timeout = sp.read_timeout_s, max_conns = 0;
    double request_timeout = 0.0;
    long max_body = (long)sp.max_body_bytes;
    struct cli_setup cs;
    cli_setup_init(&cs, "serve");
    long max_tokens = cs.ep.max_tokens, max_batch = cs.ep.max_batch, prep = 0; /* --step-tokens: cs.ep's */
    bool reuse_prefix = true;
    sp.api_key = getenv("JEV_API_KEY");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0, takes = 1, got = 0;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if ((got = cli_setup_arg(&cs, a, v)) != CLI_ARG_NOT_MINE) { /* -v: also a log line per request */
            bad = got == CLI_ARG_MISSING ? 2 : got == CLI_ARG_BAD ? 1 : 0;
            takes = got == CLI_ARG_VALUE ? 1 : 0;
        } else if (!strcmp(a, "--no-prefix-reuse")) {
            reuse_prefix = false, takes = 0;
        } else if (!v) {
            bad = 2;
        } else if (!strcmp(a, "--host")) {
            sp.host = v;
        } else if (!strcmp(a, "--port")) {
            bad = cli_parse_long(v, 0, 65535, &port);
        } else if (!strcmp(a, "--api-key")) {
            sp.api_key = v;
        } else if (!strcmp(a, "--http-threads")) {
            bad = cli_parse_long(v, 1, 1024, &http_threads);
        } else if (!strcmp(a, "--max-body")) {
            bad = cli_parse_long(v, 1, (long)JEV_SERVER_MAX_BODY_DEFAULT, &max_body);
        } else if (!strcmp(a, "--max-queue")) {
            bad = cli_parse_long(v, 0, 1 << 20, &max_queue);
        } else if (!strcmp(a, "--max-running")) {
            bad = cli_parse_long(v, 1, 1024, &max_running);
        } else if (!strcmp(a, "--idle-timeout")) {
            bad = cli_parse_long(v, 0, 86400, &idle_timeout);
        } else if (!strcmp(a, "--read-timeout")) {
            bad = cli_parse_long(v, 0, 86400, &read_timeout);
        } else if (!strcmp(a, "--max-connections")) {
            bad = cli_parse_long(v, 1, 1000000, &max_conns);
        } else if (!strcmp(a, "--request-timeout")) {
            bad = parse_seconds(v, &request_timeout);
        } else if (!strcmp(a, "--max-tokens")) {
            bad = cli_parse_long(v, 1, 1L << 18, &max_tokens); /* the engine's limit (JEV_ENGINE_MAX_TOKENS) */
        } else if (!strcmp(a, "--prep-threads")) {
            bad = cli_parse_long(v, 1, 64, &prep);
        } else if (!strcmp(a, "--max-batch")) {
            bad = cli_parse_long(v, 1, 2048, &max_batch); /* with --max-running, within JEV_ENGINE_MAX_BATCH */
        } else {
            bad = 2;
        }
        if (bad) {
            if (bad == 2)
                fprintf(stderr, "jev serve: unknown or incomplete option '%s'\n\n", a);
            else
                fprintf(stderr, "jev serve: bad value '%s' for %s\n\n", v, a);
            usage(stderr);
            return 2;
        }
        i += takes;
    }
    if (!cs.dir) {
        fprintf(stderr, "jev serve: --model is required\n\n");
        usage(stderr);
        return 2;
    }
    sp.port = (int32_t)port;
    sp.http_threads = (int32_t)http_threads;
    sp.max_queue = (int32_t)max_queue;
    sp.max_running = (int32_t)max_running;
    sp.max_batch = (int32_t)max_batch;
    sp.prep_threads = (int32_t)prep;
    sp.idle_timeout_s = (int32_t)idle_timeout;
    sp.read_timeout_s = (int32_t)read_timeout;
    sp.max_connections = (int32_t)max_conns;
    sp.max_body_bytes = (size_t)max_body;

    /* SIGINT and SIGTERM from here on: one byte into the stop pipe, whichever thread takes them */
    if (pipe(stop_pipe) != 0) {
        fprintf(stderr, "jev serve: cannot create the stop pipe: %s\n", strerror(errno));
        return 1;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN); /* a client that hangs up mid-response is an error return, not death */

    struct jev_server *server = NULL;
    struct jev_error err = {0};
    struct jev_pool *hook_pool = NULL;  /* the test hook's */
    struct jev_backend *hook_be = NULL; /* the test hook's */
    int rc = 1;
    cs.ep.max_tokens = (int32_t)max_tokens; /* the server sizes its one engine from its options */
    /* runs in one forward: one forward's suffixes (--max-batch) and a prefill piece of every running
     * request, with the four kept prefixes (the engine's light forks and runs: max_batch, + 1);
     * sequences with a DeltaNet state: the prefix of every running request, the kept prefixes and one
     * more. Label scoring's suffix forks are light and take no state; a request whose forks need
     * states (text scoring, a suffix longer than a step) runs them in groups that fit. */
    cs.ep.max_batch = (int32_t)(max_batch + max_running + 4);
    cs.ep.max_states = (int32_t)(max_running + 5);
    if (cli_setup_load(&cs, &err) != JEV_OK) {
        fprintf(stderr, "jev serve: %s\n", err.msg);
        goto done;
    }
    const char *lose = getenv("JEV_SERVE_TEST_LOSE_DEVICE");
    if (lose && *lose) { /* the test hook: the engine over the planted backend, owned by cs from here */
        enum jev_status est = lost_engine(cs.model, &cs.ep, &hook_pool, &hook_be, &cs.engine);
        if (est != JEV_OK || jev_decider_open(cs.model, cs.engine, &cs.decider) != JEV_OK) {
            fprintf(stderr, "jev serve: %s\n", cs.engine ? jev_engine_last_error(cs.engine) : "out of memory");
            goto done;
        }
    } else if (cli_setup_open(&cs, true, &err) != JEV_OK) {
        fprintf(stderr, "jev serve: %s\n", err.msg);
        goto done;
    }
    struct jev_decider *decider = cs.decider;
    jev_decider_set_timeout(decider, 1000.0 * request_timeout);
    jev_decider_set_prefix_reuse(decider, reuse_prefix);
    if (jev_server_start(cs.model, decider, &sp, &server, &err) != JEV_OK) {
        fprintf(stderr, "jev serve: %s\n", err.msg);
        goto done;
    }
    const char *host = sp.host ? sp.host : "127.0.0.1";
    bool v6 = strchr(host, ':') != NULL;
    printf("jev serve: listening on http://%s%s%s:%d (model %s, %s, %d HTTP threads, %d running, queue %d, "
           "batch %d)\n",
           v6 ? "[" : "", host, v6 ? "]" : "", jev_server_port(server), cs.dir,
           sp.api_key && sp.api_key[0] ? "API key required" : "no key", sp.http_threads, sp.max_running, sp.max_queue,
           sp.max_batch);
    fflush(stdout);
    unsigned char sig = 0;
    if (jev_server_wait(server, stop_pipe[0], 1000, &sig, &err) == JEV_OK) {
        /* the drain: no new requests, every admitted one answered; a second signal stops at once */
        fprintf(stderr, "jev serve: %s, draining (a second signal stops at once)\n",
                sig == SIGINT ? "SIGINT" : "SIGTERM");
        if (jev_server_drain(server, stop_pipe[0], 10000, &sig, &err) == JEV_OK)
            fprintf(stderr, "jev serve: every admitted request answered, stopping\n");
        else
            fprintf(stderr, "jev serve: %s, stopping now\n", err.msg);
        rc = 0;
    } else if (err.status == JEV_ERR_DEVICE_LOST) {
        /* every request would answer 503 from here on: exit so that a supervisor starts a new process */
        fprintf(stderr, "jev serve: the device is lost (%s); stopping with exit status 3\n", err.msg);
        rc = 3;
    } else {
        fprintf(stderr, "jev serve: %s\n", err.msg);
    }
done:
    jev_server_stop(server);
    cli_setup_free(&cs); /* the engine first: the hook's backend and pool below outlive it */
    if (hook_be)
        jev_cpu_backend_free(hook_be);
    jev_pool_free(hook_pool);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    close(stop_pipe[0]);
    close(stop_pipe[1]);
    return rc;
}
