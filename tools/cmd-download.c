/*
 * cmd-download.c - `jev download REPO [--revision main] [--dir .models/NAME]
 * [--endpoint URL] [--token T]`: fetches the files a model directory needs
 * from a Hugging Face hub (common/download/download.c does the work) and draws a
 * progress bar on stderr when stderr is a terminal.
 * Exit status: 0 done, 1 failure (the message names the file or URL), 2 usage.
 * The default directory is .models/NAME, NAME being the part of REPO after '/'.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"               // defines: struct jev_error
#include "base/timing.h"              // defines: jev_now_ms
#include "commands.h"                 // defines: cmd_download
#include "common/download/download.h" // defines: jev_download_run

/* ---- progress bar ---- */

struct bar {
    double last_ms;  /* when the bar was last drawn */
    char file[256];  /* the file it was drawn for */
    bool drawn_full; /* 100% was drawn for this file already */
};

static void draw(void *ctx, const char *file, int64_t done, int64_t total, int64_t resumed_from, double secs) {
    struct bar *b = ctx;
    double now = jev_now_ms();
    bool new_file = strcmp(b->file, file) != 0;
    bool finished = total >= 0 && done >= total;
    if (!new_file && (finished ? b->drawn_full : now - b->last_ms < 100.0))
        return; /* at most ten redraws a second, and 100% once */
    b->drawn_full = finished;
    if (new_file && b->file[0])
        fputc('\n', stderr);
    snprintf(b->file, sizeof b->file, "%s", file);
    b->last_ms = now;
    double mb = (double)done / 1e6;
    double rate = secs > 0.0 ? (double)(done - resumed_from) / 1e6 / secs : 0.0;
    if (total > 0) {
        int pct = (int)(100.0 * (double)done / (double)total);
        char fill[31];
        int w = pct * 30 / 100;
        for (int i = 0; i < 30; i++)
            fill[i] = i < w ? '#' : '.';
        fill[30] = '\0';
        fprintf(stderr, "\r%-32.32s [%s] %3d%% %9.1f / %.1f MB %7.1f MB/s", file, fill, pct, mb, (double)total / 1e6,
                rate);
    } else {
        fprintf(stderr, "\r%-32.32s %9.1f MB %7.1f MB/s", file, mb, rate);
    }
    fflush(stderr);
}

/* ---- command ---- */

static int usage(void) {
    fprintf(stderr, "usage: jev download REPO [--revision main] [--dir .models/NAME] [--endpoint URL] [--token T]\n");
    return 2;
}

int cmd_download(int argc, char **argv) {
    struct jev_download_opts o = {0};
    for (int i = 1; i < argc; i++) { /* argv[0] is the command's name */
        const char *a = argv[i];
        const char **dst = strcmp(a, "--revision") == 0   ? &o.revision
                           : strcmp(a, "--dir") == 0      ? &o.dir
                           : strcmp(a, "--endpoint") == 0 ? &o.endpoint
                           : strcmp(a, "--token") == 0    ? &o.token
                                                          : NULL;
        if (dst) {
            if (i + 1 >= argc || !*argv[i + 1])
                return usage();
            *dst = argv[++i];
        } else if (a[0] == '-' || o.repo) {
            return usage();
        } else {
            o.repo = a;
        }
    }
    if (!o.repo || !*o.repo)
        return usage();
    char dir[1024];
    if (!o.dir) {
        const char *name = strrchr(o.repo, '/') ? strrchr(o.repo, '/') + 1 : o.repo;
        if (!*name)
            return usage();
        snprintf(dir, sizeof dir, ".models/%s", name);
        o.dir = dir;
    }
    struct bar b = {0};
    if (isatty(2)) {
        o.progress = draw;
        o.progress_ctx = &b;
    }
    struct jev_error err = {0};
    int fetched = 0;
    enum jev_status st = jev_download_run(&o, &fetched, &err);
    if (b.file[0])
        fputc('\n', stderr);
    if (st != JEV_OK) {
        fprintf(stderr, "jev %s\n", err.msg); /* the message starts with "download: " */
        return 1;
    }
    printf("%s: %d file%s fetched into %s\n", o.repo, fetched, fetched == 1 ? "" : "s", o.dir);
    return 0;
}
