/*
 * request-openai.c - the OpenAI-shaped body (POST /v1/decisions, spec §8.1)
 * and the benchmark workload file into struct jev_request.
 *
 * OpenAI shape, the SDK subset (§8.1 "-> us"): `input` is a string or an
 * array of user messages whose content is a string or parts of type
 * input_text / input_image (a data URL); `questions` is an array of
 * predicate / choice / score with required `instructions`, an optional
 * `name` (echoed, null when absent) and `choices` [{value, description?}] or
 * `levels` [{label, description?}]. The mapping to System One is §8.3:
 * predicate -> noul (no outcome descriptions), choices[].value -> option key,
 * levels[i] -> level i, input -> state (the text parts joined by a blank line).
 * A question without a name gets the id q%02d of its index, shown to the model.
 *
 * Workload: bench/dog-workload.json (benchmark.md "Workload").
 */
#include "wire/request-internal.h" // defines: jev_rq_*, struct jev_request

#include "decide/qtype.h"    // defines: jev_qtype_get
#include "wire/qtype-wire.h" // defines: jev_qtype_wire_get, jev_qtype_wire_by_oa_name

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"       // defines: struct jev_buf, jev_buf_*
#include "base/read-file.h" // defines: jev_read_file

/* Bytes reserved per question for a generated id "q%02d" (at most "q4095"). */
#define GEN_ID_BYTES 16

/* ---- input ---- */

/* The OpenAI input has no single "state": its text parts become one string
 * state, separated by a blank line, in message order. They are joined in one
 * buffer (linear: a new string per part made a body of many small parts
 * quadratic, hours for one request), capped at the body limit: the joined
 * text is shorter than the body it comes from (each part costs more bytes of
 * JSON than the 2 of its separator). */
struct joined {
    struct jev_buf text; /* the parts so far */
    bool any;            /* a part was added (an empty first part still counts) */
};

static enum jev_status join_text(struct joined *acc, const char *text, struct jev_request_error *e) {
    if (acc->any)
        jev_buf_add(&acc->text, "\n\n", 2, NULL);
    acc->any = true;
    struct jev_error err = {0};
    if (jev_buf_add_str(&acc->text, text, &err) != JEV_OK)
        return jev_rq_fail(e, 0, "", "joining the input's text: %s", err.msg);
    return JEV_OK;
}

/* One content part: text is joined, an image goes to the request's one image. */
static enum jev_status oa_part(struct jev_request *r, json_t *part, const char *path, struct joined *acc,
                               struct jev_request_error *e) {
    if (!json_is_object(part))
        return jev_rq_fail(e, 422, path, "a content part must be an object");
    const char *type = json_string_value(json_object_get(part, "type"));
    char p[400];
    if (type != NULL && strcmp(type, "input_text") == 0) {
        json_t *t = json_object_get(part, "text");
        jev_rq_path(p, sizeof p, "%s.text", path);
        if (!json_is_string(t))
            return jev_rq_fail(e, 422, p, "must be a string");
        return join_text(acc, json_string_value(t), e);
    }
    if (type != NULL && strcmp(type, "input_image") == 0) {
        json_t *d = json_object_get(part, "detail");
        const char *ds = json_string_value(d);
        jev_rq_path(p, sizeof p, "%s.detail", path);
        if (d != NULL && !json_is_null(d) &&
            (ds == NULL || (strcmp(ds, "low") && strcmp(ds, "high") && strcmp(ds, "auto") && strcmp(ds, "original"))))
            return jev_rq_fail(e, 422, p, "must be \"low\", \"high\", \"auto\" or \"original\"");
        json_t *u = json_object_get(part, "image_url");
        jev_rq_path(p, sizeof p, "%s.image_url", path);
        if (!json_is_string(u))
            return jev_rq_fail(e, 422, p, "must be a base64 data URL string");
        return jev_rq_add_image_url(r, json_string_value(u), p, e);
    }
    jev_rq_path(p, sizeof p, "%s.type", path);
    return jev_rq_fail(e, 422, p, "unsupported content part type \"%s\" (supported: input_text, input_image)",
                       type ? type : "(missing)");
}

/*
 * `input`, the SDK subset (§8.1 "-> us"): a string is the state as is; an
 * array must hold user messages only (other roles are a later reference's
 * extension jev does not read, 422 naming the role).
 */
