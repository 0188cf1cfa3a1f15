/*
 * sha256.h - sha256 of buffers and files (OpenSSL libcrypto's EVP digest),
 * as lowercase hex.
 */
#ifndef JEV_BASE_SHA256_H
#define JEV_BASE_SHA256_H

#include <stddef.h>

#include "base/error.h" // defines: struct jev_error

#define JEV_SHA256_HEX 65 /* 64 hex digits + NUL */

void jev_sha256_hex(const void *data, size_t n, char out[JEV_SHA256_HEX]);
enum jev_status jev_sha256_file(const char *path, char out[JEV_SHA256_HEX], struct jev_error *err);

#endif
