/*
 * score.c - reading answers out of the language model: label logits at the
 * answer position, and the candidate trie's rounds of forwards for
 * complete option texts.
 *
 * Label mode. The head runs over the union of every question's label token
 * rows only (a few hundred rows instead of the vocabulary); each question
 * softmaxes its own labels' logits (an alias's mass added to its label's).
 *
 * Text mode. log p(token | path) must be normalised over the FULL
 * vocabulary, so every query position (a trie node with children) gets a
 * full-vocabulary logits row, and nothing else does: positions inside the
 * prompt and the leaves of the trie never reach the head. Per forward, all
 * query rows of all questions in it go through the head together (one
 * pass over the head's weights for the lot), then each row's logsumexp is
 * taken once in double (jev_trie_set_logits_row) and only its children's
 * values are kept.
 *
 * Trie rounds. After the prompt, the sequence of a question sits at the
 * root. A task is (question, node, sequence): the sequence has consumed the
 * path up to the node's parent and the node's token comes next. A task's
 * forward run is a chain: the node and, as long as the node has exactly one
 * child that is itself interior, that child, and so on; every chain token is
 * a query row. When a chain ends at a node with k >= 2 interior children the
 * sequence is forked k times (the fork shares its K/V, copies the linear
 * state); with one, the same sequence goes on; with none, it is released.
 * Leaves are never fed. So "New York" / "New Delhi" feed "New" once and read
 * both continuations from its row, and a candidate that is a prefix of
 * another is both a terminal and a query node. Every task of a round runs in
 * one batched forward (several when the rows exceed the logits buffer).
 */
#include "decide/pipeline-int.h" // defines: struct dc_req

#include <math.h>
#include <string.h>

/* One pending trie task (fits DC_TASK_BYTES). */
struct dc_task {
    int32_t item;        /* index of the question within the scored group */
    int32_t node;        /* the trie node whose token is fed next */
    struct jev_seq *seq; /* positioned right before that token */
};

_Static_assert(sizeof(struct dc_task) <= DC_TASK_BYTES, "DC_TASK_BYTES too small");

/* ---- the head request ---- */

void dc_score_head(struct dc_req *q, int32_t n, struct jev_lm_batch *b) {
    JEV_ASSERT(n >= 1 && n <= q->cap_rows);
    b->n_out = n;
    b->out_idx = q->out_idx;
    b->logits = q->logits;
    if (q->p.scoring == JEV_SCORING_LABEL) {
        b->n_vocab_rows = q->n_cols;
        b->vocab_rows = q->cols;
    } else {
        b->n_vocab_rows = 0; /* full vocabulary: exact log-softmax */
        b->vocab_rows = NULL;
    }
}

/* ---- label mode ---- */

static void read_labels(struct dc_req *q, int32_t qi, const float *row) {
    const struct dc_question *dq = &q->qs[qi];
    float vals[2 * JEV_DECIDE_MAX_OPTIONS];
    double probs[JEV_DECIDE_MAX_OPTIONS];
    for (int32_t k = 0; k < dq->n_ids; k++)
        vals[k] = row[dq->cols[k]];
    jev_labels_probs(q->r->questions[qi].n_options, dq->owner, vals, dq->n_ids, probs);
    jev_answer_set_probs(&q->res->answers.items[qi], probs);
}

/* ---- text mode: the trie rounds ---- */

/* Interior children of a node (children that have children): count, and the first one. */
static int32_t interior_children(const struct jev_trie *t, int32_t node, int32_t *first) {
    int32_t n = 0;
    *first = -1;
    for (int32_t c = t->nodes[node].first_child; c >= 0; c = t->nodes[c].next_sibling)
        if (t->nodes[c].first_child >= 0) {
            if (n++ == 0)
                *first = c;
        }
    return n;
}

/*
 * What follows node e of item k's trie, whose position's logits are read:
 * tasks for its interior children (the same sequence for one, forks for
 * several) appended to tab[*n]; the sequence is released when nothing
 * further needs it.
 */
static enum jev_status spawn(struct dc_req *q, const struct jev_trie *t, int32_t item, int32_t e, struct jev_seq *seq,
                             struct dc_task *tab, int32_t *n) {
    int32_t first;
    int32_t ic = interior_children(t, e, &first);
    if (ic == 0) {
        dc_seq_release(q, seq);
        return JEV_OK;
    }
    if (ic == 1) {
        JEV_ASSERT(*n < q->cap_tasks);
        tab[(*n)++] = (struct dc_task){item, first, seq};
        return JEV_OK;
    }
    for (int32_t c = t->nodes[e].first_child; c >= 0; c = t->nodes[c].next_sibling) {
        if (t->nodes[c].first_child < 0)
            continue;
        struct jev_seq *f = NULL;
        enum jev_status s = dc_seq_fork(q, seq, &f);
        if (s != JEV_OK) {
            dc_seq_release(q, seq);
            return s;
        }
        JEV_ASSERT(*n < q->cap_tasks);
        tab[(*n)++] = (struct dc_task){item, c, f};
    }
    dc_seq_release(q, seq); /* the forks keep its K/V alive */
    return JEV_OK;
}

/* The chain fed for a task starting at node n: at most max nodes; returns its length, *next = where a
 * truncated chain continues (-1 when it ended at a node without exactly one interior child). */
static int32_t chain_len(const struct jev_trie *t, int32_t n, int32_t max, int32_t *next) {
    int32_t len = 0, c = n;
    *next = -1;
    for (;;) {
        len++;
        int32_t first;
        int32_t ic = interior_children(t, c, &first);
        if (ic != 1)
            return len;
        if (len == max) {
            *next = first;
            return len;
        }
        c = first;
    }
}

