/*
 * kept.c - the prefixes and image embeddings a decider keeps between requests (decide params
 * reuse_prefix): small tables of DC_KEPT_MAX entries each, found by sha256 key, replaced least
 * recently used first. A kept prefix is a live sequence of the engine (one slot and its K/V pages);
 * a kept image is host memory. The shared path decides what to keep and when to make room
 * (path-shared.c); this file only holds them.
 */
#include "decide/pipeline-int.h" // defines: struct jev_decider, struct dc_kept

#include <stdlib.h>
#include <string.h>

int32_t dc_kept_find(struct jev_decider *d, const char *key) {
    for (int32_t i = 0; i < DC_KEPT_MAX; i++)
        if (d->kept[i].seq && !strcmp(d->kept[i].key, key)) {
            d->kept[i].used = ++d->kept_clock;
            return i;
        }
    return -1;
}

int32_t dc_kept_count(const struct jev_decider *d) {
    int32_t n = 0;
    for (int32_t i = 0; i < DC_KEPT_MAX; i++)
        n += d->kept[i].seq != NULL;
    return n;
}

static void kept_free(struct dc_kept *k) {
    if (k->seq)
        jev_seq_free(k->seq);
    memset(k, 0, sizeof *k);
}

bool dc_kept_evict(struct jev_decider *d, const struct jev_seq *except) {
    int32_t lru = -1;
    for (int32_t i = 0; i < DC_KEPT_MAX; i++)
        if (d->kept[i].seq && d->kept[i].seq != except && (lru < 0 || d->kept[i].used < d->kept[lru].used))
            lru = i;
    if (lru < 0)
        return false;
    kept_free(&d->kept[lru]);
    return true;
}

void dc_kept_put(struct jev_decider *d, struct jev_seq *seq, const char *key) {
    int32_t at = -1;
    for (int32_t i = 0; i < DC_KEPT_MAX && at < 0; i++)
        if (!d->kept[i].seq)
            at = i;
    if (at < 0) {
        dc_kept_evict(d, seq);
        for (int32_t i = 0; i < DC_KEPT_MAX && at < 0; i++)
            if (!d->kept[i].seq)
                at = i;
    }
    d->kept[at].seq = seq;
    memcpy(d->kept[at].key, key, sizeof d->kept[at].key);
    d->kept[at].used = ++d->kept_clock;
}

struct jev_seq *dc_kept_take(struct jev_decider *d, int32_t i) {
    struct jev_seq *s = d->kept[i].seq;
    memset(&d->kept[i], 0, sizeof d->kept[i]);
    return s;
}

void dc_kept_drop(struct jev_decider *d) {
    for (int32_t i = 0; i < DC_KEPT_MAX; i++)
        kept_free(&d->kept[i]);
}

int32_t dc_kept_image_find(struct jev_decider *d, const char *key) {
    for (int32_t i = 0; i < DC_KEPT_MAX; i++)
        if (d->kept_image[i].embd && !strcmp(d->kept_image[i].key, key)) {
            d->kept_image[i].used = ++d->kept_clock;
            return i;
        }
    return -1;
}

int32_t dc_kept_image_slot(struct jev_decider *d) {
    int32_t at = -1;
    for (int32_t i = 0; i < DC_KEPT_MAX; i++) {
        if (!d->kept_image[i].embd)
            return i;
        if (at < 0 || d->kept_image[i].used < d->kept_image[at].used)
            at = i;
    }
    free(d->kept_image[at].embd);
    memset(&d->kept_image[at], 0, sizeof d->kept_image[at]);
    return at;
}

void dc_kept_image_drop(struct jev_decider *d) {
    for (int32_t i = 0; i < DC_KEPT_MAX; i++) {
        free(d->kept_image[i].embd);
        memset(&d->kept_image[i], 0, sizeof d->kept_image[i]);
    }
}
