/*
 * report.h - renders validated "jev-bench/2" (and /1) records (common/bench/schema.h) as
 * the seed's Markdown tables and as a hand-written SVG plot, from the raw
 * JSON alone: no model runs, nothing is timed.
 *
 * What it renders (docs/bench-report.md explains how to read it):
 * - per file: an environment block, the medians table (the seed's columns
 *   and number formats), every latency sample, agreement and failures with
 *   example failed outputs;
 * - with two or more sources (files and the optional reference): a
 *   side-by-side table of median totals with the ratio other / base per
 *   row, where the base is the first file that is jev's own record;
 * - SVG: median total ms vs decisions on log-log axes, one polyline per
 *   (source, path), the reference dashed, a legend.
 *
 * Medians: the median of a row's samples; for an even number of samples the
 * mean of the two middle ones. A column without samples (a published
 * reference gives only medians for phases) uses the run's
 * published_medians, and the report says which columns did.
 *
 * Constraints: inputs must have passed jev_bench_validate (the renderer
 * relies on its types and ranges). Output is a malloc'd NUL-terminated
 * buffer owned by the caller (free()). The output size is bounded by a
 * small multiple of the input size; over JEV_REPORT_MAX_BYTES it fails.
 */
#ifndef JEV_COMMON_BENCH_REPORT_H
#define JEV_COMMON_BENCH_REPORT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h" // defines: struct jev_error

#define JEV_REPORT_MAX_BYTES (64u << 20) /* largest Markdown or SVG text */
#define JEV_REPORT_MAX_SOURCES 16        /* files + reference in one report */

/* One record to render. */
struct jev_report_source {
    const json_t *doc; /* a record that passed jev_bench_validate (borrowed) */
    const char *name;  /* where it came from, shown in headings ("artifacts/benchmark.json") */
};

struct jev_report_params {
    const struct jev_report_source *files;     /* (n_files) records rendered in full */
    int32_t n_files;                           /* 1 .. JEV_REPORT_MAX_SOURCES - 1 */
    const struct jev_report_source *reference; /* NULL: none; else drawn dashed and compared */
    const char *svg_link;                      /* Markdown image link to the plot; NULL: no link */
};

/* The Markdown report. *out is malloc'd (free()), *len its length. */
enum jev_status jev_report_markdown(const struct jev_report_params *p, char **out, size_t *len, struct jev_error *err);

/* The SVG plot. *out is malloc'd (free()), *len its length. */
enum jev_status jev_report_svg(const struct jev_report_params *p, char **out, size_t *len, struct jev_error *err);

/* The median of v[0..n) (sorts v in place): the middle value, or for an
 * even n the mean of the two middle ones; NAN for n == 0. */
double jev_report_median(double *v, size_t n);

#endif
