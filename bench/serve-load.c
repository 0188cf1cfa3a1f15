/*
 * serve-load.c - a load generator for `jev serve` (a benchmark, not a test;
 * scripts/serve-load.sh builds it, starts the server and runs it).
 *
 *   serve-load --url http://127.0.0.1:PORT [--key K] [--image F.jpg]
 *              [--concurrency 1,4,16,32] [--duration S] [--warmup S]
 *              [--questions N|A-B] [--types choice|mixed] [--server-pid PID]
 *              [--timeout S] [--seed N] [--output F.json]
 *   serve-load --dump DIR N [--seed N] [--questions ...] [--types ...] [--image F.jpg]
 *   serve-load --compare DIR_A DIR_B N
 *
 * For each concurrency step, that many client threads (one keep-alive
 * connection each, libcurl) send System One decisions back to back for
 * warmup + duration seconds. Every request carries a distinct image: a
 * crop of the source photo (its place and size drawn from the seed and the
 * request's number, 60-100% of each side) encoded as a JPEG (libturbojpeg,
 * quality 90) and sent as a data URL, so no two requests share a prefix or an
 * image and the server's kept prefixes never answer for the load. The
 * questions: N choice questions of 4 options each (the default, 4), or A..B
 * questions drawn per request, cycling through choice, noul and score
 * (--types mixed). The body is made before its request's clock starts.
 *
 * Per step it prints and writes (JSON): requests completed in the measured
 * window (after the warm-up), throughput (completions / window), latency
 * p50, p90, p99 and max over those requests, errors (a status other than 200
 * or a transport failure: every one counts, warm-up included) and the
 * server's peak RSS (VmRSS of --server-pid, sampled every 100 ms). A step
 * ends after its window; requests still running then are awaited (at most
 * --timeout) and not counted, so each step is bounded in time.
 *
 * --dump writes the first N request bodies (request-000.json, ...) into DIR and
 * exits: the same bodies a run sends, for comparing answers alone and in company.
 * --compare reads answer-NNN.json of two folders (the responses to those
 * bodies, e.g. alone and all at once) and prints, per request and over all,
 * the largest difference of their real numbers (probabilities, scores) and
 * whether anything else (keys, choices, usage) differs; exit status 1 then.
 *
 * What it is not: a test (it checks statuses, not answers), or a generator
 * of open-loop (Poisson) arrivals: each client waits for its answer.
 */
#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <turbojpeg.h>
#include <unistd.h>

#include "base/timing.h"        // defines: jev_now_ms
#include "common/bench/stats.h" // defines: jev_bench_cmp_double
#include "common/json-diff.h"   // defines: jev_json_diff_walk

#define MAX_STEPS 16
#define MAX_CLIENTS 256

struct opts {
    const char *url, *key, *image, *output, *dump;
    int dump_n;
    int conc[MAX_STEPS], n_conc;
    double duration, warmup, timeout;
    int q_min, q_max;
    bool mixed;
    long server_pid;
    unsigned seed;
};

/* The source photo, decoded once (RGB8). */
struct photo {
    unsigned char *rgb;
    int w, h;
};

/* ---- request bodies ---- */

static uint32_t mix(uint32_t x) { /* a 32-bit hash (lowbias32): the seed and the request number to draws */
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}

static char *base64(const unsigned char *b, size_t n) {
    static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *o = malloc((n + 2) / 3 * 4 + 1);
    if (!o)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)b[i] << 16 | (i + 1 < n ? (uint32_t)b[i + 1] << 8 : 0) | (i + 2 < n ? b[i + 2] : 0);
        o[k++] = t[v >> 18 & 63];
        o[k++] = t[v >> 12 & 63];
        o[k++] = i + 1 < n ? t[v >> 6 & 63] : '=';
        o[k++] = i + 2 < n ? t[v & 63] : '=';
    }
    o[k] = '\0';
    return o;
}

