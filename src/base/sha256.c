/*
 * sha256.c - sha256 through OpenSSL's EVP interface (the project's chosen
 * crypto library; no hand-written digest).
 */
#include "base/sha256.h" // defines: jev_sha256_hex, jev_sha256_file

#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>

static void to_hex(const unsigned char *md, char out[JEV_SHA256_HEX]) {
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        out[2 * i] = digits[md[i] >> 4];
        out[2 * i + 1] = digits[md[i] & 15];
    }
    out[64] = '\0';
}

void jev_sha256_hex(const void *data, size_t n, char out[JEV_SHA256_HEX]) {
    unsigned char md[32];
    unsigned int len = 0;
    EVP_Digest(data, n, md, &len, EVP_sha256(), NULL);
    to_hex(md, out);
}

enum jev_status jev_sha256_file(const char *path, char out[JEV_SHA256_HEX], struct jev_error *err) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return jev_fail(err, JEV_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
    unsigned char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        EVP_DigestUpdate(ctx, buf, n);
    int bad = ferror(f);
    fclose(f);
    unsigned char md[32];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx, md, &len);
    EVP_MD_CTX_free(ctx);
    if (bad)
        return jev_fail(err, JEV_ERR_IO, "%s: read error", path);
    to_hex(md, out);
    return JEV_OK;
}
