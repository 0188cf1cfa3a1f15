/*
 * http-loop.c - the server's sockets (http-int.h): one listening socket and N
 * threads, each an epoll loop over the connections it accepted. A connection
 * reads a head (http-parse.c), hands it to the handler, reads the body piece
 * by piece, and either answers at once or defers: the handler takes a ticket
 * (http_defer) and the connection waits, reading nothing, until another
 * thread completes the ticket (http_complete: the response goes on a list of
 * the connection's thread, which an eventfd wakes). So no thread of the loop
 * ever waits on a decision. Then it writes the response and reads the next
 * request or closes.
 *
 * Limits: a connection silent for the idle timeout is closed (one waiting
 * for its deferred answer is not silent); a request whose head and body have
 * not arrived within the read timeout of its first byte is answered 408 and
 * closed (a client that trickles bytes holds no slot for long); past the
 * connection cap a new connection is answered 503 with Retry-After and closed
 * (up to OVERFLOW_MAX of those at once; beyond that it is closed at once).
 *
 * Closing after a response (a refusal, Connection: close) is a lingering
 * close: the write side is shut, then what the client still sends is read
 * and dropped until it closes or LINGER_MS passes, so that a client still
 * sending its body reads the response instead of a reset.
 *
 * What it is not: the parser (http-parse.c), routes or JSON (server.c),
 * HTTP/2, TLS.
 */
#include "http-int.h" // defines: struct http_loop_params, struct http_handler, http_head_parse

#include "base/timing.h" // defines: jev_now_ms

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define IN_CAP (HTTP_HEAD_MAX + (32 << 10)) /* a connection's input buffer: a whole head and then some */
#define LINGER_MS 2000.0                    /* how long a closing connection drains what the client sends */
#define ACCEPT_PAUSE_MS 100.0               /* out of descriptors: stop accepting this long */
#define EVENTS 64
#define OVERFLOW_MAX 64 /* connections past the cap being answered 503 at once */

enum cstate {
    C_HEAD,     /* reading a request head */
    C_BODY,     /* reading its body */
    C_CONTINUE, /* writing "100 Continue", then the body */
    C_WAIT,     /* the response is deferred: waiting for http_complete, reading nothing */
    C_SEND,     /* writing the response */
    C_LINGER,   /* write side shut: reading and dropping until the client closes */
    C_CLOSED,   /* to be freed */
};

struct http_worker;

struct http_conn {
    struct http_worker *w;
    struct http_conn *prev, *next; /* the worker's connections */
    int fd;
    enum cstate state;
    uint32_t events; /* the epoll interest registered */
    char *in;        /* received, not consumed; NULL while empty */
    size_t in_len;
    char *out; /* the response (or 100 Continue) being written */
    size_t out_len, out_sent;
    bool close_after;           /* shut the connection once out is written */
    bool head_only;             /* a HEAD request: the response has no body */
    bool in_exchange;           /* x holds a request: done() is owed */
    bool body_done;             /* the request's body has been read to its end (or it has none) */
    bool overflow;              /* accepted past the cap: answered 503, counted apart */
    bool deferred;              /* the exchange was deferred: its end takes one off the loop's pending count */
    bool dead;                  /* closed while its ticket was out: the ticket frees it */
    struct http_ticket *ticket; /* C_WAIT: the ticket the answer will come with */
    struct http_scan scan;
    struct http_head head;
    struct http_body body;
    struct http_exchange x;
    double last_ms;   /* the last read or write */
    double req_ms;    /* when the current request's first byte came (0: none yet) */
    double linger_ms; /* C_LINGER: when to give up */
};

/* A deferred answer on its way from another thread to the connection's thread. */
struct http_ticket {
    struct http_conn *c;  /* touched by the connection's thread only */
    atomic_bool gone;     /* the connection closed before the answer came */
    unsigned status;      /* the response, once completed */
    const char **headers; /* NULL-terminated pairs, into block */
    char *block;          /* the headers' and the body's bytes (one allocation) */
    const char *body;     /* into block */
    size_t len;           /* body bytes */
    struct http_ticket *next;
};

struct http_worker {
    struct http_loop *loop;
    pthread_t thread;
    int ep;
    int wake_fd; /* an eventfd: completed tickets are waiting */
    struct http_conn *conns;
    bool accept_paused;
    double accept_resume_ms;
    pthread_mutex_t lock;     /* guards done */
    struct http_ticket *done; /* completed tickets, not yet sent (a stack: order does not matter) */
};

