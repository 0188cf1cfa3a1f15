/*
 * pipeline.c - the decider (the model's tokenizer, labels, vision runtime
 * over one engine; or a planner without one) and the entry points: jev_decide_run, jev_decide_body,
 * jev_decide_plan, jev_decide_dump.
 *
 * One call of jev_decide_run, in order: the image is decoded and
 * preprocessed (its token count is part of the prompt), the prompts are
 * rendered and tokenized, the scratch is sized and allocated once, then the
 * path runs its forwards, and the counters are read off the engine (forwards
 * and tokens where the LM and the tower count them). Every sequence the call
 * made is released on every exit.
 *
 * What it is not: the forwards' order (path-*.c), the answer arithmetic
 * (answer.c), request parsing (request.c).
 */
#include "decide/pipeline-int.h" // defines: struct jev_decider, struct dc_req

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/timing.h" // defines: jev_now_ms
#include "model/mrope.h" // defines: jev_mrope_positions

/* ---- params and names ---- */

struct jev_decider_params jev_decider_default_params(void) {
    struct jev_decider_params p = {.image_max_side = 768, .tokenizer = NULL};
    return p;
}

struct jev_decide_params jev_decide_default_params(void) {
    struct jev_decide_params p = {.path = JEV_DECIDE_SHARED,
                                  .scoring = JEV_SCORING_LABEL,
                                  .norm = JEV_TRIE_SUM,
                                  .batch = 4,
                                  .prefill_chunk = 0,
                                  .max_new_tokens = 0};
    return p;
}

const char *jev_decide_path_name(enum jev_decide_path p) {
    switch (p) {
    case JEV_DECIDE_SHARED: return "shared";
    case JEV_DECIDE_INDEPENDENT: return "independent";
    case JEV_DECIDE_GENERATE: return "generate_json";
    }
    return "?";
}

const char *jev_decide_scoring_name(enum jev_decide_scoring s) { return s == JEV_SCORING_TEXT ? "text" : "label"; }

/* ---- the decider ---- */

/* labels.h's encode callback over the decider's tokenizer (plain text, no added tokens): the label
 * check asks whether cue + label tokenizes as cue followed by exactly one label token. */
static int encode_cb(void *ctx, const char *text, int32_t *ids, int max) {
    struct jev_decider *d = ctx;
    struct jev_tokens t = {0};
    struct jev_error e = {0};
    if (jev_tokenizer_encode(d->tok, text, strlen(text), JEV_TOK_NO_ADDED, &t, &e) != JEV_OK)
        return -1;
    int n = (int)t.n;
    for (int i = 0; i < n && i < max; i++)
        ids[i] = t.ids[i];
    jev_tokens_free(&t);
    return n;
}

static bool file_exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/*
 * Vision capacity: the largest grid an image can get under the bound. The
 * bound caps the longer side before smart_resize rounds it to the factor;
 * a tiny image is scaled UP to min_pixels instead, which for an extreme
 * aspect can need more patches than the bound's square, hence the second
 * term. A grid above the capacity is refused by preprocessing (it names
 * the limit) rather than silently resized again.
 */
static int32_t patch_capacity(const struct jev_preprocess_config *pre, int32_t bound) {
    int64_t f = (int64_t)pre->patch * pre->merge;
    int64_t side_px = bound > 0 ? (bound + f - 1) / f * f : 1568; /* no bound: TypeSafe's largest side */
    int64_t side = side_px / pre->patch;
    int64_t cap = side * side;
    /* a small image is scaled UP to min_pixels; leave room for its rounding */
    int64_t low = 2 * (pre->min_pixels / ((int64_t)pre->patch * pre->patch)) + 4 * side;
    if (low > cap)
        cap = low;
    int64_t mm = (int64_t)pre->merge * pre->merge;
    cap = (cap + mm - 1) / mm * mm;
    return cap > INT32_MAX / 2 ? INT32_MAX / 2 : (int32_t)cap;
}