static enum jev_status oa_input(struct jev_request *r, json_t *input, struct jev_request_error *e) {
    if (input == NULL)
        return jev_rq_fail(e, 422, "input", "missing (a string or an array of user messages)");
    if (json_is_string(input)) {
        r->state = input;
        return JEV_OK;
    }
    if (!json_is_array(input))
        return jev_rq_fail(e, 422, "input", "must be a string or an array of user messages");
    if (json_array_size(input) == 0)
        return jev_rq_fail(e, 422, "input", "is empty (at least one user message)");
    struct joined acc = {.any = false};
    jev_buf_init(&acc.text, JEV_DECIDE_MAX_BODY_BYTES);
    enum jev_status s = JEV_OK;
    size_t i;
    json_t *msg;
    json_array_foreach(input, i, msg) {
        char path[64], p[96];
        jev_rq_path(path, sizeof path, "input[%zu]", i);
        if (!json_is_object(msg)) {
            s = jev_rq_fail(e, 422, path, "must be a message object {\"role\": \"user\", \"content\"}");
            break;
        }
        const char *role = json_string_value(json_object_get(msg, "role"));
        const char *type = json_string_value(json_object_get(msg, "type"));
        jev_rq_path(p, sizeof p, "%s.role", path);
        if (role == NULL || strcmp(role, "user") != 0) {
            s = jev_rq_fail(e, 422, p, "only user messages are supported, got %s%s%s", role ? "\"" : "",
                            role ? role : "none", role ? "\"" : "");
            break;
        }
        jev_rq_path(p, sizeof p, "%s.type", path);
        if (json_object_get(msg, "type") != NULL && (type == NULL || strcmp(type, "message") != 0)) {
            s = jev_rq_fail(e, 422, p, "must be \"message\"");
            break;
        }
        json_t *c = json_object_get(msg, "content");
        jev_rq_path(p, sizeof p, "%s.content", path);
        if (json_is_string(c)) {
            s = join_text(&acc, json_string_value(c), e);
        } else if (json_is_array(c)) {
            size_t j;
            json_t *part;
            json_array_foreach(c, j, part) {
                char pp[128];
                jev_rq_path(pp, sizeof pp, "%s[%zu]", p, j);
                if ((s = oa_part(r, part, pp, &acc, e)) != JEV_OK)
                    break;
            }
        } else {
            s = jev_rq_fail(e, 422, p, "must be a string or an array of content parts");
        }
        if (s != JEV_OK)
            break;
    }
    /* the parts are valid UTF-8 (jansson checked them), so their join is too; "" for images only */
    json_t *state = s == JEV_OK ? json_stringn_nocheck(jev_buf_str(&acc.text), acc.text.len) : NULL;
    jev_buf_free(&acc.text);
    if (s != JEV_OK)
        return s;
    if (state == NULL || json_array_append_new(r->keep, state) != 0)
        return jev_rq_fail(e, 0, "", "out of memory while parsing the request");
    r->state = state;
    return JEV_OK;
}

/* ---- questions ---- */

/* The option count a question needs, for sizing the block (0 if malformed): its type's count
 * (oa_count) of its options field. */
static int64_t oa_option_count(json_t *q) {
    const char *t = json_string_value(json_object_get(q, "type"));
    enum jev_qtype type;
    if (t == NULL || !jev_qtype_wire_by_oa_name(t, &type))
        return 0;
    const struct jev_qtype_wire *w = jev_qtype_wire_get(type);
    return w->oa_count(w->oa_options ? json_object_get(q, w->oa_options) : NULL);
}

