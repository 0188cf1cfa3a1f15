/*
 * server-int.h - what the server's files share (server/ only): the server
 * struct, a decision job on its way from an HTTP thread to the scheduler and
 * back, the scheduler (scheduler.c) and the metrics (metrics.c).
 *
 * Threads: the loop's HTTP threads parse, validate, admit and answer
 * (server.c); one scheduler thread owns the decider and its engine and runs
 * the admitted jobs (scheduler.c); the main thread starts, drains and stops.
 * The HTTP threads never wait on the model: a decision is deferred
 * (http_defer) and its answer comes back through http_complete.
 */
#ifndef JEV_SERVER_SERVER_INT_H
#define JEV_SERVER_SERVER_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "decide/batch.h"  // defines: struct jev_batcher, struct jev_batch_step
#include "http-int.h"      // defines: struct http_loop, struct http_ticket
#include "server/server.h" // defines: struct jev_server_params
#include "wire/request.h"  // defines: struct jev_request, enum jev_request_shape

enum route { ROUTE_NONE, ROUTE_SYSTEMONE, ROUTE_DECISIONS, ROUTE_MODELS, ROUTE_HEALTH, ROUTE_READY, ROUTE_METRICS };
#define ROUTE_COUNT 7

/* ---- metrics (metrics.c) ---- */

#define METRICS_STATUS_MAX 600 /* HTTP statuses counted: 100..599 */
#define METRICS_LATENCY_BUCKETS 16
#define METRICS_SIZE_BUCKETS 12

/* Counters and histograms, every field updated with atomics from any thread. */
struct metrics {
    atomic_llong requests[ROUTE_COUNT][METRICS_STATUS_MAX];         /* answered, by route and status */
    atomic_llong latency[ROUTE_COUNT][METRICS_LATENCY_BUCKETS + 1]; /* per bucket (not cumulative); last: +Inf */
    atomic_llong latency_us[ROUTE_COUNT];                           /* sum of latencies, microseconds */
    atomic_llong rows[METRICS_SIZE_BUCKETS + 1];           /* rows (suffix runs) per forward of the language model */
    atomic_llong rows_sum;                                 /* their sum */
    atomic_llong batch_requests[METRICS_SIZE_BUCKETS + 1]; /* requests per forward */
    atomic_llong batch_requests_sum;
    atomic_llong forwards;      /* forwards of the language model */
    atomic_llong tokens;        /* tokens through the language model */
    atomic_llong images;        /* vision tower forwards (images encoded) */
    atomic_llong prefix_reused; /* requests answered from a kept prefix */
    atomic_llong device_bytes;  /* the engine's memory: the device's bytes in use, or the host arenas */
    atomic_llong device_peak;   /* the most since start (a device backend's peak) */
};

/* Counts one answer of route with status after ms. */
void metrics_answer(struct metrics *m, enum route r, unsigned status, double ms);
/* Counts what one scheduler step ran (jev_batcher_step says). */
void metrics_step(struct metrics *m, const struct jev_batch_step *st);
/* The Prometheus text exposition (format 0.0.4) of everything, with the live gauges given. */
char *metrics_text(const struct metrics *m, int32_t queued, int32_t running, int32_t connections, int32_t max_queue,
                   bool draining);

/* ---- a decision job ---- */

struct job {
    struct http_ticket *ticket; /* where the answer goes */
    enum jev_request_shape shape;
    enum route route;
    struct jev_request r; /* parsed and validated by the HTTP thread */
    double start_ms;      /* when its head arrived */
    char id[40];          /* x-typesafe-request-id */
    char method[16];      /* for the log line */
    char path[128];       /* for the log line */
    struct job *next;     /* the queue */
};

/* ---- the server ---- */

struct jev_server {
    struct http_loop *loop;       /* NULL until started */
    struct jev_model *model;      /* not owned */
    struct jev_decider *decider;  /* not owned; used by the scheduler thread (and under engine_lock by others) */
    atomic_ullong next_id;        /* request counter for the ids */
    uint32_t id_prefix;           /* random per server: ids stay unique across restarts */
    int32_t port;                 /* the bound port */
    struct jev_server_params p;   /* as started, defaults filled (api_key not kept here) */
    size_t max_body;              /* resolved params.max_body_bytes */
    char *api_key;                /* owned copy; NULL = no authentication */
    size_t api_key_len;           /* strlen(api_key) */
    char model_name[256];         /* the model directory's last component, as responses say it */
    struct sockaddr_storage addr; /* the address bound */
    socklen_t addr_len;
    struct metrics metrics;
    /* the scheduler (scheduler.c) */
    pthread_t thread; /* the scheduler thread */
    bool thread_started;
    pthread_mutex_t engine_lock; /* held by the scheduler around each step; jev_server_lock takes it */
    pthread_mutex_t qlock;       /* guards the queue and the counts below */
    pthread_cond_t qcond;        /* a job arrived, a preparation finished, or stop */
    bool woken;                  /* qcond was signalled since the scheduler last looked: it does not wait */
    pthread_cond_t idle;         /* a job finished (drain waits on it) */
    struct job *head, *tail;     /* admitted, not started */
    int32_t queued;              /* jobs in the queue */
    int32_t running;             /* jobs the scheduler has taken and not answered */
    bool stop;                   /* the scheduler ends: what is left is answered 503 */
    atomic_bool draining;        /* no more admissions: new decisions 503, /health and /ready 503 */
    struct jev_batcher *batcher; /* the decide layer's shared batch (scheduler thread only) */
    struct job **run;            /* [max_running] the jobs in the batch (scheduler thread only) */
};

/* Queues the response of x (body malloc'd, freed here; NULL = out of memory) with the headers every
 * response carries, plus one extra header when name is non-NULL, logs and counts it. */
void server_answer(struct jev_server *s, struct http_exchange *x, enum route route, const char *id, const char *method,
                   const char *path, double start_ms, unsigned status, char *body, const char *name, const char *value,
                   const char *note);

/* The error body of the decide layer's shape for a refusal. malloc'd. */
char *server_error_body(unsigned status, const char *type, const char *message);

/* ---- the scheduler (scheduler.c) ---- */

/* The batch's preparing threads call it when a request is prepared: the scheduler has work. */
void sched_wake(void *ctx);

/* Starts the scheduler thread. */
enum jev_status sched_start(struct jev_server *s, struct jev_error *err);

/* Admits a job (0), or refuses it: 429 when the queue is full, 503 while draining (the job is not
 * taken; the caller answers it). */
int sched_admit(struct jev_server *s, struct job *j);

/* Requests queued and running (a consistent pair). */
void sched_counts(struct jev_server *s, int32_t *queued, int32_t *running);

/* Ends the scheduler thread: the step in progress finishes, the jobs not started are answered
 * 503. Idempotent. */
void sched_stop(struct jev_server *s);

/* Frees a job (its request); the ticket must have been completed. */
void job_free(struct job *j);

#endif
