/*
 * labels.h - stable single-token labels for label-mode scoring.
 *
 * In label mode every option is shown with a short label and the model's
 * answer is read from the logits of the label tokens at one position: the
 * first token of the assistant's reply (prompt-render.h puts the cue, the
 * text the label follows, at the end of the prompt). A label is valid only
 * if it is exactly one token on its own AND right after the cue, i.e.
 *     encode(cue + label) == encode(cue) followed by encode(label)[0],
 * and no two labels of a set share a token. Checking goes through a
 * callback, so this file needs no tokenizer:
 *     int encode(void *ctx, const char *text, int32_t *ids, int max)
 * encodes plain text (no special tokens) and returns the token count (which
 * may exceed max; only max ids are written) or a negative value on failure.
 *
 * The sets, in a fixed order so that option i always gets the same label
 * whatever the option count ("stable"):
 *   choice  A..Z, then AA, AB, .. ZZ, then a..z, then 0..9, keeping only the
 *           candidates that pass the check, up to 255
 *   noul    yes (alias Yes), no (alias No): an alias is read too and its
 *           probability added to its label's, dropped when not one token
 *   score   0..9 (level i is labelled i)
 * Each type builds its own set (its labels_build slot, qtype.h), in enum
 * order; its label_set slot says which set its options read. Built once per
 * tokenizer (at model load), read-only afterwards.
 */
#ifndef JEV_DECIDE_LABELS_H
#define JEV_DECIDE_LABELS_H

#include <stdint.h>

#include "base/error.h"     // defines: struct jev_error
#include "decide/request.h" // defines: struct jev_question, JEV_DECIDE_MAX_OPTIONS

/* The tokenizer callback (see the file comment). */
typedef int (*jev_encode_fn)(void *ctx, const char *text, int32_t *ids, int max);

#define JEV_LABEL_MAX_VARIANTS 2 /* the shown text and one alias */
#define JEV_LABEL_TEXT_MAX 8     /* bytes of a label's text, NUL included */
#define JEV_LABEL_CUE_MAX 64     /* bytes of the cue text, NUL included */

struct jev_label {
    char text[JEV_LABEL_TEXT_MAX];       /* what the prompt shows ("A", "yes", "3") */
    int32_t n_ids;                       /* 1..JEV_LABEL_MAX_VARIANTS */
    int32_t ids[JEV_LABEL_MAX_VARIANTS]; /* [0] the text's token, [1] the alias's token */
};

struct jev_labels {
    int32_t n_choice;                                /* valid choice labels, <= 255 */
    struct jev_label choice[JEV_DECIDE_MAX_OPTIONS]; /* (n_choice) in the fixed order */
    struct jev_label noul[2];                        /* [0] yes, [1] no */
    struct jev_label score[JEV_DECIDE_MAX_LEVELS];   /* "0".."9" */
    char cue[JEV_LABEL_CUE_MAX];                     /* the text the labels were checked after */
};

/*
 * Builds and checks every set. cue is the prompt text right before the
 * label ("" checks the labels alone). Fails (JEV_ERR_FORMAT, naming the
 * label) when a noul or score label is not one token or two share a token;
 * choice candidates that fail are skipped, so n_choice may be below 255.
 */
enum jev_status jev_labels_build(struct jev_labels *out, jev_encode_fn encode, void *ctx, const char *cue,
                                 struct jev_error *err);

/* Refuses (JEV_ERR_INVALID_ARG, naming the question and the limit) a choice
 * question with more options than this set has labels. */
enum jev_status jev_labels_check(const struct jev_labels *l, const struct jev_question *q, struct jev_error *err);

/* The label shown for option i of a question of type t. */
const char *jev_labels_text(const struct jev_labels *l, enum jev_qtype t, int32_t i);

/*
 * The token ids to read for a question, option by option (each option's
 * variants together): ids[k] and owner[k] = its option index. cap must be at
 * least n_options * JEV_LABEL_MAX_VARIANTS. Returns the count, or -1 when the
 * set has too few labels (jev_labels_check says why).
 */
int32_t jev_labels_ids(const struct jev_labels *l, const struct jev_question *q, int32_t *ids, int32_t *owner,
                       int32_t cap);

/*
 * Option probabilities from the logits of those ids (same order, n_ids of
 * them): each option's mass is the sum over its variants (logsumexp), then a
 * softmax over options in double. probs has n_options entries.
 */
void jev_labels_probs(int32_t n_options, const int32_t *owner, const float *logits, int32_t n_ids, double *probs);

#endif
