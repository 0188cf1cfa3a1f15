/*
 * request.c - the lifetime and lookups of a typed request (request.h). The
 * wire shapes that fill one are parsed in src/wire/.
 */
#include "decide/request.h" // defines: struct jev_request

#include <stdlib.h>
#include <string.h>

/* The image bytes and the block are ours; every other pointer borrows from root / keep. */
void jev_request_free(struct jev_request *r) {
    if (r == NULL)
        return;
    free(r->image.bytes);
    free(r->block);
    json_decref(r->keep);
    json_decref(r->root);
    memset(r, 0, sizeof *r);
}

int32_t jev_request_find(const struct jev_request *r, const char *id) {
    for (int32_t i = 0; i < r->n_questions; i++)
        if (strcmp(r->questions[i].id, id) == 0)
            return i;
    return -1;
}
