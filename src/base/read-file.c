/*
 * read-file.c - jev_read_file of read-file.h, on the bounded buffer of buf.h.
 */
#include "base/read-file.h" // defines: jev_read_file

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/buf.h" // defines: struct jev_buf, jev_buf_*

enum jev_status jev_read_file(const char *path, size_t limit, char **out, size_t *size, struct jev_error *err) {
    *out = NULL;
    *size = 0;
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return jev_fail(err, JEV_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    /* a regular file that stat says is too large is refused before any byte is read */
    struct stat sb;
    if (fstat(fileno(fp), &sb) == 0 && S_ISREG(sb.st_mode) && (unsigned long long)sb.st_size > limit) {
        fclose(fp);
        return jev_fail(err, JEV_ERR_NOMEM, "%s: %lld bytes is over the limit of %zu bytes", path,
                        (long long)sb.st_size, limit);
    }
    struct jev_buf b;
    jev_buf_init(&b, limit);
    enum jev_status st = JEV_OK;
    char chunk[16384];
    for (;;) {
        size_t n = fread(chunk, 1, sizeof chunk, fp);
        if (n > jev_buf_room(&b)) { /* a pipe, a device or a file that grew since the stat */
            st = jev_fail(err, JEV_ERR_NOMEM, "%s: more than the limit of %zu bytes", path, limit);
            break;
        }
        struct jev_error inner = {0};
        if (jev_buf_add(&b, chunk, n, &inner) != JEV_OK) {
            st = jev_fail(err, inner.status, "%s: %s", path, inner.msg);
            break;
        }
        if (n < sizeof chunk) {
            if (ferror(fp))
                st = jev_fail(err, JEV_ERR_IO, "%s: read error: %s", path, strerror(errno));
            break;
        }
    }
    fclose(fp);
    if (st == JEV_OK) {
        struct jev_error inner = {0};
        if ((st = jev_buf_take(&b, out, size, &inner)) != JEV_OK)
            jev_fail(err, st, "%s: %s", path, inner.msg);
    }
    jev_buf_free(&b);
    return st;
}
