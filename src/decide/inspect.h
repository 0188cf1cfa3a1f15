/*
 * inspect.h - a request run on a decider with its prepared inputs kept for
 * reading afterwards: the token ids, the image's embeddings and grid, each
 * question's suffix and candidate trie. A reference check (common/verify.c,
 * `jev verify`) recomputes the answers its own way from these on the same
 * engine, so both sides see the same inputs.
 *
 * Lifetime: the inspection borrows the decider and the request; free it with
 * jev_decide_inspection_free before either goes. Its sequences are released
 * when the run ends (the engine's K/V pages are free again); what stays is
 * the run's tokens, tries and image embeddings.
 */
#ifndef JEV_DECIDE_INSPECT_H
#define JEV_DECIDE_INSPECT_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"      // defines: struct jev_error
#include "decide/pipeline.h" // defines: struct jev_decider, struct jev_decide_params, struct jev_decide_result
#include "decide/trie.h"     // defines: struct jev_trie

struct jev_decide_inspection;

/* What a run prepared, as the forwards saw it. */
struct jev_decide_inputs {
    const int32_t *prefix_ids; /* (n_prefix) the shared prefix, image pads included */
    int32_t n_prefix;          /* tokens of the prefix */
    bool has_image;            /* the request's image was read */
    int32_t grid_h, grid_w;    /* the image's patch grid (M-RoPE), when has_image */
    int32_t image_at;          /* index of the first image pad in the prefix; -1 when none */
    int32_t n_image_tokens;    /* image-pad tokens */
    const float *image_embd;   /* [n_image_tokens][hidden] the rows the forwards read, when has_image */
    int32_t max_prompt;        /* tokens of the longest prefix + suffix */
    int64_t n_vocab;           /* columns of a full-vocabulary logits row */
};

/*
 * Runs r as jev_decide_run does (answers and counters into *res, which the
 * caller frees with jev_decide_result_free) and keeps its inputs in *out. On
 * failure *out is NULL and err says why.
 */
enum jev_status jev_decide_inspect(struct jev_decider *d, const struct jev_request *r,
                                   const struct jev_decide_params *p, struct jev_decide_result *res,
                                   struct jev_decide_inspection **out, struct jev_error *err);
void jev_decide_inspection_free(struct jev_decide_inspection *in);

/* The run's inputs; owned by the inspection. */
const struct jev_decide_inputs *jev_decide_inspection_inputs(const struct jev_decide_inspection *in);
/* Question qi's suffix ids (owned by the inspection). */
const int32_t *jev_decide_inspection_suffix(const struct jev_decide_inspection *in, int32_t qi, int32_t *n);
/* Question qi's candidate trie after the run (text scoring), its log-probabilities filled; NULL in
 * label scoring. */
const struct jev_trie *jev_decide_inspection_trie(const struct jev_decide_inspection *in, int32_t qi);

/* Gives back the prefixes the decider keeps between requests (their sequence slots and K/V pages),
 * so that a caller may run the engine directly. */
void jev_decider_drop_kept(struct jev_decider *d);

#endif
