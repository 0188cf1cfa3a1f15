/*
 * image-int.h - what image.c shares with the rest of src/io: the strip-parallel
 * JPEG decode (image-jpeg-strips.c). Not for other folders.
 */
#ifndef JEV_IO_IMAGE_INT_H
#define JEV_IO_IMAGE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct jev_pool;

/*
 * Decodes a width x height JPEG into rgb ([height][width][3]) in strips on
 * pool, byte for byte as tjDecompress2(TJPF_RGB, TJFLAG_ACCURATEDCT) would.
 * Returns false, having written some rows or none, when the file does not
 * suit strips (progressive, several scans, a pool of one) or any strip met
 * an error or a warning: the caller then decodes it serially.
 */
bool jev_jpeg_decode_strips(const uint8_t *data, size_t size, int width, int height, uint8_t *rgb,
                            struct jev_pool *pool);

#endif