/* One OpenAI question; the field list depends on its type, like System One's. */
static enum jev_status oa_question(struct jev_question *q, size_t index, json_t *v, char *gen_id,
                                   struct jev_request_error *e) {
    char path[64], p[96];
    jev_rq_path(path, sizeof path, "questions[%zu]", index);
    if (!json_is_object(v))
        return jev_rq_fail(e, 422, path, "a question must be an object with type and instructions");
    json_t *t = json_object_get(v, "type");
    jev_rq_path(p, sizeof p, "%s.type", path);
    char names[128];
    if (t == NULL)
        return jev_rq_fail(e, 422, p, "missing (one of %s)", jev_qtype_wire_oa_names(names, sizeof names));
    if (!json_is_string(t))
        return jev_rq_fail(e, 422, p, "must be a string (one of %s)", jev_qtype_wire_oa_names(names, sizeof names));
    const char *ts = json_string_value(t);
    if (!jev_qtype_wire_by_oa_name(ts, &q->type))
        return jev_rq_fail(e, 422, p, "unknown question type \"%s\" (one of %s)", ts,
                           jev_qtype_wire_oa_names(names, sizeof names));
    /* type, instructions, name, and the type's options field if it has one */
    const struct jev_qtype_wire *w = jev_qtype_wire_get(q->type);
    const char *const allowed[] = {"type", "instructions", "name", w->oa_options, NULL};
    char list[128];
    jev_rq_path(list, sizeof list, "type, instructions, name%s%s", w->oa_options ? ", " : "",
                w->oa_options ? w->oa_options : "");
    JEV_TRY(jev_rq_only_fields(v, path, allowed, list, e));
    json_t *name = json_object_get(v, "name");
    jev_rq_path(p, sizeof p, "%s.name", path);
    if (name != NULL && !json_is_null(name)) {
        if (!json_is_string(name))
            return jev_rq_fail(e, 422, p, "must be a string or null");
        JEV_TRY(jev_rq_check_id(json_string_value(name), p, e));
        q->id = json_string_value(name);
        q->named = true;
    } else {
        jev_rq_path(gen_id, GEN_ID_BYTES, "q%02zu", index);
        q->id = gen_id;
    }
    json_t *ins = json_object_get(v, "instructions");
    jev_rq_path(p, sizeof p, "%s.instructions", path);
    JEV_TRY(jev_rq_check_instructions(ins, p, e));
    q->instructions = ins;
    const struct jev_qtype_ops *dt = jev_qtype_get(q->type);
    if (dt->fixed_options)
        dt->fixed_options(q);
    if (w->oa_parse == NULL)
        return JEV_OK; /* none: no options field (predicate: yes / no only) */
    jev_rq_path(p, sizeof p, "%s.%s", path, w->oa_options);
    return w->oa_parse(q, json_object_get(v, w->oa_options), p, e);
}

/* Question ids must be unique: they key the prompt and generate_json. */
static enum jev_status unique_ids(const struct jev_request *r, const char *what, struct jev_request_error *e) {
    json_t *seen = json_object();
    if (seen == NULL)
        return jev_rq_fail(e, 0, "", "out of memory while parsing the request");
    enum jev_status s = JEV_OK;
    for (int32_t i = 0; i < r->n_questions && s == JEV_OK; i++) {
        const char *id = r->questions[i].id;
        json_t *prev = json_object_get(seen, id);
        if (prev != NULL) {
            char p[64];
            jev_rq_path(p, sizeof p, "questions[%d].%s", i, what);
            s = jev_rq_fail(e, 422, p, "\"%s\" is used by question %lld too (question ids must be unique)", id,
                            (long long)json_integer_value(prev));
        } else if (json_object_set_new(seen, id, json_integer(i)) != 0) {
            s = jev_rq_fail(e, 0, "", "out of memory while parsing the request");
        }
    }
    json_decref(seen);
    return s;
}

/* Optional string fields jev accepts and ignores, with OAI-REF's length caps. */
static enum jev_status oa_string_limit(json_t *root, const char *field, size_t max, struct jev_request_error *e) {
    json_t *v = json_object_get(root, field);
    if (v == NULL || json_is_null(v))
        return JEV_OK;
    if (!json_is_string(v))
        return jev_rq_fail(e, 422, field, "must be a string");
    if (json_string_length(v) > max)
        return jev_rq_fail(e, 422, field, "is %zu bytes (the limit is %zu)", json_string_length(v), max);
    return JEV_OK;
}

/* The OpenAI body: envelope, input, then the questions (sized first). */
static enum jev_status oa_parse(json_t *root, struct jev_request *r, struct jev_request_error *e) {
    r->shape = JEV_SHAPE_OPENAI;
    json_t *m = json_object_get(root, "model");
    if (m != NULL && !json_is_null(m) && !json_is_string(m))
        return jev_rq_fail(e, 422, "model", "must be a string");
    r->model = json_string_value(m);
    JEV_TRY(oa_string_limit(root, "safety_identifier", JEV_DECIDE_MAX_SAFETY_ID_BYTES, e));
    JEV_TRY(oa_string_limit(root, "prompt_cache_key", JEV_DECIDE_MAX_CACHE_KEY_BYTES, e));
    r->keep = json_array();
    if (r->keep == NULL)
        return jev_rq_fail(e, 0, "", "out of memory while parsing the request");
    JEV_TRY(oa_input(r, json_object_get(root, "input"), e));

