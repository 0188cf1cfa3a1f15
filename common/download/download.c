/*
 * download.c - jev download's transfer engine: the listing request and one
 * resumable, verified, atomically renamed transfer per file (libcurl easy
 * interface, one handle reused so connections are kept alive).
 *
 * The rules (see download.h): DIR/.partial/FILE.part holds the bytes so far;
 * a rerun asks for "Range: bytes=N-" and appends only on 206 (a 200 means
 * the server ignored the range: truncate and start over; a 416 means the
 * part is not a prefix any more: delete it and start over once). The file
 * is decided on the first body byte, when the final response code is known,
 * so a redirect's or an error's body never lands in the part file.
 * HTTP 401/403/404 get their own message naming the URL.
 * Not here: no printing, no retry loop, no parallelism.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>

#include "base/buf.h"                 // defines: struct jev_buf, jev_buf_*
#include "base/sha256.h"              // defines: jev_sha256_file
#include "base/timing.h"              // defines: jev_now_ms
#include "common/download/download.h" // defines: jev_download_run

#define LISTING_MAX (64u << 20) /* a listing larger than this is not a model repo's */
#define ERRBODY_MAX 512         /* bytes of an error response kept for the message */

/* ---- memory sink (listing) ---- */

struct membuf {
    struct jev_buf buf;   /* the listing so far, capped at LISTING_MAX */
    struct jev_error err; /* why an append failed (over LISTING_MAX, or memory) */
};

/* A short count stops the transfer (CURLE_WRITE_ERROR); the reason is in m->err. */
static size_t mem_write(char *p, size_t sz, size_t nm, void *ud) {
    struct membuf *m = ud;
    size_t n = sz * nm;
    return jev_buf_add(&m->buf, p, n, &m->err) == JEV_OK ? n : 0;
}

/* ---- file sink (one transfer) ---- */

struct filesink {
    CURL *curl;                /* the handle, to read the response code */
    const char *part;          /* path of the .part file */
    FILE *f;                   /* opened on the first body byte of a 200/206 */
    long code;                 /* final response code seen by the first write */
    int64_t offset;            /* bytes already on disk when the request was sent */
    int64_t written;           /* bytes written this transfer */
    bool io_failed;            /* opening or writing the part failed */
    char errbody[ERRBODY_MAX]; /* start of a non-2xx body, NUL-terminated */
    size_t errlen;             /* bytes in errbody */
    /* progress */
    const struct jev_download_opts *opts; /* for the callback */
    const char *name;                     /* file name for the callback */
    int64_t total;                        /* listed size or -1 */
    double t0;                            /* transfer start */
};

static size_t file_write(char *p, size_t sz, size_t nm, void *ud) {
    struct filesink *s = ud;
    size_t n = sz * nm;
    if (!s->f && s->code == 0) {
        curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &s->code);
        if (s->code == 206 || s->code == 200) {
            if (s->code == 200)
                s->offset = 0; /* the range was ignored: start over */
            s->f = fopen(s->part, s->code == 206 ? "ab" : "wb");
            if (!s->f) {
                s->io_failed = true;
                return 0;
            }
        }
    }
    if (!s->f) {
        size_t k = n < ERRBODY_MAX - 1 - s->errlen ? n : ERRBODY_MAX - 1 - s->errlen;
        memcpy(s->errbody + s->errlen, p, k);
        s->errlen += k;
        s->errbody[s->errlen] = '\0';
        return n;
    }
    if (fwrite(p, 1, n, s->f) != n) {
        s->io_failed = true;
        return 0;
    }
    s->written += (int64_t)n;
    return n;
}

static int file_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow) {
    (void)dltotal;
    (void)dlnow;
    (void)ultotal;
    (void)ulnow;
    struct filesink *s = ud;
    if (s->opts->progress && s->f)
        s->opts->progress(s->opts->progress_ctx, s->name, s->offset + s->written, s->total, s->offset,
                          jev_now_ms() * 1e-3 - s->t0);
    return 0;
}

/* ---- helpers ---- */

static enum jev_status mkdir_p(const char *path, struct jev_error *err) {
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "download: directory path too long: %s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return jev_fail(err, JEV_ERR_IO, "download: cannot create %s: %s", buf, strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        return jev_fail(err, JEV_ERR_IO, "download: cannot create %s: %s", buf, strerror(errno));
    return JEV_OK;
}

static int64_t file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) ? (int64_t)st.st_size : -1;
}

/* The message for a response code that is not a success. */
static enum jev_status http_fail(struct jev_error *err, long code, const char *url, const char *body) {
    if (code == 401 || code == 403)
        return jev_fail(err, JEV_ERR_IO,
                        "download: HTTP %ld (not authorized) for %s: gated or private repository? pass --token or "
                        "set HF_TOKEN",
                        code, url);
    if (code == 404)
        return jev_fail(err, JEV_ERR_IO,
                        "download: HTTP 404 (not found) for %s: check the repository, revision "
                        "and endpoint",
                        url);
    return jev_fail(err, JEV_ERR_IO, "download: HTTP %ld for %s%s%.200s", code, url, body && *body ? ": " : "",
                    body ? body : "");
}

