/*
 * http-int.h - the server's HTTP/1.1 (RFC 9112), for server/ only: a request
 * head parsed strictly and a body's framing decoded piece by piece
 * (http-parse.c: pure, no sockets), and the listening socket, the threads
 * and the connections (http-loop.c). server.c gives it a handler and answers
 * every request, refusals of malformed bytes included, so that every
 * response is the server's own JSON with a request id.
 *
 * Why jev speaks HTTP/1.1 itself rather than through libmicrohttpd 0.9.75
 * (what Debian 12 ships): that library answers a malformed Content-Length
 * with its status line and headers twice (a malformed response; fixed in
 * 1.0), reads a request with both Content-Length and Transfer-Encoding by
 * the latter and keeps the connection (the bytes after the body are served
 * as a second request), takes the first of two different Content-Length
 * values, and answers its own refusals (400, 413, 431, 505) with HTML and no
 * request id before the application sees the request. The one HTTP parser
 * Debian ships as a C library (nodejs http-parser 2.9) is archived upstream;
 * llhttp is not packaged.
 *
 * What it is not: a client, HTTP/2, TLS, URL decoding, content codings.
 */
#ifndef JEV_SERVER_HTTP_INT_H
#define JEV_SERVER_HTTP_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define HTTP_HEAD_MAX (32 << 10)   /* request line + field lines + the blank line; more is 431 */
#define HTTP_LINE_MAX (8 << 10)    /* the request line; more is 414 */
#define HTTP_FIELDS_MAX 100        /* field lines; more is 431 */
#define HTTP_METHOD_MAX 20         /* a longer method is none jev implements: 501 */
#define HTTP_CHUNK_LINE_MAX 1024   /* a chunk-size line with its extensions; more is 400 */
#define HTTP_TRAILER_MAX (8 << 10) /* a chunked body's trailer section; more is 431 */

/* A refusal of the bytes received: every one closes the connection after its response. */
struct http_refusal {
    int status;       /* 400, 408, 414, 431, 501, 503 or 505 */
    bool retry_after; /* the client may try again soon (503 past the connection cap): Retry-After */
    char message[256];
};

/* ---- the head (http-parse.c) ---- */

/* Where the search for the end of a head stands; zero it for each request. */
struct http_scan {
    size_t pos;        /* bytes examined */
    size_t line_start; /* where the current line starts */
    size_t skip;       /* empty lines before the request line, which RFC 9112 §2.2 lets a server ignore */
    int32_t lines;     /* complete lines of the head so far */
};

/*
 * Looks for the blank line that ends a head in buf[0..len) (the same buffer, grown, on each call).
 * Returns 0 when more bytes are needed, n > 0 when the head is buf[s->skip .. n), -1 when the bytes
 * are refused (r: a bare CR or LF 400, a request line over HTTP_LINE_MAX 414, a head over
 * HTTP_HEAD_MAX or HTTP_FIELDS_MAX 431).
 */
long http_scan_head(struct http_scan *s, const char *buf, size_t len, struct http_refusal *r);

enum http_framing { HTTP_BODY_NONE, HTTP_BODY_LENGTH, HTTP_BODY_CHUNKED };

struct http_field {
    const char *name, *value; /* into the head's buffer; the value without its surrounding whitespace */
};

struct http_head {
    char *buf;          /* owned: the head's bytes, cut into NUL-terminated pieces */
    const char *method; /* a token of at most HTTP_METHOD_MAX characters */
    const char *target; /* as sent */
    const char *path;   /* the target's path: origin-form up to '?', absolute-form's after the authority */
    int minor;          /* HTTP/1.minor: 0 or 1 (1.2 and later minors read as 1.1, RFC 9110 §2.5) */
    struct http_field fields[HTTP_FIELDS_MAX];
    int32_t n_fields;
    enum http_framing framing;
    uint64_t length;      /* HTTP_BODY_LENGTH: Content-Length (UINT64_MAX for a number past it) */
    bool keep_alive;      /* another request may follow on the connection */
    bool expect_continue; /* HTTP/1.1 with Expect: 100-continue */
};

/*
 * Parses a head (the n bytes http_scan_head delimited, from s->skip) into h, which owns a copy.
 * false with r set when it is refused: RFC 9112's grammar (one SP between the request line's
 * three parts, a token method, a visible-ASCII target, HTTP/1.x; field names as tokens with the
 * colon right after them, no line folding, no control characters in values) and its framing
 * rules (§6.1, §6.3: Content-Length and Transfer-Encoding together, two different
 * Content-Length values, a Content-Length that is not a number, a Transfer-Encoding whose last
 * coding is not chunked, Transfer-Encoding in HTTP/1.0: 400; a coding other than chunked: 501;
 * HTTP/1.1 without exactly one Host, §3.2: 400; HTTP/2 and up: 505). h is empty after a refusal.
 */
bool http_head_parse(const char *bytes, size_t n, struct http_head *h, struct http_refusal *r);
void http_head_free(struct http_head *h);

/* The value of the first field named name (case-insensitive) or NULL; *count (may be NULL)
 * receives how many fields have that name. */
const char *http_head_field(const struct http_head *h, const char *name, int *count);

/* ---- the body (http-parse.c) ---- */