/*
 * The tokenizer: the model's own, borrowed (one per model, loaded on its first use and shared by
 * every engine's decider); a decider loads and owns one only for an override path.
 */
static enum jev_status decider_tokenizer(struct jev_decider *d, const char *override, char *path, size_t size,
                                         struct jev_error *err) {
    if (!override) {
        snprintf(path, size, "%s/tokenizer.json", d->model->dir);
        return jev_model_tokenizer(d->model, &d->tok, err);
    }
    snprintf(path, size, "%s", override);
    JEV_TRY(jev_tokenizer_load(path, &d->own_tok, err));
    d->tok = d->own_tok;
    return JEV_OK;
}

/*
 * Everything a request needs that does not depend on the request: the
 * tokenizer (the model's), the label sets checked against it once, the
 * image processor's settings, and - over an engine - the vision runtime
 * sized for the bound (its activations are allocated here, once). Without
 * an engine (a planner) the vision settings are checked and nothing is
 * allocated for the tower.
 */
static enum jev_status decider_new(struct jev_model *model, struct jev_engine *engine,
                                   const struct jev_decider_params *params, struct jev_decider **out,
                                   struct jev_error *err) {
    struct jev_decider_params dp = params ? *params : jev_decider_default_params();
    struct jev_decider *d = calloc(1, sizeof *d);
    if (!d)
        return jev_fail(err, JEV_ERR_NOMEM, "decider: out of memory");
    d->model = model;
    d->engine = engine;
    atomic_store(&d->reuse_prefix, true);
    d->frame = jev_prompt_frame_default();
    d->image_max_side = dp.image_max_side == 0 ? 768 : dp.image_max_side;
    char path[4096];
    enum jev_status s = decider_tokenizer(d, dp.tokenizer, path, sizeof path, err);
    if (s == JEV_OK) {
        s = jev_labels_build(&d->labels, encode_cb, d, d->frame.cue, err);
        if (s != JEV_OK) {
            struct jev_error e2 = {0};
            jev_fail(&e2, s, "%s: the label sets do not fit this tokenizer: %s", path, err->msg);
            *err = e2;
        }
    }
    /* the image processor's settings: the model's file, else Qwen3.5's values */
    snprintf(path, sizeof path, "%s/preprocessor_config.json", model->dir);
    if (s == JEV_OK)
        s = file_exists(path) ? jev_preprocess_config_load(path, &d->pre, err)
                              : (d->pre = jev_preprocess_config_qwen35(), JEV_OK);
    const struct jev_config *c = &model->config;
    if (s == JEV_OK && c->has_vision) {
        if (c->vision.out_hidden != c->text.hidden)
            s = jev_fail(err, JEV_ERR_FORMAT, "%s: vision out_hidden_size %d != text hidden_size %d", model->dir,
                         c->vision.out_hidden, c->text.hidden);
        else if (d->pre.patch != c->vision.patch || d->pre.merge != c->vision.merge ||
                 d->pre.temporal_patch != c->vision.temporal_patch)
            s = jev_fail(err, JEV_ERR_FORMAT,
                         "%s: preprocessor patch %d / merge %d / temporal %d differ from the vision config's "
                         "%d / %d / %d",
                         model->dir, d->pre.patch, d->pre.merge, d->pre.temporal_patch, c->vision.patch,
                         c->vision.merge, c->vision.temporal_patch);
        if (s == JEV_OK) {
            d->max_patches = patch_capacity(&d->pre, d->image_max_side);
            if (engine)
                s = jev_vision_init(&d->vision, &c->vision, &engine->weights.w->vision, engine->ops, engine->be,
                                    d->max_patches, err);
            d->has_vision = s == JEV_OK;
        }
    }
    const struct jev_text_config *t = &c->text;
    d->page_bytes = (int64_t)t->n_full_layers * 2 * JEV_KV_PAGE * t->kv_dim * (int64_t)sizeof(float);
    d->seq_bytes =
        (int64_t)t->n_linear_layers *
            ((int64_t)(t->conv_kernel - 1) * t->conv_dim + (int64_t)t->lin_v_heads * t->lin_k_dim * t->lin_v_dim) *
            (int64_t)sizeof(float) +
        (engine ? (int64_t)engine->state.max_pages * (int64_t)sizeof(int32_t) : 0) + (int64_t)sizeof(struct jev_seq);
    if (s != JEV_OK) {
        jev_decider_free(d);
        return s;
    }
    *out = d;
    return JEV_OK;
}

