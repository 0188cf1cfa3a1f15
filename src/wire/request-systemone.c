/*
 * request-systemone.c - the System One body (POST /v1/systemone) into
 * struct jev_request (the helpers every shape shares: request-common.c).
 *
 * The validation rules are spec/systemone.md's "-> us" decisions:
 *   - unknown top-level fields are ignored (clients add their own), unknown
 *     question fields are 422;
 *   - `state` is required: a string, object or array (null, numbers and
 *     booleans are 422); `document` is accepted as an alias;
 *   - `instructions` must be a non-empty string, object or array (422);
 *   - choice takes 1..255 options, score 2..10 levels (422 outside);
 *   - images: `assets` (TypeSafe: key -> {type:"image", format, data_base64},
 *     every asset referenced by its key somewhere in the text, else 400) or
 *     `images` / `files` (data URLs or raw base64); one image per request.
 * Not here: prompt text, tokens, the token budget (413 from whoever
 * tokenizes), the queue (429).
 */
#include "wire/request-internal.h" // defines: jev_rq_*, struct jev_request

#include "decide/qtype.h"    // defines: jev_qtype_get, jev_qtype_by_name
#include "io/jsonw.h"        // defines: jev_jsonw_utf8_fix
#include "wire/qtype-wire.h" // defines: jev_qtype_wire_get

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- System One: questions ---- */

/* The option count a question value will need (0 for malformed ones, which
 * validation refuses later): its type's count (s1_count); used to size the
 * block before filling it. */
static int64_t s1_option_count(json_t *q) {
    const char *t = json_string_value(json_object_get(q, "type"));
    enum jev_qtype type;
    if (t == NULL || !jev_qtype_by_name(t, &type))
        return 0;
    return jev_qtype_wire_get(type)->s1_count(json_object_get(q, "criteria"));
}

/*
 * One question: id, shape, type (so that the field list can depend on it),
 * unknown fields (422, spec §2.1 "-> us"), instructions, then the criteria
 * of its type. The order fixes which message a multi-fault question gets.
 */
static enum jev_status s1_question(struct jev_question *q, const char *id, json_t *v, struct jev_request_error *e) {
    char path[400], p[440];
    jev_rq_path(path, sizeof path, "questions.%s", id);
    JEV_TRY(jev_rq_check_id(id, path, e));
    if (!json_is_object(v))
        return jev_rq_fail(e, 422, path, "a question must be an object with type, instructions and criteria");
    q->id = id;
    json_t *t = json_object_get(v, "type");
    jev_rq_path(p, sizeof p, "%s.type", path);
    char names[128];
    if (t == NULL)
        return jev_rq_fail(e, 422, p, "missing (one of %s)", jev_qtype_names(names, sizeof names));
    if (!json_is_string(t))
        return jev_rq_fail(e, 422, p, "must be a string (one of %s)", jev_qtype_names(names, sizeof names));
    const char *ts = json_string_value(t);
    if (!jev_qtype_by_name(ts, &q->type)) {
        if (strcmp(ts, "box") == 0)
            return jev_rq_fail(e, 422, p, "unsupported question type \"box\" (supported: %s)",
                               jev_qtype_names(names, sizeof names));
        return jev_rq_fail(e, 422, p, "unknown question type \"%s\" (one of %s)", ts,
                           jev_qtype_names(names, sizeof names));
    }
    const char *k;
    json_t *f;
    json_object_foreach(v, k, f) {
        if (strcmp(k, "type") != 0 && strcmp(k, "instructions") != 0 && strcmp(k, "criteria") != 0) {
            jev_rq_path(p, sizeof p, "%s.%s", path, k);
            return jev_rq_fail(e, 422, p, "unknown question field (allowed: type, instructions, criteria)");
        }
    }
    jev_rq_path(p, sizeof p, "%s.instructions", path);
    json_t *ins = json_object_get(v, "instructions");
    JEV_TRY(jev_rq_check_instructions(ins, p, e));
    q->instructions = ins;
    jev_rq_path(p, sizeof p, "%s.criteria", path);
    json_t *crit = json_object_get(v, "criteria");
    const struct jev_qtype_ops *dt = jev_qtype_get(q->type);
    if (dt->fixed_options)
        dt->fixed_options(q);
    return jev_qtype_wire_get(q->type)->s1_parse(q, crit, p, e);
}

