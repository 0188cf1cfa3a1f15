/*
 * qtype-wire.c - the wire's table of question types (qtype-wire.h), its
 * lookups and its completeness check. The types are qtype-wire-noul.c,
 * qtype-wire-choice.c and qtype-wire-score.c.
 */
#include "wire/qtype-wire.h" // defines: struct jev_qtype_wire

#include <stdio.h>
#include <string.h>

#include "decide/qtype.h" // defines: jev_qtype_get

/* Unsized on purpose: an enum value without its line here makes the table shorter than
 * JEV_QTYPE_COUNT, which tests/test-qtype.c reports. */
static const struct jev_qtype_wire *const table[] = {
    [JEV_QTYPE_NOUL] = &jev_qtype_wire_noul,
    [JEV_QTYPE_CHOICE] = &jev_qtype_wire_choice,
    [JEV_QTYPE_SCORE] = &jev_qtype_wire_score,
};

#define N_TABLE ((int32_t)(sizeof table / sizeof table[0]))

/* Every member after `none` is a slot listed in enum jev_qwslot: a new member without its enum
 * value (and its case below) does not compile. */
_Static_assert(sizeof(struct jev_qtype_wire) ==
                   offsetof(struct jev_qtype_wire, s1_count) + JEV_QWSLOT_COUNT * sizeof(void *),
               "struct jev_qtype_wire and enum jev_qwslot disagree");

const struct jev_qtype_wire *jev_qtype_wire_get(enum jev_qtype t) {
    JEV_ASSERT((int32_t)t >= 0 && (int32_t)t < N_TABLE && table[t] != NULL);
    return table[t];
}

int32_t jev_qtype_wire_table_size(void) { return N_TABLE; }

bool jev_qtype_wire_by_oa_name(const char *s, enum jev_qtype *out) {
    for (int32_t i = 0; i < N_TABLE; i++)
        if (table[i] && strcmp(table[i]->oa_name, s) == 0) {
            *out = (enum jev_qtype)i;
            return true;
        }
    return false;
}

const char *jev_qtype_wire_oa_names(char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = '\0';
    for (int32_t i = 0; i < N_TABLE && n < cap; i++) {
        int w = snprintf(buf + n, cap - n, "%s%s", i ? ", " : "", table[i]->oa_name);
        if (w < 0)
            break;
        n += (size_t)w;
    }
    return buf;
}

bool jev_qtype_wire_slot_set(const struct jev_qtype_wire *t, enum jev_qwslot s) {
    switch (s) {
    case JEV_QWSLOT_S1_COUNT: return t->s1_count != NULL;
    case JEV_QWSLOT_S1_PARSE: return t->s1_parse != NULL;
    case JEV_QWSLOT_S1_ANSWER: return t->s1_answer != NULL;
    case JEV_QWSLOT_OA_NAME: return t->oa_name != NULL;
    case JEV_QWSLOT_OA_OPTIONS: return t->oa_options != NULL;
    case JEV_QWSLOT_OA_COUNT: return t->oa_count != NULL;
    case JEV_QWSLOT_OA_PARSE: return t->oa_parse != NULL;
    case JEV_QWSLOT_OA_ANSWER: return t->oa_answer != NULL;
    case JEV_QWSLOT_COUNT: break;
    }
    return false;
}

const char *jev_qtype_wire_slot_name(enum jev_qwslot s) {
    static const char *const names[JEV_QWSLOT_COUNT] = {
        [JEV_QWSLOT_S1_COUNT] = "s1_count",     [JEV_QWSLOT_S1_PARSE] = "s1_parse",
        [JEV_QWSLOT_S1_ANSWER] = "s1_answer",   [JEV_QWSLOT_OA_NAME] = "oa_name",
        [JEV_QWSLOT_OA_OPTIONS] = "oa_options", [JEV_QWSLOT_OA_COUNT] = "oa_count",
        [JEV_QWSLOT_OA_PARSE] = "oa_parse",     [JEV_QWSLOT_OA_ANSWER] = "oa_answer",
    };
    return (int)s >= 0 && s < JEV_QWSLOT_COUNT && names[s] ? names[s] : "?";
}

bool jev_qtype_wire_check(const struct jev_qtype_wire *t, int32_t index, char *why, size_t cap) {
    if (t == NULL) {
        snprintf(why, cap, "type %d: no wire table entry", index);
        return false;
    }
    const char *name = t->oa_name ? t->oa_name : "(unnamed)";
    if ((int32_t)t->type != index) {
        snprintf(why, cap, "%s: at wire index %d but its type is %d", name, index, (int)t->type);
        return false;
    }
    if (t->none >> JEV_QWSLOT_COUNT) {
        snprintf(why, cap, "%s: none names bits beyond the %d slots (0x%x)", name, JEV_QWSLOT_COUNT, t->none);
        return false;
    }
    for (int s = 0; s < JEV_QWSLOT_COUNT; s++) {
        const char *slot = jev_qtype_wire_slot_name((enum jev_qwslot)s);
        bool set = jev_qtype_wire_slot_set(t, (enum jev_qwslot)s), none = t->none & JEV_QWSLOT_BIT(s);
        if (!set && !none) {
            snprintf(why, cap, "%s: slot %s is NULL and not marked none", name, slot);
            return false;
        }
        if (set && none) {
            snprintf(why, cap, "%s: slot %s is marked none but set", name, slot);
            return false;
        }
    }
    /* the options field and its parser go together; without them the options must be fixed */
    if ((t->oa_options == NULL) != (t->oa_parse == NULL)) {
        snprintf(why, cap, "%s: oa_options and oa_parse must be both set or both none", name);
        return false;
    }
    if (t->oa_parse == NULL && (index >= jev_qtype_table_size() || jev_qtype_get(t->type)->fixed_options == NULL)) {
        snprintf(why, cap, "%s: no options field on the OpenAI wire, but decide's table has no fixed options", name);
        return false;
    }
    return true;
}

bool jev_qtype_wire_check_table(char *why, size_t cap) {
    if (N_TABLE != JEV_QTYPE_COUNT) {
        snprintf(why, cap, "the wire table has %d entries for %d types (enum jev_qtype)", N_TABLE, JEV_QTYPE_COUNT);
        return false;
    }
    for (int32_t i = 0; i < N_TABLE; i++) {
        if (!jev_qtype_wire_check(table[i], i, why, cap))
            return false;
        for (int32_t j = 0; j < i; j++)
            if (strcmp(table[j]->oa_name, table[i]->oa_name) == 0) {
                snprintf(why, cap, "types %d and %d are both named \"%s\" on the OpenAI wire", j, i, table[i]->oa_name);
                return false;
            }
    }
    return true;
}
