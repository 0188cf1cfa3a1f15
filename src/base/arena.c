/*
 * arena.c - the bump allocator of arena.h.
 */
#include "base/arena.h" // defines: struct jev_arena

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum jev_status jev_arena_init(struct jev_arena *a, size_t cap, struct jev_error *err) {
    memset(a, 0, sizeof *a);
    if (cap == 0)
        return JEV_OK;
    cap = jev_align64(cap);
    void *p = NULL;
    if (posix_memalign(&p, 64, cap) != 0)
        return jev_fail(err, JEV_ERR_NOMEM, "cannot allocate an arena of %zu bytes", cap);
    memset(p, 0, cap);
    a->base = p;
    a->cap = cap;
    return JEV_OK;
}

void jev_arena_init_over(struct jev_arena *a, void *base, size_t cap) {
    memset(a, 0, sizeof *a);
    a->base = base;
    a->cap = base ? cap : 0;
    a->borrowed = 1;
}

void jev_arena_free(struct jev_arena *a) {
    if (!a->borrowed)
        free(a->base);
    memset(a, 0, sizeof *a);
}

void *jev_arena_alloc(struct jev_arena *a, size_t n, struct jev_error *err) {
    size_t need = jev_align64(n == 0 ? 1 : n);
    if (need < n || a->used > a->cap || need > a->cap - a->used) {
        jev_fail(err, JEV_ERR_NOMEM, "arena full: %zu bytes requested, %zu of %zu in use", n, a->used, a->cap);
        return NULL;
    }
    void *p = a->base + a->used;
    a->used += need;
    if (a->used > a->peak)
        a->peak = a->used;
    return p;
}

void *jev_arena_alloc_array(struct jev_arena *a, size_t n, size_t elem, struct jev_error *err) {
    if (elem != 0 && n > SIZE_MAX / elem) {
        jev_fail(err, JEV_ERR_NOMEM, "array size overflow: %zu x %zu bytes", n, elem);
        return NULL;
    }
    return jev_arena_alloc(a, n * elem, err);
}
