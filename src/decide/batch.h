/*
 * batch.h - the batch that several requests share: per-request slots over
 * one decider, run step by step by one thread (the server's scheduler).
 *
 * A caller adds requests (jev_batcher_add) as they come, calls
 * jev_batcher_step over and over, and takes each request's outcome
 * (jev_batcher_take) as soon as it is finished: the same answers and usage
 * jev_decide_run gives for it, whatever else ran beside it (batch.c says
 * how, and how exact that is).
 *
 * What it is not: thread-safe (one thread drives it, the decider's and the
 * engine's owner; its own preparing threads touch nothing the engine's
 * thread does), a queue (the caller keeps what does not fit: see
 * jev_batcher_room), request parsing or rendering (wire/).
 */
#ifndef JEV_DECIDE_BATCH_H
#define JEV_DECIDE_BATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"      // defines: struct jev_error
#include "decide/pipeline.h" // defines: struct jev_decider, struct jev_decide_params, struct jev_decide_result
#include "decide/request.h"  // defines: struct jev_request

struct jev_batcher;

struct jev_batch_params {
    int32_t max_rows;        /* question suffixes in one batched forward; 0 = the engine's max_batch */
    int32_t max_running;     /* requests in the batch at once; 0 = 32 */
    int32_t prep_threads;    /* threads that prepare requests (decode images, tokenize) while the engine's
                              * thread runs forwards; 0 = half the CPUs (1..8) */
    void (*wake)(void *ctx); /* called from a preparing thread once a request is prepared (a step has work
                              * for it); may be NULL */
    void *wake_ctx;
};

/* What one step ran: the language model's forwards, their rows (suffix runs scored) and the requests
 * that had work in them, tokens, images encoded, and the engine's memory after it. */
struct jev_batch_step {
    int32_t forwards;     /* language-model forwards run */
    int32_t rows;         /* suffix runs in them (0 for a prefill-only forward) */
    int32_t requests;     /* distinct requests with work in them */
    int64_t tokens;       /* tokens through the language model */
    int32_t images;       /* vision tower forwards */
    int32_t reused;       /* requests that started from a kept prefix */
    int64_t memory_bytes; /* the engine's memory in use: a device backend's bytes, else its arenas and state */
    int64_t memory_peak;  /* a device backend's peak since start; else memory_bytes */
};

enum jev_status jev_batcher_new(struct jev_decider *d, const struct jev_batch_params *p, struct jev_batcher **out,
                                struct jev_error *err);
/* Frees the batcher; requests still in it are dropped (their sequences released). NULL is a no-op. */
void jev_batcher_free(struct jev_batcher *b);

/* How many more requests jev_batcher_add takes now (0 when the batch is at max_running). */
int32_t jev_batcher_room(const struct jev_batcher *b);

/* Requests in the batch, finished ones not yet taken included. */
int32_t jev_batcher_count(const struct jev_batcher *b);

/*
 * Adds request r (not copied: it must stay valid until taken) with its params (copied); user comes
 * back with its outcome. JEV_ERR_INVALID_ARG when there is no room.
 */
enum jev_status jev_batcher_add(struct jev_batcher *b, const struct jev_request *r, const struct jev_decide_params *p,
                                void *user, struct jev_error *err);

/* Gives up a request (its client went away): it finishes with JEV_ERR_ABORTED at the next step. */
void jev_batcher_cancel(struct jev_batcher *b, void *user);

/* Runs one step of work for the requests in the batch (st may be NULL). false when there was none. */
bool jev_batcher_step(struct jev_batcher *b, struct jev_batch_step *st);

/*
 * A finished request: its user, the status of its run, the result (moved into *res; caller frees
 * with jev_decide_result_free) and the error (err->msg says what failed). false when none is
 * finished.
 */
bool jev_batcher_take(struct jev_batcher *b, void **user, enum jev_status *status, struct jev_decide_result *res,
                      struct jev_error *err);

#endif
