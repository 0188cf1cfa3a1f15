/*
 * test-safetensors.c - the safetensors reader: a valid file and set read
 * back exactly, and every malformed-file case rejected with its exact
 * message. Every file is written by the test itself under $JEV_TEST_DIR.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/safetensors.h" // defines: jev_st_*

/* ---- helpers ---- */

static char test_dir[256];

static void make_dir(const char *p) {
    char cmd[2600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", p, p);
    assert_int_equal(system(cmd), 0);
}

static void write_bytes(const char *path, const void *b, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, n, f), n);
    fclose(f);
}

/* Writes an 8-byte length (hl, may lie), the header text and `data` bytes of a counting pattern. */
static void write_st(const char *path, const char *header, uint64_t hl, size_t data) {
    size_t h = strlen(header);
    size_t n = 8 + h + data;
    unsigned char *b = malloc(n);
    assert_non_null(b);
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(hl >> (8 * i));
    memcpy(b + 8, header, h);
    for (size_t i = 0; i < data; i++)
        b[8 + h + i] = (unsigned char)i;
    write_bytes(path, b, n);
    free(b);
}

static void path_in(char *out, size_t size, const char *name) { snprintf(out, size, "%s/%s", test_dir, name); }

/* Opens a file with this header and data size, expects failure with exactly `want` after "PATH: ". */
static void expect_bad(const char *header, size_t data, const char *want) {
    char path[1024], full[2048];
    path_in(path, sizeof path, "bad.safetensors");
    write_st(path, header, strlen(header), data);
    struct jev_st_file f;
    struct jev_error err = {0};
    assert_int_equal(jev_st_file_open(&f, path, &err), JEV_ERR_FORMAT);
    snprintf(full, sizeof full, "%s: %s", path, want);
    assert_string_equal(err.msg, full);
    jev_st_file_close(&f); /* closing a failed file is safe */
    /* the in-memory parser gives the same verdict */
    size_t h = strlen(header);
    unsigned char *b = calloc(1, 8 + h + data);
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((uint64_t)h >> (8 * i));
    memcpy(b + 8, header, h);
    jev_error_clear(&err);
    assert_int_equal(jev_st_file_open_memory(&f, b, 8 + h + data, path, &err), JEV_ERR_FORMAT);
    assert_string_equal(err.msg, full);
    free(b);
}

static int setup(void **state) {
    (void)state;
    const char *d = getenv("JEV_TEST_DIR");
    snprintf(test_dir, sizeof test_dir, "%s/safetensors", d ? d : "build/test-data");
    make_dir(test_dir);
    return 0;
}

/* ---- valid files ---- */

static const char *good_header = "{\"__metadata__\":{\"format\":\"pt\"},"
                                 "\"b\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[16,28]},"
                                 "\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                                 "\"s\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[32,40]},"
                                 "\"e\":{\"dtype\":\"U8\",\"shape\":[0,5],\"data_offsets\":[28,28]}}  ";

static void test_valid_file(void **state) {
    (void)state;
    char path[1024];
    path_in(path, sizeof path, "good.safetensors");
    write_st(path, good_header, strlen(good_header), 40);
    struct jev_st_file f;
    struct jev_error err = {0};
    assert_int_equal(jev_st_file_open(&f, path, &err), JEV_OK);
    assert_int_equal(f.n_tensors, 4);
    assert_string_equal(f.tensors[0].name, "a"); /* sorted by name */
    const struct jev_st_tensor *b = jev_st_file_find(&f, "b");
    assert_non_null(b);
    assert_int_equal(b->dtype, JEV_DTYPE_BF16);
    assert_int_equal(b->ndim, 2);
    assert_int_equal(b->shape[0], 2);
    assert_int_equal(b->shape[1], 3);
    assert_int_equal(b->numel, 6);
    assert_int_equal(b->nbytes, 12);
    assert_int_equal(((const unsigned char *)b->data)[0], 16); /* data byte 16 of the counting pattern */
    const struct jev_st_tensor *s = jev_st_file_find(&f, "s");
    assert_int_equal(s->ndim, 0);
    assert_int_equal(s->numel, 1);
    assert_int_equal(jev_st_file_find(&f, "e")->numel, 0);
    assert_null(jev_st_file_find(&f, "zz"));
    assert_string_equal(jev_st_file_meta(&f, "format"), "pt");
    assert_null(jev_st_file_meta(&f, "nope"));
    char sh[64];
    assert_string_equal(jev_st_shape_str(b->shape, b->ndim, sh, sizeof sh), "[2, 3]");
    jev_st_file_close(&f);
}

