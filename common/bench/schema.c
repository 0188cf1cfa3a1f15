/*
 * schema.c - loading and validating "jev-bench/2" raw benchmark records (and
 * "jev-bench/1", the same without the precision fields), and the atomic file
 * writer that records and reports share.
 *
 * What it is: a table-driven checker. Each JSON object of the schema has a
 * table of its fields (name, allowed JSON types); a generic pass checks
 * presence, types and unknown keys, then per-object code checks ranges and
 * the cross references (every run's count and path in the settings, one
 * sample per repeat, one agreement per count, a single memory kind).
 *
 * What it is not: a JSON-schema engine, or the renderer. The field meanings
 * are in docs/bench-schema.md.
 *
 * Constraints: input is hostile (files from other machines, peers, fuzzers).
 * The first problem found is reported with its JSON path; nothing here
 * aborts on bad input. After jev_bench_validate succeeds, every accessor in
 * report.c may assume the types and ranges checked here.
 */
#include "common/bench/schema.h" // defines: jev_bench_validate, jev_bench_load_*, jev_bench_file_write

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/read-file.h" // defines: jev_read_file

/* ---- field tables ---- */

/* Allowed JSON types of a field, as a bit set; F_OPT marks an optional field. */
enum {
    J_STR = 1 << 0,  /* a string */
    J_INT = 1 << 1,  /* an integer (a JSON number without fraction or exponent) */
    J_NUM = 1 << 2,  /* any number */
    J_BOOL = 1 << 3, /* true / false */
    J_NULL = 1 << 4, /* null: "not recorded" */
    J_OBJ = 1 << 5,  /* an object */
    J_ARR = 1 << 6,  /* an array */
    F_OPT = 1 << 7,  /* the key may be absent */
};

struct field {
    const char *key; /* the JSON key */
    unsigned types;  /* J_* bits, plus F_OPT */
};

#define PATH_MAX_TEXT 256 /* longest JSON path kept in a message (longer ones are cut) */

/* What the settings declared, for the cross checks of runs and agreement. */
struct vstate {
    int version;                                                   /* 1 or 2: the schema's */
    bool peer;                                                     /* environment.peer is an object */
    const char *precision;                                         /* settings.precision (v2), NULL when null */
    long long counts[JEV_BENCH_MAX_COUNTS];                        /* settings.counts */
    int n_counts;                                                  /* entries of counts */
    const char *paths[JEV_BENCH_MAX_PATHS];                        /* settings.paths (borrowed from the tree) */
    int n_paths;                                                   /* entries of paths */
    long long repeats;                                             /* settings.repeats */
    const char *peak_where;                                        /* the first non-null sample peak_where */
    unsigned char seen[JEV_BENCH_MAX_COUNTS][JEV_BENCH_MAX_PATHS]; /* runs present */
};

/* "a string", "an integer", ...: the "got ..." half of a type message. */
static const char *json_kind(const json_t *j) {
    switch (json_typeof(j)) {
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number with a fraction";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    }
    return "an unknown value";
}

/* Whether j has one of the allowed types. An integer satisfies J_NUM, a
 * real never satisfies J_INT: counts written as 12.0 are refused, because
 * a count with a fraction means the writer computed something else. */
static bool type_ok(const json_t *j, unsigned types) {
    switch (json_typeof(j)) {
    case JSON_STRING: return types & J_STR;
    case JSON_INTEGER: return types & (J_INT | J_NUM);
    case JSON_REAL: return types & J_NUM;
    case JSON_TRUE:
    case JSON_FALSE: return types & J_BOOL;
    case JSON_NULL: return types & J_NULL;
    case JSON_OBJECT: return types & J_OBJ;
    case JSON_ARRAY: return types & J_ARR;
    }
    return false;
}

/* "a string or null" for the message of a type mismatch. */
static void types_text(unsigned types, char *buf, size_t size) {
    static const struct {
        unsigned bit;
        const char *name;
    } names[] = {{J_STR, "a string"},  {J_INT, "an integer"}, {J_NUM, "a number"}, {J_BOOL, "a boolean"},
                 {J_OBJ, "an object"}, {J_ARR, "an array"},   {J_NULL, "null"}};
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (!(types & names[i].bit))
            continue;
        int w = snprintf(buf + len, size - len, "%s%s", len ? " or " : "", names[i].name);
        if (w < 0 || (size_t)w >= size - len)
            return;
        len += (size_t)w;
    }
}

/* Child paths: "$.a" + "b" -> "$.a.b"; "$.a" + 3 -> "$.a[3]". */
static void path_key(char out[PATH_MAX_TEXT], const char *at, const char *key) {
    if (snprintf(out, PATH_MAX_TEXT, "%s.%.64s", at, key) >= PATH_MAX_TEXT)
        memcpy(out + PATH_MAX_TEXT - 4, "...", 4); /* cut: still names where it starts */
}

/* See path_key. */
static void path_index(char out[PATH_MAX_TEXT], const char *at, size_t i) {
    if (snprintf(out, PATH_MAX_TEXT, "%s[%zu]", at, i) >= PATH_MAX_TEXT)
        memcpy(out + PATH_MAX_TEXT - 4, "...", 4);
}

/* Presence, types and unknown keys of one object. "extra" (an object of
 * free-form additions) is accepted where allow_extra is set. */
