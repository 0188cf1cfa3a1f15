/*
 * weights-mirror.c - jev_weights_mirror_init / _free (weights-mirror.h).
 *
 * One walk over every tensor of struct jev_weights serves both directions
 * (mirror and release), so that the two can never disagree on the list.
 */
#include "model/weights-mirror.h" // defines: struct jev_weights_mirror

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
    if (k->status == JEV_OK)
        k->m->bytes += (size_t)dst->rows * (size_t)dst->cols * sizeof(float);
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

static void walk_text(struct walk *k, const struct jev_text_weights *h, struct jev_text_weights *d) {
    const struct jev_text_config *t = &k->m->cfg->text;
    walk_matrix(k, &h->embed, &d->embed);
    /* tied embeddings: one copy serves both */
    if (h->lm_head.data == h->embed.data) {
        if (!k->release)
            d->lm_head = d->embed;
    } else {
        walk_matrix(k, &h->lm_head, &d->lm_head);
    }
    walk_vec(k, h->final_norm, &d->final_norm, t->hidden);
    for (int32_t l = 0; l < t->n_layers && k->status == JEV_OK; l++) {
        const struct jev_layer_weights *hl = &h->layers[l];
        struct jev_layer_weights *dl = &d->layers[l];
        walk_vec(k, hl->in_norm, &dl->in_norm, t->hidden);
        walk_vec(k, hl->post_norm, &dl->post_norm, t->hidden);
        walk_matrix(k, &hl->gate, &dl->gate);
        walk_matrix(k, &hl->up, &dl->up);
        walk_matrix(k, &hl->down, &dl->down);
        if (hl->kind == JEV_LAYER_LINEAR) {
            const struct jev_linear_attn_weights *a = &hl->lin;
            struct jev_linear_attn_weights *b = &dl->lin;
            walk_matrix(k, &a->in_qkv, &b->in_qkv);
            walk_matrix(k, &a->in_z, &b->in_z);
            walk_matrix(k, &a->in_b, &b->in_b);
            walk_matrix(k, &a->in_a, &b->in_a);
            walk_matrix(k, &a->out, &b->out);
            walk_vec(k, a->conv, &b->conv, (int64_t)t->conv_dim * t->conv_kernel);
            walk_vec(k, a->dt_bias, &b->dt_bias, t->lin_v_heads);
            walk_vec(k, a->a_log, &b->a_log, t->lin_v_heads);
            walk_vec(k, a->norm, &b->norm, t->lin_v_dim);
        } else {
            const struct jev_full_attn_weights *a = &hl->full;
            struct jev_full_attn_weights *b = &dl->full;
            walk_matrix(k, &a->q, &b->q);
            walk_matrix(k, &a->k, &b->k);
            walk_matrix(k, &a->v, &b->v);
            walk_matrix(k, &a->o, &b->o);
            walk_vec(k, a->q_norm, &b->q_norm, t->head_dim);
            walk_vec(k, a->k_norm, &b->k_norm, t->head_dim);
        }
    }
}

static void walk_vision(struct walk *k, const struct jev_vision_weights *h, struct jev_vision_weights *d) {
    const struct jev_vision_config *c = &k->m->cfg->vision;
    int64_t D = c->hidden;
    walk_vec(k, h->patch_w, &d->patch_w, D * c->patch_dim);
    walk_vec(k, h->patch_b, &d->patch_b, D);
    walk_matrix(k, &h->pos_embed, &d->pos_embed);
    for (int32_t l = 0; l < c->depth && k->status == JEV_OK; l++) {
        const struct jev_vision_block_weights *a = &h->blocks[l];
        struct jev_vision_block_weights *b = &d->blocks[l];
        walk_vec(k, a->norm1_w, &b->norm1_w, D);
        walk_vec(k, a->norm1_b, &b->norm1_b, D);
        walk_vec(k, a->norm2_w, &b->norm2_w, D);
        walk_vec(k, a->norm2_b, &b->norm2_b, D);
        walk_matrix(k, &a->qkv, &b->qkv);
        walk_vec(k, a->qkv_b, &b->qkv_b, 3 * D);
        walk_matrix(k, &a->proj, &b->proj);
        walk_vec(k, a->proj_b, &b->proj_b, D);
        walk_matrix(k, &a->fc1, &b->fc1);
        walk_vec(k, a->fc1_b, &b->fc1_b, c->intermediate);
        walk_matrix(k, &a->fc2, &b->fc2);
        walk_vec(k, a->fc2_b, &b->fc2_b, D);
    }
    walk_vec(k, h->merger_norm_w, &d->merger_norm_w, D);
    walk_vec(k, h->merger_norm_b, &d->merger_norm_b, D);
    walk_matrix(k, &h->merger_fc1, &d->merger_fc1);
    walk_vec(k, h->merger_fc1_b, &d->merger_fc1_b, c->merge_in);
    walk_matrix(k, &h->merger_fc2, &d->merger_fc2);
    walk_vec(k, h->merger_fc2_b, &d->merger_fc2_b, c->out_hidden);
}

/* Both directions over the model's tensors; the host side says which tensors exist. */
static enum jev_status walk_all(struct jev_weights_mirror *m, const struct jev_weights *host, bool release,
                                struct jev_error *err) {
    struct walk k = {m, release, err, JEV_OK};
    walk_text(&k, &host->text, &m->copy.text);
    if (m->cfg->has_vision && host->vision.blocks && m->copy.vision.blocks)
        walk_vision(&k, &host->vision, &m->copy.vision);
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
