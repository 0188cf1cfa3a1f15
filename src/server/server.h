/*
 * server.h - the HTTP server in front of one decider: POST /v1/systemone
 * and POST /v1/decisions answer through jev_decide_json, GET /v1/models and
 * GET /health describe the server. It speaks HTTP/1.1 itself (strict
 * framing, RFC 9112: http-int.h says why not libmicrohttpd).
 *
 * One model, one engine, one decider: the decider is single-threaded, so
 * the HTTP threads read and write connections in parallel but the
 * decisions themselves run one at a time behind a mutex. At most
 * max_queue requests wait for it; one more is answered 429 with
 * Retry-After (after the body has been validated, so a broken body still
 * gets its 400/422, spec/systemone.md §6.2). Every response is JSON and
 * carries an x-typesafe-request-id, refusals of malformed HTTP included;
 * errors use the decide layer's {"error":{"message","type","code"}} body.
 *
 * What it is not: TLS (put nginx in front), streaming, several engines
 * (one decider serializes the work), a process: it never installs signal
 * handlers or exits; tools/cmd-serve.c does that.
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
    const char *host;       /* address to bind (numeric or a name); NULL = "127.0.0.1" */
    int32_t port;           /* TCP port; 0 = an ephemeral one (jev_server_port says which) */
    const char *api_key;    /* required as "Authorization: Bearer KEY"; NULL or "" = no authentication */
    size_t max_body_bytes;  /* larger bodies get 413 (a declared length before the body is read, a chunked
                             * body once it passes); 0 = JEV_SERVER_MAX_BODY_DEFAULT (also the most) */
    int32_t max_queue;      /* requests that may wait for the decider besides the one it runs (>= 0) */
    int32_t http_threads;   /* threads serving the connections (not decisions); 0 = 4 */
    int32_t idle_timeout_s; /* a connection silent this long is closed (slow or stuck clients hold no
                             * HTTP thread forever); 0 = never; default 60 */
};

/* host 127.0.0.1, port 8080, no key, 32 MiB bodies, 64 queued, 4 HTTP threads, 60 s idle timeout. */
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

/* Requests admitted to the decider and not finished yet: the one running plus those waiting. */
int32_t jev_server_queued(const struct jev_server *s);

/* Takes and releases the decider's mutex, for the embedding program to use the decider between
 * requests (and for tests to hold requests in the queue). */
void jev_server_lock(struct jev_server *s);
void jev_server_unlock(struct jev_server *s);

/* Blocks until a byte can be read from stop_fd (the byte in *stop_byte: the CLI's signal handler
 * writes the signal number) or the decider's device is lost (jev_decider_status, checked every
 * check_ms): JEV_OK for a stop request, JEV_ERR_DEVICE_LOST with err saying why. A lost device
 * answers 503 to every request, so a server that returns here should stop and let its supervisor
 * start a new process (a new CUDA context). JEV_ERR_IO when stop_fd cannot be read. */
enum jev_status jev_server_wait(struct jev_server *s, int stop_fd, int check_ms, unsigned char *stop_byte,
                                struct jev_error *err);

/* Stops accepting, finishes the decision in progress, closes every connection, joins the threads
 * and frees the server. NULL is a no-op. Must not be called with the lock held. */
void jev_server_stop(struct jev_server *s);

#endif
