/*
 * test-lm-golden.c - the language model against Hugging Face transformers.
 *
 * The goldens tests/golden/lm-tiny-hf.json and lm-tiny-mlx4.json are written
 * by scripts/reference/lm_goldens.py (transformers in f32, eager attention)
 * from the tiny synthetic model. This test regenerates that model with
 * `jev synth --config configs/tiny.json --seed 1 --layout L`, checks that its
 * model.safetensors has the sha256 the golden recorded (otherwise the
 * comparison would be meaningless), runs the same four cases through the
 * engine and compares:
 *   - torch's f32 inv_freq, bit for bit;
 *   - (a) one-piece prefill: per-layer hidden-state slices and checksums,
 *     logits at chosen positions;
 *   - (b) the prompt in chunks of 7, 64, 100, 129; (c) 8 decode steps fed the
 *     golden's greedy tokens; (d) four forks of a 200-token prefix with
 *     suffixes of 1, 3, 17, 70 tokens run as one batch.
 * Logits: top-5 ids identical, max |a - b| / max |b| <= 1e-4 over the
 * recorded values (top-10 and a strided slice), sums within 1e-4 relative.
 * Hidden states: slices within 1e-4 of the slice's max, checksums likewise.
 * Until the lead has run the script, the golden files are missing and this
 * test fails saying so.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/sha256.h"  // defines: jev_sha256_file
#include "model/engine.h" // defines: struct jev_engine
#include "model/lm.h"     // defines: jev_lm_forward

#define REL_TOL 1e-4
#define MAX_POS 64

/* ---- golden access ---- */

static json_t *load_golden(const char *layout) {
    char path[256];
    snprintf(path, sizeof path, "tests/golden/lm-tiny-%s.json", layout);
    json_error_t je;
    json_t *g = json_load_file(path, 0, &je);
    if (!g)
        fail_msg("%s: missing or unreadable (%s). Generate it: bash scripts/reference/lm_goldens.sh OUTDIR "
                 "(see docs/lm.md), then copy OUTDIR/lm-tiny-%s.json to tests/golden/",
                 path, je.text, layout);
    const char *fmt = json_string_value(json_object_get(g, "format"));
    if (!fmt || strcmp(fmt, "jev-lm-golden-1") != 0)
        fail_msg("%s: format is not jev-lm-golden-1", path);
    return g;
}

static int32_t *int_array(json_t *a, int32_t *n) {
    *n = (int32_t)json_array_size(a);
    int32_t *v = malloc((size_t)(*n > 0 ? *n : 1) * sizeof(int32_t));
    for (int32_t i = 0; i < *n; i++)
        v[i] = (int32_t)json_integer_value(json_array_get(a, (size_t)i));
    return v;
}

/* ---- comparisons ---- */

static void cmp_logits(const char *what, const float *row, int32_t vocab, json_t *rec) {
    json_t *ids = json_object_get(rec, "top_ids"), *vals = json_object_get(rec, "top_vals");
    json_t *slice = json_object_get(rec, "slice");
    int32_t stride = 997;
    double mb = 0, md = 0;
    for (size_t i = 0; i < json_array_size(vals); i++) {
        int32_t id = (int32_t)json_integer_value(json_array_get(ids, i));
        double b = json_number_value(json_array_get(vals, i));
        assert_true(id >= 0 && id < vocab);
        md = fmax(md, fabs((double)row[id] - b));
        mb = fmax(mb, fabs(b));
    }
    for (size_t i = 0; i < json_array_size(slice); i++) {
        double b = json_number_value(json_array_get(slice, i));
        md = fmax(md, fabs((double)row[i * (size_t)stride] - b));
        mb = fmax(mb, fabs(b));
    }
    /* top-5 identical */
    int32_t top[5];
    for (int j = 0; j < 5; j++) {
        int32_t best = -1;
        for (int32_t i = 0; i < vocab; i++) {
            int taken = 0;
            for (int q = 0; q < j; q++)
                taken |= top[q] == i;
            if (!taken && (best < 0 || row[i] > row[best]))
                best = i;
        }
        top[j] = best;
    }
    for (int j = 0; j < 5; j++) {
        int32_t want = (int32_t)json_integer_value(json_array_get(ids, (size_t)j));
        if (top[j] != want)
            fail_msg("%s: top-%d id %d, transformers has %d", what, j + 1, top[j], want);
    }
    double sum = 0, sumsq = 0;
    for (int32_t i = 0; i < vocab; i++) {
        sum += (double)row[i];
        sumsq += (double)row[i] * (double)row[i];
    }
    double gs = json_number_value(json_object_get(rec, "sum")), gq = json_number_value(json_object_get(rec, "sumsq"));
    double rel = md / (mb > 0 ? mb : 1);
    printf("  %-36s logits rel err %.3g\n", what, rel);
    if (rel > REL_TOL)
        fail_msg("%s: logits max|a-b|/max|b| = %.3g > %.3g", what, rel, REL_TOL);
    if (fabs(sumsq - gq) > REL_TOL * gq || fabs(sum - gs) > REL_TOL * sqrt(gq * vocab))
        fail_msg("%s: logits sum %.9g / sumsq %.9g, transformers %.9g / %.9g", what, sum, sumsq, gs, gq);
}

