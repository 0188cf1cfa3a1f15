/*
 * pipeline-int.h - what the pipeline's files share: the decider struct, the
 * per-request context (tokens, image, scratch buffers, live sequences) and
 * the helpers the three paths are written with.
 *
 * Not part of any API: only src/decide/pipeline*.c, score.c and path-*.c
 * include it.
 *
 * Memory of one request: tokens, label ids and tries are built first (plain
 * allocations, outside any forward loop); then every buffer the forwards
 * need (ids, positions, embedding-row pointers, runs, logits) is sized from
 * them and taken from one arena, so no forward loop allocates.
 */
#ifndef JEV_DECIDE_PIPELINE_INT_H
#define JEV_DECIDE_PIPELINE_INT_H

#include <stdatomic.h>

#include "base/arena.h"              // defines: struct jev_arena
#include "base/sha256.h"             // defines: JEV_SHA256_HEX
#include "decide/labels.h"           // defines: struct jev_labels
#include "decide/pipeline.h"         // defines: struct jev_decider, struct jev_decide_params
#include "decide/prompt-render.h"    // defines: struct jev_prompt_frame
#include "io/image.h"                // defines: struct jev_image
#include "model/vision-preprocess.h" // defines: struct jev_preprocess_config, struct jev_vision_input
#include "model/vision.h"            // defines: struct jev_vision
#include "text/tokenizer.h"          // defines: struct jev_tokenizer, struct jev_tokens

/* Rows of full-vocabulary logits one text-mode forward may ask for (the
 * logits buffer holds this many rows of vocab_size floats; a trie round with
 * more query rows runs in several forwards). */
#define DC_TEXT_ROWS_MAX 64

/* Bytes of one trie-round task (score.c's struct dc_task, rounded up). */
#define DC_TASK_BYTES 32

/* Shared prefixes and image embeddings the decider keeps between requests (decide params
 * reuse_prefix; kept.c): the DC_KEPT_MAX most recently used of each. */
#define DC_KEPT_MAX 4

/* A kept prefix: its sequence (in no request's live table) and the digest of what determines it. */
struct dc_kept {
    struct jev_seq *seq;      /* NULL: a free entry */
    char key[JEV_SHA256_HEX]; /* sha256 of the prefix ids and the image digest */
    uint64_t used;            /* the decider's clock when it was last used (least recent goes first) */
};

/* A kept image's tower output: a request with the same image bytes and another state skips the
 * decode and the tower (its prefill still runs). Host memory. */
struct dc_kept_image {
    char key[JEV_SHA256_HEX];          /* sha256 of the image file's bytes */
    struct jev_vision_size size;       /* its grid after the decider's bound */
    int32_t image_width, image_height; /* its original pixels */
    float *embd;                       /* [size.n_tokens][hidden] the image-token embeddings (malloc); NULL: free */
    uint64_t used;                     /* as dc_kept.used */
};

struct jev_decider {
    struct jev_model *model;          /* shared, immutable (not owned) */
    struct jev_engine *engine;        /* the worker it drives (not owned); NULL: a planner (plans, runs nothing) */
    const struct jev_tokenizer *tok;  /* the model's (borrowed), or own_tok */
    struct jev_tokenizer *own_tok;    /* owned: jev_decider_params.tokenizer's; NULL for the model's */
    struct jev_labels labels;         /* label sets checked against tok after the frame's cue */
    struct jev_prompt_frame frame;    /* Qwen3.5's non-thinking chat frame */
    struct jev_preprocess_config pre; /* preprocessor_config.json (or Qwen3.5's values) */
    bool has_vision;                  /* the model has a vision tower and vision is set up (a planner: checked,
                                       * no runtime) */
    struct jev_vision vision;         /* the tower's runtime, sized for max_patches */
    int32_t image_max_side;           /* the resize bound; <= 0: none */
    int32_t max_patches;              /* vision capacity (patches of one image) */
    int64_t page_bytes;               /* bytes of one K/V page (all attention layers) */
    int64_t seq_bytes;                /* bytes of one live sequence's linear state + page table */
    _Atomic double timeout_ms;        /* jev_decide_json's per-request time limit (jev_decider_set_timeout); atomic: a
                                       * server's scheduler reads it while the embedding program may set it */
    atomic_bool reuse_prefix;         /* jev_decide_json's reuse_prefix (jev_decider_set_prefix_reuse; on) */
    struct dc_kept kept[DC_KEPT_MAX]; /* recent shared prefixes (kept.c) */
    struct dc_kept_image kept_image[DC_KEPT_MAX]; /* recent images' embeddings (kept.c) */
    uint64_t kept_clock;                          /* ticks once per use of an entry */
    atomic_bool lost;   /* the device failed for good: every run refuses (jev_decider_status) */
    char lost_msg[512]; /* why; written before lost is set */
};

