/*
 * download.h - fetch a model directory from a Hugging Face hub (or any
 * server speaking the same two endpoints) with libcurl.
 *
 * Protocol: GET {endpoint}/api/models/{repo}/revision/{rev}?blobs=true lists
 * the files ("siblings": [{"rfilename", "size", "lfs": {"sha256", "size"}}]);
 * GET {endpoint}/{repo}/resolve/{rev}/{file} fetches one (redirects followed).
 *
 * Only the files a model directory needs are fetched (jev_download_wanted).
 * Each file goes to DIR/.partial/FILE.part first; a rerun resumes it with
 * "Range: bytes=N-" (appending on 206, starting over on 200). A finished
 * file is checked (size, and sha256 when the listing gives lfs.sha256) and
 * only then renamed into DIR/FILE, so a failed run never leaves a partial
 * final file.
 *
 * What it is not: no parallel transfers, no retries inside one run (the
 * rerun resumes), no nested paths (names with '/' are skipped), no printing
 * (progress goes through a callback; the CLI draws the bar).
 *
 * The listing parser (download-listing.c) has no libcurl dependency so the
 * fuzz target links without it.
 */
#ifndef JEV_COMMON_DOWNLOAD_H
#define JEV_COMMON_DOWNLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"  // defines: struct jev_error
#include "base/sha256.h" // defines: JEV_SHA256_HEX

/* ---- listing ---- */

struct jev_download_file {
    char *name;                  /* rfilename, validated: no '/', no leading '.', no control bytes */
    int64_t size;                /* bytes, -1 when the listing does not say */
    char sha256[JEV_SHA256_HEX]; /* lfs.sha256 lowercase hex, "" when absent */
};

struct jev_download_listing {
    struct jev_download_file *files; /* [n] the wanted files, listing order */
    int n;                           /* count of files */
};

/* True for the names a model directory needs (config, weights, tokenizer,
 * templates, README/LICENSE). */
bool jev_download_wanted(const char *name);

/* Parses the listing JSON (n bytes), keeping only wanted, safe names.
 * Fails with JEV_ERR_FORMAT naming the field on malformed input. */
enum jev_status jev_download_listing_parse(const char *json, size_t n, struct jev_download_listing *out,
                                           struct jev_error *err);
void jev_download_listing_free(struct jev_download_listing *l);

/* ---- download ---- */

/* Progress of the file being fetched: done of total bytes (total -1 when
 * unknown), secs since this file's transfer started, resumed_from bytes that
 * were already on disk. */
typedef void (*jev_download_progress_fn)(void *ctx, const char *file, int64_t done, int64_t total, int64_t resumed_from,
                                         double secs);

struct jev_download_opts {
    const char *repo;                  /* "org/name" */
    const char *revision;              /* branch, tag or commit; NULL means "main" */
    const char *dir;                   /* destination directory (created) */
    const char *endpoint;              /* base URL; NULL means $HF_ENDPOINT or https://huggingface.co */
    const char *token;                 /* bearer token; NULL means $HF_TOKEN or none */
    jev_download_progress_fn progress; /* may be NULL */
    void *progress_ctx;                /* passed to progress */
};

/* Downloads every wanted file of the listing into opts->dir. Files already
 * in place with the listed size are kept. n_fetched (may be NULL) gets the
 * number of files transferred in this run. */
enum jev_status jev_download_run(const struct jev_download_opts *opts, int *n_fetched, struct jev_error *err);

#endif
