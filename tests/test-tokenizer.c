/*
 * test-tokenizer.c - the tokenizer against Hugging Face tokenizers' goldens,
 * plus checks that hold without them.
 *
 * Goldens (tests/golden/tokenizer-*.json) come from
 * scripts/reference/tokenizer_goldens.py; until they are generated the three
 * golden tests fail with a message naming the command. The other tests use
 * only independent facts: round trips, the Unicode standard's own example of
 * U+FFFD replacement, thread-count invariance, and loader errors for
 * malformed files.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "base/pool.h"      // defines: jev_pool_*
#include "text/tokenizer.h" // defines: jev_tokenizer_*
#include "text/utf8.h"      // defines: jev_utf8_sanitize

#define STANDIN ".cache/tokenizer-qwen3/tokenizer.json"
#define CORPUS "tests/data/tokenizer-corpus.json"
#define GOLDEN_CMD "python3 scripts/reference/tokenizer_goldens.py " STANDIN " tests/golden"

static struct jev_tokenizer *standin; /* loaded once by the group setup */

/* ---- helpers ---- */

static json_t *load_json(const char *path) {
    json_error_t jerr;
    json_t *j = json_load_file(path, JSON_ALLOW_NUL, &jerr);
    if (j == NULL)
        print_message("cannot read %s: %s (line %d)\n", path, jerr.text, jerr.line);
    return j;
}

/* The bytes of a corpus case: "text" as UTF-8, or "bytes" as given.
 * Returns a malloc'd buffer. */
static char *case_bytes(const json_t *c, size_t *len) {
    const json_t *t = json_object_get(c, "text");
    if (t != NULL) {
        *len = json_string_length(t);
        char *b = malloc(*len + 1);
        memcpy(b, json_string_value(t), *len + 1);
        return b;
    }
    const json_t *arr = json_object_get(c, "bytes");
    *len = json_array_size(arr);
    char *b = malloc(*len + 1);
    for (size_t i = 0; i < *len; i++)
        b[i] = (char)json_integer_value(json_array_get(arr, i));
    return b;
}

static bool ids_equal(const struct jev_tokens *got, const json_t *want) {
    if (got->n != json_array_size(want))
        return false;
    for (size_t i = 0; i < got->n; i++)
        if (got->ids[i] != (jev_token)json_integer_value(json_array_get(want, i)))
            return false;
    return true;
}

static void print_ids(const char *label, const struct jev_tokens *got, const json_t *want) {
    print_message("    %s jev :", label);
    for (size_t i = 0; i < got->n && i < 40; i++)
        print_message(" %d", (int)got->ids[i]);
    print_message("\n    %s want:", label);
    for (size_t i = 0; i < json_array_size(want) && i < 40; i++)
        print_message(" %d", (int)json_integer_value(json_array_get(want, i)));
    print_message("\n");
}

/* Compares every case of a golden file's case list with the tokenizer;
 * returns the number of mismatching cases. */
