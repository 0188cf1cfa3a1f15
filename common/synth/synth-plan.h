/*
 * synth-plan.h - the inside of jev synth, shared by its two files:
 * synth-plan.c (deterministic numbers, the quantizer, the plan of what a
 * layout writes, walked from the model's tensor table) and synth.c
 * (placement in files, streaming, the directory).
 * Not a public interface: only common/synth/synth*.c include it.
 */
#ifndef JEV_COMMON_SYNTH_PLAN_H
#define JEV_COMMON_SYNTH_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "io/safetensors.h"     // defines: enum jev_dtype
#include "model/config.h"       // defines: struct jev_config
#include "model/tensors.h"      // defines: enum jev_tensor_gen, the tensor table
#include "common/synth/synth.h" // defines: enum jev_synth_layout

enum jev_synth_form {
    JEV_FORM_FLOAT,     /* the values as they are, in the output dtype */
    JEV_FORM_SHIFTED,   /* 1 + w (MLX's pre-shifted norms) */
    JEV_FORM_PATCH_MLX, /* rows (c, t, y, x) permuted to channels-last (t, y, x, c) */
    JEV_FORM_QUANT,     /* affine codes + scales + biases */
};

struct jev_synth_tensor {
    char *name;           /* tensor name in the file (owned) */
    enum jev_dtype dtype; /* stored dtype */
    int32_t ndim;         /* dimensions */
    int64_t shape[5];     /* stored shape */
    uint64_t nbytes;      /* bytes */
    int32_t shard;        /* shard index */
    uint64_t offset;      /* offset in its shard's data area */
};

struct jev_synth_item {
    char *key;                /* HF tensor name: the generator key (owned) */
    enum jev_tensor_gen gen;  /* how values are drawn (the table entry's) */
    double p0, p1;            /* generator parameters */
    enum jev_synth_form form; /* how they are stored */
    int64_t rows, cols;       /* logical [rows][cols] (a vector is one row) */
    int32_t n_out;            /* 1, or 3 for JEV_FORM_QUANT */
    int32_t out[3];           /* indices of its output tensors: weight (codes), scales, biases */
};

struct jev_synth_plan {
    struct jev_synth_tensor *t;   /* [nt] output tensors, model order */
    int32_t nt, capt;             /* used / allocated */
    struct jev_synth_item *it;    /* [ni] logical weights, model order */
    int32_t ni, capi;             /* used / allocated */
    enum jev_synth_layout layout; /* output layout */
    int32_t bits, group;          /* quantization (mlx4) */
    int64_t n_params;             /* logical elements */
    bool oom;                     /* an allocation failed while planning */
};

/* The generator key of a tensor: its values are a pure function of (key, element index). */
uint64_t jev_synth_key(uint64_t seed, const char *name);

/* The underlying values of elements [start, start + n) of a weight (flat HF order). */
void jev_synth_values(const struct jev_synth_item *it, uint64_t key, uint64_t start, int64_t n, float *out);

/* Lists every weight of the model and its output tensors, in model order; pl->oom on failure. */
void jev_synth_plan_model(struct jev_synth_plan *pl, const struct jev_config *c, int n_mtp);
void jev_synth_plan_free(struct jev_synth_plan *pl);

#endif
