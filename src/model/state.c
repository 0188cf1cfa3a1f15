/*
 * state.c - sequence storage, fork and the K/V page pool (state.h).
 *
 * Layout: the pool is one array of pages; a page holds JEV_KV_PAGE tokens of
 * K and V for every FULL layer ([n_full][2][JEV_KV_PAGE][kv_dim]), so one
 * page id serves all layers of a token range. A sequence owns a page table
 * (its slot's row of page_table) for the tokens after its prefix. The linear
 * state of slot s is one contiguous block: conv windows of all LINEAR layers,
 * then their recurrent matrices. Light slots (state.h) follow the full ones
 * in seqs and page_table and have no linear block.
 *
 * The big blocks are calloc'ed: the OS hands out zero pages lazily, so an
 * engine sized for 8192 tokens x 65 sequences costs address space up front
 * and resident memory only as sequences fill (the statistics report both).
 */
#include "model/state.h" // defines: struct jev_state, struct jev_seq

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- sizes ---- */

/* ceil(a / b) for positive sizes (the callers bound a by max_tokens, so the result fits). */
static int32_t div_up(int64_t a, int64_t b) { return (int32_t)((a + b - 1) / b); }

/* Floats of one DeltaNet layer's state: the conv window, then the recurrent matrix. */
int64_t jev_state_layer_floats(const struct jev_text_config *t) {
    int64_t conv = (int64_t)(t->conv_kernel - 1) * t->conv_dim;
    int64_t ssm = (int64_t)t->lin_v_heads * t->lin_k_dim * t->lin_v_dim;
    return conv + ssm;
}

/*
 * Pages in the pool: room for kv_tokens own tokens over all live sequences
 * (a prefix and its forks' suffixes), plus one partially filled page per
 * sequence, so that the pool never runs out before the token budget does.
 */
static int32_t pool_pages(const struct jev_state_params *p) {
    int64_t kv_tokens = p->kv_tokens > 0 ? p->kv_tokens : 2 * (int64_t)p->max_tokens;
    /* every live sequence may waste up to one partial page */
    return div_up(kv_tokens, JEV_KV_PAGE) + p->max_seqs + p->max_light;
}

size_t jev_state_bytes(const struct jev_config *cfg, const struct jev_state_params *p) {
    const struct jev_text_config *t = &cfg->text;
    size_t page = (size_t)t->n_full_layers * 2 * JEV_KV_PAGE * (size_t)t->kv_dim * sizeof(float);
    size_t lin = (size_t)t->n_linear_layers * (size_t)jev_state_layer_floats(t) * sizeof(float);
    size_t max_pages = (size_t)div_up(p->max_tokens, JEV_KV_PAGE);
    size_t slots = (size_t)p->max_seqs + (size_t)p->max_light;
    return (size_t)pool_pages(p) * page + (size_t)p->max_seqs * lin +
           slots * (sizeof(struct jev_seq) + max_pages * sizeof(int32_t)) + (size_t)pool_pages(p) * sizeof(int32_t);
}

/* ---- pool lifetime ---- */

/* The two big blocks, zeroed, in the backend's memory. n floats; an overflowing size is refused. */
static float *block_alloc(const struct jev_state *st, size_t n) {
    if (n > SIZE_MAX / sizeof(float))
        return NULL;
    return st->ops->alloc(st->be, n * sizeof(float));
}

/*
 * Sizes everything from the config and the params, then allocates the four
 * blocks once. The limits keep every size computation inside int64 and the
 * page ids inside int32.
 */
