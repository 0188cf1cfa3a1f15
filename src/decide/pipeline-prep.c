/*
 * pipeline-prep.c - everything a decision request needs before and around
 * its forwards: prompt tokens, label ids and candidate tries, the image
 * (decode, preprocess, vision forward), M-RoPE positions, the scratch
 * buffers, the sequences it holds, and the peak-memory bookkeeping.
 *
 * What it is not: the order of forwards (path-*.c) or reading answers out of
 * logits (score.c).
 *
 * Token rule: a prompt is tokenized segment by segment (prompt-render.h):
 * template text with the special tokens matched, caller text with every
 * added token disabled, the image placeholder as n image-pad ids. The prefix
 * and each question suffix are tokenized on their own and concatenated, so
 * every path sees exactly the same ids for a question.
 */
#include "decide/pipeline-int.h" // defines: struct dc_req

#include <stdlib.h>
#include <string.h>

#include "base/timing.h" // defines: jev_now_ms
#include "model/mrope.h" // defines: jev_mrope_positions

/* ---- tokens ---- */

/*
 * Segment by segment, never the whole text at once: a template segment may
 * hold special tokens ("<|im_start|>") and is encoded with them matched; a
 * user segment is encoded with every added token disabled, so caller text
 * can never become a control token; the image placeholder becomes n_img
 * copies of the model's image-pad id (M-RoPE and the embedding override
 * find the image by that id).
 */
enum jev_status dc_tokenize_prompt(struct jev_decider *d, const struct jev_prompt *pr, int32_t n_img,
                                   struct jev_tokens *out, int32_t *img_at, struct jev_error *err) {
    if (pr->failed)
        return jev_fail(err, JEV_ERR_NOMEM, "prompt: out of memory while rendering");
    for (int32_t i = 0; i < pr->n_segs; i++) {
        const struct jev_segment *s = &pr->segs[i];
        if (s->kind == JEV_SEG_IMAGE) {
            if (img_at)
                *img_at = (int32_t)out->n;
            JEV_TRY(jev_tokens_reserve(out, (size_t)n_img, err));
            for (int32_t k = 0; k < n_img; k++)
                out->ids[out->n++] = d->model->config.ids.image_pad;
            continue;
        }
        unsigned flags = s->kind == JEV_SEG_USER ? JEV_TOK_NO_ADDED : 0u;
        JEV_TRY(jev_tokenizer_encode(d->tok, pr->text.data + s->off, s->len, flags, out, err));
    }
    if (out->n > (size_t)INT32_MAX / 4)
        return jev_fail(err, JEV_ERR_NOMEM, "prompt: %zu tokens is beyond any engine", out->n);
    return JEV_OK;
}

/* The option text exactly as the prompt shows it (jev_prompt_candidate applies the same escaping and
 * one-line folding), encoded as caller text. */
enum jev_status dc_candidate_tokens(struct jev_decider *d, const struct jev_question *qq, int32_t i,
                                    struct jev_tokens *out, struct jev_error *err) {
    size_t n = jev_prompt_candidate(qq, i, NULL, 0);
    char *text = malloc(n + 1);
    if (!text)
        return jev_fail(err, JEV_ERR_NOMEM, "out of memory for a candidate text");
    jev_prompt_candidate(qq, i, text, n + 1);
    enum jev_status s = jev_tokenizer_encode(d->tok, text, n, JEV_TOK_NO_ADDED, out, err);
    free(text);
    return s;
}

/*
 * Sizing facts of a trie, used before any forward: score.c forks a
 * sequence once per interior child wherever a node has two or more of
 * them (so `forks` is what one question adds to the live sequences), and
 * feeds each interior node exactly once (so `interior` bounds the tokens
 * and tasks of its rounds).
 */
