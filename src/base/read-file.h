/*
 * read-file.h - a whole small file into memory, with a size limit checked
 * while reading (config.json, the shard index, tokenizer files to copy).
 * Not for weights: those are mmapped (safetensors.c).
 */
#ifndef JEV_BASE_READ_FILE_H
#define JEV_BASE_READ_FILE_H

#include <stddef.h>

#include "base/error.h" // defines: struct jev_error

/*
 * Reads path into a malloc'ed buffer with a NUL after the last byte (the
 * caller frees it). Fails with JEV_ERR_IO when the file cannot be opened or
 * read, JEV_ERR_FORMAT when it holds more than `limit` bytes.
 */
enum jev_status jev_read_file(const char *path, size_t limit, char **out, size_t *size, struct jev_error *err);

#endif
