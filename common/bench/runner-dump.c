/*
 * runner-dump.c - `jev bench --dump-inputs DIR`: everything before the
 * model, for a peer engine (docs/bench-inputs.md, format
 * "jev-bench-inputs/1"): manifest.json with the token ids of every prompt
 * of every decision count (shared prefix + suffixes, independent prompts,
 * the generate_json prompt), label ids and option ids, and pixel_values.f32
 * with the preprocessed image.
 *
 * The ids are the pipeline's own (jev_decide_dump), so the dump is exactly
 * what the measured requests feed the model. The folder is written next to
 * DIR under a temporary name and renamed into place; an existing DIR is
 * moved aside first and removed after the rename.
 */
#include "common/bench/runner-int.h" // defines: struct br_bench

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- files ---- */

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* Removes a folder we made (depth-first). */
static void rm_tree(const char *path) { nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

static enum jev_status write_all(const char *path, const void *data, size_t n, struct jev_error *err) {
    FILE *f = fopen(path, "wb");
    if (!f)
        return jev_fail(err, JEV_ERR_IO, "%s: cannot create (%s)", path, strerror(errno));
    bool ok = fwrite(data, 1, n, f) == n;
    ok = fflush(f) == 0 && ok;
    ok = fsync(fileno(f)) == 0 && ok;
    ok = fclose(f) == 0 && ok;
    return ok ? JEV_OK : jev_fail(err, JEV_ERR_IO, "%s: write failed (%s)", path, strerror(errno));
}

/* ---- the manifest ---- */

/* A copy of a JSON array of ids, optionally appended to another (prefix ++ suffix). */
static json_t *concat(json_t *a, json_t *b) {
    json_t *o = json_deep_copy(a);
    if (o && b)
        json_array_extend(o, b);
    return o;
}

/* One runs[] entry: from the pipeline's own inputs of that request. */
static enum jev_status run_entry(struct br_bench *b, const struct jev_request *r, json_t **out, struct jev_error *err) {
    struct jev_decide_params p = jev_decide_default_params();
    p.batch = b->o.batch;
    json_t *dump = NULL;
    JEV_TRY(jev_decide_dump(b->d, r, &p, &dump, err));
    json_t *prefix = json_object_get(dump, "prefix_ids");
    /* the M-RoPE delta of the prefix, for the peer to check its own */
    size_t np = json_array_size(prefix);
    int32_t *pids = malloc((np ? np : 1) * sizeof(int32_t)), delta = 0;
    if (!pids) {
        json_decref(dump);
        return jev_fail(err, JEV_ERR_NOMEM, "bench: out of memory");
    }
    for (size_t i = 0; i < np; i++)
        pids[i] = (int32_t)json_integer_value(json_array_get(prefix, i));
    enum jev_status s =
        jev_decide_rope_delta(b->d, pids, (int32_t)np, b->vin.size.grid_h, b->vin.size.grid_w, &delta, err);
    free(pids);
    if (s != JEV_OK) {
        json_decref(dump);
        return s;
    }
    json_t *ids = json_array(), *opts = json_array(), *labels = json_array(), *suffixes = json_array(),
           *prompts = json_array();
    size_t i;
    json_t *q;
    json_array_foreach(json_object_get(dump, "questions"), i, q) {
        json_array_append(ids, json_object_get(q, "id"));
        json_array_append(opts, json_object_get(q, "options"));
        json_t *lab = json_object_get(q, "label");
        json_t *per = json_array(), *v;
        size_t k;
        /* one id per option: the label's own token (an alias, read too, exists only for yes/no) */
        json_array_foreach(json_object_get(lab, "option_ids"), k, v) json_array_append(per, json_array_get(v, 0));
        json_array_append_new(labels, per);
        json_t *suf = json_object_get(lab, "suffix_ids");
        json_array_append(suffixes, suf);
        json_array_append_new(prompts, concat(prefix, suf));
    }
    json_t *gen = json_object_get(dump, "generate");
    *out = json_pack("{s:i, s:o, s:o, s:o, s:{s:O, s:o, s:i}, s:{s:o}, s:{s:o, s:O}}", "decisions", r->n_questions,
                     "decision_ids", ids, "options", opts, "label_ids", labels, "shared", "prefix_ids", prefix,
                     "suffix_ids", suffixes, "rope_delta", delta, "independent", "prompt_ids", prompts, "generate_json",
                     "prompt_ids", concat(prefix, json_object_get(gen, "suffix_ids")), "max_new_tokens",
                     json_object_get(gen, "max_new_tokens"));
    json_decref(dump);
    return *out ? JEV_OK : jev_fail(err, JEV_ERR_NOMEM, "bench: out of memory for the manifest");
}

static json_t *manifest(struct br_bench *b, const char *pix_sha, json_t *runs) {
    const struct jev_config *c = &b->model->config;
    json_t *weights = json_array(), *eos = json_array();
    for (int32_t i = 0; i < b->n_weights; i++)
        json_array_append_new(weights, json_pack("{s:s, s:I, s:s}", "file", b->weights[i].file, "bytes",
                                                 (json_int_t)b->weights[i].bytes, "sha256", b->weights[i].sha256));
    for (int32_t i = 0; i < c->ids.n_eos; i++)
        json_array_append_new(eos, json_integer(c->ids.eos[i]));
    const char *base = strrchr(b->o.model_dir, '/');
    const char *id = b->o.model_id ? b->o.model_id : (base && base[1] ? base + 1 : b->o.model_dir);
    json_t *synthetic = b->o.model_synthetic < 0 ? json_null() : json_boolean(b->o.model_synthetic == 1);
    json_t *batch = b->o.batch > 0 ? json_integer(b->o.batch) : json_string("all");
    return json_pack("{s:s, s:{s:s, s:s*}, s:{s:s, s:s, s:s, s:o, s:o}, s:{s:s, s:s, s:i, s:i, s:i, s:i}, s:s, "
                     "s:{s:o, s:s, s:i, s:i, s:i, s:i}, s:{s:i, s:i, s:i}, s:o, "
                     "s:{s:s, s:s, s:s, s:[i,i], s:[i,i,i], s:s}, s:o}",
                     "format", "jev-bench-inputs/1", "jev", "version", jev_version(), "git_commit",
                     b->git[0] ? b->git : NULL, "model", "id", id, "dir", b->o.model_dir, "layout", br_layout_name(b),
                     "synthetic", synthetic, "weights", weights, "image", "path", b->image_path, "sha256",
                     b->image_sha256, "width", b->image_w, "height", b->image_h, "resized_width", b->resized_w,
                     "resized_height", b->resized_h, "workload", b->o.workload, "settings", "batch", batch, "scoring",
                     "label", "image_max_side", b->image_max_side, "prefill_chunk", br_step_tokens(b),
                     "max_new_tokens_min", 128, "max_new_tokens_per_decision", 24, "special_ids", "image_token_id",
                     c->ids.image_pad, "vision_start_token_id", c->ids.vision_start, "vision_end_token_id",
                     c->ids.vision_end, "eos_token_ids", eos, "pixel_values", "file", "pixel_values.f32", "dtype",
                     "float32", "byte_order", "little", "shape", b->vin.size.n_patches, b->vin.size.patch_dim,
                     "grid_thw", 1, b->vin.size.grid_h, b->vin.size.grid_w, "sha256", pix_sha, "runs", runs);
}

/* ---- the folder ---- */

enum jev_status br_dump_inputs(struct br_bench *b, struct jev_error *err) {
    const char *dir = b->o.dump_inputs;
    char tmp[4200], old[4200], path[4300];
    snprintf(tmp, sizeof tmp, "%s.tmp-%ld", dir, (long)getpid());
    snprintf(old, sizeof old, "%s.old-%ld", dir, (long)getpid());
    rm_tree(tmp);
    if (mkdir(tmp, 0755) != 0)
        return jev_fail(err, JEV_ERR_IO, "%s: cannot create (%s)", tmp, strerror(errno));
    /* pixel_values.f32: raw little-endian f32 [n_patches][patch_dim] */
    size_t n = (size_t)b->vin.size.n_patches * (size_t)b->vin.size.patch_dim;
    unsigned char *bytes = malloc(n * 4 + 1);
    enum jev_status s = bytes ? JEV_OK : jev_fail(err, JEV_ERR_NOMEM, "bench: out of memory for the pixels");
    char sha[JEV_SHA256_HEX] = "";
    if (s == JEV_OK) {
        for (size_t i = 0; i < n; i++) {
            uint32_t u;
            memcpy(&u, &b->vin.pixels[i], 4);
            for (int k = 0; k < 4; k++)
                bytes[i * 4 + (size_t)k] = (unsigned char)(u >> (8 * k));
        }
        jev_sha256_hex(bytes, n * 4, sha);
        snprintf(path, sizeof path, "%s/pixel_values.f32", tmp);
        s = write_all(path, bytes, n * 4, err);
    }
    free(bytes);
    json_t *runs = json_array();
    for (int32_t i = 0; s == JEV_OK && i < b->o.n_counts; i++) {
        json_t *e = NULL;
        s = run_entry(b, &b->reqs[i], &e, err);
        if (s == JEV_OK)
            json_array_append_new(runs, e);
    }
    json_t *m = s == JEV_OK ? manifest(b, sha, runs) : NULL;
    if (s == JEV_OK && !m)
        s = jev_fail(err, JEV_ERR_NOMEM, "bench: out of memory for the manifest");
    if (!m)
        json_decref(runs);
    char *text = m ? json_dumps(m, JSON_COMPACT) : NULL;
    json_decref(m);
    if (s == JEV_OK && !text)
        s = jev_fail(err, JEV_ERR_NOMEM, "bench: out of memory for the manifest");
    if (s == JEV_OK) {
        snprintf(path, sizeof path, "%s/manifest.json", tmp);
        s = write_all(path, text, strlen(text), err);
    }
    free(text);
    /* into place: the old folder aside, the new one in, the old one removed */
    struct stat sb;
    bool had = stat(dir, &sb) == 0;
    if (s == JEV_OK && had && rename(dir, old) != 0)
        s = jev_fail(err, JEV_ERR_IO, "%s: cannot move the old dump aside (%s)", dir, strerror(errno));
    if (s == JEV_OK && rename(tmp, dir) != 0) {
        s = jev_fail(err, JEV_ERR_IO, "%s: cannot rename into place (%s)", dir, strerror(errno));
        if (had)
            rename(old, dir);
    }
    if (s == JEV_OK && had)
        rm_tree(old);
    if (s != JEV_OK)
        rm_tree(tmp);
    return s;
}
