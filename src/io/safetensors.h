/*
 * safetensors.h - a validating reader of safetensors files and sets of them.
 *
 * The format: an unsigned 64-bit little-endian header length N, then N bytes
 * of JSON (an object: tensor name -> {"dtype", "shape", "data_offsets"}, plus
 * an optional "__metadata__" object of strings), then the data area. Offsets
 * are relative to the start of the data area.
 *
 * What this reader guarantees after a successful open: the header is at most
 * 100 MiB and inside the file, every tensor has a known dtype, a shape of at
 * most 8 non-negative dimensions whose byte size does not overflow, and data
 * offsets [begin, end) inside the data area whose length is exactly
 * numel * element size; no two tensors overlap. So `data` of every tensor may
 * be read for its whole byte size without further checks. Alignment is NOT
 * guaranteed (a file may place a tensor at an odd offset): users that cast
 * `data` to a wider type must check it (the model loader does).
 *
 * What it is not: no writer (common/synth/synth.c writes files), no dtype
 * conversion, no knowledge of model names.
 *
 * Files are mmapped read-only; a file opened from memory points into the
 * caller's buffer (used by the fuzz target), which must outlive it.
 * A set is one model.safetensors, or model.safetensors.index.json with its
 * weight_map (name -> shard file); each shard is opened once.
 */
#ifndef JEV_IO_SAFETENSORS_H
#define JEV_IO_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h" // defines: struct jev_error

#define JEV_ST_MAX_DIMS 8
#define JEV_ST_MAX_HEADER ((uint64_t)100 << 20) /* 100 MiB */
#define JEV_ST_MAX_INDEX ((size_t)64 << 20)     /* model.safetensors.index.json size limit */

/* Element types of the format (names as in the header). */
enum jev_dtype {
    JEV_DTYPE_F64 = 0,
    JEV_DTYPE_F32,
    JEV_DTYPE_F16,
    JEV_DTYPE_BF16,
    JEV_DTYPE_I64,
    JEV_DTYPE_I32,
    JEV_DTYPE_I16,
    JEV_DTYPE_I8,
    JEV_DTYPE_U8,
    JEV_DTYPE_U16,
    JEV_DTYPE_U32,
    JEV_DTYPE_U64,
    JEV_DTYPE_BOOL,
    JEV_DTYPE_F8_E4M3,
    JEV_DTYPE_F8_E5M2,
    JEV_DTYPE_COUNT, /* number of dtypes, not a dtype */
};

/* "F32", "BF16", ...; "?" for an out-of-range value. */
const char *jev_dtype_name(enum jev_dtype t);
/* Bytes per element (1, 2, 4 or 8); 0 for an out-of-range value. */
size_t jev_dtype_size(enum jev_dtype t);
/* Parses a header dtype name; false when unknown. */
bool jev_dtype_parse(const char *s, enum jev_dtype *out);

struct jev_st_file;

struct jev_st_tensor {
    const char *name;               /* tensor name (owned by the file) */
    enum jev_dtype dtype;           /* element type */
    int32_t ndim;                   /* dimensions, 0..JEV_ST_MAX_DIMS */
    int64_t shape[JEV_ST_MAX_DIMS]; /* sizes, outermost first; unused entries 0 */
    uint64_t numel;                 /* product of shape (1 for a scalar) */
    uint64_t begin;                 /* byte offset of the data in the data area */
    uint64_t nbytes;                /* numel * element size */
    const void *data;               /* [nbytes] inside the mapping; may be unaligned */
    const struct jev_st_file *file; /* the file that holds it */
};

struct jev_st_meta {
    const char *key;   /* __metadata__ key (owned by the file) */
    const char *value; /* its string value */
};

struct jev_st_file {
    char *path;                    /* as opened (owned), used in every message */
    void *map;                     /* mmap base, NULL when opened from memory */
    size_t map_size;               /* bytes mapped */
    const uint8_t *bytes;          /* [size] the whole file */
    size_t size;                   /* file size in bytes */
    uint64_t header_len;           /* JSON bytes after the 8-byte length */
    const uint8_t *data;           /* [data_size] the data area (bytes + 8 + header_len) */
    uint64_t data_size;            /* bytes in the data area */
    struct jev_st_tensor *tensors; /* [n_tensors] sorted by name */
    int32_t n_tensors;             /* tensors in the header */
    struct jev_st_meta *meta;      /* [n_meta] __metadata__ entries, header order */
    int32_t n_meta;                /* entries of meta */
    void *block;                   /* one allocation holding tensors, meta and all strings */
};

/* Opens and validates a file (mmap). On failure f is left closed (safe to close again). */
enum jev_status jev_st_file_open(struct jev_st_file *f, const char *path, struct jev_error *err);
/* The same from bytes in memory (not copied: they must outlive f). label names it in messages. */
enum jev_status jev_st_file_open_memory(struct jev_st_file *f, const void *bytes, size_t size, const char *label,
                                        struct jev_error *err);
void jev_st_file_close(struct jev_st_file *f);
/* The tensor of that name, or NULL. */
const struct jev_st_tensor *jev_st_file_find(const struct jev_st_file *f, const char *name);
/* The __metadata__ value of key, or NULL. */
const char *jev_st_file_meta(const struct jev_st_file *f, const char *key);

/* "[6144, 1, 4]" into buf (always terminated); returns buf. */
char *jev_st_shape_str(const int64_t *shape, int32_t ndim, char *buf, size_t size);

struct jev_st_set {
    char *dir;                            /* model directory (owned) */
    bool sharded;                         /* opened through model.safetensors.index.json */
    struct jev_st_file *files;            /* [n_files] */
    int32_t n_files;                      /* 1 when not sharded */
    const struct jev_st_tensor **by_name; /* [n_tensors] sorted by name, across files */
    int32_t n_tensors;                    /* tensors reachable by name */
    uint64_t total_bytes;                 /* sum of tensor bytes reachable by name */
};

/*
 * Opens DIR/model.safetensors.index.json when it exists (every shard it names
 * is opened once and must hold every tensor mapped to it; shard names must be
 * plain file names), else DIR/model.safetensors. On failure s is left closed.
 */
enum jev_status jev_st_set_open(struct jev_st_set *s, const char *dir, struct jev_error *err);
void jev_st_set_close(struct jev_st_set *s);
const struct jev_st_tensor *jev_st_set_find(const struct jev_st_set *s, const char *name);

/*
 * Parses an index file's bytes: calls fn(name, shard, arg) for every entry
 * of weight_map after validating the whole document (label names it in
 * messages). Exposed for the set opener and for fuzzing.
 */
typedef enum jev_status (*jev_st_index_fn)(const char *name, const char *shard, void *arg, struct jev_error *err);
enum jev_status jev_st_index_parse(const char *json, size_t size, const char *label, jev_st_index_fn fn, void *arg,
                                   struct jev_error *err);

#endif
