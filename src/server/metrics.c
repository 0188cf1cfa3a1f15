/*
 * metrics.c - GET /metrics: the server's counters in the Prometheus text
 * exposition format (version 0.0.4): requests by route and status, latency
 * histograms by route, the queue, the batches (rows and requests per forward
 * of the language model), tokens, images, prefixes reused, the engine's
 * memory and the open connections.
 *
 * Every counter is an atomic that any thread adds to; the text is made on
 * the HTTP thread that answers the scrape, so a scrape never waits on the
 * model. A scrape sees each counter at some moment, not all at one moment.
 *
 * What it is not: a registry of metrics others can add to, labels beyond
 * route and status, or a push client.
 */
#include "server-int.h" // defines: struct metrics, metrics_text

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h" // defines: struct jev_buf

static const char *const route_names[ROUTE_COUNT] = {"other",   "/v1/systemone", "/v1/decisions", "/v1/models",
                                                     "/health", "/ready",        "/metrics"};

/* Upper bounds of the latency buckets, seconds (the last bucket is +Inf). */
static const double latency_le[METRICS_LATENCY_BUCKETS] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                           0.5,   1,      2.5,   5,    10,    30,   60,  120};

/* Upper bounds of the batch-size buckets (rows or requests per forward). */
static const double size_le[METRICS_SIZE_BUCKETS] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64, 128};

void metrics_answer(struct metrics *m, enum route r, unsigned status, double ms) {
    int ri = (int)r >= 0 && (int)r < ROUTE_COUNT ? (int)r : 0;
    if (status < METRICS_STATUS_MAX)
        atomic_fetch_add(&m->requests[ri][status], 1);
    double sec = ms / 1000.0;
    int b = 0;
    while (b < METRICS_LATENCY_BUCKETS && sec > latency_le[b])
        b++;
    atomic_fetch_add(&m->latency[ri][b], 1);
    atomic_fetch_add(&m->latency_us[ri], (long long)(ms * 1000.0));
}

static void observe_size(atomic_llong *buckets, atomic_llong *sum, int64_t v) {
    int b = 0;
    while (b < METRICS_SIZE_BUCKETS && (double)v > size_le[b])
        b++;
    atomic_fetch_add(&buckets[b], 1);
    atomic_fetch_add(sum, (long long)v);
}

void metrics_step(struct metrics *m, const struct jev_batch_step *st) {
    if (st->forwards > 0) { /* one observation per step's forward: what shared it */
        observe_size(m->rows, &m->rows_sum, st->rows);
        observe_size(m->batch_requests, &m->batch_requests_sum, st->requests);
    }
    atomic_fetch_add(&m->forwards, st->forwards);
    atomic_fetch_add(&m->tokens, (long long)st->tokens);
    atomic_fetch_add(&m->images, st->images);
    atomic_fetch_add(&m->prefix_reused, st->reused);
    atomic_store(&m->device_bytes, (long long)st->memory_bytes);
    long long peak = atomic_load(&m->device_peak);
    while (st->memory_peak > peak && !atomic_compare_exchange_weak(&m->device_peak, &peak, st->memory_peak))
        ;
}

/* printf into the buffer; a failure (the 1 MiB cap, memory) shows at the end, in jev_buf_take. */
#define put(b, ...) jev_buf_printf(b, NULL, __VA_ARGS__)

static void histogram(struct jev_buf *b, const char *name, const char *labels, const atomic_llong *buckets,
                      const double *le, int n, double sum) {
    long long cum = 0;
    for (int i = 0; i <= n; i++) {
        cum += atomic_load(&buckets[i]);
        if (i < n)
            put(b, "%s_bucket{%s%sle=\"%g\"} %lld\n", name, labels, labels[0] ? "," : "", le[i], cum);
        else
            put(b, "%s_bucket{%s%sle=\"+Inf\"} %lld\n", name, labels, labels[0] ? "," : "", cum);
    }
    put(b, "%s_sum%s%s%s %.6f\n", name, labels[0] ? "{" : "", labels, labels[0] ? "}" : "", sum);
    put(b, "%s_count%s%s%s %lld\n", name, labels[0] ? "{" : "", labels, labels[0] ? "}" : "", cum);
}

