/*
 * trie.c - the candidate trie (see trie.h): build, enumerate, fill, score.
 */
#include "decide/trie.h" // defines: struct jev_trie

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "decide/answer.h" // defines: jev_softmax

/* ---- build ---- */

/* A candidate's name for messages, "?" when the caller gave none. */
static const char *name_of(const char *const *names, int32_t i) { return names && names[i] ? names[i] : "?"; }

/*
 * Inserting candidates one after another in request order keeps two
 * properties the rest relies on: a node's index is greater than its
 * parent's (so a forward can process nodes in index order), and children
 * keep the order their first candidate came in.
 */
enum jev_status jev_trie_build(struct jev_trie *t, const int32_t *const *cands, const int32_t *lens, int32_t n,
                               const char *const *names, struct jev_error *err) {
    memset(t, 0, sizeof *t);
    if (n <= 0)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "trie: no candidates");
    /* size first: at most one node per candidate token, plus the root */
    int64_t total = 1;
    for (int32_t i = 0; i < n; i++) {
        if (lens[i] <= 0)
            return jev_fail(err, JEV_ERR_INVALID_ARG, "trie: candidate %d (\"%s\") has no tokens", i,
                            name_of(names, i));
        total += lens[i];
    }
    if (total > INT32_MAX)
        return jev_fail(err, JEV_ERR_NOMEM, "trie: %lld candidate tokens (the limit is %d)", (long long)total,
                        INT32_MAX);
    t->nodes = malloc((size_t)total * sizeof *t->nodes);
    t->cand_node = malloc((size_t)n * sizeof *t->cand_node);
    if (t->nodes == NULL || t->cand_node == NULL) {
        jev_trie_free(t);
        return jev_fail(err, JEV_ERR_NOMEM, "trie: cannot allocate %lld nodes", (long long)total);
    }
    t->n_cands = n;
    t->n_nodes = 1;
    t->nodes[0] = (struct jev_trie_node){-1, -1, 0, -1, -1, 0, -1, (double)NAN};
    for (int32_t i = 0; i < n; i++) {
        int32_t cur = 0;
        for (int32_t k = 0; k < lens[i]; k++) {
            int32_t tok = cands[i][k];
            if (tok < 0) {
                jev_trie_free(t);
                return jev_fail(err, JEV_ERR_INVALID_ARG, "trie: candidate %d (\"%s\") has a negative token %d", i,
                                name_of(names, i), tok);
            }
            /* find the child with this token, or append a new one (children keep insertion order) */
            int32_t c = t->nodes[cur].first_child, last = -1;
            while (c >= 0 && t->nodes[c].token != tok) {
                last = c;
                c = t->nodes[c].next_sibling;
            }
            if (c < 0) {
                c = t->n_nodes++;
                t->nodes[c] = (struct jev_trie_node){tok, cur, t->nodes[cur].depth + 1, -1, -1, 0, -1, (double)NAN};
                if (last < 0)
                    t->nodes[cur].first_child = c;
                else
                    t->nodes[last].next_sibling = c;
                t->nodes[cur].n_children++;
            }
            cur = c;
        }
        if (t->nodes[cur].terminal >= 0) {
            int32_t j = t->nodes[cur].terminal;
            jev_trie_free(t);
            return jev_fail(err, JEV_ERR_INVALID_ARG,
                            "trie: candidates %d (\"%s\") and %d (\"%s\") are the same token sequence", j,
                            name_of(names, j), i, name_of(names, i));
        }
        t->nodes[cur].terminal = i;
        t->cand_node[i] = cur;
    }
    return JEV_OK;
}

void jev_trie_free(struct jev_trie *t) {
    free(t->nodes);
    free(t->cand_node);
    memset(t, 0, sizeof *t);
}

/* ---- enumerate ---- */

/* Interior nodes and the root, in index order (parents first). */
int32_t jev_trie_queries(const struct jev_trie *t, int32_t *nodes, int32_t cap) {
    int32_t n = 0;
    for (int32_t i = 0; i < t->n_nodes; i++) {
        if (t->nodes[i].n_children == 0)
            continue;
        if (nodes && n < cap)
            nodes[n] = i;
        n++;
    }
    return n;
}