static int compare_cases(const struct jev_tokenizer *tok, const json_t *inputs, const json_t *golden,
                         const char *label) {
    int bad = 0;
    if (json_array_size(inputs) != json_array_size(golden)) {
        print_message("%s: %zu inputs but %zu golden cases (regenerate: %s)\n", label, json_array_size(inputs),
                      json_array_size(golden), GOLDEN_CMD);
        return 1;
    }
    for (size_t i = 0; i < json_array_size(inputs); i++) {
        const json_t *in = json_array_get(inputs, i), *g = json_array_get(golden, i);
        const char *name = json_string_value(json_object_get(in, "name"));
        if (strcmp(name, json_string_value(json_object_get(g, "name"))) != 0) {
            print_message("%s: case %zu is %s in the inputs but %s in the golden\n", label, i, name,
                          json_string_value(json_object_get(g, "name")));
            return bad + 1;
        }
        size_t len;
        char *text = case_bytes(in, &len);
        struct jev_error err = {0};
        struct jev_tokens ids = {0}, plain = {0};
        assert_int_equal(jev_tokenizer_encode(tok, text, len, 0, &ids, &err), JEV_OK);
        assert_int_equal(jev_tokenizer_encode(tok, text, len, JEV_TOK_NO_ADDED, &plain, &err), JEV_OK);
        bool ok = true;
        if (!ids_equal(&ids, json_object_get(g, "ids"))) {
            print_message("%s: %s: ids differ\n", label, name);
            print_ids("ids", &ids, json_object_get(g, "ids"));
            ok = false;
        }
        if (!ids_equal(&plain, json_object_get(g, "plain_ids"))) {
            print_message("%s: %s: plain_ids differ\n", label, name);
            print_ids("plain", &plain, json_object_get(g, "plain_ids"));
            ok = false;
        }
        /* decode the golden ids (not ours), so a decode check stands on its own */
        const json_t *gids = json_object_get(g, "ids");
        size_t n = json_array_size(gids);
        jev_token *v = malloc((n ? n : 1) * sizeof *v);
        for (size_t k = 0; k < n; k++)
            v[k] = (jev_token)json_integer_value(json_array_get(gids, k));
        static const char *keys[2] = {"decoded", "decoded_skip"};
        for (int s = 0; s < 2; s++) {
            char *out;
            size_t out_len;
            assert_int_equal(jev_tokenizer_decode(tok, v, n, s ? JEV_DECODE_SKIP_SPECIAL : 0, &out, &out_len, &err),
                             JEV_OK);
            const json_t *want = json_object_get(g, keys[s]);
            if (out_len != json_string_length(want) || memcmp(out, json_string_value(want), out_len) != 0) {
                print_message("%s: %s: %s differs: jev \"%s\" want \"%s\"\n", label, name, keys[s], out,
                              json_string_value(want));
                ok = false;
            }
            free(out);
        }
        free(v);
        bad += !ok;
        jev_tokens_free(&ids);
        jev_tokens_free(&plain);
        free(text);
    }
    return bad;
}

/* The Qwen3.5-regex variant: the same derivation as the reference script
 * (pre_tokenizer.pretokenizers[0].pattern = {"Regex": qwen35_regex}). */
static struct jev_tokenizer *load_qwen35_variant(const char *regex) {
    json_t *tj = load_json(STANDIN);
    assert_non_null(tj);
    json_t *first = json_array_get(json_object_get(json_object_get(tj, "pre_tokenizer"), "pretokenizers"), 0);
    assert_string_equal(json_string_value(json_object_get(first, "type")), "Split");
    json_object_set_new(first, "pattern", json_pack("{s:s}", "Regex", regex));
    char *dump = json_dumps(tj, JSON_COMPACT);
    json_decref(tj);
    struct jev_error err = {0};
    struct jev_tokenizer *tok = NULL;
    enum jev_status st = jev_tokenizer_load_buffer(dump, strlen(dump), "qwen35-variant", &tok, &err);
    if (st != JEV_OK)
        print_message("%s\n", err.msg);
    assert_int_equal(st, JEV_OK);
    free(dump);
    return tok;
}

static json_t *load_golden(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        print_message("golden file %s is missing: generate it with\n    %s\n", path, GOLDEN_CMD);
        return NULL;
    }
    fclose(f);
    return load_json(path);
}

/* ---- golden tests ---- */

static void test_golden_qwen3(void **state) {
    (void)state;
    json_t *corpus = load_json(CORPUS), *golden = load_golden("tests/golden/tokenizer-qwen3.json");
    assert_non_null(corpus);
    assert_non_null(golden);
    int bad = compare_cases(standin, json_object_get(corpus, "cases"), json_object_get(golden, "cases"), "qwen3");
    print_message("qwen3: %zu cases, %d differ (tokenizers %s)\n", json_array_size(json_object_get(corpus, "cases")),
                  bad, json_string_value(json_object_get(golden, "tokenizers_version")));
    assert_int_equal(bad, 0);
    json_decref(corpus);
    json_decref(golden);
}

static void test_golden_qwen35_regex(void **state) {
    (void)state;
    json_t *corpus = load_json(CORPUS), *golden = load_golden("tests/golden/tokenizer-qwen35-regex.json");
    assert_non_null(corpus);
    assert_non_null(golden);
    struct jev_tokenizer *tok = load_qwen35_variant(json_string_value(json_object_get(corpus, "qwen35_regex")));
    int bad = compare_cases(tok, json_object_get(corpus, "cases"), json_object_get(golden, "cases"), "qwen35");
    assert_int_equal(bad, 0);
    jev_tokenizer_free(tok);
    json_decref(corpus);
    json_decref(golden);
}

