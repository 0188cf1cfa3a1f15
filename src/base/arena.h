/*
 * arena.h - a bump allocator: size first, allocate once, point into it.
 *
 * An arena is one aligned block of a fixed capacity. jev_arena_alloc hands
 * out 64-byte aligned slices; jev_arena_reset (or reset to a mark) frees them
 * all at once. The peak of bytes in use is tracked for the benchmark's memory
 * figures. Nothing is allocated from the system after jev_arena_init, so the
 * token loop never calls malloc.
 */
#ifndef JEV_BASE_ARENA_H
#define JEV_BASE_ARENA_H

#include <stddef.h>

#include "base/error.h" // defines: struct jev_error

struct jev_arena {
    unsigned char *base; /* the block, 64-byte aligned; NULL for a counting-only arena */
    size_t cap;          /* capacity in bytes */
    size_t used;         /* bytes handed out, including alignment padding */
    size_t peak;         /* highest `used` since init or jev_arena_reset_peak */
    int borrowed;        /* base belongs to the caller (jev_arena_init_over) */
};

/* Allocates the block (zeroed). cap 0 gives an empty arena. */
enum jev_status jev_arena_init(struct jev_arena *a, size_t cap, struct jev_error *err);
/* An arena over a block the caller owns (a backend's device memory), 64-byte aligned;
 * jev_arena_free forgets it without freeing. */
void jev_arena_init_over(struct jev_arena *a, void *base, size_t cap);
void jev_arena_free(struct jev_arena *a);

/* A 64-byte aligned slice of n bytes, or NULL with err set when it does not fit. */
void *jev_arena_alloc(struct jev_arena *a, size_t n, struct jev_error *err);

/* Typed helper: n elements of size elem, with overflow-checked size math. */
void *jev_arena_alloc_array(struct jev_arena *a, size_t n, size_t elem, struct jev_error *err);

static inline size_t jev_arena_mark(const struct jev_arena *a) { return a->used; }
static inline void jev_arena_reset_to(struct jev_arena *a, size_t mark) { a->used = mark; }
static inline void jev_arena_reset(struct jev_arena *a) { a->used = 0; }
static inline void jev_arena_reset_peak(struct jev_arena *a) { a->peak = a->used; }

/* Rounds n up to the arena's alignment (64). */
static inline size_t jev_align64(size_t n) { return (n + 63) & ~(size_t)63; }

#endif