char *metrics_text(const struct metrics *m, int32_t queued, int32_t running, int32_t connections, int32_t max_queue,
                   bool draining) {
    struct jev_buf b;
    jev_buf_init(&b, (size_t)1 << 20);
    put(&b, "# HELP jev_requests_total Requests answered, by route and HTTP status.\n");
    put(&b, "# TYPE jev_requests_total counter\n");
    for (int r = 0; r < ROUTE_COUNT; r++)
        for (int st = 100; st < METRICS_STATUS_MAX; st++) {
            long long n = atomic_load(&m->requests[r][st]);
            if (n)
                put(&b, "jev_requests_total{route=\"%s\",status=\"%d\"} %lld\n", route_names[r], st, n);
        }
    put(&b, "# HELP jev_request_duration_seconds Time from a request's head to its answer, by route.\n");
    put(&b, "# TYPE jev_request_duration_seconds histogram\n");
    for (int r = 0; r < ROUTE_COUNT; r++) {
        char labels[64];
        snprintf(labels, sizeof labels, "route=\"%s\"", route_names[r]);
        histogram(&b, "jev_request_duration_seconds", labels, m->latency[r], latency_le, METRICS_LATENCY_BUCKETS,
                  (double)atomic_load(&m->latency_us[r]) / 1e6);
    }
    put(&b, "# HELP jev_queue_depth Admitted requests waiting to join the batch.\n");
    put(&b, "# TYPE jev_queue_depth gauge\njev_queue_depth %d\n", queued);
    put(&b, "# HELP jev_queue_limit Requests that may wait (--max-queue).\n");
    put(&b, "# TYPE jev_queue_limit gauge\njev_queue_limit %d\n", max_queue);
    put(&b, "# HELP jev_requests_running Requests in the shared batch.\n");
    put(&b, "# TYPE jev_requests_running gauge\njev_requests_running %d\n", running);
    put(&b, "# HELP jev_connections_open Open HTTP connections.\n");
    put(&b, "# TYPE jev_connections_open gauge\njev_connections_open %d\n", connections);
    put(&b, "# HELP jev_draining 1 once the server stops admitting (SIGTERM).\n");
    put(&b, "# TYPE jev_draining gauge\njev_draining %d\n", draining ? 1 : 0);
    put(&b, "# HELP jev_batch_rows Question suffixes scored per forward of the language model.\n");
    put(&b, "# TYPE jev_batch_rows histogram\n");
    histogram(&b, "jev_batch_rows", "", m->rows, size_le, METRICS_SIZE_BUCKETS, (double)atomic_load(&m->rows_sum));
    put(&b, "# HELP jev_batch_requests Requests with work in one forward of the language model.\n");
    put(&b, "# TYPE jev_batch_requests histogram\n");
    histogram(&b, "jev_batch_requests", "", m->batch_requests, size_le, METRICS_SIZE_BUCKETS,
              (double)atomic_load(&m->batch_requests_sum));
    put(&b, "# HELP jev_forwards_total Forwards of the language model.\n");
    put(&b, "# TYPE jev_forwards_total counter\njev_forwards_total %lld\n", atomic_load(&m->forwards));
    put(&b, "# HELP jev_tokens_total Tokens through the language model.\n");
    put(&b, "# TYPE jev_tokens_total counter\njev_tokens_total %lld\n", atomic_load(&m->tokens));
    put(&b, "# HELP jev_images_total Images through the vision tower.\n");
    put(&b, "# TYPE jev_images_total counter\njev_images_total %lld\n", atomic_load(&m->images));
    put(&b, "# HELP jev_prefix_reused_total Requests answered from a kept prefix (no vision, no prefill).\n");
    put(&b, "# TYPE jev_prefix_reused_total counter\njev_prefix_reused_total %lld\n", atomic_load(&m->prefix_reused));
    put(&b,
        "# HELP jev_device_memory_bytes The engine's memory in use (a device's bytes, or host arenas and state).\n");
    put(&b, "# TYPE jev_device_memory_bytes gauge\njev_device_memory_bytes %lld\n", atomic_load(&m->device_bytes));
    put(&b, "# HELP jev_device_memory_peak_bytes The most of it since the server started.\n");
    put(&b, "# TYPE jev_device_memory_peak_bytes gauge\njev_device_memory_peak_bytes %lld\n",
        atomic_load(&m->device_peak));
    char *text = NULL;
    size_t len = 0;
    if (jev_buf_take(&b, &text, &len, NULL) != JEV_OK) {
        jev_buf_free(&b);
        return NULL;
    }
    return text;
}