/* ---- System One: images ---- */

/* Whether text `key` occurs in any string or object key under v. */
/* References are plain-text matches (spec §3.1: keys must not occur by accident). */
static bool mentions(const json_t *v, const char *key) {
    if (v == NULL)
        return false;
    if (json_is_string(v))
        return strstr(json_string_value(v), key) != NULL;
    if (json_is_object(v)) {
        const char *k;
        json_t *c;
        json_object_foreach((json_t *)(uintptr_t)v, k, c) {
            if (strstr(k, key) != NULL || mentions(c, key))
                return true;
        }
        return false;
    }
    if (json_is_array(v)) {
        size_t i;
        json_t *c;
        json_array_foreach(v, i, c) {
            if (mentions(c, key))
                return true;
        }
    }
    return false;
}

static bool request_mentions(const struct jev_request *r, const char *key) {
    if (mentions(r->state, key) || (r->context && strstr(r->context, key)))
        return true;
    for (int32_t i = 0; i < r->n_questions; i++) {
        const struct jev_question *q = &r->questions[i];
        if (strstr(q->id, key) || mentions(q->instructions, key))
            return true;
        bool caller_keys = jev_qtype_get(q->type)->caller_keys; /* choice names; not yes/no or digits */
        for (int32_t j = 0; j < q->n_options; j++)
            if ((caller_keys && strstr(q->options[j].key, key)) || mentions(q->options[j].desc, key))
                return true;
    }
    return false;
}

/* TypeSafe's assets map; the reference check runs after all questions are in. */
static enum jev_status s1_assets(struct jev_request *r, json_t *assets, struct jev_request_error *e) {
    if (!json_is_object(assets))
        return jev_rq_fail(e, 422, "assets", "must be an object mapping asset keys to image assets");
    const char *k;
    json_t *a;
    json_object_foreach(assets, k, a) {
        char p[400];
        jev_rq_path(p, sizeof p, "assets.%s", k);
        if (k[0] == '\0')
            return jev_rq_fail(e, 422, "assets", "an asset key must not be empty");
        if (!json_is_object(a))
            return jev_rq_fail(e, 422, p, "must be an object {\"type\": \"image\", \"format\", \"data_base64\"}");
        const char *type = json_string_value(json_object_get(a, "type"));
        if (type == NULL || strcmp(type, "image") != 0)
            return jev_rq_fail(e, 422, p, "type must be \"image\" (the only asset type)");
        if (json_object_get(a, "part") != NULL)
            return jev_rq_fail(e, 501, p, "multipart asset parts are not supported; send data_base64");
        const char *fmt = json_string_value(json_object_get(a, "format"));
        if (fmt == NULL || (strcmp(fmt, "png") != 0 && strcmp(fmt, "jpg") != 0 && strcmp(fmt, "jpeg") != 0))
            return jev_rq_fail(e, 422, p, "format must be \"png\" or \"jpg\"");
        json_t *d = json_object_get(a, "data_base64");
        if (!json_is_string(d))
            return jev_rq_fail(e, 422, p, "data_base64 must be a string of base64 (no data: prefix)");
        JEV_TRY(jev_rq_add_image_base64(r, json_string_value(d), json_string_length(d),
                                        strcmp(fmt, "png") == 0 ? "png" : "jpeg", p, e));
        r->image.asset_key = k;
    }
    return JEV_OK;
}

/* The open forms first (images, its alias files), then assets; all count
 * against the one-image limit, in that order. */
static enum jev_status s1_images(struct jev_request *r, json_t *root, struct jev_request_error *e) {
    json_t *v = json_object_get(root, "videos");
    if (v != NULL && !json_is_null(v) && !(json_is_array(v) && json_array_size(v) == 0))
        return jev_rq_fail(e, 422, "videos", "videos are not supported (absent, null or [] only)");
    const char *names[2] = {"images", "files"};
    for (int n = 0; n < 2; n++) {
        json_t *im = json_object_get(root, names[n]);
        if (im == NULL || json_is_null(im))
            continue;
        if (!json_is_array(im))
            return jev_rq_fail(e, 422, names[n], "must be an array of data URLs or base64 strings");
        size_t i;
        json_t *u;
        json_array_foreach(im, i, u) {
            char p[64];
            jev_rq_path(p, sizeof p, "%s[%zu]", names[n], i);
            if (!json_is_string(u))
                return jev_rq_fail(e, 422, p, "must be a data URL or a base64 string");
            JEV_TRY(jev_rq_add_image_url(r, json_string_value(u), p, e));
        }
    }
    json_t *assets = json_object_get(root, "assets");
    if (assets != NULL && !json_is_null(assets))
        JEV_TRY(s1_assets(r, assets, e));
    return JEV_OK;
}

