/*
 * report-int.h - what report.c (Markdown) and report-svg.c (the plot) share:
 * how the capped text is handed over, the list of sources with their labels, and the
 * record accessors both renderers read. Internal to common/bench/; the public
 * entry points are in report.h.
 *
 * Constraints: as in report.h, every record passed here has been validated,
 * so the accessors do not re-check types or ranges.
 */
#ifndef JEV_COMMON_BENCH_REPORT_INT_H
#define JEV_COMMON_BENCH_REPORT_INT_H

#include <stdbool.h>

#include "base/buf.h"            // defines: struct jev_buf, jev_buf_*
#include "common/bench/report.h" // defines: struct jev_report_params, JEV_REPORT_*

/* ---- text buffer ---- */

/* Both renderers write into a struct jev_buf capped at JEV_REPORT_MAX_BYTES
 * and append without checking each call (err NULL): the first failure sticks
 * and this reports it, prefixed with `what`. Hands the text to the caller
 * (*out, *len), or fails. */
enum jev_status jev_report_buf_finish(struct jev_buf *b, const char *what, char **out, size_t *len,
                                      struct jev_error *err);

/* ---- sources ---- */

/* One record of the report: a FILE or the reference, with its display label. */
struct jev_report_src {
    const json_t *doc; /* the record */
    const char *name;  /* its file */
    bool reference;    /* the --reference record */
    char base[104];    /* "<jev or the peer> <backend>[ fast][ (reference)]" */
    char label[120];   /* base, or base " #2" for a second series of the same system */
    int series;        /* index of the first source of its series (itself for a series' first file) */
};

/* Fills s (room for JEV_REPORT_MAX_SOURCES) with the files, then the
 * reference. A file joins the series of an earlier file of the same system
 * (same peer or jev, same backend) when no (decisions, path) row is in both;
 * other same-system files get labels " #2", " #3". Returns the count. */
int jev_report_sources(const struct jev_report_params *p, struct jev_report_src *s);

/* The median total of (d, path) in the series headed by s[head]: from its first file holding
 * that row; NAN when none does. */
double jev_report_series_median(const struct jev_report_src *s, int n, int head, long long d, const char *path);

/* The union of the sources' counts (ascending) and paths (first seen first).
 * counts needs JEV_BENCH_MAX_COUNTS * JEV_REPORT_MAX_SOURCES entries, paths
 * JEV_BENCH_MAX_PATHS * JEV_REPORT_MAX_SOURCES. */
void jev_report_axes(const struct jev_report_src *s, int n, long long *counts, int *n_counts, const char **paths,
                     int *n_paths);

/* ---- record access ---- */

/* settings[key] of a record. */
const json_t *jev_report_setting(const json_t *doc, const char *key);

/* The run of (decisions, path) in a record; NULL when it has none. */
const json_t *jev_report_run(const json_t *doc, long long decisions, const char *path);

/* The median total_ms of (d, path) in a record; NAN when it has no such run. */
double jev_report_total_median(const json_t *doc, long long d, const char *path);

/* ---- sections ---- */

/* report-rate.c: "### Compute rate" (GFLOP/s per row, and the share of the same-run FMA peak) for a
 * record whose samples carry extra.gflop; nothing for one that does not. */
void jev_report_md_rate(struct jev_buf *b, const json_t *doc);

#endif