/* Request number i's body: a crop of the photo as a JPEG data URL and its questions. malloc'd. */
static char *make_body(const struct opts *o, const struct photo *ph, tjhandle tj, uint64_t i) {
    uint32_t r0 = mix(o->seed ^ (uint32_t)(i * 2654435761u)), r1 = mix(r0), r2 = mix(r1), r3 = mix(r2), r4 = mix(r3);
    int cw = ph->w * (60 + (int)(r0 % 41)) / 100, ch = ph->h * (60 + (int)(r1 % 41)) / 100;
    int x = (int)(r2 % (uint32_t)(ph->w - cw + 1)), y = (int)(r3 % (uint32_t)(ph->h - ch + 1));
    unsigned char *jpg = NULL;
    unsigned long jpg_n = 0;
    if (tjCompress2(tj, ph->rgb + ((size_t)y * (size_t)ph->w + (size_t)x) * 3, cw, ph->w * 3, ch, TJPF_RGB, &jpg,
                    &jpg_n, TJSAMP_420, 90, TJFLAG_ACCURATEDCT) != 0)
        return NULL;
    char *b64 = base64(jpg, jpg_n);
    tjFree(jpg);
    if (!b64)
        return NULL;
    int nq = o->q_min + (int)(r4 % (uint32_t)(o->q_max - o->q_min + 1));
    size_t cap = strlen(b64) + 512 + (size_t)nq * 400;
    char *body = malloc(cap);
    if (!body) {
        free(b64);
        return NULL;
    }
    size_t at = (size_t)snprintf(body, cap,
                                 "{\"model\":\"jev-latest\",\"state\":{\"listing\":%llu,\"note\":\"a photo for a pet "
                                 "adoption listing\"},\"images\":[\"data:image/jpeg;base64,%s\"],\"questions\":{",
                                 (unsigned long long)i, b64);
    free(b64);
    static const char *const animals[] = {"A dog", "A cat", "A bird", "A horse"};
    for (int q = 0; q < nq; q++) {
        int type = o->mixed ? (int)((mix(r4 + (uint32_t)q) % 3)) : 0;
        if (type == 0)
            at += (size_t)snprintf(body + at, cap - at,
                                   "%s\"q%d\":{\"type\":\"choice\",\"instructions\":\"What animal is in the photo "
                                   "(question %d)?\",\"criteria\":{\"%s\":null,\"%s\":null,\"%s\":null,\"%s\":null}}",
                                   q ? "," : "", q, q, animals[0], animals[1], animals[2], animals[3]);
        else if (type == 1)
            at += (size_t)snprintf(body + at, cap - at,
                                   "%s\"q%d\":{\"type\":\"noul\",\"instructions\":\"Is the animal indoors "
                                   "(question %d)?\"}",
                                   q ? "," : "", q, q);
        else
            at += (size_t)snprintf(body + at, cap - at,
                                   "%s\"q%d\":{\"type\":\"score\",\"instructions\":\"How sharp is the photo "
                                   "(question %d)?\",\"criteria\":[\"blurry\",\"fair\",\"sharp\"]}",
                                   q ? "," : "", q, q);
    }
    snprintf(body + at, cap - at, "}}");
    return body;
}

/* ---- one step ---- */

struct sample {
    double done_ms; /* when the answer arrived */
    double ms;      /* its latency */
    bool ok;        /* 200 */
};

struct step {
    const struct opts *o;
    const struct photo *ph;
    double t_measure, t_end; /* the window */
    atomic_ullong *next;     /* request numbers, across steps (every body distinct) */
    pthread_mutex_t lock;
    struct sample *s;
    size_t n, cap;
    atomic_long errors;
};

static size_t discard(char *p, size_t size, size_t n, void *u) {
    (void)p;
    (void)u;
    return size * n;
}

