/*
 * pool.c - the parallel-for pool of pool.h, on pthreads.
 *
 * A job is published by bumping `generation`; every worker and the caller
 * then pull indices from `next` until it passes `n`; the last thread to
 * finish makes `active` zero.
 *
 * Waiting is spin-then-sleep on both sides. A decode step of the language
 * model runs some 500 parallel ops of a few microseconds each; waking a
 * thread from a condition variable costs 10-80 us, which alone was a good
 * part of a decode step. So a worker that finished a job watches
 * `generation` for a short while (SPIN_ROUNDS yields) before it sleeps on
 * `wake`, and the caller watches `active` the same way before it sleeps on
 * `done`. Measured: an empty 4-task job 2.7 us instead of 13-80 us. Sleepers are counted under the mutex, so a
 * publisher or a finisher only takes the slow path (lock + broadcast) when someone sleeps, and the predicate is always
 * re-checked under the mutex: no lost wake-ups.
 */
#include "base/pool.h" // defines: struct jev_pool, jev_pool_run

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include <sched.h>

/* Polling yields the core: on a shared or oversubscribed machine a busy
 * spin starves the thread we are waiting for (measured: decode 30% slower
 * with a pause loop when another process took one of the two cores). */
#define CPU_RELAX() sched_yield()

#ifndef SPIN_ROUNDS
#define SPIN_ROUNDS 128 /* yields before sleeping (~0.1-0.3 ms when the core is free) */
#endif

struct jev_pool {
    int n_threads;               /* workers + the caller */
    pthread_t *threads;          /* n_threads - 1 workers */
    pthread_mutex_t mu;          /* guards the sleepers' counts and the condition waits */
    pthread_cond_t wake;         /* a new job or quit */
    pthread_cond_t done;         /* the last thread of a job finished */
    _Atomic uint64_t generation; /* bumped once per job */
    _Atomic int quit;            /* set by jev_pool_free */
    _Atomic int active;          /* threads still inside the current job */
    int sleeping_workers;        /* workers waiting on `wake` (under mu) */
    int caller_sleeping;         /* the caller waits on `done` (under mu) */
    jev_task_fn fn;              /* current job */
    void *arg;                   /* current job's argument */
    int64_t n;                   /* current job's task count */
    _Atomic int64_t next;        /* next task index to hand out */
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

/* Leaves the current job; the last one out wakes a sleeping caller. */
static void finish(struct jev_pool *p) {
    if (atomic_fetch_sub_explicit(&p->active, 1, memory_order_acq_rel) != 1)
        return;
    pthread_mutex_lock(&p->mu);
    if (p->caller_sleeping)
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
        /* spin a little, then sleep until a new generation or quit */
        int spins = 0;
        while (atomic_load_explicit(&p->generation, memory_order_acquire) == seen &&
               !atomic_load_explicit(&p->quit, memory_order_relaxed) && spins < SPIN_ROUNDS) {
            CPU_RELAX();
            spins++;
        }
        if (atomic_load_explicit(&p->generation, memory_order_acquire) == seen &&
            !atomic_load_explicit(&p->quit, memory_order_relaxed)) {
            pthread_mutex_lock(&p->mu);
            p->sleeping_workers++;
            while (atomic_load_explicit(&p->generation, memory_order_acquire) == seen &&
                   !atomic_load_explicit(&p->quit, memory_order_relaxed))
                pthread_cond_wait(&p->wake, &p->mu);
            p->sleeping_workers--;
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load_explicit(&p->quit, memory_order_relaxed))
            return NULL;
        seen = atomic_load_explicit(&p->generation, memory_order_acquire);
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
    atomic_init(&p->generation, 0);
    atomic_init(&p->quit, 0);
    atomic_init(&p->active, 0);
    atomic_init(&p->next, 0);
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
    atomic_store(&p->quit, 1);
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
    /* the previous job is over (active == 0), so the workers only read these after the bump below */
    p->fn = fn;
    p->arg = arg;
    p->n = n;
    atomic_store_explicit(&p->next, 0, memory_order_relaxed);
    atomic_store_explicit(&p->active, p->n_threads, memory_order_relaxed);
    atomic_fetch_add_explicit(&p->generation, 1, memory_order_release);
    pthread_mutex_lock(&p->mu);
    if (p->sleeping_workers > 0)
        pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);

    run_tasks(p, 0);
    if (atomic_fetch_sub_explicit(&p->active, 1, memory_order_acq_rel) == 1)
        return;
    for (int spins = 0; spins < SPIN_ROUNDS; spins++) {
        if (atomic_load_explicit(&p->active, memory_order_acquire) == 0)
            return;
        CPU_RELAX();
    }
    pthread_mutex_lock(&p->mu);
    p->caller_sleeping = 1;
    while (atomic_load_explicit(&p->active, memory_order_acquire) > 0)
        pthread_cond_wait(&p->done, &p->mu);
    p->caller_sleeping = 0;
    pthread_mutex_unlock(&p->mu);
}