static void test_golden_features(void **state) {
    (void)state;
    json_t *inputs = load_json("tests/data/tokenizer-features.json");
    json_t *golden = load_golden("tests/golden/tokenizer-features.json");
    assert_non_null(inputs);
    assert_non_null(golden);
    const json_t *in_list = json_object_get(inputs, "tokenizers"), *g_list = json_object_get(golden, "tokenizers");
    assert_int_equal(json_array_size(in_list), json_array_size(g_list));
    int bad = 0;
    for (size_t i = 0; i < json_array_size(in_list); i++) {
        const char *file = json_string_value(json_object_get(json_array_get(in_list, i), "file"));
        struct jev_error err = {0};
        struct jev_tokenizer *tok = NULL;
        assert_int_equal(jev_tokenizer_load(file, &tok, &err), JEV_OK);
        bad += compare_cases(tok, json_object_get(json_array_get(in_list, i), "cases"),
                             json_object_get(json_array_get(g_list, i), "cases"), file);
        jev_tokenizer_free(tok);
    }
    assert_int_equal(bad, 0);
    json_decref(inputs);
    json_decref(golden);
}

/* ---- checks without goldens ---- */

static void test_ascii_round_trip(void **state) {
    (void)state;
    uint64_t seed = 12345;
    char text[400];
    for (int rep = 0; rep < 300; rep++) {
        size_t n = 1 + rep % 300;
        for (size_t i = 0; i < n; i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            unsigned r = (unsigned)(seed >> 33);
            /* printable ASCII with extra spaces, tabs and newlines */
            text[i] = r % 11 == 0 ? ' ' : r % 37 == 0 ? '\n' : r % 53 == 0 ? '\t' : (char)(32 + r % 95);
        }
        struct jev_tokens ids = {0};
        struct jev_error err = {0};
        assert_int_equal(jev_tokenizer_encode(standin, text, n, JEV_TOK_NO_ADDED, &ids, &err), JEV_OK);
        assert_true(ids.n >= 1 && ids.n <= n);
        char *out;
        size_t out_len;
        assert_int_equal(jev_tokenizer_decode(standin, ids.ids, ids.n, 0, &out, &out_len, &err), JEV_OK);
        assert_int_equal(out_len, n);
        assert_memory_equal(out, text, n);
        free(out);
        jev_tokens_free(&ids);
    }
}

static void test_special_vs_plain(void **state) {
    (void)state;
    const char *s = "<|im_start|>";
    jev_token id = jev_tokenizer_added_id(standin, s);
    assert_true(id >= 0);
    assert_true(jev_tokenizer_is_special(standin, id));
    assert_int_equal(jev_tokenizer_piece_to_id(standin, s, strlen(s)), id);
    struct jev_tokens a = {0}, b = {0};
    struct jev_error err = {0};
    assert_int_equal(jev_tokenizer_encode(standin, s, strlen(s), 0, &a, &err), JEV_OK);
    assert_int_equal(a.n, 1);
    assert_int_equal(a.ids[0], id);
    assert_int_equal(jev_tokenizer_encode(standin, s, strlen(s), JEV_TOK_NO_ADDED, &b, &err), JEV_OK);
    assert_true(b.n > 1);
    for (size_t i = 0; i < b.n; i++)
        assert_false(jev_tokenizer_is_special(standin, b.ids[i]));
    /* the plain ids still decode to the same text */
    char *out;
    size_t out_len;
    assert_int_equal(jev_tokenizer_decode(standin, b.ids, b.n, 0, &out, &out_len, &err), JEV_OK);
    assert_string_equal(out, s);
    free(out);
    /* skip_special drops it */
    assert_int_equal(jev_tokenizer_decode(standin, a.ids, a.n, JEV_DECODE_SKIP_SPECIAL, &out, &out_len, &err), JEV_OK);
    assert_int_equal(out_len, 0);
    free(out);
    jev_tokens_free(&a);
    jev_tokens_free(&b);
    assert_int_equal(jev_tokenizer_added_id(standin, "<|not_a_token|>"), -1);
}