enum jev_status jev_decider_init(struct jev_model *model, struct jev_engine *engine,
                                 const struct jev_decider_params *params, struct jev_decider **out,
                                 struct jev_error *err) {
    *out = NULL;
    if (!model || !engine || engine->model != model)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "decider: needs a model and an engine made from it");
    return decider_new(model, engine, params, out, err);
}

enum jev_status jev_decider_planner(struct jev_model *model, const struct jev_decider_params *params,
                                    struct jev_decider **out, struct jev_error *err) {
    *out = NULL;
    if (!model)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "decider: needs a model");
    return decider_new(model, NULL, params, out, err);
}

void jev_decider_free(struct jev_decider *d) {
    if (!d)
        return;
    dc_kept_drop(d);
    dc_kept_image_drop(d);
    if (d->has_vision && d->engine)
        jev_vision_free(&d->vision);
    jev_tokenizer_free(d->own_tok);
    free(d);
}

const struct jev_tokenizer *jev_decider_tokenizer(const struct jev_decider *d) { return d->tok; }

/* ---- one request ---- */

/* Refuses what no path can run, before any work (and before any allocation). */
static enum jev_status check_params(const struct jev_decider *d, const struct jev_request *r,
                                    const struct jev_decide_params *p, struct jev_error *err) {
    if (p->path < JEV_DECIDE_SHARED || p->path > JEV_DECIDE_GENERATE)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "decide: unknown path %d", (int)p->path);
    if (p->scoring < JEV_SCORING_LABEL || p->scoring > JEV_SCORING_TEXT)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "decide: unknown scoring %d", (int)p->scoring);
    if (p->norm < JEV_TRIE_SUM || p->norm > JEV_TRIE_MEAN)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "decide: unknown normalisation %d", (int)p->norm);
    if (p->batch < 0 || p->prefill_chunk < 0 || p->max_new_tokens < 0)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "decide: batch %d, prefill_chunk %d, max_new_tokens %d < 0", p->batch,
                        p->prefill_chunk, p->max_new_tokens);
    if (!r || r->n_questions < 1 || !r->questions)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "decide: the request has no questions");
    if (r->has_image && !d->has_vision)
        return jev_fail(err, JEV_ERR_UNSUPPORTED, "decide: the request has an image and %s has no vision tower",
                        d->model->dir);
    return JEV_OK;
}

/* Steps shared by run, plan and dump: image (when asked), tokens, scratch (when asked). */
static enum jev_status prepare(struct dc_req *q, bool image, bool scratch) {
    q->has_image = q->r->has_image;
    q->qs = calloc((size_t)q->r->n_questions, sizeof *q->qs);
    if (!q->qs)
        return jev_fail(q->err, JEV_ERR_NOMEM, "out of memory for %d questions", q->r->n_questions);
    if (q->has_image && image)
        JEV_TRY(dc_image_load(q));
    JEV_TRY(dc_prepare_tokens(q));
    if (scratch)
        JEV_TRY(dc_prepare_scratch(q));
    return JEV_OK;
}

static void req_init(struct dc_req *q, struct jev_decider *d, const struct jev_request *r,
                     const struct jev_decide_params *p, struct jev_decide_result *res, struct jev_error *err) {
    memset(q, 0, sizeof *q);
    q->d = d;
    q->r = r;
    q->p = p ? *p : jev_decide_default_params();
    if (q->p.prefill_chunk == 0) /* the engine's slice; a planner without an engine plans with the CPU's */
        q->p.prefill_chunk = d->engine ? d->engine->params.prefill_chunk : 512;
    q->res = res;
    q->err = err;
    q->img_at = -1;
    q->t_begin = jev_now_ms();
}