    json_t *qs = json_object_get(root, "questions");
    if (qs == NULL)
        return jev_rq_fail(e, 422, "questions", "missing (an array of questions)");
    if (!json_is_array(qs))
        return jev_rq_fail(e, 422, "questions", "must be an array of questions");
    size_t nq = json_array_size(qs);
    JEV_TRY(jev_rq_check_question_count(nq, e));
    int64_t nopt = 0;
    size_t i;
    json_t *qv;
    json_array_foreach(qs, i, qv) { nopt += json_is_object(qv) ? oa_option_count(qv) : 0; }
    char *ids;
    JEV_TRY(jev_rq_alloc(r, (int32_t)nq, nopt, nq * GEN_ID_BYTES, &ids, e));
    struct jev_option *opts = (struct jev_option *)(r->questions + nq);
    json_array_foreach(qs, i, qv) {
        struct jev_question *q = &r->questions[i];
        q->options = opts;
        JEV_TRY(oa_question(q, i, qv, ids + i * GEN_ID_BYTES, e));
        opts += q->n_options;
        r->n_options_total += q->n_options;
    }
    return unique_ids(r, "name", e);
}

enum jev_status jev_request_parse_openai(const char *body, size_t len, const struct jev_request_opts *opts,
                                         struct jev_request *out, struct jev_request_error *rerr) {
    memset(out, 0, sizeof *out);
    memset(rerr, 0, sizeof *rerr);
    enum jev_status s = jev_rq_load_body(body, len, opts, &out->root, rerr);
    if (s == JEV_OK)
        s = oa_parse(out->root, out, rerr);
    if (s == JEV_OK)
        s = jev_rq_finish(out, opts, rerr);
    if (s != JEV_OK)
        jev_request_free(out);
    return s;
}

/* ---- the benchmark workload ---- */

/* One workload question: text and 1..255 options {id, text} with unique ids. */
static enum jev_status wl_question(json_t *q, size_t qi, struct jev_option *opts, int32_t *n_out,
                                   struct jev_request_error *e) {
    char path[64], p[128];
    jev_rq_path(path, sizeof path, "questions[%zu]", qi);
    if (!json_is_object(q))
        return jev_rq_fail(e, 422, path, "must be an object {\"key\", \"question\", \"options\"}");
    json_t *text = json_object_get(q, "question");
    jev_rq_path(p, sizeof p, "%s.question", path);
    JEV_TRY(jev_rq_check_instructions(text, p, e));
    json_t *os = json_object_get(q, "options");
    jev_rq_path(p, sizeof p, "%s.options", path);
    if (!json_is_array(os) || json_array_size(os) < JEV_DECIDE_MIN_OPTIONS ||
        json_array_size(os) > JEV_DECIDE_MAX_OPTIONS)
        return jev_rq_fail(e, 422, p, "must be an array of %d to %d {\"id\", \"text\"}", JEV_DECIDE_MIN_OPTIONS,
                           JEV_DECIDE_MAX_OPTIONS);
    size_t i;
    json_t *o;
    json_array_foreach(os, i, o) {
        char pp[160];
        jev_rq_path(pp, sizeof pp, "%s[%zu]", p, i);
        const char *id = json_string_value(json_object_get(o, "id"));
        const char *t = json_string_value(json_object_get(o, "text"));
        if (id == NULL || id[0] == '\0' || t == NULL || t[0] == '\0')
            return jev_rq_fail(e, 422, pp, "needs a non-empty string id and text");
        for (size_t j = 0; j < i; j++)
            if (strcmp(opts[j].key, id) == 0)
                return jev_rq_fail(e, 422, pp, "duplicate option id \"%s\"", id);
        opts[i].key = id;
        opts[i].text = t;
    }
    *n_out = (int32_t)json_array_size(os);
    return JEV_OK;
}

/*
 * N decisions over the file's Q questions: decision d asks question d mod Q
 * and has id q%02d. The option arrays are filled once per file question and
 * shared by every decision that asks it (read-only), so 64 decisions cost
 * 8 questions' worth of options.
 */
