/*
 * fuzz-report-json.c - libFuzzer target: bytes -> jev-bench/2 (and /1) load and
 * validate -> (when valid) Markdown and SVG rendering into memory, with the
 * record as a file, as a peer of itself and as the reference.
 *
 * What it checks: no crash, hang, leak or UB on any input (ASan + UBSan);
 * a record that validates must render. Seeds in fuzz/corpus/report-json/.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/bench/report.h" // defines: jev_report_markdown, jev_report_svg
#include "common/bench/schema.h" // defines: jev_bench_load_buffer

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct jev_error err = {0};
    json_t *doc = NULL;
    if (jev_bench_load_buffer((const char *)data, size, &doc, &err) != JEV_OK)
        return 0;
    struct jev_report_source files[2] = {{doc, "fuzz.json"}, {doc, "fuzz-peer.json"}};
    struct jev_report_source ref = {doc, "fuzz-ref.json"};
    struct jev_report_params p = {files, 2, &ref, "plot.svg"};
    char *md = NULL, *svg = NULL;
    size_t md_len = 0, svg_len = 0;
    /* a validated record must render: anything else is a bug */
    if (jev_report_markdown(&p, &md, &md_len, &err) != JEV_OK || jev_report_svg(&p, &svg, &svg_len, &err) != JEV_OK)
        abort();
    free(md);
    free(svg);
    json_decref(doc);
    return 0;
}