struct http_loop {
    struct http_loop_params p;
    int listen_fd;
    int stop_fd; /* an eventfd in every worker's epoll */
    int32_t port;
    atomic_bool stopping;
    atomic_bool close_each; /* http_loop_close_after_each */
    atomic_int open;        /* connections open, over all workers */
    atomic_int overflow;    /* connections past the cap being answered 503 */
    atomic_int pending;     /* deferred exchanges not over yet */
    int32_t n_workers;
    struct http_worker *workers;
};

/* Markers in epoll_event.data.ptr for the two descriptors that are not connections. */
static char listen_marker, stop_marker;

/* ---- responses ---- */

static const char *reason(unsigned status) {
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    }
    return "";
}

/* RFC 9110 §5.6.7 IMF-fixdate, without the locale strftime would use. */
static void http_date(char *buf, size_t size) {
    static const char days[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    snprintf(buf, size, "%s, %02d %s %04d %02d:%02d:%02d GMT", days[tm.tm_wday % 7], tm.tm_mday, months[tm.tm_mon % 12],
             tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

void http_respond(struct http_exchange *x, unsigned status, const char *const *headers, const char *body, size_t len) {
    struct http_conn *c = x->conn;
    if (x->responded)
        return;
    x->responded = true;
    const struct http_head *h = x->head;
    /* a response before the body's end leaves the next request's start unknown: close */
    bool keep = h && h->keep_alive && c->body_done && !c->close_after && !atomic_load(&c->w->loop->close_each);
    char date[40];
    http_date(date, sizeof date);
    size_t extra = 0;
    for (int i = 0; headers && headers[i]; i += 2)
        extra += strlen(headers[i]) + strlen(headers[i + 1]) + 4;
    size_t cap = 256 + extra + len;
    char *out = malloc(cap);
    if (!out) {
        c->close_after = true; /* nothing to say without memory: the connection closes */
        c->out_len = c->out_sent = 0;
        return;
    }
    int n = snprintf(out, cap, "HTTP/1.1 %u %s\r\nDate: %s\r\n", status, reason(status), date);
    for (int i = 0; headers && headers[i]; i += 2)
        n += snprintf(out + n, cap - (size_t)n, "%s: %s\r\n", headers[i], headers[i + 1]);
    n += snprintf(out + n, cap - (size_t)n, "Content-Length: %zu\r\n%s\r\n", len,
                  !keep                ? "Connection: close\r\n"
                  : h && h->minor == 0 ? "Connection: keep-alive\r\n"
                                       : "");
    if (!c->head_only && len) {
        memcpy(out + n, body, len);
        n += (int)len;
    }
    free(c->out);
    c->out = out;
    c->out_len = (size_t)n;
    c->out_sent = 0;
    if (!keep)
        c->close_after = true;
}

/* ---- one connection ---- */

static void set_events(struct http_conn *c, uint32_t events) {
    if (c->events == events)
        return;
    struct epoll_event ev = {.events = events, .data.ptr = c};
    epoll_ctl(c->w->ep, EPOLL_CTL_MOD, c->fd, &ev);
    c->events = events;
}

static void consume(struct http_conn *c, size_t n) {
    memmove(c->in, c->in + n, c->in_len - n);
    c->in_len -= n;
}

/* The exchange is over: the handler frees its state, the head goes. */
static void end_exchange(struct http_conn *c) {
    const struct http_handler *hd = &c->w->loop->p.handler;
    if (c->in_exchange)
        hd->done(hd->ctx, &c->x);
    if (c->deferred)
        atomic_fetch_sub(&c->w->loop->pending, 1);
    c->deferred = false;
    c->in_exchange = false;
    c->body_done = false;
    http_head_free(&c->head);
    memset(&c->x, 0, sizeof c->x);
    memset(&c->scan, 0, sizeof c->scan);
    c->head_only = false;
}

static void begin_exchange(struct http_conn *c, const struct http_head *h) {
    memset(&c->x, 0, sizeof c->x);
    c->x.conn = c;
    c->x.head = h;
    c->in_exchange = true;
}

/* The loop refuses the bytes: a response from the handler, then the connection closes. */
static void refuse_bytes(struct http_conn *c, const struct http_refusal *r) {
    const struct http_handler *hd = &c->w->loop->p.handler;
    if (!c->in_exchange)
        begin_exchange(c, NULL);
    c->close_after = true;
    hd->refused(hd->ctx, &c->x, r);
    if (!c->x.responded)
        c->out_len = 0;
    c->state = C_SEND;
}

static void finish_request(struct http_conn *c) {
    const struct http_handler *hd = &c->w->loop->p.handler;
    c->req_ms = 0; /* all of it arrived: the read deadline is met */
    hd->end(hd->ctx, &c->x);
    if (c->x.ticket && !c->x.responded) { /* deferred: http_complete sends the answer */
        c->state = C_WAIT;
        return;
    }
    if (!c->x.responded)
        c->close_after = true; /* a handler that did not answer: nothing to send, close */
    c->state = C_SEND;
    c->last_ms = jev_now_ms(); /* time spent deciding is not idleness */
}

/* C_HEAD: false when more bytes are needed. */
static bool step_head(struct http_conn *c) {
    struct http_refusal r = {0};
    long end = c->in_len ? http_scan_head(&c->scan, c->in, c->in_len, &r) : 0;
    if (end == 0) {
        if (c->scan.skip && c->scan.skip == c->scan.pos) { /* empty lines only: drop them */
            consume(c, c->scan.skip);
            memset(&c->scan, 0, sizeof c->scan);
        }
        return false;
    }
    if (end < 0) {
        refuse_bytes(c, &r);
        return true;
    }
    bool ok = http_head_parse(c->in + c->scan.skip, (size_t)end - c->scan.skip, &c->head, &r);
    consume(c, (size_t)end);
    if (!ok) {
        refuse_bytes(c, &r);
        return true;
    }
    begin_exchange(c, &c->head);
    c->head_only = !strcmp(c->head.method, "HEAD");
    c->body_done = c->head.framing == HTTP_BODY_NONE;
    const struct http_handler *hd = &c->w->loop->p.handler;
    hd->head(hd->ctx, &c->x);
    if (c->x.responded) {
        if (c->head.framing != HTTP_BODY_NONE)
            c->close_after = true; /* the body is not read, so the next request's start is unknown */
        c->state = C_SEND;
        return true;
    }
    if (c->head.framing == HTTP_BODY_NONE) {
        finish_request(c);
        return true;
    }
    http_body_init(&c->body, &c->head);
    c->state = C_BODY;
    if (c->head.expect_continue && c->in_len == 0) {
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        c->out = malloc(sizeof cont - 1);
        if (!c->out) {
            c->state = C_CLOSED;
            return false;
        }
        memcpy(c->out, cont, sizeof cont - 1);
        c->out_len = sizeof cont - 1;
        c->out_sent = 0;
        c->state = C_CONTINUE;
    }
    return true;
}

/* C_BODY: false when more bytes are needed. */
static bool step_body(struct http_conn *c) {
    const struct http_handler *hd = &c->w->loop->p.handler;
    while (c->in_len) {
        struct http_refusal r = {0};
        size_t used = 0, n = 0;
        const char *data = NULL;
        int rc = http_body_step(&c->body, c->in, c->in_len, &used, &data, &n, &r);
        c->body_done = rc == 1;
        if (n)
            hd->body(hd->ctx, &c->x, data, n);
        consume(c, used);
        if (c->x.responded) { /* answered mid-body (over the limit): the rest is not read */
            if (!c->body_done)
                c->close_after = true;
            c->state = C_SEND;
            return true;
        }
        if (rc < 0) {
            refuse_bytes(c, &r);
            return true;
        }
        if (rc == 1) {
            finish_request(c);
            return true;
        }
        if (!used && !n)
            break;
    }
    return false;
}

/* C_SEND and C_CONTINUE: false while the socket is full. */
static bool step_send(struct http_conn *c) {
    while (c->out_sent < c->out_len) {
        ssize_t k = send(c->fd, c->out + c->out_sent, c->out_len - c->out_sent, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return false;
        if (k <= 0) {
            c->state = C_CLOSED;
            return true;
        }
        c->out_sent += (size_t)k;
        c->last_ms = jev_now_ms();
    }
    free(c->out);
    c->out = NULL;
    c->out_len = c->out_sent = 0;
    if (c->state == C_CONTINUE) {
        c->state = C_BODY;
        return true;
    }
    end_exchange(c);
    if (c->close_after) {
        shutdown(c->fd, SHUT_WR);
        c->state = C_LINGER;
        c->linger_ms = jev_now_ms() + LINGER_MS;
        c->in_len = 0;
        return true;
    }
    c->state = C_HEAD;
    c->req_ms = c->in_len ? jev_now_ms() : 0; /* a pipelined request's bytes are here already */
    return true;
}

/* Advances the connection as far as the bytes at hand allow, then registers what it waits for. */
static void drive(struct http_conn *c) {
    for (bool more = true; more;) {
        switch (c->state) {
        case C_HEAD: more = step_head(c); break;
        case C_BODY: more = step_body(c); break;
        case C_CONTINUE:
        case C_SEND: more = step_send(c); break;
        case C_LINGER:
            c->in_len = 0;
            more = false;
            break;
        case C_WAIT:
        case C_CLOSED: more = false; break;
        }
    }
    if (c->state == C_SEND || c->state == C_CONTINUE)
        set_events(c, EPOLLOUT);
    else if (c->state == C_WAIT)
        set_events(c, 0); /* only a reset or an error wakes it (EPOLLHUP, EPOLLERR) */
    else if (c->state != C_CLOSED)
        set_events(c, EPOLLIN);
    if (c->in && c->in_len == 0) { /* an idle keep-alive connection holds no buffer */
        free(c->in);
        c->in = NULL;
    }
}

/* Closes the connection and frees it, unless a ticket is still out for it: then it stays, dead,
 * until the ticket comes back (tickets_run). */
static void conn_close(struct http_conn *c) {
    struct http_worker *w = c->w;
    end_exchange(c);
    if (c->prev)
        c->prev->next = c->next;
    else
        w->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    close(c->fd);
    c->fd = -1;
    free(c->in);
    free(c->out);
    c->in = c->out = NULL;
    atomic_fetch_sub(c->overflow ? &w->loop->overflow : &w->loop->open, 1);
    if (c->ticket) {
        atomic_store(&c->ticket->gone, true);
        c->dead = true;
        return;
    }
    free(c);
}

/* Readable (or hung up): one read, then as far as it takes the connection. */
static void conn_read(struct http_conn *c) {
    char drop[4096];
    bool dropping = c->state == C_LINGER;
    if (!dropping && !c->in && !(c->in = malloc(IN_CAP))) {
        c->state = C_CLOSED;
        return;
    }
    char *dst = dropping ? drop : c->in + c->in_len;
    size_t room = dropping ? sizeof drop : IN_CAP - c->in_len;
    if (room == 0) { /* cannot stay full: the scanner refuses a head long before, a body is handed on */
        drive(c);
        return;
    }
    ssize_t k = recv(c->fd, dst, room, 0);
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (k <= 0) { /* the client closed (or reset): whatever was half-received is dropped */
        c->state = C_CLOSED;
        return;
    }
    if (dropping)
        return;
    c->in_len += (size_t)k;
    c->last_ms = jev_now_ms();
    if (c->state == C_HEAD && c->req_ms == 0)
        c->req_ms = c->last_ms; /* a request's first byte: its read deadline starts */
    drive(c);
}

static void conn_event(struct http_conn *c, uint32_t events) {
    if (c->state == C_WAIT) { /* reset while its answer is computed: the descriptor goes now */
        if (events & (EPOLLERR | EPOLLHUP))
            c->state = C_CLOSED;
    } else if (c->state == C_SEND || c->state == C_CONTINUE) {
        if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))
            drive(c);
    } else if (events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
        conn_read(c);
    }
    if (c->state == C_CLOSED)
        conn_close(c);
}

/* ---- deferred answers ---- */

struct http_ticket *http_defer(struct http_exchange *x) {
    struct http_conn *c = x->conn;
    if (x->ticket || x->responded)
        return x->ticket;
    struct http_ticket *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->c = c;
    x->ticket = t;
    c->ticket = t;
    c->deferred = true;
    atomic_fetch_add(&c->w->loop->pending, 1);
    return t;
}

bool http_ticket_gone(const struct http_ticket *t) { return atomic_load(&t->gone); }

void http_complete(struct http_ticket *t, unsigned status, const char *const *headers, const char *body, size_t len) {
    int n = 0;
    size_t bytes = len + 1;
    for (; headers && headers[n]; n += 2)
        bytes += strlen(headers[n]) + strlen(headers[n + 1]) + 2;
    size_t table = (size_t)(n + 1) * sizeof(char *);
    char *block = malloc(table + bytes);
    t->status = status;
    if (block) { /* the pairs' pointers first, then their bytes, then the body */
        const char **h = (const char **)(void *)block;
        char *at = block + table;
        for (int i = 0; i < n; i++) {
            size_t k = strlen(headers[i]) + 1;
            memcpy(at, headers[i], k);
            h[i] = at;
            at += k;
        }
        h[n] = NULL;
        if (len)
            memcpy(at, body, len);
        t->headers = h;
        t->body = at;
        t->len = len;
    }
    t->block = block; /* NULL: no memory for the answer; the connection closes */
    struct http_worker *w = t->c->w;
    pthread_mutex_lock(&w->lock);
    t->next = w->done;
    w->done = t;
    pthread_mutex_unlock(&w->lock);
    uint64_t one = 1;
    ssize_t k = write(w->wake_fd, &one, sizeof one);
    (void)k; /* an eventfd write of 1 fails only past 2^64 - 2 */
}

/* The completed tickets: each answer goes out on its connection, or is dropped with the
 * connection that went away meanwhile. */
static void tickets_run(struct http_worker *w) {
    uint64_t count;
    ssize_t k = read(w->wake_fd, &count, sizeof count);
    (void)k; /* nothing to read: another call took the count; the list says what is left */
    pthread_mutex_lock(&w->lock);
    struct http_ticket *t = w->done;
    w->done = NULL;
    pthread_mutex_unlock(&w->lock);
    while (t) {
        struct http_ticket *next = t->next;
        struct http_conn *c = t->c;
        c->ticket = NULL;
        if (c->dead) {
            free(c);
        } else {
            if (t->block)
                http_respond(&c->x, t->status, t->headers, t->body, t->len);
            else
                c->close_after = true;
            c->x.responded = true;
            c->state = C_SEND;
            c->last_ms = jev_now_ms();
            drive(c);
            if (c->state == C_CLOSED)
                conn_close(c);
        }
        free(t->block);
        free(t);
        t = next;
    }
}

/* ---- a worker ---- */

static void accept_some(struct http_worker *w) {
    struct http_loop *l = w->loop;
    for (int i = 0; i < 16; i++) {
        int fd = accept4(l->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* out of descriptors: a level-triggered listen socket would wake us at once again */
                epoll_ctl(w->ep, EPOLL_CTL_DEL, l->listen_fd, NULL);
                w->accept_paused = true;
                w->accept_resume_ms = jev_now_ms() + ACCEPT_PAUSE_MS;
            }
            return;
        }
        bool over = false;
        if (atomic_fetch_add(&l->open, 1) >= l->p.max_connections) {
            atomic_fetch_sub(&l->open, 1);
            /* past the cap: answered 503 (a few at a time), so that a client learns why */
            if (atomic_fetch_add(&l->overflow, 1) >= OVERFLOW_MAX) {
                atomic_fetch_sub(&l->overflow, 1);
                close(fd);
                continue;
            }
            over = true;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct http_conn *c = calloc(1, sizeof *c);
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        if (!c || epoll_ctl(w->ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
            free(c);
            close(fd);
            atomic_fetch_sub(over ? &l->overflow : &l->open, 1);
            continue;
        }
        c->w = w;
        c->fd = fd;
        c->events = EPOLLIN;
        c->state = C_HEAD;
        c->last_ms = jev_now_ms();
        c->overflow = over;
        c->next = w->conns;
        if (w->conns)
            w->conns->prev = c;
        w->conns = c;
        if (over) {
            struct http_refusal r = {.status = 503, .retry_after = true};
            snprintf(r.message, sizeof r.message,
                     "server: %d connections are open, the most it keeps (--max-connections); retry later",
                     (int)l->p.max_connections);
            refuse_bytes(c, &r);
            drive(c);
            if (c->state == C_CLOSED)
                conn_close(c);
        }
    }
}

/* When the connection stops waiting: its idle deadline, or the end of its linger. A connection
 * waiting for its deferred answer is not idle. */
static double deadline(const struct http_conn *c, double idle_ms) {
    if (c->state == C_LINGER)
        return c->linger_ms;
    if (c->state == C_WAIT)
        return -1;
    return idle_ms > 0 ? c->last_ms + idle_ms : -1;
}

/* When the request being read must be complete (its first byte + the read timeout); -1: none. */
static double read_deadline(const struct http_conn *c, double read_ms) {
    bool reading = c->state == C_BODY || c->state == C_CONTINUE || (c->state == C_HEAD && c->req_ms > 0);
    return read_ms > 0 && reading && c->req_ms > 0 ? c->req_ms + read_ms : -1;
}

/* Closes the connections past their deadline. One whose socket has something to say (an event
 * this thread has not fetched yet, as after a long decision) is not idle: its event runs next. */
static int expire(struct http_worker *w, double now) {
    double idle_ms = 1000.0 * w->loop->p.idle_timeout_s, read_ms = 1000.0 * w->loop->p.read_timeout_s, next = -1;
    for (struct http_conn *c = w->conns, *nx; c; c = nx) {
        nx = c->next;
        double rd = read_deadline(c, read_ms);
        if (rd >= 0 && rd <= now) { /* the whole request did not arrive in time: 408, then closed */
            struct http_refusal r = {.status = 408};
            snprintf(r.message, sizeof r.message,
                     "server: the request's head and body did not arrive within %d s of its first byte "
                     "(--read-timeout)",
                     (int)w->loop->p.read_timeout_s);
            c->req_ms = 0;
            refuse_bytes(c, &r);
            drive(c);
            if (c->state == C_CLOSED) {
                conn_close(c);
                continue;
            }
            rd = -1;
        }
        double d = deadline(c, idle_ms);
        if (rd >= 0 && (d < 0 || rd < d))
            d = rd;
        if (d < 0)
            continue;
        if (d <= now) {
            bool sending = c->state == C_SEND || c->state == C_CONTINUE;
            struct pollfd p = {.fd = c->fd, .events = sending ? POLLOUT : POLLIN};
            if (c->state != C_LINGER && d != rd && poll(&p, 1, 0) > 0) {
                c->last_ms = now;
                d = now + idle_ms;
            } else {
                conn_close(c);
                continue;
            }
        }
        if (next < 0 || d < next)
            next = d;
    }
    if (w->accept_paused && (next < 0 || w->accept_resume_ms < next))
        next = w->accept_resume_ms;
    if (next < 0)
        return -1;
    double wait = next - now + 1.0;
    return wait < 0 ? 0 : wait > 60000.0 ? 60000 : (int)wait;
}

static void *worker_main(void *arg) {
    struct http_worker *w = arg;
    struct http_loop *l = w->loop;
    struct epoll_event ev[EVENTS];
    int timeout = -1;
    while (!atomic_load(&l->stopping)) {
        int n = epoll_wait(w->ep, ev, EVENTS, timeout);
        if (n < 0 && errno != EINTR)
            break;
        for (int i = 0; i < n && !atomic_load(&l->stopping); i++) {
            if (ev[i].data.ptr == &stop_marker)
                break;
            if (ev[i].data.ptr == &listen_marker)
                accept_some(w);
            else if (ev[i].data.ptr == &w->wake_fd)
                tickets_run(w);
            else
                conn_event(ev[i].data.ptr, ev[i].events);
        }
        double now = jev_now_ms();
        if (w->accept_paused && now >= w->accept_resume_ms) {
            struct epoll_event e = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.ptr = &listen_marker};
            w->accept_paused = epoll_ctl(w->ep, EPOLL_CTL_ADD, l->listen_fd, &e) != 0;
            w->accept_resume_ms = now + ACCEPT_PAUSE_MS;
        }
        timeout = expire(w, now);
    }
    while (w->conns)
        conn_close(w->conns);
    tickets_run(w); /* completed answers of connections now closed: their memory */
    return NULL;
}

/* ---- the loop ---- */

static int fail_errno(char *why, size_t size, const char *what) {
    int e = errno ? errno : EIO;
    snprintf(why, size, "%s: %s", what, strerror(e));
    return e;
}

static void loop_free(struct http_loop *l) {
    atomic_store(&l->stopping, true);
    if (l->stop_fd >= 0) {
        uint64_t one = 1;
        ssize_t k = write(l->stop_fd, &one, sizeof one);
        (void)k; /* an eventfd write of 1 fails only past 2^64 - 2 */
    }
    for (int32_t i = 0; i < l->n_workers; i++) {
        pthread_join(l->workers[i].thread, NULL);
        close(l->workers[i].ep);
        close(l->workers[i].wake_fd);
        pthread_mutex_destroy(&l->workers[i].lock);
    }
    free(l->workers);
    if (l->listen_fd >= 0)
        close(l->listen_fd);
    if (l->stop_fd >= 0)
        close(l->stop_fd);
    free(l);
}

int http_loop_start(const struct http_loop_params *p, struct http_loop **out, char *why, size_t why_size) {
    *out = NULL;
    struct http_loop *l = calloc(1, sizeof *l);
    if (!l) {
        snprintf(why, why_size, "out of memory");
        return ENOMEM;
    }
    l->p = *p;
    if (l->p.threads < 1)
        l->p.threads = 1;
    if (l->p.max_connections < 1)
        l->p.max_connections = 1;
    l->listen_fd = l->stop_fd = -1;
    int e = 0, one = 1;
    errno = 0;
    l->listen_fd = socket(p->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (l->listen_fd < 0)
        e = fail_errno(why, why_size, "socket");
    if (!e)
        setsockopt(l->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (!e && p->addr.ss_family == AF_INET6) /* "::" is IPv6 only, as an explicit address would be */
        setsockopt(l->listen_fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (!e && bind(l->listen_fd, (const struct sockaddr *)&p->addr, p->addr_len) != 0)
        e = fail_errno(why, why_size, "bind");
    if (!e && listen(l->listen_fd, SOMAXCONN) != 0)
        e = fail_errno(why, why_size, "listen");
    struct sockaddr_storage bound;
    socklen_t blen = sizeof bound;
    if (!e && getsockname(l->listen_fd, (struct sockaddr *)&bound, &blen) != 0)
        e = fail_errno(why, why_size, "getsockname");
    if (!e)
        l->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                    : ((struct sockaddr_in *)&bound)->sin_port);
    if (!e && (l->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
        e = fail_errno(why, why_size, "eventfd");
    if (!e && !(l->workers = calloc((size_t)l->p.threads, sizeof *l->workers))) {
        errno = ENOMEM;
        e = fail_errno(why, why_size, "threads");
    }
    /* the caller's pointer is set before any thread starts: a handler may read it (the server's
     * /metrics asks the loop for its connections) from the first request on */
    if (!e)
        *out = l;
    for (int32_t i = 0; !e && i < l->p.threads; i++) {
        struct http_worker *w = &l->workers[i];
        w->loop = l;
        struct epoll_event le = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.ptr = &listen_marker};
        struct epoll_event se = {.events = EPOLLIN, .data.ptr = &stop_marker};
        struct epoll_event we = {.events = EPOLLIN, .data.ptr = &w->wake_fd};
        w->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if ((w->ep = epoll_create1(EPOLL_CLOEXEC)) < 0 || w->wake_fd < 0 ||
            epoll_ctl(w->ep, EPOLL_CTL_ADD, l->listen_fd, &le) != 0 ||
            epoll_ctl(w->ep, EPOLL_CTL_ADD, l->stop_fd, &se) != 0 ||
            epoll_ctl(w->ep, EPOLL_CTL_ADD, w->wake_fd, &we) != 0) {
            e = fail_errno(why, why_size, "epoll");
            if (w->ep >= 0)
                close(w->ep);
            if (w->wake_fd >= 0)
                close(w->wake_fd);
            break;
        }
        pthread_mutex_init(&w->lock, NULL);
        if ((errno = pthread_create(&w->thread, NULL, worker_main, w)) != 0) {
            e = fail_errno(why, why_size, "pthread_create");
            close(w->ep);
            close(w->wake_fd);
            pthread_mutex_destroy(&w->lock);
            break;
        }
        l->n_workers++;
    }
    if (e) {
        loop_free(l);
        *out = NULL;
        return e;
    }
    return 0;
}

int32_t http_loop_port(const struct http_loop *l) { return l->port; }

int32_t http_loop_connections(const struct http_loop *l) { return atomic_load(&l->open); }

int32_t http_loop_pending(const struct http_loop *l) { return atomic_load(&l->pending); }

void http_loop_close_after_each(struct http_loop *l) { atomic_store(&l->close_each, true); }

void http_loop_stop(struct http_loop *l) {
    if (l)
        loop_free(l);
}