/* One question's prepared inputs. */
struct dc_question {
    struct jev_tokens suffix; /* the question's suffix ids (label or text rendering) */
    int32_t n_ids;            /* label mode: vocabulary ids read */
    int32_t *ids;             /* label mode: (n_ids) label token ids, an option's variants together */
    int32_t *owner;           /* label mode: (n_ids) option index of each id */
    int32_t *cols;            /* label mode: (n_ids) column of each id among the head rows */
    bool has_trie;            /* text mode: trie built */
    struct jev_trie trie;     /* text mode: the option texts' candidate trie */
    int32_t forks;            /* text mode: forks its trie rounds make */
    int32_t interior;         /* text mode: interior (fed) nodes, root excluded */
};

/* One live sequence the request holds (released on any exit). */
struct dc_seqref {
    struct jev_seq *seq; /* NULL once released */
};

/* The context of one jev_decide_run call. */
struct dc_req {
    struct jev_decider *d;         /* the decider */
    const struct jev_request *r;   /* the request (not owned) */
    struct jev_decide_params p;    /* params, defaults filled */
    struct jev_decide_result *res; /* where answers and counters go */
    struct jev_error *err;         /* first failure */
    double t_begin;                /* jev_now_ms() when the request began (its time limit counts from here) */
    /* image */
    bool has_image;                 /* the request carries an image (and the model reads it) */
    struct jev_image img;           /* decoded RGB (freed after preprocessing) */
    struct jev_vision_input vin;    /* pixel values and grid of the current image */
    float *img_embd;                /* [n_img_tok][D] image-token embeddings (arena) */
    int32_t n_img_tok;              /* image-pad tokens of the image */
    int64_t image_bytes;            /* bytes the decode + preprocessing held at once */
    char image_key[JEV_SHA256_HEX]; /* reuse_prefix: sha256 of the image bytes; "" when not keyed */
    bool image_deferred;            /* a kept image: size known, decode and tower skipped */
    bool detached;                  /* prepared off the engine's thread (batch.c): no engine pool, no kept
                                     * tables read (the image is keyed, decoded, and looked up later) */
    struct jev_pool *prep_pool;     /* detached: a pool of its own for the resize (NULL: the calling thread) */
    int32_t image_kept;             /* its entry in d->kept_image */
    /* tokens */
    struct jev_tokens prefix; /* the shared prefix (image pads included) */
    int32_t img_at;           /* index of the first image pad in the prefix; -1 when none */
    struct dc_question *qs;   /* (n_questions) */
    struct jev_tokens gen;    /* generate: the genjson suffix */
    int32_t max_suffix;       /* longest suffix */
    int32_t n_cols;           /* label mode: vocabulary rows the head reads */
    int32_t *cols;            /* label mode: (n_cols) those rows (the union over questions) */
    /* scratch, from the arena */
    struct jev_arena arena; /* every buffer below */
    int32_t cap_tokens;     /* tokens of the largest forward */
    int32_t cap_runs;       /* runs of the largest forward */
    int32_t cap_rows;       /* logit rows of the largest forward */
    int64_t n_vocab;        /* columns of a full-vocabulary logits row */
    int32_t *ids;           /* [cap_tokens] batch ids */
    int32_t *pos;           /* [cap_tokens][3] batch positions */
    const float **embd;     /* [max(cap_tokens, cap_prompt)] by prompt index: image-pad rows, else NULL */
    int32_t *mrope;         /* [3][cap_prompt] positions from jev_mrope_positions */
    int32_t cap_prompt;     /* tokens of the longest full prompt */
    struct jev_seq **seqs;  /* [cap_runs] sequences of the batch runs */
    int32_t *seq_len;       /* [cap_runs] run lengths */
    int32_t *out_idx;       /* [cap_rows] rows with logits */
    float *logits;          /* [cap_rows][n_vocab or n_cols] */
    void *tasks;            /* trie rounds: two task tables of cap_tasks (score.c) */
    int32_t cap_tasks;      /* entries of one task table */
    int32_t *label_block;   /* label mode: ids / owner / cols of every question (one malloc) */
    /* sequences */
    struct dc_seqref *live; /* [cap_live] sequences held */
    int32_t cap_live;       /* entries of live */
    /* counters */
    int64_t peak_dyn;  /* peak of K/V pages + live linear states, bytes */
    int32_t peak_seqs; /* peak of live sequences */
};

