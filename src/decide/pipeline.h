/*
 * pipeline.h - the decision pipeline: a validated request (+ its image)
 * through the model, by one of three paths, to typed answers.
 *
 *   shared         one image decode + vision forward, one prefill of the
 *                  shared prefix (chat frame, image pads carrying the vision
 *                  embeddings, rendered state); then per batch of N
 *                  questions: fork the prefix sequence per question (K/V
 *                  shared read-only, linear state copied), one forward over
 *                  all the batch's suffixes, candidate logits only.
 *   independent    per question: decode, preprocess, vision forward and one
 *                  full forward of prefix + suffix. Nothing is shared.
 *   generate       one prompt with every question and its option ids,
 *                  prefill in chunks, greedy decode to EOS or the budget
 *                  max(128, 24 x questions), strict schema check (genjson.h);
 *                  the raw output is kept, valid or not.
 * Scoring (shared and independent):
 *   label          each option has a stable one-token label (labels.h); the
 *                  logits of the label rows at the answer position (the LM
 *                  head over those rows only), softmax over options.
 *   text           each option's complete text is a continuation after the
 *                  cue; options are merged in a trie (trie.h) so shared
 *                  leading tokens run once; log p of every candidate token
 *                  is the FULL-vocabulary log-softmax at its position, so
 *                  the head runs over the full vocabulary at the trie's
 *                  query positions only (docs/pipeline.md says how);
 *                  candidate score = sum (default) or mean of its token
 *                  log-probabilities, softmax over options.
 *
 * Both scoring paths use the SAME token ids for a question: the prefix and
 * the question suffix are rendered and tokenized separately and
 * concatenated, so shared and independent differ only in how the forward
 * is cut, which is what the exactness tests check.
 *
 * Counters (per request, struct jev_decide_stats): LM and vision forwards
 * counted where they run; the phases of spec/benchmark.md; peak live engine
 * bytes (activation arenas, K/V pages and linear states in use, the
 * request's scratch).
 *
 * What it is not: request parsing (wire/request.h), prompt text
 * (prompt-render.h), the answer arithmetic (answer.h), HTTP. One decider per
 * engine; use it from one thread at a time, like the engine.
 */
#ifndef JEV_DECIDE_PIPELINE_H
#define JEV_DECIDE_PIPELINE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"              // defines: struct jev_error
#include "decide/answer.h"           // defines: struct jev_answers, struct jev_usage
#include "decide/genjson.h"          // defines: struct jev_genjson_result
#include "decide/request.h"          // defines: struct jev_request
#include "decide/trie.h"             // defines: enum jev_trie_norm
#include "model/engine.h"            // defines: struct jev_engine
#include "model/model.h"             // defines: struct jev_model
#include "model/vision-preprocess.h" // defines: struct jev_vision_input

struct jev_decider;

enum jev_decide_path {
    JEV_DECIDE_SHARED = 0,      /* one prefix prefill, forked suffixes in batches */
    JEV_DECIDE_INDEPENDENT = 1, /* one full multimodal forward per question */
    JEV_DECIDE_GENERATE = 2,    /* generate_json: greedy JSON generation */
};

enum jev_decide_scoring {
    JEV_SCORING_LABEL = 0, /* stable single-token labels */
    JEV_SCORING_TEXT = 1,  /* complete option texts through the candidate trie */
};

/* Decider-wide settings, fixed at init (they size the vision buffers). */
struct jev_decider_params {
    int32_t image_max_side; /* resize within this square before smart_resize; 0 = 768; < 0 = no bound */
    const char *tokenizer;  /* a tokenizer.json to use instead of the model's (loaded and owned by the
                             * decider); NULL = the model's own (MODEL_DIR/tokenizer.json, shared) */
};

/* Per-request settings. Zero-initialised = the defaults except batch (use
 * jev_decide_default_params). */
