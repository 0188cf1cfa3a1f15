/*
 * safetensors.c - the validating safetensors reader of safetensors.h.
 *
 * Every byte of the file is outside input: the header length, the JSON and
 * every number in it are checked before anything points into the data area,
 * and each failure names the file and the tensor. The header is parsed with
 * jansson (duplicate keys rejected). All names are copied into one block
 * sized first, so a file costs three allocations whatever its tensor count.
 */
#include "io/safetensors.h" // defines: struct jev_st_file, struct jev_st_set

#include "base/read-file.h" // defines: jev_read_file

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- dtypes ---- */

/*
 * The element types the format defines, in the order of enum jev_dtype.
 * Every one of them must be accepted by the parser even though the model
 * uses only F32/BF16/F16/U32: a file may carry other tensors (an int64
 * position table, a bool mask) and must still open.
 */
static const struct {
    const char *name; /* header spelling */
    size_t size;      /* bytes per element */
} dtype_info[JEV_DTYPE_COUNT] = {
    [JEV_DTYPE_F64] = {"F64", 8},   [JEV_DTYPE_F32] = {"F32", 4},         [JEV_DTYPE_F16] = {"F16", 2},
    [JEV_DTYPE_BF16] = {"BF16", 2}, [JEV_DTYPE_I64] = {"I64", 8},         [JEV_DTYPE_I32] = {"I32", 4},
    [JEV_DTYPE_I16] = {"I16", 2},   [JEV_DTYPE_I8] = {"I8", 1},           [JEV_DTYPE_U8] = {"U8", 1},
    [JEV_DTYPE_U16] = {"U16", 2},   [JEV_DTYPE_U32] = {"U32", 4},         [JEV_DTYPE_U64] = {"U64", 8},
    [JEV_DTYPE_BOOL] = {"BOOL", 1}, [JEV_DTYPE_F8_E4M3] = {"F8_E4M3", 1}, [JEV_DTYPE_F8_E5M2] = {"F8_E5M2", 1},
};

/* Names are static strings; an out-of-range value gets "?" so that a message never prints NULL. */
const char *jev_dtype_name(enum jev_dtype t) { return (unsigned)t < JEV_DTYPE_COUNT ? dtype_info[t].name : "?"; }

/* Element sizes are the format's; no sub-byte types exist in it (4-bit codes travel as U32). */
size_t jev_dtype_size(enum jev_dtype t) { return (unsigned)t < JEV_DTYPE_COUNT ? dtype_info[t].size : 0; }

/* Exact, case-sensitive match as the format specifies ("F32", not "f32" or "float32"). */
bool jev_dtype_parse(const char *s, enum jev_dtype *out) {
    for (int i = 0; i < JEV_DTYPE_COUNT; i++) {
        if (strcmp(s, dtype_info[i].name) == 0) {
            *out = (enum jev_dtype)i;
            return true;
        }
    }
    return false;
}

