/*
 * weights-mirror.c - jev_weights_mirror_init / _free (weights-mirror.h).
 *
 * One walk over the tensor table (model/tensors.h) serves both directions
 * (mirror and release), so that the two can never disagree on the list,
 * nor with the loader's.
 */
#include "model/weights-mirror.h" // defines: struct jev_weights_mirror
#include "model/lm.h"             // defines: jev_matrix_bytes
#include "model/tensors.h"        // defines: jev_tensor_walk_next, jev_tensor_slot

#include <stdlib.h>
#include <string.h>

struct walk {
    struct jev_weights_mirror *m;
    bool release; /* false: make copies; true: free them */
    struct jev_error *err;
    enum jev_status status; /* first failure; later steps are skipped */
};

static void walk_matrix(struct walk *k, const struct jev_matrix *host, struct jev_matrix *dst) {
    if (k->status != JEV_OK || !host->data)
        return;
    if (k->release) {
        k->m->ops->matrix_release(k->m->be, dst);
        return;
    }
    k->status = k->m->ops->matrix_mirror(k->m->be, host, dst, k->err);
    if (k->status == JEV_OK) /* as the backend holds it: CUDA keeps the stored form (4-bit stays 4-bit) */
        k->m->bytes += jev_matrix_bytes(dst);
}

/* n floats of a host vector into backend memory (NULL stays NULL). */
static void walk_vec(struct walk *k, const float *host, float **dst, int64_t n) {
    if (k->status != JEV_OK || !host)
        return;
    if (k->release) {
        k->m->ops->free(k->m->be, *dst);
        *dst = NULL;
        return;
    }
    size_t bytes = (size_t)n * sizeof(float);
    *dst = k->m->ops->alloc(k->m->be, bytes);
    if (!*dst) {
        k->status = jev_fail(k->err, JEV_ERR_NOMEM, "weights: no %s memory for a %lld-float vector", k->m->ops->name,
                             (long long)n);
        return;
    }
    k->m->ops->upload(k->m->be, *dst, host, bytes);
    k->m->bytes += bytes;
}

/*
 * Both directions over the model's tensors, in the tensor table's order; the
 * host side says which tensors exist. A tied head is the embedding's copy,
 * made and freed once (the table's walk skips the head of a tied model).
 */
static enum jev_status walk_all(struct jev_weights_mirror *m, const struct jev_weights *host, bool release,
                                struct jev_error *err) {
    struct walk k = {m, release, err, JEV_OK};
    bool vision = m->cfg->has_vision && host->vision.blocks && m->copy.vision.blocks;
    struct jev_tensor_walk w;
    struct jev_tensor_at at;
    jev_tensor_walk_init(&w, m->cfg, vision, 0);
    while (k.status == JEV_OK && jev_tensor_walk_next(&w, &at)) {
        const void *src = jev_tensor_slot_const(&at, host);
        void *dst = jev_tensor_slot(&at, &m->copy);
        if (at.k->form == JEV_TFORM_MATRIX)
            walk_matrix(&k, src, dst);
        else
            walk_vec(&k, *(float *const *)src, dst, at.rows * at.cols);
    }
    if (m->cfg->text.tie_embeddings && !release)
        m->copy.text.lm_head = m->copy.text.embed;
    return k.status;
}

enum jev_status jev_weights_mirror_init(struct jev_weights_mirror *m, const struct jev_config *cfg,
                                        const struct jev_weights *host, const struct jev_ops *ops,
                                        struct jev_backend *be, struct jev_error *err) {
    memset(m, 0, sizeof *m);
    m->ops = ops;
    m->be = be;
    m->cfg = cfg;
    m->host = host;
    if (ops->host_memory) {
        m->w = host;
        return JEV_OK;
    }
    /* the structure on the host, zeroed (so that a failed walk frees only what it made), then every tensor */
    bool vision = cfg->has_vision && host->vision.blocks;
    m->copy.text.layers = calloc((size_t)cfg->text.n_layers, sizeof *m->copy.text.layers);
    if (vision)
        m->copy.vision.blocks = calloc((size_t)cfg->vision.depth, sizeof *m->copy.vision.blocks);
    m->owned = true;
    if (!m->copy.text.layers || (vision && !m->copy.vision.blocks)) {
        jev_weights_mirror_free(m);
        return jev_fail(err, JEV_ERR_NOMEM, "weights: cannot allocate the mirror's layer tables");
    }
    for (int32_t l = 0; l < cfg->text.n_layers; l++)
        m->copy.text.layers[l].kind = host->text.layers[l].kind;
    enum jev_status s = walk_all(m, host, false, err);
    if (s != JEV_OK) {
        jev_weights_mirror_free(m);
        return s;
    }
    m->w = &m->copy;
    return JEV_OK;
}

void jev_weights_mirror_free(struct jev_weights_mirror *m) {
    if (m->owned) {
        if (m->copy.text.layers)
            walk_all(m, m->host, true, NULL);
        free(m->copy.text.layers);
        free(m->copy.vision.blocks);
    }
    memset(m, 0, sizeof *m);
}
