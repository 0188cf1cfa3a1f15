/*
 * runner-int.h - what runner.c and runner-dump.c share: the loaded
 * benchmark (model, engine, decider, one request per decision count) and
 * the environment facts both the record and the peers' dump carry.
 * Not an API: only common/bench/runner*.c include it.
 */
#ifndef JEV_COMMON_BENCH_RUNNER_INT_H
#define JEV_COMMON_BENCH_RUNNER_INT_H

#include "base/sha256.h"         // defines: JEV_SHA256_HEX
#include "common/bench/runner.h" // defines: struct jev_bench_opts
#include "common/cli-setup.h"    // defines: struct cli_setup
#include "decide/pipeline.h"     // defines: struct jev_decider, struct jev_request

#define BR_MAX_WEIGHTS 64 /* weight files (shards) recorded */

struct br_weight {
    char file[256];              /* name inside the model directory */
    int64_t bytes;               /* file size */
    char sha256[JEV_SHA256_HEX]; /* of its bytes */
};

struct br_bench {
    struct jev_bench_opts o;   /* options, defaults filled */
    struct cli_setup setup;    /* the model, the one engine and its decider (they are its) */
    struct jev_model *model;   /* setup.model: loaded once */
    struct jev_engine *engine; /* setup.engine: sized for the largest request; NULL when dumping inputs */
    struct jev_decider *d;     /* setup.decider over engine; setup.planner when dumping inputs */
    struct jev_request *reqs;  /* (o.n_counts) the workload at each count */
    int32_t n_paths;           /* the paths measured (o.paths), in the record's order: */
    const char *paths[3];      /* their names (a subset of generate_json, independent, shared) */
    enum jev_decide_path path_ids[3];
    char image_path[4096];  /* the photo, resolved */
    int32_t image_max_side; /* the workload's bound (768) */
    /* environment */
    char git[41];                             /* HEAD commit, "" when unknown */
    int32_t n_weights;                        /* entries of weights */
    struct br_weight weights[BR_MAX_WEIGHTS]; /* one per weight file */
    char image_sha256[JEV_SHA256_HEX];        /* of the photo's bytes */
    int32_t image_w, image_h;                 /* original pixels */
    int32_t resized_w, resized_h;             /* after the bound and smart_resize */
    struct jev_vision_input vin;              /* the photo preprocessed (pixel values for the dump) */
    double vision_flops;                      /* one vision-tower forward on the photo (jev_vision_flops) */
};

/* Writes the peers' inputs (docs/bench-inputs.md) to b->o.dump_inputs, atomically. */
enum jev_status br_dump_inputs(struct br_bench *b, struct jev_error *err);

/* "hf" or "mlx4": the layout name docs/bench-inputs.md uses. */
const char *br_layout_name(const struct br_bench *b);

/* Tokens of the engine's forward slice (prefill_chunk): the engine's; when dumping inputs (no engine),
 * --step-tokens or the backend's default, as the engine would choose it. */
int32_t br_step_tokens(const struct br_bench *b);

#endif
