/*
 * jev.h - the one public header of jev: typed decisions about an image and a
 * context with a local vision-language model (Qwen3.5), in C.
 *
 * Usage:
 *
 *     struct jev_model_params mp = jev_model_default_params();
 *     struct jev_model *model = NULL;
 *     char err[512];
 *     if (jev_model_load("path/to/Qwen3.5-0.8B-4bit", &mp, &model, err, sizeof err) != JEV_OK) {
 *         fprintf(stderr, "jev: %s\n", err);
 *         return 1;
 *     }
 *     struct jev_engine_params ep = jev_engine_default_params();
 *     struct jev_engine *engine = NULL;
 *     jev_engine_init(model, &ep, &engine);
 *     ...
 *     jev_engine_free(engine);
 *     jev_model_free(model);
 *
 * Contracts:
 * - A jev_model is immutable after load and may be shared by any number of
 *   engines on any threads. A jev_engine is one worker: use it from one thread
 *   at a time.
 * - Every function that can fail returns an enum jev_status. The detail text
 *   of the last failure on an engine is jev_engine_last_error(); it is owned by
 *   the engine and valid until the next call on that engine.
 * - The library never exits the process and never prints unless asked to.
 *
 * Status codes are stable: numbers are never changed, a dropped code keeps
 * its slot.
 */
#ifndef JEV_H
#define JEV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define JEV_API __declspec(dllexport)
#else
#define JEV_API __attribute__((visibility("default")))
#endif

#define JEV_VERSION_MAJOR 0
#define JEV_VERSION_MINOR 1
#define JEV_VERSION_PATCH 0
#define JEV_VERSION_NUM ((JEV_VERSION_MAJOR << 16) | (JEV_VERSION_MINOR << 8) | JEV_VERSION_PATCH)

#define JEV_DEPRECATED(fn, hint) fn __attribute__((deprecated(hint)))

/* A token id of the model's vocabulary. */
typedef int32_t jev_token;

/* Numbered status codes. */
enum jev_status {
    JEV_OK = 0,
    JEV_ERR_IO = 1,           /* a file could not be opened, read or written */
    JEV_ERR_FORMAT = 2,       /* bytes from outside are malformed (file, JSON, image) */
    JEV_ERR_NOMEM = 3,        /* an allocation failed or a size limit was hit */
    JEV_ERR_INVALID_ARG = 4,  /* a caller's argument or request is invalid */
    JEV_ERR_CUDA = 5,         /* the CUDA runtime or cuBLAS failed */
    JEV_ERR_CONTEXT_FULL = 6, /* a sequence or batch does not fit the engine's sizes */
    JEV_ERR_ABORTED = 7,      /* the caller asked to stop */
    JEV_ERR_UNSUPPORTED = 8,  /* a valid input this build cannot handle (backend, dtype) */
    JEV_ERR_DEVICE_LOST = 9,  /* the device failed for good (a GPU fault): recreate the engine */
};

/* A static English name of a status ("ok", "i/o error", ...). */
JEV_API const char *jev_status_str(enum jev_status s);

/* "MAJOR.MINOR.PATCH"; static. */
JEV_API const char *jev_version(void);

/* ---- model ---- */

struct jev_model;
struct jev_engine;

struct jev_model_params {
    int32_t n_threads;   /* CPU worker threads; 0 = all online cores */
    const char *backend; /* "cpu" or "cuda"; NULL = "cpu" */
    bool no_vision;      /* do not load the vision tower (text-only use) */
};

JEV_API struct jev_model_params jev_model_default_params(void);

/*
 * Loads a model directory (config.json, model.safetensors or shards,
 * tokenizer.json, ...) in the official Hugging Face bf16 layout or the MLX
 * 4-bit layout. On failure *out is NULL and err (the caller's buffer, may be
 * NULL) holds a message naming the file, tensor or field. Free the model with
 * jev_model_free after every engine that uses it is freed.
 */
JEV_API enum jev_status jev_model_load(const char *dir, const struct jev_model_params *params, struct jev_model **out,
                                       char *err, size_t err_size);
JEV_API void jev_model_free(struct jev_model *model);

/* ---- engine ---- */

/* How an engine does its arithmetic. */
enum jev_precision {
    /* f32 math everywhere (the default): every op's result within 1e-5 of transformers in f32 */
    JEV_PRECISION_EXACT = 0,
    /* bf16 matrix products with f32 accumulation (tensor cores on CUDA; AVX512-BF16, and AMX tiles
     * where there, on the CPU); the DeltaNet state, norms, softmax, scoring and the few-token products
     * of decode steps stay f32. Its cost in accuracy is measured by `jev bench --precision fast`.
     * The CUDA backend has it; the CPU backend has it where the CPU has AVX512-BF16 and refuses it
     * elsewhere with JEV_ERR_UNSUPPORTED. */
    JEV_PRECISION_FAST = 1,
};

/* "exact", "fast"; "unknown" for a value outside the enum. Static. */
JEV_API const char *jev_precision_name(enum jev_precision p);

