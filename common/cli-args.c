/*
 * cli-args.c - the CLI's argument helpers (cli-args.h).
 */
#include "common/cli-args.h" // defines: cli_parse_long

#include <errno.h>
#include <stdlib.h>

int cli_parse_long(const char *s, long lo, long hi, long *out) {
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || !end || *end || end == s || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}
