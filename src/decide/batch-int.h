/*
 * batch-int.h - what the shared batch's two files share (decide/ only):
 * the slots, the prefixes in use, and the step's buffers. batch.c keeps the
 * slots (adding, preparing, admitting, finishing); batch-step.c packs one
 * forward from the work of every slot and reads its answers.
 */
#ifndef JEV_DECIDE_BATCH_INT_H
#define JEV_DECIDE_BATCH_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "decide/batch.h"        // defines: struct jev_batcher, struct jev_batch_step
#include "decide/pipeline-int.h" // defines: struct dc_req, struct jev_decider

/* Where a request stands. */
/* A slot's preparation (slot.prep): handed to a preparing thread, under way there, finished. */
enum { PREP_QUEUED, PREP_RUNNING, PREP_DONE };

enum phase {
    PH_NEW,     /* added, being prepared on a preparing thread (slot.prep) */
    PH_WHOLE,   /* a path or scoring the batch does not share: it runs whole, alone (jev_decide_run) */
    PH_READY,   /* prepared (tokens, image, batch size, pages), waiting to be admitted to the engine */
    PH_VISION,  /* admitted, owns a new prefix: its image goes through the tower */
    PH_PREFILL, /* owns a new prefix: chunks of it are prefilled */
    PH_WAIT,    /* uses a prefix another request is prefilling */
    PH_SCORE,   /* its questions' suffixes are scored, a group per forward */
};

/* A prefix the batch's requests fork from: one sequence, prefilled once, shared by every request
 * with the same key (the decider's kept prefixes join here while used, and go back after). */
struct entry {
    bool used;
    char key[JEV_SHA256_HEX]; /* "" for a request that may not share (reuse off, an image by path) */
    struct jev_seq *seq;      /* the prefix sequence */
    bool ready;               /* prefilled (or kept): forks may be taken */
    int32_t users;            /* slots using it */
    struct slot *owner;       /* the slot that prefills it, until ready */
};

struct slot {
    bool used;
    bool done;
    bool cancelled;
    uint64_t order; /* arrival */
    const struct jev_request *r;
    struct jev_decide_params p;
    void *user;
    enum phase ph;
    bool has_q;      /* q was begun (dc_begin): dc_req_free is owed */
    struct dc_req q; /* tokens, image, scratch */
    struct jev_decide_result res;
    struct jev_error err;
    enum jev_status status;
    int32_t B;          /* questions per group (the shared path's batch) */
    int32_t next_q;     /* the next group's first question */
    int32_t prefill_at; /* owner: prefix tokens prefilled */
    int32_t delta;      /* owner: the prefix's M-RoPE delta */
    int32_t entry;      /* index into entries; -1 none */
    char key[JEV_SHA256_HEX];
    bool active;       /* admitted: holds res_pages and res_seqs of the engine */
    int32_t res_pages; /* K/V pages it may hold at once: its prefix and its largest group */
    int32_t res_seqs;  /* sequences: its prefix and a group's forks */
    double t_begin;    /* when it was added, then when its preparation began (its time limit counts from there) */
    int64_t forwards;  /* forwards it had work in */
    int64_t tokens;    /* its own tokens through the language model */
    int64_t rows;      /* its logit rows */
    bool vision_ran;   /* its image went through the tower */
    atomic_int prep;   /* PREP_*: the preparing thread owns q, res and err until PREP_DONE */
    enum jev_status prep_status; /* what dc_begin_detached returned */
    struct slot *prep_next;      /* the preparation queue */
};

struct jev_batcher {
    struct jev_decider *d;
    struct jev_batch_params p;
    struct slot *slots;    /* [max_running] */
    struct entry *entries; /* [max_running] */
    uint64_t clock;
    bool big_next;  /* a unit over the token budget waits: the next forward is its alone */
    int32_t reused; /* slots that joined a prefix in this step (a kept or shared one) */
    /* the preparing threads and their queue */
    pthread_t *prep;
    int32_t n_prep;
    pthread_mutex_t prep_lock;
    pthread_cond_t prep_cond;
    struct slot *prep_head, *prep_tail;
    bool prep_stop;
    /* threads for a preparation's image resize, taken by one preparing thread at a time (the others
     * resize on their own thread meanwhile): alone, a request's resize runs on all the cores
     * (measured on one core: 22-27 ms of the photo's preparation, the latency of every request) */
    struct jev_pool *prep_pool;
    pthread_mutex_t prep_pool_lock;
    /* the step's forward, grown as needed */
    int32_t cap_tokens, cap_pos, cap_embd, cap_runs, cap_seq_len, cap_rows, cap_cols, cap_logits;
    int32_t *ids, *pos, *seq_len, *out_idx, *cols;
    const float **embd;
    struct jev_seq **seqs;
    float *logits;
};

/* ---- batch.c ---- */

/* Finishes slot s with status (JEV_OK: its answers are complete) and err (copied when not NULL):
 * its prefix use ends, its counters are filled, its request's memory goes. */
void bt_finish(struct jev_batcher *b, struct slot *s, enum jev_status status, const struct jev_error *err);

/* ---- batch-step.c ---- */

/* One forward packed from the work of the admitted slots (suffix groups first, then prefill
 * chunks, oldest first, within the engine's token budget and max_rows); its answers read. false
 * when no slot had work for it. */
bool bt_forward(struct jev_batcher *b, struct jev_batch_step *st);

#endif
