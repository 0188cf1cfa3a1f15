/*
 * qtype.h - one table of slots per question type (noul, choice, score): what
 * the decide layer does differently for each type goes through its table, so
 * that a type is one file (qtype-noul.c, qtype-choice.c, qtype-score.c) and
 * nothing else in src/decide/ asks "which type is this?".
 *
 * Every slot is set, or NULL and named in the table's `none` bits (the type
 * has nothing to do there, and the caller skips it). tests/test-qtype.c fails
 * on a slot that is NULL without being marked none, on a table entry missing
 * for an enum value, and on an entry at the wrong index.
 *
 * Adding a type: a value before JEV_QTYPE_COUNT in request.h, a file
 * qtype-NAME.c defining `const struct jev_qtype_ops jev_qtype_NAME`, its line
 * in qtype.c's table, and its wire slots (wire/qtype-wire.h: the request
 * fields of both shapes, the answer objects). docs/decide.md walks through it.
 *
 * What this is not: the wire shapes. Parsing a type's criteria / choices /
 * levels and writing its answer objects belong to src/wire/ (the layer above);
 * its table (wire/qtype-wire.h) is indexed by the same enum.
 */
#ifndef JEV_DECIDE_QTYPE_H
#define JEV_DECIDE_QTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"           // defines: struct jev_error
#include "decide/answer.h"        // defines: struct jev_answer
#include "decide/labels.h"        // defines: struct jev_labels, struct jev_label
#include "decide/prompt-render.h" // defines: struct jev_prompt
#include "decide/request.h"       // defines: enum jev_qtype, struct jev_question

struct dc_label_ctx; /* labels-int.h: the tokenizer check a label set is built with */

/* The slots, for `none` and for the completeness check (same order as the struct). */
enum jev_qslot {
    JEV_QSLOT_NAME = 0,
    JEV_QSLOT_FIXED_OPTIONS,
    JEV_QSLOT_CANDIDATE,
    JEV_QSLOT_SUMMARY,
    JEV_QSLOT_LABELS_BUILD,
    JEV_QSLOT_LABEL_SET,
    JEV_QSLOT_RENDER,
    JEV_QSLOT_RENDER_GENJSON,
    JEV_QSLOT_ANSWER,
    JEV_QSLOT_COUNT
};

#define JEV_QSLOT_BIT(s) (1u << (s))

struct jev_qtype_ops {
    enum jev_qtype type; /* its own index in the table */
    unsigned none;       /* JEV_QSLOT_BIT()s of the slots this type leaves NULL on purpose */
    bool caller_keys;    /* option keys are the caller's text (choice names), not jev's (yes/no, digits):
                            they are shown to the model and may name an asset */

    /* ---- names ---- */

    /* [NAME] The System One name, also the CLI's and the logs' ("noul"). */
    const char *name;

    /* ---- options ---- */

    /* [FIXED_OPTIONS] Fills the options every question of this type has (noul: yes, no) into
     * q->options (room for them is the wire's job) and sets q->n_options; the wire then adds what
     * the caller described. NULL: the caller gives the options. */
    void (*fixed_options)(struct jev_question *q);

    /* [CANDIDATE] Text mode: the text option o is scored as (the continuation the trie reads). */
    const char *(*candidate)(const struct jev_option *o);

    /* [SUMMARY] The answer in a few characters for tables and logs (the winner's key, or the
     * expected level "%.3f"); writes at most cap bytes, NUL included. */
    void (*summary)(const struct jev_question *q, const struct jev_answer *a, char *buf, size_t cap);

    /* ---- label mode ---- */

    /* [LABELS_BUILD] Builds this type's label set into out, checking each label through c
     * (labels-int.h). Fails (JEV_ERR_FORMAT, naming the label) when the set cannot be made. */
    enum jev_status (*labels_build)(struct jev_labels *out, const struct dc_label_ctx *c, struct jev_error *err);

    /* [LABEL_SET] The labels option 0, 1, ... of this type gets, and how many there are. */
    const struct jev_label *(*label_set)(const struct jev_labels *l, int32_t *n);

    /* ---- the prompt (prompt-int.h has the text helpers) ---- */

    /* [RENDER] After "Question <id>: <instructions>\n": the options and the one-line answer
     * instruction. labels NULL: text mode (no labels; the candidates are the answers). */
    void (*render)(struct jev_prompt *p, const struct jev_question *q, const struct jev_labels *labels);

    /* [RENDER_GENJSON] The generate_json prompt's option lines for q, the option ids first. */
    void (*render_genjson)(struct jev_prompt *p, const struct jev_question *q);

    /* ---- answer math ---- */

    /* [ANSWER] a->score and a->confidence from a->probs (normalised) and a->winner (argmax). */
    void (*answer)(struct jev_answer *a);
};

/* The entries, one file each; everything else reaches them through jev_qtype_get. */
extern const struct jev_qtype_ops jev_qtype_noul;   /* qtype-noul.c */
extern const struct jev_qtype_ops jev_qtype_choice; /* qtype-choice.c */
extern const struct jev_qtype_ops jev_qtype_score;  /* qtype-score.c */

/* The table entry of type t (t must be a value of the enum). */
const struct jev_qtype_ops *jev_qtype_get(enum jev_qtype t);

/* The table's entries (the test compares it with JEV_QTYPE_COUNT). */
int32_t jev_qtype_table_size(void);

/* The type whose System One name is s; false when none is. */
bool jev_qtype_by_name(const char *s, enum jev_qtype *out);

/* "noul, choice, score": every name in enum order, for refusal messages; written into buf
 * (cap bytes, cut to fit) and returned. */
const char *jev_qtype_names(char *buf, size_t cap);

/* Whether slot s of t is set (non-NULL). */
bool jev_qtype_slot_set(const struct jev_qtype_ops *t, enum jev_qslot s);

/* The slot's name ("candidate") for messages. */
const char *jev_qtype_slot_name(enum jev_qslot s);

/* Checks t as table entry `index`: at that index, every slot set or marked none, none both.
 * Writes the first problem into why (cap bytes) and returns false. */
bool jev_qtype_check(const struct jev_qtype_ops *t, int32_t index, char *why, size_t cap);

/* The whole table: one entry per enum value (JEV_QTYPE_COUNT), each passing jev_qtype_check, the
 * names unique. Writes the first problem into why and returns false. */
bool jev_qtype_check_table(char *why, size_t cap);

/* ---- shared slot implementations (qtype.c) ---- */

/* [CANDIDATE] the option key (noul: yes/no, score: the digit). */
const char *jev_qtype_candidate_key(const struct jev_option *o);

/* [SUMMARY] the winner's key, at most 16 bytes of it. */
void jev_qtype_summary_winner(const struct jev_question *q, const struct jev_answer *a, char *buf, size_t cap);

#endif
