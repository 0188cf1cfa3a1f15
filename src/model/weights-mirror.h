/*
 * weights-mirror.h - a backend's own copy of the model's weights.
 *
 * The model (struct jev_model) is immutable and shared by every engine; its
 * weights are mmapped host memory. A device backend cannot read those, so
 * each engine holds a mirror: the same struct jev_weights, every matrix
 * replaced by the backend's copy (ops->matrix_mirror: on a CUDA device the
 * stored form, 4-bit codes and their scales as in the file) and every small
 * f32 vector (norm gammas, biases, conv taps, gates)
 * uploaded. For a host-memory backend (the CPU) the mirror is the model's
 * weights themselves: nothing is copied.
 */
#ifndef JEV_MODEL_WEIGHTS_MIRROR_H
#define JEV_MODEL_WEIGHTS_MIRROR_H

#include <stdbool.h>
#include <stddef.h>

#include "backend/ops.h"   // defines: struct jev_ops, struct jev_backend
#include "base/error.h"    // defines: struct jev_error
#include "model/config.h"  // defines: struct jev_config
#include "model/weights.h" // defines: struct jev_weights

struct jev_weights_mirror {
    const struct jev_weights *w; /* what the forward passes read: the model's, or copy below */
    struct jev_weights copy;     /* the backend's copy (device pointers), when one was made */
    bool owned;                  /* copy holds backend memory */
    const struct jev_ops *ops;   /* backend that owns copy */
    struct jev_backend *be;
    const struct jev_config *cfg;   /* sizes of the vectors */
    const struct jev_weights *host; /* the model's weights the copy was made from */
    size_t bytes;                   /* backend bytes held by copy */
};

/* Makes the mirror (uploads everything for a device backend). On failure nothing is held and
 * err names the tensor that did not fit. */
enum jev_status jev_weights_mirror_init(struct jev_weights_mirror *m, const struct jev_config *cfg,
                                        const struct jev_weights *host, const struct jev_ops *ops,
                                        struct jev_backend *be, struct jev_error *err);
void jev_weights_mirror_free(struct jev_weights_mirror *m);

#endif