static void test_unicode_replacement_rule(void **state) {
    (void)state;
    /* The Unicode Standard's example of U+FFFD for maximal subparts (core
     * spec chapter 3, "U+FFFD Substitution of Maximal Subparts"):
     * 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64 -> a FFFD FFFD FFFD b FFFD c FFFD FFFD d */
    const char in[] = "\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64";
    const char want[] = "a\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"
                        "b\xEF\xBF\xBD"
                        "c\xEF\xBF\xBD\xEF\xBF\xBD"
                        "d";
    char out[3 * sizeof in];
    size_t n = jev_utf8_sanitize(in, sizeof in - 1, out);
    assert_int_equal(n, sizeof want - 1);
    assert_memory_equal(out, want, n);
    assert_false(jev_utf8_valid(in, sizeof in - 1));
    assert_true(jev_utf8_valid(want, sizeof want - 1));
    /* encode applies it: the ill-formed text encodes like its replacement */
    struct jev_tokens a = {0}, b = {0};
    struct jev_error err = {0};
    assert_int_equal(jev_tokenizer_encode(standin, in, sizeof in - 1, 0, &a, &err), JEV_OK);
    assert_int_equal(jev_tokenizer_encode(standin, want, sizeof want - 1, 0, &b, &err), JEV_OK);
    assert_int_equal(a.n, b.n);
    assert_memory_equal(a.ids, b.ids, a.n * sizeof *a.ids);
    jev_tokens_free(&a);
    jev_tokens_free(&b);
}

static void test_decode_errors_and_lookups(void **state) {
    (void)state;
    struct jev_error err = {0};
    jev_token bad[2] = {5, jev_tokenizer_vocab_size(standin)};
    char *out;
    size_t len;
    assert_int_equal(jev_tokenizer_decode(standin, bad, 2, 0, &out, &len, &err), JEV_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "position 1"));
    assert_null(jev_tokenizer_piece(standin, -1, &len));
    assert_null(jev_tokenizer_piece(standin, jev_tokenizer_vocab_size(standin), &len));
    /* every piece maps back to its id */
    for (jev_token id = 0; id < jev_tokenizer_vocab_size(standin); id += 97) {
        const char *p = jev_tokenizer_piece(standin, id, &len);
        assert_non_null(p);
        assert_int_equal(jev_tokenizer_piece_to_id(standin, p, len), id);
    }
}

/* ---- threads ---- */

struct thread_job {
    const char *texts[6];      /* inputs */
    struct jev_tokens want[6]; /* single-thread results */
    int mismatches;            /* written atomically */
};

static void thread_task(void *arg, int64_t i, int thread) {
    (void)thread;
    struct thread_job *job = arg;
    int k = (int)(i % 6);
    struct jev_tokens got = {0};
    struct jev_error err = {0};
    if (jev_tokenizer_encode(standin, job->texts[k], strlen(job->texts[k]), (unsigned)(k % 2), &got, &err) != JEV_OK ||
        got.n != job->want[k].n || memcmp(got.ids, job->want[k].ids, got.n * sizeof *got.ids) != 0)
        __atomic_fetch_add(&job->mismatches, 1, __ATOMIC_RELAXED);
    jev_tokens_free(&got);
}

static void test_threads_share_one_tokenizer(void **state) {
    (void)state;
    struct thread_job job = {.texts = {"The quick brown fox <|im_end|> jumps.", "自然语言处理<|im_start|>",
                                       "  \n\n\t x",
                                       "e\xcc\x81"
                                       "cole q\xcc\x83",
                                       "1234567890 \xff\xfe", "<think>\n\n</think>\n\n"}};
    struct jev_error err = {0};
    for (int k = 0; k < 6; k++)
        assert_int_equal(
            jev_tokenizer_encode(standin, job.texts[k], strlen(job.texts[k]), (unsigned)(k % 2), &job.want[k], &err),
            JEV_OK);
    struct jev_pool *pool;
    assert_int_equal(jev_pool_init(&pool, 4, &err), JEV_OK);
    jev_pool_run(pool, getenv("JEV_TEST_QUICK") ? 120 : 1200, thread_task, &job);
    jev_pool_free(pool);
    assert_int_equal(job.mismatches, 0);
    for (int k = 0; k < 6; k++)
        jev_tokens_free(&job.want[k]);
}

/* ---- loader errors ---- */

/* A small valid tokenizer.json that the error cases below each break in one
 * place. */
static const char tiny[] =
    "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,"
    "\"added_tokens\":[{\"id\":5,\"content\":\"<s>\",\"special\":true,\"normalized\":false,"
    "\"lstrip\":false,\"rstrip\":false,\"single_word\":false}],"
    "\"normalizer\":{\"type\":\"NFC\"},"
    "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\s+\"}"
    ","
    "\"behavior\":\"Isolated\",\"invert\":false}]},"
    "\"post_processor\":null,\"decoder\":null,"
    "\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":null,\"fuse_unk\":false,\"byte_fallback\":false,"
    "\"vocab\":{\"a\":0,\"b\":1,\"ab\":2,\" \":3,\"abb\":4},\"merges\":[\"a b\",\"ab b\"]}}";