/* ---- System One: the body ---- */

/* The System One body, in the order the refusals are documented (docs/decide.md §3). */
static enum jev_status s1_parse(json_t *root, struct jev_request *r, struct jev_request_error *e) {
    r->shape = JEV_SHAPE_SYSTEMONE;
    json_t *m = json_object_get(root, "model");
    if (m != NULL && !json_is_null(m) && !json_is_string(m))
        return jev_rq_fail(e, 422, "model", "must be a string");
    r->model = json_string_value(m);

    /* state, or SPEC's `document` alias */
    json_t *st = json_object_get(root, "state");
    const char *sname = "state";
    if (st == NULL && json_object_get(root, "document") != NULL) {
        st = json_object_get(root, "document");
        sname = "document";
    } else if (st != NULL && json_object_get(root, "document") != NULL)
        return jev_rq_fail(e, 422, "document", "give state or its alias document, not both");
    if (st == NULL)
        return jev_rq_fail(e, 422, "state", "missing (a string, object or array)");
    if (!json_is_string(st) && !json_is_object(st) && !json_is_array(st))
        return jev_rq_fail(e, 422, sname, "must be a string, object or array, not %s",
                           json_is_null(st)     ? "null"
                           : json_is_number(st) ? "a number"
                                                : "a boolean");
    JEV_TRY(jev_rq_check_depth(st, sname, e));
    r->state = st;

    /* vLLM's top-level `instructions` extension: text ahead of all questions */
    json_t *ctx = json_object_get(root, "instructions");
    if (ctx != NULL && !json_is_null(ctx) && !json_is_string(ctx))
        return jev_rq_fail(e, 422, "instructions", "must be a string (text placed ahead of all questions)");
    r->context = json_string_value(ctx);

    json_t *qs = json_object_get(root, "questions");
    if (qs == NULL)
        return jev_rq_fail(e, 422, "questions", "missing (an object mapping ids to questions)");
    if (!json_is_object(qs))
        return jev_rq_fail(e, 422, "questions", "must be an object mapping ids to questions");
    size_t nq = json_object_size(qs);
    JEV_TRY(jev_rq_check_question_count(nq, e));
    int64_t nopt = 0;
    const char *id;
    json_t *qv;
    json_object_foreach(qs, id, qv) { nopt += s1_option_count(qv); }
    JEV_TRY(jev_rq_alloc(r, (int32_t)nq, nopt, 0, NULL, e));
    struct jev_option *opts = (struct jev_option *)(r->questions + nq);
    int32_t i = 0;
    json_object_foreach(qs, id, qv) {
        struct jev_question *q = &r->questions[i++];
        q->options = opts;
        JEV_TRY(s1_question(q, id, qv, e));
        JEV_ASSERT(q->n_options == s1_option_count(qv));
        opts += q->n_options;
        r->n_options_total += q->n_options;
    }

    JEV_TRY(s1_images(r, root, e));
    if (r->image.asset_key && !request_mentions(r, r->image.asset_key)) {
        char p[400];
        jev_rq_path(p, sizeof p, "assets.%s", r->image.asset_key);
        return jev_rq_fail(e, 400, p,
                           "the asset is never referenced (write its key in state, instructions or "
                           "criteria where the image belongs)");
    }
    return JEV_OK;
}

enum jev_status jev_request_parse_systemone(const char *body, size_t len, const struct jev_request_opts *opts,
                                            struct jev_request *out, struct jev_request_error *rerr) {
    memset(out, 0, sizeof *out);
    memset(rerr, 0, sizeof *rerr);
    enum jev_status s = jev_rq_load_body(body, len, opts, &out->root, rerr);
    if (s == JEV_OK)
        s = s1_parse(out->root, out, rerr);
    if (s == JEV_OK)
        s = jev_rq_finish(out, opts, rerr);
    if (s != JEV_OK)
        jev_request_free(out);
    return s;
}
