/*
 * cmd-report.c - `jev report`: renders raw benchmark JSON (jev-bench/2 and /1) as
 * Markdown tables and an SVG plot, without running a model.
 *
 *     jev report [FILE ...] [--output F.md] [--svg F.svg] [--reference REF.json]
 *
 * FILE defaults to artifacts/benchmark.json (what `jev bench` writes). The
 * first FILE that is jev's own record is the base of the side-by-side ratios.
 * Markdown goes to --output (written atomically) or to stdout. Every input is
 * validated first; a bad file stops the command with the file and the JSON
 * path of the problem, and nothing is written.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bench/report.h" // defines: jev_report_markdown, jev_report_svg
#include "common/bench/schema.h" // defines: jev_bench_load_file, jev_bench_file_write
#include "commands.h"            // defines: cmd_report

/* The --help text. */
static void usage(FILE *f) {
    fprintf(f, "usage: jev report [FILE ...] [--output F.md] [--svg F.svg] [--reference REF.json]\n\n"
               "Renders benchmark records (jev-bench/2 as `jev bench` writes them, and /1) as Markdown: the medians\n"
               "table, every latency sample, agreement and failures, the environment; with several records a\n"
               "side-by-side table with ratios. --svg also writes a log-log plot of total time vs decisions.\n"
               "--reference adds a published record (e.g. bench/reference/m4-mlx.json), drawn dashed.\n"
               "FILE defaults to artifacts/benchmark.json; Markdown goes to stdout without --output.\n");
}

/* The link from the Markdown to the SVG: the bare name when both share a folder. */
static const char *svg_link_for(const char *md, const char *svg) {
    if (md == NULL)
        return svg;
    const char *ms = strrchr(md, '/'), *ss = strrchr(svg, '/');
    size_t md_dir = ms ? (size_t)(ms - md) : 0, svg_dir = ss ? (size_t)(ss - svg) : 0;
    if (md_dir == svg_dir && !strncmp(md, svg, md_dir))
        return ss ? ss + 1 : svg;
    return svg;
}

/* Parses arguments, loads and validates every input before rendering
 * anything, renders both outputs before writing either, then writes. */
int cmd_report(int argc, char **argv) {
    const char *files[JEV_REPORT_MAX_SOURCES];
    int n_files = 0;
    const char *output = NULL, *svg = NULL, *reference = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        const char **opt = !strcmp(a, "--output") || !strcmp(a, "-o") ? &output
                           : !strcmp(a, "--svg")                      ? &svg
                           : !strcmp(a, "--reference")                ? &reference
                                                                      : NULL;
        if (opt) {
            if (i + 1 >= argc) {
                fprintf(stderr, "jev report: %s needs a file name\n", a);
                return 2;
            }
            *opt = argv[++i];
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "jev report: unknown option '%s'\n\n", a);
            usage(stderr);
            return 2;
        } else if (n_files == JEV_REPORT_MAX_SOURCES - 1) {
            fprintf(stderr, "jev report: at most %d files\n", JEV_REPORT_MAX_SOURCES - 1);
            return 2;
        } else {
            files[n_files++] = a;
        }
    }
    if (n_files == 0)
        files[n_files++] = "artifacts/benchmark.json";

    struct jev_report_source src[JEV_REPORT_MAX_SOURCES], ref = {0};
    struct jev_error err = {0};
    int rc = 1, loaded = 0;
    json_t *ref_doc = NULL;
    char *md = NULL, *plot = NULL;
    size_t md_len = 0, plot_len = 0;
    for (; loaded < n_files; loaded++) {
        json_t *doc = NULL;
        if (jev_bench_load_file(files[loaded], &doc, &err) != JEV_OK)
            goto done;
        src[loaded].doc = doc;
        src[loaded].name = files[loaded];
    }
    if (reference) {
        if (jev_bench_load_file(reference, &ref_doc, &err) != JEV_OK)
            goto done;
        ref.doc = ref_doc;
        ref.name = reference;
    }
    struct jev_report_params p = {
        .files = src,
        .n_files = n_files,
        .reference = reference ? &ref : NULL,
        .svg_link = svg ? svg_link_for(output, svg) : NULL,
    };
    /* render both before writing either: a failure leaves no half-updated pair */
    if (jev_report_markdown(&p, &md, &md_len, &err) != JEV_OK)
        goto done;
    if (svg && jev_report_svg(&p, &plot, &plot_len, &err) != JEV_OK)
        goto done;
    if (svg && jev_bench_file_write(svg, plot, plot_len, &err) != JEV_OK)
        goto done;
    if (output) {
        if (jev_bench_file_write(output, md, md_len, &err) != JEV_OK)
            goto done;
    } else if (fwrite(md, 1, md_len, stdout) != md_len || fflush(stdout) != 0) {
        fprintf(stderr, "jev report: writing to stdout failed\n");
        goto done_quiet;
    }
    if (output)
        fprintf(stderr, "jev report: wrote %s%s%s\n", output, svg ? " and " : "", svg ? svg : "");
    else if (svg)
        fprintf(stderr, "jev report: wrote %s\n", svg);
    rc = 0;
done:
    if (rc != 0)
        fprintf(stderr, "jev report: %s\n", err.msg);
done_quiet:
    for (int i = 0; i < loaded; i++)
        json_decref((json_t *)(uintptr_t)src[i].doc);
    json_decref(ref_doc);
    free(md);
    free(plot);
    return rc;
}
