/*
 * test-qtype.c - the per-type tables (decide/qtype.h, wire/qtype-wire.h):
 * one entry per value of enum jev_qtype in both, each at its own index,
 * every slot set or marked none (and none both), names unique and found by
 * their lookups, and a type's fixed options agreeing with the counts the
 * wire sizes a request's block with. The check functions are also fed
 * broken entries, so that a slot left NULL or a missing entry is seen to
 * fail here rather than crash a request.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "decide/qtype.h"    // defines: jev_qtype_get, jev_qtype_check
#include "wire/qtype-wire.h" // defines: jev_qtype_wire_get, jev_qtype_wire_check

/* ---- the real tables ---- */

/* The types both tables have entries for: past a missing entry the lookups assert, which
 * test_tables_complete reports first. */
static int n_types(void) {
    int n = JEV_QTYPE_COUNT;
    n = jev_qtype_table_size() < n ? jev_qtype_table_size() : n;
    return jev_qtype_wire_table_size() < n ? jev_qtype_wire_table_size() : n;
}

static void test_tables_complete(void **state) {
    (void)state;
    char why[256] = "";
    /* a new enum value without its table entries fails here */
    assert_int_equal(jev_qtype_table_size(), JEV_QTYPE_COUNT);
    assert_int_equal(jev_qtype_wire_table_size(), JEV_QTYPE_COUNT);
    bool ok = jev_qtype_check_table(why, sizeof why);
    if (!ok)
        fail_msg("decide's table: %s", why);
    ok = jev_qtype_wire_check_table(why, sizeof why);
    if (!ok)
        fail_msg("the wire's table: %s", why);
    for (int t = 0; t < n_types(); t++) {
        assert_int_equal(jev_qtype_get((enum jev_qtype)t)->type, t);
        assert_int_equal(jev_qtype_wire_get((enum jev_qtype)t)->type, t);
    }
}

/* Every name leads back to its type, on both wires; outside the enum there is no name. */
static void test_names(void **state) {
    (void)state;
    for (int t = 0; t < n_types(); t++) {
        enum jev_qtype got = JEV_QTYPE_COUNT;
        assert_true(jev_qtype_by_name(jev_qtype_name((enum jev_qtype)t), &got));
        assert_int_equal(got, t);
        got = JEV_QTYPE_COUNT;
        assert_true(jev_qtype_wire_by_oa_name(jev_qtype_wire_get((enum jev_qtype)t)->oa_name, &got));
        assert_int_equal(got, t);
    }
    enum jev_qtype got;
    assert_false(jev_qtype_by_name("predicate", &got)); /* OpenAI's name only */
    assert_false(jev_qtype_wire_by_oa_name("noul", &got));
    assert_false(jev_qtype_by_name("box", &got));
    assert_string_equal(jev_qtype_name(JEV_QTYPE_COUNT), "unknown");
    /* the lists the refusal messages quote (docs/decide.md §3) */
    char buf[128];
    assert_string_equal(jev_qtype_names(buf, sizeof buf), "noul, choice, score");
    assert_string_equal(jev_qtype_wire_oa_names(buf, sizeof buf), "predicate, choice, score");
    assert_string_equal(jev_qtype_names(buf, 8), "noul, c"); /* cut to fit, terminated */
}

/*
 * The wire sizes a request's one block from s1_count / oa_count before any
 * option is filled in; a type with fixed options must count exactly those,
 * or fixed_options would write past the block.
 */
static void test_fixed_options_counted(void **state) {
    (void)state;
    int n_fixed = 0;
    for (int t = 0; t < n_types(); t++) {
        const struct jev_qtype_ops *d = jev_qtype_get((enum jev_qtype)t);
        const struct jev_qtype_wire *w = jev_qtype_wire_get((enum jev_qtype)t);
        if (d->fixed_options == NULL)
            continue;
        n_fixed++;
        struct jev_option opts[JEV_DECIDE_MAX_OPTIONS];
        memset(opts, 0, sizeof opts);
        struct jev_question q = {.id = "q", .type = (enum jev_qtype)t, .options = opts};
        d->fixed_options(&q);
        assert_true(q.n_options >= 1);
        assert_int_equal(w->s1_count(NULL), q.n_options);
        assert_int_equal(w->oa_count(NULL), q.n_options);
        for (int32_t i = 0; i < q.n_options; i++)
            assert_non_null(q.options[i].key);
    }
    assert_int_equal(n_fixed, 1); /* noul */
}

/* Every type reads its labels from a set that is there once built. */
static void test_label_sets(void **state) {
    (void)state;
    static struct jev_labels l; /* zeroed: the sets are the fields, not allocations */
    l.n_choice = 7;
    for (int t = 0; t < n_types(); t++) {
        int32_t n = -1;
        const struct jev_label *set = jev_qtype_get((enum jev_qtype)t)->label_set(&l, &n);
        assert_non_null(set);
        assert_true(n >= 1);
        assert_true((const char *)set >= (const char *)&l && (const char *)(set + n) <= (const char *)(&l + 1));
    }
    int32_t n;
    jev_qtype_get(JEV_QTYPE_CHOICE)->label_set(&l, &n);
    assert_int_equal(n, 7);
}

/* ---- the checks on broken entries ---- */

static void expect_bad(bool ok, const char *why, const char *want) {
    assert_false(ok);
    assert_string_equal(why, want);
}

