/*
 * schema.h - the benchmark's raw JSON record, "jev-bench/2": a builder that
 * the runner (`jev bench`, peers' harnesses in C) fills sample by sample, and
 * a loader + validator that checks any file against the schema.
 *
 * What it is: the one definition of what a raw benchmark record holds. The
 * field-by-field description lives in docs/bench-schema.md; this header
 * names the same fields. One record = one benchmark invocation on one
 * machine: environment, settings, one run per (decisions, path) with every
 * sample, and one agreement entry per decision count.
 *
 * What it is not: the runner (common/bench/ of another part) or the renderer
 * (common/bench/report.h). Nothing here times anything or runs a model.
 *
 * Constraints:
 * - Records are JSON trees of jansson (json_t). A loaded record is owned by
 *   the caller and freed with json_decref.
 * - Unset values are JSON null: in the builder's structs a NULL string, a
 *   negative integer (JEV_BENCH_NONE) or a NAN double mean "not recorded".
 * - Validation errors name the JSON path of the first offending value, as
 *   "$.runs[2].samples[0].total_ms: expected a number, got a string".
 * - Outside bytes are hostile: every size has a limit (below), every number
 *   is range-checked, so a validated record can be rendered without further
 *   checks.
 */
#ifndef JEV_COMMON_BENCH_SCHEMA_H
#define JEV_COMMON_BENCH_SCHEMA_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h" // defines: struct jev_error

/* ---- limits ---- */

#define JEV_BENCH_SCHEMA "jev-bench/2"               /* what the builder writes */
#define JEV_BENCH_SCHEMA_V1 "jev-bench/1"            /* still read: the records from before the precision modes */
#define JEV_BENCH_NONE (-1)                          /* "not recorded" for integer fields */
#define JEV_BENCH_MAX_FILE_BYTES (256u << 20)        /* a raw file larger than this is refused */
#define JEV_BENCH_MAX_COUNTS 64                      /* distinct decision counts per record */
#define JEV_BENCH_MAX_DECISIONS 65536                /* largest decision count */
#define JEV_BENCH_MAX_PATHS 16                       /* distinct paths per record */
#define JEV_BENCH_MAX_PATH_NAME 32                   /* characters of a path name */
#define JEV_BENCH_MAX_REPEATS 1000                   /* samples per run */
#define JEV_BENCH_MAX_OPTIONS 256                    /* candidates of one decision */
#define JEV_BENCH_MIN_MS 0.001                       /* total_ms lower bound (1 us) */
#define JEV_BENCH_MAX_MS 1e9                         /* any *_ms upper bound (11.6 days) */
#define JEV_BENCH_MAX_COUNT_VALUE 9007199254740992.0 /* 2^53: forwards, bytes */

/* The three paths of the protocol; a record may add its own path names. */
#define JEV_BENCH_PATH_GENERATE "generate_json"
#define JEV_BENCH_PATH_INDEPENDENT "independent"
#define JEV_BENCH_PATH_SHARED "shared"

/* ---- builder inputs ---- */

/* One weight file of the model directory. */
struct jev_bench_weight {
    const char *file;   /* name inside the model directory */
    int64_t bytes;      /* file size; JEV_BENCH_NONE: not recorded */
    const char *sha256; /* 64 lowercase hex digits; NULL: not recorded */
};

/* Where and with what the benchmark ran. NULL / JEV_BENCH_NONE: not recorded. */
struct jev_bench_env {
    const char *peer_name;                  /* NULL: jev's own record; else "transformers", ... */
    const char *peer_version;               /* the peer's version ("5.17.0") */
    const char *jev_version;                /* jev_version() of the build */
    const char *git_commit;                 /* the build's git commit */
    const char *model_id;                   /* e.g. "Qwen3.5-0.8B-4bit" or "synthetic-0.8B seed 1" */
    const char *model_dir;                  /* the directory loaded */
    int32_t model_synthetic;                /* 1 seeded random weights, 0 real, JEV_BENCH_NONE unknown */
    int32_t n_weights;                      /* entries of weights */
    const struct jev_bench_weight *weights; /* (n_weights) one per weight file */
    const char *image_path;                 /* the input photo */
    const char *image_sha256;               /* sha256 of its bytes */
    int32_t image_width;                    /* original pixels */
    int32_t image_height;                   /* original pixels */
    int32_t resized_width;                  /* after the 768 bound and smart_resize */
    int32_t resized_height;                 /* after the 768 bound and smart_resize */
    int32_t n_libraries;                    /* entries of library_names / library_versions */
    const char *const *library_names;       /* (n_libraries) "jansson", "openblas", ... */
    const char *const *library_versions;    /* (n_libraries) their versions */
    const char *compiler;                   /* "gcc 12.2.0" */
    const char *cpu_model;                  /* /proc/cpuinfo model name */
    int32_t cpu_cores;                      /* online logical cores */
    int32_t threads;                        /* worker threads used by the engine */
    const char *backend;                    /* required: "cpu", "cuda", "metal", "torch-cuda", ... */
    const char *gpu_name;                   /* NULL: no GPU used */
    const char *gpu_driver;                 /* driver version */
    int64_t gpu_memory_bytes;               /* device memory */
    const char *date;                       /* ISO 8601 UTC, "2025-06-01T12:00:00Z" */
    const char *machine;                    /* host name */
    const char *os;                         /* "Linux 6.1.0-18-amd64" */
};