struct http_body {
    enum http_framing framing;
    uint64_t left;    /* LENGTH: bytes still to come; CHUNKED: bytes left of the current chunk */
    int state;        /* CHUNKED: where in the chunk syntax */
    uint32_t line;    /* CHUNKED: bytes of the current chunk-size line */
    uint32_t trailer; /* CHUNKED: bytes of the trailer section */
    uint32_t digits;  /* CHUNKED: hex digits of the current chunk size */
};

void http_body_init(struct http_body *b, const struct http_head *h);

/*
 * Decodes from in[0..n): *used bytes are consumed, of which (*data, *data_n) are body bytes (at
 * most one run per call; *data_n 0 when none). Returns 1 when the body is complete (in[*used..]
 * is the next request's), 0 when it needs the rest of in or more bytes (call again while *used or
 * *data_n is not 0), -1 when the chunk syntax is broken (r: 400, or 431 for trailers over
 * HTTP_TRAILER_MAX).
 */
int http_body_step(struct http_body *b, const char *in, size_t n, size_t *used, const char **data, size_t *data_n,
                   struct http_refusal *r);

/* ---- the connections (http-loop.c) ---- */

struct http_conn;
struct http_ticket;

/* One request on a connection, as the handler sees it. */
struct http_exchange {
    const struct http_head *head; /* NULL in refused() when the head itself was refused */
    void *user;                   /* the handler's state for this request: done() frees it */
    bool responded;               /* http_respond was called */
    struct http_ticket *ticket;   /* http_defer was called: the answer comes through http_complete */
    struct http_conn *conn;       /* the loop's */
};

/*
 * What the server does with requests; every callback runs on one of the loop's threads, one
 * request of a connection at a time. head: the head has arrived (may respond at once: the body is
 * then not read and the connection closes after the response). body: a piece of the body (may
 * respond: the rest is not read, the connection closes). end: the body is complete; must respond
 * or defer (http_defer). refused: the loop refuses the bytes (r; a connection past the cap or a
 * request past the read deadline too); must respond (the connection then closes). done: the
 * exchange is over, answered or not (the connection went away): free x->user.
 */
struct http_handler {
    void *ctx;
    void (*head)(void *ctx, struct http_exchange *x);
    void (*body)(void *ctx, struct http_exchange *x, const char *data, size_t n);
    void (*end)(void *ctx, struct http_exchange *x);
    void (*refused)(void *ctx, struct http_exchange *x, const struct http_refusal *r);
    void (*done)(void *ctx, struct http_exchange *x);
};

/*
 * Queues the response of x: the status line, Date, the headers (NULL-terminated pairs of name and
 * value; may be NULL), Content-Length, Connection when it closes (or keeps an HTTP/1.0 connection),
 * then body[0..len) except for HEAD. Copies what it needs; once per exchange. A response that
 * cannot be allocated closes the connection instead. On the loop's thread only (from a callback).
 */
void http_respond(struct http_exchange *x, unsigned status, const char *const *headers, const char *body, size_t len);

/*
 * From end() only: the answer will come later, from any thread, through http_complete(ticket).
 * Meanwhile the connection waits: it reads nothing more (pipelined bytes stay buffered), no idle
 * timeout runs, and a client that hangs up frees its descriptor at once (http_ticket_gone then
 * says so). NULL when the ticket cannot be allocated (then respond as usual).
 */
struct http_ticket *http_defer(struct http_exchange *x);

/* Whether the client of a deferred exchange has gone (its answer would be dropped). Any thread. */
bool http_ticket_gone(const struct http_ticket *t);

/*
 * Any thread, exactly once per ticket, before http_loop_stop: the response of a deferred exchange
 * (as http_respond takes it; copied). The connection's own thread sends it and then reads the next
 * request; when the client has gone it is dropped. The ticket is freed.
 */
void http_complete(struct http_ticket *t, unsigned status, const char *const *headers, const char *body, size_t len);

struct http_loop_params {
    struct sockaddr_storage addr; /* bound, with its port (0: the kernel picks one) */
    socklen_t addr_len;
    int32_t threads;         /* event loops, each serving its share of the connections (>= 1) */
    int32_t idle_timeout_s;  /* a connection silent this long (reading or writing) is closed; 0 = never */
    int32_t read_timeout_s;  /* a request whose head and body are not complete this long after its first
                              * byte is refused with 408 (slow clients hold no connection slot); 0 = never */
    int32_t max_connections; /* past this many open connections a new one is answered 503 and closed */
    struct http_handler handler;
};

struct http_loop;

/* Binds, listens and starts the threads; *out is set before the first thread starts (a handler may
 * read it). 0, or an errno value with why[] naming the step (*out NULL). */
int http_loop_start(const struct http_loop_params *p, struct http_loop **out, char *why, size_t why_size);

/* The port bound. */
int32_t http_loop_port(const struct http_loop *l);

/* Connections open now (the ones answered 503 past the cap not counted). */
int32_t http_loop_connections(const struct http_loop *l);

/* Deferred exchanges whose response has not been sent in full yet (the client not gone). */
int32_t http_loop_pending(const struct http_loop *l);

/* From now on every response closes its connection (Connection: close): for a server that drains
 * before it exits. */
void http_loop_close_after_each(struct http_loop *l);

/* Stops accepting, lets each thread finish the callback it is in, closes every connection (done()
 * for each open exchange), joins the threads and frees the loop. NULL is a no-op. Every ticket
 * must have been completed before. */
void http_loop_stop(struct http_loop *l);

#endif