static enum jev_status check_object(const json_t *obj, const char *at, const struct field *fields, size_t n,
                                    bool allow_extra, struct jev_error *err) {
    char sub[PATH_MAX_TEXT];
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_object_get(obj, fields[i].key);
        path_key(sub, at, fields[i].key);
        if (v == NULL) {
            if (fields[i].types & F_OPT)
                continue;
            return jev_fail(err, JEV_ERR_FORMAT, "%s: missing field", sub);
        }
        if (!type_ok(v, fields[i].types)) {
            char want[96];
            types_text(fields[i].types, want, sizeof want);
            return jev_fail(err, JEV_ERR_FORMAT, "%s: expected %s, got %s", sub, want, json_kind(v));
        }
    }
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)(uintptr_t)obj, key, v) {
        bool known = false;
        for (size_t i = 0; i < n && !known; i++)
            known = !strcmp(key, fields[i].key);
        if (known)
            continue;
        path_key(sub, at, key);
        if (allow_extra && !strcmp(key, "extra")) {
            if (!json_is_object(v))
                return jev_fail(err, JEV_ERR_FORMAT, "%s: expected an object, got %s", sub, json_kind(v));
            continue;
        }
        return jev_fail(err, JEV_ERR_FORMAT, "%s: unknown field (not in the jev-bench schema)", sub);
    }
    return JEV_OK;
}

/* ---- value checks ---- */

/* A number field (present, type already checked) within [lo, hi]; null passes. */
static enum jev_status check_num(const json_t *obj, const char *at, const char *key, double lo, double hi,
                                 struct jev_error *err) {
    const json_t *v = json_object_get(obj, key);
    if (v == NULL || json_is_null(v))
        return JEV_OK;
    double x = json_number_value(v);
    if (!isfinite(x) || x < lo || x > hi) {
        char sub[PATH_MAX_TEXT];
        path_key(sub, at, key);
        return jev_fail(err, JEV_ERR_FORMAT, "%s: %g is out of range [%g, %g]", sub, x, lo, hi);
    }
    return JEV_OK;
}

/* A string field that must be one of a NULL-terminated list; null passes. */
static enum jev_status check_enum(const json_t *obj, const char *at, const char *key, const char *const *allowed,
                                  struct jev_error *err) {
    const json_t *v = json_object_get(obj, key);
    if (v == NULL || !json_is_string(v))
        return JEV_OK;
    const char *s = json_string_value(v);
    char list[160] = "";
    for (size_t i = 0; allowed[i]; i++) {
        if (!strcmp(s, allowed[i]))
            return JEV_OK;
        size_t len = strlen(list);
        snprintf(list + len, sizeof list - len, "%s\"%s\"", i ? ", " : "", allowed[i]);
    }
    char sub[PATH_MAX_TEXT];
    path_key(sub, at, key);
    return jev_fail(err, JEV_ERR_FORMAT, "%s: \"%.40s\" is not one of %s", sub, s, list);
}

/* A sha256 field: 64 lowercase hex digits, or null. */
static enum jev_status check_sha256(const json_t *obj, const char *at, const char *key, struct jev_error *err) {
    const json_t *v = json_object_get(obj, key);
    if (v == NULL || !json_is_string(v))
        return JEV_OK;
    const char *s = json_string_value(v);
    size_t n = strlen(s);
    bool ok = n == 64;
    for (size_t i = 0; ok && i < n; i++)
        ok = (s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f');
    if (ok)
        return JEV_OK;
    char sub[PATH_MAX_TEXT];
    path_key(sub, at, key);
    return jev_fail(err, JEV_ERR_FORMAT, "%s: expected 64 lowercase hex digits", sub);
}

/* A string field that must not be empty. */
static enum jev_status check_nonempty(const json_t *obj, const char *at, const char *key, struct jev_error *err) {
    const json_t *v = json_object_get(obj, key);
    if (v == NULL || !json_is_string(v) || json_string_length(v) > 0)
        return JEV_OK;
    char sub[PATH_MAX_TEXT];
    path_key(sub, at, key);
    return jev_fail(err, JEV_ERR_FORMAT, "%s: must not be empty", sub);
}

/* A path name: [a-z][a-z0-9_]*, at most JEV_BENCH_MAX_PATH_NAME characters. */
static bool path_name_ok(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > JEV_BENCH_MAX_PATH_NAME || s[0] < 'a' || s[0] > 'z')
        return false;
    for (size_t i = 1; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
            return false;
    return true;
}

/* ---- environment ---- */

/* The environment: shape of every sub-object, hashes as 64 lowercase hex
 * digits, dimensions and core counts positive. Values are mostly
 * informational, so null is allowed wherever a writer may not know. */
static enum jev_status check_environment(const json_t *env, const char *at, struct jev_error *err) {
    static const struct field f_env[] = {
        {"peer", J_OBJ | J_NULL},
        {"jev", J_OBJ},
        {"model", J_OBJ},
        {"image", J_OBJ},
        {"libraries", J_OBJ},
        {"compiler", J_STR | J_NULL},
        {"cpu", J_OBJ},
        {"backend", J_STR},
        {"gpu", J_OBJ | J_NULL},
        {"date", J_STR | J_NULL},
        {"machine", J_STR | J_NULL},
        {"os", J_STR | J_NULL},
    };
    static const struct field f_peer[] = {{"name", J_STR}, {"version", J_STR | J_NULL}};
    static const struct field f_jev[] = {{"version", J_STR | J_NULL}, {"git_commit", J_STR | J_NULL}};
    static const struct field f_model[] = {
        {"id", J_STR}, {"dir", J_STR | J_NULL}, {"synthetic", J_BOOL | J_NULL}, {"weights", J_ARR}};
    static const struct field f_weight[] = {{"file", J_STR}, {"bytes", J_INT | J_NULL}, {"sha256", J_STR | J_NULL}};
    static const struct field f_image[] = {{"path", J_STR | J_NULL},          {"sha256", J_STR | J_NULL},
                                           {"width", J_INT | J_NULL},         {"height", J_INT | J_NULL},
                                           {"resized_width", J_INT | J_NULL}, {"resized_height", J_INT | J_NULL}};
    static const struct field f_cpu[] = {
        {"model", J_STR | J_NULL}, {"cores", J_INT | J_NULL}, {"threads", J_INT | J_NULL}};
    static const struct field f_gpu[] = {{"name", J_STR}, {"driver", J_STR | J_NULL}, {"memory_bytes", J_INT | J_NULL}};
    char sub[PATH_MAX_TEXT], sub2[PATH_MAX_TEXT];