enum jev_status jev_state_init(struct jev_state *st, const struct jev_config *cfg, const struct jev_state_params *p,
                               struct jev_error *err) {
    memset(st, 0, sizeof *st);
    const struct jev_text_config *t = &cfg->text;
    if (p->max_tokens <= 0 || p->max_seqs <= 0 || p->kv_tokens < 0 || p->max_light < 0)
        return jev_fail(err, JEV_ERR_INVALID_ARG,
                        "state: max_tokens (%d) and max_seqs (%d) must be positive, max_light (%d) not negative",
                        p->max_tokens, p->max_seqs, p->max_light);
    if (p->max_tokens > (1 << 24) || p->max_seqs > 4096 || p->max_light > 4096)
        return jev_fail(err, JEV_ERR_INVALID_ARG,
                        "state: max_tokens %d (limit 16777216), max_seqs %d or max_light %d (limit 4096) too large",
                        p->max_tokens, p->max_seqs, p->max_light);
    st->n_layers = t->n_layers;
    st->n_full = t->n_full_layers;
    st->n_linear = t->n_linear_layers;
    int32_t nf = 0, nl = 0;
    for (int32_t l = 0; l < t->n_layers; l++)
        st->layer_slot[l] = t->layer_kind[l] == JEV_LAYER_FULL ? nf++ : nl++;
    st->kv_dim = t->kv_dim;
    st->conv_dim = t->conv_dim;
    st->conv_keep = t->n_linear_layers > 0 ? t->conv_kernel - 1 : 0;
    st->ssm_floats = (int64_t)t->lin_v_heads * t->lin_k_dim * t->lin_v_dim;
    st->max_tokens = p->max_tokens;
    st->max_seqs = p->max_seqs;
    st->max_light = p->max_light;
    int32_t slots = st->max_seqs + st->max_light;
    st->max_pages = div_up(p->max_tokens, JEV_KV_PAGE);
    st->n_pages = st->n_full > 0 ? pool_pages(p) : 0;

    size_t page_floats = (size_t)st->n_full * 2 * JEV_KV_PAGE * (size_t)st->kv_dim;
    size_t lin_floats = (size_t)st->n_linear * (size_t)jev_state_layer_floats(t);
    st->bytes = jev_state_bytes(cfg, p);
    /* no backend named: the CPU's memory ops (host memory; they need no instance) */
    st->ops = p->ops ? p->ops : &jev_cpu_ops;
    st->be = p->ops ? p->be : NULL;
    if (st->n_pages > 0 && page_floats > 0)
        st->kv = block_alloc(st, (size_t)st->n_pages * page_floats);
    if (lin_floats > 0)
        st->lin = block_alloc(st, (size_t)st->max_seqs * lin_floats);
    st->seqs = calloc((size_t)slots, sizeof *st->seqs);
    st->page_table = calloc((size_t)slots * (size_t)st->max_pages, sizeof(int32_t));
    st->free_pages = calloc((size_t)(st->n_pages > 0 ? st->n_pages : 1), sizeof(int32_t));
    if ((st->n_pages > 0 && page_floats > 0 && !st->kv) || (lin_floats > 0 && !st->lin) || !st->seqs ||
        !st->page_table || !st->free_pages) {
        jev_state_free(st);
        return jev_fail(err, JEV_ERR_NOMEM, "state: cannot allocate %zu bytes for %d sequences of %d tokens",
                        jev_state_bytes(cfg, p), p->max_seqs, p->max_tokens);
    }
    /* the free stack pops low page ids first (stable addresses across runs help when debugging) */
    for (int32_t i = 0; i < st->n_pages; i++)
        st->free_pages[i] = st->n_pages - 1 - i;
    st->n_free = st->n_pages;
    for (int32_t s = 0; s < slots; s++) {
        struct jev_seq *q = &st->seqs[s];
        q->st = st;
        q->slot = s;
        q->light = s >= st->max_seqs;
        q->pages = st->page_table + (size_t)s * (size_t)st->max_pages;
        q->conv = st->lin && !q->light ? st->lin + (size_t)s * lin_floats : NULL;
        q->ssm = q->conv ? q->conv + (size_t)st->n_linear * (size_t)st->conv_keep * (size_t)st->conv_dim : NULL;
    }
    return JEV_OK;
}

void jev_state_free(struct jev_state *st) {
    if (st->ops) {
        st->ops->free(st->be, st->kv);
        st->ops->free(st->be, st->lin);
    }
    free(st->seqs);
    free(st->page_table);
    free(st->free_pages);
    memset(st, 0, sizeof *st);
}

/* ---- slots ---- */

/* Bytes of one slot's linear state: what a fork copies. */
static size_t lin_bytes(const struct jev_state *st) {
    return (size_t)st->n_linear * ((size_t)st->conv_keep * (size_t)st->conv_dim + (size_t)st->ssm_floats) *
           sizeof(float);
}

/*
 * A free full or light slot, reset to an empty sequence with the caller's
 * reference. Linear search: the slot counts are small (the batch size) and
 * this runs once per sequence, not per token.
 */
static struct jev_seq *take_slot(struct jev_state *st, bool light, struct jev_error *err) {
    int32_t s0 = light ? st->max_seqs : 0, s1 = light ? st->max_seqs + st->max_light : st->max_seqs;
    for (int32_t s = s0; s < s1; s++) {
        struct jev_seq *q = &st->seqs[s];
        if (!q->live) {
            q->live = true;
            q->released = false;
            q->refs = 1;
            q->n_children = 0;
            q->n_tokens = 0;
            q->rope_delta = 0;
            q->parent = NULL;
            q->n_prefix = 0;
            q->n_pages = 0;
            if (light)
                st->n_light++;
            else
                st->n_live++;
            return q;
        }
    }
    if (light)
        jev_fail(err, JEV_ERR_CONTEXT_FULL, "state: all %d light-fork slots are in use (engine max_batch)",
                 st->max_light);
    else
        jev_fail(err, JEV_ERR_CONTEXT_FULL,
                 "state: all %d sequence slots with a DeltaNet state are in use (engine max_states)", st->max_seqs);
    return NULL;
}