int32_t jev_trie_children(const struct jev_trie *t, int32_t node, int32_t *tokens, int32_t *child_nodes, int32_t cap) {
    JEV_ASSERT(node >= 0 && node < t->n_nodes);
    int32_t n = 0;
    for (int32_t c = t->nodes[node].first_child; c >= 0; c = t->nodes[c].next_sibling, n++) {
        if (n >= cap)
            continue;
        if (tokens)
            tokens[n] = t->nodes[c].token;
        if (child_nodes)
            child_nodes[n] = c;
    }
    return n;
}

/* Walks up to the root, writing each token at its depth - 1. */
int32_t jev_trie_path(const struct jev_trie *t, int32_t node, int32_t *tokens, int32_t cap) {
    JEV_ASSERT(node >= 0 && node < t->n_nodes);
    int32_t d = t->nodes[node].depth;
    for (int32_t c = node; c > 0; c = t->nodes[c].parent) {
        int32_t k = t->nodes[c].depth - 1;
        if (k < cap)
            tokens[k] = t->nodes[c].token;
    }
    return d;
}

/* ---- fill ---- */

void jev_trie_set(struct jev_trie *t, int32_t node, double logprob) {
    JEV_ASSERT(node > 0 && node < t->n_nodes);
    t->nodes[node].logprob = logprob;
}

void jev_trie_set_logsoftmax_row(struct jev_trie *t, int32_t node, const float *row, int32_t n_vocab) {
    JEV_ASSERT(node >= 0 && node < t->n_nodes);
    for (int32_t c = t->nodes[node].first_child; c >= 0; c = t->nodes[c].next_sibling) {
        int32_t tok = t->nodes[c].token;
        t->nodes[c].logprob = tok < n_vocab ? (double)row[tok] : (double)NAN;
    }
}

/* The full-vocabulary normaliser: a candidate's token probability is
 * relative to every token the model could emit there, not to the siblings. */
void jev_trie_set_logits_row(struct jev_trie *t, int32_t node, const float *logits, int32_t n_vocab) {
    JEV_ASSERT(node >= 0 && node < t->n_nodes);
    /* log-sum-exp over the whole row, in double, after subtracting the max */
    double mx = -(double)INFINITY;
    for (int32_t v = 0; v < n_vocab; v++)
        if ((double)logits[v] > mx)
            mx = (double)logits[v];
    double sum = 0.0;
    for (int32_t v = 0; v < n_vocab; v++)
        sum += exp((double)logits[v] - mx);
    double lse = mx + log(sum);
    for (int32_t c = t->nodes[node].first_child; c >= 0; c = t->nodes[c].next_sibling) {
        int32_t tok = t->nodes[c].token;
        t->nodes[c].logprob = tok < n_vocab ? (double)logits[tok] - lse : (double)NAN;
    }
}

/* ---- score ---- */

/* A value still NaN means a query position was never filled: an engine bug
 * the caller must see, not a silent -inf. */
enum jev_status jev_trie_score(const struct jev_trie *t, enum jev_trie_norm norm, double *scores, double *probs,
                               struct jev_error *err) {
    /* the log-scores go to scores, or straight into probs for the softmax in place */
    double *out = scores ? scores : probs;
    if (out == NULL)
        return JEV_OK;
    for (int32_t i = 0; i < t->n_cands; i++) {
        int32_t node = t->cand_node[i];
        double s = 0.0;
        for (int32_t c = node; c > 0; c = t->nodes[c].parent) {
            if (isnan(t->nodes[c].logprob))
                return jev_fail(err, JEV_ERR_INVALID_ARG,
                                "trie: candidate %d needs the value of its token %d (depth %d), which was not set", i,
                                t->nodes[c].token, t->nodes[c].depth);
            s += t->nodes[c].logprob;
        }
        out[i] = norm == JEV_TRIE_MEAN ? s / t->nodes[node].depth : s;
    }
    if (probs) {
        if (probs != out)
            memcpy(probs, out, (size_t)t->n_cands * sizeof *probs);
        jev_softmax(probs, t->n_cands, probs);
    }
    return JEV_OK;
}
