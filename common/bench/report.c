/*
 * report.c - Markdown from validated "jev-bench/2" (and /1) records: the seed's
 * medians table, every latency sample, agreement and failures, an
 * environment block, and a side-by-side table with ratios. Also the pieces
 * the plot (report-svg.c) shares: the text buffer, sources and labels.
 *
 * What it is: pure formatting over json_t trees that jev_bench_validate
 * accepted; every type and range used here was checked there, so this file
 * does not re-check them. Text goes into a growing buffer with a hard cap.
 *
 * What it is not: the runner, or a statistics package. The only statistic is
 * the median (mean of the two middle samples for an even count).
 *
 * Constraints: deterministic output for a given input (no dates, no host
 * data), so that tests can compare it and reports can be diffed. Number
 * formats follow the seed's published table: ms with one decimal, forwards
 * as integers, GB (10^9 bytes) and decisions/s with two decimals, valid runs
 * as "valid/samples".
 */
#include "common/bench/report.h" // defines: jev_report_markdown, jev_report_median

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bench/report-int.h" // defines: struct jev_report_src, jev_report_buf_finish
#include "common/bench/schema.h"     // defines: JEV_BENCH_MAX_*, JEV_BENCH_PATH_*

/* ---- text buffer ---- */

/* Hands the text to the caller, or fails (the text is freed) when an append failed. */
enum jev_status jev_report_buf_finish(struct jev_buf *b, const char *what, char **out, size_t *len,
                                      struct jev_error *err) {
    struct jev_error inner = {0};
    enum jev_status s = jev_buf_take(b, out, len, &inner);
    return s == JEV_OK ? JEV_OK : jev_fail(err, s, "%s: %s", what, inner.msg);
}

/* Outside text in Markdown: no table breaks, no HTML, no control bytes. */
static void md_text(struct jev_buf *b, const char *s) {
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '|')
            jev_buf_add_str(b, "\\|", NULL);
        else if (c == '<')
            jev_buf_add_str(b, "&lt;", NULL);
        else if (c == '>')
            jev_buf_add_str(b, "&gt;", NULL);
        else if (c == '&')
            jev_buf_add_str(b, "&amp;", NULL);
        else if (c == '`')
            jev_buf_add_str(b, "'", NULL);
        else if (c < 0x20 || c == 0x7f)
            jev_buf_add_str(b, " ", NULL);
        else
            jev_buf_add(b, s, 1, NULL);
    }
}

/* ---- medians ---- */

/* qsort order for doubles (validated values are finite: no NaN ordering issue). */
static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median rule of the report (and of docs/bench-report.md): sort, take
 * the middle, or the mean of the two middle values for an even count. */