/* Pages held by sequences (reserved or filled). */
static int32_t pages_in_use(const struct jev_state *st) { return st->n_pages - st->n_free; }

/* A fresh sequence starts from zero conv windows and zero recurrent matrices (HF's initial state). */
enum jev_status jev_seq_new(struct jev_state *st, struct jev_seq **out, struct jev_error *err) {
    *out = NULL;
    struct jev_seq *q = take_slot(st, false, err);
    if (!q)
        return err ? err->status : JEV_ERR_CONTEXT_FULL;
    if (q->conv)
        st->ops->zero(st->be, q->conv, lin_bytes(st));
    *out = q;
    return JEV_OK;
}

/*
 * The child starts where the parent is: same token count and rope_delta, the
 * parent's tokens as its read-only prefix and (a full child) a copy of the
 * linear state. The parent gains a reference and a child, which freezes it
 * (reserve).
 */
static enum jev_status fork_into(struct jev_seq *parent, bool light, struct jev_seq **out, struct jev_error *err) {
    *out = NULL;
    struct jev_state *st = parent->st;
    if (!parent->live || parent->released)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "state: cannot fork a freed sequence");
    if (parent->light)
        return jev_fail(err, JEV_ERR_INVALID_ARG,
                        "state: sequence %d is a light fork; it has no DeltaNet state to fork from", parent->slot);
    /* Pages reserved but not filled would be shadowed by the child's own: give them back. */
    jev_seq_unreserve(parent);
    struct jev_seq *q = take_slot(st, light, err);
    if (!q)
        return err ? err->status : JEV_ERR_CONTEXT_FULL;
    q->parent = parent;
    q->n_prefix = parent->n_tokens;
    q->n_tokens = parent->n_tokens;
    q->rope_delta = parent->rope_delta;
    parent->refs++;
    parent->n_children++;
    /* The fixed-size part: conv windows and recurrent matrices. */
    if (q->conv)
        st->ops->copy(st->be, q->conv, parent->conv, (int64_t)(lin_bytes(st) / sizeof(float)));
    st->n_forks++;
    *out = q;
    return JEV_OK;
}

enum jev_status jev_seq_fork(struct jev_seq *parent, struct jev_seq **out, struct jev_error *err) {
    return fork_into(parent, false, out, err);
}

enum jev_status jev_seq_fork_light(struct jev_seq *parent, struct jev_seq **out, struct jev_error *err) {
    return fork_into(parent, true, out, err);
}

/* Returns q's pages beyond the first `keep` to the free stack. */
static void give_pages_back(struct jev_seq *q, int32_t keep) {
    struct jev_state *st = q->st;
    while (q->n_pages > keep)
        st->free_pages[st->n_free++] = q->pages[--q->n_pages];
}

/*
 * Frees q's storage, then walks up: a released parent whose last reference
 * was this child goes too. A loop rather than recursion, so a long chain of
 * forks cannot exhaust the stack.
 */
static void destroy(struct jev_seq *q) {
    while (q) {
        struct jev_seq *parent = q->parent;
        give_pages_back(q, 0);
        q->live = false;
        q->parent = NULL;
        if (q->light)
            q->st->n_light--;
        else
            q->st->n_live--;
        if (!parent)
            return;
        parent->n_children--;
        if (--parent->refs > 0)
            return;
        q = parent; /* the last child of a released parent: free the parent too */
    }
}

/* Idempotent: a second free of the same handle, or a NULL, does nothing. */
void jev_seq_free(struct jev_seq *seq) {
    if (!seq || !seq->live || seq->released)
        return;
    seq->released = true;
    if (--seq->refs == 0)
        destroy(seq);
}

/* ---- append ---- */

/*
 * All checks come before the first page moves, so a refusal leaves the
 * sequence and the pool as they were (the forward relies on this to fail a
 * batch without side effects).
 */