    JEV_TRY(check_object(env, at, f_env, sizeof f_env / sizeof f_env[0], true, err));
    JEV_TRY(check_nonempty(env, at, "backend", err));
    const json_t *peer = json_object_get(env, "peer");
    if (json_is_object(peer)) {
        path_key(sub, at, "peer");
        JEV_TRY(check_object(peer, sub, f_peer, 2, false, err));
        JEV_TRY(check_nonempty(peer, sub, "name", err));
    }
    path_key(sub, at, "jev");
    JEV_TRY(check_object(json_object_get(env, "jev"), sub, f_jev, 2, false, err));

    const json_t *model = json_object_get(env, "model");
    path_key(sub, at, "model");
    JEV_TRY(check_object(model, sub, f_model, 4, false, err));
    JEV_TRY(check_nonempty(model, sub, "id", err));
    const json_t *weights = json_object_get(model, "weights");
    char wat[PATH_MAX_TEXT];
    path_key(wat, sub, "weights");
    for (size_t i = 0; i < json_array_size(weights); i++) {
        const json_t *w = json_array_get(weights, i);
        path_index(sub2, wat, i);
        if (!json_is_object(w))
            return jev_fail(err, JEV_ERR_FORMAT, "%s: expected an object, got %s", sub2, json_kind(w));
        JEV_TRY(check_object(w, sub2, f_weight, 3, false, err));
        JEV_TRY(check_num(w, sub2, "bytes", 0, JEV_BENCH_MAX_COUNT_VALUE, err));
        JEV_TRY(check_sha256(w, sub2, "sha256", err));
    }

    const json_t *image = json_object_get(env, "image");
    path_key(sub, at, "image");
    JEV_TRY(check_object(image, sub, f_image, 6, false, err));
    JEV_TRY(check_sha256(image, sub, "sha256", err));
    static const char *const dims[] = {"width", "height", "resized_width", "resized_height"};
    for (size_t i = 0; i < 4; i++)
        JEV_TRY(check_num(image, sub, dims[i], 1, 1 << 20, err));

    const json_t *libs = json_object_get(env, "libraries");
    const char *key;
    const json_t *v;
    path_key(sub, at, "libraries");
    json_object_foreach((json_t *)(uintptr_t)libs, key, v) {
        if (!json_is_string(v)) {
            path_key(sub2, sub, key);
            return jev_fail(err, JEV_ERR_FORMAT, "%s: expected a string, got %s", sub2, json_kind(v));
        }
    }

    const json_t *cpu = json_object_get(env, "cpu");
    path_key(sub, at, "cpu");
    JEV_TRY(check_object(cpu, sub, f_cpu, 3, false, err));
    JEV_TRY(check_num(cpu, sub, "cores", 1, 1 << 20, err));
    JEV_TRY(check_num(cpu, sub, "threads", 1, 1 << 20, err));

    const json_t *gpu = json_object_get(env, "gpu");
    if (json_is_object(gpu)) {
        path_key(sub, at, "gpu");
        JEV_TRY(check_object(gpu, sub, f_gpu, 3, false, err));
        JEV_TRY(check_num(gpu, sub, "memory_bytes", 0, JEV_BENCH_MAX_COUNT_VALUE, err));
    }
    return JEV_OK;
}

/* ---- settings ---- */

/* The settings, and the facts later checks need: the counts (strictly
 * increasing, so rows have one order), the paths (unique, name-shaped) and
 * the repeat count. */
static enum jev_status check_settings(const json_t *set, const char *at, struct vstate *st, struct jev_error *err) {
    static const struct field f_set[] = {
        {"counts", J_ARR},
        {"repeats", J_INT},
        {"warmup", J_INT},
        {"batch", J_INT | J_STR},
        {"paths", J_ARR},
        {"scoring", J_STR},
        {"image_max_side", J_INT},
        {"prefill_chunk", J_INT | J_NULL},
        {"max_new_tokens_min", J_INT | J_NULL},
        {"max_new_tokens_per_decision", J_INT | J_NULL},
        {"order", J_STR},
        {"workload", J_STR | J_NULL},
        {"precision", J_STR | J_NULL}, /* version 2 on: the last entry, so that version 1 leaves it out */
    };
    static const char *const scorings[] = {"label", "multi_token", NULL};
    static const char *const orders[] = {"rotated", "fixed", NULL};
    static const char *const precisions[] = {"exact", "fast", NULL};
    char sub[PATH_MAX_TEXT], sub2[PATH_MAX_TEXT];

