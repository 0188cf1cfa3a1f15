/*
 * verify.c - text-mode scoring (the candidate trie) against plain full
 * forwards with a full-vocabulary log-softmax (verify.h).
 *
 * The engine side is the pipeline itself: one request holding every case as
 * a question, run on the shared path with text scoring and all questions in
 * one batch, and each candidate's per-token log-probabilities read off its
 * trie path. The reference side shares only the weights, the token ids and
 * the image embeddings: per candidate a fresh sequence, one forward of
 * prefix + suffix + candidate, the head over the full vocabulary at every
 * position that predicts a candidate token, log-softmax in double.
 */
#include "common/verify.h" // defines: jev_verify_run

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "decide/inspect.h"       // defines: jev_decide_inspect, struct jev_decide_inputs
#include "model/engine.h"         // defines: struct jev_engine (its LM and sequence state)
#include "model/model.h"          // defines: struct jev_model (config, dir)
#include "model/mrope.h"          // defines: jev_mrope_positions
#include "decide/prompt-render.h" // defines: jev_prompt_candidate
#include "wire/request.h"         // defines: jev_request_parse_systemone

/* ---- the cases ---- */

struct verify_case {
    const char *name; /* what it exercises */
    const char *id;   /* the question id */
    const char *json; /* the question object (System One) */
};

static const struct verify_case cases[] = {
    {"shared beginnings", "capital",
     "{\"type\":\"choice\",\"instructions\":\"Which city is the capital of India?\","
     "\"criteria\":{\"New York\":null,\"New Delhi\":null,\"Mumbai\":null}}"},
    {"one candidate a prefix of another", "name",
     "{\"type\":\"choice\",\"instructions\":\"Complete the name of the city.\","
     "\"criteria\":{\"New\":null,\"New York\":null,\"New York City\":null}}"},
    {"Chinese text: shared beginnings and a prefix", "zh_capital",
     "{\"type\":\"choice\",\"instructions\":\"\xe4\xb8\xad\xe5\x9b\xbd\xe7\x9a\x84\xe9\xa6\x96"
     "\xe9\x83\xbd\xe5\x9c\xa8\xe5\x93\xaa\xe9\x87\x8c\xef\xbc\x9f\",\"criteria\":{\"\xe5\x8c\x97"
     "\xe4\xba\xac\":null,\"\xe5\x8c\x97\xe4\xba\xac\xe5\xb8\x88\xe8\x8c\x83\xe5\xa4\xa7\xe5\xad"
     "\xa6\":null,\"\xe5\x8c\x97\xe4\xba\xac\xe7\x9a\x84\xe5\xa4\xa9\xe5\xae\x89\xe9\x97\xa8\""
     ":null,\"\xe4\xb8\x8a\xe6\xb5\xb7\xe5\xb8\x82\":null}}"},
    {"yes / no", "is_city", "{\"type\":\"noul\",\"instructions\":\"Is New Delhi a city?\"}"},
};
enum { N_CASES = sizeof cases / sizeof cases[0] };

/* The request: every case as one question about a short state. */
static char *request_body(void) {
    size_t cap = 4096;
    char *b = malloc(cap);
    if (!b)
        return NULL;
    size_t n = (size_t)snprintf(b, cap,
                                "{\"state\":\"A quiz about cities. \xe5\x9f\x8e\xe5\xb8\x82\xe6\xb5\x8b"
                                "\xe9\xaa\x8c\xe3\x80\x82\",\"questions\":{");
    for (int i = 0; i < N_CASES; i++)
        n += (size_t)snprintf(b + n, cap - n, "%s\"%s\":%s", i ? "," : "", cases[i].id, cases[i].json);
    snprintf(b + n, cap - n, "}}");
    return b;
}

/* ---- the reference: one plain forward per candidate ---- */