static enum jev_status begin(struct jev_decider *d, const struct jev_request *r, const struct jev_decide_params *p,
                             struct jev_decide_result *out, struct jev_error *err, struct dc_req *q, bool detached,
                             struct jev_pool *prep_pool) {
    memset(out, 0, sizeof *out);
    req_init(q, d, r, p, out, err);
    q->detached = detached;
    q->prep_pool = prep_pool;
    if (!d->engine)
        return jev_fail(err, JEV_ERR_INVALID_ARG,
                        "decide: this decider has no engine (a planner: it plans, runs nothing)");
    JEV_TRY(check_params(d, r, &q->p, err));
    JEV_TRY(jev_answers_init(&out->answers, r, err));
    enum jev_status s = prepare(q, true, true);
    if (!detached)
        dc_track(q);
    return s;
}

enum jev_status dc_begin(struct jev_decider *d, const struct jev_request *r, const struct jev_decide_params *p,
                         struct jev_decide_result *out, struct jev_error *err, struct dc_req *q) {
    return begin(d, r, p, out, err, q, false, NULL);
}

enum jev_status dc_begin_detached(struct jev_decider *d, const struct jev_request *r, const struct jev_decide_params *p,
                                  struct jev_decide_result *out, struct jev_error *err, struct dc_req *q,
                                  struct jev_pool *pool) {
    return begin(d, r, p, out, err, q, true, pool);
}

void dc_begin_attach(struct dc_req *q) {
    if (!q->detached || !q->has_image || !q->image_key[0])
        return;
    int32_t at = dc_kept_image_find(q->d, q->image_key);
    if (at < 0 || q->d->kept_image[at].size.n_tokens != q->n_img_tok)
        return;
    q->image_deferred = true;
    q->image_kept = at;
    dc_image_from_kept(q);
    struct jev_vision_size size = q->vin.size; /* the grid stays: M-RoPE reads it */
    dc_image_release(q); /* the pixels are not needed: the tower's output of the same bytes is in place */
    q->vin.size = size;
}

/*
 * The counters are differences of the engine's own counts around the call
 * (the LM counts forwards, tokens and head rows where they run; the tower
 * counts its forwards), so they cannot drift from what actually ran.
 */