void dc_trie_counts(const struct jev_trie *t, int32_t *forks, int32_t *interior) {
    int32_t f = 0, in = 0;
    for (int32_t n = 0; n < t->n_nodes; n++) {
        const struct jev_trie_node *nd = &t->nodes[n];
        if (nd->first_child < 0)
            continue;
        if (n > 0)
            in++;
        int32_t ic = 0; /* children that are interior themselves: each needs a sequence */
        for (int32_t c = nd->first_child; c >= 0; c = t->nodes[c].next_sibling)
            ic += t->nodes[c].first_child >= 0;
        if (ic >= 2)
            f += ic;
    }
    *forks = f;
    *interior = in;
}

/* Text mode: the trie of question qi's option texts. Identical or empty candidates (after
 * tokenization) are refused by jev_trie_build; the message then names the question too. */
static enum jev_status build_trie(struct dc_req *q, int32_t qi) {
    const struct jev_question *qq = &q->r->questions[qi];
    struct dc_question *dq = &q->qs[qi];
    int32_t n = qq->n_options;
    struct jev_tokens *c = calloc((size_t)n, sizeof *c);
    const int32_t **cands = calloc((size_t)n, sizeof *cands);
    int32_t *lens = calloc((size_t)n, sizeof *lens);
    const char **names = calloc((size_t)n, sizeof *names);
    enum jev_status s = JEV_OK;
    if (!c || !cands || !lens || !names)
        s = jev_fail(q->err, JEV_ERR_NOMEM, "out of memory for the candidates of question %s", qq->id);
    for (int32_t i = 0; s == JEV_OK && i < n; i++) {
        s = dc_candidate_tokens(q->d, qq, i, &c[i], q->err);
        cands[i] = c[i].ids;
        lens[i] = (int32_t)c[i].n;
        names[i] = qq->options[i].key;
    }
    if (s == JEV_OK) {
        s = jev_trie_build(&dq->trie, cands, lens, n, names, q->err);
        dq->has_trie = s == JEV_OK;
    }
    if (dq->has_trie)
        dc_trie_counts(&dq->trie, &dq->forks, &dq->interior);
    for (int32_t i = 0; c && i < n; i++)
        jev_tokens_free(&c[i]);
    free(c);
    free(cands);
    free(lens);
    free(names);
    if (s != JEV_OK && q->err->msg[0] && !strstr(q->err->msg, qq->id)) {
        /* name the question in a trie error ("identical candidates ...") */
        struct jev_error e2 = {0};
        jev_fail(&e2, s, "question %s: %s", qq->id, q->err->msg);
        *q->err = e2;
    }
    return s;
}

/*
 * Label mode: the ids each question reads, and their columns among the
 * union of all of them. One union for the whole request means one
 * vocab_rows list for every forward (the LM takes one list per batch), and
 * it stays small: at most 255 choice labels + 4 yes/no variants + 10 digits.
 */
static enum jev_status build_labels(struct dc_req *q) {
    const struct jev_request *r = q->r;
    int64_t total = 0;
    for (int32_t i = 0; i < r->n_questions; i++)
        total += (int64_t)r->questions[i].n_options * JEV_LABEL_MAX_VARIANTS;
    q->label_block = malloc((size_t)(3 * total + total) * sizeof(int32_t));
    if (!q->label_block)
        return jev_fail(q->err, JEV_ERR_NOMEM, "out of memory for %lld label ids", (long long)total);
    int32_t *at = q->label_block;
    q->cols = at + 3 * total; /* the union, at most `total` ids */
    q->n_cols = 0;
    for (int32_t i = 0; i < r->n_questions; i++) {
        struct dc_question *dq = &q->qs[i];
        const struct jev_question *qq = &r->questions[i];
        int32_t cap = qq->n_options * JEV_LABEL_MAX_VARIANTS;
        dq->ids = at;
        dq->owner = at + cap;
        dq->cols = at + 2 * cap;
        at += 3 * cap;
        JEV_TRY(jev_labels_check(&q->d->labels, qq, q->err));
        dq->n_ids = jev_labels_ids(&q->d->labels, qq, dq->ids, dq->owner, cap);
        if (dq->n_ids < 0)
            return jev_fail(q->err, JEV_ERR_INVALID_ARG, "question %s: no label set fits it", qq->id);
        for (int32_t k = 0; k < dq->n_ids; k++) {
            int32_t c = 0;
            while (c < q->n_cols && q->cols[c] != dq->ids[k])
                c++;
            if (c == q->n_cols)
                q->cols[q->n_cols++] = dq->ids[k];
            dq->cols[k] = c;
        }
    }
    return JEV_OK;
}