    size_t n_set = sizeof f_set / sizeof f_set[0] - (st->version == 1 ? 1 : 0);
    JEV_TRY(check_object(set, at, f_set, n_set, true, err));
    JEV_TRY(check_enum(set, at, "precision", precisions, err));
    st->precision = json_string_value(json_object_get(set, "precision"));
    JEV_TRY(check_num(set, at, "repeats", 1, JEV_BENCH_MAX_REPEATS, err));
    JEV_TRY(check_num(set, at, "warmup", 0, 1000, err));
    JEV_TRY(check_num(set, at, "image_max_side", 1, 1 << 20, err));
    JEV_TRY(check_num(set, at, "prefill_chunk", 1, 1 << 24, err));
    JEV_TRY(check_num(set, at, "max_new_tokens_min", 0, 1 << 24, err));
    JEV_TRY(check_num(set, at, "max_new_tokens_per_decision", 0, 1 << 24, err));
    JEV_TRY(check_enum(set, at, "scoring", scorings, err));
    JEV_TRY(check_enum(set, at, "order", orders, err));
    const json_t *batch = json_object_get(set, "batch");
    if (json_is_string(batch)) {
        static const char *const alls[] = {"all", NULL};
        JEV_TRY(check_enum(set, at, "batch", alls, err));
    } else {
        JEV_TRY(check_num(set, at, "batch", 1, JEV_BENCH_MAX_DECISIONS, err));
    }
    st->repeats = json_integer_value(json_object_get(set, "repeats"));

    const json_t *counts = json_object_get(set, "counts");
    path_key(sub, at, "counts");
    size_t nc = json_array_size(counts);
    if (nc == 0 || nc > JEV_BENCH_MAX_COUNTS)
        return jev_fail(err, JEV_ERR_FORMAT, "%s: expected 1 to %d counts, got %zu", sub, JEV_BENCH_MAX_COUNTS, nc);
    for (size_t i = 0; i < nc; i++) {
        const json_t *c = json_array_get(counts, i);
        path_index(sub2, sub, i);
        if (!json_is_integer(c))
            return jev_fail(err, JEV_ERR_FORMAT, "%s: expected an integer, got %s", sub2, json_kind(c));
        long long x = json_integer_value(c);
        if (x < 1 || x > JEV_BENCH_MAX_DECISIONS)
            return jev_fail(err, JEV_ERR_FORMAT, "%s: %lld is out of range [1, %d]", sub2, x, JEV_BENCH_MAX_DECISIONS);
        if (i > 0 && x <= st->counts[i - 1])
            return jev_fail(err, JEV_ERR_FORMAT, "%s: counts must be strictly increasing", sub2);
        st->counts[i] = x;
    }
    st->n_counts = (int)nc;