static enum jev_status wl_parse(json_t *root, int32_t n, struct jev_request *r, struct jev_request_error *e) {
    r->shape = JEV_SHAPE_WORKLOAD;
    if (n < 1 || n > JEV_DECIDE_MAX_QUESTIONS)
        return jev_rq_fail(e, n < 1 ? 422 : 413, "", "%d decisions requested (1 to %d)", n, JEV_DECIDE_MAX_QUESTIONS);
    json_t *ctx = json_object_get(root, "context");
    if (ctx != NULL && !json_is_string(ctx))
        return jev_rq_fail(e, 422, "context", "must be a string");
    r->context = json_string_value(ctx);
    json_t *img = json_object_get(root, "image");
    if (img != NULL && !json_is_null(img)) {
        if (!json_is_string(img) || json_string_length(img) == 0)
            return jev_rq_fail(e, 422, "image", "must be a non-empty path string");
        r->has_image = true;
        r->image.path = json_string_value(img);
    }
    json_t *qs = json_object_get(root, "questions");
    if (!json_is_array(qs) || json_array_size(qs) == 0)
        return jev_rq_fail(e, 422, "questions", "must be a non-empty array");
    size_t nq = json_array_size(qs);
    int64_t nopt = 0;
    size_t i;
    json_t *qv;
    json_array_foreach(qs, i, qv) { nopt += (int64_t)json_array_size(json_object_get(qv, "options")); }
    /* extra: the file's Q questions' option counts, then the generated ids */
    char *extra;
    JEV_TRY(jev_rq_alloc(r, n, nopt, nq * sizeof(int32_t) + (size_t)n * GEN_ID_BYTES, &extra, e));
    struct jev_option *opts = (struct jev_option *)(r->questions + n);
    int32_t *counts = (int32_t *)(void *)extra; /* 8-aligned: it follows the question and option arrays */
    char *ids = extra + nq * sizeof(int32_t);
    struct jev_option **first = calloc(nq, sizeof *first);
    if (first == NULL)
        return jev_rq_fail(e, 0, "", "out of memory while parsing the request");
    enum jev_status s = JEV_OK;
    json_array_foreach(qs, i, qv) {
        first[i] = opts;
        if ((s = wl_question(qv, i, opts, &counts[i], e)) != JEV_OK)
            break;
        opts += counts[i];
        r->n_options_total += counts[i];
    }
    for (int32_t d = 0; d < n && s == JEV_OK; d++) {
        struct jev_question *q = &r->questions[d];
        size_t src = (size_t)d % nq;
        jev_rq_path(ids + (size_t)d * GEN_ID_BYTES, GEN_ID_BYTES, "q%02d", d);
        q->id = ids + (size_t)d * GEN_ID_BYTES;
        q->type = JEV_QTYPE_CHOICE;
        q->instructions = json_object_get(json_array_get(qs, src), "question");
        q->options = first[src]; /* decisions asking the same question share its options */
        q->n_options = counts[src];
    }
    free(first);
    JEV_TRY(s);
    r->keep = json_array();
    json_t *empty = json_string("");
    if (r->keep == NULL || empty == NULL || json_array_append_new(r->keep, empty) != 0)
        return jev_rq_fail(e, 0, "", "out of memory while parsing the workload");
    r->state = empty;
    return JEV_OK;
}

enum jev_status jev_request_load_workload(const char *json, size_t len, int32_t n_decisions, struct jev_request *out,
                                          struct jev_request_error *rerr) {
    memset(out, 0, sizeof *out);
    memset(rerr, 0, sizeof *rerr);
    enum jev_status s = jev_rq_load_body(json, len, NULL, &out->root, rerr);
    if (s == JEV_OK)
        s = wl_parse(out->root, n_decisions, out, rerr);
    if (s != JEV_OK)
        jev_request_free(out);
    return s;
}

enum jev_status jev_request_load_workload_file(const char *path, int32_t n_decisions, struct jev_request *out,
                                               struct jev_request_error *rerr) {
    memset(out, 0, sizeof *out);
    memset(rerr, 0, sizeof *rerr);
    char *buf = NULL;
    size_t n = 0;
    struct jev_error err = {0};
    if (jev_read_file(path, JEV_DECIDE_MAX_BODY_BYTES, &buf, &n, &err) != JEV_OK) {
        /* err.msg is "<path>: <why>"; the refusal names the path once, as its param */
        size_t k = strlen(path);
        const char *why = strncmp(err.msg, path, k) == 0 && err.msg[k] == ':' ? err.msg + k + 2 : err.msg;
        return err.status == JEV_ERR_NOMEM
                   ? jev_rq_fail(rerr, 413, path, "the workload file is too large: %s", why)
                   : jev_rq_fail(rerr, 400, path, "cannot open the workload file or read it: %s", why);
    }
    enum jev_status s = jev_request_load_workload(buf, n, n_decisions, out, rerr);
    free(buf);
    return s;
}