/*
 * The prefix is rendered and tokenized once; each question's suffix on its
 * own (label or text rendering, as the request's scoring asks), so the
 * paths concatenate the same ids; generate_json has one suffix for all.
 */
enum jev_status dc_prepare_tokens(struct dc_req *q) {
    struct jev_decider *d = q->d;
    const struct jev_request *r = q->r;
    struct jev_prompt pr;
    jev_prompt_init(&pr);
    enum jev_status s = jev_prompt_prefix(&pr, r, &d->frame, q->err);
    q->img_at = -1;
    if (s == JEV_OK)
        s = dc_tokenize_prompt(d, &pr, q->has_image ? q->n_img_tok : 0, &q->prefix, &q->img_at, q->err);
    if (s == JEV_OK && q->p.path == JEV_DECIDE_GENERATE) {
        jev_prompt_reset(&pr);
        s = jev_prompt_genjson(&pr, r, &d->frame, q->err);
        if (s == JEV_OK)
            s = dc_tokenize_prompt(d, &pr, 0, &q->gen, NULL, q->err);
    } else if (s == JEV_OK) {
        bool label = q->p.scoring == JEV_SCORING_LABEL;
        for (int32_t i = 0; s == JEV_OK && i < r->n_questions; i++) {
            jev_prompt_reset(&pr);
            s = jev_prompt_question(&pr, r, i, &d->frame, label ? &d->labels : NULL, q->err);
            if (s == JEV_OK)
                s = dc_tokenize_prompt(d, &pr, 0, &q->qs[i].suffix, NULL, q->err);
            if (s == JEV_OK && q->qs[i].suffix.n == 0)
                s = jev_fail(q->err, JEV_ERR_INVALID_ARG, "question %s: empty suffix", r->questions[i].id);
            if (s == JEV_OK && (int32_t)q->qs[i].suffix.n > q->max_suffix)
                q->max_suffix = (int32_t)q->qs[i].suffix.n;
            if (s == JEV_OK && !label)
                s = build_trie(q, i);
        }
        if (s == JEV_OK && label)
            s = build_labels(q);
    }
    jev_prompt_free(&pr);
    return s;
}

/* ---- the image ---- */

/* Bytes from the request (base64-decoded by the parser) or a file path (workload, CLI); the image is
 * decoded, bounded and preprocessed; the decoded RGB is freed right away, the pixel values kept. */
static enum jev_status image_decode(struct dc_req *q) {
    struct jev_decider *d = q->d;
    const struct jev_image_input *in = &q->r->image;
    double t0 = jev_now_ms();
    /* a planner has no engine and so no pool, and a detached preparation may not use the engine's (the
     * engine's thread does): it decodes and resizes on the pool it was given, or on the calling thread (the
     * same pixels either way) */
    struct jev_pool *pool = q->detached ? q->prep_pool : d->engine ? d->engine->pool : NULL;
    struct jev_image_params ip = jev_image_default_params();
    ip.pool = pool;
    enum jev_status s;
    if (in->bytes)
        s = jev_image_decode(in->bytes, in->n_bytes, in->asset_key ? in->asset_key : "image", &ip, &q->img, q->err);
    else if (in->path)
        s = jev_image_load(in->path, &ip, &q->img, q->err);
    else
        s = jev_fail(q->err, JEV_ERR_INVALID_ARG, "image: the request has no image bytes or path");
    if (s != JEV_OK)
        return s;
    struct jev_preprocess_params pp = {.bound = d->image_max_side, .max_patches = d->max_patches};
    jev_vision_input_free(&q->vin);
    s = jev_vision_preprocess(&d->pre, &q->img, &pp, pool, &q->vin, q->err);
    struct jev_decide_stats *st = &q->res->stats;
    st->image_width = q->img.width;
    st->image_height = q->img.height;
    if (s == JEV_OK) {
        st->resized_width = q->vin.size.width;
        st->resized_height = q->vin.size.height;
        q->n_img_tok = q->vin.size.n_tokens;
        int64_t b = (int64_t)q->img.width * q->img.height * 3 + (int64_t)q->vin.size.width * q->vin.size.height * 3 +
                    (int64_t)q->vin.size.n_patches * q->vin.size.patch_dim * (int64_t)sizeof(float);
        if (b > q->image_bytes)
            q->image_bytes = b;
    }
    jev_image_free(&q->img);
    st->image_ms += jev_now_ms() - t0;
    return s;
}