enum jev_status dc_run(struct jev_decider *d, const struct jev_request *r, const struct jev_decide_params *p,
                       struct jev_decide_result *out, struct jev_error *err, struct dc_req *q) {
    memset(out, 0, sizeof *out);
    double t0 = jev_now_ms();
    req_init(q, d, r, p, out, err);
    if (!d->engine)
        return jev_fail(err, JEV_ERR_INVALID_ARG,
                        "decide: this decider has no engine (a planner: it plans, runs nothing)");
    JEV_TRY(check_params(d, r, &q->p, err));
    struct jev_engine *e = d->engine;
    int64_t f0 = e->lm.n_forwards, t0_tok = e->lm.n_tokens, rows0 = e->lm.n_logit_rows;
    int64_t v0 = d->has_vision ? d->vision.n_forwards : 0;
    if (e->ops->memory) /* a device backend counts its own bytes: the call's peak starts from now */
        e->ops->memory(e->be, NULL, NULL, true);
    /* a kept prefix is only of use to the shared path that keeps them; otherwise its slot and pages go back */
    if (q->p.path != JEV_DECIDE_SHARED || !q->p.reuse_prefix)
        dc_kept_drop(d);
    enum jev_status s = jev_answers_init(&out->answers, r, err);
    if (s == JEV_OK)
        s = prepare(q, true, true);
    dc_track(q);
    if (s == JEV_OK) {
        switch (q->p.path) {
        case JEV_DECIDE_SHARED: s = dc_path_shared(q); break;
        case JEV_DECIDE_INDEPENDENT: s = dc_path_independent(q); break;
        case JEV_DECIDE_GENERATE: s = dc_path_generate(q); break;
        }
    }
    /* counters as the LM and the tower counted them */
    struct jev_decide_stats *st = &out->stats;
    st->lm_forwards = e->lm.n_forwards - f0;
    st->lm_tokens = e->lm.n_tokens - t0_tok;
    st->lm_logit_rows = e->lm.n_logit_rows - rows0;
    st->vision_forwards = d->has_vision ? d->vision.n_forwards - v0 : 0;
    st->prefix_tokens = (int32_t)q->prefix.n;
    st->image_tokens = q->has_image ? q->n_img_tok : 0;
    if (q->p.path != JEV_DECIDE_GENERATE)
        st->prompt_tokens = st->prefix_tokens + q->max_suffix;
    st->peak_seqs = q->peak_seqs;
    st->peak_bytes = (int64_t)e->lm.arena.cap + (q->has_image ? (int64_t)d->vision.arena.cap : 0) +
                     (int64_t)q->arena.peak + q->image_bytes + q->peak_dyn;
    st->peak_where = "cpu";
    if (e->ops->memory) { /* device memory, weights mirror included (as torch.cuda.max_memory_allocated) */
        e->ops->memory(e->be, NULL, &st->peak_bytes, false);
        st->peak_where = e->ops->name;
    }
    if (q->p.path != JEV_DECIDE_GENERATE) {
        out->valid = s == JEV_OK;
        /* the prefix counts whether it ran now or was kept: the same request reports the same usage */
        out->usage.input_tokens = st->lm_tokens + (st->prefix_reused ? st->prefix_tokens : 0);
    } else {
        out->usage.input_tokens = st->prompt_tokens;
        out->usage.output_tokens = st->output_tokens;
    }
    /* every sequence goes back to the engine now; the rest of q stays for the caller */
    for (int32_t i = 0; q->live && i < q->cap_live; i++)
        dc_seq_release(q, q->live[i].seq);
    st->total_ms = jev_now_ms() - t0;
    if (s != JEV_OK) {
        jev_engine_set_error(e, err);
        jev_decide_result_free(out);
    }
    return s;
}

enum jev_status jev_decide_run(struct jev_decider *d, const struct jev_request *r, const struct jev_decide_params *p,
                               struct jev_decide_result *out, struct jev_error *err) {
    if (atomic_load_explicit(&d->lost, memory_order_acquire)) {
        memset(out, 0, sizeof *out);
        return jev_fail(err, JEV_ERR_DEVICE_LOST, "%s (earlier; restart the engine)", d->lost_msg);
    }
    struct dc_req q;
    bool had_kept = dc_kept_count(d) > 0;
    enum jev_status s = dc_run(d, r, p, out, err, &q);
    dc_req_free(&q);
    if (s == JEV_ERR_CONTEXT_FULL && had_kept) {
        /* the kept prefixes' K/V pages may be what was missing: give them all back and run once more */
        dc_kept_drop(d);
        memset(err, 0, sizeof *err);
        s = dc_run(d, r, p, out, err, &q);
        dc_req_free(&q);
    }
    if (s == JEV_ERR_DEVICE_LOST && !atomic_load_explicit(&d->lost, memory_order_relaxed)) {
        snprintf(d->lost_msg, sizeof d->lost_msg, "%s", err->msg);
        atomic_store_explicit(&d->lost, true, memory_order_release);
    }
    return s;
}

enum jev_status jev_decider_status(const struct jev_decider *d, char *message, size_t size) {
    bool lost = atomic_load_explicit(&d->lost, memory_order_acquire);
    if (message && size > 0)
        snprintf(message, size, "%s", lost ? d->lost_msg : "");
    return lost ? JEV_ERR_DEVICE_LOST : JEV_OK;
}

void jev_decide_result_free(struct jev_decide_result *res) {
    jev_answers_free(&res->answers);
    free(res->gen_ids);
    jev_genjson_result_free(&res->gen);
    memset(res, 0, sizeof *res);
}

/* ---- sizing ---- */

/*
 * Sequences alive at once: the shared prefix, one fork per question of a
 * batch, and the forks of their tries (which keep their parents alive);
 * tokens: the longest prompt plus the longest candidate (text mode) or the
 * new-token budget (generate_json).
 */