static void set_common(CURL *c, struct curl_slist *hdr) {
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "jev-download/1");
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
    /* a stalled connection (under 1 byte/s for 60 s) fails instead of hanging */
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    /* the token stays with the endpoint's host: the hub redirects files to a CDN with signed URLs */
    curl_easy_setopt(c, CURLOPT_UNRESTRICTED_AUTH, 0L);
}

/* ---- one file ---- */

static enum jev_status fetch_one(CURL *c, struct curl_slist *hdr, const struct jev_download_opts *o, const char *base,
                                 const char *rev_esc, const struct jev_download_file *f, struct jev_error *err) {
    char url[8192], part[4096], final[4096];
    char *name_esc = curl_easy_escape(c, f->name, 0);
    if (!name_esc)
        return jev_fail(err, JEV_ERR_NOMEM, "download: escaping %s", f->name);
    int un = snprintf(url, sizeof url, "%s/%s/resolve/%s/%s", base, o->repo, rev_esc, name_esc);
    curl_free(name_esc);
    if (un >= (int)sizeof url ||
        snprintf(part, sizeof part, "%s/.partial/%s.part", o->dir, f->name) >= (int)sizeof part ||
        snprintf(final, sizeof final, "%s/%s", o->dir, f->name) >= (int)sizeof final)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "download: path or URL too long for %s", f->name);

    for (int attempt = 0; attempt < 2; attempt++) {
        struct filesink s = {
            .curl = c, .part = part, .opts = o, .name = f->name, .total = f->size, .t0 = jev_now_ms() * 1e-3};
        s.offset = file_size(part);
        if (s.offset < 0)
            s.offset = 0;
        if (f->size >= 0 && s.offset > f->size) {
            unlink(part); /* longer than the listed file: not a prefix of it */
            s.offset = 0;
        }
        if (s.offset > 0 && s.offset == f->size)
            break; /* complete already (the run stopped before verifying): verify it below */
        char range[64];
        snprintf(range, sizeof range, "%lld-", (long long)s.offset);
        curl_easy_reset(c);
        set_common(c, hdr);
        curl_easy_setopt(c, CURLOPT_URL, url);
        if (s.offset > 0)
            curl_easy_setopt(c, CURLOPT_RANGE, range);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, file_write);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
        curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, file_progress);
        curl_easy_setopt(c, CURLOPT_XFERINFODATA, &s);
        CURLcode rc = curl_easy_perform(c);
        long code = 0;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
        bool closed_ok = true;
        if (s.f)
            closed_ok = fclose(s.f) == 0;
        if (s.io_failed || !closed_ok)
            return jev_fail(err, JEV_ERR_IO, "download: cannot write %s: %s", part, strerror(errno));
        if (code == 416 && attempt == 0 && s.offset > 0) {
            unlink(part); /* the server cannot continue this part: start over once */
            continue;
        }
        if (rc == CURLE_OK && code != 200 && code != 206)
            return http_fail(err, code, url, s.errbody);
        if (rc != CURLE_OK)
            return jev_fail(err, JEV_ERR_IO,
                            "download: %s: transfer failed after %lld bytes (%s); %s kept: run again to resume", url,
                            (long long)(s.offset + s.written), curl_easy_strerror(rc), part);
        if (code == 200 && s.f == NULL) {
            /* an empty file: the write callback never ran */
            FILE *e = fopen(part, "wb");
            if (!e || fclose(e) != 0)
                return jev_fail(err, JEV_ERR_IO, "download: cannot write %s", part);
        }
        break;
    }
    int64_t got = file_size(part);
    if (f->size >= 0 && got != f->size) {
        unlink(part);
        return jev_fail(err, JEV_ERR_FORMAT, "download: %s: got %lld bytes, the listing says %lld", f->name,
                        (long long)got, (long long)f->size);
    }
    if (f->sha256[0]) {
        char hex[JEV_SHA256_HEX];
        JEV_TRY(jev_sha256_file(part, hex, err));
        if (strcmp(hex, f->sha256) != 0) {
            unlink(part); /* a corrupt part must not be resumed */
            return jev_fail(err, JEV_ERR_FORMAT, "download: %s: sha256 mismatch: expected %s, got %s", f->name,
                            f->sha256, hex);
        }
    }
    if (rename(part, final) != 0)
        return jev_fail(err, JEV_ERR_IO, "download: cannot rename %s to %s: %s", part, final, strerror(errno));
    return JEV_OK;
}

/* ---- run ---- */

