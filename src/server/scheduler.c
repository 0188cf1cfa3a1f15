/*
 * scheduler.c - the server's one thread that owns the decider and its
 * engine: admitted jobs wait in a FIFO queue; the thread moves them into the
 * decide layer's shared batch while it has room (decide/batch.h), runs one
 * step of the batch at a time under the engine lock, and answers every
 * request the batch finishes (wire/route.h renders it; http_complete hands
 * it to the connection's HTTP thread).
 *
 * Admission (HTTP threads, sched_admit): at most max_running jobs in the
 * batch plus max_queue waiting; one more is 429; none while draining (503).
 * A job whose client went away is given up (the batch drops its work).
 * Stopping: the step in progress finishes, the jobs in the batch are given
 * up and every job not answered is answered 503.
 *
 * What it is not: HTTP (server.c, http-loop.c), how a step packs the work of
 * several requests (decide/batch.c).
 */
#include "server-int.h" // defines: struct jev_server, struct job, sched_start

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"      // defines: jev_log
#include "base/timing.h"   // defines: jev_now_ms
#include "wire/response.h" // defines: jev_response_error
#include "wire/route.h"    // defines: jev_decide_answer

void job_free(struct job *j) {
    if (!j)
        return;
    jev_request_free(&j->r);
    free(j);
}

/* Sends a job's answer (body malloc'd, freed here; NULL = out of memory), logs and counts it. */
static void job_answer(struct jev_server *s, struct job *j, unsigned status, char *body, const char *name,
                       const char *value, const char *note) {
    static const char oom[] =
        "{\"error\":{\"message\":\"server: out of memory\",\"type\":\"server_error\",\"code\":500}}";
    const char *b = body ? body : oom;
    if (!body) {
        status = 500;
        name = NULL;
    }
    /* counted and logged before it goes: a client that has its answer sees it counted */
    double ms = jev_now_ms() - j->start_ms;
    metrics_answer(&s->metrics, j->route, status, ms);
    jev_log(JEV_LOG_INFO, "%s %s %u %.1f ms %s%s", j->method, j->path, status, ms, j->id, note ? note : "");
    const char *headers[] = {"Content-Type", "application/json", "x-typesafe-request-id", j->id, name, value, NULL};
    http_complete(j->ticket, status, headers, b, strlen(b));
    j->ticket = NULL;
    free(body);
}

/* 503 for a job the server will not run (it stops, or it drains before the job got in). */
static void job_refuse(struct jev_server *s, struct job *j, unsigned status) {
    char msg[200];
    if (status == 429)
        snprintf(msg, sizeof msg, "server: the decision queue is full (%d waiting, the --max-queue limit); retry later",
                 s->p.max_queue);
    else
        snprintf(msg, sizeof msg, "server: shutting down, no new requests are taken; retry on another replica");
    job_answer(s, j, status,
               jev_response_error((int)status, status == 429 ? "rate_limit_error" : "unavailable_error", msg),
               "Retry-After", "1", NULL);
}

void sched_wake(void *ctx) {
    struct jev_server *s = ctx;
    pthread_mutex_lock(&s->qlock);
    s->woken = true;
    pthread_cond_signal(&s->qcond);
    pthread_mutex_unlock(&s->qlock);
}

int sched_admit(struct jev_server *s, struct job *j) {
    int refused = 0;
    pthread_mutex_lock(&s->qlock);
    if (atomic_load(&s->draining) || s->stop)
        refused = 503;
    else if (s->queued + s->running >= s->p.max_queue + s->p.max_running)
        refused = 429;
    if (!refused) {
        j->next = NULL;
        if (s->tail)
            s->tail->next = j;
        else
            s->head = j;
        s->tail = j;
        s->queued++;
        s->woken = true;
        pthread_cond_signal(&s->qcond);
    }
    pthread_mutex_unlock(&s->qlock);
    if (refused)
        job_refuse(s, j, (unsigned)refused);
    return refused;
}

void sched_counts(struct jev_server *s, int32_t *queued, int32_t *running) {
    pthread_mutex_lock(&s->qlock);
    *queued = s->queued;
    *running = s->running;
    pthread_mutex_unlock(&s->qlock);
}

/* A finished job: its answer (the response, or the error its run mapped to) goes out. It stops
 * counting as running first, so that a client holding its answer never sees itself counted. */
