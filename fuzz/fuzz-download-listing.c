/*
 * fuzz-download-listing.c - any bytes -> the hub listing parser of
 * jev download. Every accepted file must be safe to join to a directory
 * (no '/', no '\\', no leading '.'), wanted, and carry an empty or 64
 * lowercase hex digit sha256. Seeds: fuzz/corpus/download-listing/.
 * Links only download-listing.c (no libcurl).
 */
#include <stdint.h>
#include <string.h>

#include "common/download/download.h" // defines: jev_download_listing_parse

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct jev_download_listing l;
    struct jev_error err = {0};
    if (jev_download_listing_parse((const char *)data, size, &l, &err) == JEV_OK) {
        for (int i = 0; i < l.n; i++) {
            const struct jev_download_file *f = &l.files[i];
            if (!f->name[0] || f->name[0] == '.' || strchr(f->name, '/') || strchr(f->name, '\\') ||
                !jev_download_wanted(f->name) || f->size < -1)
                __builtin_trap();
            size_t n = strlen(f->sha256);
            if (n != 0 && n != 64)
                __builtin_trap();
            for (size_t k = 0; k < n; k++)
                if (!((f->sha256[k] >= '0' && f->sha256[k] <= '9') || (f->sha256[k] >= 'a' && f->sha256[k] <= 'f')))
                    __builtin_trap();
        }
        jev_download_listing_free(&l);
    } else if (l.n != 0 || l.files != NULL) {
        __builtin_trap();
    }
    return 0;
}
