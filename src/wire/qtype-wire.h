/*
 * qtype-wire.h - the wire's table of question types: what each type reads
 * from the two request shapes and writes into the two answer objects,
 * indexed by the same enum as decide's table (decide/qtype.h, which has the
 * System One name, the options every question of a type has, the prompt and
 * the answer math).
 *
 * Every slot is set, or NULL and named in the entry's `none` bits (the
 * shape has nothing of that type to read or write there; the caller skips
 * it). tests/test-qtype.c fails on a slot that is NULL without being marked
 * none, on a missing entry for an enum value, and on an entry at the wrong
 * index. One file per type: qtype-wire-noul.c, qtype-wire-choice.c,
 * qtype-wire-score.c.
 *
 * What this is not: the envelopes (request-systemone.c, request-openai.c,
 * response.c) and the workload file, which has choice questions only.
 */
#ifndef JEV_WIRE_QTYPE_WIRE_H
#define JEV_WIRE_QTYPE_WIRE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decide/answer.h"  // defines: struct jev_answer
#include "decide/request.h" // defines: enum jev_qtype, struct jev_question
#include "io/jsonw.h"       // defines: struct jev_jsonw
#include "wire/request.h"   // defines: struct jev_request_error

/* The slots, for `none` and for the completeness check (same order as the struct). */
enum jev_qwslot {
    JEV_QWSLOT_S1_COUNT = 0,
    JEV_QWSLOT_S1_PARSE,
    JEV_QWSLOT_S1_ANSWER,
    JEV_QWSLOT_OA_NAME,
    JEV_QWSLOT_OA_OPTIONS,
    JEV_QWSLOT_OA_COUNT,
    JEV_QWSLOT_OA_PARSE,
    JEV_QWSLOT_OA_ANSWER,
    JEV_QWSLOT_COUNT
};

#define JEV_QWSLOT_BIT(s) (1u << (s))

struct jev_qtype_wire {
    enum jev_qtype type; /* its own index in the table */
    unsigned none;       /* JEV_QWSLOT_BIT()s of the slots this type leaves NULL on purpose */

    /* ---- System One (POST /v1/systemone; the type's name is decide's) ---- */

    /* [S1_COUNT] The options a question with these `criteria` (NULL when absent) will have, to size
     * the request's one block before parsing; 0 when malformed (the parse refuses it). */
    int64_t (*s1_count)(json_t *criteria);

    /* [S1_PARSE] `criteria` (NULL when absent) into q's options, after decide's fixed_options;
     * refuses (422 at path) what this type does not accept. */
    enum jev_status (*s1_parse)(struct jev_question *q, json_t *criteria, const char *path,
                                struct jev_request_error *e);

    /* [S1_ANSWER] The answer object's fields after "type" (",\"noul\":0.9"). */
    void (*s1_answer)(struct jev_jsonw *w, const struct jev_question *q, const struct jev_answer *a);

    /* ---- OpenAI (POST /v1/decisions, spec §8) ---- */

    /* [OA_NAME] The type's name on this wire ("predicate"). */
    const char *oa_name;

    /* [OA_OPTIONS] The question field that lists the options ("choices"), allowed besides type,
     * instructions and name. NULL: none (the options are decide's fixed ones). */
    const char *oa_options;

    /* [OA_COUNT] The options a question will have, given its oa_options field (NULL when absent or
     * when the type has none); 0 when malformed. */
    int64_t (*oa_count)(json_t *options);

    /* [OA_PARSE] The oa_options field (NULL when absent) into q's options; 422 at path. NULL:
     * none (set exactly when oa_options is). */
    enum jev_status (*oa_parse)(struct jev_question *q, json_t *options, const char *path, struct jev_request_error *e);

    /* [OA_ANSWER] The answer object's fields after "name" (not called for a refusal). */
    void (*oa_answer)(struct jev_jsonw *w, const struct jev_question *q, const struct jev_answer *a);
};

/* The entries, one file each; everything else reaches them through jev_qtype_wire_get. */
extern const struct jev_qtype_wire jev_qtype_wire_noul;   /* qtype-wire-noul.c */
extern const struct jev_qtype_wire jev_qtype_wire_choice; /* qtype-wire-choice.c */
extern const struct jev_qtype_wire jev_qtype_wire_score;  /* qtype-wire-score.c */

/* The table entry of type t (t must be a value of the enum). */
const struct jev_qtype_wire *jev_qtype_wire_get(enum jev_qtype t);

/* The table's entries (the test compares it with JEV_QTYPE_COUNT). */
int32_t jev_qtype_wire_table_size(void);

/* The type whose OpenAI name is s; false when none is. */
bool jev_qtype_wire_by_oa_name(const char *s, enum jev_qtype *out);

/* "predicate, choice, score": every OpenAI name in enum order, into buf (cut to fit). */
const char *jev_qtype_wire_oa_names(char *buf, size_t cap);

/* Whether slot s of t is set, and its name for messages. */
bool jev_qtype_wire_slot_set(const struct jev_qtype_wire *t, enum jev_qwslot s);
const char *jev_qtype_wire_slot_name(enum jev_qwslot s);

/* Checks t as table entry `index`: at that index, every slot set or marked none (none both),
 * oa_options and oa_parse both set or both none, and a type without an options field has fixed
 * options in decide's table. Writes the first problem into why and returns false. */
bool jev_qtype_wire_check(const struct jev_qtype_wire *t, int32_t index, char *why, size_t cap);

/* The whole table: one entry per enum value (JEV_QTYPE_COUNT), each passing jev_qtype_wire_check,
 * the OpenAI names unique. Writes the first problem into why and returns false. */
bool jev_qtype_wire_check_table(char *why, size_t cap);

#endif