/* Text storage for jev_bench_env_detect (the env points into it). */
struct jev_bench_host {
    char cpu_model[128];          /* /proc/cpuinfo "model name" */
    char gpu_driver[64];          /* /proc/driver/nvidia/version's kernel module version */
    char machine[128];            /* uname nodename */
    char os[192];                 /* uname sysname + release */
    char compiler[96];            /* compiler name and version */
    char date[32];                /* now, ISO 8601 UTC */
    char pcre2[32];               /* PCRE2 version text */
    char turbojpeg[16];           /* libjpeg-turbo version text */
    const char *lib_names[10];    /* (n_libs) library names: 7 linked ones, then room for the GPU's */
    const char *lib_versions[10]; /* (n_libs) library versions */
    int32_t n_libs;               /* filled entries of lib_names */
};

/* How the benchmark was asked to run. */
struct jev_bench_settings {
    int32_t n_counts;                    /* entries of counts */
    const int32_t *counts;               /* (n_counts) decision counts, strictly increasing */
    int32_t repeats;                     /* measured samples per (decisions, path) */
    int32_t warmup;                      /* warm-up runs per path, outside the samples */
    int32_t batch;                       /* shared-path suffix batch; 0 means "all" */
    int32_t n_paths;                     /* entries of paths */
    const char *const *paths;            /* (n_paths) path names in table order */
    const char *scoring;                 /* "label" (stable labels) or "multi_token" */
    int32_t image_max_side;              /* the resize bound (768) */
    int32_t prefill_chunk;               /* generate_json prefill chunk tokens; JEV_BENCH_NONE */
    int32_t max_new_tokens_min;          /* generate_json: max(min, per_decision * decisions) */
    int32_t max_new_tokens_per_decision; /* see max_new_tokens_min */
    const char *order;                   /* "rotated" (path order rotates per repeat) or "fixed" */
    const char *workload;                /* the workload file, e.g. "bench/dog-workload.json" */
    const char *precision;               /* jev's mode, "exact" or "fast" (jev_precision_name); NULL: null (peers) */
};

/* One decision's result in a sample: candidates and their distribution. */
struct jev_bench_decision {
    const char *id;             /* decision id, "q00" */
    const char *choice;         /* chosen option id; NULL: none (failed output) */
    int32_t n_options;          /* entries of options */
    const char *const *options; /* (n_options) option ids */
    const double *probs;        /* (n_options) normalized probabilities; NULL for generated answers */
};

/* One measured request. The builder derives requested/valid decisions/s. */
struct jev_bench_sample {
    int32_t repeat;                             /* 0 .. repeats-1 */
    int32_t order;                              /* position of this path in this repeat's rotation; JEV_BENCH_NONE */
    double total_ms;                            /* the whole request */
    double vision_ms;                           /* encoder + image-embedding placement; NAN: not measured */
    double prefill_ms;                          /* language context work; NAN: not measured */
    double scoring_ms;                          /* suffixes + head + normalization, or decode forwards */
    int64_t lm_forwards;                        /* language-model forwards actually run */
    int64_t vision_forwards;                    /* vision forwards actually run */
    int64_t peak_bytes;                         /* peak live bytes of peak_where */
    const char *peak_where;                     /* "cpu" engine allocations, "cuda" device memory, "metal" */
    bool valid;                                 /* output met the declared schema (scoring paths: true) */
    const char *output;                         /* generate_json raw generated text; NULL for other paths */
    int32_t n_decisions;                        /* entries of decisions (the run's decision count) */
    const struct jev_bench_decision *decisions; /* (n_decisions); NULL: not recorded */
};

/* A fast record's samples of one (count, path) against one exact-mode run of the same request. NAN = null. */
struct jev_bench_vs_exact {
    double max_prob_delta;   /* max |p_fast - p_exact| over the samples, decisions and candidates */
    double argmax_agreement; /* fraction of (sample, decision) pairs whose answer equals exact's, 0..1 */
};

/* Per decision count: direct (independent) vs shared, generated vs shared, and (a fast record) fast vs
 * exact per path. NAN = null. */
struct jev_bench_agreement {
    int32_t decisions;          /* the decision count */
    double max_prob_delta;      /* max |p_independent - p_shared| over all candidates */
    double argmax_agreement;    /* fraction of decisions with equal argmax, 0..1 */
    double generated_agreement; /* fraction of generated answers equal to shared argmax; NAN when generation failed */
    bool has_vs_exact;          /* false: fast_vs_exact is null (an exact record, a peer) */
    struct jev_bench_vs_exact vs_exact[JEV_BENCH_MAX_PATHS]; /* per path, in the settings' path order */
};

