/*
 * profile.h - wall time per op of any op table (a developer's diagnostic).
 *
 * JEV_PROFILE=1 in the environment makes jev_engine_init wrap its op table
 * with jev_profile_wrap and jev_engine_free print the table (calls, ms,
 * share, GFLOP/s of the matrix products) to stderr, e.g.
 *     JEV_PROFILE=1 jev decide --model M --image I --threads 16 ...
 * The difference between a phase's time and the sum of its ops is the
 * serial glue of model/lm.c and model/vision.c.
 *
 * What it is not: a per-thread or per-kernel profiler (use perf for that),
 * or free: one clock read before and after every op. The accumulators are
 * process-wide: profile one engine at a time. A backend whose ops return
 * before the work is done (CUDA streams) must synchronise inside the wrapper
 * to be measured; the CPU backend's ops are synchronous.
 */
#ifndef JEV_BACKEND_PROFILE_H
#define JEV_BACKEND_PROFILE_H

#include <stdbool.h>
#include <stdio.h>

#include "backend/ops.h" // defines: struct jev_ops

/* True when JEV_PROFILE is set to anything but "" or "0". */
bool jev_profile_requested(void);
/* A table whose ops time themselves and then call inner's (the same for every call: one inner per process). */
const struct jev_ops *jev_profile_wrap(const struct jev_ops *inner);
/* True for the table jev_profile_wrap returns. */
bool jev_profile_is_wrapped(const struct jev_ops *ops);
/* Prints the accumulated table to f, slowest op first, and resets it. */
void jev_profile_report(FILE *f);

#endif
