/*
 * http-loop.c - the server's sockets (http-int.h): one listening socket and N
 * threads, each an epoll loop over the connections it accepted. A connection
 * reads a head (http-parse.c), hands it to the handler, reads the body piece
 * by piece, waits while the handler decides (a thread blocked in a decision
 * serves none of its other connections meanwhile), writes the response, and
 * then reads the next request or closes.
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

enum cstate {
    C_HEAD,     /* reading a request head */
    C_BODY,     /* reading its body */
    C_CONTINUE, /* writing "100 Continue", then the body */
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
    bool close_after; /* shut the connection once out is written */
    bool head_only;   /* a HEAD request: the response has no body */
    bool in_exchange; /* x holds a request: done() is owed */
    bool body_done;   /* the request's body has been read to its end (or it has none) */
    struct http_scan scan;
    struct http_head head;
    struct http_body body;
    struct http_exchange x;
    double last_ms;   /* the last read or write */
    double linger_ms; /* C_LINGER: when to give up */
};

struct http_worker {
    struct http_loop *loop;
    pthread_t thread;
    int ep;
    struct http_conn *conns;
    bool accept_paused;
    double accept_resume_ms;
};

struct http_loop {
    struct http_loop_params p;
    int listen_fd;
    int stop_fd; /* an eventfd in every worker's epoll */
    int32_t port;
    atomic_bool stopping;
    atomic_int open; /* connections open, over all workers */
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
    bool keep = h && h->keep_alive && c->body_done && !c->close_after;
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
    hd->end(hd->ctx, &c->x);
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
        case C_CLOSED: more = false; break;
        }
    }
    if (c->state == C_SEND || c->state == C_CONTINUE)
        set_events(c, EPOLLOUT);
    else if (c->state != C_CLOSED)
        set_events(c, EPOLLIN);
    if (c->in && c->in_len == 0) { /* an idle keep-alive connection holds no buffer */
        free(c->in);
        c->in = NULL;
    }
}

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
    free(c->in);
    free(c->out);
    free(c);
    atomic_fetch_sub(&w->loop->open, 1);
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
    drive(c);
}

static void conn_event(struct http_conn *c, uint32_t events) {
    if (c->state == C_SEND || c->state == C_CONTINUE) {
        if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))
            drive(c);
    } else if (events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
        conn_read(c);
    }
    if (c->state == C_CLOSED)
        conn_close(c);
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
        if (atomic_fetch_add(&l->open, 1) >= l->p.max_connections) {
            atomic_fetch_sub(&l->open, 1);
            close(fd);
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct http_conn *c = calloc(1, sizeof *c);
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        if (!c || epoll_ctl(w->ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
            free(c);
            close(fd);
            atomic_fetch_sub(&l->open, 1);
            continue;
        }
        c->w = w;
        c->fd = fd;
        c->events = EPOLLIN;
        c->state = C_HEAD;
        c->last_ms = jev_now_ms();
        c->next = w->conns;
        if (w->conns)
            w->conns->prev = c;
        w->conns = c;
    }
}

/* When the connection stops waiting: its idle deadline, or the end of its linger. */
static double deadline(const struct http_conn *c, double idle_ms) {
    if (c->state == C_LINGER)
        return c->linger_ms;
    return idle_ms > 0 ? c->last_ms + idle_ms : -1;
}

/* Closes the connections past their deadline. One whose socket has something to say (an event
 * this thread has not fetched yet, as after a long decision) is not idle: its event runs next. */
static int expire(struct http_worker *w, double now) {
    double idle_ms = 1000.0 * w->loop->p.idle_timeout_s, next = -1;
    for (struct http_conn *c = w->conns, *nx; c; c = nx) {
        nx = c->next;
        double d = deadline(c, idle_ms);
        if (d < 0)
            continue;
        if (d <= now) {
            bool sending = c->state == C_SEND || c->state == C_CONTINUE;
            struct pollfd p = {.fd = c->fd, .events = sending ? POLLOUT : POLLIN};
            if (c->state != C_LINGER && poll(&p, 1, 0) > 0) {
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
    for (int32_t i = 0; !e && i < l->p.threads; i++) {
        struct http_worker *w = &l->workers[i];
        w->loop = l;
        struct epoll_event le = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.ptr = &listen_marker};
        struct epoll_event se = {.events = EPOLLIN, .data.ptr = &stop_marker};
        if ((w->ep = epoll_create1(EPOLL_CLOEXEC)) < 0 || epoll_ctl(w->ep, EPOLL_CTL_ADD, l->listen_fd, &le) != 0 ||
            epoll_ctl(w->ep, EPOLL_CTL_ADD, l->stop_fd, &se) != 0) {
            e = fail_errno(why, why_size, "epoll");
            if (w->ep >= 0)
                close(w->ep);
            break;
        }
        if ((errno = pthread_create(&w->thread, NULL, worker_main, w)) != 0) {
            e = fail_errno(why, why_size, "pthread_create");
            close(w->ep);
            break;
        }
        l->n_workers++;
    }
    if (e) {
        loop_free(l);
        return e;
    }
    *out = l;
    return 0;
}

int32_t http_loop_port(const struct http_loop *l) { return l->port; }

void http_loop_stop(struct http_loop *l) {
    if (l)
        loop_free(l);
}
