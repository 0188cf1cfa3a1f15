/*
 * labels-int.h - the label check, for the per-type files (qtype-*.c) that
 * build their own label sets (labels.h has the rules). Nothing outside
 * src/decide/ uses it.
 *
 * A label is valid when its text is exactly one token on its own and right
 * after the cue, and no other label of its set has that token.
 */
#ifndef JEV_DECIDE_LABELS_INT_H
#define JEV_DECIDE_LABELS_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"    // defines: struct jev_error
#include "decide/labels.h" // defines: struct jev_label, jev_encode_fn

/* Most tokens of a cue we compare; a cue is a short text ("\n\n", "Answer:"). */
#define DC_CUE_TOKENS_MAX 64

/* The tokenizer and the cue one jev_labels_build checks against. */
struct dc_label_ctx {
    jev_encode_fn enc;                  /* encodes plain text (labels.h) */
    void *enc_ctx;                      /* its context */
    const char *cue;                    /* the text the labels follow ("" = none) */
    int32_t cue_ids[DC_CUE_TOKENS_MAX]; /* (n_cue) the cue's tokens */
    int n_cue;                          /* tokens of the cue */
};

/* The one token `text` becomes after the cue, or -1. */
int32_t dc_label_token(const struct dc_label_ctx *c, const char *text);

/* Whether any variant of the first n labels of a set already uses token id. */
bool dc_label_id_used(const struct jev_label *set, int32_t n, int32_t id);

/* Label dst (the next of set, after n_set others) with text and an optional alias that is read too
 * when it is one token of its own. Fails (JEV_ERR_FORMAT) naming `what` and the text when the text
 * is not one token after the cue or shares its token with another label of the set. */
enum jev_status dc_label_must(struct jev_label *dst, const struct jev_label *set, int32_t n_set,
                              const struct dc_label_ctx *c, const char *text, const char *alias, const char *what,
                              struct jev_error *err);

#endif
