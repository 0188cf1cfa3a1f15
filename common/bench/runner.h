/*
 * runner.h - the benchmark runner behind `jev bench` (spec/benchmark.md):
 * the workload of bench/dog-workload.json at each decision count, the three
 * paths (generate_json, independent, shared) with label scoring, one warm-up
 * per path on one decision, `repeats` measured samples per (count, path)
 * with the path order rotated across repetitions, and the raw record in the
 * jev-bench/2 schema (common/bench/schema.h) with every sample, phases, forward
 * counts, peak engine memory, candidate distributions, the generated raw
 * outputs, the agreement per count and the environment.
 *
 * Measured (inside total_ms): everything jev_decide_run does - image
 * loading and decoding, preprocessing, prompt assembly and tokenization,
 * every forward, answer assembly. Outside: model loading, engine set-up,
 * warm-up, parsing the workload file, writing the record.
 *
 * It also writes the peers' inputs (docs/bench-inputs.md) instead of
 * running anything (dump_inputs).
 *
 * What it is not: the CLI (tools/cmd-bench.c parses options and prints) or
 * the renderer (report.h). It prints nothing: progress goes through a
 * callback.
 */
#ifndef JEV_COMMON_BENCH_RUNNER_H
#define JEV_COMMON_BENCH_RUNNER_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"          // defines: struct jev_error
#include "common/bench/schema.h" // defines: JEV_BENCH_MAX_COUNTS

/* Progress: `done` of `total` measured runs finished; line says which run comes next. */
typedef void (*jev_bench_progress_fn)(void *user, int32_t done, int32_t total, const char *line);

struct jev_bench_opts {
    const char *model_dir;                /* the model directory (required) */
    const char *model_id;                 /* how the record names the model; NULL = the directory's name */
    int32_t model_synthetic;              /* 1 seeded random weights, 0 real, JEV_BENCH_NONE unknown */
    const char *workload;                 /* the workload file; NULL = bench/dog-workload.json */
    int32_t n_counts;                     /* entries of counts */
    int32_t counts[JEV_BENCH_MAX_COUNTS]; /* decision counts, strictly increasing */
    int32_t repeats;                      /* measured samples per (count, path); 0 = 3 */
    int32_t batch;                        /* shared-path suffix batch; 0 = all */
    int32_t step_tokens;                  /* the engine's forward slice (prefill_chunk); 0 = the backend's */
    unsigned paths;                       /* JEV_BENCH_ONLY_* bits: the paths measured; 0 = all three */
    int32_t threads;                      /* worker threads; 0 = all cores */
    const char *backend;                  /* "cpu" (NULL = cpu), "cuda", "cuda:N" (backend/registry.h) */
    enum jev_precision precision;         /* the measured mode; fast also runs exact references */
    bool verbose;                         /* the engine's sizes and the engines made, on stderr */
    const char *output;                   /* the record; NULL = artifacts/benchmark.json */
    const char *dump_inputs;              /* a folder: write the peers' inputs there and run nothing */
    const char *git_commit;               /* NULL: read from .git of the working directory */
    jev_bench_progress_fn progress;       /* NULL: silent */
    void *progress_user;                  /* passed to progress */
};

/* jev_bench_opts.paths: measure only these paths (A/B runs of one path; the engine is then sized for
 * them alone, so its peak memory is not the full benchmark's). */
#define JEV_BENCH_ONLY_GENERATE 1u
#define JEV_BENCH_ONLY_INDEPENDENT 2u
#define JEV_BENCH_ONLY_SHARED 4u

/* Defaults: counts 1 4 16 64, repeats 3, batch 4, cpu, the default workload and output. */
struct jev_bench_opts jev_bench_default_opts(void);

/* What a run produced, for the CLI's summary. */
struct jev_bench_outcome {
    int32_t n_samples; /* measured samples written */
    double seconds;    /* wall time of the measured part */
    bool dumped;       /* dump_inputs was written instead of a record */
};

/* Runs the benchmark (or writes the dump); the record is validated and written atomically. */
enum jev_status jev_bench_run(const struct jev_bench_opts *o, struct jev_bench_outcome *out, struct jev_error *err);

/* The commit HEAD names in the repository around `dir` (".git" file or folder, refs, packed-refs), as
 * 40 hex digits into out[41]; false when there is none. */
bool jev_bench_git_commit(const char *dir, char out[41]);

#endif