static void job_finish(struct jev_server *s, struct job *j, enum jev_status status, struct jev_decide_result *res,
                       const struct jev_error *err, bool stopping) {
    char *resp = NULL;
    unsigned http = 503;
    const char *note = NULL;
    if (!stopping || status != JEV_ERR_ABORTED) {
        struct jev_request_error rerr;
        enum jev_status st = jev_decide_answer(s->decider, j->shape, &j->r, status, res, err, &resp, &rerr);
        http = st == JEV_OK ? 200 : rerr.http_status ? (unsigned)rerr.http_status : 500;
        note = st != JEV_OK ? NULL : res->stats.prefix_reused ? " prefix kept" : " prefix computed";
    }
    pthread_mutex_lock(&s->qlock);
    s->running--;
    pthread_cond_broadcast(&s->idle);
    pthread_mutex_unlock(&s->qlock);
    if (http == 503 && !resp)
        job_refuse(s, j, 503);
    else
        job_answer(s, j, http, resp, NULL, NULL, note);
    jev_decide_result_free(res);
    job_free(j);
}

static void *sched_main(void *arg) {
    struct jev_server *s = arg;
    struct jev_batcher *b = s->batcher;
    struct job **run = s->run;
    for (;;) {
        pthread_mutex_lock(&s->qlock);
        s->woken = false; /* what was signalled so far, this pass sees */
        while (!s->stop && s->head && jev_batcher_room(b) > 0) {
            struct job *j = s->head;
            s->head = j->next;
            if (!s->head)
                s->tail = NULL;
            s->queued--;
            s->running++;
            struct jev_error err = {0};
            struct jev_decide_params params = jev_decider_request_params(s->decider); /* as set now */
            enum jev_status st = jev_batcher_add(b, &j->r, &params, j, &err);
            JEV_ASSERT(st == JEV_OK); /* there was room */
            for (int32_t i = 0; i < s->p.max_running; i++)
                if (!run[i]) {
                    run[i] = j;
                    break;
                }
        }
        bool stopping = s->stop;
        if (jev_batcher_count(b) == 0) {
            if (stopping) {
                pthread_mutex_unlock(&s->qlock);
                break;
            }
            pthread_cond_wait(&s->qcond, &s->qlock);
            pthread_mutex_unlock(&s->qlock);
            continue;
        }
        pthread_mutex_unlock(&s->qlock);
        /* a job whose client went away, or every job when stopping, is given up */
        for (int32_t i = 0; i < s->p.max_running; i++)
            if (run[i] && (stopping || http_ticket_gone(run[i]->ticket)))
                jev_batcher_cancel(b, run[i]);
        struct jev_batch_step st;
        pthread_mutex_lock(&s->engine_lock);
        bool ran = jev_batcher_step(b, &st);
        pthread_mutex_unlock(&s->engine_lock);
        if (ran) {
            metrics_step(&s->metrics, &st);
        } else { /* work that cannot go on now (what it needs is held elsewhere): not a busy loop. A signal
                  * sent since the step began (a preparation finished) is not lost: woken says so. */
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 10 * 1000 * 1000;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            pthread_mutex_lock(&s->qlock);
            if (!s->stop && !s->woken)
                pthread_cond_timedwait(&s->qcond, &s->qlock, &ts);
            s->woken = false;
            pthread_mutex_unlock(&s->qlock);
        }
        void *user = NULL;
        enum jev_status status;
        struct jev_decide_result res;
        struct jev_error err;
        while (jev_batcher_take(b, &user, &status, &res, &err)) {
            for (int32_t i = 0; i < s->p.max_running; i++)
                if (run[i] == user)
                    run[i] = NULL;
            job_finish(s, user, status, &res, &err, stopping);
        }
    }
    return NULL;
}

enum jev_status sched_start(struct jev_server *s, struct jev_error *err) {
    s->run = calloc((size_t)s->p.max_running, sizeof *s->run);
    if (!s->run)
        return jev_fail(err, JEV_ERR_NOMEM, "server: out of memory for %d running requests", s->p.max_running);
    int e = pthread_create(&s->thread, NULL, sched_main, s);
    if (e != 0)
        return jev_fail(err, JEV_ERR_IO, "server: cannot start the scheduler thread: %s", strerror(e));
    s->thread_started = true;
    return JEV_OK;
}

void sched_stop(struct jev_server *s) {
    pthread_mutex_lock(&s->qlock);
    s->stop = true;
    pthread_cond_broadcast(&s->qcond);
    pthread_mutex_unlock(&s->qlock);
    if (s->thread_started)
        pthread_join(s->thread, NULL);
    s->thread_started = false;
    /* what never got into the batch */
    for (;;) {
        pthread_mutex_lock(&s->qlock);
        struct job *j = s->head;
        if (j) {
            s->head = j->next;
            if (!s->head)
                s->tail = NULL;
            s->queued--;
        }
        pthread_mutex_unlock(&s->qlock);
        if (!j)
            break;
        job_refuse(s, j, 503);
        job_free(j);
    }
    free(s->run);
    s->run = NULL;
}