/* tiny with the first occurrence of `from` replaced by `to`. */
static char *mutate(const char *from, const char *to) {
    const char *at = strstr(tiny, from);
    assert_non_null(at);
    size_t n = strlen(tiny) - strlen(from) + strlen(to);
    char *s = malloc(n + 1);
    size_t pre = (size_t)(at - tiny);
    memcpy(s, tiny, pre);
    strcpy(s + pre, to);
    strcat(s, at + strlen(from));
    return s;
}

static void expect_load_error(const char *from, const char *to, enum jev_status want, const char *msg_part) {
    char *s = mutate(from, to);
    struct jev_error err = {0};
    struct jev_tokenizer *tok = (struct jev_tokenizer *)1;
    enum jev_status st = jev_tokenizer_load_buffer(s, strlen(s), "t.json", &tok, &err);
    if (st != want || strstr(err.msg, msg_part) == NULL)
        print_message("replacing %s by %s: status %d, message \"%s\" (want %d and \"%s\")\n", from, to, st, err.msg,
                      want, msg_part);
    assert_int_equal(st, want);
    assert_null(tok);
    assert_non_null(strstr(err.msg, msg_part));
    free(s);
}

static void test_loader_errors(void **state) {
    (void)state;
    /* the base file is valid and behaves as written */
    struct jev_error err = {0};
    struct jev_tokenizer *tok;
    assert_int_equal(jev_tokenizer_load_buffer(tiny, strlen(tiny), "t.json", &tok, &err), JEV_OK);
    struct jev_tokens ids = {0};
    assert_int_equal(jev_tokenizer_encode(tok, "abb ab<s>a", 10, 0, &ids, &err), JEV_OK);
    jev_token want[] = {4, 3, 2, 5, 0};
    assert_int_equal(ids.n, 5);
    assert_memory_equal(ids.ids, want, sizeof want);
    jev_tokens_free(&ids);
    jev_tokenizer_free(tok);

    expect_load_error("{\"version\"", "{\"version\" x", JEV_ERR_FORMAT, "invalid JSON");
    expect_load_error("\"model\":{", "\"modelx\":{", JEV_ERR_FORMAT, "model: missing");
    expect_load_error("\"type\":\"BPE\"", "\"type\":\"WordPiece\"", JEV_ERR_UNSUPPORTED, "model.type");
    expect_load_error("{\"type\":\"NFC\"}", "{\"type\":\"Lowercase\"}", JEV_ERR_UNSUPPORTED, "normalizer.type");
    expect_load_error("\"invert\":false}]", "\"invert\":false},{\"type\":\"Metaspace\"}]", JEV_ERR_UNSUPPORTED,
                      "pre_tokenizer.pretokenizers[1].type");
    expect_load_error("\\\\s+", "(unclosed", JEV_ERR_FORMAT, "pre_tokenizer.pretokenizers[0].pattern.Regex");
    expect_load_error("\"Isolated\"", "\"Bogus\"", JEV_ERR_FORMAT, "pretokenizers[0].behavior");
    expect_load_error("\"a b\"", "\"a z\"", JEV_ERR_FORMAT, "model.merges[0]");
    expect_load_error("\"ab b\"", "\"abb\"", JEV_ERR_FORMAT, "model.merges[1]");
    expect_load_error("\"ab b\"", "[\"ab\",\"b\"]", JEV_ERR_FORMAT, "model.merges[1]");
    expect_load_error("\"id\":5", "\"id\":7", JEV_ERR_UNSUPPORTED, "added_tokens[0]");
    expect_load_error("\"b\":1", "\"b\":-1", JEV_ERR_FORMAT, "model.vocab");
    expect_load_error("\"b\":1", "\"b\":0", JEV_ERR_FORMAT, "id already used");
    expect_load_error("\"dropout\":null", "\"dropout\":0.1", JEV_ERR_UNSUPPORTED, "model.dropout");
    expect_load_error("\"truncation\":null", "\"truncation\":{}", JEV_ERR_UNSUPPORTED, "truncation");
    expect_load_error("\"decoder\":null", "\"decoder\":{\"type\":\"WordPiece\"}", JEV_ERR_UNSUPPORTED, "decoder.type");
    expect_load_error("\"fuse_unk\":false", "\"fuse_unk\":false,\"continuing_subword_prefix\":\"##\"",
                      JEV_ERR_UNSUPPORTED, "continuing_subword_prefix");
    expect_load_error("\"pretokenizers\":[", "\"pretokenizers\":[{\"type\":\"ByteLevel\"},", JEV_ERR_UNSUPPORTED,
                      "ByteLevel must be the last");
    expect_load_error("\"post_processor\":null", "\"post_processor\":{\"type\":\"Magic\"}", JEV_ERR_UNSUPPORTED,
                      "post_processor.type");
    expect_load_error("\"special\":true", "\"special\":\"yes\"", JEV_ERR_FORMAT, "added_tokens[0].special");
    expect_load_error("{\"version\"", "[{\"version\"", JEV_ERR_FORMAT, "invalid JSON");

    /* a missing file is an i/o error */
    assert_int_equal(jev_tokenizer_load("tests/data/no-such-tokenizer.json", &tok, &err), JEV_ERR_IO);
}

