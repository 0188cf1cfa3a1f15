/*
 * profile.h - wall time per op of one backend instance (a developer's
 * diagnostic).
 *
 * A profiler stands in for a backend instance: jev_profile_new(ops, be)
 * gives an op table (jev_profile_ops) and an instance (jev_profile_backend)
 * whose compute ops read the clock, call the inner instance's op and add the
 * time to the profiler's own slots; the memory ops go straight through. The
 * state lives in the profiler, so each engine counts only its own ops, and
 * two engines (on one backend or two) profiled at once never mix.
 *
 * JEV_PROFILE=1 in the environment makes jev_engine_init put a profiler in
 * front of its backend and jev_engine_free print its table (calls, ms, share,
 * GFLOP/s of the matrix products) to stderr, e.g.
 *     JEV_PROFILE=1 jev decide --model M --image I --threads 16 ...
 * The difference between a phase's time and the sum of its ops is the
 * serial glue of model/lm.c and model/vision.c.
 *
 * What it is not: a per-thread or per-kernel profiler (use perf for that),
 * or free: one clock read before and after every op. A backend whose ops
 * return before the work is done (CUDA streams) is synchronised after each
 * op to be measured; the CPU backend's ops are synchronous. Use a profiler
 * from one thread at a time, like the instance it wraps.
 */
#ifndef JEV_BACKEND_PROFILE_H
#define JEV_BACKEND_PROFILE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "backend/ops.h" // defines: struct jev_ops, struct jev_backend
#include "base/error.h"  // defines: struct jev_error

struct jev_profile;

/* True when JEV_PROFILE is set to anything but "" or "0". */
bool jev_profile_requested(void);

/* A profiler in front of instance be of table ops (neither owned; both outlive it). */
enum jev_status jev_profile_new(const struct jev_ops *ops, struct jev_backend *be, struct jev_profile **out,
                                struct jev_error *err);
void jev_profile_free(struct jev_profile *p);

/* The table and the instance to use instead of (ops, be): pass them together, as any backend's. */
const struct jev_ops *jev_profile_ops(const struct jev_profile *p);
struct jev_backend *jev_profile_backend(struct jev_profile *p);

/* Calls counted so far in the slot named op as the report names it ("rmsnorm", "matmul (1-2 tokens)");
 * -1 for a name that is no slot. */
int64_t jev_profile_calls(const struct jev_profile *p, const char *op);

/* Prints the accumulated table to f, slowest op first, and resets it. */
void jev_profile_report(struct jev_profile *p, FILE *f);

#endif