    const json_t *paths = json_object_get(set, "paths");
    path_key(sub, at, "paths");
    size_t np = json_array_size(paths);
    if (np == 0 || np > JEV_BENCH_MAX_PATHS)
        return jev_fail(err, JEV_ERR_FORMAT, "%s: expected 1 to %d paths, got %zu", sub, JEV_BENCH_MAX_PATHS, np);
    for (size_t i = 0; i < np; i++) {
        const json_t *p = json_array_get(paths, i);
        path_index(sub2, sub, i);
        if (!json_is_string(p))
            return jev_fail(err, JEV_ERR_FORMAT, "%s: expected a string, got %s", sub2, json_kind(p));
        const char *s = json_string_value(p);
        if (!path_name_ok(s))
            return jev_fail(err, JEV_ERR_FORMAT, "%s: path name must match [a-z][a-z0-9_]* (at most %d characters)",
                            sub2, JEV_BENCH_MAX_PATH_NAME);
        for (size_t j = 0; j < i; j++)
            if (!strcmp(s, st->paths[j]))
                return jev_fail(err, JEV_ERR_FORMAT, "%s: path \"%s\" listed twice", sub2, s);
        st->paths[i] = s;
    }
    st->n_paths = (int)np;
    return JEV_OK;
}

/* ---- runs ---- */

/* Index of a count in settings.counts, or -1. */
static int count_index(const struct vstate *st, long long c) {
    for (int i = 0; i < st->n_counts; i++)
        if (st->counts[i] == c)
            return i;
    return -1;
}

/* Index of a path in settings.paths, or -1. */
static int path_index_of(const struct vstate *st, const char *p) {
    for (int i = 0; i < st->n_paths; i++)
        if (!strcmp(st->paths[i], p))
            return i;
    return -1;
}

/* One decision's candidates: unique option ids, a choice among them, and
 * probabilities in [0, 1] that sum to 1 (label scoring normalizes). */
static enum jev_status check_decision(const json_t *d, const char *at, struct jev_error *err) {
    static const struct field f_dec[] = {
        {"id", J_STR}, {"choice", J_STR | J_NULL}, {"options", J_ARR}, {"probs", J_ARR | J_NULL}};
    char sub[PATH_MAX_TEXT], sub2[PATH_MAX_TEXT];
    if (!json_is_object(d))
        return jev_fail(err, JEV_ERR_FORMAT, "%s: expected an object, got %s", at, json_kind(d));
    JEV_TRY(check_object(d, at, f_dec, 4, false, err));
    const json_t *options = json_object_get(d, "options");
    size_t n = json_array_size(options);
    path_key(sub, at, "options");
    if (n == 0 || n > JEV_BENCH_MAX_OPTIONS)
        return jev_fail(err, JEV_ERR_FORMAT, "%s: expected 1 to %d options, got %zu", sub, JEV_BENCH_MAX_OPTIONS, n);
    for (size_t i = 0; i < n; i++) {
        const json_t *o = json_array_get(options, i);
        path_index(sub2, sub, i);
        if (!json_is_string(o))
            return jev_fail(err, JEV_ERR_FORMAT, "%s: expected a string, got %s", sub2, json_kind(o));
        for (size_t j = 0; j < i; j++)
            if (json_equal(o, json_array_get(options, j)))
                return jev_fail(err, JEV_ERR_FORMAT, "%s: option listed twice", sub2);
    }
    const json_t *choice = json_object_get(d, "choice");
    if (json_is_string(choice)) {
        bool found = false;
        for (size_t i = 0; i < n && !found; i++)
            found = json_equal(choice, json_array_get(options, i));
        if (!found) {
            path_key(sub2, at, "choice");
            return jev_fail(err, JEV_ERR_FORMAT, "%s: \"%.40s\" is not one of the options", sub2,
                            json_string_value(choice));
        }
    }
    const json_t *probs = json_object_get(d, "probs");
    if (json_is_array(probs)) {
        path_key(sub, at, "probs");
        if (json_array_size(probs) != n)
            return jev_fail(err, JEV_ERR_FORMAT, "%s: expected %zu probabilities (one per option), got %zu", sub, n,
                            json_array_size(probs));
        double sum = 0.0;
        for (size_t i = 0; i < n; i++) {
            const json_t *p = json_array_get(probs, i);
            path_index(sub2, sub, i);
            if (!json_is_number(p))
                return jev_fail(err, JEV_ERR_FORMAT, "%s: expected a number, got %s", sub2, json_kind(p));
            double x = json_number_value(p);
            if (!(x >= 0.0 && x <= 1.0))
                return jev_fail(err, JEV_ERR_FORMAT, "%s: probability %g is out of range [0, 1]", sub2, x);
            sum += x;
        }
        /* f32 softmax over a handful of candidates sums to 1 within ~1e-6; 1e-3 also admits rounded peers */
        if (fabs(sum - 1.0) > 1e-3)
            return jev_fail(err, JEV_ERR_FORMAT, "%s: probabilities sum to %.6f, not 1", sub, sum);
    }
    return JEV_OK;
}

/* True when a and b agree to a relative tolerance (or are both ~0). */
static bool near(double a, double b, double rel) { return fabs(a - b) <= rel * fmax(fabs(a), fabs(b)) + 1e-12; }

/* One sample: shape, ranges, one use per repeat, one memory kind per file,
 * decisions/s consistent with total_ms and validity (so a reader can trust
 * either), generated output only on generate_json, and per-decision
 * results matching the run's decision count. */
static enum jev_status check_sample(const json_t *s, const char *at, long long decisions, const char *path,
                                    unsigned char *seen_repeat, struct vstate *st, struct jev_error *err) {
    static const struct field f_sample[] = {
        {"repeat", J_INT},
        {"order", J_INT | J_NULL},
        {"total_ms", J_NUM},
        {"vision_ms", J_NUM | J_NULL},
        {"prefill_ms", J_NUM | J_NULL},
        {"scoring_ms", J_NUM | J_NULL},
        {"lm_forwards", J_INT | J_NULL},
        {"vision_forwards", J_INT | J_NULL},
        {"peak_bytes", J_INT | J_NULL},
        {"peak_where", J_STR | J_NULL},
        {"requested_decisions_per_s", J_NUM},
        {"valid_decisions_per_s", J_NUM},
        {"valid", J_BOOL},
        {"output", J_STR | J_NULL},
        {"decisions", J_ARR | J_NULL},
    };
    static const char *const wheres[] = {"cpu", "cuda", "metal", NULL};
    char sub[PATH_MAX_TEXT], sub2[PATH_MAX_TEXT];
    if (!json_is_object(s))
        return jev_fail(err, JEV_ERR_FORMAT, "%s: expected an object, got %s", at, json_kind(s));
    JEV_TRY(check_object(s, at, f_sample, sizeof f_sample / sizeof f_sample[0], true, err));

    JEV_TRY(check_num(s, at, "repeat", 0, (double)(st->repeats - 1), err));
    long long rep = json_integer_value(json_object_get(s, "repeat"));
    if (seen_repeat[rep]) {
        path_key(sub, at, "repeat");
        return jev_fail(err, JEV_ERR_FORMAT, "%s: repeat %lld appears twice in this run", sub, rep);
    }
    seen_repeat[rep] = 1;
    JEV_TRY(check_num(s, at, "order", 0, JEV_BENCH_MAX_PATHS - 1, err));
    JEV_TRY(check_num(s, at, "total_ms", JEV_BENCH_MIN_MS, JEV_BENCH_MAX_MS, err));
    JEV_TRY(check_num(s, at, "vision_ms", 0, JEV_BENCH_MAX_MS, err));
    JEV_TRY(check_num(s, at, "prefill_ms", 0, JEV_BENCH_MAX_MS, err));
    JEV_TRY(check_num(s, at, "scoring_ms", 0, JEV_BENCH_MAX_MS, err));
    JEV_TRY(check_num(s, at, "lm_forwards", 0, JEV_BENCH_MAX_COUNT_VALUE, err));
    JEV_TRY(check_num(s, at, "vision_forwards", 0, JEV_BENCH_MAX_COUNT_VALUE, err));
    JEV_TRY(check_num(s, at, "peak_bytes", 0, JEV_BENCH_MAX_COUNT_VALUE, err));
    JEV_TRY(check_enum(s, at, "peak_where", wheres, err));

    /* one memory kind per file, so the table can name it in its header */
    const json_t *where = json_object_get(s, "peak_where");
    if (json_is_string(where)) {
        if (st->peak_where == NULL) {
            st->peak_where = json_string_value(where);
        } else if (strcmp(st->peak_where, json_string_value(where))) {
            path_key(sub, at, "peak_where");
            return jev_fail(err, JEV_ERR_FORMAT, "%s: \"%s\" differs from \"%s\" earlier in the file", sub,
                            json_string_value(where), st->peak_where);
        }
    } else if (!json_is_null(json_object_get(s, "peak_bytes"))) {
        path_key(sub, at, "peak_where");
        return jev_fail(err, JEV_ERR_FORMAT, "%s: required when peak_bytes is recorded", sub);
    }

    /* decisions/s follow from total_ms and validity; 1e-3 admits rounded writers */
    double total = json_number_value(json_object_get(s, "total_ms"));
    double req = json_number_value(json_object_get(s, "requested_decisions_per_s"));
    double val = json_number_value(json_object_get(s, "valid_decisions_per_s"));
    double want = (double)decisions * 1000.0 / total;
    if (!near(req, want, 1e-3)) {
        path_key(sub, at, "requested_decisions_per_s");
        return jev_fail(err, JEV_ERR_FORMAT, "%s: %g is not decisions / total time (%g)", sub, req, want);
    }
    bool valid = json_is_true(json_object_get(s, "valid"));
    if (valid ? !near(val, req, 1e-3) : val != 0.0) {
        path_key(sub, at, "valid_decisions_per_s");
        return jev_fail(err, JEV_ERR_FORMAT, "%s: must be %s", sub,
                        valid ? "requested_decisions_per_s for a valid sample" : "0 for an invalid sample");
    }
    if (!json_is_null(json_object_get(s, "output")) && strcmp(path, JEV_BENCH_PATH_GENERATE)) {
        path_key(sub, at, "output");
        return jev_fail(err, JEV_ERR_FORMAT, "%s: only %s samples carry a generated output", sub,
                        JEV_BENCH_PATH_GENERATE);
    }

    const json_t *decs = json_object_get(s, "decisions");
    if (json_is_array(decs)) {
        path_key(sub, at, "decisions");
        if ((long long)json_array_size(decs) != decisions)
            return jev_fail(err, JEV_ERR_FORMAT, "%s: expected %lld entries (one per decision), got %zu", sub,
                            decisions, json_array_size(decs));
        for (size_t i = 0; i < json_array_size(decs); i++) {
            path_index(sub2, sub, i);
            JEV_TRY(check_decision(json_array_get(decs, i), sub2, err));
        }
    }
    return JEV_OK;
}

/* Medians published without samples (reference records): numbers only. */
static enum jev_status check_published(const json_t *pm, const char *at, struct jev_error *err) {
    static const struct field f_pm[] = {
        {"total_ms", J_NUM | F_OPT},    {"vision_ms", J_NUM | F_OPT},
        {"prefill_ms", J_NUM | F_OPT},  {"scoring_ms", J_NUM | F_OPT},
        {"lm_forwards", J_NUM | F_OPT}, {"vision_forwards", J_NUM | F_OPT},
        {"peak_bytes", J_NUM | F_OPT},  {"requested_decisions_per_s", J_NUM | F_OPT},
    };
    JEV_TRY(check_object(pm, at, f_pm, sizeof f_pm / sizeof f_pm[0], false, err));
    for (size_t i = 0; i < sizeof f_pm / sizeof f_pm[0]; i++) {
        double hi = i < 4 ? JEV_BENCH_MAX_MS : JEV_BENCH_MAX_COUNT_VALUE;
        JEV_TRY(check_num(pm, at, f_pm[i].key, 0, hi, err));
    }
    return JEV_OK;
}

/* One run: its count and path exist in the settings and appear once, and
 * it holds exactly settings.repeats samples (no silent drop of a slow or
 * failed repeat). */
static enum jev_status check_run(const json_t *run, const char *at, struct vstate *st, struct jev_error *err) {
    static const struct field f_run[] = {
        {"decisions", J_INT}, {"path", J_STR}, {"samples", J_ARR}, {"published_medians", J_OBJ | F_OPT}};
    char sub[PATH_MAX_TEXT], sub2[PATH_MAX_TEXT];
    if (!json_is_object(run))
        return jev_fail(err, JEV_ERR_FORMAT, "%s: expected an object, got %s", at, json_kind(run));
    JEV_TRY(check_object(run, at, f_run, 4, true, err));

