/*
 * model.c - jev_model_load / jev_model_free: a model directory into an
 * immutable struct jev_model.
 *
 * Order: config.json (+ generation_config.json) -> open the tensor set ->
 * detect the layout from names -> size the vector arena from the config ->
 * map every weight (checks presence, dtype class and shape). Any failure
 * frees what was built and names the file, tensor or field. The tokenizer
 * is the model's too, loaded on first use (jev_model_tokenizer).
 */
#include "model/model.h" // defines: struct jev_model

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/config-json.h" // defines: struct jev_quant_overrides

/* All zero: every core, the CPU backend, vision loaded. */
struct jev_model_params jev_model_default_params(void) {
    struct jev_model_params p = {0};
    p.n_threads = 0;
    p.backend = NULL;
    p.no_vision = false;
    return p;
}

/*
 * Loaded once per model, on first use, under the model's lock: the deciders of several engines (a
 * server's, or tests') may ask at the same time, and all of them get the one object.
 */
enum jev_status jev_model_tokenizer(struct jev_model *m, const struct jev_tokenizer **out, struct jev_error *err) {
    *out = NULL;
    char path[4096];
    if (snprintf(path, sizeof path, "%s/tokenizer.json", m->dir) >= (int)sizeof path)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "%s: the model directory's path is too long", m->dir);
    enum jev_status st = JEV_OK;
    pthread_mutex_lock(&m->tokenizer_lock);
    if (!m->tokenizer)
        st = jev_tokenizer_load(path, &m->tokenizer, err);
    *out = m->tokenizer;
    pthread_mutex_unlock(&m->tokenizer_lock);
    return st;
}

/*
 * Loads in the order that gives the most useful first error: config (cheap,
 * explains sizes), tensors (opens and validates the files), layout (from the
 * names), then the weights against the config. The arena is sized from the
 * config before mapping, so the vectors cost one allocation and the mapping
 * cannot run out of room halfway through a valid model.
 */
enum jev_status jev_model_open(const char *dir, const struct jev_model_params *params, struct jev_model **out,
                               struct jev_error *err) {
    *out = NULL;
    if (!dir)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "jev_model_load: dir is NULL");
    struct jev_model *m = calloc(1, sizeof *m);
    if (!m)
        return jev_fail(err, JEV_ERR_NOMEM, "%s: out of memory", dir);
    pthread_mutex_init(&m->tokenizer_lock, NULL); /* first, so that jev_model_free may always destroy it */
    m->params = params ? *params : jev_model_default_params();
    enum jev_status bs = jev_backend_parse(m->params.backend, &m->backend, &m->device, err); /* backend/registry.h */
    m->params.backend = NULL; /* the caller's string is not kept */
    if (bs != JEV_OK) {
        jev_model_free(m);
        return bs;
    }
    struct jev_quant_overrides q = {0};
    enum jev_status st = JEV_ERR_NOMEM;
    if (!(m->dir = strdup(dir))) {
        jev_fail(err, st, "%s: out of memory", dir);
        goto fail;
    }
    if ((st = jev_model_dir_read_config(dir, &m->config, &q, err)) != JEV_OK)
        goto fail;
    if (m->params.no_vision)
        m->config.has_vision = false;
    if ((st = jev_st_set_open(&m->tensors, dir, err)) != JEV_OK)
        goto fail;
    if ((st = jev_layout_detect(&m->tensors, &m->layout, err)) != JEV_OK)
        goto fail;
    if ((st = jev_arena_init(&m->vectors, jev_weights_arena_bytes(&m->config), err)) != JEV_OK)
        goto fail;
    if ((st = jev_weights_map(&m->tensors, m->layout, &m->config, &q, &m->vectors, &m->weights, err)) != JEV_OK)
        goto fail;
    jev_quant_overrides_free(&q);
    *out = m;
    return JEV_OK;
fail:
    jev_quant_overrides_free(&q);
    jev_model_free(m);
    return st;
}

/* The public entry (include/jev.h): the same, with the message copied into the caller's buffer. */
enum jev_status jev_model_load(const char *dir, const struct jev_model_params *params, struct jev_model **out,
                               char *err, size_t err_size) {
    struct jev_error e = {0};
    struct jev_model *m = NULL;
    enum jev_status st =
        out ? jev_model_open(dir, params, &m, &e) : jev_fail(&e, JEV_ERR_INVALID_ARG, "jev_model_load: out is NULL");
    if (out)
        *out = m;
    jev_error_copy(&e, err, err_size);
    return st;
}

/* Unmaps the files: every matrix pointer of the model dies here. */
void jev_model_free(struct jev_model *m) {
    if (!m)
        return;
    jev_tokenizer_free(m->tokenizer);
    pthread_mutex_destroy(&m->tokenizer_lock);
    jev_arena_free(&m->vectors);
    jev_st_set_close(&m->tensors);
    free(m->dir);
    free(m);
}

/*
 * Hashing reads every byte of the weights (seconds for 1.7 GB), so it is
 * done on demand (jev info --sha256, golden checks), never at load.
 */
enum jev_status jev_model_weights_sha256(const struct jev_model *m, char out[JEV_SHA256_HEX], struct jev_error *err) {
    if (!m->tensors.sharded)
        return jev_sha256_file(m->tensors.files[0].path, out, err);
    /* shards: files[] is in shard-name order (the set sorts the distinct names) */
    size_t cap = (size_t)m->tensors.n_files * (256 + JEV_SHA256_HEX + 2) + 1, at = 0;
    char *text = malloc(cap);
    if (!text)
        return jev_fail(err, JEV_ERR_NOMEM, "out of memory");
    for (int32_t i = 0; i < m->tensors.n_files; i++) {
        char h[JEV_SHA256_HEX];
        enum jev_status st = jev_sha256_file(m->tensors.files[i].path, h, err);
        if (st != JEV_OK) {
            free(text);
            return st;
        }
        const char *base = strrchr(m->tensors.files[i].path, '/');
        base = base ? base + 1 : m->tensors.files[i].path;
        at += (size_t)snprintf(text + at, cap - at, "%.255s %s\n", base, h);
    }
    jev_sha256_hex(text, at, out);
    free(text);
    return JEV_OK;
}