/* ---- pipeline-prep.c ---- */

/* Renders and tokenizes a prompt's segments; IMAGE becomes n_img pads (img_at gets the first index). */
enum jev_status dc_tokenize_prompt(struct jev_decider *d, const struct jev_prompt *pr, int32_t n_img,
                                   struct jev_tokens *out, int32_t *img_at, struct jev_error *err);

/* Text mode: the candidate token ids of option i (the option text as the prompt shows it, caller text). */
enum jev_status dc_candidate_tokens(struct jev_decider *d, const struct jev_question *qq, int32_t i,
                                    struct jev_tokens *out, struct jev_error *err);

/* Decodes + preprocesses the request's image into q->vin (timed as image_ms). */
enum jev_status dc_image_load(struct dc_req *q);
/* Runs the vision tower on q->vin into q->img_embd (timed as vision_ms, counted). */
enum jev_status dc_image_encode(struct dc_req *q);
/* The kept image's embeddings into this request's (dc_image_load deferred its decode). */
void dc_image_from_kept(struct dc_req *q);
/* Keeps this request's image embeddings (after dc_image_encode) for later requests. */
void dc_image_keep(struct dc_req *q);
/* Frees the decoded image and the preprocessed pixels. */
void dc_image_release(struct dc_req *q);

/* M-RoPE positions of a full prompt ids[n] into q->mrope ([3][n]); delta out. */
enum jev_status dc_mrope(struct dc_req *q, const int32_t *ids, int32_t n, int32_t *delta);
/* Tokens [start, start+count) of the last dc_mrope prompt (n tokens) as batch positions pos[count][3]. */
void dc_mrope_slice(const struct dc_req *q, int32_t n, int32_t start, int32_t count, int32_t *pos);

/* A fresh sequence / a fork / a release, kept in q->live so that every exit releases them. */
enum jev_status dc_seq_new(struct dc_req *q, struct jev_seq **out);
enum jev_status dc_seq_fork(struct dc_req *q, struct jev_seq *parent, struct jev_seq **out);
/* Question i's suffix fork of the prefix: light (model/state.h) where dc_light_fork says so, else full. */
enum jev_status dc_seq_fork_question(struct dc_req *q, struct jev_seq *parent, int32_t i, struct jev_seq **out);
/* Whether question i's suffix runs on a light fork: label scoring reads only the logits at the suffix's
 * last token, so the DeltaNet state after it is never needed, provided the suffix fits one slice of the
 * engine's forward (lm.c). Text mode forks its sequences again and keeps them: full forks. */
bool dc_light_fork(const struct dc_req *q, int32_t i);
void dc_seq_release(struct dc_req *q, struct jev_seq *s);
/* Takes s out of the request's table without freeing it (the decider keeps it: dc_kept). */
void dc_seq_detach(struct dc_req *q, struct jev_seq *s);
/* ---- kept prefixes and images (kept.c) ---- */

/* The entry kept under key (marked used), or -1. */
int32_t dc_kept_find(struct jev_decider *d, const char *key);
/* Keeps seq under key, in a free entry or the least recently used one's (freed). */
void dc_kept_put(struct jev_decider *d, struct jev_seq *seq, const char *key);
/* Kept prefixes. */
int32_t dc_kept_count(const struct jev_decider *d);
/* Frees the least recently used kept prefix other than except; false when there is none. */
bool dc_kept_evict(struct jev_decider *d, const struct jev_seq *except);
/* Takes kept prefix i out of the table without freeing it (the caller holds it from now on). */
struct jev_seq *dc_kept_take(struct jev_decider *d, int32_t i);
/* Frees every kept prefix (a request that needs the slots and pages, the decider's end). */
void dc_kept_drop(struct jev_decider *d);
/* The image entry kept under key (marked used), or -1. */
int32_t dc_kept_image_find(struct jev_decider *d, const char *key);
/* A free image entry, or the least recently used one emptied. */
int32_t dc_kept_image_slot(struct jev_decider *d);
/* Frees every kept image (reuse turned off, the decider's end). */
void dc_kept_image_drop(struct jev_decider *d);

