/*
 * read-file.h - a whole small file into memory, with a size limit checked
 * while reading (config.json, the shard index, tokenizer files, requests and
 * benchmark records given as files). Pipes and devices work too: the limit is
 * checked on the bytes read, not only on a size from stat.
 * Not for weights: those are mmapped (safetensors.c).
 */
#ifndef JEV_BASE_READ_FILE_H
#define JEV_BASE_READ_FILE_H

#include <stddef.h>

#include "base/error.h" // defines: struct jev_error

/*
 * Reads path into a malloc'ed buffer with a NUL after the last byte (the
 * caller frees it); memory grows with the bytes read, never to `limit` up
 * front. Fails with JEV_ERR_IO when the file cannot be opened or read (the
 * message says which and why), JEV_ERR_NOMEM when it holds more than `limit`
 * bytes (the message names the limit) or memory runs out.
 */
enum jev_status jev_read_file(const char *path, size_t limit, char **out, size_t *size, struct jev_error *err);

#endif