struct jev_decide_params {
    enum jev_decide_path path;       /* which path */
    enum jev_decide_scoring scoring; /* label or text (scoring paths) */
    enum jev_trie_norm norm;         /* text mode: sum (default) or mean of token log-probs */
    int32_t batch;                   /* shared: suffixes per forward; 0 = all questions at once */
    int32_t prefill_chunk;           /* generate: prompt tokens per forward; 0 = the engine's slice */
    int32_t max_new_tokens;          /* generate: budget; 0 = max(128, 24 x questions) */
    double timeout_ms;               /* > 0: a request still running this long after it began stops before
                                      * its next forward with JEV_ERR_ABORTED (HTTP 504, "timeout");
                                      * 0 = no limit */
    bool reuse_prefix;               /* shared path: keep this request's prefix (image + state, its K/V and
                                      * linear state) in the decider (the 4 most recent: kept.c), and fork
                                      * from a kept one when a later request's prefix and image bytes are the
                                      * same: no image decode, no vision, no prefill. Answers are bit-identical
                                      * either way. Off by default (the benchmark measures every prefill);
                                      * jev_decide_json turns it on (jev_decider_set_prefix_reuse) */
};

/* What one request cost. Times in ms (monotonic clock). */
struct jev_decide_stats {
    double total_ms;         /* the whole call: image decode .. answers */
    double image_ms;         /* image decode + preprocessing (part of total only) */
    double vision_ms;        /* vision encoder forwards + placing the embeddings */
    double prefill_ms;       /* shared: the prefix; independent: every full prompt; generate: prompt chunks */
    double scoring_ms;       /* suffix / trie forwards + head + normalisation; generate: the decode forwards */
    int64_t lm_forwards;     /* language-model forwards run (jev_lm_forward calls) */
    int64_t vision_forwards; /* vision-tower forwards run */
    int64_t lm_tokens;       /* tokens through the language model */
    int64_t lm_logit_rows;   /* positions at which the LM head ran */
    int32_t prefix_tokens;   /* tokens of the shared prefix (image pads included) */
    int32_t image_tokens;    /* image-pad tokens of one image (0 without an image) */
    int32_t prompt_tokens;   /* generate: the whole prompt; else the longest question prompt */
    int32_t output_tokens;   /* generate: new tokens produced (EOS not counted) */
    int32_t forks;           /* sequence forks made */
    int64_t peak_bytes;      /* peak live bytes of the engine during the call */
    const char *peak_where;  /* where those bytes live: "cpu", or the device backend's name ("cuda") */
    int32_t peak_seqs;       /* most sequences alive at once */
    int32_t image_width;     /* original pixels (0 without an image) */
    int32_t image_height;    /* original pixels */
    int32_t resized_width;   /* after the bound and smart_resize */
    int32_t resized_height;  /* after the bound and smart_resize */
    bool prefix_reused;      /* the shared prefix was the decider's kept one (reuse_prefix) */
};

/* The outcome of one request. Free with jev_decide_result_free. */
struct jev_decide_result {
    struct jev_answers answers;    /* one per question; generate: one-hot from a valid output, else empty (n 0) */
    bool valid;                    /* scoring paths: true; generate: the output met the schema */
    bool generated;                /* the generate path ran: gen below is set */
    struct jev_genjson_result gen; /* generate: raw output, per-decision choice, validity and reason */
    int32_t *gen_ids;              /* generate: (n_gen_ids) the new token ids, EOS excluded (owned) */
    int32_t n_gen_ids;             /* generate: entries of gen_ids */
    struct jev_usage usage;        /* input tokens evaluated (shared prefix once), output tokens */
    struct jev_decide_stats stats; /* counters and phases */
};

/* Defaults of both param structs. */
struct jev_decider_params jev_decider_default_params(void);
struct jev_decide_params jev_decide_default_params(void);

/*
 * Builds a decider over a loaded model and an engine made from it (neither
 * is owned; both must outlive the decider): borrows the model's tokenizer,
 * builds and checks the label sets, reads preprocessor_config.json (Qwen3.5
 * defaults when absent) and sizes the vision tower for image_max_side.
 */
enum jev_status jev_decider_init(struct jev_model *model, struct jev_engine *engine,
                                 const struct jev_decider_params *params, struct jev_decider **out,
                                 struct jev_error *err);

