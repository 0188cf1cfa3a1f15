/*
 * test-decide-request.c - decision requests: every refusal with its exact
 * status, type, field and message, and valid requests of each question type
 * in the System One shape, the OpenAI shape and the benchmark workload.
 * The messages are jev's own contract (docs/decide.md lists them); the
 * base64 vectors are RFC 4648's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/timing.h"    // defines: jev_now_ms
#include "decide/request.h" // defines: struct jev_request
#include "wire/request.h"   // defines: jev_request_parse_*, struct jev_request_error

/* ---- helpers ---- */

/* A growing body text for the large cases. */
struct buf {
    char *s;
    size_t n, cap;
};

static void bput(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bput(struct buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int need = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (b->n + (size_t)need + 1 > b->cap) {
        b->cap = (b->n + (size_t)need + 1) * 2;
        b->s = realloc(b->s, b->cap);
        assert_non_null(b->s);
    }
    va_start(ap, fmt);
    vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
    va_end(ap);
    b->n += (size_t)need;
}

/* A plain base64 encoder for building image payloads (the test's own). */
static char *b64(const unsigned char *d, size_t n) {
    static const char al[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *o = malloc(4 * ((n + 2) / 3) + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)d[i] << 16 | (i + 1 < n ? (uint32_t)d[i + 1] << 8 : 0) | (i + 2 < n ? d[i + 2] : 0);
        o[k++] = al[v >> 18 & 63];
        o[k++] = al[v >> 12 & 63];
        o[k++] = i + 1 < n ? al[v >> 6 & 63] : '=';
        o[k++] = i + 2 < n ? al[v & 63] : '=';
    }
    o[k] = '\0';
    return o;
}

static const unsigned char png_bytes[16] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n',
                                            0,    0,   0,   13,  'I',  'H',  'D',  'R'};
static const unsigned char jpeg_bytes[8] = {0xff, 0xd8, 0xff, 0xe0, 0, 16, 'J', 'F'};

static enum jev_status parse_s1(const char *body, const struct jev_request_opts *o, struct jev_request *r,
                                struct jev_request_error *e) {
    return jev_request_parse_systemone(body, strlen(body), o, r, e);
}