enum jev_status jev_decide_plan(struct jev_decider *d, const struct jev_request *r, const struct jev_decide_params *p,
                                struct jev_engine_params *need, struct jev_error *err) {
    struct jev_decide_result res = {0};
    struct dc_req q;
    req_init(&q, d, r, p, &res, err);
    JEV_TRY(check_params(d, r, &q.p, err));
    /* the image's token count is needed for the prompt length: decode it (no forward) */
    enum jev_status s = prepare(&q, true, false);
    if (s == JEV_OK) {
        int32_t P = (int32_t)q.prefix.n, seqs = 1, states = 1, toks = P;
        int64_t pages = 0; /* K/V pages alive at once */
        if (q.p.path == JEV_DECIDE_GENERATE) {
            int32_t budget = q.p.max_new_tokens > 0 ? q.p.max_new_tokens : jev_genjson_max_tokens(r->n_questions);
            toks = P + (int32_t)q.gen.n + budget;
            pages = jev_kv_pages(toks);
        } else {
            int32_t B = q.p.path == JEV_DECIDE_SHARED ? dc_batch_size(&q) : 1;
            int32_t longest_cand = 0;
            for (int32_t i = 0; i < r->n_questions; i++)
                if (q.qs[i].has_trie)
                    for (int32_t n = 0; n < q.qs[i].trie.n_nodes; n++)
                        if (q.qs[i].trie.nodes[n].depth > longest_cand)
                            longest_cand = q.qs[i].trie.nodes[n].depth;
            toks = P + q.max_suffix + longest_cand;
            for (int32_t b0 = 0; b0 < r->n_questions; b0 += B) {
                bool shared = q.p.path == JEV_DECIDE_SHARED;
                int32_t alive = shared ? 1 : 0, full = alive;
                for (int32_t i = b0; i < b0 + B && i < r->n_questions; i++) {
                    alive += 1 + q.qs[i].forks;
                    full += shared && dc_light_fork(&q, i) ? 0 : 1 + q.qs[i].forks; /* light: no state */
                }
                seqs = alive > seqs ? alive : seqs;
                states = full > states ? full : states;
            }
            if (q.p.path == JEV_DECIDE_SHARED) {
                pages = dc_batch_pages(&q, B); /* the prefix and the largest batch's forks */
            } else { /* a question at a time: its sequence and its candidates' forks, each as long, at most */
                int32_t forks = 0;
                for (int32_t i = 0; i < r->n_questions; i++)
                    forks = q.qs[i].forks > forks ? q.qs[i].forks : forks;
                pages = (int64_t)(1 + forks) * jev_kv_pages(toks);
            }
        }
        need->max_batch = seqs - 1 > 1 ? seqs - 1 : 1;
        need->max_states = states;
        need->max_tokens = toks;
        need->kv_tokens =
            (int32_t)(pages * JEV_KV_PAGE < JEV_ENGINE_MAX_KV_TOKENS ? pages * JEV_KV_PAGE : JEV_ENGINE_MAX_KV_TOKENS);
    }
    dc_req_free(&q);
    jev_decide_result_free(&res);
    return s;
}

/* ---- what the layers above read ---- */

bool jev_decider_has_vision(const struct jev_decider *d) { return d->has_vision; }

const struct jev_model *jev_decider_model(const struct jev_decider *d) { return d->model; }

struct jev_engine *jev_decider_engine(const struct jev_decider *d) {
    return d->engine;
}

struct jev_decide_params jev_decider_request_params(const struct jev_decider *d) {
    struct jev_decide_params p = jev_decide_default_params();
    p.timeout_ms = atomic_load(&d->timeout_ms);
    p.reuse_prefix = atomic_load(&d->reuse_prefix);
    return p;
}

/* ---- the inputs, for reference scripts and peers ---- */

static json_t *ids_json(const int32_t *ids, size_t n) {
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        json_array_append_new(a, json_integer(ids[i]));
    return a;
}