    long long decisions = json_integer_value(json_object_get(run, "decisions"));
    int ci = count_index(st, decisions);
    if (ci < 0) {
        path_key(sub, at, "decisions");
        return jev_fail(err, JEV_ERR_FORMAT, "%s: %lld is not in settings.counts", sub, decisions);
    }
    const char *path = json_string_value(json_object_get(run, "path"));
    int pi = path_index_of(st, path);
    if (pi < 0) {
        path_key(sub, at, "path");
        return jev_fail(err, JEV_ERR_FORMAT, "%s: \"%.40s\" is not in settings.paths", sub, path);
    }
    if (st->seen[ci][pi]) {
        return jev_fail(err, JEV_ERR_FORMAT, "%s: a second run for (%lld, %s)", at, decisions, path);
    }
    st->seen[ci][pi] = 1;

    const json_t *samples = json_object_get(run, "samples");
    path_key(sub, at, "samples");
    if ((long long)json_array_size(samples) != st->repeats)
        return jev_fail(err, JEV_ERR_FORMAT, "%s: expected %lld samples (settings.repeats), got %zu", sub, st->repeats,
                        json_array_size(samples));
    unsigned char seen_repeat[JEV_BENCH_MAX_REPEATS] = {0};
    for (size_t i = 0; i < json_array_size(samples); i++) {
        path_index(sub2, sub, i);
        JEV_TRY(check_sample(json_array_get(samples, i), sub2, decisions, path, seen_repeat, st, err));
    }
    const json_t *pm = json_object_get(run, "published_medians");
    if (pm != NULL) {
        path_key(sub, at, "published_medians");
        JEV_TRY(check_published(pm, sub, err));
    }
    return JEV_OK;
}

/* ---- agreement ---- */

/* fast_vs_exact of one agreement entry (version 2): null on a record that is not jev's fast one; on
 * jev's fast record an object with an entry for every path of the settings (the mode's cost is
 * measured, never assumed), each {max_prob_delta, argmax_agreement}, numbers in [0, 1] or null. */
static enum jev_status check_vs_exact(const json_t *a, const char *at, const struct vstate *st, struct jev_error *err) {
    static const struct field f_fx[] = {{"max_prob_delta", J_NUM | J_NULL}, {"argmax_agreement", J_NUM | J_NULL}};
    char sub[PATH_MAX_TEXT], sub2[PATH_MAX_TEXT];
    const json_t *fx = json_object_get(a, "fast_vs_exact");
    path_key(sub, at, "fast_vs_exact");
    bool fast = st->precision && !strcmp(st->precision, "fast");
    if (json_is_null(fx)) {
        if (fast && !st->peer)
            return jev_fail(err, JEV_ERR_FORMAT, "%s: a fast record must compare with exact (null here)", sub);
        return JEV_OK;
    }
    if (!fast)
        return jev_fail(err, JEV_ERR_FORMAT, "%s: only a record of settings.precision \"fast\" has it", sub);
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)(uintptr_t)fx, key, v) {
        path_key(sub2, sub, key);
        if (path_index_of(st, key) < 0)
            return jev_fail(err, JEV_ERR_FORMAT, "%s: \"%.40s\" is not in settings.paths", sub2, key);
        if (!json_is_object(v))
            return jev_fail(err, JEV_ERR_FORMAT, "%s: expected an object, got %s", sub2, json_kind(v));
        JEV_TRY(check_object(v, sub2, f_fx, 2, false, err));
        JEV_TRY(check_num(v, sub2, "max_prob_delta", 0, 1, err));
        JEV_TRY(check_num(v, sub2, "argmax_agreement", 0, 1, err));
    }
    for (int i = 0; i < st->n_paths; i++)
        if (!json_object_get(fx, st->paths[i]))
            return jev_fail(err, JEV_ERR_FORMAT, "%s: no entry for path %s", sub, st->paths[i]);
    return JEV_OK;
}

