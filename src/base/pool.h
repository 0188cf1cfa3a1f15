/*
 * pool.h - a fixed set of worker threads for parallel-for loops.
 *
 * jev_pool_run(pool, n, fn, arg) calls fn(arg, i, thread) for every i in
 * [0, n) spread over the workers and the calling thread, and returns when all
 * calls are done. Tasks are handed out one index at a time through an atomic
 * counter, so uneven tasks balance themselves. `thread` is in
 * [0, jev_pool_size()) and lets a task use per-thread scratch.
 * A pool is used by one caller at a time (one pool per engine). A NULL pool
 * runs everything on the calling thread.
 */
#ifndef JEV_BASE_POOL_H
#define JEV_BASE_POOL_H

#include <stdint.h>

#include "base/error.h" // defines: struct jev_error

struct jev_pool;

typedef void (*jev_task_fn)(void *arg, int64_t i, int thread);

/* n_threads counts the caller too; 0 = all online cores; 1 = no worker threads. */
enum jev_status jev_pool_init(struct jev_pool **out, int n_threads, struct jev_error *err);
void jev_pool_free(struct jev_pool *pool);
int jev_pool_size(const struct jev_pool *pool);
void jev_pool_run(struct jev_pool *pool, int64_t n, jev_task_fn fn, void *arg);

/* The number of online cores. */
int jev_cpu_count(void);

#endif