/*
 * A planner: a decider without an engine, for sizing one before it exists.
 * The same tokenizer, labels, prompt frame and image settings as
 * jev_decider_init with these params, so jev_decide_plan and jev_decide_dump
 * give what a decider over an engine would; jev_decide_run refuses
 * (JEV_ERR_INVALID_ARG). Nothing is allocated for the vision tower.
 */
enum jev_status jev_decider_planner(struct jev_model *model, const struct jev_decider_params *params,
                                    struct jev_decider **out, struct jev_error *err);
void jev_decider_free(struct jev_decider *d);

/* The tokenizer the decider uses: the model's, or its params' override (owned by the decider). */
const struct jev_tokenizer *jev_decider_tokenizer(const struct jev_decider *d);

/*
 * Engine sizes that a request needs with these params, to build a suitable
 * engine before the call, into need's max_batch (sequences alive at once,
 * trie forks included, minus one), max_states (those of them with a DeltaNet
 * state of their own: all but label scoring's light forks), max_tokens
 * (longest sequence) and kv_tokens (K/V pages alive at once, in tokens; the
 * state pool adds a page of slack per slot); the other fields are left as
 * they were. p->prefill_chunk should name the engine's slice (a planner
 * takes 0 as the CPU's 512): a suffix longer than it needs a state. Tokenizes the
 * prompts and decodes the image for its size (no forwards). Only d's
 * tokenizer, labels and image settings are used: d is normally a planner
 * (jev_decider_planner), made before the engine it sizes.
 */
enum jev_status jev_decide_plan(struct jev_decider *d, const struct jev_request *r, const struct jev_decide_params *p,
                                struct jev_engine_params *need, struct jev_error *err);

/*
 * Runs one request. On success *out holds the answers and the counters; on
 * failure *out is zeroed and err names what failed (an image that does not
 * decode, a prompt longer than the engine, a label set too small). The
 * engine's sequences are all released again either way.
 */
enum jev_status jev_decide_run(struct jev_decider *d, const struct jev_request *r, const struct jev_decide_params *p,
                               struct jev_decide_result *out, struct jev_error *err);
void jev_decide_result_free(struct jev_decide_result *res);

/* What the layers above read of a decider: whether images can be answered, the model, the engine
 * it drives, and the per-request params that jev_decider_set_timeout / _set_prefix_reuse set. */
bool jev_decider_has_vision(const struct jev_decider *d);
const struct jev_model *jev_decider_model(const struct jev_decider *d);
struct jev_engine *jev_decider_engine(const struct jev_decider *d);
struct jev_decide_params jev_decider_request_params(const struct jev_decider *d);

/*
 * The inputs of a request as the scoring paths build them, for reference
 * scripts (scripts/reference/decision_goldens.py) and peers: the prefix ids,
 * per question the label-mode and text-mode suffix ids, label ids per
 * option, candidate token ids per option, and the image's pixel values
 * (f32 little-endian, base64) with its grid. *out is a new JSON object
 * (caller json_decref's it). Runs no forward.
 */
enum jev_status jev_decide_dump(struct jev_decider *d, const struct jev_request *r, const struct jev_decide_params *p,
                                json_t **out, struct jev_error *err);

/*
 * The request's image as the pipeline preprocesses it (decode, the
 * decider's bound, smart_resize, normalise, patches): for dumps and peers.
 * Free with jev_vision_input_free.
 */
enum jev_status jev_decide_image_input(struct jev_decider *d, const struct jev_request *r, struct jev_vision_input *out,
                                       struct jev_error *err);

/* The M-RoPE delta of a prompt (max position + 1 - length) whose image pads are one run of grid (gh, gw). */
enum jev_status jev_decide_rope_delta(const struct jev_decider *d, const int32_t *ids, int32_t n, int32_t grid_h,
                                      int32_t grid_w, int32_t *delta, struct jev_error *err);

const char *jev_decide_path_name(enum jev_decide_path p);       /* "shared", "independent", "generate_json" */
const char *jev_decide_scoring_name(enum jev_decide_scoring s); /* "label", "text" */

#endif