/* With reuse_prefix on the shared path, image bytes are keyed by their digest; when the decider
 * keeps the embeddings of the same bytes, the prompt needs only the image's size (kept with them),
 * and neither the decode nor the tower runs (dc_image_from_kept). */
enum jev_status dc_image_load(struct dc_req *q) {
    const struct jev_image_input *in = &q->r->image;
    q->image_key[0] = '\0';
    if (q->p.reuse_prefix && q->p.path == JEV_DECIDE_SHARED && in->bytes) {
        double t0 = jev_now_ms();
        jev_sha256_hex(in->bytes, in->n_bytes, q->image_key);
        int32_t at = q->detached ? -1 : dc_kept_image_find(q->d, q->image_key); /* detached: dc_begin_attach */
        if (at >= 0) {
            const struct dc_kept_image *k = &q->d->kept_image[at];
            struct jev_decide_stats *st = &q->res->stats;
            q->image_deferred = true;
            q->image_kept = at;
            q->vin.size = k->size;
            q->n_img_tok = k->size.n_tokens;
            st->image_width = k->image_width;
            st->image_height = k->image_height;
            st->resized_width = k->size.width;
            st->resized_height = k->size.height;
            st->image_ms += jev_now_ms() - t0;
            return JEV_OK;
        }
    }
    return image_decode(q);
}

/* The image pads' input rows point at the embeddings. */
static void image_place(struct dc_req *q) {
    if (q->img_at < 0)
        return;
    int64_t D = q->d->model->config.text.hidden;
    for (int32_t k = 0; k < q->n_img_tok; k++)
        q->embd[q->img_at + k] = q->img_embd + (int64_t)k * D;
}

void dc_image_from_kept(struct dc_req *q) {
    double t0 = jev_now_ms();
    const struct dc_kept_image *k = &q->d->kept_image[q->image_kept];
    memcpy(q->img_embd, k->embd, (size_t)k->size.n_tokens * (size_t)q->d->model->config.text.hidden * sizeof(float));
    image_place(q);
    q->res->stats.vision_ms += jev_now_ms() - t0;
}

void dc_image_keep(struct dc_req *q) {
    struct dc_kept_image *k = &q->d->kept_image[dc_kept_image_slot(q->d)];
    size_t bytes = (size_t)q->n_img_tok * (size_t)q->d->model->config.text.hidden * sizeof(float);
    float *e = malloc(bytes > 0 ? bytes : 1);
    if (!e) /* nothing kept: a later request runs its image as usual */
        return;
    memcpy(e, q->img_embd, bytes);
    k->used = ++q->d->kept_clock;
    k->embd = e;
    memcpy(k->key, q->image_key, sizeof k->key);
    k->size = q->vin.size;
    k->image_width = q->res->stats.image_width;
    k->image_height = q->res->stats.image_height;
}

enum jev_status dc_image_encode(struct dc_req *q) {
    struct jev_decider *d = q->d;
    double t0 = jev_now_ms();
    enum jev_status s =
        jev_vision_forward(&d->vision, q->vin.pixels, q->vin.size.grid_h, q->vin.size.grid_w, q->img_embd, q->err);
    if (s == JEV_OK)
        image_place(q);
    q->res->stats.vision_ms += jev_now_ms() - t0;
    return s;
}