struct jev_engine_params {
    int32_t max_tokens;           /* longest sequence the engine holds; 0 = 8192 */
    int32_t max_batch;            /* most sequences in one batched forward; 0 = 64 */
    int32_t prefill_chunk;        /* tokens per forward slice (a longer prompt or batch runs in several); 0 =
                                     the backend's: 512 on the CPU, 1024 on CUDA */
    enum jev_precision precision; /* JEV_PRECISION_EXACT (0, the default) or JEV_PRECISION_FAST */
    int32_t max_states;           /* sequences with a DeltaNet state of their own alive at once: prefixes (kept
                                     ones too), independent and generating sequences, forks of candidate texts.
                                     A label-scoring fork reads its prefix's and needs none. Each costs
                                     ~20 MB for the 0.8B model (device memory on CUDA); 0 = max_batch + 1 */
    int32_t kv_tokens;            /* K/V room over all sequences alive at once, in tokens (a prefix and its
                                     forks' suffixes; kept prefixes); 24 KiB a token for the 0.8B model, device
                                     memory on CUDA, allocated at init; 0 = 2 * max_tokens */
};

JEV_API struct jev_engine_params jev_engine_default_params(void);
/* A precision the model's backend has no kernels for (fast on a CPU without AVX512-BF16) is
 * JEV_ERR_UNSUPPORTED, and jev_engine_last_error names what is missing and what to use instead; a
 * value outside the enum is JEV_ERR_INVALID_ARG. A mode is never silently replaced by another. */
JEV_API enum jev_status jev_engine_init(struct jev_model *model, const struct jev_engine_params *params,
                                        struct jev_engine **out);
JEV_API void jev_engine_free(struct jev_engine *engine);

/* The detail text of the last failure on this engine; valid until the next call on it.
 * When jev_engine_init fails, *out is still set (unless the engine itself could not be
 * allocated) so that this can say why; free it with jev_engine_free. */
JEV_API const char *jev_engine_last_error(const struct jev_engine *engine);

/* ---- decisions ---- */

/* A decider answers decision requests on one engine (one thread at a time). It holds the
 * tokenizer, the checked label sets and the vision tower's buffers. */
struct jev_decider;

enum jev_request_format {
    JEV_REQUEST_SYSTEMONE = 0, /* the body of POST /v1/systemone */
    JEV_REQUEST_OPENAI = 1,    /* the body of POST /v1/decisions (OpenAI shape) */
};

/* Builds a decider over model and an engine made from it (neither is owned; both must
 * outlive it). On failure *out is NULL and jev_engine_last_error(engine) says why; a NULL model
 * or engine is JEV_ERR_INVALID_ARG. */
JEV_API enum jev_status jev_decider_open(struct jev_model *model, struct jev_engine *engine, struct jev_decider **out);
JEV_API void jev_decider_close(struct jev_decider *decider);

/* A time limit for each jev_decide_json call on this decider: a request still running after
 * timeout_ms stops before its next model forward and answers HTTP 504 with error type
 * "timeout" (nothing else changes; the decider stays usable). 0 (the default) = no limit. */
JEV_API void jev_decider_set_timeout(struct jev_decider *decider, double timeout_ms);

/* Whether jev_decide_json keeps requests' shared prefixes (the image and the state, run once:
 * their attention K/V and DeltaNet state; the four most recent) for later requests. On by
 * default: a request whose prefix and image bytes equal a kept one's forks from the kept state
 * and skips the image decode, the vision tower and the prefill (the answers are bit-identical;
 * usage counts the prefix either way). Kept prefixes hold sequence slots and K/V pages; a request
 * that needs them gets them back first. Off frees them. */
JEV_API void jev_decider_set_prefix_reuse(struct jev_decider *decider, bool on);

/* JEV_OK while the decider can answer; JEV_ERR_DEVICE_LOST once its device failed for good
 * (a GPU fault that poisons the context), with the failure in message (size bytes, may be
 * NULL). Every later request then answers 503 "unavailable_error" without touching the device;
 * a server reports itself unhealthy so that a load balancer sends the traffic elsewhere.
 * Safe to call from another thread while a request runs. */
JEV_API enum jev_status jev_decider_status(const struct jev_decider *decider, char *message, size_t size);

/*
 * Answers one request body (JSON, `len` bytes) on the shared path with label scoring:
 * validates it, runs the image and the state once, forks per question and assembles the
 * typed answers. *response (malloc'd; free with jev_free) is the response body on success
 * and the error body ({"error": {"message", "type", "code"}}) otherwise; *http_status (may
 * be NULL) is the status an HTTP server should send (200, 400, 413, 422, 500, 501, 503 when
 * the device is lost, 504 past the time limit).
 */
JEV_API enum jev_status jev_decide_json(struct jev_decider *decider, const char *body, size_t len,
                                        enum jev_request_format format, char **response, int32_t *http_status);

/* Frees memory the library returned to the caller. */
JEV_API void jev_free(void *p);

#ifdef __cplusplus
}
#endif

#endif /* JEV_H */
