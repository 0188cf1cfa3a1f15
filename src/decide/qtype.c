/*
 * qtype.c - the table of question types (qtype.h), its lookups, its
 * completeness check, and the slot implementations several types share.
 * The types themselves are qtype-noul.c, qtype-choice.c and qtype-score.c.
 */
#include "decide/qtype.h" // defines: struct jev_qtype_ops

#include <stdio.h>
#include <string.h>

/* Unsized on purpose: an enum value without its line here makes the table shorter than
 * JEV_QTYPE_COUNT, which tests/test-qtype.c reports. */
static const struct jev_qtype_ops *const table[] = {
    [JEV_QTYPE_NOUL] = &jev_qtype_noul,
    [JEV_QTYPE_CHOICE] = &jev_qtype_choice,
    [JEV_QTYPE_SCORE] = &jev_qtype_score,
};

#define N_TABLE ((int32_t)(sizeof table / sizeof table[0]))

/* Every pointer member after `name`'s offset is a slot listed in enum jev_qslot: a new member
 * without its enum value (and its case below) does not compile. */
_Static_assert(sizeof(struct jev_qtype_ops) == offsetof(struct jev_qtype_ops, name) + JEV_QSLOT_COUNT * sizeof(void *),
               "struct jev_qtype_ops and enum jev_qslot disagree");

const struct jev_qtype_ops *jev_qtype_get(enum jev_qtype t) {
    JEV_ASSERT((int32_t)t >= 0 && (int32_t)t < N_TABLE && table[t] != NULL);
    return table[t];
}

int32_t jev_qtype_table_size(void) { return N_TABLE; }

/* The one name lookup outside the table: out-of-range values name themselves "unknown". */
const char *jev_qtype_name(enum jev_qtype t) {
    if ((int32_t)t < 0 || (int32_t)t >= N_TABLE || table[t] == NULL)
        return "unknown";
    return table[t]->name;
}

bool jev_qtype_by_name(const char *s, enum jev_qtype *out) {
    for (int32_t i = 0; i < N_TABLE; i++)
        if (table[i] && strcmp(table[i]->name, s) == 0) {
            *out = (enum jev_qtype)i;
            return true;
        }
    return false;
}

/* Into the caller's buffer: no shared state, so refusals on several threads never race. */
const char *jev_qtype_names(char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = '\0';
    for (int32_t i = 0; i < N_TABLE && n < cap; i++) {
        int w = snprintf(buf + n, cap - n, "%s%s", i ? ", " : "", table[i]->name);
        if (w < 0)
            break;
        n += (size_t)w;
    }
    return buf;
}

bool jev_qtype_slot_set(const struct jev_qtype_ops *t, enum jev_qslot s) {
    switch (s) {
    case JEV_QSLOT_NAME: return t->name != NULL;
    case JEV_QSLOT_FIXED_OPTIONS: return t->fixed_options != NULL;
    case JEV_QSLOT_CANDIDATE: return t->candidate != NULL;
    case JEV_QSLOT_SUMMARY: return t->summary != NULL;
    case JEV_QSLOT_LABELS_BUILD: return t->labels_build != NULL;
    case JEV_QSLOT_LABEL_SET: return t->label_set != NULL;
    case JEV_QSLOT_RENDER: return t->render != NULL;
    case JEV_QSLOT_RENDER_GENJSON: return t->render_genjson != NULL;
    case JEV_QSLOT_ANSWER: return t->answer != NULL;
    case JEV_QSLOT_COUNT: break;
    }
    return false;
}

const char *jev_qtype_slot_name(enum jev_qslot s) {
    static const char *const names[JEV_QSLOT_COUNT] = {
        [JEV_QSLOT_NAME] = "name",
        [JEV_QSLOT_FIXED_OPTIONS] = "fixed_options",
        [JEV_QSLOT_CANDIDATE] = "candidate",
        [JEV_QSLOT_SUMMARY] = "summary",
        [JEV_QSLOT_LABELS_BUILD] = "labels_build",
        [JEV_QSLOT_LABEL_SET] = "label_set",
        [JEV_QSLOT_RENDER] = "render",
        [JEV_QSLOT_RENDER_GENJSON] = "render_genjson",
        [JEV_QSLOT_ANSWER] = "answer",
    };
    return (int)s >= 0 && s < JEV_QSLOT_COUNT && names[s] ? names[s] : "?";
}

bool jev_qtype_check(const struct jev_qtype_ops *t, int32_t index, char *why, size_t cap) {
    if (t == NULL) {
        snprintf(why, cap, "type %d: no table entry", index);
        return false;
    }
    const char *name = t->name ? t->name : "(unnamed)";
    if ((int32_t)t->type != index) {
        snprintf(why, cap, "%s: at index %d but its type is %d", name, index, (int)t->type);
        return false;
    }
    if (t->none >> JEV_QSLOT_COUNT) {
        snprintf(why, cap, "%s: none names bits beyond the %d slots (0x%x)", name, JEV_QSLOT_COUNT, t->none);
        return false;
    }
    for (int s = 0; s < JEV_QSLOT_COUNT; s++) {
        bool set = jev_qtype_slot_set(t, (enum jev_qslot)s), none = t->none & JEV_QSLOT_BIT(s);
        if (!set && !none) {
            snprintf(why, cap, "%s: slot %s is NULL and not marked none", name, jev_qtype_slot_name((enum jev_qslot)s));
            return false;
        }
        if (set && none) {
            snprintf(why, cap, "%s: slot %s is marked none but set", name, jev_qtype_slot_name((enum jev_qslot)s));
            return false;
        }
    }
    return true;
}

/* Reads the table directly (not through jev_qtype_get, which asserts) so that a gap is a message. */
bool jev_qtype_check_table(char *why, size_t cap) {
    if (N_TABLE != JEV_QTYPE_COUNT) {
        snprintf(why, cap, "the table has %d entries for %d types (enum jev_qtype)", N_TABLE, JEV_QTYPE_COUNT);
        return false;
    }
    for (int32_t i = 0; i < N_TABLE; i++) {
        if (!jev_qtype_check(table[i], i, why, cap))
            return false;
        for (int32_t j = 0; j < i; j++)
            if (strcmp(table[j]->name, table[i]->name) == 0) {
                snprintf(why, cap, "types %d and %d are both named \"%s\"", j, i, table[i]->name);
                return false;
            }
    }
    return true;
}

/* ---- shared slots ---- */

const char *jev_qtype_candidate_key(const struct jev_option *o) { return o->key; }

void jev_qtype_summary_winner(const struct jev_question *q, const struct jev_answer *a, char *buf, size_t cap) {
    snprintf(buf, cap, "%.16s", q->options[a->winner].key);
}