static void test_tiny_tokenizers_load(void **state) {
    (void)state;
    json_t *inputs = load_json("tests/data/tokenizer-features.json");
    assert_non_null(inputs);
    const json_t *list = json_object_get(inputs, "tokenizers");
    assert_true(json_array_size(list) >= 5);
    for (size_t i = 0; i < json_array_size(list); i++) {
        const char *file = json_string_value(json_object_get(json_array_get(list, i), "file"));
        struct jev_error err = {0};
        struct jev_tokenizer *tok = NULL;
        enum jev_status st = jev_tokenizer_load(file, &tok, &err);
        if (st != JEV_OK)
            print_message("%s\n", err.msg);
        assert_int_equal(st, JEV_OK);
        jev_tokenizer_free(tok);
    }
    json_decref(inputs);
}

/* ---- the CLI ---- */

static void test_cli_json(void **state) {
    (void)state;
    const char *bin = getenv("JEV_JEV_BIN");
    if (bin == NULL || !*bin)
        bin = "build/jev";
    const char *text = "Hi <|im_start|> \u00e9t\u00e9"; /* shell-safe; JSON escapes stay literal text */
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s tokenize --tokenizer %s --json '%s'", bin, STANDIN, text);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    assert_int_equal(pclose(f), 0);
    json_error_t jerr;
    json_t *j = json_loads(buf, 0, &jerr);
    assert_non_null(j);
    struct jev_tokens ids = {0};
    struct jev_error err = {0};
    assert_int_equal(jev_tokenizer_encode(standin, text, strlen(text), 0, &ids, &err), JEV_OK);
    assert_true(ids_equal(&ids, json_object_get(j, "ids")));
    assert_string_equal(json_string_value(json_object_get(j, "decoded")), text);
    jev_tokens_free(&ids);
    json_decref(j);
    /* a bad tokenizer path fails with status 1 and a message */
    snprintf(cmd, sizeof cmd, "%s tokenize --tokenizer tests/data/none.json x 2>&1", bin);
    f = popen(cmd, "r");
    n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    assert_int_equal(WEXITSTATUS(pclose(f)), 1);
    assert_non_null(strstr(buf, "cannot open"));
}

/* ---- main ---- */

static int setup(void **state) {
    (void)state;
    struct jev_error err = {0};
    if (jev_tokenizer_load(STANDIN, &standin, &err) != JEV_OK) {
        print_message("%s (run `bash scripts/setup.sh`)\n", err.msg);
        return -1;
    }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    jev_tokenizer_free(standin);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ascii_round_trip),
        cmocka_unit_test(test_special_vs_plain),
        cmocka_unit_test(test_unicode_replacement_rule),
        cmocka_unit_test(test_decode_errors_and_lookups),
        cmocka_unit_test(test_threads_share_one_tokenizer),
        cmocka_unit_test(test_loader_errors),
        cmocka_unit_test(test_tiny_tokenizers_load),
        cmocka_unit_test(test_cli_json),
        cmocka_unit_test(test_golden_qwen3),
        cmocka_unit_test(test_golden_qwen35_regex),
        cmocka_unit_test(test_golden_features),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