/* Used by every shape message here and in the loader, so they all read the same. */
char *jev_st_shape_str(const int64_t *shape, int32_t ndim, char *buf, size_t size) {
    size_t at = 0;
    buf[0] = '\0';
    at += (size_t)snprintf(buf, size, "[");
    for (int32_t i = 0; i < ndim && at < size; i++)
        at += (size_t)snprintf(buf + at, size - at, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (at < size)
        snprintf(buf + at, size - at, "]");
    return buf;
}

/* ---- header parsing ---- */

/*
 * A JSON integer that is >= 0, as u64.
 * JSON numbers of the header are sizes and offsets: only integers >= 0 are
 * valid. jansson refuses integers beyond int64 at parse time, so after this
 * check every value fits a u64 without wrap-around.
 */
static bool get_uint(const json_t *v, uint64_t *out) {
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return false;
    *out = (uint64_t)json_integer_value(v);
    return true;
}

/* Tensors are kept sorted by name so that lookup is a binary search (hundreds of lookups per load). */
static int cmp_tensor_name(const void *a, const void *b) {
    return strcmp(((const struct jev_st_tensor *)a)->name, ((const struct jev_st_tensor *)b)->name);
}

/* Overlap check order: by start offset, then by size (ties between empty tensors are harmless). */
static int cmp_tensor_begin(const void *a, const void *b) {
    const struct jev_st_tensor *x = *(const struct jev_st_tensor *const *)a;
    const struct jev_st_tensor *y = *(const struct jev_st_tensor *const *)b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->nbytes < y->nbytes ? -1 : x->nbytes > y->nbytes;
}

/*
 * Copies s into the string area at *at; returns the copy.
 * The string area was sized in pass 1, so the copy cannot overrun it.
 */
static const char *put_str(char **at, const char *s) {
    size_t n = strlen(s) + 1;
    memcpy(*at, s, n);
    const char *r = *at;
    *at += n;
    return r;
}

/*
 * Fills t from one header entry (name already set), validating everything.
 * One header entry, in the order a reader needs to trust it: dtype known,
 * shape well formed and its byte size representable, offsets ordered,
 * inside the data area, and exactly as long as the shape says. Only then
 * does t->data point into the file. Unknown extra keys are ignored (the
 * format has none today, and rejecting them would break forward
 * compatibility for no safety gain).
 */
static enum jev_status parse_entry(const struct jev_st_file *f, const char *name, const json_t *e,
                                   struct jev_st_tensor *t, struct jev_error *err) {
    const char *p = f->path;
    if (!json_is_object(e))
        return jev_fail(err, JEV_ERR_FORMAT, "%s: tensor '%s': entry is not an object", p, name);
    const json_t *jd = json_object_get(e, "dtype");
    if (!json_is_string(jd))
        return jev_fail(err, JEV_ERR_FORMAT, "%s: tensor '%s': missing \"dtype\" string", p, name);
    if (!jev_dtype_parse(json_string_value(jd), &t->dtype))
        return jev_fail(err, JEV_ERR_FORMAT, "%s: tensor '%s': unknown dtype '%s'", p, name, json_string_value(jd));
    const json_t *js = json_object_get(e, "shape");
    if (!json_is_array(js))
        return jev_fail(err, JEV_ERR_FORMAT, "%s: tensor '%s': missing \"shape\" array", p, name);
    size_t nd = json_array_size(js);
    if (nd > JEV_ST_MAX_DIMS)
        return jev_fail(err, JEV_ERR_FORMAT, "%s: tensor '%s': shape has %zu dimensions, at most %d are supported", p,
                        name, nd, JEV_ST_MAX_DIMS);
    t->ndim = (int32_t)nd;
    uint64_t numel = 1;
    bool overflow = false;
    for (size_t i = 0; i < nd; i++) {
        uint64_t d;
        if (!get_uint(json_array_get(js, i), &d))
            return jev_fail(err, JEV_ERR_FORMAT, "%s: tensor '%s': shape[%zu] is not a non-negative integer", p, name,
                            i);
        t->shape[i] = (int64_t)d;
        if (__builtin_mul_overflow(numel, d, &numel))
            overflow = true;
    }
    uint64_t nbytes = 0;
    if (overflow || __builtin_mul_overflow(numel, (uint64_t)jev_dtype_size(t->dtype), &nbytes))
        return jev_fail(err, JEV_ERR_FORMAT, "%s: tensor '%s': shape's byte size overflows 64 bits", p, name);
    t->numel = numel;
    t->nbytes = nbytes;
    const json_t *jo = json_object_get(e, "data_offsets");
    uint64_t b, en;
    if (!json_is_array(jo) || json_array_size(jo) != 2 || !get_uint(json_array_get(jo, 0), &b) ||
        !get_uint(json_array_get(jo, 1), &en) || b > en)
        return jev_fail(err, JEV_ERR_FORMAT,
                        "%s: tensor '%s': \"data_offsets\" must be [begin, end] with 0 <= begin <= end", p, name);
    if (en > f->data_size)
        return jev_fail(err, JEV_ERR_FORMAT,
                        "%s: tensor '%s': data_offsets [%llu,%llu] end beyond the file's %llu data bytes", p, name,
                        (unsigned long long)b, (unsigned long long)en, (unsigned long long)f->data_size);
    if (en - b != nbytes) {
        char sh[160];
        return jev_fail(
            err, JEV_ERR_FORMAT, "%s: tensor '%s': data_offsets [%llu,%llu] hold %llu bytes, but %s %s needs %llu", p,
            name, (unsigned long long)b, (unsigned long long)en, (unsigned long long)(en - b), jev_dtype_name(t->dtype),
            jev_st_shape_str(t->shape, t->ndim, sh, sizeof sh), (unsigned long long)nbytes);
    }
    t->begin = b;
    t->data = f->data + b;
    t->file = f;
    return JEV_OK;
}

/*
 * Rejects overlapping tensors: sorted by begin, each must start at or after the previous end.
 * Two tensors sharing bytes would let a write through one (never done here,
 * but done by tools that patch files) or a reinterpretation alias the other;
 * the format forbids it, so it is refused. Gaps are allowed: they are
 * harmless for reading, and the reference writer never produces them.
 */
static enum jev_status check_overlaps(const struct jev_st_file *f, struct jev_error *err) {
    if (f->n_tensors < 2)
        return JEV_OK;
    const struct jev_st_tensor **order = malloc((size_t)f->n_tensors * sizeof *order);
    if (!order)
        return jev_fail(err, JEV_ERR_NOMEM, "%s: out of memory sorting %d tensors", f->path, f->n_tensors);
    int32_t n = 0;
    for (int32_t i = 0; i < f->n_tensors; i++)
        if (f->tensors[i].nbytes > 0) /* empty tensors occupy no bytes */
            order[n++] = &f->tensors[i];
    qsort(order, (size_t)n, sizeof *order, cmp_tensor_begin);
    enum jev_status st = JEV_OK;
    for (int32_t i = 1; i < n; i++) {
        const struct jev_st_tensor *a = order[i - 1], *b = order[i];
        if (b->begin < a->begin + a->nbytes) {
            st = jev_fail(err, JEV_ERR_FORMAT, "%s: tensors '%s' [%llu,%llu] and '%s' [%llu,%llu] overlap", f->path,
                          a->name, (unsigned long long)a->begin, (unsigned long long)(a->begin + a->nbytes), b->name,
                          (unsigned long long)b->begin, (unsigned long long)(b->begin + b->nbytes));
            break;
        }
    }
    free(order);
    return st;
}

/*
 * Parses and validates f->bytes[0..size) (f->path set).
 * The whole validation of one file. Bounds come first (length field, then
 * the header must fit before the JSON is even looked at), then the JSON,
 * then every entry. Two passes over the object: the first counts names and
 * bytes so that one allocation holds all tensors and strings (no realloc
 * churn on a 1000-tensor header), the second fills and validates.
 */
static enum jev_status parse_file(struct jev_st_file *f, struct jev_error *err) {
    const char *p = f->path;
    if (f->size < 8)
        return jev_fail(err, JEV_ERR_FORMAT, "%s: truncated: %zu bytes, shorter than the 8-byte header length", p,
                        f->size);
    /* the length is little-endian on every platform: assembled byte by byte, no cast of the mapping */
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--)
        hl = hl << 8 | f->bytes[i];
    /* the 100 MiB cap bounds the JSON parser's memory (a 0.8B header is ~100 KiB); the subtraction
       form of the second test cannot wrap, unlike `8 + hl > size` */
    if (hl > JEV_ST_MAX_HEADER)
        return jev_fail(err, JEV_ERR_FORMAT, "%s: header length %llu exceeds the limit of %llu bytes", p,
                        (unsigned long long)hl, (unsigned long long)JEV_ST_MAX_HEADER);
    if (hl > f->size - 8)
        return jev_fail(err, JEV_ERR_FORMAT, "%s: header length %llu runs beyond the file's %zu bytes", p,
                        (unsigned long long)hl, f->size);
    f->header_len = hl;
    f->data = f->bytes + 8 + hl;
    f->data_size = f->size - 8 - hl;

    /* jansson parses exactly hl bytes (no NUL needed); trailing spaces, which writers use as padding,
       are JSON whitespace. Duplicate names would make lookup ambiguous: rejected. */
    json_error_t je;
    json_t *root = json_loadb((const char *)f->bytes + 8, (size_t)hl, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return jev_fail(err, JEV_ERR_FORMAT, "%s: header is not valid JSON: %s (at byte %d)", p, je.text, je.position);
    enum jev_status st = JEV_OK;
    if (!json_is_object(root)) {
        st = jev_fail(err, JEV_ERR_FORMAT, "%s: header is not a JSON object", p);
        goto done;
    }

    /* pass 1: count entries and string bytes, so one block holds everything */
    size_t n_t = 0, n_m = 0, chars = 0;
    const char *key;
    json_t *val;
    json_t *meta = NULL;
    json_object_foreach(root, key, val) {
        if (strcmp(key, "__metadata__") == 0) {
            if (!json_is_object(val)) {
                st = jev_fail(err, JEV_ERR_FORMAT, "%s: \"__metadata__\" is not an object", p);
                goto done;
            }
            meta = val;
            const char *mk;
            json_t *mv;
            json_object_foreach(val, mk, mv) {
                if (!json_is_string(mv)) {
                    st = jev_fail(err, JEV_ERR_FORMAT, "%s: \"__metadata__\" value of '%s' is not a string", p, mk);
                    goto done;
                }
                n_m++;
                chars += strlen(mk) + 1 + strlen(json_string_value(mv)) + 1;
            }
            continue;
        }
        n_t++;
        chars += strlen(key) + 1;
    }
    /* a 100 MiB header cannot hold this many entries, but the count is int32 below: say so */
    if (n_t > INT32_MAX / 2) {
        st = jev_fail(err, JEV_ERR_FORMAT, "%s: too many tensors (%zu)", p, n_t);
        goto done;
    }
    size_t bytes = n_t * sizeof(struct jev_st_tensor) + n_m * sizeof(struct jev_st_meta) + chars + 1;
    f->block = calloc(1, bytes);
    if (!f->block) {
        st = jev_fail(err, JEV_ERR_NOMEM, "%s: cannot allocate %zu bytes for the header", p, bytes);
        goto done;
    }
    f->tensors = f->block;
    f->meta = (struct jev_st_meta *)(f->tensors + n_t);
    char *strs = (char *)(f->meta + n_m);

    /* pass 2: validate and fill */
    if (meta) {
        const char *mk;
        json_t *mv;
        json_object_foreach(meta, mk, mv) {
            struct jev_st_meta *m = &f->meta[f->n_meta++];
            m->key = put_str(&strs, mk);
            m->value = put_str(&strs, json_string_value(mv));
        }
    }
    json_object_foreach(root, key, val) {
        if (strcmp(key, "__metadata__") == 0)
            continue;
        struct jev_st_tensor *t = &f->tensors[f->n_tensors];
        t->name = put_str(&strs, key);
        f->n_tensors++;
        if ((st = parse_entry(f, t->name, val, t, err)) != JEV_OK)
            goto done;
    }
    /* sorted for lookup only after every entry validated; overlaps need all entries */
    qsort(f->tensors, (size_t)f->n_tensors, sizeof *f->tensors, cmp_tensor_name);
    st = check_overlaps(f, err);
done:
    json_decref(root);
    return st;
}

/* ---- files ---- */

/* The path is copied because messages and users (jev info) refer to it after the caller's string is gone. */
static enum jev_status set_path(struct jev_st_file *f, const char *path, struct jev_error *err) {
    f->path = strdup(path);
    return f->path ? JEV_OK : jev_fail(err, JEV_ERR_NOMEM, "%s: out of memory", path);
}

/* The fuzz target's entry: the same parser as for a mapped file, over the caller's bytes. */
enum jev_status jev_st_file_open_memory(struct jev_st_file *f, const void *bytes, size_t size, const char *label,
                                        struct jev_error *err) {
    memset(f, 0, sizeof *f);
    JEV_TRY(set_path(f, label, err));
    f->bytes = bytes;
    f->size = size;
    enum jev_status st = parse_file(f, err);
    if (st != JEV_OK)
        jev_st_file_close(f);
    return st;
}

/*
 * mmap read-only and private: weights are never copied, pages are shared
 * between processes that load the same model, and nothing can write
 * through the mapping. Only regular files are accepted (a FIFO or a device
 * would make the size meaningless).
 */
enum jev_status jev_st_file_open(struct jev_st_file *f, const char *path, struct jev_error *err) {
    memset(f, 0, sizeof *f);
    JEV_TRY(set_path(f, path, err));
    enum jev_status st = JEV_OK;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        st = jev_fail(err, JEV_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        goto fail;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        st = jev_fail(err, JEV_ERR_IO, "%s: not a regular file", path);
        close(fd);
        goto fail;
    }
    f->size = (size_t)sb.st_size;
    /* the size is taken once from fstat; a file truncated by someone else after this point would
       fault on access (SIGBUS), as with any mmap reader: model files are not edited in place */
    if (f->size >= 8) { /* an empty file cannot be mapped; parse_file reports short ones */
        void *m = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            st = jev_fail(err, JEV_ERR_IO, "%s: cannot mmap %zu bytes: %s", path, f->size, strerror(errno));
            close(fd);
            goto fail;
        }
        f->map = m;
        f->map_size = f->size;
        f->bytes = m;
    } else {
        static const uint8_t none[8];
        f->bytes = none;
    }
    close(fd);
    if ((st = parse_file(f, err)) == JEV_OK)
        return JEV_OK;
fail:
    jev_st_file_close(f);
    return st;
}