/* jev_lm_forward with the engine, then the peak bookkeeping. */
enum jev_status dc_forward(struct dc_req *q, const struct jev_lm_batch *b);

/* Samples live K/V pages and sequences into the peak. */
void dc_track(struct dc_req *q);

/* Builds the request's tokens (prefix, suffixes, label ids or tries, genjson). */
enum jev_status dc_prepare_tokens(struct dc_req *q);
/* The shared path's batch: all questions, or p.batch; text mode at most DC_TEXT_ROWS_MAX (each
 * suffix needs a full-vocabulary logits row). */
int32_t dc_batch_size(const struct dc_req *q);
/* ---- path-shared.c: what the shared batch (batch.c) runs the shared path with ---- */

/* K/V pages a batch of B questions holds at once: the prefix and the largest batch's forks. */
int32_t dc_batch_pages(const struct dc_req *q, int32_t B);
/* Pages the direct path may take: the free ones and the kept prefixes'. */
int32_t dc_page_budget(const struct dc_req *q);
/* Lowers *B (the shared path's batch) until its K/V pages fit budget; JEV_ERR_NOMEM (413) naming the
 * need and the budget when one question at a time does not fit. */
enum jev_status dc_fit_batch(struct dc_req *q, int32_t *B, int32_t budget);
/* Whether the request may keep or reuse its prefix, and the key it is kept under. */
bool dc_keyable(const struct dc_req *q);
void dc_prefix_key(const struct dc_req *q, char out[JEV_SHA256_HEX]);
/* Sizes and allocates the scratch buffers for the chosen path. */
enum jev_status dc_prepare_scratch(struct dc_req *q);
/* Frees everything the context holds (sequences included). */
void dc_req_free(struct dc_req *q);

/* ---- score.c ---- */

/* Fills b's logit request: rows q->out_idx[0..n) (set by the caller), label rows or the full vocabulary. */
void dc_score_head(struct dc_req *q, int32_t n, struct jev_lm_batch *b);
/*
 * After the forward of dc_score_head: answers for questions qi0 .. qi0+n-1,
 * whose sequences seqs[k] sit right after their prompts. In text mode it
 * runs the trie rounds from there. The sequences are released either way.
 */
enum jev_status dc_score_read(struct dc_req *q, int32_t qi0, int32_t n, struct jev_seq **seqs);

/* Forks of a trie (nodes with two or more interior children, root included) and its interior nodes. */
void dc_trie_counts(const struct jev_trie *t, int32_t *forks, int32_t *interior);

/* ---- pipeline.c ---- */

/* The start of a run as dc_run makes it, without its path: params checked and defaulted, the
 * answers, the image (decoded, or its kept embeddings found), the tokens and the scratch. The
 * caller frees q with dc_req_free (also after a failure). */
enum jev_status dc_begin(struct jev_decider *d, const struct jev_request *r, const struct jev_decide_params *p,
                         struct jev_decide_result *out, struct jev_error *err, struct dc_req *q);
/* dc_begin on any thread while the engine's owner runs forwards: it reads only what never changes
 * after the decider's init (no engine pool, no kept tables, no engine state); the image is decoded
 * whether a kept one would do (dc_begin_attach decides, on the engine's thread). pool: one the
 * caller holds alone for the image's resize (the same pixels as on one thread), or NULL. */
enum jev_status dc_begin_detached(struct jev_decider *d, const struct jev_request *r, const struct jev_decide_params *p,
                                  struct jev_decide_result *out, struct jev_error *err, struct dc_req *q,
                                  struct jev_pool *pool);
/* On the engine's thread, after dc_begin_detached: the kept tower output of the same image bytes
 * replaces the decoded pixels (copied now), as dc_begin would have found it. */
void dc_begin_attach(struct dc_req *q);

/* jev_decide_run that leaves the context q alive (tries, tokens) for inspection; the sequences are
 * released. The caller frees q with dc_req_free (also after a failure). */
enum jev_status dc_run(struct jev_decider *d, const struct jev_request *r, const struct jev_decide_params *p,
                       struct jev_decide_result *out, struct jev_error *err, struct dc_req *q);

/* ---- the paths ---- */

enum jev_status dc_path_shared(struct dc_req *q);
enum jev_status dc_path_independent(struct dc_req *q);
enum jev_status dc_path_generate(struct dc_req *q);

#endif
