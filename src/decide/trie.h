/*
 * trie.h - a candidate trie over token sequences for text-mode scoring.
 *
 * Each option's candidate text is a token sequence continuing the prompt at
 * the cue. Candidates that share leading tokens share nodes, so a shared
 * beginning ("New York" / "New Delhi") is read once. A candidate's
 * log-probability is the sum of log p(token | prompt, earlier tokens) along
 * its path; those values come from the log-softmax over the FULL vocabulary
 * at the parent's position (restricted softmaxes would be wrong here).
 *
 * Positions: node 0 is the root (the last prompt token). Every node with
 * children is a query: its position's logits are needed, and only at the
 * rows of its children's tokens. Interior nodes' tokens must be fed to the
 * model (after the prompt, along their path); leaf tokens never are. Nodes
 * are numbered so that a parent comes before its children.
 *
 * Cases handled: one candidate a prefix of another (its terminal node is
 * interior: both a query and a terminal), identical candidates (an error
 * naming both), empty candidates (an error).
 *
 * Normalisations: sum (default; mean favours multi-token candidates) and
 * mean (sum / length), then a softmax over the candidates.
 */
#ifndef JEV_DECIDE_TRIE_H
#define JEV_DECIDE_TRIE_H

#include <stdint.h>

#include "base/error.h" // defines: struct jev_error

struct jev_trie_node {
    int32_t token;        /* the token this node appends; -1 at the root */
    int32_t parent;       /* parent node; -1 at the root */
    int32_t depth;        /* tokens from the root (root 0) */
    int32_t first_child;  /* first child node, -1 when a leaf */
    int32_t next_sibling; /* next child of the same parent, -1 when last */
    int32_t n_children;   /* children count */
    int32_t terminal;     /* candidate index ending here, -1 when none */
    double logprob;       /* log p(token | path to parent), NaN until set */
};

struct jev_trie {
    int32_t n_nodes;             /* nodes in use, root included */
    struct jev_trie_node *nodes; /* (n_nodes) allocated once: 1 + total tokens */
    int32_t n_cands;             /* candidates */
    int32_t *cand_node;          /* (n_cands) terminal node of each candidate */
};

enum jev_trie_norm {
    JEV_TRIE_SUM = 0,  /* sum of token log-probabilities */
    JEV_TRIE_MEAN = 1, /* sum / number of tokens */
};

/* Builds the trie of n candidates (cands[i] has lens[i] tokens). names
 * (NULL allowed) label candidates in error messages. */
enum jev_status jev_trie_build(struct jev_trie *t, const int32_t *const *cands, const int32_t *lens, int32_t n,
                               const char *const *names, struct jev_error *err);
void jev_trie_free(struct jev_trie *t);

/* Query nodes (nodes with children), in node order; returns the count and
 * writes up to cap of them. */
int32_t jev_trie_queries(const struct jev_trie *t, int32_t *nodes, int32_t cap);

/* The children of a node: their tokens and node indices (either may be
 * NULL); returns the count, writing up to cap. */
int32_t jev_trie_children(const struct jev_trie *t, int32_t node, int32_t *tokens, int32_t *child_nodes, int32_t cap);

/* The tokens from the root to node (depth of them); returns the depth. */
int32_t jev_trie_path(const struct jev_trie *t, int32_t node, int32_t *tokens, int32_t cap);

/* Sets one node's value: log p(node token | its parent's position). */
void jev_trie_set(struct jev_trie *t, int32_t node, double logprob);

/* Sets every child of query node from the parent position's full-vocabulary
 * log-softmax row (n_vocab values). */
void jev_trie_set_logsoftmax_row(struct jev_trie *t, int32_t node, const float *row, int32_t n_vocab);

/* The same from the raw logits row: the log-softmax is taken here, in
 * double with max-subtraction. */
void jev_trie_set_logits_row(struct jev_trie *t, int32_t node, const float *logits, int32_t n_vocab);

/* Per-candidate log-scores (sum or mean; may be NULL) and the softmax over
 * candidates (probs, may be NULL). Fails naming the first candidate whose
 * path has a value not set. */
enum jev_status jev_trie_score(const struct jev_trie *t, enum jev_trie_norm norm, double *scores, double *probs,
                               struct jev_error *err);

#endif