static void *client(void *u) {
    struct step *st = u;
    const struct opts *o = st->o;
    CURL *h = curl_easy_init();
    tjhandle tj = tjInitCompress();
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
    hdr = curl_slist_append(hdr, "Expect:");
    char auth[512];
    if (o->key) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", o->key);
        hdr = curl_slist_append(hdr, auth);
    }
    char url[600];
    snprintf(url, sizeof url, "%s/v1/systemone", o->url);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(o->timeout * 1000));
    while (jev_now_ms() < st->t_end) {
        uint64_t i = atomic_fetch_add(st->next, 1);
        char *body = make_body(o, st->ph, tj, i);
        if (!body) {
            atomic_fetch_add(&st->errors, 1);
            continue;
        }
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
        double t0 = jev_now_ms();
        CURLcode rc = curl_easy_perform(h);
        double t1 = jev_now_ms();
        long status = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        free(body);
        bool ok = rc == CURLE_OK && status == 200;
        if (!ok)
            atomic_fetch_add(&st->errors, 1);
        if (t1 > st->t_end) /* answered after the window: awaited, not counted */
            break;
        if (t1 < st->t_measure) /* the warm-up */
            continue;
        pthread_mutex_lock(&st->lock);
        if (st->n == st->cap) {
            size_t c = st->cap ? st->cap * 2 : 1024;
            struct sample *s = realloc(st->s, c * sizeof *s);
            if (s) {
                st->s = s;
                st->cap = c;
            }
        }
        if (st->n < st->cap)
            st->s[st->n++] = (struct sample){t1, t1 - t0, ok};
        pthread_mutex_unlock(&st->lock);
    }
    curl_slist_free_all(hdr);
    curl_easy_cleanup(h);
    tjDestroy(tj);
    return NULL;
}

/* The server's resident set in bytes (VmRSS), or -1. */
static long long rss_of(long pid) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%ld/status", pid);
    FILE *f = fopen(path, "r");
    long long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6))
            kb = atoll(line + 6);
    if (f)
        fclose(f);
    return kb < 0 ? -1 : kb * 1024;
}

struct sampler {
    long pid;
    volatile bool stop;
    long long peak;
};

static void *sample_rss(void *u) {
    struct sampler *s = u;
    while (!s->stop) {
        long long r = rss_of(s->pid);
        if (r > s->peak)
            s->peak = r;
        usleep(100000);
    }
    return NULL;
}

/* The p-th percentile (0..100) of sorted v[n], nearest rank. */
static double pct(const double *v, size_t n, double p) {
    if (n == 0)
        return (double)NAN;
    size_t k = (size_t)ceil(p / 100.0 * (double)n);
    return v[k > 0 ? k - 1 : 0];
}

/* ---- comparing answers ---- */

static int compare(const char *da, const char *db, int n) {
    double all = 0;
    int same = 0, bad = 0;
    for (int i = 0; i < n; i++) {
        char pa[4096], pb[4096];
        snprintf(pa, sizeof pa, "%s/answer-%03d.json", da, i);
        snprintf(pb, sizeof pb, "%s/answer-%03d.json", db, i);
        json_t *a = json_load_file(pa, 0, NULL), *b = json_load_file(pb, 0, NULL);
        double w = 0;
        bool ok = a && b && json_object_get(a, "answers") && jev_json_diff_walk(a, b, &w);
        char *sa = a ? json_dumps(a, JSON_COMPACT) : NULL, *sb = b ? json_dumps(b, JSON_COMPACT) : NULL;
        bool bits = sa && sb && !strcmp(sa, sb);
        printf("request %03d: %s, max |dp| %.3g%s\n", i, ok ? "same keys, choices and usage" : "DIFFERENT", w,
               bits ? " (bit-identical)" : "");
        all = fmax(all, w);
        same += bits;
        bad += !ok;
        free(sa);
        free(sb);
        json_decref(a);
        json_decref(b);
    }
    printf("%d answers: %d bit-identical, %d differing in more than numbers, max |dp| %.3g\n", n, same, bad, all);
    return bad ? 1 : 0;
}

/* ---- main ---- */

static int parse_list(const char *s, int *out, int max) {
    int n = 0;
    for (const char *p = s; *p && n < max;) {
        out[n++] = atoi(p);
        const char *c = strchr(p, ',');
        if (!c)
            break;
        p = c + 1;
    }
    return n;
}