/* Safe on a zeroed or already closed file, so every error path can simply call it. */
void jev_st_file_close(struct jev_st_file *f) {
    if (f->map)
        munmap(f->map, f->map_size);
    free(f->block);
    free(f->path);
    memset(f, 0, sizeof *f);
}

/* Binary search over the name-sorted tensors. */
const struct jev_st_tensor *jev_st_file_find(const struct jev_st_file *f, const char *name) {
    size_t lo = 0, hi = (size_t)f->n_tensors;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(name, f->tensors[mid].name);
        if (c == 0)
            return &f->tensors[mid];
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

/* Linear: a header holds a handful of metadata entries at most. */
const char *jev_st_file_meta(const struct jev_st_file *f, const char *key) {
    for (int32_t i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta[i].key, key) == 0)
            return f->meta[i].value;
    return NULL;
}

/* ---- index (model.safetensors.index.json) ---- */

/* A shard must name a file inside the model directory, nothing else. */
static bool plain_file_name(const char *s) {
    return s[0] != '\0' && strchr(s, '/') == NULL && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

/*
 * The whole document is validated before the first callback, so a caller
 * never acts on half of a bad index. The "metadata" object (total_size) is
 * not needed and not checked beyond being JSON.
 */
enum jev_status jev_st_index_parse(const char *json, size_t size, const char *label, jev_st_index_fn fn, void *arg,
                                   struct jev_error *err) {
    json_error_t je;
    json_t *root = json_loadb(json, size, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return jev_fail(err, JEV_ERR_FORMAT, "%s: not valid JSON: %s (line %d, column %d)", label, je.text, je.line,
                        je.column);
    enum jev_status st = JEV_OK;
    json_t *wm = json_object_get(root, "weight_map");
    if (!json_is_object(root) || !json_is_object(wm)) {
        st = jev_fail(err, JEV_ERR_FORMAT, "%s: missing \"weight_map\" object", label);
        goto done;
    }
    const char *k;
    json_t *v;
    json_object_foreach(wm, k, v) { /* validate everything before calling back */
        if (!json_is_string(v)) {
            st = jev_fail(err, JEV_ERR_FORMAT, "%s: weight_map['%s'] is not a string", label, k);
            goto done;
        }
        if (!plain_file_name(json_string_value(v))) {
            st = jev_fail(err, JEV_ERR_FORMAT, "%s: weight_map['%s']: shard '%s' is not a plain file name", label, k,
                          json_string_value(v));
            goto done;
        }
    }
    json_object_foreach(wm, k, v) {
        if ((st = fn(k, json_string_value(v), arg, err)) != JEV_OK)
            goto done;
    }
done:
    json_decref(root);
    return st;
}

/* ---- sets ---- */

struct index_entries {
    char **names;  /* [n] tensor names (owned) */
    char **shards; /* [n] shard file names (owned) */
    size_t n, cap; /* used and allocated entries */
};

/* Copies one weight_map entry (the JSON document is freed before the shards are opened). */
static enum jev_status collect_entry(const char *name, const char *shard, void *arg, struct jev_error *err) {
    struct index_entries *e = arg;
    if (e->n == e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 256;
        char **a = realloc(e->names, cap * sizeof *a);
        if (a)
            e->names = a;
        char **b = a ? realloc(e->shards, cap * sizeof *b) : NULL;
        if (b)
            e->shards = b;
        if (!a || !b)
            return jev_fail(err, JEV_ERR_NOMEM, "out of memory reading the shard index");
        e->cap = cap;
    }
    e->names[e->n] = strdup(name);
    e->shards[e->n] = strdup(shard);
    e->n++;
    if (!e->names[e->n - 1] || !e->shards[e->n - 1])
        return jev_fail(err, JEV_ERR_NOMEM, "out of memory reading the shard index");
    return JEV_OK;
}

/* Frees what collect_entry copied, also after a partial failure. */
static void free_entries(struct index_entries *e) {
    for (size_t i = 0; i < e->n; i++) {
        free(e->names[i]);
        free(e->shards[i]);
    }
    free(e->names);
    free(e->shards);
}

/* qsort helpers: shard names, and the set's tensors by name. */
static int cmp_str_ptr(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int cmp_tensor_ptr_name(const void *a, const void *b) {
    return strcmp((*(const struct jev_st_tensor *const *)a)->name, (*(const struct jev_st_tensor *const *)b)->name);
}

/* DIR/NAME as a new string (NULL when out of memory). */
static char *join_path(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/*
 * Opens the shards an index names and builds the name table from weight_map.
 * A sharded model: the index's weight_map decides which tensors exist (a
 * tensor present in a shard but not in the index is not reachable, as with
 * HF's loader). Distinct shard names are sorted and opened once each; then
 * every entry must be found in the shard it names, so a stale or edited
 * index fails at load instead of at first use.
 */
static enum jev_status open_sharded(struct jev_st_set *s, const char *index_path, struct jev_error *err) {
    char *json = NULL;
    size_t size = 0;
    struct index_entries e = {0};
    char **uniq = NULL;
    enum jev_status st = jev_read_file(index_path, JEV_ST_MAX_INDEX, &json, &size, err);
    if (st != JEV_OK)
        return st;
    /* messages about the index's content name the index by its file name (its path is in the
       messages about the file itself, which the parser produces) */
    const char *label = "model.safetensors.index.json";
    if ((st = jev_st_index_parse(json, size, index_path, collect_entry, &e, err)) != JEV_OK)
        goto done;
    if (e.n == 0) {
        st = jev_fail(err, JEV_ERR_FORMAT, "%s: weight_map is empty", index_path);
        goto done;
    }
    /* the distinct shard names, each opened once */
    uniq = malloc(e.n * sizeof *uniq);
    s->by_name = malloc(e.n * sizeof *s->by_name);
    if (!uniq || !s->by_name) {
        st = jev_fail(err, JEV_ERR_NOMEM, "%s: out of memory", index_path);
        goto done;
    }
    memcpy(uniq, e.shards, e.n * sizeof *uniq);
    qsort(uniq, e.n, sizeof *uniq, cmp_str_ptr);
    size_t nu = 0;
    for (size_t i = 0; i < e.n; i++)
        if (nu == 0 || strcmp(uniq[nu - 1], uniq[i]) != 0)
            uniq[nu++] = uniq[i];
    s->files = calloc(nu, sizeof *s->files);
    if (!s->files) {
        st = jev_fail(err, JEV_ERR_NOMEM, "%s: out of memory", index_path);
        goto done;
    }
    for (size_t i = 0; i < nu; i++) {
        char *path = join_path(s->dir, uniq[i]);
        if (!path) {
            st = jev_fail(err, JEV_ERR_NOMEM, "%s: out of memory", index_path);
            goto done;
        }
        st = jev_st_file_open(&s->files[i], path, err);
        free(path);
        if (st != JEV_OK)
            goto done;
        s->n_files++;
    }
    for (size_t i = 0; i < e.n; i++) {
        /* the shard of entry i, by binary search over the sorted distinct names (files[k] was opened
           from uniq[k], so the index found is also the file's) */
        size_t lo = 0, hi = nu;
        while (hi - lo > 1) {
            size_t mid = (lo + hi) / 2;
            if (strcmp(e.shards[i], uniq[mid]) < 0)
                hi = mid;
            else
                lo = mid;
        }
        const struct jev_st_tensor *t = jev_st_file_find(&s->files[lo], e.names[i]);
        if (!t) {
            st = jev_fail(err, JEV_ERR_FORMAT, "%s: tensor '%s' is mapped to shard '%s', which does not contain it",
                          label, e.names[i], e.shards[i]);
            goto done;
        }
        s->by_name[s->n_tensors++] = t;
        s->total_bytes += t->nbytes;
    }
    qsort(s->by_name, (size_t)s->n_tensors, sizeof *s->by_name, cmp_tensor_ptr_name);
done:
    free(uniq);
    free_entries(&e);
    free(json);
    return st;
}

/*
 * The index wins when both it and model.safetensors exist, as in HF
 * (save_pretrained never leaves both, but a hand-edited directory might).
 */
enum jev_status jev_st_set_open(struct jev_st_set *s, const char *dir, struct jev_error *err) {
    memset(s, 0, sizeof *s);
    s->dir = strdup(dir);
    char *index = join_path(dir, "model.safetensors.index.json");
    char *single = join_path(dir, "model.safetensors");
    enum jev_status st = JEV_OK;
    if (!s->dir || !index || !single) {
        st = jev_fail(err, JEV_ERR_NOMEM, "%s: out of memory", dir);
        goto done;
    }
    struct stat sb;
    if (stat(index, &sb) == 0) {
        s->sharded = true;
        st = open_sharded(s, index, err);
        goto done;
    }
    if (stat(single, &sb) != 0) {
        st = jev_fail(err, JEV_ERR_IO, "%s: no model.safetensors or model.safetensors.index.json", dir);
        goto done;
    }
    s->files = calloc(1, sizeof *s->files);
    if (!s->files) {
        st = jev_fail(err, JEV_ERR_NOMEM, "%s: out of memory", dir);
        goto done;
    }
    if ((st = jev_st_file_open(&s->files[0], single, err)) != JEV_OK)
        goto done;
    s->n_files = 1;
    /* one file: the set's name table is the file's (already sorted), so lookups work the same way */
    const struct jev_st_file *f = &s->files[0];
    s->by_name = malloc(((size_t)f->n_tensors + 1) * sizeof *s->by_name);
    if (!s->by_name) {
        st = jev_fail(err, JEV_ERR_NOMEM, "%s: out of memory", dir);
        goto done;
    }
    for (int32_t i = 0; i < f->n_tensors; i++) { /* the file's tensors are already sorted by name */
        s->by_name[i] = &f->tensors[i];
        s->total_bytes += f->tensors[i].nbytes;
    }
    s->n_tensors = f->n_tensors;
done:
    free(index);
    free(single);
    if (st != JEV_OK)
        jev_st_set_close(s);
    return st;
}

/* Safe on a zeroed or partially opened set. */
void jev_st_set_close(struct jev_st_set *s) {
    for (int32_t i = 0; i < s->n_files; i++)
        jev_st_file_close(&s->files[i]);
    free(s->files);
    free(s->by_name);
    free(s->dir);
    memset(s, 0, sizeof *s);
}

/* Binary search over the set's name table (the model loader's only lookup). */
const struct jev_st_tensor *jev_st_set_find(const struct jev_st_set *s, const char *name) {
    size_t lo = 0, hi = (size_t)s->n_tensors;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(name, s->by_name[mid]->name);
        if (c == 0)
            return s->by_name[mid];
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}