/* Standard base64 (RFC 4648, padded) of n bytes; malloc'd, NUL-terminated. */
static char *base64(const unsigned char *b, size_t n) {
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *o = malloc((n + 2) / 3 * 4 + 1), *p = o;
    if (!o)
        return NULL;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)b[i] << 16 | (i + 1 < n ? (uint32_t)b[i + 1] << 8 : 0) | (i + 2 < n ? b[i + 2] : 0);
        *p++ = tab[v >> 18 & 63];
        *p++ = tab[v >> 12 & 63];
        *p++ = i + 1 < n ? tab[v >> 6 & 63] : '=';
        *p++ = i + 2 < n ? tab[v & 63] : '=';
    }
    *p = '\0';
    return o;
}

/* The image part of a dump: grid, pad placement and the pixel values as f32 little-endian. */
static json_t *image_json(const struct dc_req *q) {
    const struct jev_vision_size *z = &q->vin.size;
    size_t n = (size_t)z->n_patches * (size_t)z->patch_dim;
    /* the dump is little-endian on every host */
    unsigned char *bytes = malloc(n * 4 + 1);
    if (!bytes)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &q->vin.pixels[i], 4);
        for (int k = 0; k < 4; k++)
            bytes[i * 4 + (size_t)k] = (unsigned char)(u >> (8 * k));
    }
    char *b64 = base64(bytes, n * 4);
    free(bytes);
    if (!b64)
        return NULL;
    json_t *o = json_pack("{s:[i,i,i], s:i, s:i, s:i, s:[i,i], s:{s:[i,i], s:s, s:s}}", "grid_thw", 1, z->grid_h,
                          z->grid_w, "n_tokens", z->n_tokens, "pad_id", q->d->model->config.ids.image_pad, "first_pad",
                          q->img_at, "resized_hw", z->height, z->width, "pixel_values", "shape", z->n_patches,
                          z->patch_dim, "dtype", "float32-le", "base64", b64);
    free(b64);
    return o;
}

/*
 * Three renderings of the same request (label, text, generate_json), each
 * prepared exactly as a run would prepare it, so the dump's ids are the
 * ones the forwards see. The image is decoded once; the other two reuse
 * its token count.
 */