static void cmp_hidden(const char *what, const float *row, int32_t d, json_t *rec) {
    json_t *slice = json_object_get(rec, "slice");
    double mb = 0, md = 0;
    for (size_t i = 0; i < json_array_size(slice); i++) {
        double b = json_number_value(json_array_get(slice, i));
        md = fmax(md, fabs((double)row[i] - b));
        mb = fmax(mb, fabs(b));
    }
    double sum = 0, sumsq = 0;
    for (int32_t i = 0; i < d; i++) {
        sum += (double)row[i];
        sumsq += (double)row[i] * (double)row[i];
    }
    double gs = json_number_value(json_object_get(rec, "sum")), gq = json_number_value(json_object_get(rec, "sumsq"));
    if (md > REL_TOL * (mb > 1 ? mb : 1))
        fail_msg("%s: hidden slice max|a-b| = %.3g (max|b| %.3g)", what, md, mb);
    if (fabs(sumsq - gq) > REL_TOL * gq || fabs(sum - gs) > REL_TOL * sqrt(gq * d))
        fail_msg("%s: hidden sum %.9g / sumsq %.9g, transformers %.9g / %.9g", what, sum, sumsq, gs, gq);
}

/* ---- the engine side ---- */

struct capture {
    int32_t n_pos;        /* positions to keep */
    int32_t pos[MAX_POS]; /* batch rows */
    int32_t d;            /* hidden size */
    int32_t n_names;      /* embed, layers, norm */
    float *rows;          /* [n_names][n_pos][d] */
};

static void capture_hook(void *user, const char *name, int32_t layer, const float *x, int64_t row0, int64_t rows,
                         int64_t cols) {
    struct capture *c = user;
    int32_t slot = !strcmp(name, "embed") ? 0 : !strcmp(name, "norm") ? c->n_names - 1 : layer + 1;
    for (int32_t i = 0; i < c->n_pos; i++)
        if (c->pos[i] >= row0 && c->pos[i] < row0 + rows)
            memcpy(c->rows + ((size_t)slot * (size_t)c->n_pos + (size_t)i) * (size_t)c->d,
                   x + (c->pos[i] - row0) * cols, (size_t)c->d * sizeof(float));
}

/* n tokens appended to seq, logits (full vocab) at the rows in out[] (increasing). */
static void forward(struct jev_engine *e, struct jev_seq *seq, const int32_t *ids, int32_t n, const int32_t *out,
                    int32_t n_out, float *logits) {
    int32_t *pos = malloc((size_t)n * 3 * sizeof(int32_t));
    jev_lm_text_positions(seq, n, pos);
    struct jev_lm_batch b = {.n_tokens = n,
                             .ids = ids,
                             .pos = pos,
                             .n_runs = 1,
                             .seqs = &seq,
                             .seq_len = &n,
                             .n_out = n_out,
                             .out_idx = out,
                             .logits = logits};
    struct jev_error err = {0};
    if (jev_lm_forward(&e->lm, &b, &err) != JEV_OK)
        fail_msg("forward: %s", err.msg);
    free(pos);
}

