/*
 * report-svg.c - the benchmark plot as hand-written SVG: median total ms
 * against decisions on log-log axes, one polyline per (source, path), the
 * reference dashed with hollow markers, and a legend.
 *
 * What it is not: a plotting library. The layout is fixed (a 500x400 plot
 * area, the legend to its right, the canvas growing with the legend); the
 * only data-dependent parts are the decade-rounded ranges and the ticks.
 *
 * Constraints: every coordinate printed is finite (validated totals are in
 * [0.001, 1e9] ms, so log10 is defined and the y range spans at most 12
 * decades); outside text is XML-escaped; output is deterministic.
 */
#include "common/bench/report-int.h" // defines: struct jev_report_src, jev_report_*

#include <math.h>
#include <string.h>

#include "common/bench/schema.h" // defines: JEV_BENCH_MAX_*, JEV_BENCH_PATH_*

/* ---- text ---- */

/* Outside text in SVG/XML: the five special characters escaped, control bytes blanked. */
static void xml_text(struct jev_buf *b, const char *s) {
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '<')
            jev_buf_add_str(b, "&lt;", NULL);
        else if (c == '>')
            jev_buf_add_str(b, "&gt;", NULL);
        else if (c == '&')
            jev_buf_add_str(b, "&amp;", NULL);
        else if (c == '"')
            jev_buf_add_str(b, "&quot;", NULL);
        else if (c < 0x20 || c == 0x7f)
            jev_buf_add_str(b, " ", NULL);
        else
            jev_buf_add(b, s, 1, NULL);
    }
}

/* ---- SVG ---- */

#define SVG_W 980.0   /* canvas width, px: room for legend labels of ~50 characters */
#define SVG_LEFT 80.0 /* plot area left edge */
#define SVG_TOP 50.0  /* plot area top edge */
#define SVG_PW 500.0  /* plot area width */
#define SVG_PH 400.0  /* plot area height */
#define SVG_ROW 20.0  /* legend line height */