/*
 * Runs every task of cur (n tasks) through forwards of at most cap_rows rows
 * and cap_runs runs, setting the logits of each chain node's children, and
 * appends the follow-up tasks to nxt.
 */
static enum jev_status run_round(struct dc_req *q, int32_t qi0, struct dc_task *cur, int32_t n, struct dc_task *nxt,
                                 int32_t *n_next) {
    int32_t at = 0;
    while (at < n) {
        /* take tasks while their chains fit the buffers */
        int32_t rows = 0, runs = 0, end = at;
        int32_t lens[DC_TEXT_ROWS_MAX], nexts[DC_TEXT_ROWS_MAX];
        while (end < n && runs < q->cap_runs && runs < DC_TEXT_ROWS_MAX && rows < q->cap_rows) {
            const struct jev_trie *t = &q->qs[qi0 + cur[end].item].trie;
            int32_t room = q->cap_rows - rows;
            if (room > q->cap_tokens - rows)
                room = q->cap_tokens - rows;
            if (room <= 0)
                break;
            lens[runs] = chain_len(t, cur[end].node, room, &nexts[runs]);
            rows += lens[runs];
            runs++;
            end++;
        }
        JEV_ASSERT(runs > 0);
        /* the batch: each run is one chain on its task's sequence; every row is a query */
        int32_t row = 0;
        for (int32_t k = 0; k < runs; k++) {
            const struct dc_task *tk = &cur[at + k];
            const struct jev_trie *t = &q->qs[qi0 + tk->item].trie;
            int32_t c = tk->node;
            for (int32_t j = 0; j < lens[k]; j++) {
                q->ids[row + j] = t->nodes[c].token;
                q->out_idx[row + j] = row + j;
                int32_t first;
                interior_children(t, c, &first);
                c = first;
            }
            jev_lm_text_positions(tk->seq, lens[k], q->pos + (int64_t)row * 3);
            q->seqs[k] = tk->seq;
            q->seq_len[k] = lens[k];
            row += lens[k];
        }
        struct jev_lm_batch b = {
            .n_tokens = rows, .ids = q->ids, .pos = q->pos, .n_runs = runs, .seqs = q->seqs, .seq_len = q->seq_len};
        dc_score_head(q, rows, &b);
        JEV_TRY(dc_forward(q, &b));
        /* children's log-probabilities from each query row, then what follows each chain */
        row = 0;
        for (int32_t k = 0; k < runs; k++) {
            struct dc_task *tk = &cur[at + k];
            struct jev_trie *t = &q->qs[qi0 + tk->item].trie;
            int32_t c = tk->node, last = c;
            for (int32_t j = 0; j < lens[k]; j++) {
                jev_trie_set_logits_row(t, c, q->logits + (int64_t)(row + j) * q->n_vocab, (int32_t)q->n_vocab);
                last = c;
                int32_t first;
                interior_children(t, c, &first);
                c = first;
            }
            row += lens[k];
            if (nexts[k] >= 0) { /* a chain cut by the buffer: the same sequence goes on */
                JEV_ASSERT(*n_next < q->cap_tasks);
                nxt[(*n_next)++] = (struct dc_task){tk->item, nexts[k], tk->seq};
            } else {
                JEV_TRY(spawn(q, t, tk->item, last, tk->seq, nxt, n_next));
            }
            tk->seq = NULL;
        }
        at = end;
    }
    return JEV_OK;
}

/* ---- after a group's forward ---- */

enum jev_status dc_score_read(struct dc_req *q, int32_t qi0, int32_t n, struct jev_seq **seqs) {
    if (q->p.scoring == JEV_SCORING_LABEL) {
        for (int32_t k = 0; k < n; k++) {
            read_labels(q, qi0 + k, q->logits + (int64_t)k * q->n_cols);
            dc_seq_release(q, seqs[k]);
        }
        return JEV_OK;
    }
    /* text mode: the root rows, then the rounds; the task tables take the sequences over first */
    struct dc_task *cur = q->tasks, *nxt = cur + q->cap_tasks;
    int32_t n_cur = 0;
    enum jev_status s = JEV_OK;
    struct jev_seq *held[DC_TEXT_ROWS_MAX];
    JEV_ASSERT(n <= DC_TEXT_ROWS_MAX);
    memcpy(held, seqs, (size_t)n * sizeof *held);
    for (int32_t k = 0; k < n; k++) {
        struct jev_trie *t = &q->qs[qi0 + k].trie;
        jev_trie_set_logits_row(t, 0, q->logits + (int64_t)k * q->n_vocab, (int32_t)q->n_vocab);
    }
    for (int32_t k = 0; k < n; k++) {
        if (s == JEV_OK)
            s = spawn(q, &q->qs[qi0 + k].trie, k, 0, held[k], cur, &n_cur);
        else
            dc_seq_release(q, held[k]);
    }
    while (s == JEV_OK && n_cur > 0) {
        int32_t n_nxt = 0;
        s = run_round(q, qi0, cur, n_cur, nxt, &n_nxt);
        struct dc_task *tmp = cur;
        cur = nxt;
        nxt = tmp;
        n_cur = n_nxt;
    }
    if (s != JEV_OK)
        return s; /* sequences still held are released with the request */
    for (int32_t k = 0; k < n; k++) {
        int32_t qi = qi0 + k;
        double probs[JEV_DECIDE_MAX_OPTIONS];
        JEV_TRY(jev_trie_score(&q->qs[qi].trie, q->p.norm, NULL, probs, q->err));
        jev_answer_set_probs(&q->res->answers.items[qi], probs);
    }
    return JEV_OK;
}
