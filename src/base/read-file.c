/*
 * read-file.c - jev_read_file of read-file.h.
 */
#include "base/read-file.h" // defines: jev_read_file

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum jev_status jev_read_file(const char *path, size_t limit, char **out, size_t *size, struct jev_error *err) {
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return jev_fail(err, JEV_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    /* read one byte past the limit: that is how a too-large file (or a growing one) is noticed
       without trusting a size from stat */
    char *buf = malloc(limit + 1);
    if (!buf) {
        fclose(fp);
        return jev_fail(err, JEV_ERR_NOMEM, "%s: out of memory", path);
    }
    size_t n = fread(buf, 1, limit + 1, fp);
    bool bad = ferror(fp) != 0;
    fclose(fp);
    if (bad || n > limit) {
        free(buf);
        return bad ? jev_fail(err, JEV_ERR_IO, "%s: read error", path)
                   : jev_fail(err, JEV_ERR_FORMAT, "%s: larger than the limit of %zu bytes", path, limit);
    }
    buf[n] = '\0';
    *out = buf;
    *size = n;
    return JEV_OK;
}