static bool load_photo(const char *path, struct photo *ph) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n);
    bool ok = b && fread(b, 1, (size_t)n, f) == (size_t)n;
    fclose(f);
    tjhandle tj = tjInitDecompress();
    int w = 0, h = 0, sub = 0, cs = 0;
    ok = ok && tj && tjDecompressHeader3(tj, b, (unsigned long)n, &w, &h, &sub, &cs) == 0;
    ph->rgb = ok ? malloc((size_t)w * (size_t)h * 3) : NULL;
    ok = ok && ph->rgb && tjDecompress2(tj, b, (unsigned long)n, ph->rgb, w, 0, h, TJPF_RGB, TJFLAG_ACCURATEDCT) == 0;
    ph->w = w;
    ph->h = h;
    free(b);
    if (tj)
        tjDestroy(tj);
    return ok;
}

static void usage(void) {
    fprintf(stderr, "usage: serve-load --url http://HOST:PORT [--key K] [--image F.jpg] [--concurrency 1,4,16,32]\n"
                    "                  [--duration S] [--warmup S] [--questions N|A-B] [--types choice|mixed]\n"
                    "                  [--server-pid PID] [--timeout S] [--seed N] [--output F.json]\n"
                    "       serve-load --dump DIR N [--seed N] [--questions N|A-B] [--types choice|mixed] [--image F]\n"
                    "       serve-load --compare DIR_A DIR_B N\n");
}