struct ref_ctx {
    struct jev_engine *e;                   /* the decider's engine */
    const struct jev_config *cfg;           /* the model's config */
    const struct jev_decide_inspection *in; /* the engine run: tokens, image embeddings */
    struct jev_error *err;                  /* first failure */
    int32_t *ids;                           /* [cap] prompt + candidate */
    int32_t *pos3;                          /* [3][cap] M-RoPE output */
    int32_t *pos;                           /* [cap][3] batch positions */
    const float **embd;                     /* [cap] image rows */
    int32_t *out_idx;                       /* [cap] rows with logits */
    float *logits;                          /* [max_cand][V] */
    int32_t cap;                            /* tokens */
    int32_t max_cand;                       /* candidate tokens */
};

/* log p(cand[j] | prompt, cand[<j]) from one full forward; into lp[len]. */
static enum jev_status reference(struct ref_ctx *c, int32_t qi, const int32_t *cand, int32_t len, double *lp) {
    const struct jev_decide_inputs *in = jev_decide_inspection_inputs(c->in);
    const struct jev_config *cfg = c->cfg;
    int32_t S = 0;
    const int32_t *suf = jev_decide_inspection_suffix(c->in, qi, &S);
    int32_t P = in->n_prefix, n = P + S + len - 1; /* the last token is never fed */
    memcpy(c->ids, in->prefix_ids, (size_t)P * sizeof(int32_t));
    memcpy(c->ids + P, suf, (size_t)S * sizeof(int32_t));
    memcpy(c->ids + P + S, cand, (size_t)(len - 1) * sizeof(int32_t));
    struct jev_mrope_image img = {in->grid_h, in->grid_w};
    int32_t delta = 0;
    JEV_TRY(jev_mrope_positions(c->ids, n, cfg->ids.image_pad, &img, in->has_image ? 1 : 0,
                                cfg->vision.merge > 0 ? cfg->vision.merge : 2, c->pos3, &delta, c->err));
    for (int32_t i = 0; i < n; i++)
        for (int a = 0; a < 3; a++)
            c->pos[i * 3 + a] = c->pos3[(int64_t)a * n + i];
    for (int32_t j = 0; j < len; j++)
        c->out_idx[j] = P + S - 1 + j;
    struct jev_seq *seq = NULL;
    JEV_TRY(jev_seq_new(&c->e->state, &seq, c->err));
    struct jev_lm_batch b = {.n_tokens = n,
                             .ids = c->ids,
                             .pos = c->pos,
                             .embd_rows = in->has_image ? c->embd : NULL,
                             .n_runs = 1,
                             .seqs = &seq,
                             .seq_len = &n,
                             .n_out = len,
                             .out_idx = c->out_idx,
                             .logits = c->logits};
    enum jev_status s = jev_lm_forward(&c->e->lm, &b, c->err);
    jev_seq_free(seq);
    JEV_TRY(s);
    /* log-softmax over the full vocabulary, in double */
    int64_t V = in->n_vocab;
    for (int32_t j = 0; j < len; j++) {
        const float *row = c->logits + (int64_t)j * V;
        double m = -INFINITY, z = 0.0;
        for (int64_t v = 0; v < V; v++)
            m = (double)row[v] > m ? (double)row[v] : m;
        for (int64_t v = 0; v < V; v++)
            z += exp((double)row[v] - m);
        lp[j] = (double)row[cand[j]] - m - log(z);
    }
    return JEV_OK;
}

/* ---- the engine's values ---- */

/* Candidate k's per-token log-probabilities along its trie path (root first); returns its length. */
static int32_t engine_path(const struct jev_trie *t, int32_t k, int32_t *tokens, double *lp, int32_t cap) {
    int32_t len = t->nodes[t->cand_node[k]].depth;
    if (len > cap)
        return -1;
    for (int32_t n = t->cand_node[k], j = len - 1; n > 0; n = t->nodes[n].parent, j--) {
        tokens[j] = t->nodes[n].token;
        lp[j] = t->nodes[n].logprob;
    }
    return len;
}

static json_t *dbl_array(const double *x, int32_t n) {
    json_t *a = json_array();
    for (int32_t i = 0; i < n; i++)
        json_array_append_new(a, json_real(x[i]));
    return a;
}