struct jev_bench_record; /* opaque: a record under construction */

/* ---- builder ---- */

/* Fills every NULL / JEV_BENCH_NONE field of env that this host can tell
 * (CPU model and cores, machine, OS, compiler, date, jev version, linked
 * library versions), pointing into *host, which must outlive env's use. */
void jev_bench_env_detect(struct jev_bench_env *env, struct jev_bench_host *host);

/* The NVIDIA kernel module's version in the text of /proc/driver/nvidia/version ("NVRM version:
 * NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build ..."): the first word after
 * "Kernel Module" made of digits and dots, with a dot. "" when there is none. */
void jev_bench_nvidia_driver(const char *text, char *out, size_t size);

/* A struct jev_bench_sample with every optional field "not recorded". */
struct jev_bench_sample jev_bench_sample_default(void);

/* Starts a record; copies everything it needs from env and settings.
 * Fails with JEV_ERR_INVALID_ARG naming the field that is out of range. */
enum jev_status jev_bench_record_init(struct jev_bench_record **out, const struct jev_bench_env *env,
                                      const struct jev_bench_settings *settings, struct jev_error *err);
void jev_bench_record_free(struct jev_bench_record *rec);

/* Adds one sample to the run (decisions, path), creating the run on first
 * use. The count and path must be in the settings; a repeat may appear once. */
enum jev_status jev_bench_record_add_sample(struct jev_bench_record *rec, int32_t decisions, const char *path,
                                            const struct jev_bench_sample *s, struct jev_error *err);

/* Sets the agreement of one decision count (replacing an earlier one). */
enum jev_status jev_bench_record_add_agreement(struct jev_bench_record *rec, const struct jev_bench_agreement *a,
                                               struct jev_error *err);

/* Computes the agreement of one decision count from the samples already
 * added: max probability delta and argmax agreement between the independent
 * and shared samples of equal repeat; generated agreement as the mean, over
 * valid generate_json samples, of the fraction of their choices equal to the
 * shared argmax of the same repeat (NAN when no generated sample is valid).
 * has_vs_exact is left false (jev_bench_vs_exact_compute fills that part). */
enum jev_status jev_bench_agreement_compute(const struct jev_bench_record *rec, int32_t decisions,
                                            struct jev_bench_agreement *out, struct jev_error *err);

/* Fast against exact at one (count, path): every sample of that run against ref[0..n_ref), the
 * decisions of one run of the same request in exact mode (outside the samples; exact is
 * deterministic, so one run stands for all). max_prob_delta: the largest |p_fast - p_exact| over
 * the samples, decisions and candidates that both have probabilities (NAN when none has:
 * generate_json); argmax_agreement: the fraction of (sample, decision) pairs whose answer (the
 * argmax, else the choice) equals exact's, a missing answer on either side counting as a
 * disagreement (NAN when there is no sample). Decisions are paired by position, and their ids and
 * candidate counts must match (JEV_ERR_INVALID_ARG otherwise). */
enum jev_status jev_bench_vs_exact_compute(const struct jev_bench_record *rec, int32_t decisions, const char *path,
                                           const struct jev_bench_decision *ref, int32_t n_ref,
                                           struct jev_bench_vs_exact *out, struct jev_error *err);

/* Sets the record's free-text note ("" or NULL clears it). */
enum jev_status jev_bench_record_set_note(struct jev_bench_record *rec, const char *note, struct jev_error *err);

/* The JSON tree (borrowed: owned by rec, valid until the next call on rec). */
json_t *jev_bench_record_json(struct jev_bench_record *rec);

/* Validates the record and writes it to path atomically (a temporary file
 * in the same folder, fsync, rename); creates missing parent folders. An
 * invalid record is not written: JEV_ERR_INVALID_ARG with the JSON path. */
enum jev_status jev_bench_record_write(struct jev_bench_record *rec, const char *path, struct jev_error *err);

/* ---- loader and validator ---- */

/* Checks a JSON tree against "jev-bench/2" (or "jev-bench/1", which has neither settings.precision
 * nor agreement[].fast_vs_exact). JEV_ERR_FORMAT with the path. */
enum jev_status jev_bench_validate(const json_t *root, struct jev_error *err);

/* Parses (duplicate keys refused) and validates. *out is the caller's. */
enum jev_status jev_bench_load_buffer(const char *data, size_t n, json_t **out, struct jev_error *err);
enum jev_status jev_bench_load_file(const char *path, json_t **out, struct jev_error *err);

/* ---- files ---- */

/* Writes n bytes to path atomically (see jev_bench_record_write). */
enum jev_status jev_bench_file_write(const char *path, const void *data, size_t n, struct jev_error *err);

#endif