enum jev_status jev_decide_dump(struct jev_decider *d, const struct jev_request *r, const struct jev_decide_params *p,
                                json_t **out, struct jev_error *err) {
    *out = NULL;
    struct jev_decide_params pl = p ? *p : jev_decide_default_params();
    struct jev_decide_result rl = {0}, rt = {0}, rg = {0};
    struct dc_req ql, qt, qg;
    pl.scoring = JEV_SCORING_LABEL;
    pl.path = JEV_DECIDE_SHARED;
    req_init(&ql, d, r, &pl, &rl, err);
    struct jev_decide_params pt = pl, pg = pl;
    pt.scoring = JEV_SCORING_TEXT;
    pg.path = JEV_DECIDE_GENERATE;
    req_init(&qt, d, r, &pt, &rt, err);
    req_init(&qg, d, r, &pg, &rg, err);
    enum jev_status s = check_params(d, r, &pl, err);
    if (s == JEV_OK)
        s = prepare(&ql, true, false);
    /* the text and generate renderings reuse the label one's image token count */
    qt.n_img_tok = qg.n_img_tok = ql.n_img_tok;
    if (s == JEV_OK)
        s = prepare(&qt, false, false);
    if (s == JEV_OK)
        s = prepare(&qg, false, false);
    json_t *o = NULL;
    if (s == JEV_OK) {
        o = json_object();
        json_t *qs = json_array(), *eos = json_array();
        for (int32_t i = 0; i < d->model->config.ids.n_eos; i++)
            json_array_append_new(eos, json_integer(d->model->config.ids.eos[i]));
        json_object_set_new(o, "format", json_string("jev-decide-inputs/1"));
        json_object_set_new(o, "model_dir", json_string(d->model->dir));
        json_object_set_new(o, "norm", json_string(pl.norm == JEV_TRIE_MEAN ? "mean" : "sum"));
        json_object_set_new(o, "eos_ids", eos);
        json_object_set_new(o, "prefix_ids", ids_json(ql.prefix.ids, ql.prefix.n));
        json_object_set_new(o, "image", ql.has_image ? image_json(&ql) : json_null());
        json_object_set_new(
            o, "generate",
            json_pack("{s:o, s:i}", "suffix_ids", ids_json(qg.gen.ids, qg.gen.n), "max_new_tokens",
                      pl.max_new_tokens > 0 ? pl.max_new_tokens : jev_genjson_max_tokens(r->n_questions)));
        for (int32_t i = 0; s == JEV_OK && i < r->n_questions; i++) {
            const struct jev_question *qq = &r->questions[i];
            const struct dc_question *dl = &ql.qs[i];
            json_t *keys = json_array(), *lab = json_array(), *cands = json_array();
            for (int32_t k = 0; k < qq->n_options; k++) {
                json_array_append_new(keys, json_string(qq->options[k].key));
                json_t *v = json_array();
                for (int32_t j = 0; j < dl->n_ids; j++)
                    if (dl->owner[j] == k)
                        json_array_append_new(v, json_integer(dl->ids[j]));
                json_array_append_new(lab, v);
                struct jev_tokens c = {0};
                s = dc_candidate_tokens(d, qq, k, &c, err);
                json_array_append_new(cands, ids_json(c.ids, c.n));
                jev_tokens_free(&c);
            }
            json_array_append_new(qs, json_pack("{s:s, s:s, s:o, s:{s:o, s:o}, s:{s:o, s:o}}", "id", qq->id, "type",
                                                jev_qtype_name(qq->type), "options", keys, "label", "suffix_ids",
                                                ids_json(dl->suffix.ids, dl->suffix.n), "option_ids", lab, "text",
                                                "suffix_ids", ids_json(qt.qs[i].suffix.ids, qt.qs[i].suffix.n),
                                                "candidates", cands));
        }
        json_object_set_new(o, "questions", qs);
        if (s != JEV_OK) {
            json_decref(o);
            o = NULL;
        }
    }
    dc_req_free(&ql);
    dc_req_free(&qt);
    dc_req_free(&qg);
    jev_decide_result_free(&rl);
    jev_decide_result_free(&rt);
    jev_decide_result_free(&rg);
    if (s == JEV_OK && !o)
        s = jev_fail(err, JEV_ERR_NOMEM, "decide: out of memory for the inputs dump");
    *out = o;
    return s;
}

enum jev_status jev_decide_image_input(struct jev_decider *d, const struct jev_request *r, struct jev_vision_input *out,
                                       struct jev_error *err) {
    memset(out, 0, sizeof *out);
    if (!r->has_image)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "decide: the request has no image");
    struct jev_decide_result res = {0};
    struct dc_req q;
    req_init(&q, d, r, NULL, &res, err);
    enum jev_status s = dc_image_load(&q);
    if (s == JEV_OK) {
        *out = q.vin; /* handed over */
        memset(&q.vin, 0, sizeof q.vin);
    }
    dc_req_free(&q);
    return s;
}

enum jev_status jev_decide_rope_delta(const struct jev_decider *d, const int32_t *ids, int32_t n, int32_t grid_h,
                                      int32_t grid_w, int32_t *delta, struct jev_error *err) {
    int32_t *pos = malloc((size_t)(n > 0 ? n : 1) * 3 * sizeof(int32_t));
    if (!pos)
        return jev_fail(err, JEV_ERR_NOMEM, "out of memory for %d positions", n);
    const struct jev_config *c = &d->model->config;
    struct jev_mrope_image img = {grid_h, grid_w};
    enum jev_status s = jev_mrope_positions(ids, n, c->ids.image_pad, &img, grid_h > 0 ? 1 : 0,
                                            c->vision.merge > 0 ? c->vision.merge : 2, pos, delta, err);
    free(pos);
    return s;
}