void dc_image_release(struct dc_req *q) {
    jev_image_free(&q->img);
    jev_vision_input_free(&q->vin);
}

/* ---- positions ---- */

/* Positions come from the ids alone (the pad run is the image), exactly as transformers'
 * get_rope_index walks input_ids; the shared and independent paths therefore agree on them. */
enum jev_status dc_mrope(struct dc_req *q, const int32_t *ids, int32_t n, int32_t *delta) {
    JEV_ASSERT(n <= q->cap_prompt);
    const struct jev_config *c = &q->d->model->config;
    struct jev_mrope_image img = {q->vin.size.grid_h, q->vin.size.grid_w};
    int32_t merge = c->vision.merge > 0 ? c->vision.merge : 2;
    return jev_mrope_positions(ids, n, c->ids.image_pad, &img, q->has_image ? 1 : 0, merge, q->mrope, delta, q->err);
}

void dc_mrope_slice(const struct dc_req *q, int32_t n, int32_t start, int32_t count, int32_t *pos) {
    for (int32_t i = 0; i < count; i++)
        for (int a = 0; a < 3; a++)
            pos[i * 3 + a] = q->mrope[(int64_t)a * n + start + i];
}

/* ---- sequences ---- */

/* Records a sequence in the request's table, so that an error anywhere still releases it. */
static enum jev_status hold(struct dc_req *q, struct jev_seq *s) {
    for (int32_t i = 0; i < q->cap_live; i++)
        if (!q->live[i].seq) {
            q->live[i].seq = s;
            return JEV_OK;
        }
    jev_seq_free(s);
    return jev_fail(q->err, JEV_ERR_CONTEXT_FULL, "decide: more than %d sequences held at once", q->cap_live);
}

enum jev_status dc_seq_new(struct dc_req *q, struct jev_seq **out) {
    JEV_TRY(jev_seq_new(&q->d->engine->state, out, q->err));
    JEV_TRY(hold(q, *out));
    dc_track(q);
    return JEV_OK;
}

static enum jev_status fork_held(struct dc_req *q, struct jev_seq *parent, bool light, struct jev_seq **out) {
    JEV_TRY(light ? jev_seq_fork_light(parent, out, q->err) : jev_seq_fork(parent, out, q->err));
    q->res->stats.forks++;
    JEV_TRY(hold(q, *out));
    dc_track(q);
    return JEV_OK;
}

enum jev_status dc_seq_fork(struct dc_req *q, struct jev_seq *parent, struct jev_seq **out) {
    return fork_held(q, parent, false, out);
}

bool dc_light_fork(const struct dc_req *q, int32_t i) {
    const struct jev_engine *e = q->d->engine;
    if (q->p.scoring != JEV_SCORING_LABEL || (e && e->state.max_light == 0))
        return false;
    /* the forward's slice: the engine's, or for a planner the request's (its caller passes the slice of
     * the engine it plans for) */
    int32_t slice = e ? e->lm.p.max_batch_tokens : q->p.prefill_chunk;
    return q->qs[i].suffix.n <= (size_t)slice;
}

enum jev_status dc_seq_fork_question(struct dc_req *q, struct jev_seq *parent, int32_t i, struct jev_seq **out) {
    return fork_held(q, parent, dc_light_fork(q, i), out);
}

void dc_seq_detach(struct dc_req *q, struct jev_seq *s) {
    for (int32_t i = 0; i < q->cap_live; i++)
        if (q->live[i].seq == s)
            q->live[i].seq = NULL;
}

void dc_seq_release(struct dc_req *q, struct jev_seq *s) {
    if (!s)
        return;
    dc_seq_detach(q, s);
    jev_seq_free(s);
}

/* ---- forwards and memory ---- */

/* Sampled after every forward and fork: K/V pages are taken inside forwards and linear states at
 * forks, so these are the moments the live bytes can reach a new high. */