static enum jev_status run_with(CURL *c, struct curl_slist *hdr, const struct jev_download_opts *o, const char *base,
                                int *n_fetched, struct jev_error *err) {
    const char *rev = o->revision ? o->revision : "main";
    char *rev_esc = curl_easy_escape(c, rev, 0);
    if (!rev_esc)
        return jev_fail(err, JEV_ERR_NOMEM, "download: escaping the revision");
    enum jev_status st = JEV_OK;
    struct membuf m = {0};
    jev_buf_init(&m.buf, LISTING_MAX);
    struct jev_download_listing l = {0};
    char url[8192], partial[4096];
    if (snprintf(url, sizeof url, "%s/api/models/%s/revision/%s?blobs=true", base, o->repo, rev_esc) >=
            (int)sizeof url ||
        snprintf(partial, sizeof partial, "%s/.partial", o->dir) >= (int)sizeof partial) {
        st = jev_fail(err, JEV_ERR_INVALID_ARG, "download: URL or path too long");
        goto done;
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    set_common(c, hdr);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, mem_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &m);
    CURLcode rc = curl_easy_perform(c);
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    if (m.err.status != JEV_OK) {
        st = jev_fail(err, m.err.status, "download: listing %s: %s", url, m.err.msg);
        goto done;
    }
    if (rc != CURLE_OK) {
        st = jev_fail(err, JEV_ERR_IO, "download: %s: %s", url, curl_easy_strerror(rc));
        goto done;
    }
    if (code != 200) {
        st = http_fail(err, code, url, NULL);
        goto done;
    }
    st = jev_download_listing_parse(jev_buf_str(&m.buf), m.buf.len, &l, err);
    if (st != JEV_OK)
        goto done;
    if (l.n == 0) {
        st = jev_fail(err, JEV_ERR_FORMAT, "download: %s lists none of the files a model directory needs", url);
        goto done;
    }
    if ((st = mkdir_p(o->dir, err)) != JEV_OK || (st = mkdir_p(partial, err)) != JEV_OK)
        goto done;
    for (int i = 0; i < l.n; i++) {
        char final[4096];
        snprintf(final, sizeof final, "%s/%s", o->dir, l.files[i].name);
        int64_t have = file_size(final);
        if (have >= 0 && (l.files[i].size < 0 || have == l.files[i].size))
            continue; /* already in place (a finished file was verified before its rename) */
        if ((st = fetch_one(c, hdr, o, base, rev_esc, &l.files[i], err)) != JEV_OK)
            goto done;
        if (n_fetched)
            (*n_fetched)++;
    }
    rmdir(partial); /* only when empty: nothing else of ours is left there */
done:
    jev_download_listing_free(&l);
    jev_buf_free(&m.buf);
    curl_free(rev_esc);
    return st;
}

enum jev_status jev_download_run(const struct jev_download_opts *o, int *n_fetched, struct jev_error *err) {
    if (n_fetched)
        *n_fetched = 0;
    if (!o->repo || !o->dir || !*o->repo || !*o->dir)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "download: a repository and a directory are needed");
    /* the repo goes into URLs unescaped (its '/' is part of the path): allow only the hub's id characters */
    for (const char *p = o->repo; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-' ||
              *p == '_' || *p == '.' || *p == '/'))
            return jev_fail(err, JEV_ERR_INVALID_ARG, "download: bad repository id '%s'", o->repo);
    const char *ep = o->endpoint ? o->endpoint : getenv("HF_ENDPOINT");
    if (!ep || !*ep)
        ep = "https://huggingface.co";
    char base[2048];
    if (snprintf(base, sizeof base, "%s", ep) >= (int)sizeof base)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "download: endpoint too long");
    for (size_t n = strlen(base); n > 0 && base[n - 1] == '/'; n--)
        base[n - 1] = '\0';
    const char *tok = o->token ? o->token : getenv("HF_TOKEN");

    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return jev_fail(err, JEV_ERR_IO, "download: libcurl initialization failed");
    CURL *c = curl_easy_init();
    struct curl_slist *hdr = NULL;
    enum jev_status st = JEV_OK;
    char auth[4096];
    if (!c) {
        st = jev_fail(err, JEV_ERR_NOMEM, "download: libcurl handle");
        goto out;
    }
    if (tok && *tok) {
        if (snprintf(auth, sizeof auth, "Authorization: Bearer %s", tok) >= (int)sizeof auth) {
            st = jev_fail(err, JEV_ERR_INVALID_ARG, "download: token too long");
            goto out;
        }
        hdr = curl_slist_append(NULL, auth);
        if (!hdr) {
            st = jev_fail(err, JEV_ERR_NOMEM, "download: header list");
            goto out;
        }
    }
    st = run_with(c, hdr, o, base, n_fetched, err);
out:
    curl_slist_free_all(hdr);
    if (c)
        curl_easy_cleanup(c);
    curl_global_cleanup();
    return st;
}