static void run_layout(const char *layout) {
    json_t *g = load_golden(layout);
    const char *tmp = getenv("JEV_TEST_DIR") ? getenv("JEV_TEST_DIR") : "build/test-data";
    const char *bin = getenv("JEV_JEV_BIN") ? getenv("JEV_JEV_BIN") : "build/jev";
    char dir[512], cmd[1400], st_path[600];
    snprintf(dir, sizeof dir, "%s/lm-golden-tiny-%s", tmp, layout);
    snprintf(cmd, sizeof cmd, "%s synth --config configs/tiny.json --seed 1 --layout %s --out %s --force >/dev/null",
             bin, layout, dir);
    assert_int_equal(system(cmd), 0);
    snprintf(st_path, sizeof st_path, "%s/model.safetensors", dir);
    char hex[JEV_SHA256_HEX];
    struct jev_error err = {0};
    assert_int_equal(jev_sha256_file(st_path, hex, &err), JEV_OK);
    const char *want =
        json_string_value(json_object_get(json_object_get(g, "safetensors_sha256"), "model.safetensors"));
    if (!want || strcmp(want, hex) != 0)
        fail_msg("%s: synth wrote sha256 %s, the golden was made from %s: regenerate the golden", layout, hex,
                 want ? want : "(none)");

    struct jev_model_params mp = jev_model_default_params();
    mp.n_threads = 2;
    mp.no_vision = true;
    struct jev_model *model = NULL;
    if (jev_model_open(dir, &mp, &model, &err) != JEV_OK)
        fail_msg("load %s: %s", dir, err.msg);
    struct jev_engine_params ep = {.max_tokens = 1024, .max_batch = 8, .prefill_chunk = 512};
    struct jev_engine *e = NULL;
    if (jev_engine_init(model, &ep, &e) != JEV_OK)
        fail_msg("engine: %s", jev_engine_last_error(e));
    const struct jev_text_config *t = &model->config.text;
    int32_t V = model->weights.text.lm_head.rows, D = t->hidden;

    /* inv_freq, bit for bit */
    json_t *bits = json_object_get(g, "inv_freq_bits");
    assert_int_equal((int32_t)json_array_size(bits), e->lm.rope.n_freq);
    for (int32_t i = 0; i < e->lm.rope.n_freq; i++) {
        uint32_t mine;
        memcpy(&mine, &e->lm.rope.inv_freq[i], 4);
        uint32_t theirs = (uint32_t)json_integer_value(json_array_get(bits, (size_t)i));
        if (mine != theirs)
            fail_msg("%s: inv_freq[%d] = 0x%08x (%.9g), torch 0x%08x", layout, i, mine, (double)e->lm.rope.inv_freq[i],
                     theirs);
    }

    int32_t n_prompt, n_posi;
    int32_t *prompt = int_array(json_object_get(g, "prompt"), &n_prompt);
    int32_t *posi = int_array(json_object_get(g, "positions"), &n_posi);
    assert_true(n_posi <= MAX_POS);
    float *logits = malloc((size_t)MAX_POS * (size_t)V * sizeof(float));
    char what[128];

    /* (a) one-piece prefill with per-layer capture */
    struct capture cap = {.n_pos = n_posi, .d = D, .n_names = t->n_layers + 2};
    memcpy(cap.pos, posi, (size_t)n_posi * sizeof(int32_t));
    cap.rows = malloc((size_t)cap.n_names * (size_t)n_posi * (size_t)D * sizeof(float));
    e->lm.hook = capture_hook;
    e->lm.hook_user = &cap;
    struct jev_seq *seq;
    assert_int_equal(jev_seq_new(&e->state, &seq, &err), JEV_OK);
    forward(e, seq, prompt, n_prompt, posi, n_posi, logits);
    e->lm.hook = NULL;
    json_t *pre = json_object_get(g, "prefill");
    for (int32_t k = 0; k < cap.n_names; k++) {
        char name[32];
        if (k == 0)
            snprintf(name, sizeof name, "embed");
        else if (k == cap.n_names - 1)
            snprintf(name, sizeof name, "norm");
        else
            snprintf(name, sizeof name, "layer%d", k - 1);
        for (int32_t i = 0; i < n_posi; i++) {
            char key[16];
            snprintf(key, sizeof key, "%d", posi[i]);
            snprintf(what, sizeof what, "%s prefill %s pos %d", layout, name, posi[i]);
            cmp_hidden(what, cap.rows + ((size_t)k * (size_t)n_posi + (size_t)i) * (size_t)D, D,
                       json_object_get(json_object_get(json_object_get(pre, "hidden"), name), key));
        }
    }
    for (int32_t i = 0; i < n_posi; i++) {
        char key[16];
        snprintf(key, sizeof key, "%d", posi[i]);
        snprintf(what, sizeof what, "%s prefill pos %d", layout, posi[i]);
        cmp_logits(what, logits + (size_t)i * (size_t)V, V, json_object_get(json_object_get(pre, "logits"), key));
    }

    /* (c) decode the golden's greedy tokens on the same sequence */
    json_t *dec = json_object_get(g, "decode");
    int32_t n_dec;
    int32_t *dec_tok = int_array(json_object_get(dec, "tokens"), &n_dec);
    for (int32_t i = 0; i < n_dec; i++) {
        int32_t zero = 0;
        forward(e, seq, &dec_tok[i], 1, &zero, 1, logits);
        snprintf(what, sizeof what, "%s decode step %d", layout, i);
        cmp_logits(what, logits, V, json_array_get(json_object_get(dec, "logits"), (size_t)i));
    }
    jev_seq_free(seq);

    /* (b) chunks */
    json_t *ch = json_object_get(g, "chunks");
    int32_t n_sizes;
    int32_t *sizes = int_array(json_object_get(ch, "sizes"), &n_sizes);
    assert_int_equal(jev_seq_new(&e->state, &seq, &err), JEV_OK);
    int32_t at = 0;
    for (int32_t c = 0; c < n_sizes; c++) {
        int32_t outs[MAX_POS], n_out = 0;
        const char *key;
        json_t *rec;
        json_object_foreach(json_object_get(ch, "logits"), key, rec) {
            int32_t p = atoi(key);
            if (p >= at && p < at + sizes[c] && n_out < MAX_POS)
                outs[n_out++] = p - at;
        }
        for (int32_t i = 1; i < n_out; i++) /* increasing rows (the script writes them sorted anyway) */
            for (int32_t q = i; q > 0 && outs[q - 1] > outs[q]; q--) {
                int32_t tmpv = outs[q];
                outs[q] = outs[q - 1];
                outs[q - 1] = tmpv;
            }
        forward(e, seq, prompt + at, sizes[c], outs, n_out, logits);
        for (int32_t i = 0; i < n_out; i++) {
            char k2[16];
            snprintf(k2, sizeof k2, "%d", outs[i] + at);
            snprintf(what, sizeof what, "%s chunks pos %d", layout, outs[i] + at);
            cmp_logits(what, logits + (size_t)i * (size_t)V, V, json_object_get(json_object_get(ch, "logits"), k2));
        }
        at += sizes[c];
    }
    assert_int_equal(at, n_prompt);
    jev_seq_free(seq);

    /* (d) forks of a prefix, all suffixes in one batch */
    json_t *fk = json_object_get(g, "forks");
    int32_t n_prefix = (int32_t)json_integer_value(json_object_get(fk, "prefix"));
    json_t *sufs = json_object_get(fk, "suffixes");
    int32_t n_kids = (int32_t)json_array_size(sufs);
    assert_true(n_kids <= 8);
    struct jev_seq *parent, *kids[8];
    assert_int_equal(jev_seq_new(&e->state, &parent, &err), JEV_OK);
    forward(e, parent, prompt, n_prefix, NULL, 0, NULL);
    int32_t ids[512], pos[512 * 3], lens[8], outs[MAX_POS], n_out = 0, total = 0;
    int32_t out_kid[MAX_POS], out_local[MAX_POS];
    for (int32_t k = 0; k < n_kids; k++) {
        assert_int_equal(jev_seq_fork(parent, &kids[k], &err), JEV_OK);
        int32_t *s = int_array(json_array_get(sufs, (size_t)k), &lens[k]);
        assert_true(total + lens[k] <= 512);
        memcpy(ids + total, s, (size_t)lens[k] * sizeof(int32_t));
        jev_lm_text_positions(kids[k], lens[k], pos + total * 3);
        const char *key;
        json_t *rec;
        json_object_foreach(json_array_get(json_object_get(fk, "logits"), (size_t)k), key, rec) {
            assert_true(n_out < MAX_POS);
            out_kid[n_out] = k;
            out_local[n_out] = atoi(key);
            outs[n_out++] = total + atoi(key);
        }
        total += lens[k];
        free(s);
    }
    struct jev_lm_batch b = {.n_tokens = total,
                             .ids = ids,
                             .pos = pos,
                             .n_runs = n_kids,
                             .seqs = kids,
                             .seq_len = lens,
                             .n_out = n_out,
                             .out_idx = outs,
                             .logits = logits};
    if (jev_lm_forward(&e->lm, &b, &err) != JEV_OK)
        fail_msg("fork batch: %s", err.msg);
    for (int32_t i = 0; i < n_out; i++) {
        char key[16];
        snprintf(key, sizeof key, "%d", out_local[i]);
        snprintf(what, sizeof what, "%s fork %d suffix pos %d", layout, out_kid[i], out_local[i]);
        cmp_logits(what, logits + (size_t)i * (size_t)V, V,
                   json_object_get(json_array_get(json_object_get(fk, "logits"), (size_t)out_kid[i]), key));
    }
    for (int32_t k = 0; k < n_kids; k++)
        jev_seq_free(kids[k]);
    jev_seq_free(parent);

    free(sizes);
    free(dec_tok);
    free(cap.rows);
    free(logits);
    free(prompt);
    free(posi);
    jev_engine_free(e);
    jev_model_free(model);
    json_decref(g);
}

static void test_golden_hf(void **state) {
    (void)state;
    run_layout("hf");
}

static void test_golden_mlx4(void **state) {
    (void)state;
    run_layout("mlx4");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_hf),
        cmocka_unit_test(test_golden_mlx4),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
