/*
 * server.h - the HTTP server in front of one decider: POST /v1/systemone
 * and POST /v1/decisions answer decisions, GET /v1/models describes the
 * model, GET /health, GET /ready and GET /metrics describe the server. It
 * speaks HTTP/1.1 itself (strict framing, RFC 9112: http-int.h says why not
 * libmicrohttpd).
 *
 * Threads: the HTTP threads read, parse and validate a request, admit it,
 * and send its answer; they never wait on the model. One scheduler thread
 * owns the decider and its engine and runs every admitted request through
 * the decide layer's shared batch (decide/batch.h). At most max_running
 * requests are in the batch and max_queue more wait for it; one more is
 * answered 429 with Retry-After (after its body has been validated, so a
 * broken body still gets its 400/422, spec/systemone.md §6.2). Every response
 * is JSON and carries an x-typesafe-request-id, refusals of malformed HTTP
 * included; errors use the decide layer's {"error":{"message","type","code"}}
 * body.
 *
 * Stopping: jev_server_drain stops admitting (503 with Retry-After), answers
 * every admitted request and waits for the answers to be sent;
 * jev_server_stop then frees it all (without a drain, requests not started
 * are answered 503).
 *
 * What it is not: TLS (put nginx in front), streaming, several engines, a
 * process: it never installs signal handlers or exits; tools/cmd-serve.c
 * does that.
 */
#ifndef JEV_SERVER_SERVER_H
#define JEV_SERVER_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h" // defines: struct jev_error
#include "jev.h"        // defines: struct jev_model, struct jev_decider

/* images come base64 inside the JSON; the decide layer refuses bodies over the same 32 MiB
 * (JEV_DECIDE_MAX_BODY_BYTES), so that is also the largest limit a server accepts */
#define JEV_SERVER_MAX_BODY_DEFAULT ((size_t)32 << 20)

struct jev_server;

struct jev_server_params {
    const char *host;        /* address to bind (numeric or a name); NULL = "127.0.0.1" */
    int32_t port;            /* TCP port; 0 = an ephemeral one (jev_server_port says which) */
    const char *api_key;     /* required as "Authorization: Bearer KEY"; NULL or "" = no authentication */
    size_t max_body_bytes;   /* larger bodies get 413 (a declared length before the body is read, a chunked
                              * body once it passes); 0 = JEV_SERVER_MAX_BODY_DEFAULT (also the most) */
    int32_t max_queue;       /* requests that may wait besides the ones running (>= 0) */
    int32_t max_running;     /* requests in the shared batch at once (>= 1); 0 = 32 */
    int32_t max_batch;       /* question suffixes in one batched forward; 0 = the engine's max_batch */
    int32_t prep_threads;    /* threads that decode images and tokenize beside the scheduler; 0 = half the
                              * CPUs (1..8) */
    int32_t http_threads;    /* threads serving the connections (not decisions); 0 = 4 */
    int32_t idle_timeout_s;  /* a connection silent this long is closed (slow or stuck clients hold no
                              * connection forever; one waiting for its answer is not silent); 0 = never;
                              * default 60 */
    int32_t read_timeout_s;  /* a request's head and body must arrive within this many seconds of its first
                              * byte, else 408; 0 = never; default 30 */
    int32_t max_connections; /* open connections at most; one more is answered 503; 0 = the descriptor
                              * limit less 64 (at most 10000) */
};

/* host 127.0.0.1, port 8080, no key, 32 MiB bodies, 64 queued, 32 running, the engine's batch, 4 HTTP
 * threads, 60 s idle timeout, 30 s read timeout, connections by the descriptor limit. */
struct jev_server_params jev_server_default_params(void);

/*
 * Binds and starts serving. model and decider are not owned and must
 * outlive the server; nothing else may use the decider while the server
 * runs except between jev_server_lock and jev_server_unlock. On failure
 * *out is NULL and err says why (the address, the port, the system's
 * reason).
 */
enum jev_status jev_server_start(struct jev_model *model, struct jev_decider *decider,
                                 const struct jev_server_params *params, struct jev_server **out,
                                 struct jev_error *err);

/* The port the server listens on (the bound one when params.port was 0). */
int32_t jev_server_port(const struct jev_server *s);

/* Requests admitted and not answered yet: those running plus those waiting. */
int32_t jev_server_queued(const struct jev_server *s);

/* Takes and releases the engine's mutex, which the scheduler holds during each step: for the
 * embedding program to use the decider between steps (and for tests to hold requests). */
void jev_server_lock(struct jev_server *s);
void jev_server_unlock(struct jev_server *s);

/* Blocks until a byte can be read from stop_fd (the byte in *stop_byte: the CLI's signal handler
 * writes the signal number) or the decider's device is lost (jev_decider_status, checked every
 * check_ms): JEV_OK for a stop request, JEV_ERR_DEVICE_LOST with err saying why. A lost device
 * answers 503 to every request, so a server that returns here should stop and let its supervisor
 * start a new process (a new CUDA context). JEV_ERR_IO when stop_fd cannot be read. */
enum jev_status jev_server_wait(struct jev_server *s, int stop_fd, int check_ms, unsigned char *stop_byte,
                                struct jev_error *err);

/*
 * Stops admitting: from now on a new decision is answered 503 with Retry-After, /health and /ready
 * answer 503 "draining", and every response closes its connection. Then waits until every admitted
 * request is answered and its answer sent (a client that reads nothing delays this by wait_ms at
 * most once the answers are computed). JEV_OK; JEV_ERR_ABORTED when a byte arrives on stop_fd
 * meanwhile (a second signal: stop now; -1 = no such fd), the byte in *stop_byte.
 */
enum jev_status jev_server_drain(struct jev_server *s, int stop_fd, int wait_ms, unsigned char *stop_byte,
                                 struct jev_error *err);

/* Stops accepting, finishes the step in progress, answers 503 to requests not started, closes every
 * connection, joins the threads and frees the server. NULL is a no-op. Must not be called with the
 * lock held. */
void jev_server_stop(struct jev_server *s);

#endif