static void check_refusal(enum jev_status s, const struct jev_request *r, const struct jev_request_error *e, int http,
                          const char *param, const char *message) {
    if (e->http_status != http || strcmp(e->param, param) != 0 || strcmp(e->message, message) != 0)
        print_error("got %d [%s] \"%s\"\n", e->http_status, e->param, e->message);
    assert_int_not_equal(s, JEV_OK);
    assert_int_equal(e->http_status, http);
    assert_string_equal(e->param, param);
    assert_string_equal(e->message, message);
    assert_null(r->root); /* nothing left to free */
    assert_null(r->block);
    static const struct {
        int http;
        const char *type;
        enum jev_status status;
    } map[] = {{400, "invalid_request_error", JEV_ERR_FORMAT},
               {413, "request_too_large_error", JEV_ERR_NOMEM},
               {422, "unprocessable_entity_error", JEV_ERR_INVALID_ARG},
               {501, "not_supported_error", JEV_ERR_UNSUPPORTED}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (map[i].http == http) {
            assert_string_equal(e->type, map[i].type);
            assert_int_equal(s, map[i].status);
        }
}

static void s1_refused(const char *body, int http, const char *param, const char *message) {
    struct jev_request r;
    struct jev_request_error e;
    enum jev_status s = parse_s1(body, NULL, &r, &e);
    check_refusal(s, &r, &e, http, param, message);
}

static void oa_refused(const char *body, int http, const char *param, const char *message) {
    struct jev_request r;
    struct jev_request_error e;
    enum jev_status s = jev_request_parse_openai(body, strlen(body), NULL, &r, &e);
    check_refusal(s, &r, &e, http, param, message);
}

/* A System One body with one question `q` of the given JSON. */
static void s1_q_refused(const char *question, int http, const char *param, const char *message) {
    char body[4096];
    snprintf(body, sizeof body, "{\"state\":\"s\",\"questions\":{\"q\":%s}}", question);
    s1_refused(body, http, param, message);
}

/* ---- System One: envelope refusals ---- */

static void test_s1_envelope_refusals(void **state) {
    (void)state;
    s1_refused("", 400, "", "the body is empty (expected a JSON object)");
    s1_refused(" \n\t", 400, "", "the body is empty (expected a JSON object)");
    s1_refused("[1, 2]", 400, "", "the body must be a JSON object");
    s1_refused("{\"questions\":{\"q\":{\"type\":\"noul\",\"instructions\":\"x\"}}}", 422, "state",
               "state: missing (a string, object or array)");
    s1_refused("{\"state\":42,\"questions\":{}}", 422, "state",
               "state: must be a string, object or array, not a number");
    s1_refused("{\"state\":null,\"questions\":{}}", 422, "state", "state: must be a string, object or array, not null");
    s1_refused("{\"state\":true,\"questions\":{}}", 422, "state",
               "state: must be a string, object or array, not a boolean");
    s1_refused("{\"state\":\"s\",\"document\":\"d\",\"questions\":{}}", 422, "document",
               "document: give state or its alias document, not both");
    s1_refused("{\"state\":\"s\"}", 422, "questions", "questions: missing (an object mapping ids to questions)");
    s1_refused("{\"state\":\"s\",\"questions\":[]}", 422, "questions",
               "questions: must be an object mapping ids to questions");
    s1_refused("{\"state\":\"s\",\"questions\":{}}", 422, "questions", "questions: is empty (at least one question)");
    s1_refused("{\"model\":7,\"state\":\"s\",\"questions\":{}}", 422, "model", "model: must be a string");
    s1_refused("{\"state\":\"s\",\"instructions\":[1],\"questions\":{}}", 422, "instructions",
               "instructions: must be a string (text placed ahead of all questions)");
    s1_refused("{\"state\":\"s\",\"questions\":{\"\":{\"type\":\"noul\",\"instructions\":\"x\"}}}", 422, "questions.",
               "questions.: a question id must not be empty");
}

static void test_s1_bad_json(void **state) {
    (void)state;
    struct jev_request r;
    struct jev_request_error e;
    enum jev_status s = parse_s1("{\"state\": \"s\",", NULL, &r, &e);
    assert_int_equal(s, JEV_ERR_FORMAT);
    assert_int_equal(e.http_status, 400);
    assert_string_equal(e.type, "invalid_request_error");
    assert_non_null(strstr(e.message, "the body is not valid JSON: "));
    /* duplicate keys are malformed JSON here, not a silent last-one-wins */
    s = parse_s1("{\"state\":\"a\",\"state\":\"b\",\"questions\":{}}", NULL, &r, &e);
    assert_int_equal(e.http_status, 400);
    assert_non_null(strstr(e.message, "duplicate"));
}

static void test_s1_body_limit(void **state) {
    (void)state;
    struct jev_request r;
    struct jev_request_error e;
    struct jev_request_opts o = {.max_body_bytes = 16};
    enum jev_status s = parse_s1("{\"state\":\"0123456789\",\"questions\":{}}", &o, &r, &e);
    check_refusal(s, &r, &e, 413, "", "the body is 37 bytes (the limit is 16 bytes)");
}

static void test_s1_too_many_questions(void **state) {
    (void)state;
    struct buf b = {0};
    bput(&b, "{\"state\":\"s\",\"questions\":{");
    for (int i = 0; i <= JEV_DECIDE_MAX_QUESTIONS; i++)
        bput(&b, "%s\"q%d\":{\"type\":\"noul\",\"instructions\":\"x\"}", i ? "," : "", i);
    bput(&b, "}}");
    s1_refused(b.s, 413, "questions", "questions: 4097 questions (the limit is 4096 per request)");
    /* exactly the limit is fine */
    char *cut = strstr(b.s, ",\"q4096\"");
    assert_non_null(cut);
    strcpy(cut, "}}");
    struct jev_request r;
    struct jev_request_error e;
    assert_int_equal(parse_s1(b.s, NULL, &r, &e), JEV_OK);
    assert_int_equal(r.n_questions, 4096);
    assert_string_equal(r.questions[4095].id, "q4095");
    jev_request_free(&r);
    free(b.s);
}

/* ---- System One: question refusals ---- */

static void test_s1_question_refusals(void **state) {
    (void)state;
    s1_q_refused("1", 422, "questions.q",
                 "questions.q: a question must be an object with type, instructions and criteria");
    s1_q_refused("{\"instructions\":\"x\"}", 422, "questions.q.type",
                 "questions.q.type: missing (one of noul, choice, score)");
    s1_q_refused("{\"type\":5,\"instructions\":\"x\"}", 422, "questions.q.type",
                 "questions.q.type: must be a string (one of noul, choice, score)");
    s1_q_refused("{\"type\":\"maybe\",\"instructions\":\"x\"}", 422, "questions.q.type",
                 "questions.q.type: unknown question type \"maybe\" (one of noul, choice, score)");
    s1_q_refused("{\"type\":\"box\",\"instructions\":\"the mug in photo\"}", 422, "questions.q.type",
                 "questions.q.type: unsupported question type \"box\" (supported: noul, choice, score)");
    s1_q_refused("{\"type\":\"noul\",\"instructions\":\"x\",\"label\":\"y\"}", 422, "questions.q.label",
                 "questions.q.label: unknown question field (allowed: type, instructions, criteria)");
}

static void test_s1_instructions_refusals(void **state) {
    (void)state;
    const char *want = "a non-empty string, object or array";
    char msg[256];
    snprintf(msg, sizeof msg, "questions.q.instructions: missing: every question needs instructions (%s)", want);
    s1_q_refused("{\"type\":\"noul\"}", 422, "questions.q.instructions", msg);
    snprintf(msg, sizeof msg, "questions.q.instructions: is null (expected %s)", want);
    s1_q_refused("{\"type\":\"noul\",\"instructions\":null}", 422, "questions.q.instructions", msg);
    snprintf(msg, sizeof msg, "questions.q.instructions: is empty (expected %s)", want);
    s1_q_refused("{\"type\":\"noul\",\"instructions\":\"\"}", 422, "questions.q.instructions", msg);
    s1_q_refused("{\"type\":\"noul\",\"instructions\":\" \\n \"}", 422, "questions.q.instructions", msg);
    s1_q_refused("{\"type\":\"noul\",\"instructions\":{}}", 422, "questions.q.instructions", msg);
    s1_q_refused("{\"type\":\"noul\",\"instructions\":[]}", 422, "questions.q.instructions", msg);
    snprintf(msg, sizeof msg, "questions.q.instructions: must be %s, not a number", want);
    s1_q_refused("{\"type\":\"noul\",\"instructions\":3}", 422, "questions.q.instructions", msg);
    snprintf(msg, sizeof msg, "questions.q.instructions: must be %s, not a boolean", want);
    s1_q_refused("{\"type\":\"noul\",\"instructions\":false}", 422, "questions.q.instructions", msg);
}

static void test_s1_choice_refusals(void **state) {
    (void)state;
    const char *want = "an object mapping 1 to 255 option names to descriptions";
    char msg[256];
    snprintf(msg, sizeof msg, "questions.q.criteria: missing: a choice question needs criteria, %s", want);
    s1_q_refused("{\"type\":\"choice\",\"instructions\":\"x\"}", 422, "questions.q.criteria", msg);
    s1_q_refused("{\"type\":\"choice\",\"instructions\":\"x\",\"criteria\":null}", 422, "questions.q.criteria", msg);
    snprintf(msg, sizeof msg, "questions.q.criteria: must be %s", want);
    s1_q_refused("{\"type\":\"choice\",\"instructions\":\"x\",\"criteria\":[\"a\",\"b\"]}", 422, "questions.q.criteria",
                 msg);
    s1_q_refused("{\"type\":\"choice\",\"instructions\":\"x\",\"criteria\":{}}", 422, "questions.q.criteria",
                 "questions.q.criteria: has no options (a choice needs 1 to 255)");
    s1_q_refused("{\"type\":\"choice\",\"instructions\":\"x\",\"criteria\":{\"\":null}}", 422, "questions.q.criteria",
                 "questions.q.criteria: an option name must not be empty");

    /* 256 options refused, 255 taken */
    struct buf b = {0};
    bput(&b, "{\"state\":\"s\",\"questions\":{\"q\":{\"type\":\"choice\",\"instructions\":\"x\",\"criteria\":{");
    for (int i = 0; i < 256; i++)
        bput(&b, "%s\"o%d\":null", i ? "," : "", i);
    bput(&b, "}}}}");
    s1_refused(b.s, 422, "questions.q.criteria", "questions.q.criteria: has 256 options (the maximum is 255)");
    char *cut = strstr(b.s, ",\"o255\":null");
    memmove(cut, cut + strlen(",\"o255\":null"), strlen(cut + strlen(",\"o255\":null")) + 1);
    struct jev_request r;
    struct jev_request_error e;
    assert_int_equal(parse_s1(b.s, NULL, &r, &e), JEV_OK);
    assert_int_equal(r.questions[0].n_options, 255);
    assert_string_equal(r.questions[0].options[254].key, "o254");
    jev_request_free(&r);
    free(b.s);
}

static void test_s1_score_refusals(void **state) {
    (void)state;
    const char *want = "an array of 2 to 10 level descriptions, lowest first";
    char msg[256];
    snprintf(msg, sizeof msg, "questions.q.criteria: missing: a score question needs criteria, %s", want);
    s1_q_refused("{\"type\":\"score\",\"instructions\":\"x\"}", 422, "questions.q.criteria", msg);
    snprintf(msg, sizeof msg, "questions.q.criteria: must be %s", want);
    s1_q_refused("{\"type\":\"score\",\"instructions\":\"x\",\"criteria\":{\"a\":1}}", 422, "questions.q.criteria",
                 msg);
    s1_q_refused("{\"type\":\"score\",\"instructions\":\"x\",\"criteria\":[\"only\"]}", 422, "questions.q.criteria",
                 "questions.q.criteria: has 1 level (a score needs 2 to 10)");
    s1_q_refused("{\"type\":\"score\",\"instructions\":\"x\",\"criteria\":[\"0\",\"1\",\"2\",\"3\",\"4\",\"5\",\"6\","
                 "\"7\",\"8\",\"9\",\"10\"]}",
                 422, "questions.q.criteria", "questions.q.criteria: has 11 levels (a score needs 2 to 10)");
    s1_q_refused("{\"type\":\"score\",\"instructions\":\"x\",\"criteria\":[\"\",\"high\"]}", 422,
                 "questions.q.criteria[0]", "questions.q.criteria[0]: a level must not be empty");
}

static void test_s1_noul_refusals(void **state) {
    (void)state;
    s1_q_refused("{\"type\":\"noul\",\"instructions\":\"x\",\"criteria\":\"yes if so\"}", 422, "questions.q.criteria",
                 "questions.q.criteria: must be null or an object with optional keys \"true\" and \"false\"");
    s1_q_refused("{\"type\":\"noul\",\"instructions\":\"x\",\"criteria\":{\"yes\":\"y\"}}", 422,
                 "questions.q.criteria.yes",
                 "questions.q.criteria.yes: unknown noul criteria key (allowed: \"true\", \"false\")");
}

/* Nesting: the field check at 33 levels, the raw pre-scan at 40 and 5,000. */
static void test_s1_depth(void **state) {
    (void)state;
    for (int depth = 32; depth <= 33; depth++) {
        struct buf b = {0};
        bput(&b, "{\"state\":");
        for (int i = 0; i < depth; i++)
            bput(&b, "[");
        for (int i = 0; i < depth; i++)
            bput(&b, "]");
        bput(&b, ",\"questions\":{\"q\":{\"type\":\"noul\",\"instructions\":\"x\"}}}");
        if (depth == 32) {
            struct jev_request r;
            struct jev_request_error e;
            assert_int_equal(parse_s1(b.s, NULL, &r, &e), JEV_OK);
            jev_request_free(&r);
        } else {
            s1_refused(b.s, 422, "state", "state: nested deeper than the limit of 32 levels");
        }
        free(b.s);
    }
    int depths[2] = {40, 5000};
    for (int k = 0; k < 2; k++) {
        struct buf b = {0};
        bput(&b, "{\"state\":");
        for (int i = 0; i < depths[k]; i++)
            bput(&b, "{\"a\":");
        bput(&b, "1");
        for (int i = 0; i < depths[k]; i++)
            bput(&b, "}");
        bput(&b, ",\"questions\":{\"q\":{\"type\":\"noul\",\"instructions\":\"x\"}}}");
        s1_refused(b.s, 422, "", "the body nests deeper than 38 levels (values may nest at most 32)");
        free(b.s);
    }
    /* brackets inside strings do not count */
    struct buf b = {0};
    bput(&b, "{\"state\":\"");
    for (int i = 0; i < 100; i++)
        bput(&b, "[{\\\"");
    bput(&b, "\",\"questions\":{\"q\":{\"type\":\"noul\",\"instructions\":\"x\"}}}");
    struct jev_request r;
    struct jev_request_error e;
    assert_int_equal(parse_s1(b.s, NULL, &r, &e), JEV_OK);
    jev_request_free(&r);
    free(b.s);
    /* a deep instructions object names its question */
    b = (struct buf){0};
    bput(&b, "{\"state\":\"s\",\"questions\":{\"deep\":{\"type\":\"noul\",\"instructions\":");
    for (int i = 0; i < 33; i++)
        bput(&b, "[");
    for (int i = 0; i < 33; i++)
        bput(&b, "]");
    bput(&b, "}}}");
    s1_refused(b.s, 422, "questions.deep.instructions",
               "questions.deep.instructions: nested deeper than the limit of 32 levels");
    free(b.s);
}

/* ---- System One: images ---- */

static char *s1_with_images(const char *images_json) {
    struct buf b = {0};
    bput(&b, "{\"state\":\"look\",\"images\":%s,\"questions\":{\"q\":{\"type\":\"noul\",\"instructions\":\"x\"}}}",
         images_json);
    return b.s;
}

static void test_s1_images(void **state) {
    (void)state;
    char *png = b64(png_bytes, sizeof png_bytes), *jpg = b64(jpeg_bytes, sizeof jpeg_bytes);
    char list[512], *body;
    struct jev_request r;
    struct jev_request_error e;

    /* a PNG data URL and a raw base64 JPEG */
    snprintf(list, sizeof list, "[\"data:image/png;base64,%s\"]", png);
    body = s1_with_images(list);
    assert_int_equal(parse_s1(body, NULL, &r, &e), JEV_OK);
    assert_true(r.has_image);
    assert_int_equal(r.image.format, JEV_IMAGE_PNG);
    assert_int_equal(r.image.n_bytes, sizeof png_bytes);
    assert_memory_equal(r.image.bytes, png_bytes, sizeof png_bytes);
    assert_null(r.image.asset_key);
    jev_request_free(&r);
    free(body);
    snprintf(list, sizeof list, "[\"%s\"]", jpg);
    body = s1_with_images(list);
    assert_int_equal(parse_s1(body, NULL, &r, &e), JEV_OK);
    assert_int_equal(r.image.format, JEV_IMAGE_JPEG);
    jev_request_free(&r);
    free(body);
    /* null and [] mean no image; `files` is an alias */
    body = s1_with_images("[]");
    assert_int_equal(parse_s1(body, NULL, &r, &e), JEV_OK);
    assert_false(r.has_image);
    jev_request_free(&r);
    free(body);

    struct {
        const char *fmt;
        int http;
        const char *param;
        const char *msg;
    } bad[] = {
        {"[\"data:image/png;base64,@@@@\"]", 422, "images[0]", "images[0]: the image data is not valid base64"},
        {"[\"https://example.com/dog.jpg\"]", 422, "images[0]",
         "images[0]: only data URLs (or raw base64) are accepted; URLs are not fetched"},
        {"[\"data:text/plain;base64,%s\"]", 422, "images[0]",
         "images[0]: the data URL type \"text/plain\" is not image/png or image/jpeg"},
        {"[\"data:image/png,%s\"]", 422, "images[0]",
         "images[0]: a data URL must be base64 (data:image/png;base64,...)"},
        {"[\"data:image/png;base64\"]", 422, "images[0]", "images[0]: a data URL needs a comma before its data"},
        {"[\"data:image/jpeg;base64,%s\"]", 422, "images[0]",
         "images[0]: the image is declared jpeg but its bytes are png"},
        {"[\"aGVsbG8gd29ybGQ=\"]", 422, "images[0]",
         "images[0]: the image is neither PNG nor JPEG (only those two are read)"},
        {"[\"data:image/png;base64,\"]", 422, "images[0]", "images[0]: the image data is empty"},
        {"[\"%s\",\"%s\"]", 422, "images[1]", "images[1]: a second image (the maximum is 1 image per request)"},
        {"[7]", 422, "images[0]", "images[0]: must be a data URL or a base64 string"},
        {"\"%s\"", 422, "images", "images: must be an array of data URLs or base64 strings"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(list, sizeof list, bad[i].fmt, png, png);
        body = s1_with_images(list);
        s1_refused(body, bad[i].http, bad[i].param, bad[i].msg);
        free(body);
    }
    /* `files` counts with `images` */
    struct buf b = {0};
    bput(&b,
         "{\"state\":\"s\",\"images\":[\"%s\"],\"files\":[\"%s\"],\"questions\":{\"q\":{\"type\":\"noul\","
         "\"instructions\":\"x\"}}}",
         png, jpg);
    s1_refused(b.s, 422, "files[0]", "files[0]: a second image (the maximum is 1 image per request)");
    free(b.s);
    /* videos refused unless empty */
    s1_refused("{\"state\":\"s\",\"videos\":[\"v\"],\"questions\":{\"q\":{\"type\":\"noul\",\"instructions\":\"x\"}}}",
               422, "videos", "videos: videos are not supported (absent, null or [] only)");
    /* a model without vision: 501 */
    snprintf(list, sizeof list, "[\"%s\"]", png);
    body = s1_with_images(list);
    struct jev_request_opts o = {.no_vision = true};
    enum jev_status s = parse_s1(body, &o, &r, &e);
    check_refusal(s, &r, &e, 501, "images", "images: the loaded model has no vision tower and cannot read images");
    free(body);
    /* a path from the CLI: one image at most, and never an empty path */
    body = s1_with_images("null");
    assert_int_equal(parse_s1(body, NULL, &r, &e), JEV_OK);
    assert_int_equal(jev_request_set_image_path(&r, "", &e), JEV_ERR_INVALID_ARG);
    assert_string_equal(e.message, "image: the image path is empty");
    assert_int_equal(jev_request_set_image_path(&r, "assets/dog.jpg", &e), JEV_OK);
    assert_true(r.has_image);
    assert_string_equal(r.image.path, "assets/dog.jpg");
    assert_int_equal(jev_request_set_image_path(&r, "other.png", &e), JEV_ERR_INVALID_ARG);
    assert_string_equal(e.message, "image: a second image (the maximum is 1 image per request)");
    jev_request_free(&r);
    free(body);
    free(png);
    free(jpg);
}

static void test_s1_assets(void **state) {
    (void)state;
    char *png = b64(png_bytes, sizeof png_bytes);
    struct buf b = {0};
    struct jev_request r;
    struct jev_request_error e;
    /* referenced from the state: accepted */
    bput(&b,
         "{\"state\":{\"photo\":\"img-7f3a\"},\"assets\":{\"img-7f3a\":{\"type\":\"image\",\"format\":\"png\","
         "\"data_base64\":\"%s\"}},\"questions\":{\"q\":{\"type\":\"noul\",\"instructions\":\"Is it a dog?\"}}}",
         png);
    assert_int_equal(parse_s1(b.s, NULL, &r, &e), JEV_OK);
    assert_true(r.has_image);
    assert_string_equal(r.image.asset_key, "img-7f3a");
    assert_int_equal(r.image.format, JEV_IMAGE_PNG);
    jev_request_free(&r);
    free(b.s);
    /* referenced from a choice option description: accepted */
    b = (struct buf){0};
    bput(&b,
         "{\"state\":\"s\",\"assets\":{\"pic\":{\"type\":\"image\",\"format\":\"png\",\"data_base64\":\"%s\"}},"
         "\"questions\":{\"q\":{\"type\":\"choice\",\"instructions\":\"Which?\",\"criteria\":{\"a\":\"as in "
         "pic\",\"b\":null}}}}",
         png);
    assert_int_equal(parse_s1(b.s, NULL, &r, &e), JEV_OK);
    jev_request_free(&r);
    free(b.s);
    /* never referenced: 400 */
    b = (struct buf){0};
    bput(&b,
         "{\"state\":\"s\",\"assets\":{\"img-1\":{\"type\":\"image\",\"format\":\"png\",\"data_base64\":\"%s\"}},"
         "\"questions\":{\"q\":{\"type\":\"noul\",\"instructions\":\"x\"}}}",
         png);
    s1_refused(b.s, 400, "assets.img-1",
               "assets.img-1: the asset is never referenced (write its key in state, instructions or criteria where "
               "the image belongs)");
    free(b.s);
    /* bad format, bad type, data URL prefix in data_base64, multipart part */
    s1_refused("{\"state\":\"a\",\"assets\":{\"a\":{\"type\":\"image\",\"format\":\"gif\",\"data_base64\":\"R0lG\"}},"
               "\"questions\":{\"q\":{\"type\":\"noul\",\"instructions\":\"x\"}}}",
               422, "assets.a", "assets.a: format must be \"png\" or \"jpg\"");
    s1_refused("{\"state\":\"a\",\"assets\":{\"a\":{\"type\":\"video\"}},\"questions\":{\"q\":{\"type\":\"noul\","
               "\"instructions\":\"x\"}}}",
               422, "assets.a", "assets.a: type must be \"image\" (the only asset type)");
    s1_refused("{\"state\":\"a\",\"assets\":{\"a\":{\"type\":\"image\",\"format\":\"png\",\"data_base64\":\"data:image/"
               "png;base64,AAAA\"}},\"questions\":{\"q\":{\"type\":\"noul\",\"instructions\":\"x\"}}}",
               422, "assets.a", "assets.a: the image data is not valid base64");
    s1_refused("{\"state\":\"a\",\"assets\":{\"a\":{\"type\":\"image\",\"format\":\"png\",\"part\":\"file1\"}},"
               "\"questions\":{\"q\":{\"type\":\"noul\",\"instructions\":\"x\"}}}",
               501, "assets.a", "assets.a: multipart asset parts are not supported; send data_base64");
    s1_refused("{\"state\":\"a\",\"assets\":[],\"questions\":{\"q\":{\"type\":\"noul\",\"instructions\":\"x\"}}}", 422,
               "assets", "assets: must be an object mapping asset keys to image assets");
    free(png);
}

static void test_s1_image_too_large(void **state) {
    (void)state;
    size_t n = JEV_DECIDE_MAX_IMAGE_BYTES + 3;
    unsigned char *big = calloc(1, n);
    memcpy(big, png_bytes, sizeof png_bytes);
    char *enc = b64(big, n);
    free(big);
    struct buf b = {0};
    bput(&b,
         "{\"state\":\"s\",\"images\":[\"data:image/png;base64,%s\"],\"questions\":{\"q\":{\"type\":\"noul\","
         "\"instructions\":\"x\"}}}",
         enc);
    free(enc);
    s1_refused(b.s, 413, "images[0]", "images[0]: the image is 16777219 bytes (the limit is 16777216 bytes)");
    free(b.s);
}

/* ---- System One: valid requests ---- */

static const char *spec_example =
    "{\"model\":\"jev-latest\",\n"
    " \"state\":{\"message\":\"I was charged twice for order #4411.\",\"channel\":\"support\"},\n"
    " \"questions\":{\n"
    "   \"is_refund\":{\"type\":\"noul\",\"instructions\":\"Is the customer asking for a refund?\",\n"
    "                \"criteria\":{\"true\":\"asks for money back\",\"false\":\"anything else\"}},\n"
    "   \"team\":{\"type\":\"choice\",\"instructions\":\"Which team should handle this?\",\n"
    "           \"criteria\":{\"shipping\":null,\"billing\":\"payments and refunds\",\"technical\":null}},\n"
    "   \"frustration\":{\"type\":\"score\",\"instructions\":\"How frustrated is the customer?\",\n"
    "                  \"criteria\":[\"calm\",\"mildly annoyed\",\"angry\"]}},\n"
    " \"x-unknown-top-level\": {\"ignored\": true}}";

static void test_s1_valid_example(void **state) {
    (void)state;
    struct jev_request r;
    struct jev_request_error e;
    assert_int_equal(parse_s1(spec_example, NULL, &r, &e), JEV_OK);
    assert_int_equal(e.http_status, 0);
    assert_int_equal(r.shape, JEV_SHAPE_SYSTEMONE);
    assert_string_equal(r.model, "jev-latest");
    assert_true(json_is_object(r.state));
    assert_false(r.has_image);
    assert_int_equal(r.n_questions, 3);
    /* request order, not key order */
    const struct jev_question *q = &r.questions[0];
    assert_string_equal(q->id, "is_refund");
    assert_int_equal(q->type, JEV_QTYPE_NOUL);
    assert_int_equal(q->n_options, 2);
    assert_string_equal(q->options[0].key, "yes");
    assert_string_equal(json_string_value(q->options[0].desc), "asks for money back");
    assert_string_equal(json_string_value(q->options[1].desc), "anything else");
    q = &r.questions[1];
    assert_string_equal(q->id, "team");
    assert_int_equal(q->type, JEV_QTYPE_CHOICE);
    assert_int_equal(q->n_options, 3);
    assert_string_equal(q->options[0].key, "shipping");
    assert_string_equal(q->options[1].key, "billing");
    assert_string_equal(q->options[2].key, "technical");
    assert_null(q->options[0].desc);
    assert_string_equal(json_string_value(q->options[1].desc), "payments and refunds");
    q = &r.questions[2];
    assert_string_equal(q->id, "frustration");
    assert_int_equal(q->type, JEV_QTYPE_SCORE);
    assert_int_equal(q->n_options, 3);
    assert_string_equal(q->options[2].key, "2");
    assert_null(q->options[2].text);
    assert_string_equal(json_string_value(q->options[2].desc), "angry");
    assert_int_equal(jev_request_find(&r, "team"), 1);
    assert_int_equal(jev_request_find(&r, "nope"), -1);
    assert_int_equal(r.n_options_total, 8);
    jev_request_free(&r);
    jev_request_free(&r); /* freeing twice is harmless */
}

static void test_s1_valid_variants(void **state) {
    (void)state;
    struct jev_request r;
    struct jev_request_error e;
    /* string state, array state, the document alias, 1 option, 2 and 10 levels, noul without criteria */
    const char *ok[] = {
        "{\"state\":\"plain text\",\"questions\":{\"a\":{\"type\":\"noul\",\"instructions\":\"x\"}}}",
        "{\"state\":[1,2],\"questions\":{\"a\":{\"type\":\"noul\",\"instructions\":[\"x\"],\"criteria\":null}}}",
        "{\"document\":\"d\",\"questions\":{\"a\":{\"type\":\"noul\",\"instructions\":{\"k\":1},\"criteria\":{}}}}",
        "{\"state\":\"\",\"questions\":{\"a\":{\"type\":\"choice\",\"instructions\":\"x\",\"criteria\":{\"only\":null}}"
        "}}",
        "{\"state\":\"s\",\"model\":\"\",\"questions\":{\"a\":{\"type\":\"score\",\"instructions\":\"x\",\"criteria\":"
        "[\"lo\",\"hi\"]}}}",
        "{\"state\":\"s\",\"model\":null,\"questions\":{\"a\":{\"type\":\"score\",\"instructions\":\"x\",\"criteria\":"
        "[\"0\",\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",{\"text\":\"top\"}]}}}",
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        enum jev_status s = parse_s1(ok[i], NULL, &r, &e);
        if (s != JEV_OK)
            print_error("case %zu: %s\n", i, e.message);
        assert_int_equal(s, JEV_OK);
        jev_request_free(&r);
    }
    assert_int_equal(parse_s1(ok[2], NULL, &r, &e), JEV_OK);
    assert_string_equal(json_string_value(r.state), "d");
    jev_request_free(&r);
    assert_int_equal(parse_s1(ok[5], NULL, &r, &e), JEV_OK);
    assert_int_equal(r.questions[0].n_options, 10);
    assert_true(json_is_object(r.questions[0].options[9].value));
    assert_null(r.model);
    jev_request_free(&r);
    /* a null level is an undescribed one, as the TypeSafe SDK's score() sends it: no description,
     * and null as the value the legend echoes */
    const char *undescribed = "{\"state\":\"s\",\"questions\":{\"a\":{\"type\":\"score\",\"instructions\":"
                              "\"x\",\"criteria\":[null,\"hi\"]}}}";
    assert_int_equal(parse_s1(undescribed, NULL, &r, &e), JEV_OK);
    assert_int_equal(r.questions[0].n_options, 2);
    assert_string_equal(r.questions[0].options[0].key, "0");
    assert_null(r.questions[0].options[0].desc);
    assert_true(json_is_null(r.questions[0].options[0].value));
    assert_string_equal(json_string_value(r.questions[0].options[1].desc), "hi");
    jev_request_free(&r);
}

/* ---- the OpenAI shape ---- */

static void test_oa_valid(void **state) {
    (void)state;
    const char *body =
        "{\"model\":\"gpt-6-luna\",\"input\":\"A customer writes: I was charged twice.\",\"safety_identifier\":\"u1\","
        "\"questions\":["
        "{\"type\":\"predicate\",\"instructions\":\"Asks for a refund?\",\"name\":\"refund\"},"
        "{\"type\":\"choice\",\"instructions\":\"Is it urgent?\",\"choices\":[{\"value\":true,\"description\":\"now\"},"
        "{\"value\":false},{\"value\":\"unclear\",\"description\":null}]},"
        "{\"type\":\"score\",\"instructions\":\"Frustration?\",\"name\":\"mood\",\"levels\":[{\"label\":\"calm\"},"
        "{\"label\":\"angry\",\"description\":\"shouting\"}]}]}";
    struct jev_request r;
    struct jev_request_error e;
    assert_int_equal(jev_request_parse_openai(body, strlen(body), NULL, &r, &e), JEV_OK);
    assert_int_equal(r.shape, JEV_SHAPE_OPENAI);
    assert_string_equal(r.model, "gpt-6-luna");
    assert_string_equal(json_string_value(r.state), "A customer writes: I was charged twice.");
    assert_int_equal(r.n_questions, 3);
    assert_int_equal(r.questions[0].type, JEV_QTYPE_NOUL);
    assert_true(r.questions[0].named);
    assert_string_equal(r.questions[0].id, "refund");
    assert_null(r.questions[0].options[0].desc);
    const struct jev_question *q = &r.questions[1];
    assert_false(q->named);
    assert_string_equal(q->id, "q01"); /* generated from the index */
    assert_int_equal(q->n_options, 3);
    assert_string_equal(q->options[0].key, "true");
    assert_true(json_is_true(q->options[0].value));
    assert_string_equal(json_string_value(q->options[0].desc), "now");
    assert_true(json_is_false(q->options[1].value));
    assert_string_equal(q->options[2].key, "unclear");
    assert_null(q->options[2].desc);
    q = &r.questions[2];
    assert_int_equal(q->type, JEV_QTYPE_SCORE);
    assert_string_equal(q->options[1].key, "1");
    assert_string_equal(q->options[1].text, "angry");
    assert_string_equal(json_string_value(q->options[1].desc), "shouting");
    jev_request_free(&r);
}

static void test_oa_messages_and_image(void **state) {
    (void)state;
    char *png = b64(png_bytes, sizeof png_bytes);
    struct buf b = {0};
    bput(&b,
         "{\"model\":\"m\",\"input\":[{\"role\":\"user\",\"content\":\"first\"},{\"role\":\"user\",\"type\":"
         "\"message\",\"content\":[{\"type\":\"input_text\",\"text\":\"second\"},{\"type\":\"input_image\","
         "\"image_url\":\"data:image/png;base64,%s\",\"detail\":\"low\"}]}],\"questions\":[{\"type\":"
         "\"predicate\",\"instructions\":\"Dog?\"}]}",
         png);
    struct jev_request r;
    struct jev_request_error e;
    assert_int_equal(jev_request_parse_openai(b.s, b.n, NULL, &r, &e), JEV_OK);
    assert_string_equal(json_string_value(r.state), "first\n\nsecond");
    assert_true(r.has_image);
    assert_int_equal(r.image.format, JEV_IMAGE_PNG);
    assert_string_equal(r.questions[0].id, "q00");
    jev_request_free(&r);
    free(b.s);
    free(png);
}

/* Many small text parts join in time linear in the body: a new string per
 * part made this quadratic (40,000 parts took 32 s, a 32 MiB body hours,
 * under the decide lock). 100,000 parts take well under a second now; the
 * bound leaves room for a loaded machine and the sanitizers. */
static void test_oa_many_parts(void **state) {
    (void)state;
    enum { N = 100000 };
    struct buf b = {0};
    bput(&b, "{\"model\":\"m\",\"input\":[{\"role\":\"user\",\"content\":[");
    for (int i = 0; i < N; i++)
        bput(&b, "%s{\"type\":\"input_text\",\"text\":\"p%d\"}", i ? "," : "", i % 10);
    bput(&b, "]}],\"questions\":[{\"type\":\"predicate\",\"instructions\":\"Dog?\"}]}");
    struct jev_request r;
    struct jev_request_error e;
    double t0 = jev_now_ms();
    assert_int_equal(jev_request_parse_openai(b.s, b.n, NULL, &r, &e), JEV_OK);
    double ms = jev_now_ms() - t0;
    const char *st = json_string_value(r.state);
    assert_int_equal(strlen(st), (size_t)N * 4 - 2); /* "pD" and "\n\n" between */
    for (int i = 0; i < N; i++) {
        assert_int_equal(st[4 * i], 'p');
        assert_int_equal(st[4 * i + 1], '0' + i % 10);
        if (i + 1 < N)
            assert_memory_equal(st + 4 * i + 2, "\n\n", 2);
    }
    assert_true(ms < 20000.0);
    jev_request_free(&r);
    free(b.s);
}

static void test_oa_refusals(void **state) {
    (void)state;
    const char *q1 = "\"questions\":[{\"type\":\"predicate\",\"instructions\":\"x\"}]";
    char body[2048];
    snprintf(body, sizeof body, "{\"model\":\"m\",%s}", q1);
    oa_refused(body, 422, "input", "input: missing (a string or an array of user messages)");
    snprintf(body, sizeof body, "{\"input\":5,%s}", q1);
    oa_refused(body, 422, "input", "input: must be a string or an array of user messages");
    snprintf(body, sizeof body, "{\"input\":[],%s}", q1);
    oa_refused(body, 422, "input", "input: is empty (at least one user message)");
    snprintf(body, sizeof body, "{\"input\":[{\"role\":\"system\",\"content\":\"x\"}],%s}", q1);
    oa_refused(body, 422, "input[0].role", "input[0].role: only user messages are supported, got \"system\"");
    snprintf(body, sizeof body, "{\"input\":[{\"content\":\"x\"}],%s}", q1);
    oa_refused(body, 422, "input[0].role", "input[0].role: only user messages are supported, got none");
    snprintf(body, sizeof body, "{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_file\"}]}],%s}", q1);
    oa_refused(body, 422, "input[0].content[0].type",
               "input[0].content[0].type: unsupported content part type \"input_file\" (supported: input_text, "
               "input_image)");
    snprintf(body, sizeof body,
             "{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_image\",\"image_url\":\"https://x/y.png\""
             "}]}],%s}",
             q1);
    oa_refused(body, 422, "input[0].content[0].image_url",
               "input[0].content[0].image_url: only data URLs (or raw base64) are accepted; URLs are not fetched");
    snprintf(body, sizeof body,
             "{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_image\",\"image_url\":\"AAAA\","
             "\"detail\":\"max\"}]}],%s}",
             q1);
    oa_refused(body, 422, "input[0].content[0].detail",
               "input[0].content[0].detail: must be \"low\", \"high\", \"auto\" or \"original\"");
    oa_refused("{\"input\":\"s\"}", 422, "questions", "questions: missing (an array of questions)");
    oa_refused("{\"input\":\"s\",\"questions\":{}}", 422, "questions", "questions: must be an array of questions");
    oa_refused("{\"input\":\"s\",\"questions\":[]}", 422, "questions", "questions: is empty (at least one question)");
    oa_refused("{\"input\":\"s\",\"questions\":[{\"type\":\"noul\",\"instructions\":\"x\"}]}", 422, "questions[0].type",
               "questions[0].type: unknown question type \"noul\" (one of predicate, choice, score)");
    oa_refused("{\"input\":\"s\",\"questions\":[{\"type\":\"predicate\",\"instructions\":\"x\",\"criteria\":{}}]}", 422,
               "questions[0].criteria", "questions[0].criteria: unknown field (allowed: type, instructions, name)");
    oa_refused("{\"input\":\"s\",\"questions\":[{\"type\":\"predicate\"}]}", 422, "questions[0].instructions",
               "questions[0].instructions: missing: every question needs instructions (a non-empty string, object "
               "or array)");
    oa_refused("{\"input\":\"s\",\"questions\":[{\"type\":\"predicate\",\"instructions\":\"x\",\"name\":3}]}", 422,
               "questions[0].name", "questions[0].name: must be a string or null");
    oa_refused("{\"input\":\"s\",\"questions\":[{\"type\":\"predicate\",\"instructions\":\"x\",\"name\":\"\"}]}", 422,
               "questions[0].name", "questions[0].name: a question id must not be empty");
    oa_refused("{\"input\":\"s\",\"questions\":[{\"type\":\"choice\",\"instructions\":\"x\"}]}", 422,
               "questions[0].choices",
               "questions[0].choices: missing: a choice question needs choices, an array of 1 to 255 {\"value\", "
               "\"description\"}");
    oa_refused("{\"input\":\"s\",\"questions\":[{\"type\":\"choice\",\"instructions\":\"x\",\"choices\":[]}]}", 422,
               "questions[0].choices", "questions[0].choices: has no choices (a choice needs 1 to 255)");
    oa_refused("{\"input\":\"s\",\"questions\":[{\"type\":\"choice\",\"instructions\":\"x\",\"choices\":[{\"value\":"
               "1}]}]}",
               422, "questions[0].choices[0]", "questions[0].choices[0]: value must be a string or a boolean");
    oa_refused("{\"input\":\"s\",\"questions\":[{\"type\":\"choice\",\"instructions\":\"x\",\"choices\":[{\"value\":"
               "\"a\"},{\"value\":\"a\"}]}]}",
               422, "questions[0].choices[1]",
               "questions[0].choices[1]: duplicate value \"a\" (choices must be unique)");
    oa_refused("{\"input\":\"s\",\"questions\":[{\"type\":\"choice\",\"instructions\":\"x\",\"choices\":[{\"value\":"
               "true},{\"value\":\"true\"}]}]}",
               422, "questions[0].choices[1]",
               "questions[0].choices[1]: values true and \"true\" (or false and \"false\") cannot both be used: the "
               "model reads them the same");
    oa_refused("{\"input\":\"s\",\"questions\":[{\"type\":\"choice\",\"instructions\":\"x\",\"choices\":[{\"value\":"
               "\"a\",\"label\":\"A\"}]}]}",
               422, "questions[0].choices[0].label",
               "questions[0].choices[0].label: unknown field (allowed: value, description)");
    oa_refused("{\"input\":\"s\",\"questions\":[{\"type\":\"score\",\"instructions\":\"x\",\"levels\":[{\"label\":"
               "\"a\"}]}]}",
               422, "questions[0].levels", "questions[0].levels: has 1 level (a score needs 2 to 10)");
    oa_refused("{\"input\":\"s\",\"questions\":[{\"type\":\"score\",\"instructions\":\"x\",\"levels\":[{\"label\":"
               "\"a\"},{\"description\":\"b\"}]}]}",
               422, "questions[0].levels[1]", "questions[0].levels[1]: label must be a non-empty string");
    oa_refused("{\"input\":\"s\",\"questions\":[{\"type\":\"predicate\",\"instructions\":\"x\",\"name\":\"a\"},"
               "{\"type\":\"predicate\",\"instructions\":\"y\",\"name\":\"a\"}]}",
               422, "questions[1].name",
               "questions[1].name: \"a\" is used by question 0 too (question ids must be "
               "unique)");
    oa_refused("{\"input\":\"s\",\"questions\":[{\"type\":\"predicate\",\"instructions\":\"x\"},"
               "{\"type\":\"predicate\",\"instructions\":\"y\",\"name\":\"q00\"}]}",
               422, "questions[1].name",
               "questions[1].name: \"q00\" is used by question 0 too (question ids must be unique)");
    oa_refused("{\"input\":\"s\",\"prompt_cache_key\":\"0123456789012345678901234567890123456789012345678901234567890"
               "1234\",\"questions\":[]}",
               422, "prompt_cache_key", "prompt_cache_key: is 65 bytes (the limit is 64)");

    /* 256 choices */
    struct buf b = {0};
    bput(&b, "{\"input\":\"s\",\"questions\":[{\"type\":\"choice\",\"instructions\":\"x\",\"choices\":[");
    for (int i = 0; i < 256; i++)
        bput(&b, "%s{\"value\":\"v%d\"}", i ? "," : "", i);
    bput(&b, "]}]}");
    oa_refused(b.s, 422, "questions[0].choices", "questions[0].choices: has 256 choices (the maximum is 255)");
    free(b.s);
}

/* ---- the workload ---- */

static void test_workload(void **state) {
    (void)state;
    struct jev_request r;
    struct jev_request_error e;
    enum jev_status s = jev_request_load_workload_file("bench/dog-workload.json", 16, &r, &e);
    if (s != JEV_OK)
        print_error("%s\n", e.message);
    assert_int_equal(s, JEV_OK);
    assert_int_equal(r.shape, JEV_SHAPE_WORKLOAD);
    assert_int_equal(r.n_questions, 16);
    assert_true(r.has_image);
    assert_string_equal(r.image.path, "assets/dog.jpg");
    assert_non_null(strstr(r.context, "pet adoption listing"));
    assert_string_equal(json_string_value(r.state), "");
    assert_string_equal(r.questions[0].id, "q00");
    assert_string_equal(r.questions[15].id, "q15");
    /* decision i asks question i mod 8 */
    assert_string_equal(json_string_value(r.questions[9].instructions), "What is the main color of the animal's fur?");
    assert_ptr_equal(r.questions[9].options, r.questions[1].options);
    assert_int_equal(r.questions[0].n_options, 4);
    assert_string_equal(r.questions[0].options[0].key, "dog");
    assert_string_equal(r.questions[0].options[0].text, "A dog");
    assert_int_equal(r.questions[4].n_options, 3);
    assert_string_equal(r.questions[4].options[2].key, "three_plus");
    assert_int_equal(r.n_options_total, 4 + 4 + 2 + 2 + 3 + 4 + 2 + 2);
    jev_request_free(&r);

    s = jev_request_load_workload_file("bench/dog-workload.json", 0, &r, &e);
    check_refusal(s, &r, &e, 422, "", "0 decisions requested (1 to 4096)");
    s = jev_request_load_workload_file("bench/dog-workload.json", 4097, &r, &e);
    check_refusal(s, &r, &e, 413, "", "4097 decisions requested (1 to 4096)");
    const char *bad =
        "{\"context\":\"c\",\"questions\":[{\"question\":\"q?\",\"options\":[{\"id\":\"a\",\"text\":\"A\"},"
        "{\"id\":\"a\",\"text\":\"B\"}]}]}";
    s = jev_request_load_workload(bad, strlen(bad), 1, &r, &e);
    check_refusal(s, &r, &e, 422, "questions[0].options[1]", "questions[0].options[1]: duplicate option id \"a\"");
    s = jev_request_load_workload_file("bench/no-such-file.json", 1, &r, &e);
    assert_int_equal(e.http_status, 400);
    assert_non_null(strstr(e.message, "cannot open the workload file"));
}

/* ---- base64 (RFC 4648 §10 vectors) ---- */

static void test_base64(void **state) {
    (void)state;
    const char *enc[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    const char *dec[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    unsigned char out[16];
    for (int i = 0; i < 7; i++) {
        int64_t n = jev_base64_decode(enc[i], strlen(enc[i]), out, sizeof out);
        assert_int_equal(n, (int64_t)strlen(dec[i]));
        assert_memory_equal(out, dec[i], (size_t)n);
        assert_int_equal(jev_base64_decode(enc[i], strlen(enc[i]), NULL, 0), n); /* counting mode */
    }
    /* unpadded and line-wrapped forms decode the same */
    assert_int_equal(jev_base64_decode("Zm9vYg", 6, out, sizeof out), 4);
    assert_memory_equal(out, "foob", 4);
    assert_int_equal(jev_base64_decode("Zm9v\r\nYmFy\n", 11, out, sizeof out), 6);
    assert_memory_equal(out, "foobar", 6);
    /* refused: foreign bytes, a lone symbol, bad padding, data after padding, non-canonical bits, no room */
    const char *bad[] = {"Zm9v!", "Z", "Zg=", "Zg===", "Zg==Zg==", "Zh==", "Zm9=", "=", "Zm-_"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(jev_base64_decode(bad[i], strlen(bad[i]), out, sizeof out), -1);
    assert_int_equal(jev_base64_decode("Zm9vYmFy", 8, out, 5), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_s1_envelope_refusals),
        cmocka_unit_test(test_s1_bad_json),
        cmocka_unit_test(test_s1_body_limit),
        cmocka_unit_test(test_s1_too_many_questions),
        cmocka_unit_test(test_s1_question_refusals),
        cmocka_unit_test(test_s1_instructions_refusals),
        cmocka_unit_test(test_s1_choice_refusals),
        cmocka_unit_test(test_s1_score_refusals),
        cmocka_unit_test(test_s1_noul_refusals),
        cmocka_unit_test(test_s1_depth),
        cmocka_unit_test(test_s1_images),
        cmocka_unit_test(test_s1_assets),
        cmocka_unit_test(test_s1_image_too_large),
        cmocka_unit_test(test_s1_valid_example),
        cmocka_unit_test(test_s1_valid_variants),
        cmocka_unit_test(test_oa_valid),
        cmocka_unit_test(test_oa_messages_and_image),
        cmocka_unit_test(test_oa_many_parts),
        cmocka_unit_test(test_oa_refusals),
        cmocka_unit_test(test_workload),
        cmocka_unit_test(test_base64),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
