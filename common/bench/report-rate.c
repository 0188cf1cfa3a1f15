/*
 * report-rate.c - the report's "Compute rate" section: how fast each row did its dense work, and,
 * for a CPU record, what share of the machine's f32 FMA peak measured in the same run that is.
 *
 * What it reads (both optional, under `extra`, which the schema leaves free): each sample's
 * extra.gflop (the language model's and the vision tower's multiply-adds x 2, jev bench since
 * run 7) and environment.extra.fma_peak_gflops (common/bench/peak.c on the engine's threads, right
 * after the samples). A record without gflop samples (a peer's, an older jev's) gets no section.
 *
 * The rate of a sample is gflop over its total time (end to end: the photo's decoding included)
 * and over its model phases (vision + prefill + scoring: what the products run in); each column is
 * the median over the row's samples, the report's median rule.
 */
#include "common/bench/report-int.h" // defines: jev_report_md_rate, jev_report_run, jev_report_setting, jev_report_median
#include "common/bench/schema.h"     // defines: JEV_BENCH_MAX_REPEATS

#include <math.h>

/* The sample's number at key, or NAN when it has none. */
static double num(const json_t *o, const char *key) {
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : (double)NAN;
}

/* Whether every sample of every run has extra.gflop: a column over a subset would mix populations. */
static bool has_gflop(const json_t *doc) {
    const json_t *runs = json_object_get(doc, "runs");
    bool any = false;
    for (size_t r = 0; r < json_array_size(runs); r++) {
        const json_t *samples = json_object_get(json_array_get(runs, r), "samples");
        for (size_t i = 0; i < json_array_size(samples); i++) {
            if (isnan(num(json_object_get(json_array_get(samples, i), "extra"), "gflop")))
                return false;
            any = true;
        }
    }
    return any;
}

static void cell(struct jev_buf *b, double x, const char *fmt) {
    if (isnan(x))
        jev_buf_add_str(b, " n/a |", NULL);
    else
        jev_buf_printf(b, NULL, fmt, x);
}

void jev_report_md_rate(struct jev_buf *b, const json_t *doc) {
    if (!has_gflop(doc))
        return;
    const json_t *counts = jev_report_setting(doc, "counts"), *paths = jev_report_setting(doc, "paths");
    const json_t *env_extra = json_object_get(json_object_get(doc, "environment"), "extra");
    const double peak = num(env_extra, "fma_peak_gflops");
    const bool with_peak = !isnan(peak) && peak > 0;
    jev_buf_add_str(b, "### Compute rate\n\n| Decisions | Path | GFLOP | GFLOP/s, total | GFLOP/s, model phases |",
                    NULL);
    if (with_peak)
        jev_buf_add_str(b, " % of peak, total | % of peak, model phases |", NULL);
    jev_buf_add_str(b, with_peak ? "\n|---:|---|---:|---:|---:|---:|---:|\n" : "\n|---:|---|---:|---:|---:|\n", NULL);
    for (size_t c = 0; c < json_array_size(counts); c++) {
        long long d = json_integer_value(json_array_get(counts, c));
        for (size_t p = 0; p < json_array_size(paths); p++) {
            const char *path = json_string_value(json_array_get(paths, p));
            const json_t *samples = json_object_get(jev_report_run(doc, d, path), "samples");
            size_t n = json_array_size(samples);
            if (n == 0 || n > JEV_BENCH_MAX_REPEATS)
                continue;
            double g[JEV_BENCH_MAX_REPEATS], tot[JEV_BENCH_MAX_REPEATS], mod[JEV_BENCH_MAX_REPEATS];
            size_t n_mod = 0;
            for (size_t i = 0; i < n; i++) {
                const json_t *s = json_array_get(samples, i);
                g[i] = num(json_object_get(s, "extra"), "gflop");
                tot[i] = g[i] / (num(s, "total_ms") * 1e-3);
                double ms = 0;
                bool all = true;
                static const char *const phases[] = {"vision_ms", "prefill_ms", "scoring_ms"};
                for (int k = 0; k < 3; k++) {
                    double v = num(s, phases[k]);
                    if (isnan(v))
                        all = false;
                    else
                        ms += v;
                }
                if (all && ms > 0)
                    mod[n_mod++] = g[i] / (ms * 1e-3);
            }
            double mg = jev_report_median(g, n), mt = jev_report_median(tot, n);
            double mm = n_mod == n ? jev_report_median(mod, n_mod) : (double)NAN;
            jev_buf_printf(b, NULL, "| %lld | %s |", d, path);
            cell(b, mg, " %.1f |");
            cell(b, mt, " %.1f |");
            cell(b, mm, " %.1f |");
            if (with_peak) {
                cell(b, 100.0 * mt / peak, " %.0f %% |");
                cell(b, isnan(mm) ? mm : 100.0 * mm / peak, " %.0f %% |");
            }
            jev_buf_add_str(b, "\n", NULL);
        }
    }
    jev_buf_add_str(b,
                    "\nGFLOP = the language model's and the vision tower's multiply-adds x 2 in one request (the "
                    "engine's own count); GFLOP/s = that over the sample's total time, or over its vision + prefill "
                    "+ scoring time; medians over the row's samples.",
                    NULL);
    if (with_peak) {
        const char *isa = json_string_value(json_object_get(env_extra, "fma_peak_isa"));
        jev_buf_printf(b, NULL,
                       " Peak = %.1f GFLOP/s: the f32 FMA peak (%s vectors) on %lld threads, measured in the same "
                       "run right after the samples.",
                       peak, isa ? isa : "unnamed", (long long)json_integer_value(json_object_get(env_extra, "fma_peak_threads")));
    }
    jev_buf_add_str(b, "\n\n", NULL);
}