void dc_track(struct dc_req *q) {
    const struct jev_state *st = &q->d->engine->state;
    int64_t pages = st->n_pages - st->n_free;
    int64_t dyn = pages * q->d->page_bytes + (int64_t)st->n_live * q->d->seq_bytes; /* light forks: pages only */
    if (dyn > q->peak_dyn)
        q->peak_dyn = dyn;
    if (st->n_live + st->n_light > q->peak_seqs)
        q->peak_seqs = st->n_live + st->n_light;
}

/* Every path's forwards come through here, so the time limit is checked once per forward: a
 * request stops between two forwards, its sequences released by the caller's normal cleanup. */
enum jev_status dc_forward(struct dc_req *q, const struct jev_lm_batch *b) {
    struct jev_engine *e = q->d->engine;
    double spent = jev_now_ms() - q->t_begin;
    if (q->p.timeout_ms > 0 && spent > q->p.timeout_ms) {
        jev_fail(q->err, JEV_ERR_ABORTED, "decide: the request ran %.0f ms, past its time limit of %.0f ms", spent,
                 q->p.timeout_ms);
        return jev_engine_set_error(e, q->err);
    }
    enum jev_status s = jev_lm_forward(&e->lm, b, q->err);
    if (s != JEV_OK)
        return jev_engine_set_error(e, q->err);
    dc_track(q);
    return JEV_OK;
}

/* ---- scratch ---- */

int32_t dc_batch_size(const struct dc_req *q) {
    int32_t n = q->r->n_questions;
    int32_t b = q->p.batch <= 0 || q->p.batch > n ? n : q->p.batch;
    if (q->p.scoring == JEV_SCORING_TEXT && b > DC_TEXT_ROWS_MAX)
        b = DC_TEXT_ROWS_MAX;
    return b;
}

/*
 * Size first, allocate once: from the tokens, the largest forward the path
 * will run (a batch of suffixes, a full prompt, a prefill chunk or a trie
 * round), the most logit rows of one forward (label rows are few; a text
 * row is the whole vocabulary), the trie tasks and the sequences; then one
 * arena for all of it. The forward loops below only point into it.
 */