static void test_dtypes(void **state) {
    (void)state;
    static const char *names[] = {"F64", "F32", "F16", "BF16", "I64",  "I32",     "I16",    "I8",
                                  "U8",  "U16", "U32", "U64",  "BOOL", "F8_E4M3", "F8_E5M2"};
    static const size_t sizes[] = {8, 4, 2, 2, 8, 4, 2, 1, 1, 2, 4, 8, 1, 1, 1};
    for (int i = 0; i < JEV_DTYPE_COUNT; i++) {
        enum jev_dtype t;
        assert_true(jev_dtype_parse(names[i], &t));
        assert_int_equal(t, i);
        assert_int_equal(jev_dtype_size(t), sizes[i]);
        assert_string_equal(jev_dtype_name(t), names[i]);
    }
    enum jev_dtype t;
    assert_false(jev_dtype_parse("f32", &t));
    assert_false(jev_dtype_parse("Q4_0", &t));
}

/* ---- malformed files ---- */

static void test_truncated_header_length(void **state) {
    (void)state;
    char path[1024], want[2048];
    path_in(path, sizeof path, "short.safetensors");
    write_bytes(path, "\x05\0\0\0\0", 5);
    struct jev_st_file f;
    struct jev_error err = {0};
    assert_int_equal(jev_st_file_open(&f, path, &err), JEV_ERR_FORMAT);
    snprintf(want, sizeof want, "%s: truncated: 5 bytes, shorter than the 8-byte header length", path);
    assert_string_equal(err.msg, want);
    /* an empty file too (it cannot be mapped) */
    write_bytes(path, "", 0);
    jev_error_clear(&err);
    assert_int_equal(jev_st_file_open(&f, path, &err), JEV_ERR_FORMAT);
    snprintf(want, sizeof want, "%s: truncated: 0 bytes, shorter than the 8-byte header length", path);
    assert_string_equal(err.msg, want);
}

static void test_header_length_limits(void **state) {
    (void)state;
    char path[1024], want[2048];
    path_in(path, sizeof path, "hl.safetensors");
    struct jev_st_file f;
    struct jev_error err = {0};
    write_st(path, "{}", 1000, 0); /* claims 1000 header bytes, has 2 */
    assert_int_equal(jev_st_file_open(&f, path, &err), JEV_ERR_FORMAT);
    snprintf(want, sizeof want, "%s: header length 1000 runs beyond the file's 10 bytes", path);
    assert_string_equal(err.msg, want);
    write_st(path, "{}", ((uint64_t)100 << 20) + 1, 0);
    jev_error_clear(&err);
    assert_int_equal(jev_st_file_open(&f, path, &err), JEV_ERR_FORMAT);
    snprintf(want, sizeof want, "%s: header length 104857601 exceeds the limit of 104857600 bytes", path);
    assert_string_equal(err.msg, want);
    write_st(path, "{}", UINT64_MAX, 0); /* no wrap-around in the bound check */
    jev_error_clear(&err);
    assert_int_equal(jev_st_file_open(&f, path, &err), JEV_ERR_FORMAT);
    snprintf(want, sizeof want, "%s: header length 18446744073709551615 exceeds the limit of 104857600 bytes", path);
    assert_string_equal(err.msg, want);
}

static void test_bad_json(void **state) {
    (void)state;
    expect_bad("{\"a\":", 0, "header is not valid JSON: unexpected token near end of file (at byte 5)");
    expect_bad("[1,2]", 0, "header is not a JSON object");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
               "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
               8, "header is not valid JSON: duplicate object key near '\"a\"' (at byte 57)");
    expect_bad("{\"__metadata__\":[]}", 0, "\"__metadata__\" is not an object");
    expect_bad("{\"__metadata__\":{\"k\":1}}", 0, "\"__metadata__\" value of 'k' is not a string");
}

