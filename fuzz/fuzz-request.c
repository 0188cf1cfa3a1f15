/*
 * fuzz-request.c - bytes -> both request parsers (System One, OpenAI) and
 * the workload loader; whatever parses is rendered (prompts in label and
 * text mode, generate_json), answered (uniform) and written back out, and
 * the input is also checked as generate_json output. A response that is not
 * JSON, or a refusal without its HTTP status, aborts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "decide/answer.h"        // defines: jev_answers_*
#include "decide/genjson.h"       // defines: jev_genjson_check
#include "decide/prompt-render.h" // defines: jev_prompt_*
#include "wire/request.h"         // defines: jev_request_parse_*
#include "wire/response.h"        // defines: jev_response_*

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must_be_json(char *text) {
    if (text == NULL)
        return; /* allocation failure only */
    json_error_t e;
    json_t *v = json_loads(text, 0, &e);
    if (v == NULL)
        abort();
    json_decref(v);
    free(text);
}

static void exercise(const struct jev_request *r, const char *data, size_t size) {
    static struct jev_labels labels; /* letters, yes/no, digits: enough for the renderer */
    if (labels.n_choice == 0) {
        for (int i = 0; i < JEV_DECIDE_MAX_OPTIONS; i++) {
            labels.choice[i].text[0] = (char)('A' + i % 26);
            labels.choice[i].text[1] = (char)('A' + i / 26);
            labels.choice[i].n_ids = 1;
        }
        labels.n_choice = JEV_DECIDE_MAX_OPTIONS;
        strcpy(labels.noul[0].text, "yes");
        strcpy(labels.noul[1].text, "no");
        for (int i = 0; i < 10; i++)
            labels.score[i].text[0] = (char)('0' + i);
    }
    struct jev_error err = {0};
    struct jev_prompt p;
    jev_prompt_init(&p);
    jev_prompt_prefix(&p, r, NULL, &err);
    int32_t nq = r->n_questions < 8 ? r->n_questions : 8; /* bound the work per input */
    for (int32_t i = 0; i < nq; i++) {
        jev_prompt_question(&p, r, i, NULL, &labels, &err);
        jev_prompt_question(&p, r, i, NULL, NULL, &err);
        char cand[64];
        for (int32_t j = 0; j < r->questions[i].n_options; j++)
            jev_prompt_candidate(&r->questions[i], j, cand, sizeof cand);
    }
    jev_prompt_genjson(&p, r, NULL, &err);
    jev_prompt_free(&p);

    struct jev_answers a;
    if (jev_answers_init(&a, r, &err) == JEV_OK) {
        must_be_json(jev_response_systemone(r, &a, "m", NULL));
        must_be_json(jev_response_openai(r, &a, "m", NULL));
        jev_answers_free(&a);
    }
    struct jev_genjson_result g;
    if (jev_genjson_check(r, data, size, &g, &err) == JEV_OK)
        jev_genjson_result_free(&g);
}

static void refusal(const struct jev_request_error *e) {
    if (e->http_status != 400 && e->http_status != 413 && e->http_status != 422 && e->http_status != 501 &&
        e->http_status != 0)
        abort();
    if (e->message[0] == '\0')
        abort();
    must_be_json(jev_response_request_error(e));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *text = (const char *)data;
    struct jev_request r;
    struct jev_request_error e;
    struct jev_request_opts opts = {.no_vision = size > 0 && (data[0] & 1)};
    if (jev_request_parse_systemone(text, size, &opts, &r, &e) == JEV_OK) {
        exercise(&r, text, size);
        jev_request_free(&r);
    } else {
        refusal(&e);
    }
    if (jev_request_parse_openai(text, size, &opts, &r, &e) == JEV_OK) {
        exercise(&r, text, size);
        jev_request_free(&r);
    } else {
        refusal(&e);
    }
    if (jev_request_load_workload(text, size, 9, &r, &e) == JEV_OK) {
        exercise(&r, text, size);
        jev_request_free(&r);
    }
    unsigned char out[256];
    jev_base64_decode(text, size, size / 4 * 3 + 3 <= sizeof out ? out : NULL, sizeof out);
    return 0;
}