double jev_report_median(double *v, size_t n) {
    if (n == 0)
        return NAN;
    qsort(v, n, sizeof *v, cmp_double);
    if (n % 2)
        return v[n / 2];
    return 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The medians table's numeric columns, in the seed's order. */
enum { M_TOTAL, M_VISION, M_PREFILL, M_SCORING, M_LM, M_VISFWD, M_PEAK, M_REQ, M_N };
static const char *const m_keys[M_N] = {"total_ms",    "vision_ms",       "prefill_ms", "scoring_ms",
                                        "lm_forwards", "vision_forwards", "peak_bytes", "requested_decisions_per_s"};
static const char *const m_titles[M_N] = {"Total ms",    "Vision ms",       "Prefill ms", "Scoring/decode ms",
                                          "LM forwards", "Vision forwards", "Peak GB",    "Requested decisions/s"};

enum { FROM_NONE, FROM_SAMPLES, FROM_PUBLISHED };

/* One (decisions, path) row of the medians table. */
struct row {
    double med[M_N];         /* the column's value; NAN: not recorded */
    unsigned char from[M_N]; /* FROM_*: where med came from */
    double published[M_N];   /* run.published_medians, NAN when absent (for the consistency note) */
    int n_valid;             /* samples with valid = true */
    int n_samples;           /* samples in the run */
};

/* Fills one medians-table row from a run. A column is computed from the
 * samples only when every sample has it: a median over a subset would mix
 * populations. Otherwise the run's published median is used, if any. */
static void row_compute(const json_t *run, struct row *r) {
    const json_t *samples = json_object_get(run, "samples");
    const json_t *pm = json_object_get(run, "published_medians");
    size_t n = json_array_size(samples);
    double v[JEV_BENCH_MAX_REPEATS];
    r->n_samples = (int)n;
    r->n_valid = 0;
    for (size_t i = 0; i < n; i++)
        r->n_valid += json_is_true(json_object_get(json_array_get(samples, i), "valid"));
    for (int m = 0; m < M_N; m++) {
        bool all = n > 0;
        for (size_t i = 0; i < n && all; i++) {
            const json_t *x = json_object_get(json_array_get(samples, i), m_keys[m]);
            all = json_is_number(x);
            if (all)
                v[i] = json_number_value(x);
        }
        const json_t *p = pm ? json_object_get(pm, m_keys[m]) : NULL;
        r->published[m] = p ? json_number_value(p) : (double)NAN;
        if (all) {
            r->med[m] = jev_report_median(v, n);
            r->from[m] = FROM_SAMPLES;
        } else if (p) {
            r->med[m] = r->published[m];
            r->from[m] = FROM_PUBLISHED;
        } else {
            r->med[m] = NAN;
            r->from[m] = FROM_NONE;
        }
    }
}

/* A cell of the medians table in the seed's format. */
static void fmt_cell(int m, double x, char out[48]) {
    if (isnan(x)) {
        snprintf(out, 48, "n/a");
        return;
    }
    switch (m) {
    case M_LM:
    case M_VISFWD: snprintf(out, 48, x == floor(x) ? "%.0f" : "%.1f", x); break;
    case M_PEAK: snprintf(out, 48, "%.2f", x / 1e9); break;
    case M_REQ: snprintf(out, 48, "%.2f", x); break;
    default: snprintf(out, 48, "%.1f", x); break;
    }
}

/* ---- record access ---- */

/* The run of (decisions, path) in a record, or NULL. Linear: a record has
 * at most 64 x 16 runs, and the tables ask for each a handful of times. */
const json_t *jev_report_run(const json_t *doc, long long decisions, const char *path) {
    const json_t *runs = json_object_get(doc, "runs");
    for (size_t i = 0; i < json_array_size(runs); i++) {
        const json_t *run = json_array_get(runs, i);
        if (json_integer_value(json_object_get(run, "decisions")) == decisions &&
            !strcmp(json_string_value(json_object_get(run, "path")), path))
            return run;
    }
    return NULL;
}

/* environment[key] of a record. */
static const json_t *env_get(const json_t *doc, const char *key) {
    return json_object_get(json_object_get(doc, "environment"), key);
}

/* A string or NULL (for null) at environment[.obj].key. */
static const char *env_str(const json_t *doc, const char *obj, const char *key) {
    const json_t *o = obj ? env_get(doc, obj) : json_object_get(doc, "environment");
    return json_string_value(json_object_get(o, key));
}

/* settings[key] of a record. */
const json_t *jev_report_setting(const json_t *doc, const char *key) {
    return json_object_get(json_object_get(doc, "settings"), key);
}

/* The file's memory kind ("cpu", "cuda", "metal") or NULL when none recorded. */
static const char *peak_kind(const json_t *doc) {
    const json_t *runs = json_object_get(doc, "runs");
    for (size_t i = 0; i < json_array_size(runs); i++) {
        const json_t *samples = json_object_get(json_array_get(runs, i), "samples");
        for (size_t j = 0; j < json_array_size(samples); j++) {
            const char *w = json_string_value(json_object_get(json_array_get(samples, j), "peak_where"));
            if (w)
                return w;
        }
    }
    return NULL;
}

/* The memory column's header names the kind, as the seed's "Peak Metal GB"
 * does, so numbers of different kinds are never read as comparable. */
static const char *peak_title(const char *kind) {
    if (kind == NULL)
        return "Peak GB";
    if (!strcmp(kind, "metal"))
        return "Peak Metal GB";
    if (!strcmp(kind, "cuda"))
        return "Peak CUDA GB";
    return "Peak CPU GB";
}

/* The sentence under the table that says what the memory figure is and is not. */
static const char *peak_meaning(const char *kind) {
    if (kind == NULL)
        return "not recorded";
    if (!strcmp(kind, "metal"))
        return "peak live Metal allocation, not RSS or total unified memory";
    if (!strcmp(kind, "cuda"))
        return "peak CUDA device memory allocated by the engine, not the driver's total";
    return "peak of the engine's own CPU allocations, not process RSS";
}

/* ---- sources ---- */

/* True when no (decisions, path) row of record a is also a row of record b. */
static bool rows_disjoint(const json_t *a, const json_t *b) {
    const json_t *runs = json_object_get(a, "runs");
    for (size_t k = 0; k < json_array_size(runs); k++) {
        const json_t *r = json_array_get(runs, k);
        if (jev_report_run(b, json_integer_value(json_object_get(r, "decisions")),
                    json_string_value(json_object_get(r, "path"))))
            return false;
    }
    return true;
}

/* Files then the reference. A file joins the series of an earlier one with the same label when
 * their rows are disjoint (one system measured in two runs, e.g. counts 1 4 16, then 64); other
 * labels are made unique with " #2", " #3". */
int jev_report_sources(const struct jev_report_params *p, struct jev_report_src *s) {
    int n = 0;
    for (int32_t i = 0; i < p->n_files && n < JEV_REPORT_MAX_SOURCES; i++, n++) {
        s[n].doc = p->files[i].doc;
        s[n].name = p->files[i].name;
        s[n].reference = false;
    }
    if (p->reference && n < JEV_REPORT_MAX_SOURCES) {
        s[n].doc = p->reference->doc;
        s[n].name = p->reference->name;
        s[n].reference = true;
        n++;
    }
    for (int i = 0; i < n; i++) {
        const char *peer = env_str(s[i].doc, "peer", "name");
        const char *backend = env_str(s[i].doc, NULL, "backend");
        const char *mode = json_string_value(jev_report_setting(s[i].doc, "precision"));
        bool fast = mode && !strcmp(mode, "fast"); /* fast is its own series: never one line with exact */
        char base[104];
        snprintf(base, sizeof base, "%.40s %.40s%s%s", peer ? peer : "jev", backend, fast ? " fast" : "",
                 s[i].reference ? " (reference)" : "");
        s[i].series = i;
        int same = 0;
        for (int j = 0; j < i && s[i].series == i; j++) {
            if (s[j].series != j || strcmp(s[j].base, base))
                continue;
            bool disjoint = !s[j].reference && !s[i].reference;
            for (int m = j; m < i && disjoint; m++)
                disjoint = s[m].series != j || rows_disjoint(s[i].doc, s[m].doc);
            if (disjoint)
                s[i].series = j;
            else
                same++;
        }
        snprintf(s[i].base, sizeof s[i].base, "%s", base);
        char label[sizeof s[i].label]; /* a series' label is its first file's (copied, not aliased) */
        if (s[i].series != i)
            memcpy(label, s[s[i].series].label, sizeof label);
        else if (same)
            snprintf(label, sizeof label, "%s #%d", base, same + 1);
        else
            snprintf(label, sizeof label, "%s", base);
        memcpy(s[i].label, label, sizeof label);
    }
    return n;
}

double jev_report_series_median(const struct jev_report_src *s, int n, int head, long long d, const char *path) {
    for (int i = head; i < n; i++)
        if (s[i].series == head && jev_report_run(s[i].doc, d, path))
            return jev_report_total_median(s[i].doc, d, path);
    return NAN;
}

/* The kind of device a source ran on: its backend up to a '-' or ':' ("cuda-f32", "cuda:1" -> "cuda"). */
static size_t device_kind(const json_t *doc, const char **kind) {
    const char *b = env_str(doc, NULL, "backend");
    *kind = b ? b : "";
    return strcspn(*kind, "-:");
}

/* The base of ratios: the first file that is jev's own record, else the first. */
static int base_index(const struct jev_report_src *s, int n) {
    for (int i = 0; i < n; i++)
        if (!s[i].reference && json_is_null(env_get(s[i].doc, "peer")))
            return i;
    return 0;
}

/* The base of one column's ratios: jev's first series on the same kind of device (a GPU peer is
 * set against jev on the GPU), else the report's base; a jev column's own base is the report's. */
static int ratio_base(const struct jev_report_src *s, int n, int i, int base) {
    const char *ki, *kj;
    size_t li = device_kind(s[i].doc, &ki);
    for (int j = 0; j < n; j++) {
        size_t lj = device_kind(s[j].doc, &kj);
        if (j != i && s[j].series == j && !s[j].reference && json_is_null(env_get(s[j].doc, "peer")) && li == lj &&
            !strncmp(ki, kj, li))
            return j;
    }
    return base;
}

/* ---- Markdown: one file ---- */

/* The environment block: everything a reader needs to judge whether two
 * records are comparable (engine, model and hashes, image, hardware,
 * software, settings). Missing values are spelled "not recorded". */
static void md_environment(struct jev_buf *b, const json_t *doc) {
    const json_t *env = json_object_get(doc, "environment");
    const json_t *peer = json_object_get(env, "peer");
    const char *jv = env_str(doc, "jev", "version"), *commit = env_str(doc, "jev", "git_commit");
    jev_buf_add_str(b, "### Environment\n\n", NULL);
    if (json_is_object(peer)) {
        const char *pv = json_string_value(json_object_get(peer, "version"));
        jev_buf_add_str(b, "- Peer: ", NULL);
        md_text(b, json_string_value(json_object_get(peer, "name")));
        jev_buf_add_str(b, " ", NULL);
        md_text(b, pv ? pv : "(version not recorded)");
        jev_buf_add_str(b, "; jev harness ", NULL);
    } else {
        jev_buf_add_str(b, "- Engine: jev ", NULL);
    }
    md_text(b, jv ? jv : "(version not recorded)");
    jev_buf_add_str(b, ", commit ", NULL);
    md_text(b, commit ? commit : "not recorded");
    jev_buf_add_str(b, "\n", NULL);

    const json_t *model = json_object_get(env, "model");
    const json_t *syn = json_object_get(model, "synthetic");
    const char *dir = json_string_value(json_object_get(model, "dir"));
    jev_buf_add_str(b, "- Model: ", NULL);
    md_text(b, json_string_value(json_object_get(model, "id")));
    jev_buf_add_str(b,
                    json_is_true(syn)    ? " (synthetic: seeded random weights)"
                    : json_is_false(syn) ? " (real weights)"
                                         : "",
                    NULL);
    if (dir) {
        jev_buf_add_str(b, " from ", NULL);
        md_text(b, dir);
    }
    jev_buf_add_str(b, "\n", NULL);
    const json_t *weights = json_object_get(model, "weights");
    if (json_array_size(weights) == 0)
        jev_buf_add_str(b, "- Weight files: not recorded\n", NULL);
    for (size_t i = 0; i < json_array_size(weights); i++) {
        const json_t *w = json_array_get(weights, i);
        const char *sha = json_string_value(json_object_get(w, "sha256"));
        const json_t *bytes = json_object_get(w, "bytes");
        jev_buf_add_str(b, "- Weight file ", NULL);
        md_text(b, json_string_value(json_object_get(w, "file")));
        if (json_is_integer(bytes))
            jev_buf_printf(b, NULL, " (%lld bytes)", (long long)json_integer_value(bytes));
        jev_buf_printf(b, NULL, ": sha256 %s\n", sha ? sha : "not recorded");
    }

    const json_t *image = json_object_get(env, "image");
    const char *ipath = json_string_value(json_object_get(image, "path"));
    const char *isha = json_string_value(json_object_get(image, "sha256"));
    jev_buf_add_str(b, "- Image: ", NULL);
    md_text(b, ipath ? ipath : "path not recorded");
    const json_t *w = json_object_get(image, "width"), *h = json_object_get(image, "height");
    const json_t *rw = json_object_get(image, "resized_width"), *rh = json_object_get(image, "resized_height");
    if (json_is_integer(w) && json_is_integer(h))
        jev_buf_printf(b, NULL, ", %lldx%lld", (long long)json_integer_value(w), (long long)json_integer_value(h));
    if (json_is_integer(rw) && json_is_integer(rh))
        jev_buf_printf(b, NULL, ", resized to %lldx%lld", (long long)json_integer_value(rw),
                       (long long)json_integer_value(rh));
    jev_buf_printf(b, NULL, ", sha256 %s\n", isha ? isha : "not recorded");

    const json_t *cpu = json_object_get(env, "cpu");
    const char *cm = json_string_value(json_object_get(cpu, "model"));
    const json_t *cores = json_object_get(cpu, "cores"), *threads = json_object_get(cpu, "threads");
    jev_buf_add_str(b, "- Backend: ", NULL);
    md_text(b, env_str(doc, NULL, "backend"));
    jev_buf_add_str(b, "; CPU: ", NULL);
    md_text(b, cm ? cm : "not recorded");
    if (json_is_integer(cores))
        jev_buf_printf(b, NULL, ", %lld cores", (long long)json_integer_value(cores));
    if (json_is_integer(threads))
        jev_buf_printf(b, NULL, ", %lld threads used", (long long)json_integer_value(threads));
    const json_t *gpu = json_object_get(env, "gpu");
    jev_buf_add_str(b, "; GPU: ", NULL);
    if (json_is_object(gpu)) {
        const char *drv = json_string_value(json_object_get(gpu, "driver"));
        const json_t *mem = json_object_get(gpu, "memory_bytes");
        md_text(b, json_string_value(json_object_get(gpu, "name")));
        if (drv) {
            jev_buf_add_str(b, ", driver ", NULL);
            md_text(b, drv);
        }
        if (json_is_integer(mem))
            jev_buf_printf(b, NULL, ", %.1f GB", (double)json_integer_value(mem) / 1e9);
    } else {
        jev_buf_add_str(b, "none", NULL);
    }
    jev_buf_add_str(b, "\n", NULL);

    static const char *const plain[][2] = {
        {"compiler", "Compiler"}, {"os", "OS"}, {"machine", "Machine"}, {"date", "Date"}};
    for (size_t i = 0; i < 4; i++) {
        const char *v = env_str(doc, NULL, plain[i][0]);
        jev_buf_printf(b, NULL, "- %s: ", plain[i][1]);
        md_text(b, v ? v : "not recorded");
        jev_buf_add_str(b, "\n", NULL);
    }
    const json_t *libs = json_object_get(env, "libraries");
    jev_buf_add_str(b, "- Libraries: ", NULL);
    if (json_object_size(libs) == 0)
        jev_buf_add_str(b, "not recorded", NULL);
    const char *key;
    const json_t *v;
    bool first = true;
    json_object_foreach((json_t *)(uintptr_t)libs, key, v) {
        jev_buf_add_str(b, first ? "" : ", ", NULL);
        md_text(b, key);
        jev_buf_add_str(b, " ", NULL);
        md_text(b, json_string_value(v));
        first = false;
    }
    jev_buf_add_str(b, "\n", NULL);

    /* settings, in one line */
    const json_t *counts = jev_report_setting(doc, "counts");
    jev_buf_add_str(b, "- Settings: decisions ", NULL);
    for (size_t i = 0; i < json_array_size(counts); i++)
        jev_buf_printf(b, NULL, "%s%lld", i ? ", " : "", (long long)json_integer_value(json_array_get(counts, i)));
    const json_t *batch = jev_report_setting(doc, "batch");
    jev_buf_printf(b, NULL, "; %lld measured repeats per row, order %s, after %lld warm-up run(s) per path; batch ",
                   (long long)json_integer_value(jev_report_setting(doc, "repeats")),
                   json_string_value(jev_report_setting(doc, "order")),
                   (long long)json_integer_value(jev_report_setting(doc, "warmup")));
    if (json_is_string(batch))
        jev_buf_add_str(b, "all", NULL);
    else
        jev_buf_printf(b, NULL, "%lld", (long long)json_integer_value(batch));
    jev_buf_printf(b, NULL, "; scoring %s; image within %lldx%lld",
                   json_string_value(jev_report_setting(doc, "scoring")),
                   (long long)json_integer_value(jev_report_setting(doc, "image_max_side")),
                   (long long)json_integer_value(jev_report_setting(doc, "image_max_side")));
    const json_t *chunk = jev_report_setting(doc, "prefill_chunk");
    const json_t *mn = jev_report_setting(doc, "max_new_tokens_min"),
                 *mp = jev_report_setting(doc, "max_new_tokens_per_decision");
    if (json_is_integer(chunk))
        jev_buf_printf(b, NULL, "; generate prefill chunk %lld tokens", (long long)json_integer_value(chunk));
    if (json_is_integer(mn) && json_is_integer(mp))
        jev_buf_printf(b, NULL, "; generate at most max(%lld, %lld x decisions) new tokens",
                       (long long)json_integer_value(mn), (long long)json_integer_value(mp));
    const char *wl = json_string_value(jev_report_setting(doc, "workload"));
    if (wl) {
        jev_buf_add_str(b, "; workload ", NULL);
        md_text(b, wl);
    }
    const char *mode = json_string_value(jev_report_setting(doc, "precision"));
    if (mode) /* a jev-bench/1 record, or a peer's null, says nothing */
        jev_buf_printf(b, NULL, "; precision %s", mode);
    jev_buf_add_str(b, "\n\n", NULL);
}

/* The medians table in the seed's columns and number formats, then the
 * notes: the median rule, what decisions/s means, what the memory column
 * measures, which columns are published medians, and any disagreement
 * between a published median and the samples. */
static void md_medians(struct jev_buf *b, const json_t *doc) {
    const json_t *counts = jev_report_setting(doc, "counts"), *paths = jev_report_setting(doc, "paths");
    const char *kind = peak_kind(doc);
    bool published[M_N] = {false};
    int n_samples = -1;
    bool even = false;

    jev_buf_add_str(b, "### Medians\n\n| Decisions | Path |", NULL);
    for (int m = 0; m < M_N; m++)
        jev_buf_printf(b, NULL, " %s |", m == M_PEAK ? peak_title(kind) : m_titles[m]);
    jev_buf_add_str(b, " Valid runs |\n|---:|---|", NULL);
    for (int m = 0; m <= M_N; m++)
        jev_buf_add_str(b, "---:|", NULL);
    jev_buf_add_str(b, "\n", NULL);
    struct jev_buf warn;
    jev_buf_init(&warn, JEV_REPORT_MAX_BYTES);
    for (size_t c = 0; c < json_array_size(counts); c++) {
        long long d = json_integer_value(json_array_get(counts, c));
        for (size_t p = 0; p < json_array_size(paths); p++) {
            const char *path = json_string_value(json_array_get(paths, p));
            struct row r;
            row_compute(jev_report_run(doc, d, path), &r);
            n_samples = r.n_samples;
            even |= r.n_samples % 2 == 0;
            jev_buf_printf(b, NULL, "| %lld | %s |", d, path);
            for (int m = 0; m < M_N; m++) {
                char cell[48], pub[48];
                fmt_cell(m, r.med[m], cell);
                jev_buf_printf(b, NULL, " %s |", cell);
                published[m] |= r.from[m] == FROM_PUBLISHED;
                if (r.from[m] == FROM_SAMPLES && !isnan(r.published[m])) {
                    fmt_cell(m, r.published[m], pub);
                    if (strcmp(cell, pub))
                        jev_buf_printf(&warn, NULL,
                                       "- Warning: (%lld, %s) %s: the samples give %s, the published median is %s.\n",
                                       d, path, m_titles[m], cell, pub);
                }
            }
            jev_buf_printf(b, NULL, " %d/%d |\n", r.n_valid, r.n_samples);
        }
    }
    jev_buf_printf(b, NULL,
                   "\nValues are medians of the %d samples of each row%s. Phase medians need not sum to the total "
                   "median. Requested decisions/s = decisions / total time; it is not completed throughput when "
                   "generation fails (an invalid sample has valid_decisions_per_s = 0). %s = peak bytes / 10^9: %s.\n",
                   n_samples, even ? " (even count: the mean of the two middle samples)" : "", peak_title(kind),
                   peak_meaning(kind));
    bool any = false;
    for (int m = 0; m < M_N; m++)
        any |= published[m];
    if (any) {
        jev_buf_add_str(b, "\nMedians only: the file publishes no samples for", NULL);
        bool first = true;
        for (int m = 0; m < M_N; m++) {
            if (!published[m])
                continue;
            jev_buf_printf(b, NULL, "%s %s", first ? "" : ",", m == M_PEAK ? peak_title(kind) : m_titles[m]);
            first = false;
        }
        jev_buf_add_str(b, "; those cells are its published medians (runs[].published_medians), not computed here.\n",
                        NULL);
    }
    if (warn.len || warn.failed) {
        jev_buf_add_str(b, "\n", NULL);
        jev_buf_add_buf(b, &warn, NULL); /* a failure of the warnings fails the report */
    }
    jev_buf_free(&warn);
    jev_buf_add_str(b, "\n", NULL);
}

/* Every total_ms sample of every row, in repeat order, as the seed publishes them. */
static void md_samples(struct jev_buf *b, const json_t *doc) {
    const json_t *counts = jev_report_setting(doc, "counts"), *paths = jev_report_setting(doc, "paths");
    jev_buf_add_str(b, "### Every latency sample (ms)\n\n| Decisions | Path | Samples |\n|---:|---|---|\n", NULL);
    for (size_t c = 0; c < json_array_size(counts); c++) {
        long long d = json_integer_value(json_array_get(counts, c));
        for (size_t p = 0; p < json_array_size(paths); p++) {
            const char *path = json_string_value(json_array_get(paths, p));
            const json_t *samples = json_object_get(jev_report_run(doc, d, path), "samples");
            double v[JEV_BENCH_MAX_REPEATS];
            size_t n = json_array_size(samples);
            /* repeats are exactly 0..n-1 (validated): place each at its repeat */
            for (size_t i = 0; i < n; i++) {
                const json_t *s = json_array_get(samples, i);
                v[json_integer_value(json_object_get(s, "repeat"))] = json_number_value(json_object_get(s, "total_ms"));
            }
            jev_buf_printf(b, NULL, "| %lld | %s | ", d, path);
            for (size_t i = 0; i < n; i++)
                jev_buf_printf(b, NULL, "%s%.1f", i ? ", " : "", v[i]);
            jev_buf_add_str(b, " |\n", NULL);
        }
    }
    jev_buf_add_str(b, "\nSamples in repeat order (0, 1, ...). No best-run selection.\n\n", NULL);
}

/* "1.0", "0.875": at least one decimal, at most three, no trailing zeros. */
static void fmt_fraction(double x, char out[32]) {
    snprintf(out, 32, "%.3f", x);
    size_t n = strlen(out);
    while (n > 0 && out[n - 1] == '0' && out[n - 2] != '.')
        out[--n] = '\0';
}

/* A fenced block of generated text: a fence longer than any backtick run in it. */
static void md_output_block(struct jev_buf *b, const char *s) {
    size_t run = 0, longest = 0, n = strlen(s);
    for (size_t i = 0; i < n; i++) {
        run = s[i] == '`' ? run + 1 : 0;
        longest = run > longest ? run : longest;
    }
    size_t fence = longest < 3 ? 3 : longest + 1;
    size_t shown = n;
    const size_t max_shown = 4000;
    if (shown > max_shown) {
        shown = max_shown;
        while (shown > 0 && ((unsigned char)s[shown] & 0xC0) == 0x80) /* cut on a UTF-8 boundary */
            shown--;
    }
    for (size_t i = 0; i < fence; i++)
        jev_buf_add_str(b, "`", NULL);
    jev_buf_add_str(b, "text\n", NULL);
    for (size_t i = 0; i < shown; i++) {
        unsigned char c = (unsigned char)s[i];
        jev_buf_add(b, (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f ? "?" : s + i, 1, NULL);
    }
    jev_buf_add_str(b, "\n", NULL);
    for (size_t i = 0; i < fence; i++)
        jev_buf_add_str(b, "`", NULL);
    jev_buf_add_str(b, "\n", NULL);
    if (shown < n)
        jev_buf_printf(b, NULL, "(%zu more bytes in the raw file)\n", n - shown);
    jev_buf_add_str(b, "\n", NULL);
}

/* A fast record's line under a count: per path, fast's largest probability delta and argmax
 * agreement against the exact run of the same request. Nothing for an exact record (null). */
static void md_vs_exact(struct jev_buf *b, const json_t *paths, const json_t *fx) {
    if (!json_is_object(fx))
        return;
    jev_buf_add_str(b, "  - fast vs exact:", NULL);
    for (size_t p = 0; p < json_array_size(paths); p++) {
        const char *path = json_string_value(json_array_get(paths, p));
        const json_t *e = json_object_get(fx, path);
        const json_t *delta = json_object_get(e, "max_prob_delta"), *arg = json_object_get(e, "argmax_agreement");
        jev_buf_printf(b, NULL, "%s %s maximum probability delta ", p ? ";" : "", path);
        if (json_is_number(delta))
            jev_buf_printf(b, NULL, "%.8f", json_number_value(delta));
        else
            jev_buf_add_str(b, "n/a", NULL);
        jev_buf_add_str(b, ", argmax agreement ", NULL);
        if (json_is_number(arg))
            jev_buf_printf(b, NULL, "%.1f%%", 100.0 * json_number_value(arg));
        else
            jev_buf_add_str(b, "n/a", NULL);
    }
    jev_buf_add_str(b, ".\n", NULL);
}

/* Agreement per decision count (the seed's bullet lines), then failure
 * counts per path and the first failed output of each count: failed
 * outputs are evidence and are shown verbatim, never summarized away. */
static void md_agreement(struct jev_buf *b, const json_t *doc) {
    const json_t *counts = jev_report_setting(doc, "counts"), *paths = jev_report_setting(doc, "paths");
    const json_t *ag = json_object_get(doc, "agreement");
    jev_buf_add_str(b, "### Semantic agreement and failures\n\n", NULL);
    for (size_t c = 0; c < json_array_size(counts); c++) {
        long long d = json_integer_value(json_array_get(counts, c));
        const json_t *a = NULL;
        for (size_t i = 0; i < json_array_size(ag) && !a; i++)
            if (json_integer_value(json_object_get(json_array_get(ag, i), "decisions")) == d)
                a = json_array_get(ag, i);
        const json_t *delta = json_object_get(a, "direct_shared_max_prob_delta");
        const json_t *arg = json_object_get(a, "argmax_agreement");
        const json_t *gen = json_object_get(a, "generated_shared_agreement");
        jev_buf_printf(b, NULL, "- %lld decisions: direct/shared maximum probability delta ", d);
        if (json_is_number(delta))
            jev_buf_printf(b, NULL, "%.8f", json_number_value(delta));
        else
            jev_buf_add_str(b, "n/a", NULL);
        jev_buf_add_str(b, "; argmax agreement ", NULL);
        if (json_is_number(arg))
            jev_buf_printf(b, NULL, "%.1f%%", 100.0 * json_number_value(arg));
        else
            jev_buf_add_str(b, "n/a", NULL);
        jev_buf_add_str(b, "; generated/shared agreement ", NULL);
        if (json_is_number(gen)) {
            char f[32];
            fmt_fraction(json_number_value(gen), f);
            jev_buf_add_str(b, f, NULL);
        } else {
            jev_buf_add_str(b, "null", NULL);
        }
        jev_buf_add_str(b, ".\n", NULL);
        md_vs_exact(b, paths, json_object_get(a, "fast_vs_exact"));
    }
    jev_buf_add_str(
        b,
        "\nnull means no generated output met the declared schema (or generate_json did not run); n/a means "
        "the record has no distributions to compare. Typed output validity does not establish semantic "
        "correctness.\n\n",
        NULL);

    /* failures: counts per path, then the first failed output of each count */
    int failed_total = 0;
    for (size_t p = 0; p < json_array_size(paths); p++) {
        const char *path = json_string_value(json_array_get(paths, p));
        int bad = 0, all = 0;
        for (size_t c = 0; c < json_array_size(counts); c++) {
            const json_t *samples =
                json_object_get(jev_report_run(doc, json_integer_value(json_array_get(counts, c)), path), "samples");
            for (size_t i = 0; i < json_array_size(samples); i++, all++)
                bad += !json_is_true(json_object_get(json_array_get(samples, i), "valid"));
        }
        if (bad)
            jev_buf_printf(b, NULL, "- %s: %d of %d samples failed the declared schema (valid decisions/s 0).\n", path,
                           bad, all);
        failed_total += bad;
    }
    if (failed_total == 0)
        jev_buf_add_str(b, "- No sample failed the declared schema.\n", NULL);
    jev_buf_add_str(b, "\n", NULL);
    for (size_t c = 0; c < json_array_size(counts); c++) {
        long long d = json_integer_value(json_array_get(counts, c));
        for (size_t p = 0; p < json_array_size(paths); p++) {
            const char *path = json_string_value(json_array_get(paths, p));
            const json_t *samples = json_object_get(jev_report_run(doc, d, path), "samples");
            const json_t *pick = NULL;
            long long pick_rep = 0;
            for (size_t i = 0; i < json_array_size(samples); i++) {
                const json_t *s = json_array_get(samples, i);
                long long rep = json_integer_value(json_object_get(s, "repeat"));
                if (!json_is_true(json_object_get(s, "valid")) && json_is_string(json_object_get(s, "output")) &&
                    (pick == NULL || rep < pick_rep)) {
                    pick = s;
                    pick_rep = rep;
                }
            }
            if (pick == NULL)
                continue;
            jev_buf_printf(b, NULL, "Example failed %s output (%lld decisions, repeat %lld):\n\n",
                           strcmp(path, JEV_BENCH_PATH_GENERATE) ? path : "generate", d, pick_rep);
            md_output_block(b, json_string_value(json_object_get(pick, "output")));
        }
    }
}

/* The full section of one FILE: heading, note, environment, three tables. */
static void md_file(struct jev_buf *b, const struct jev_report_src *s) {
    jev_buf_add_str(b, "## ", NULL);
    md_text(b, s->label);
    jev_buf_add_str(b, ": ", NULL);
    md_text(b, s->name);
    jev_buf_add_str(b, "\n\n", NULL);
    const char *note = json_string_value(json_object_get(s->doc, "note"));
    if (note) {
        jev_buf_add_str(b, "> ", NULL);
        md_text(b, note);
        jev_buf_add_str(b, "\n\n", NULL);
    }
    md_environment(b, s->doc);
    md_medians(b, s->doc);
    jev_report_md_rate(b, s->doc);
    md_samples(b, s->doc);
    md_agreement(b, s->doc);
}

/* ---- Markdown: side by side ---- */

/* Ratios spread over orders of magnitude (CPU vs GPU): keep ~3 significant digits. */
static void fmt_ratio(double r, char out[32]) {
    snprintf(out, 32, r >= 100.0 ? "%.0f" : r >= 0.1 ? "%.2f" : "%.3f", r);
}

/* Union of the sources' counts (ascending) and paths (first seen first). */
void jev_report_axes(const struct jev_report_src *s, int n, long long *counts, int *n_counts, const char **paths,
                     int *n_paths) {
    *n_counts = 0;
    *n_paths = 0;
    for (int i = 0; i < n; i++) {
        const json_t *c = jev_report_setting(s[i].doc, "counts"), *p = jev_report_setting(s[i].doc, "paths");
        for (size_t k = 0; k < json_array_size(c); k++) {
            long long d = json_integer_value(json_array_get(c, k));
            int at = 0;
            while (at < *n_counts && counts[at] < d)
                at++;
            if (at < *n_counts && counts[at] == d)
                continue;
            if (*n_counts == JEV_BENCH_MAX_COUNTS * JEV_REPORT_MAX_SOURCES)
                continue;
            memmove(counts + at + 1, counts + at, (size_t)(*n_counts - at) * sizeof *counts);
            counts[at] = d;
            (*n_counts)++;
        }
        for (size_t k = 0; k < json_array_size(p); k++) {
            const char *name = json_string_value(json_array_get(p, k));
            bool seen = false;
            for (int j = 0; j < *n_paths && !seen; j++)
                seen = !strcmp(paths[j], name);
            if (!seen && *n_paths < JEV_BENCH_MAX_PATHS * JEV_REPORT_MAX_SOURCES)
                paths[(*n_paths)++] = name;
        }
    }
}

/* The median total of (d, path) in a source, NAN when it has no such run. */
double jev_report_total_median(const json_t *doc, long long d, const char *path) {
    const json_t *samples = json_object_get(jev_report_run(doc, d, path), "samples");
    size_t n = json_array_size(samples);
    double v[JEV_BENCH_MAX_REPEATS];
    for (size_t i = 0; i < n; i++)
        v[i] = json_number_value(json_object_get(json_array_get(samples, i), "total_ms"));
    return jev_report_median(v, n); /* NAN when there is no such run */
}

/* Median totals of every series per row (a series: the files of one system, see
 * jev_report_sources), each followed by its ratio to jev on the same kind of device. Rows a
 * series lacks show n/a rather than disappearing, so a missing measurement is visible. */
static void md_side_by_side(struct jev_buf *b, const struct jev_report_src *s, int n) {
    long long counts[JEV_BENCH_MAX_COUNTS * JEV_REPORT_MAX_SOURCES];
    const char *paths[JEV_BENCH_MAX_PATHS * JEV_REPORT_MAX_SOURCES];
    int nc, np;
    jev_report_axes(s, n, counts, &nc, paths, &np);
    int base = base_index(s, n);
    jev_buf_add_str(b,
                    "## Side by side\n\nMedian total ms per row; each ratio is that column's total divided by "
                    "the total of jev on the same kind of device, else of ",
                    NULL);
    md_text(b, s[base].label);
    jev_buf_add_str(b, " (above 1: slower than it). Files of one system with disjoint rows share a column.\n\n", NULL);
    /* the columns: the base series first, then every other series in file order */
    int order[JEV_REPORT_MAX_SOURCES], ratio_of[JEV_REPORT_MAX_SOURCES], k = 0;
    order[k++] = s[base].series;
    for (int i = 0; i < n; i++)
        if (s[i].series == i && i != s[base].series)
            order[k++] = i;
    for (int c = 0; c < k; c++) {
        ratio_of[c] = ratio_base(s, n, order[c], s[base].series);
        jev_buf_add_str(b, "- ", NULL);
        md_text(b, s[order[c]].label);
        jev_buf_add_str(b, ": ", NULL);
        for (int i = order[c], first = 1; i < n; i++) {
            if (s[i].series != order[c])
                continue;
            const char *machine = env_str(s[i].doc, NULL, "machine");
            jev_buf_add_str(b, first ? "" : "; ", NULL);
            md_text(b, s[i].name);
            jev_buf_add_str(b, " (machine: ", NULL);
            md_text(b, machine ? machine : "not recorded");
            jev_buf_add_str(b, ")", NULL);
            first = 0;
        }
        jev_buf_add_str(b, "\n", NULL);
    }
    jev_buf_add_str(b, "\n| Decisions | Path |", NULL);
    for (int c = 0; c < k; c++) {
        jev_buf_add_str(b, " ", NULL);
        md_text(b, s[order[c]].label);
        jev_buf_add_str(b, " total ms |", NULL);
        if (c > 0) {
            jev_buf_add_str(b, " ", NULL);
            md_text(b, s[order[c]].label);
            jev_buf_add_str(b, " / ", NULL);
            md_text(b, s[ratio_of[c]].label);
            jev_buf_add_str(b, " |", NULL);
        }
    }
    jev_buf_add_str(b, "\n|---:|---|", NULL);
    for (int c = 0; c < 2 * k - 1; c++)
        jev_buf_add_str(b, "---:|", NULL);
    jev_buf_add_str(b, "\n", NULL);
    for (int ci = 0; ci < nc; ci++) {
        for (int p = 0; p < np; p++) {
            double t[JEV_REPORT_MAX_SOURCES];
            bool any = false;
            for (int c = 0; c < k; c++) {
                t[c] = jev_report_series_median(s, n, order[c], counts[ci], paths[p]);
                any |= !isnan(t[c]);
            }
            if (!any)
                continue;
            jev_buf_printf(b, NULL, "| %lld | %s |", counts[ci], paths[p]);
            for (int c = 0; c < k; c++) {
                if (isnan(t[c]))
                    jev_buf_add_str(b, " n/a |", NULL);
                else
                    jev_buf_printf(b, NULL, " %.1f |", t[c]);
                if (c > 0) {
                    char r[32];
                    double den = jev_report_series_median(s, n, ratio_of[c], counts[ci], paths[p]);
                    if (isnan(t[c]) || isnan(den))
                        snprintf(r, sizeof r, "n/a");
                    else
                        fmt_ratio(t[c] / den, r);
                    jev_buf_printf(b, NULL, " %s |", r);
                }
            }
            jev_buf_add_str(b, "\n", NULL);
        }
    }
    jev_buf_add_str(b, "\n", NULL);
}

/* The whole Markdown document: a preamble, each FILE, the comparison, the plot link. */
enum jev_status jev_report_markdown(const struct jev_report_params *p, char **out, size_t *len, struct jev_error *err) {
    *out = NULL;
    *len = 0;
    if (p->n_files < 1 || p->n_files >= JEV_REPORT_MAX_SOURCES)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "report: %d files, expected 1 to %d", p->n_files,
                        JEV_REPORT_MAX_SOURCES - 1);
    struct jev_report_src s[JEV_REPORT_MAX_SOURCES];
    int n = jev_report_sources(p, s);
    struct jev_buf b;
    jev_buf_init(&b, JEV_REPORT_MAX_BYTES);
    jev_buf_add_str(&b,
                    "# jev benchmark report\n\nRendered by `jev report` from raw " JEV_BENCH_SCHEMA
                    " records alone; no model was run. Model loading and warm-up are outside every time; image "
                    "loading, prompt assembly, preprocessing, forwards and answer assembly are inside.\n\n",
                    NULL);
    for (int i = 0; i < n; i++)
        if (!s[i].reference)
            md_file(&b, &s[i]);
    if (n >= 2)
        md_side_by_side(&b, s, n);
    if (p->svg_link) {
        jev_buf_add_str(&b, "## Plot\n\n![median total ms vs decisions, log-log](", NULL);
        md_text(&b, p->svg_link);
        jev_buf_add_str(&b, ")\n", NULL);
    }
    return jev_report_buf_finish(&b, "Markdown report", out, len, err);
}