enum jev_status dc_prepare_scratch(struct dc_req *q) {
    const struct jev_request *r = q->r;
    const struct jev_engine *e = q->d->engine;
    bool text = q->p.scoring == JEV_SCORING_TEXT && q->p.path != JEV_DECIDE_GENERATE;
    int32_t P = (int32_t)q->prefix.n;
    int64_t tokens = P, rows = 1, runs = 1, tasks = 1;
    if (q->p.path == JEV_DECIDE_GENERATE) {
        q->cap_prompt = P + (int32_t)q->gen.n;
        int32_t chunk = q->p.prefill_chunk;
        tokens = q->cap_prompt < chunk ? q->cap_prompt : chunk;
    } else {
        q->cap_prompt = P + q->max_suffix;
        int32_t B = q->p.path == JEV_DECIDE_SHARED ? dc_batch_size(q) : 1;
        /* the largest forward: a batch of suffixes (shared), a full prompt (independent) or a trie round */
        for (int32_t b0 = 0; b0 < r->n_questions; b0 += B) {
            int64_t suf = 0, in = 0;
            for (int32_t i = b0; i < b0 + B && i < r->n_questions; i++) {
                suf += (int64_t)q->qs[i].suffix.n;
                in += q->qs[i].interior;
            }
            if (q->p.path == JEV_DECIDE_INDEPENDENT)
                suf = P + q->max_suffix;
            tokens = suf > tokens ? suf : tokens;
            tokens = in > tokens ? in : tokens;
            tasks = in + B > tasks ? in + B : tasks;
        }
        rows = B;
        runs = B;
        if (text && rows < DC_TEXT_ROWS_MAX)
            rows = DC_TEXT_ROWS_MAX;
    }
    if (q->cap_prompt > e->params.max_tokens)
        return jev_fail(q->err, JEV_ERR_CONTEXT_FULL,
                        "decide: the prompt has %d tokens, the engine holds %d per sequence (max_tokens)",
                        q->cap_prompt, e->params.max_tokens);
    if (runs < e->lm.p.max_runs)
        runs = e->lm.p.max_runs; /* a trie round runs one task per live sequence */
    q->cap_tokens = (int32_t)tokens;
    q->cap_runs = (int32_t)runs;
    q->cap_rows = (int32_t)rows;
    q->cap_tasks = (int32_t)(tasks > runs ? tasks : runs);
    q->n_vocab = q->d->model->weights.text.lm_head.rows;
    int64_t cols = (text || q->p.path == JEV_DECIDE_GENERATE) ? q->n_vocab : (q->n_cols > 0 ? q->n_cols : 1);
    q->cap_live = e->state.max_seqs + e->state.max_light + 1;
    int64_t D = q->d->model->config.text.hidden;
    int32_t embd_n = q->cap_tokens > q->cap_prompt ? q->cap_tokens : q->cap_prompt;
    /* every buffer, in the order they are taken below */
    const size_t sz[] = {
        (size_t)q->cap_tokens * sizeof(int32_t),                               /* ids */
        (size_t)q->cap_tokens * 3 * sizeof(int32_t),                           /* pos */
        (size_t)embd_n * sizeof(float *),                                      /* embd (by prompt index) */
        (size_t)q->cap_prompt * 3 * sizeof(int32_t),                           /* mrope */
        (size_t)q->cap_runs * sizeof(struct jev_seq *),                        /* seqs */
        (size_t)q->cap_runs * sizeof(int32_t),                                 /* seq_len */
        (size_t)q->cap_rows * sizeof(int32_t),                                 /* out_idx */
        (size_t)q->cap_rows * (size_t)cols * sizeof(float),                    /* logits */
        (size_t)q->cap_tasks * 2 * DC_TASK_BYTES,                              /* tasks: two tables */
        (size_t)q->cap_live * sizeof(struct dc_seqref),                        /* live */
        (size_t)(q->has_image ? q->n_img_tok : 0) * (size_t)D * sizeof(float), /* img_embd */
    };
    enum { N_BUF = sizeof sz / sizeof sz[0] };
    size_t need = 0;
    for (int i = 0; i < N_BUF; i++)
        need += jev_align64(sz[i] ? sz[i] : 1);
    JEV_TRY(jev_arena_init(&q->arena, need, q->err));
    void *buf[N_BUF];
    for (int i = 0; i < N_BUF; i++) {
        buf[i] = jev_arena_alloc(&q->arena, sz[i] ? sz[i] : 1, q->err);
        JEV_ASSERT(buf[i] != NULL); /* the arena was sized for exactly these */
    }
    q->ids = buf[0];
    q->pos = buf[1];
    q->embd = buf[2];
    q->mrope = buf[3];
    q->seqs = buf[4];
    q->seq_len = buf[5];
    q->out_idx = buf[6];
    q->logits = buf[7];
    q->tasks = buf[8];
    q->live = buf[9];
    q->img_embd = buf[10];
    return JEV_OK;
}

/* ---- teardown ---- */

void dc_req_free(struct dc_req *q) {
    for (int32_t i = 0; q->live && i < q->cap_live; i++)
        if (q->live[i].seq) {
            jev_seq_free(q->live[i].seq);
            q->live[i].seq = NULL;
        }
    dc_image_release(q);
    jev_tokens_free(&q->prefix);
    jev_tokens_free(&q->gen);
    for (int32_t i = 0; q->qs && i < q->r->n_questions; i++) {
        jev_tokens_free(&q->qs[i].suffix);
        if (q->qs[i].has_trie)
            jev_trie_free(&q->qs[i].trie);
    }
    free(q->qs);
    free(q->label_block);
    jev_arena_free(&q->arena);
    q->live = NULL;
    q->qs = NULL;
    q->label_block = NULL;
}
