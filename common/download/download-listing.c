/*
 * download-listing.c - parse a hub's model listing JSON into the list of
 * files jev download fetches, and the rule for which names are wanted.
 *
 * Bytes come from a server, so every field is checked: "siblings" must be an
 * array of objects with a string "rfilename"; "size" and "lfs.size" must be
 * non-negative integers; "lfs.sha256" must be 64 hex digits. Names are
 * validated before they ever become a path: no '/', no "\\", no leading '.',
 * no control bytes, at most 255 bytes. A name failing those is skipped
 * silently only when it is not wanted anyway; a wanted-looking unsafe name
 * is an error (a hostile listing should not be half-obeyed).
 * Not here: no network (download.c), no filesystem.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/download/download.h" // defines: jev_download_listing_parse

/* ---- names ---- */

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && memcmp(s + n - m, suffix, m) == 0;
}

static bool starts_with(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

bool jev_download_wanted(const char *name) {
    static const char *exact[] = {
        "config.json",           "generation_config.json", "model.safetensors.index.json", "tokenizer.json",
        "tokenizer_config.json", "chat_template.jinja",    "preprocessor_config.json"};
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++)
        if (strcmp(name, exact[i]) == 0)
            return true;
    if (ends_with(name, ".safetensors") && strlen(name) > strlen(".safetensors"))
        return true;
    return starts_with(name, "README") || starts_with(name, "LICENSE");
}

/* A name that is safe to join to the destination directory as one entry. */
static bool safe_name(const char *name) {
    size_t n = strlen(name);
    if (n == 0 || n > 255 || name[0] == '.')
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c < 0x20 || c == 0x7f || c == '/' || c == '\\')
            return false;
    }
    return true;
}

/* ---- parse ---- */

static bool get_size(json_t *v, int64_t *out) {
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return false;
    *out = (int64_t)json_integer_value(v);
    return true;
}

/* Parses sibling i into f (f->name a fresh copy when kept).
 * Returns 1 wanted, 0 skipped, or an error status via *st. */
static int parse_sibling(json_t *s, size_t i, struct jev_download_file *f, struct jev_error *err, enum jev_status *st) {
    *st = JEV_OK;
    const char *name = json_string_value(json_object_get(s, "rfilename"));
    if (!json_is_object(s) || !name) {
        *st = jev_fail(err, JEV_ERR_FORMAT, "download listing: siblings[%zu] has no string \"rfilename\"", i);
        return 0;
    }
    if (!jev_download_wanted(name))
        return 0;
    const char *slash = strchr(name, '/');
    if (slash && !strstr(name, ".."))
        return 0; /* a nested file (e.g. onnx/model.safetensors): not part of a flat model directory */
    if (!safe_name(name)) {
        *st = jev_fail(err, JEV_ERR_FORMAT, "download listing: siblings[%zu] has an unsafe file name", i);
        return 0;
    }
    f->size = -1;
    f->sha256[0] = '\0';
    json_t *size = json_object_get(s, "size");
    if (size && !get_size(size, &f->size)) {
        *st = jev_fail(err, JEV_ERR_FORMAT, "download listing: %s: \"size\" is not a non-negative integer", name);
        return 0;
    }
    json_t *lfs = json_object_get(s, "lfs");
    if (lfs && !json_is_null(lfs)) {
        if (!json_is_object(lfs)) {
            *st = jev_fail(err, JEV_ERR_FORMAT, "download listing: %s: \"lfs\" is not an object", name);
            return 0;
        }
        json_t *ls = json_object_get(lfs, "size");
        int64_t lsize;
        if (ls) {
            if (!get_size(ls, &lsize)) {
                *st = jev_fail(err, JEV_ERR_FORMAT, "download listing: %s: \"lfs.size\" is not a non-negative integer",
                               name);
                return 0;
            }
            if (f->size >= 0 && f->size != lsize) {
                *st = jev_fail(err, JEV_ERR_FORMAT, "download listing: %s: size %lld and lfs.size %lld differ", name,
                               (long long)f->size, (long long)lsize);
                return 0;
            }
            f->size = lsize;
        }
        const char *sha = json_string_value(json_object_get(lfs, "sha256"));
        if (json_object_get(lfs, "sha256")) {
            bool ok = sha && strlen(sha) == 64;
            for (int k = 0; ok && k < 64; k++)
                ok = isxdigit((unsigned char)sha[k]) != 0;
            if (!ok) {
                *st = jev_fail(err, JEV_ERR_FORMAT, "download listing: %s: \"lfs.sha256\" is not 64 hex digits", name);
                return 0;
            }
            for (int k = 0; k < 64; k++)
                f->sha256[k] = (char)tolower((unsigned char)sha[k]);
            f->sha256[64] = '\0';
        }
    }
    f->name = strdup(name);
    if (!f->name) {
        *st = jev_fail(err, JEV_ERR_NOMEM, "download listing: file name");
        return 0;
    }
    return 1;
}

enum jev_status jev_download_listing_parse(const char *json, size_t n, struct jev_download_listing *out,
                                           struct jev_error *err) {
    out->files = NULL;
    out->n = 0;
    json_error_t je;
    json_t *root = json_loadb(json, n, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return jev_fail(err, JEV_ERR_FORMAT, "download listing: invalid JSON at line %d: %s", je.line, je.text);
    enum jev_status st = JEV_OK;
    json_t *sib = json_object_get(root, "siblings");
    if (!json_is_object(root) || !json_is_array(sib)) {
        st = jev_fail(err, JEV_ERR_FORMAT, "download listing: no \"siblings\" array");
        goto done;
    }
    size_t count = json_array_size(sib);
    out->files = calloc(count ? count : 1, sizeof *out->files);
    if (!out->files) {
        st = jev_fail(err, JEV_ERR_NOMEM, "download listing: %zu files", count);
        goto done;
    }
    for (size_t i = 0; i < count; i++) {
        struct jev_download_file f;
        int keep = parse_sibling(json_array_get(sib, i), i, &f, err, &st);
        if (st != JEV_OK)
            goto done;
        if (!keep)
            continue;
        for (int k = 0; k < out->n; k++)
            if (strcmp(out->files[k].name, f.name) == 0) {
                st = jev_fail(err, JEV_ERR_FORMAT, "download listing: %s is listed twice", f.name);
                free(f.name);
                goto done;
            }
        out->files[out->n++] = f;
    }
done:
    json_decref(root);
    if (st != JEV_OK)
        jev_download_listing_free(out);
    return st;
}

void jev_download_listing_free(struct jev_download_listing *l) {
    for (int i = 0; i < l->n; i++)
        free(l->files[i].name);
    free(l->files);
    l->files = NULL;
    l->n = 0;
}