enum jev_status jev_seq_reserve(struct jev_seq *seq, int32_t n, struct jev_error *err) {
    struct jev_state *st = seq->st;
    if (!seq->live || seq->released)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "state: sequence %d was freed", seq->slot);
    if (seq->n_children > 0)
        return jev_fail(err, JEV_ERR_INVALID_ARG,
                        "state: sequence %d has %d live forks; its K/V are their prefix and cannot grow", seq->slot,
                        seq->n_children);
    if (seq->light && n > 0 && seq->n_tokens > seq->n_prefix && st->n_linear > 0)
        return jev_fail(err, JEV_ERR_INVALID_ARG,
                        "state: sequence %d is a light fork that has run; its DeltaNet state was not kept, so it "
                        "cannot take more tokens",
                        seq->slot);
    if (n < 0 || (int64_t)seq->n_tokens + n > st->max_tokens)
        return jev_fail(err, JEV_ERR_CONTEXT_FULL, "state: %d + %d tokens exceed the engine's max_tokens %d",
                        seq->n_tokens, n, st->max_tokens);
    if (st->n_full == 0)
        return JEV_OK;
    int32_t need = div_up((int64_t)seq->n_tokens + n - seq->n_prefix, JEV_KV_PAGE);
    if (need - seq->n_pages > st->n_free)
        return jev_fail(err, JEV_ERR_CONTEXT_FULL,
                        "state: the K/V pool is full (%d pages of %d tokens in use, %d more needed)", pages_in_use(st),
                        JEV_KV_PAGE, need - seq->n_pages - st->n_free);
    while (seq->n_pages < need)
        seq->pages[seq->n_pages++] = st->free_pages[--st->n_free];
    if (pages_in_use(st) > st->peak_pages)
        st->peak_pages = pages_in_use(st);
    return JEV_OK;
}

/* Keeps the pages that hold written tokens, returns the rest. */
void jev_seq_unreserve(struct jev_seq *seq) {
    if (seq->st->n_full == 0)
        return;
    give_pages_back(seq, div_up((int64_t)seq->n_tokens - seq->n_prefix, JEV_KV_PAGE));
}

/* ---- access ---- */

/* The K rows of FULL layer `full` in page `page`; its V rows follow JEV_KV_PAGE rows later. */
static float *page_base(const struct jev_state *st, int32_t page, int32_t full) {
    size_t per_layer = 2 * JEV_KV_PAGE * (size_t)st->kv_dim;
    return st->kv + ((size_t)page * (size_t)st->n_full + (size_t)full) * per_layer;
}

float *jev_seq_k_row(struct jev_seq *seq, int32_t full, int32_t index) {
    const struct jev_state *st = seq->st;
    int32_t own = index - seq->n_prefix;
    JEV_ASSERT(own >= 0 && own / JEV_KV_PAGE < seq->n_pages);
    return page_base(st, seq->pages[own / JEV_KV_PAGE], full) + (size_t)(own % JEV_KV_PAGE) * (size_t)st->kv_dim;
}

float *jev_seq_v_row(struct jev_seq *seq, int32_t full, int32_t index) {
    return jev_seq_k_row(seq, full, index) + JEV_KV_PAGE * (size_t)seq->st->kv_dim;
}

/* A chain of full ancestors, then at most one light fork at its end. */
int32_t jev_seq_max_spans(const struct jev_state *st) { return st->max_pages + st->max_seqs + (st->max_light > 0); }

/*
 * Ancestors first (recursively: their own prefixes before their own pages),
 * then this sequence's pages; the last span of each level may be partial.
 * The recursion depth is the fork depth, bounded by max_seqs.
 */
int32_t jev_seq_spans(const struct jev_seq *seq, int32_t full, int32_t n, struct jev_kv_span *spans) {
    int32_t count = 0;
    if (seq->parent && seq->n_prefix > 0)
        count = jev_seq_spans(seq->parent, full, seq->n_prefix < n ? seq->n_prefix : n, spans);
    const struct jev_state *st = seq->st;
    for (int32_t i = seq->n_prefix; i < n; i += JEV_KV_PAGE) {
        int32_t own = i - seq->n_prefix;
        int32_t rows = n - i < JEV_KV_PAGE ? n - i : JEV_KV_PAGE;
        JEV_ASSERT(own / JEV_KV_PAGE < seq->n_pages);
        const float *base = page_base(st, seq->pages[own / JEV_KV_PAGE], full);
        spans[count].k = base;
        spans[count].v = base + JEV_KV_PAGE * (size_t)st->kv_dim;
        spans[count].n = rows;
        count++;
    }
    return count;
}

float *jev_seq_conv(struct jev_seq *seq, int32_t lin) {
    return seq->conv + (size_t)lin * (size_t)seq->st->conv_keep * (size_t)seq->st->conv_dim;
}

float *jev_seq_ssm(struct jev_seq *seq, int32_t lin) { return seq->ssm + (size_t)lin * (size_t)seq->st->ssm_floats; }