int main(int argc, char **argv) {
    struct opts o = {
        .image = "assets/dog.jpg", .duration = 30, .warmup = 5, .timeout = 300, .q_min = 4, .q_max = 4, .seed = 1};
    o.n_conc = parse_list("1,4,16,32", o.conc, MAX_STEPS);
    if (argc == 5 && !strcmp(argv[1], "--compare"))
        return compare(argv[2], argv[3], atoi(argv[4]));
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            usage();
            return 2;
        }
        if (!strcmp(a, "--url"))
            o.url = v;
        else if (!strcmp(a, "--key"))
            o.key = v;
        else if (!strcmp(a, "--image"))
            o.image = v;
        else if (!strcmp(a, "--output"))
            o.output = v;
        else if (!strcmp(a, "--dump") && i + 2 < argc) {
            o.dump = v;
            o.dump_n = atoi(argv[++i + 1]);
        } else if (!strcmp(a, "--concurrency"))
            o.n_conc = parse_list(v, o.conc, MAX_STEPS);
        else if (!strcmp(a, "--duration"))
            o.duration = atof(v);
        else if (!strcmp(a, "--warmup"))
            o.warmup = atof(v);
        else if (!strcmp(a, "--timeout"))
            o.timeout = atof(v);
        else if (!strcmp(a, "--seed"))
            o.seed = (unsigned)strtoul(v, NULL, 10);
        else if (!strcmp(a, "--server-pid"))
            o.server_pid = atol(v);
        else if (!strcmp(a, "--types"))
            o.mixed = !strcmp(v, "mixed");
        else if (!strcmp(a, "--questions")) {
            o.q_min = o.q_max = atoi(v);
            const char *dash = strchr(v, '-');
            if (dash)
                o.q_max = atoi(dash + 1);
        } else {
            usage();
            return 2;
        }
        i++;
    }
    if ((!o.url && !o.dump) || o.n_conc < 1 || o.duration <= 0 || o.q_min < 1 || o.q_max < o.q_min) {
        usage();
        return 2;
    }
    for (int i = 0; i < o.n_conc; i++)
        if (o.conc[i] < 1 || o.conc[i] > MAX_CLIENTS) {
            fprintf(stderr, "serve-load: concurrency %d is not in 1..%d\n", o.conc[i], MAX_CLIENTS);
            return 2;
        }
    struct photo ph;
    if (!load_photo(o.image, &ph)) {
        fprintf(stderr, "serve-load: cannot decode %s as a JPEG\n", o.image);
        return 1;
    }
    if (o.dump) { /* the bodies a run sends, to files */
        tjhandle tj = tjInitCompress();
        for (int i = 0; i < o.dump_n; i++) {
            char path[4096];
            snprintf(path, sizeof path, "%s/request-%03d.json", o.dump, i);
            char *body = make_body(&o, &ph, tj, (uint64_t)i);
            FILE *f = body ? fopen(path, "w") : NULL;
            if (!f || fputs(body, f) < 0 || fclose(f) != 0) {
                fprintf(stderr, "serve-load: cannot write %s\n", path);
                return 1;
            }
            free(body);
        }
        tjDestroy(tj);
        free(ph.rgb);
        return 0;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    FILE *out = o.output ? fopen(o.output, "w") : NULL;
    if (out)
        fprintf(out,
                "{\"format\":\"jev-serve-load/1\",\"url\":\"%s\",\"questions\":\"%d-%d\",\"types\":\"%s\","
                "\"duration_s\":%g,\"warmup_s\":%g,\"seed\":%u,\"steps\":[",
                o.url, o.q_min, o.q_max, o.mixed ? "mixed" : "choice", o.duration, o.warmup, o.seed);
    printf("%5s %9s %8s %9s %9s %9s %9s %7s %10s\n", "conc", "requests", "req/s", "p50 ms", "p90 ms", "p99 ms",
           "max ms", "errors", "rss MiB");
    atomic_ullong next = 0;
    int rc = 0;
    for (int k = 0; k < o.n_conc; k++) {
        int c = o.conc[k];
        struct step st = {.o = &o, .ph = &ph, .next = &next};
        pthread_mutex_init(&st.lock, NULL);
        struct sampler sm = {.pid = o.server_pid, .peak = -1};
        pthread_t smt;
        if (o.server_pid > 0)
            pthread_create(&smt, NULL, sample_rss, &sm);
        double t0 = jev_now_ms();
        st.t_measure = t0 + o.warmup * 1000;
        st.t_end = st.t_measure + o.duration * 1000;
        pthread_t th[MAX_CLIENTS];
        for (int i = 0; i < c; i++)
            pthread_create(&th[i], NULL, client, &st);
        for (int i = 0; i < c; i++)
            pthread_join(th[i], NULL);
        sm.stop = true;
        if (o.server_pid > 0)
            pthread_join(smt, NULL);
        double *lat = malloc((st.n ? st.n : 1) * sizeof *lat);
        size_t n_ok = 0;
        for (size_t i = 0; i < st.n; i++)
            if (st.s[i].ok)
                lat[n_ok++] = st.s[i].ms;
        qsort(lat, n_ok, sizeof *lat, jev_bench_cmp_double);
        double window = o.duration, rps = (double)n_ok / window;
        long errors = atomic_load(&st.errors);
        printf("%5d %9zu %8.2f %9.1f %9.1f %9.1f %9.1f %7ld %10.1f\n", c, n_ok, rps, pct(lat, n_ok, 50),
               pct(lat, n_ok, 90), pct(lat, n_ok, 99), n_ok ? lat[n_ok - 1] : (double)NAN, errors,
               sm.peak > 0 ? (double)sm.peak / (1 << 20) : (double)NAN);
        fflush(stdout);
        if (out)
            fprintf(out,
                    "%s{\"concurrency\":%d,\"requests\":%zu,\"req_per_s\":%.4f,\"p50_ms\":%.2f,\"p90_ms\":%.2f,"
                    "\"p99_ms\":%.2f,\"max_ms\":%.2f,\"errors\":%ld,\"server_rss_peak_bytes\":%lld}",
                    k ? "," : "", c, n_ok, rps, n_ok ? pct(lat, n_ok, 50) : 0, n_ok ? pct(lat, n_ok, 90) : 0,
                    n_ok ? pct(lat, n_ok, 99) : 0, n_ok ? lat[n_ok - 1] : 0, errors, sm.peak);
        if (errors)
            rc = 3;
        free(lat);
        free(st.s);
        pthread_mutex_destroy(&st.lock);
    }
    if (out) {
        fprintf(out, "]}\n");
        fclose(out);
    }
    free(ph.rgb);
    curl_global_cleanup();
    return rc;
}