/* Exactly one agreement entry per count, fractions and deltas in [0, 1]. */
static enum jev_status check_agreement(const json_t *arr, const char *at, const struct vstate *st,
                                       struct jev_error *err) {
    static const struct field f_ag[] = {{"decisions", J_INT},
                                        {"direct_shared_max_prob_delta", J_NUM | J_NULL},
                                        {"argmax_agreement", J_NUM | J_NULL},
                                        {"generated_shared_agreement", J_NUM | J_NULL},
                                        {"fast_vs_exact", J_OBJ | J_NULL}}; /* version 2 on: the last entry */
    const size_t n_ag = sizeof f_ag / sizeof f_ag[0] - (st->version == 1 ? 1 : 0);
    char sub[PATH_MAX_TEXT];
    unsigned char seen[JEV_BENCH_MAX_COUNTS] = {0};
    for (size_t i = 0; i < json_array_size(arr); i++) {
        const json_t *a = json_array_get(arr, i);
        path_index(sub, at, i);
        if (!json_is_object(a))
            return jev_fail(err, JEV_ERR_FORMAT, "%s: expected an object, got %s", sub, json_kind(a));
        JEV_TRY(check_object(a, sub, f_ag, n_ag, false, err));
        long long d = json_integer_value(json_object_get(a, "decisions"));
        int ci = count_index(st, d);
        if (ci < 0)
            return jev_fail(err, JEV_ERR_FORMAT, "%s.decisions: %lld is not in settings.counts", sub, d);
        if (seen[ci])
            return jev_fail(err, JEV_ERR_FORMAT, "%s.decisions: a second entry for %lld", sub, d);
        seen[ci] = 1;
        JEV_TRY(check_num(a, sub, "direct_shared_max_prob_delta", 0, 1, err));
        JEV_TRY(check_num(a, sub, "argmax_agreement", 0, 1, err));
        JEV_TRY(check_num(a, sub, "generated_shared_agreement", 0, 1, err));
        if (st->version >= 2)
            JEV_TRY(check_vs_exact(a, sub, st, err));
    }
    for (int i = 0; i < st->n_counts; i++)
        if (!seen[i])
            return jev_fail(err, JEV_ERR_FORMAT, "%s: no entry for %lld decisions", at, st->counts[i]);
    return JEV_OK;
}

/* ---- record ---- */

/* The whole record: version, top-level shape, environment, settings, every
 * run, coverage of every (count, path), agreement. Stops at the first
 * problem. */
enum jev_status jev_bench_validate(const json_t *root, struct jev_error *err) {
    static const struct field f_top[] = {{"schema", J_STR},   {"note", J_STR | F_OPT}, {"environment", J_OBJ},
                                         {"settings", J_OBJ}, {"runs", J_ARR},         {"agreement", J_ARR}};
    if (root == NULL || !json_is_object(root))
        return jev_fail(err, JEV_ERR_FORMAT, "$: expected an object, got %s", root ? json_kind(root) : "nothing");
    /* the version first: a newer file should say so, not fail on a new field */
    const json_t *schema = json_object_get(root, "schema");
    if (schema == NULL)
        return jev_fail(err, JEV_ERR_FORMAT, "$.schema: missing field");
    if (!json_is_string(schema))
        return jev_fail(err, JEV_ERR_FORMAT, "$.schema: expected a string, got %s", json_kind(schema));
    const char *sv = json_string_value(schema);
    int version = !strcmp(sv, JEV_BENCH_SCHEMA) ? 2 : !strcmp(sv, JEV_BENCH_SCHEMA_V1) ? 1 : 0;
    if (version == 0) {
        if (!strncmp(sv, "jev-bench/", 10))
            return jev_fail(err, JEV_ERR_FORMAT, "$.schema: unsupported version \"%.40s\" (this build reads %s and %s)",
                            sv, JEV_BENCH_SCHEMA, JEV_BENCH_SCHEMA_V1);
        return jev_fail(err, JEV_ERR_FORMAT, "$.schema: \"%.40s\" is not a jev benchmark record (%s)", sv,
                        JEV_BENCH_SCHEMA);
    }
    JEV_TRY(check_object(root, "$", f_top, sizeof f_top / sizeof f_top[0], true, err));