/* A fixed color per path name, so that the same path looks the same in every plot. */
static const char *path_color(const char *path, int index) {
    static const char *const palette[] = {"#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
    if (!strcmp(path, JEV_BENCH_PATH_GENERATE))
        return "#d62728";
    if (!strcmp(path, JEV_BENCH_PATH_INDEPENDENT))
        return "#1f77b4";
    if (!strcmp(path, JEV_BENCH_PATH_SHARED))
        return "#2ca02c";
    return palette[index % 6];
}

/* Line style per source: files solid, dotted, dash-dot, long-short, dash-dot-dot, then the
 * cycle repeats; the reference dashed. */
static const char *source_dash(const struct jev_report_src *s, int file_index) {
    static const char *const dashes[] = {"", "2 3", "10 3 2 3", "14 4 4 4", "8 3 2 3 2 3"};
    return s->reference ? "7 4" : dashes[file_index % 5];
}

/* Data -> canvas: log10 positions scaled into the plot area; y grows downwards in SVG. */
static double svg_x(double v, double lo, double hi) { return SVG_LEFT + (log10(v) - lo) / (hi - lo) * SVG_PW; }
static double svg_y(double v, double lo, double hi) { return SVG_TOP + SVG_PH - (log10(v) - lo) / (hi - lo) * SVG_PH; }

/* The plot. Ranges first (x over the union of counts with 5% padding so end
 * markers clear the frame, y over every median widened to whole decades so
 * the ticks land on 1, 2, 5 x 10^k), then grid, labels, frame, and one
 * polyline + markers + legend line per (series, path). */
enum jev_status jev_report_svg(const struct jev_report_params *p, char **out, size_t *len, struct jev_error *err) {
    *out = NULL;
    *len = 0;
    if (p->n_files < 1 || p->n_files >= JEV_REPORT_MAX_SOURCES)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "report: %d files, expected 1 to %d", p->n_files,
                        JEV_REPORT_MAX_SOURCES - 1);
    struct jev_report_src s[JEV_REPORT_MAX_SOURCES];
    int n = jev_report_sources(p, s);
    long long counts[JEV_BENCH_MAX_COUNTS * JEV_REPORT_MAX_SOURCES];
    const char *paths[JEV_BENCH_MAX_PATHS * JEV_REPORT_MAX_SOURCES];
    int nc, np;
    jev_report_axes(s, n, counts, &nc, paths, &np);

    /* ranges: x over the counts, y over every median total, widened to whole decades; a line per
     * (series, path) that has a point */
    double ymin = INFINITY, ymax = 0.0;
    int n_series = 0;
    for (int i = 0; i < n; i++) {
        if (s[i].series != i)
            continue;
        for (int pi = 0; pi < np; pi++) {
            bool any = false;
            for (int c = 0; c < nc; c++) {
                double t = jev_report_series_median(s, n, i, counts[c], paths[pi]);
                if (isnan(t))
                    continue;
                any = true;
                ymin = fmin(ymin, t);
                ymax = fmax(ymax, t);
            }
            n_series += any;
        }
    }
    if (!(ymin > 0.0 && ymax >= ymin)) { /* unreachable for validated records: keep the axes finite anyway */
        ymin = 1.0;
        ymax = 10.0;
    }
    double ylo = floor(log10(ymin)), yhi = ceil(log10(ymax));
    if (yhi <= ylo)
        yhi = ylo + 1.0;
    double xlo = log10((double)counts[0]), xhi = log10((double)counts[nc - 1]);
    if (xhi <= xlo) {
        xlo -= 0.5;
        xhi += 0.5;
    }
    double pad = 0.05 * (xhi - xlo); /* keeps end markers off the frame */
    xlo -= pad;
    xhi += pad;
    double height = fmax(SVG_TOP + SVG_PH + 70.0, SVG_TOP + 40.0 + SVG_ROW * n_series);

    struct jev_buf b;
    jev_buf_init(&b, JEV_REPORT_MAX_BYTES);
    jev_buf_printf(&b, NULL,
                   "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                   "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
                   "font-family=\"sans-serif\" font-size=\"12\">\n",
                   SVG_W, height, SVG_W, height);
    jev_buf_add_str(&b, "<title>jev benchmark: median total ms vs decisions (log-log)</title>\n", NULL);
    jev_buf_printf(&b, NULL, "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"#ffffff\"/>\n", SVG_W,
                   height);
    jev_buf_printf(&b, NULL,
                   "<text x=\"%.1f\" y=\"28\" font-size=\"15\" text-anchor=\"middle\">Median total time vs "
                   "decisions (log-log)</text>\n",
                   SVG_LEFT + SVG_PW / 2);

    /* grid and ticks: y at 1, 2, 5 x 10^k; x at every count */
    jev_buf_add_str(&b, "<g stroke=\"#dddddd\" stroke-width=\"1\">\n", NULL);
    for (double k = ylo; k <= yhi; k += 1.0)
        for (int m = 0; m < 3; m++) {
            double v = (m == 0 ? 1.0 : m == 1 ? 2.0 : 5.0) * pow(10.0, k);
            if (log10(v) > yhi + 1e-9)
                break;
            double y = svg_y(v, ylo, yhi);
            jev_buf_printf(&b, NULL, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", SVG_LEFT, y,
                           SVG_LEFT + SVG_PW, y);
        }
    for (int c = 0; c < nc; c++) {
        double x = svg_x((double)counts[c], xlo, xhi);
        jev_buf_printf(&b, NULL, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", x, SVG_TOP, x,
                       SVG_TOP + SVG_PH);
    }
    jev_buf_add_str(&b, "</g>\n<g fill=\"#333333\">\n", NULL);
    for (double k = ylo; k <= yhi; k += 1.0)
        for (int m = 0; m < 3; m++) {
            double v = (m == 0 ? 1.0 : m == 1 ? 2.0 : 5.0) * pow(10.0, k);
            if (log10(v) > yhi + 1e-9)
                break;
            if (m > 0 && yhi - ylo > 4.0) /* many decades: label only the powers of ten */
                continue;
            jev_buf_printf(&b, NULL, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.*f</text>\n", SVG_LEFT - 6.0,
                           svg_y(v, ylo, yhi) + 4.0, v >= 1.0 ? 0 : (int)ceil(-log10(v)), v);
        }
    double last_label = -1e9;
    for (int c = 0; c < nc; c++) {
        double x = svg_x((double)counts[c], xlo, xhi);
        if (x - last_label < 24.0) /* crowded ticks keep their line, lose their label */
            continue;
        last_label = x;
        jev_buf_printf(&b, NULL, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%lld</text>\n", x,
                       SVG_TOP + SVG_PH + 18.0, counts[c]);
    }
    jev_buf_printf(&b, NULL, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">decisions (log scale)</text>\n",
                   SVG_LEFT + SVG_PW / 2, SVG_TOP + SVG_PH + 40.0);
    jev_buf_printf(&b, NULL,
                   "<text x=\"18\" y=\"%.1f\" text-anchor=\"middle\" transform=\"rotate(-90 18 %.1f)\">median "
                   "total ms (log scale)</text>\n",
                   SVG_TOP + SVG_PH / 2, SVG_TOP + SVG_PH / 2);
    jev_buf_add_str(&b, "</g>\n", NULL);
    jev_buf_printf(&b, NULL,
                   "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#333333\"/>\n",
                   SVG_LEFT, SVG_TOP, SVG_PW, SVG_PH);

    /* one polyline per (series, path), markers at the measured counts */
    int file_index = 0, entry = 0;
    for (int i = 0; i < n; i++) {
        if (s[i].series != i)
            continue;
        const char *dash = source_dash(&s[i], file_index);
        for (int pi = 0; pi < np; pi++) {
            const char *path = paths[pi], *color = path_color(path, pi);
            double xs[JEV_BENCH_MAX_COUNTS * JEV_REPORT_MAX_SOURCES], ys[JEV_BENCH_MAX_COUNTS * JEV_REPORT_MAX_SOURCES];
            int m = 0;
            for (int c = 0; c < nc; c++) {
                double t = jev_report_series_median(s, n, i, counts[c], path);
                if (isnan(t))
                    continue;
                xs[m] = svg_x((double)counts[c], xlo, xhi);
                ys[m++] = svg_y(t, ylo, yhi);
            }
            if (m == 0)
                continue;
            jev_buf_printf(&b, NULL, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%s\"%s%s%s points=\"", color,
                           s[i].reference ? "1.5" : "2", dash[0] ? " stroke-dasharray=\"" : "", dash,
                           dash[0] ? "\"" : "");
            for (int c = 0; c < m; c++)
                jev_buf_printf(&b, NULL, "%s%.1f,%.1f", c ? " " : "", xs[c], ys[c]);
            jev_buf_add_str(&b, "\"/>\n", NULL);
            for (int c = 0; c < m; c++)
                jev_buf_printf(&b, NULL, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\" stroke=\"%s\"/>\n", xs[c],
                               ys[c], s[i].reference ? "#ffffff" : color, color);
            /* the legend entry of this line */
            double lx = SVG_LEFT + SVG_PW + 25.0, ly = SVG_TOP + 10.0 + SVG_ROW * entry++;
            jev_buf_printf(
                &b, NULL,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"%s%s%s/>\n", lx,
                ly, lx + 30.0, ly, color, dash[0] ? " stroke-dasharray=\"" : "", dash, dash[0] ? "\"" : "");
            jev_buf_printf(&b, NULL, "<text x=\"%.1f\" y=\"%.1f\">", lx + 38.0, ly + 4.0);
            xml_text(&b, s[i].label);
            jev_buf_add_str(&b, ": ", NULL);
            xml_text(&b, path);
            jev_buf_add_str(&b, "</text>\n", NULL);
        }
        if (!s[i].reference)
            file_index++;
    }
    jev_buf_add_str(&b, "</svg>\n", NULL);
    return jev_report_buf_finish(&b, "SVG plot", out, len, err);
}