static void test_bad_entries(void **state) {
    (void)state;
    expect_bad("{\"x\":3}", 0, "tensor 'x': entry is not an object");
    expect_bad("{\"x\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "tensor 'x': missing \"dtype\" string");
    expect_bad("{\"x\":{\"dtype\":\"Q4\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "tensor 'x': unknown dtype 'Q4'");
    expect_bad("{\"x\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, "tensor 'x': missing \"shape\" array");
    expect_bad("{\"x\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
               "tensor 'x': shape has 9 dimensions, at most 8 are supported");
    expect_bad("{\"x\":{\"dtype\":\"F32\",\"shape\":[2,-1],\"data_offsets\":[0,4]}}", 4,
               "tensor 'x': shape[1] is not a non-negative integer");
    expect_bad("{\"x\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4,
               "tensor 'x': shape[0] is not a non-negative integer");
    expect_bad("{\"x\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,2],\"data_offsets\":[0,0]}}", 0,
               "tensor 'x': shape's byte size overflows 64 bits");
    expect_bad("{\"x\":{\"dtype\":\"F64\",\"shape\":[4294967296,1073741824],\"data_offsets\":[0,0]}}", 0,
               "tensor 'x': shape's byte size overflows 64 bits");
    expect_bad("{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", 4,
               "tensor 'x': \"data_offsets\" must be [begin, end] with 0 <= begin <= end");
    expect_bad("{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4,
               "tensor 'x': \"data_offsets\" must be [begin, end] with 0 <= begin <= end");
    expect_bad("{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 4,
               "tensor 'x': \"data_offsets\" must be [begin, end] with 0 <= begin <= end");
}

static void test_offsets(void **state) {
    (void)state;
    expect_bad("{\"x.weight\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}", 20,
               "tensor 'x.weight': data_offsets [8,24] end beyond the file's 20 data bytes");
    expect_bad("{\"x\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[0,16]}}", 16,
               "tensor 'x': data_offsets [0,16] hold 16 bytes, but BF16 [2, 3] needs 12");
    expect_bad("{\"x\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
               "\"y\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[12,20]}}",
               20, "tensors 'x' [0,16] and 'y' [12,20] overlap");
    expect_bad("{\"x\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]},"
               "\"y\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]}}",
               8, "tensors 'x' [4,8] and 'y' [4,8] overlap");
}

/* ---- sets ---- */

static void write_shard(const char *dir, const char *name, const char *tensor, int value) {
    char header[256], path[1024];
    snprintf(header, sizeof header, "{\"%s\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[0,4]}}", tensor);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    size_t h = strlen(header);
    unsigned char b[300];
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((uint64_t)h >> (8 * i));
    memcpy(b + 8, header, h);
    memcpy(b + 8 + h, &value, 4);
    write_bytes(path, b, 8 + h + 4);
}

static void write_index(const char *dir, const char *json) {
    char path[1024];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    write_bytes(path, json, strlen(json));
}

static void test_sharded_set(void **state) {
    (void)state;
    char dir[512];
    path_in(dir, sizeof dir, "sharded");
    make_dir(dir);
    write_shard(dir, "s1.safetensors", "t.a", 11);
    write_shard(dir, "s2.safetensors", "t.b", 22);
    write_index(dir, "{\"metadata\":{\"total_size\":8},\"weight_map\":{\"t.b\":\"s2.safetensors\","
                     "\"t.a\":\"s1.safetensors\"}}");
    struct jev_st_set s;
    struct jev_error err = {0};
    assert_int_equal(jev_st_set_open(&s, dir, &err), JEV_OK);
    assert_true(s.sharded);
    assert_int_equal(s.n_files, 2);
    assert_int_equal(s.n_tensors, 2);
    assert_int_equal(s.total_bytes, 8);
    int v;
    memcpy(&v, jev_st_set_find(&s, "t.a")->data, 4);
    assert_int_equal(v, 11);
    memcpy(&v, jev_st_set_find(&s, "t.b")->data, 4);
    assert_int_equal(v, 22);
    assert_null(jev_st_set_find(&s, "t.c"));
    jev_st_set_close(&s);
}

static void expect_set_error(const char *dir, enum jev_status want_st, const char *want) {
    struct jev_st_set s;
    struct jev_error err = {0};
    assert_int_equal(jev_st_set_open(&s, dir, &err), want_st);
    assert_string_equal(err.msg, want);
    jev_st_set_close(&s);
}

static void test_bad_sets(void **state) {
    (void)state;
    char dir[512], want[4096];
    path_in(dir, sizeof dir, "badset");
    make_dir(dir);
    snprintf(want, sizeof want, "%s: no model.safetensors or model.safetensors.index.json", dir);
    expect_set_error(dir, JEV_ERR_IO, want);

    write_shard(dir, "s1.safetensors", "t.a", 1);
    write_index(dir, "{\"weight_map\":{\"t.a\":\"s1.safetensors\",\"t.b\":\"s2.safetensors\"}}");
    snprintf(want, sizeof want, "%s/s2.safetensors: cannot open: No such file or directory", dir);
    expect_set_error(dir, JEV_ERR_IO, want);

    write_shard(dir, "s2.safetensors", "t.c", 2);
    expect_set_error(dir, JEV_ERR_FORMAT,
                     "model.safetensors.index.json: tensor 't.b' is mapped to shard 's2.safetensors', which does not "
                     "contain it");

    write_index(dir, "{\"weight_map\":{\"t.a\":\"../s1.safetensors\"}}");
    snprintf(want, sizeof want,
             "%s/model.safetensors.index.json: weight_map['t.a']: shard '../s1.safetensors' is not a plain file name",
             dir);
    expect_set_error(dir, JEV_ERR_FORMAT, want);

    write_index(dir, "{\"weight_map\":{\"t.a\":7}}");
    snprintf(want, sizeof want, "%s/model.safetensors.index.json: weight_map['t.a'] is not a string", dir);
    expect_set_error(dir, JEV_ERR_FORMAT, want);

    write_index(dir, "{\"metadata\":{}}");
    snprintf(want, sizeof want, "%s/model.safetensors.index.json: missing \"weight_map\" object", dir);
    expect_set_error(dir, JEV_ERR_FORMAT, want);

    write_index(dir, "{\"weight_map\":{}}");
    snprintf(want, sizeof want, "%s/model.safetensors.index.json: weight_map is empty", dir);
    expect_set_error(dir, JEV_ERR_FORMAT, want);

    write_index(dir, "{\"weight_map\":");
    snprintf(want, sizeof want,
             "%s/model.safetensors.index.json: not valid JSON: unexpected token near end of file (line 1, column 14)",
             dir);
    expect_set_error(dir, JEV_ERR_FORMAT, want);

    /* a corrupt shard reports its own path */
    write_index(dir, "{\"weight_map\":{\"t.a\":\"s3.safetensors\"}}");
    char p3[1100];
    snprintf(p3, sizeof p3, "%s/s3.safetensors", dir);
    write_st(p3, "{\"x\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 1000, 16);
    struct stat sb;
    assert_int_equal(stat(p3, &sb), 0);
    snprintf(want, sizeof want, "%s: header length 1000 runs beyond the file's %lld bytes", p3, (long long)sb.st_size);
    expect_set_error(dir, JEV_ERR_FORMAT, want);
}

static void test_single_file_set(void **state) {
    (void)state;
    char dir[512], path[1100];
    path_in(dir, sizeof dir, "single");
    make_dir(dir);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    write_st(path, good_header, strlen(good_header), 40);
    struct jev_st_set s;
    struct jev_error err = {0};
    assert_int_equal(jev_st_set_open(&s, dir, &err), JEV_OK);
    assert_false(s.sharded);
    assert_int_equal(s.n_tensors, 4);
    assert_int_equal(s.total_bytes, 16 + 12 + 8);
    assert_non_null(jev_st_set_find(&s, "e"));
    assert_int_equal(jev_st_set_find(&s, "a")->dtype, JEV_DTYPE_F32);
    jev_st_set_close(&s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_file),
        cmocka_unit_test(test_dtypes),
        cmocka_unit_test(test_truncated_header_length),
        cmocka_unit_test(test_header_length_limits),
        cmocka_unit_test(test_bad_json),
        cmocka_unit_test(test_bad_entries),
        cmocka_unit_test(test_offsets),
        cmocka_unit_test(test_sharded_set),
        cmocka_unit_test(test_bad_sets),
        cmocka_unit_test(test_single_file_set),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