static void test_check_decide(void **state) {
    (void)state;
    char why[256];
    struct jev_qtype_ops t = *jev_qtype_get(JEV_QTYPE_SCORE);
    assert_true(jev_qtype_check(&t, JEV_QTYPE_SCORE, why, sizeof why));
    /* a slot forgotten: NULL without being marked none */
    t.answer = NULL;
    expect_bad(jev_qtype_check(&t, JEV_QTYPE_SCORE, why, sizeof why), why,
               "score: slot answer is NULL and not marked none");
    /* marked none after all: fine */
    t.none |= JEV_QSLOT_BIT(JEV_QSLOT_ANSWER);
    assert_true(jev_qtype_check(&t, JEV_QTYPE_SCORE, why, sizeof why));
    /* marked none but set */
    t = *jev_qtype_get(JEV_QTYPE_NOUL);
    t.none |= JEV_QSLOT_BIT(JEV_QSLOT_RENDER);
    expect_bad(jev_qtype_check(&t, JEV_QTYPE_NOUL, why, sizeof why), why, "noul: slot render is marked none but set");
    /* every slot is seen: each one NULLed in turn */
    for (int s = 0; s < JEV_QSLOT_COUNT; s++) {
        t = *jev_qtype_get(JEV_QTYPE_CHOICE);
        if (t.none & JEV_QSLOT_BIT(s))
            continue;
        struct jev_qtype_ops z = t;
        switch ((enum jev_qslot)s) {
        case JEV_QSLOT_NAME: z.name = NULL; break;
        case JEV_QSLOT_FIXED_OPTIONS: z.fixed_options = NULL; break;
        case JEV_QSLOT_CANDIDATE: z.candidate = NULL; break;
        case JEV_QSLOT_SUMMARY: z.summary = NULL; break;
        case JEV_QSLOT_LABELS_BUILD: z.labels_build = NULL; break;
        case JEV_QSLOT_LABEL_SET: z.label_set = NULL; break;
        case JEV_QSLOT_RENDER: z.render = NULL; break;
        case JEV_QSLOT_RENDER_GENJSON: z.render_genjson = NULL; break;
        case JEV_QSLOT_ANSWER: z.answer = NULL; break;
        case JEV_QSLOT_COUNT: break;
        }
        assert_false(jev_qtype_check(&z, JEV_QTYPE_CHOICE, why, sizeof why));
        assert_non_null(strstr(why, jev_qtype_slot_name((enum jev_qslot)s)));
    }
    /* at the wrong index, or no entry at all */
    t = *jev_qtype_get(JEV_QTYPE_CHOICE);
    expect_bad(jev_qtype_check(&t, JEV_QTYPE_SCORE, why, sizeof why), why, "choice: at index 2 but its type is 1");
    expect_bad(jev_qtype_check(NULL, 3, why, sizeof why), why, "type 3: no table entry");
    /* none bits past the slots */
    t.none = JEV_QSLOT_BIT(JEV_QSLOT_COUNT) | JEV_QSLOT_BIT(JEV_QSLOT_FIXED_OPTIONS);
    assert_false(jev_qtype_check(&t, JEV_QTYPE_CHOICE, why, sizeof why));
}

static void test_check_wire(void **state) {
    (void)state;
    char why[256];
    struct jev_qtype_wire t = *jev_qtype_wire_get(JEV_QTYPE_CHOICE);
    assert_true(jev_qtype_wire_check(&t, JEV_QTYPE_CHOICE, why, sizeof why));
    t.s1_answer = NULL;
    expect_bad(jev_qtype_wire_check(&t, JEV_QTYPE_CHOICE, why, sizeof why), why,
               "choice: slot s1_answer is NULL and not marked none");
    /* an options field without its parser, marked none to get past the slot check */
    t = *jev_qtype_wire_get(JEV_QTYPE_CHOICE);
    t.oa_parse = NULL;
    t.none |= JEV_QWSLOT_BIT(JEV_QWSLOT_OA_PARSE);
    expect_bad(jev_qtype_wire_check(&t, JEV_QTYPE_CHOICE, why, sizeof why), why,
               "choice: oa_options and oa_parse must be both set or both none");
    /* no options field for a type whose options are not fixed */
    t.oa_options = NULL;
    t.none |= JEV_QWSLOT_BIT(JEV_QWSLOT_OA_OPTIONS);
    expect_bad(jev_qtype_wire_check(&t, JEV_QTYPE_CHOICE, why, sizeof why), why,
               "choice: no options field on the OpenAI wire, but decide's table has no fixed options");
    /* the predicate has none of either, and is fine */
    t = *jev_qtype_wire_get(JEV_QTYPE_NOUL);
    assert_true(jev_qtype_wire_check(&t, JEV_QTYPE_NOUL, why, sizeof why));
    t.none &= ~JEV_QWSLOT_BIT(JEV_QWSLOT_OA_PARSE);
    expect_bad(jev_qtype_wire_check(&t, JEV_QTYPE_NOUL, why, sizeof why), why,
               "predicate: slot oa_parse is NULL and not marked none");
    expect_bad(jev_qtype_wire_check(NULL, 3, why, sizeof why), why, "type 3: no wire table entry");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tables_complete),       cmocka_unit_test(test_names),
        cmocka_unit_test(test_fixed_options_counted), cmocka_unit_test(test_label_sets),
        cmocka_unit_test(test_check_decide),          cmocka_unit_test(test_check_wire),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