    struct vstate *st = calloc(1, sizeof *st);
    if (st == NULL)
        return jev_fail(err, JEV_ERR_NOMEM, "validating a benchmark record: out of memory");
    st->version = version;
    st->peer = json_is_object(json_object_get(json_object_get(root, "environment"), "peer"));
    enum jev_status s = check_environment(json_object_get(root, "environment"), "$.environment", err);
    if (s == JEV_OK)
        s = check_settings(json_object_get(root, "settings"), "$.settings", st, err);
    const json_t *runs = json_object_get(root, "runs");
    char sub[PATH_MAX_TEXT];
    for (size_t i = 0; s == JEV_OK && i < json_array_size(runs); i++) {
        path_index(sub, "$.runs", i);
        s = check_run(json_array_get(runs, i), sub, st, err);
    }
    /* every (count, path) of the settings must have been measured */
    for (int c = 0; s == JEV_OK && c < st->n_counts; c++)
        for (int p = 0; s == JEV_OK && p < st->n_paths; p++)
            if (!st->seen[c][p])
                s = jev_fail(err, JEV_ERR_FORMAT, "$.runs: no run for %lld decisions, path %s", st->counts[c],
                             st->paths[p]);
    if (s == JEV_OK)
        s = check_agreement(json_object_get(root, "agreement"), "$.agreement", st, err);
    free(st);
    return s;
}

/* Parses with duplicate keys refused (a duplicate would silently hide a value), then validates. */
enum jev_status jev_bench_load_buffer(const char *data, size_t n, json_t **out, struct jev_error *err) {
    *out = NULL;
    if (n > JEV_BENCH_MAX_FILE_BYTES)
        return jev_fail(err, JEV_ERR_NOMEM, "benchmark record of %zu bytes is over the %u-byte limit", n,
                        JEV_BENCH_MAX_FILE_BYTES);
    json_error_t jerr;
    json_t *root = json_loadb(data, n, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL)
        return jev_fail(err, JEV_ERR_FORMAT, "not valid JSON (line %d, column %d): %s", jerr.line, jerr.column,
                        jerr.text);
    enum jev_status s = jev_bench_validate(root, err);
    if (s != JEV_OK) {
        json_decref(root);
        return s;
    }
    *out = root;
    return JEV_OK;
}

/* Reads the whole file (bounded by JEV_BENCH_MAX_FILE_BYTES; pipes work
 * too), then loads the buffer; messages are prefixed with the file name. */
enum jev_status jev_bench_load_file(const char *path, json_t **out, struct jev_error *err) {
    *out = NULL;
    char *buf = NULL;
    size_t len = 0;
    JEV_TRY(jev_read_file(path, JEV_BENCH_MAX_FILE_BYTES, &buf, &len, err));
    struct jev_error inner = {0};
    enum jev_status s = jev_bench_load_buffer(buf, len, out, &inner);
    if (s != JEV_OK)
        jev_fail(err, s, "%s: %s", path, inner.msg);
    free(buf);
    return s;
}

/* ---- files ---- */

/* mkdir -p of the folder part of path ("a/b/c.json" -> a, a/b). */
static enum jev_status make_parents(const char *path, struct jev_error *err) {
    char dir[4096];
    size_t n = strlen(path);
    if (n >= sizeof dir)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "%.64s...: path longer than %zu bytes", path, sizeof dir - 1);
    memcpy(dir, path, n + 1);
    char *slash = strrchr(dir, '/');
    if (slash == NULL || slash == dir)
        return JEV_OK;
    *slash = '\0';
    for (char *p = dir + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(dir, 0777) != 0 && errno != EEXIST)
                return jev_fail(err, JEV_ERR_IO, "%s: cannot create folder: %s", dir, strerror(errno));
            *p = c;
            if (c == '\0')
                break;
        }
    }
    return JEV_OK;
}

/* temp file in the destination folder (rename is atomic only within one
 * file system), write all, fsync, rename; the temp file is removed on any
 * failure, so path holds the old content or the new, never a part. */
enum jev_status jev_bench_file_write(const char *path, const void *data, size_t n, struct jev_error *err) {
    JEV_TRY(make_parents(path, err));
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    if (fd < 0)
        return jev_fail(err, JEV_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
    const unsigned char *p = data;
    size_t left = n;
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = errno;
            close(fd);
            unlink(tmp);
            return jev_fail(err, JEV_ERR_IO, "%s: write failed: %s", tmp, strerror(e));
        }
        p += w;
        left -= (size_t)w;
    }
    /* the data reaches the disk before the name does: no partial file under path */
    int rc = fsync(fd);
    int e = errno;
    if (close(fd) != 0 && rc == 0) {
        rc = -1;
        e = errno;
    }
    if (rc != 0) {
        unlink(tmp);
        return jev_fail(err, JEV_ERR_IO, "%s: cannot flush: %s", tmp, strerror(e));
    }
    if (rename(tmp, path) != 0) {
        e = errno;
        unlink(tmp);
        return jev_fail(err, JEV_ERR_IO, "%s: cannot rename into place: %s", path, strerror(e));
    }
    return JEV_OK;
}
