/*
 * http-parse.c - HTTP/1.1 request heads and body framing (http-int.h), strict
 * where RFC 9112 lets a recipient choose: a server behind a proxy must frame
 * every request exactly as the proxy did, or the bytes after one request's
 * body become a request of their own (request smuggling). So: CRLF only (a
 * bare CR or LF is refused, not read as a line end), no whitespace before a
 * field's colon, no obsolete line folding, Content-Length and
 * Transfer-Encoding never together, Content-Length values all equal, chunked
 * last and once. Pure: bytes in, a head or a refusal out; no sockets.
 *
 * What it is not: a URL decoder (the path is routed as sent), a content
 * decoder (a coding other than chunked is refused with 501), a response
 * writer (http-loop.c).
 */
#include "http-int.h" // defines: struct http_head, struct http_body, struct http_refusal

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int refuse(struct http_refusal *r, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int refuse(struct http_refusal *r, int status, const char *fmt, ...) {
    r->status = status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->message, sizeof r->message, fmt, ap);
    va_end(ap);
    return -1;
}

/* RFC 9110 section 5.6.2: tchar */
static bool is_tchar(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* A refusal where a bool is returned. */
#define FAIL(...) (refuse(__VA_ARGS__), false)

static bool is_ows(char c) { return c == ' ' || c == '\t'; }

/* A printable rendering of a byte for messages. */
static const char *byte_name(unsigned char c, char *buf, size_t size) {
    if (c >= 0x21 && c <= 0x7e)
        snprintf(buf, size, "'%c'", c);
    else
        snprintf(buf, size, "byte 0x%02x", c);
    return buf;
}

/* ---- the end of the head ---- */

long http_scan_head(struct http_scan *s, const char *buf, size_t len, struct http_refusal *r) {
    while (s->pos < len) {
        char c = buf[s->pos];
        if (c == '\n')
            return refuse(r, 400, "http: a line ends in a bare LF (RFC 9112 section 2.2: lines end in CRLF)");
        if (c != '\r') {
            s->pos++;
            if (s->lines == 0 && s->pos - s->line_start > HTTP_LINE_MAX)
                return refuse(r, 414, "http: the request line is longer than %d bytes", HTTP_LINE_MAX);
            if (s->pos > HTTP_HEAD_MAX)
                return refuse(r, 431, "http: the request head is larger than %d bytes", HTTP_HEAD_MAX);
            continue;
        }
        if (s->pos + 1 >= len)
            return 0; /* the LF has not arrived yet */
        if (buf[s->pos + 1] != '\n')
            return refuse(r, 400, "http: a bare CR in the request head (RFC 9112 section 2.2)");
        size_t line = s->pos - s->line_start;
        s->pos += 2;
        s->line_start = s->pos;
        if (line == 0 && s->lines == 0) { /* an empty line before the request line */
            s->skip = s->pos;
            continue;
        }
        if (line == 0)
            return (long)s->pos;
        if (++s->lines > HTTP_FIELDS_MAX + 1)
            return refuse(r, 431, "http: more than %d header fields", HTTP_FIELDS_MAX);
        if (s->pos > HTTP_HEAD_MAX)
            return refuse(r, 431, "http: the request head is larger than %d bytes", HTTP_HEAD_MAX);
    }
    return 0;
}

/* ---- the request line ---- */

/* method SP request-target SP HTTP-version (RFC 9112 section 3), in place; false with r set. */
static bool parse_request_line(char *line, struct http_head *h, char **path_out, struct http_refusal *r) {
    char bn[16];
    size_t m = 0;
    while (is_tchar((unsigned char)line[m]))
        m++;
    if (m == 0)
        return FAIL(r, 400, "http: the request line starts with %s, not a method",
                    byte_name((unsigned char)line[0], bn, sizeof bn));
    if (line[m] != ' ')
        return FAIL(r, 400, "http: the method is followed by %s, not one space",
                    byte_name((unsigned char)line[m], bn, sizeof bn));
    if (m > HTTP_METHOD_MAX)
        return FAIL(r, 501, "http: a method of %zu characters is none this server implements", m);
    line[m] = '\0';
    h->method = line;
    char *t = line + m + 1;
    size_t n = 0;
    while ((unsigned char)t[n] >= 0x21 && (unsigned char)t[n] <= 0x7e)
        n++;
    if (n == 0 || t[n] != ' ')
        return FAIL(r, 400, "http: the request target is followed by %s, not one space and the version",
                    byte_name((unsigned char)t[n], bn, sizeof bn));
    t[n] = '\0';
    h->target = t;
    const char *v = t + n + 1;
    if (strlen(v) != 8 || strncmp(v, "HTTP/", 5) != 0 || v[5] < '0' || v[5] > '9' || v[6] != '.' || v[7] < '0' ||
        v[7] > '9')
        return FAIL(r, 400, "http: '%.20s' is not an HTTP version (HTTP/1.1)", v);
    if (v[5] != '1')
        return FAIL(r, 505, "http: HTTP/%c.%c is not supported (HTTP/1.1 and HTTP/1.0 are)", v[5], v[7]);
    h->minor = v[7] == '0' ? 0 : 1;
    /* the path: origin-form ("/p?q"), absolute-form ("http://host/p?q", RFC 9112 section 3.2.2) or "*" */
    const char *p = t;
    if (strncasecmp(t, "http://", 7) == 0 || strncasecmp(t, "https://", 8) == 0) {
        p = strchr(t, ':') + 3;
        p += strcspn(p, "/?");
    } else if (t[0] != '/' && strcmp(t, "*") != 0) {
        return FAIL(r, 400, "http: the request target '%.100s' is not a path", t);
    }
    size_t plen = strcspn(p, "?");
    char *dst = *path_out;
    if (plen == 0)
        memcpy(dst, "/", 2);
    else {
        memcpy(dst, p, plen);
        dst[plen] = '\0';
    }
    h->path = dst;
    return true;
}

/* ---- field lines ---- */

/* field-name ":" OWS field-value OWS (RFC 9112 section 5), in place. */
static bool parse_field(char *line, struct http_field *f, struct http_refusal *r) {
    char bn[16];
    if (is_ows(line[0]))
        return FAIL(r, 400, "http: a field line starts with whitespace (obsolete line folding, RFC 9112 section 5.2)");
    size_t k = 0;
    while (is_tchar((unsigned char)line[k]))
        k++;
    if (k == 0 || line[k] != ':')
        return FAIL(r, 400, "http: the field name '%.*s' is followed by %s, not a colon", (int)(k > 60 ? 60 : k), line,
                    byte_name((unsigned char)line[k], bn, sizeof bn));
    line[k] = '\0';
    char *v = line + k + 1;
    while (is_ows(*v))
        v++;
    size_t n = 0;
    for (; v[n]; n++) {
        unsigned char c = (unsigned char)v[n];
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return FAIL(r, 400, "http: field %.60s holds %s", line, byte_name(c, bn, sizeof bn));
    }
    while (n && is_ows(v[n - 1]))
        n--;
    v[n] = '\0';
    f->name = line;
    f->value = v;
    return true;
}

/* The next element of a comma-separated list (RFC 9110 section 5.6.1) from *p, trimmed, into [*b, *e);
 * false at the end. Empty elements come back empty. */
static bool list_next(const char **p, const char **b, const char **e) {
    if (!*p)
        return false;
    const char *s = *p;
    const char *comma = strchr(s, ',');
    const char *end = comma ? comma : s + strlen(s);
    *p = comma ? comma + 1 : NULL;
    while (s < end && is_ows(*s))
        s++;
    while (end > s && is_ows(end[-1]))
        end--;
    *b = s;
    *e = end;
    return true;
}

static bool token_is(const char *b, const char *e, const char *word) {
    size_t n = strlen(word);
    return (size_t)(e - b) == n && strncasecmp(b, word, n) == 0;
}

/* What the framing fields say, gathered over every field line. */
struct framing {
    int hosts;
    bool have_length;
    uint64_t length;
    bool have_te;
    int chunked;          /* times chunked was named */
    bool chunked_last;    /* the last coding named was chunked */
    char other[32];       /* a coding other than chunked, for the message */
    bool close, keep;     /* Connection: close, keep-alive */
    bool expect_continue; /* Expect: 100-continue */
};

static bool content_length(const char *v, struct framing *f, struct http_refusal *r) {
    const char *p = v, *b, *e;
    while (list_next(&p, &b, &e)) {
        if (b == e || strspn(b, "0123456789") < (size_t)(e - b))
            return FAIL(r, 400, "http: Content-Length '%.40s' is not a number (RFC 9112 section 6.3)", v);
        uint64_t n = 0;
        for (const char *c = b; c < e; c++)
            n = n > (UINT64_MAX - 9) / 10 ? UINT64_MAX : n * 10 + (uint64_t)(*c - '0');
        if (f->have_length && n != f->length)
            return FAIL(r, 400, "http: two different Content-Length values (RFC 9112 section 6.3)");
        f->have_length = true;
        f->length = n;
    }
    return true;
}

static bool transfer_encoding(const char *v, struct framing *f, struct http_refusal *r) {
    f->have_te = true;
    const char *p = v, *b, *e;
    while (list_next(&p, &b, &e)) {
        if (b == e)
            continue; /* RFC 9110 section 5.6.1: empty list elements are ignored */
        const char *name_end = b;
        while (name_end < e && is_tchar((unsigned char)*name_end))
            name_end++;
        if (name_end == b)
            return FAIL(r, 400, "http: Transfer-Encoding '%.40s' is not a list of codings", v);
        if (f->chunked_last)
            return FAIL(r, 400, "http: a transfer coding after chunked (RFC 9112 section 6.1)");
        f->chunked_last = token_is(b, name_end, "chunked");
        if (f->chunked_last)
            f->chunked++;
        else if (!f->other[0])
            snprintf(f->other, sizeof f->other, "%.*s", (int)(name_end - b), b);
    }
    return true;
}

static void connection_tokens(const char *v, struct framing *f) {
    const char *p = v, *b, *e;
    while (list_next(&p, &b, &e)) {
        f->close |= token_is(b, e, "close");
        f->keep |= token_is(b, e, "keep-alive");
    }
}

/* RFC 9112 section 3.2 (Host), §6.1 and §6.3 (framing), over the fields parsed. */
static bool apply_framing(struct http_head *h, struct http_refusal *r) {
    struct framing f = {0};
    for (int32_t i = 0; i < h->n_fields; i++) {
        const char *n = h->fields[i].name, *v = h->fields[i].value;
        if (!strcasecmp(n, "Host"))
            f.hosts++;
        else if (!strcasecmp(n, "Content-Length")) {
            if (!content_length(v, &f, r))
                return false;
        } else if (!strcasecmp(n, "Transfer-Encoding")) {
            if (!transfer_encoding(v, &f, r))
                return false;
        } else if (!strcasecmp(n, "Connection"))
            connection_tokens(v, &f);
        else if (!strcasecmp(n, "Expect"))
            f.expect_continue |= !strcasecmp(v, "100-continue");
    }
    if (h->minor == 1 && f.hosts != 1)
        return FAIL(r, 400,
                    "http: an HTTP/1.1 request needs exactly one Host field, this one has %d (RFC 9112 section 3.2)",
                    f.hosts);
    if (f.hosts > 1)
        return FAIL(r, 400, "http: %d Host fields (RFC 9112 section 3.2)", f.hosts);
    if (f.have_te) {
        if (h->minor == 0)
            return FAIL(r, 400, "http: Transfer-Encoding in an HTTP/1.0 request (RFC 9112 section 6.1)");
        if (f.have_length)
            return FAIL(r, 400, "http: both Content-Length and Transfer-Encoding (RFC 9112 section 6.1)");
        if (!f.chunked_last)
            return FAIL(r, 400, "http: the last transfer coding is not chunked (RFC 9112 section 6.3)");
        if (f.chunked > 1)
            return FAIL(r, 400, "http: chunked is applied twice (RFC 9112 section 6.1)");
        if (f.other[0])
            return FAIL(r, 501, "http: transfer coding '%s' is not supported (only chunked)", f.other);
        h->framing = HTTP_BODY_CHUNKED;
    } else if (f.have_length && f.length > 0) {
        h->framing = HTTP_BODY_LENGTH;
        h->length = f.length;
    }
    h->keep_alive = h->minor == 1 ? !f.close : f.keep && !f.close;
    h->expect_continue = h->minor == 1 && f.expect_continue;
    return true;
}

bool http_head_parse(const char *bytes, size_t n, struct http_head *h, struct http_refusal *r) {
    memset(h, 0, sizeof *h);
    if (memchr(bytes, '\0', n))
        return FAIL(r, 400, "http: a NUL byte in the request head");
    /* the head, NUL-terminated, then room for the path (never longer than the head) */
    h->buf = malloc(2 * n + 2);
    if (!h->buf)
        return FAIL(r, 431, "http: no memory for a head of %zu bytes", n);
    memcpy(h->buf, bytes, n);
    h->buf[n] = '\0';
    char *path = h->buf + n + 1;
    char *line = h->buf;
    char *eol = strstr(line, "\r\n");
    bool ok = eol != NULL;
    if (ok) {
        *eol = '\0';
        ok = parse_request_line(line, h, &path, r);
    } else {
        refuse(r, 400, "http: no request line");
    }
    /* field lines up to the blank line, which ends the head (http_scan_head found it) */
    for (line = ok ? eol + 2 : NULL; ok && (eol = strstr(line, "\r\n")) != NULL && eol != line; line = eol + 2) {
        *eol = '\0';
        if (h->n_fields == HTTP_FIELDS_MAX)
            ok = FAIL(r, 431, "http: more than %d header fields", HTTP_FIELDS_MAX);
        else
            ok = parse_field(line, &h->fields[h->n_fields++], r);
    }
    if (ok)
        ok = apply_framing(h, r);
    if (!ok)
        http_head_free(h);
    return ok;
}

void http_head_free(struct http_head *h) {
    free(h->buf);
    memset(h, 0, sizeof *h);
}

const char *http_head_field(const struct http_head *h, const char *name, int *count) {
    const char *first = NULL;
    int k = 0;
    for (int32_t i = 0; i < h->n_fields; i++)
        if (!strcasecmp(h->fields[i].name, name)) {
            if (!first)
                first = h->fields[i].value;
            k++;
        }
    if (count)
        *count = k;
    return first;
}

/* ---- the body ---- */

enum {
    CH_SIZE,     /* hex digits of a chunk size */
    CH_SIZE_WS,  /* whitespace after the size, before an extension */
    CH_EXT,      /* a chunk extension, up to CR */
    CH_SIZE_LF,  /* the LF ending a chunk-size line */
    CH_DATA,     /* chunk data */
    CH_DATA_CR,  /* the CRLF after chunk data */
    CH_DATA_LF,  /* */
    CH_TRAILER,  /* the start of a trailer line, or the final CRLF */
    CH_TRL_LINE, /* a trailer field line, up to CR */
    CH_TRL_LF,   /* the LF ending a trailer line */
    CH_END_LF,   /* the LF of the final CRLF */
};

void http_body_init(struct http_body *b, const struct http_head *h) {
    memset(b, 0, sizeof *b);
    b->framing = h->framing;
    b->left = h->framing == HTTP_BODY_LENGTH ? h->length : 0;
    b->state = CH_SIZE;
}

static int hex_value(unsigned char c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* One byte of the chunk syntax outside chunk data. 1: the body ended with it; 0: go on; -1: refused. */
static int chunk_byte(struct http_body *b, unsigned char c, struct http_refusal *r) {
    char bn[16];
    switch (b->state) {
    case CH_SIZE:
    case CH_SIZE_WS:
    case CH_EXT:
        /* chunk-size [ BWS ";" chunk-ext ] CRLF (RFC 9112 section 7.1): whitespace only before a ';' */
        if (++b->line > HTTP_CHUNK_LINE_MAX)
            return refuse(r, 400, "http: a chunk-size line is longer than %d bytes", HTTP_CHUNK_LINE_MAX);
        if (b->state == CH_EXT) {
            if (c == '\r')
                b->state = CH_SIZE_LF;
            else if ((c < 0x20 && c != '\t') || c == 0x7f)
                return refuse(r, 400, "http: %s in a chunk extension", byte_name(c, bn, sizeof bn));
            return 0;
        }
        if (b->state == CH_SIZE && hex_value(c) >= 0) {
            if (++b->digits > 15)
                return refuse(r, 400, "http: a chunk size of more than 15 hex digits");
            b->left = b->left * 16 + (uint64_t)hex_value(c);
            return 0;
        }
        if (b->state == CH_SIZE && b->digits == 0)
            return refuse(r, 400, "http: a chunk size starts with %s, not a hex digit", byte_name(c, bn, sizeof bn));
        if (c == ';')
            b->state = CH_EXT;
        else if (is_ows((char)c))
            b->state = CH_SIZE_WS;
        else if (c == '\r' && b->state == CH_SIZE)
            b->state = CH_SIZE_LF;
        else
            return refuse(r, 400, "http: %s after a chunk size", byte_name(c, bn, sizeof bn));
        return 0;
    case CH_SIZE_LF:
        if (c != '\n')
            return refuse(r, 400, "http: a bare CR in a chunk-size line");
        b->state = b->left ? CH_DATA : CH_TRAILER;
        return 0;
    case CH_DATA_CR:
        if (c != '\r')
            return refuse(r, 400, "http: chunk data longer than its size (%s where CRLF belongs)",
                          byte_name(c, bn, sizeof bn));
        b->state = CH_DATA_LF;
        return 0;
    case CH_DATA_LF:
        if (c != '\n')
            return refuse(r, 400, "http: a bare CR after chunk data");
        b->state = CH_SIZE;
        b->line = b->digits = 0;
        b->left = 0;
        return 0;
    case CH_TRAILER:
    case CH_TRL_LINE:
        if (c == '\r') {
            b->state = b->state == CH_TRAILER ? CH_END_LF : CH_TRL_LF;
            return 0;
        }
        if (++b->trailer > HTTP_TRAILER_MAX)
            return refuse(r, 431, "http: the trailer section is larger than %d bytes", HTTP_TRAILER_MAX);
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return refuse(r, 400, "http: %s in a trailer field", byte_name(c, bn, sizeof bn));
        if (b->state == CH_TRAILER && is_ows((char)c))
            return refuse(r, 400, "http: a trailer line starts with whitespace (obsolete line folding)");
        b->state = CH_TRL_LINE;
        return 0;
    case CH_TRL_LF:
    case CH_END_LF:
        if (c != '\n')
            return refuse(r, 400, "http: a bare CR in the trailer section");
        if (b->state == CH_END_LF)
            return 1;
        b->state = CH_TRAILER;
        return 0;
    }
    return refuse(r, 400, "http: chunk decoder in an unknown state");
}

int http_body_step(struct http_body *b, const char *in, size_t n, size_t *used, const char **data, size_t *data_n,
                   struct http_refusal *r) {
    *used = 0;
    *data = NULL;
    *data_n = 0;
    if (b->framing == HTTP_BODY_NONE)
        return 1;
    if (b->framing == HTTP_BODY_LENGTH) {
        size_t k = b->left < n ? (size_t)b->left : n;
        *data = in;
        *data_n = k;
        *used = k;
        b->left -= k;
        return b->left == 0;
    }
    size_t i = 0;
    for (; i < n; i++) {
        if (b->state == CH_DATA) {
            size_t k = b->left < n - i ? (size_t)b->left : n - i;
            *data = in + i;
            *data_n = k;
            *used = i + k;
            b->left -= k;
            if (b->left == 0)
                b->state = CH_DATA_CR;
            return 0;
        }
        int rc = chunk_byte(b, (unsigned char)in[i], r);
        if (rc != 0) {
            *used = i + 1;
            return rc;
        }
    }
    *used = i;
    return 0;
}