static json_t *int_array(const int32_t *x, int32_t n) {
    json_t *a = json_array();
    for (int32_t i = 0; i < n; i++)
        json_array_append_new(a, json_integer(x[i]));
    return a;
}

#define VERIFY_MAX_CAND_TOKENS 64

enum jev_status jev_verify_run(struct jev_decider *d, const struct jev_verify_opts *opts, json_t **out,
                               struct jev_verify_summary *sum, struct jev_error *err) {
    *out = NULL;
    memset(sum, 0, sizeof *sum);
    jev_decider_drop_kept(d); /* its own sequences come straight from the engine: the slot and pages go back */
    struct jev_verify_opts o = opts ? *opts : (struct jev_verify_opts){0};
    double tol = o.tolerance > 0 ? o.tolerance : 1e-4;
    char *body = request_body();
    if (!body)
        return jev_fail(err, JEV_ERR_NOMEM, "verify: out of memory");
    struct jev_request r;
    struct jev_request_error rerr = {0};
    enum jev_status s = jev_request_parse_systemone(body, strlen(body), NULL, &r, &rerr);
    free(body);
    if (s != JEV_OK)
        return jev_fail(err, s, "verify: the built-in request was refused: %s", rerr.message);
    if (o.image && (s = jev_request_set_image_path(&r, o.image, &rerr)) != JEV_OK) {
        jev_request_free(&r);
        return jev_fail(err, s, "verify: %s", rerr.message);
    }
    /* the engine: text scoring on the shared path, every case in one batch */
    struct jev_decide_params p = jev_decide_default_params();
    p.scoring = JEV_SCORING_TEXT;
    p.norm = o.norm;
    p.batch = 0;
    struct jev_decide_result res;
    struct jev_decide_inspection *insp = NULL;
    const struct jev_model *model = jev_decider_model(d);
    s = jev_decide_inspect(d, &r, &p, &res, &insp, err);
    struct ref_ctx c = {.e = jev_decider_engine(d), .cfg = &model->config, .in = insp, .err = err};
    json_t *jcases = json_array();
    double max_diff = 0.0;
    int32_t agree = 0;
    if (s == JEV_OK) {
        const struct jev_decide_inputs *in = jev_decide_inspection_inputs(insp);
        c.max_cand = VERIFY_MAX_CAND_TOKENS;
        c.cap = in->max_prompt + c.max_cand;
        c.ids = malloc((size_t)c.cap * sizeof(int32_t));
        c.pos3 = malloc((size_t)c.cap * 3 * sizeof(int32_t));
        c.pos = malloc((size_t)c.cap * 3 * sizeof(int32_t));
        c.embd = calloc((size_t)c.cap, sizeof *c.embd);
        c.out_idx = malloc((size_t)c.max_cand * sizeof(int32_t));
        c.logits = malloc((size_t)c.max_cand * (size_t)in->n_vocab * sizeof(float));
        if (!c.ids || !c.pos3 || !c.pos || !c.embd || !c.out_idx || !c.logits)
            s = jev_fail(err, JEV_ERR_NOMEM, "verify: out of memory for the reference forwards");
        for (int32_t k = 0; s == JEV_OK && in->has_image && k < in->n_image_tokens; k++)
            c.embd[in->image_at + k] = in->image_embd + (int64_t)k * model->config.text.hidden;
    }
    for (int32_t qi = 0; s == JEV_OK && qi < r.n_questions; qi++) {
        const struct jev_question *qq = &r.questions[qi];
        const struct jev_trie *t = jev_decide_inspection_trie(insp, qi);
        if (!t) {
            s = jev_fail(err, JEV_ERR_INVALID_ARG, "verify: question %s has no candidate trie", qq->id);
            break;
        }
        double eng_score[JEV_DECIDE_MAX_OPTIONS], ref_score[JEV_DECIDE_MAX_OPTIONS];
        double eng_p[JEV_DECIDE_MAX_OPTIONS], ref_p[JEV_DECIDE_MAX_OPTIONS];
        json_t *jc = json_array();
        double case_diff = 0.0;
        for (int32_t k = 0; s == JEV_OK && k < qq->n_options; k++) {
            int32_t tok[VERIFY_MAX_CAND_TOKENS];
            double lpe[VERIFY_MAX_CAND_TOKENS], lpr[VERIFY_MAX_CAND_TOKENS], diff = 0.0;
            int32_t len = engine_path(t, k, tok, lpe, VERIFY_MAX_CAND_TOKENS);
            if (len < 1) {
                s = jev_fail(err, JEV_ERR_INVALID_ARG, "verify: candidate %s has more than %d tokens",
                             qq->options[k].key, VERIFY_MAX_CAND_TOKENS);
                break;
            }
            s = reference(&c, qi, tok, len, lpr);
            double se = 0.0, sr = 0.0;
            for (int32_t j = 0; s == JEV_OK && j < len; j++) {
                diff = fmax(diff, fabs(lpe[j] - lpr[j]));
                se += lpe[j];
                sr += lpr[j];
                sum->n_tokens++;
            }
            bool mean = o.norm == JEV_TRIE_MEAN;
            eng_score[k] = mean ? se / len : se;
            ref_score[k] = mean ? sr / len : sr;
            case_diff = fmax(case_diff, diff);
            char text[256];
            jev_prompt_candidate(qq, k, text, sizeof text);
            json_array_append_new(jc, json_pack("{s:s, s:s, s:o, s:o, s:o, s:f}", "option", qq->options[k].key, "text",
                                                text, "token_ids", int_array(tok, len), "engine_logprobs",
                                                dbl_array(lpe, len), "reference_logprobs", dbl_array(lpr, len),
                                                "max_abs_diff", diff));
        }
        if (s != JEV_OK) {
            json_decref(jc);
            break;
        }
        jev_softmax(eng_score, qq->n_options, eng_p);
        jev_softmax(ref_score, qq->n_options, ref_p);
        int32_t ae = jev_argmax(eng_p, qq->n_options), ar = jev_argmax(ref_p, qq->n_options);
        agree += ae == ar;
        max_diff = fmax(max_diff, case_diff);
        json_array_append_new(jcases, json_pack("{s:s, s:s, s:o, s:o, s:o, s:s, s:s, s:b, s:f}", "case", cases[qi].name,
                                                "question", qq->id, "candidates", jc, "engine_probs",
                                                dbl_array(eng_p, qq->n_options), "reference_probs",
                                                dbl_array(ref_p, qq->n_options), "engine_argmax", qq->options[ae].key,
                                                "reference_argmax", qq->options[ar].key, "argmax_agrees", ae == ar,
                                                "max_abs_diff", case_diff));
        sum->n_cases++;
    }
    if (s == JEV_OK) {
        sum->max_abs_diff = max_diff;
        sum->argmax_agreement = sum->n_cases ? (double)agree / sum->n_cases : 0.0;
        sum->pass = max_diff <= tol && agree == sum->n_cases;
        *out = json_pack("{s:s, s:s, s:s, s:s, s:s, s:o, s:{s:i, s:i, s:f, s:f, s:f, s:b}}", "format",
                         "jev-scoring-verification/1", "model_dir", model->dir, "normalisation",
                         o.norm == JEV_TRIE_MEAN ? "mean" : "sum", "precision",
                         jev_precision_name(jev_decider_engine(d)->params.precision), "engine",
                         "shared path, text scoring: prefix prefill, forked suffixes, candidate trie, full-vocabulary "
                         "log-softmax at the query positions",
                         "cases", jcases, "summary", "cases", sum->n_cases, "tokens", sum->n_tokens, "max_abs_diff",
                         max_diff, "argmax_agreement", sum->argmax_agreement, "tolerance", tol, "pass", sum->pass);
        jcases = NULL;
        if (!*out)
            s = jev_fail(err, JEV_ERR_NOMEM, "verify: out of memory for the record");
    }
    json_decref(jcases);
    free(c.ids);
    free(c.pos3);
    free(c.pos);
    free(c.embd);
    free(c.out_idx);
    free(c.logits);
    jev_decide_inspection_free(insp);
    jev_decide_result_free(&res);
    jev_request_free(&r);
    return s;
}
