/*
 * pool.c - the parallel-for pool of pool.h, on pthreads.
 *
 * Workers sleep on a condition variable between jobs. A job is published by
 * bumping `generation`; every worker and the caller then pull indices from
 * `next` until it passes `n`; the last thread to finish signals `done`.
 */
#include "base/pool.h" // defines: struct jev_pool, jev_pool_run

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

struct jev_pool {
    int n_threads;           /* workers + the caller */
    pthread_t *threads;      /* n_threads - 1 workers */
    pthread_mutex_t mu;      /* guards generation, quit, active */
    pthread_cond_t wake;     /* a new job or quit */
    pthread_cond_t done;     /* the last thread of a job finished */
    uint64_t generation;     /* bumped once per job */
    int quit;                /* set by jev_pool_free */
    int active;              /* threads still inside the current job */
    jev_task_fn fn;          /* current job */
    void *arg;               /* current job's argument */
    int64_t n;               /* current job's task count */
    _Atomic int64_t next;    /* next task index to hand out */
};

struct worker_start {
    struct jev_pool *pool;
    int index;
};

static void run_tasks(struct jev_pool *p, int thread) {
    for (;;) {
        int64_t i = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
        if (i >= p->n)
            break;
        p->fn(p->arg, i, thread);
    }
}

static void finish(struct jev_pool *p) {
    pthread_mutex_lock(&p->mu);
    if (--p->active == 0)
        pthread_cond_broadcast(&p->done);
    pthread_mutex_unlock(&p->mu);
}

static void *worker_main(void *v) {
    struct worker_start *ws = v;
    struct jev_pool *p = ws->pool;
    int index = ws->index;
    free(ws);
    uint64_t seen = 0;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (!p->quit && p->generation == seen)
            pthread_cond_wait(&p->wake, &p->mu);
        if (p->quit) {
            pthread_mutex_unlock(&p->mu);
            return NULL;
        }
        seen = p->generation;
        pthread_mutex_unlock(&p->mu);
        run_tasks(p, index);
        finish(p);
    }
}

int jev_cpu_count(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (int)n;
}

enum jev_status jev_pool_init(struct jev_pool **out, int n_threads, struct jev_error *err) {
    *out = NULL;
    if (n_threads <= 0)
        n_threads = jev_cpu_count();
    struct jev_pool *p = calloc(1, sizeof *p);
    if (!p)
        return jev_fail(err, JEV_ERR_NOMEM, "cannot allocate a thread pool");
    p->n_threads = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    p->threads = calloc((size_t)n_threads, sizeof *p->threads);
    if (!p->threads) {
        free(p);
        return jev_fail(err, JEV_ERR_NOMEM, "cannot allocate a thread pool");
    }
    for (int i = 1; i < n_threads; i++) {
        struct worker_start *ws = malloc(sizeof *ws);
        if (!ws || (ws->pool = p, ws->index = i, pthread_create(&p->threads[i - 1], NULL, worker_main, ws) != 0)) {
            free(ws);
            p->n_threads = i;
            jev_pool_free(p);
            return jev_fail(err, JEV_ERR_NOMEM, "cannot start worker thread %d of %d", i, n_threads);
        }
    }
    *out = p;
    return JEV_OK;
}

void jev_pool_free(struct jev_pool *p) {
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n_threads; i++)
        pthread_join(p->threads[i - 1], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    free(p->threads);
    free(p);
}

int jev_pool_size(const struct jev_pool *p) { return p ? p->n_threads : 1; }

void jev_pool_run(struct jev_pool *p, int64_t n, jev_task_fn fn, void *arg) {
    if (n <= 0)
        return;
    if (!p || p->n_threads == 1 || n == 1) {
        for (int64_t i = 0; i < n; i++)
            fn(arg, i, 0);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->arg = arg;
    p->n = n;
    atomic_store(&p->next, 0);
    p->active = p->n_threads;
    p->generation++;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    run_tasks(p, 0);
    pthread_mutex_lock(&p->mu);
    if (--p->active == 0)
        pthread_cond_broadcast(&p->done);
    while (p->active > 0)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
