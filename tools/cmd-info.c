/*
 * cmd-info.c - `jev info DIR [--tensors] [--sha256]`: loads a model directory
 * (the full validation of jev_model_load) and prints its layout, config
 * summary, bytes per dtype and, on request, every tensor and the weights'
 * sha256.
 */
#include <stdio.h>
#include <string.h>

#include "base/error.h"     // defines: struct jev_error
#include "base/sha256.h"    // defines: JEV_SHA256_HEX
#include "commands.h"       // defines: cmd_info
#include "io/safetensors.h" // defines: jev_dtype_name
#include "model/model.h"    // defines: struct jev_model, jev_model_open

static const char *matrix_type(const struct jev_matrix *m, char *buf, size_t size) {
    static const char *names[] = {"f32", "bf16", "f16"};
    if (m->type == JEV_MTYPE_QAFFINE)
        snprintf(buf, size, "affine %d-bit, group %d", m->bits, m->group);
    else
        snprintf(buf, size, "%s", names[m->type]);
    return buf;
}

static void print_config(const struct jev_model *m) {
    const struct jev_config *c = &m->config;
    const struct jev_text_config *t = &c->text;
    char kinds[JEV_MAX_LAYERS + 1];
    for (int i = 0; i < t->n_layers; i++)
        kinds[i] = t->layer_kind[i] == JEV_LAYER_FULL ? 'F' : 'L';
    kinds[t->n_layers] = '\0';
    printf("text:      vocab %d, hidden %d, mlp %d, %d layers (%d DeltaNet, %d attention): %s\n", t->vocab_size,
           t->hidden, t->intermediate, t->n_layers, t->n_linear_layers, t->n_full_layers, kinds);
    printf("attention: %d query heads, %d kv heads, head dim %d, rotary dims %d, mrope [%d, %d, %d]%s, theta %g\n",
           t->n_heads, t->n_kv_heads, t->head_dim, t->rotary_dim, t->mrope_section[0], t->mrope_section[1],
           t->mrope_section[2], t->mrope_interleaved ? " interleaved" : " sectioned", t->rope_theta);
    printf("deltanet:  %d key heads x %d, %d value heads x %d, conv kernel %d, conv dim %d\n", t->lin_k_heads,
           t->lin_k_dim, t->lin_v_heads, t->lin_v_dim, t->conv_kernel, t->conv_dim);
    printf("misc:      rms eps %g, tied embeddings %s, max positions %d\n", (double)t->rms_eps,
           t->tie_embeddings ? "yes" : "no", t->max_positions);
    if (c->has_vision) {
        const struct jev_vision_config *v = &c->vision;
        printf("vision:    %d blocks, hidden %d, %d heads, mlp %d (%s GELU), patch %d x %d x %d ch, merge %d, "
               "out %d, %d positions (%dx%d)\n",
               v->depth, v->hidden, v->n_heads, v->intermediate, v->gelu_tanh ? "tanh" : "erf", v->temporal_patch,
               v->patch, v->in_channels, v->merge, v->out_hidden, v->n_pos_embed, v->pos_side, v->pos_side);
    } else {
        printf("vision:    none\n");
    }
    printf("token ids: image %d, video %d, vision start %d, end %d, eos", c->ids.image_pad, c->ids.video_pad,
           c->ids.vision_start, c->ids.vision_end);
    for (int i = 0; i < c->ids.n_eos; i++)
        printf(" %d", c->ids.eos[i]);
    printf("\n");
    if (c->quant.present)
        printf("quant:     affine, %d bits, group %d (config.json)\n", c->quant.bits, c->quant.group_size);
    char b1[64], b2[64];
    printf("matrices:  embed %s, first layer gate_proj %s\n", matrix_type(&m->weights.text.embed, b1, sizeof b1),
           matrix_type(&m->weights.text.layers[0].gate, b2, sizeof b2));
}

int cmd_info(int argc, char **argv) {
    const char *dir = NULL;
    bool tensors = false, sha = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tensors"))
            tensors = true;
        else if (!strcmp(argv[i], "--sha256"))
            sha = true;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: jev info DIR [--tensors] [--sha256]\n");
            return 0;
        } else if (argv[i][0] != '-' && !dir)
            dir = argv[i];
        else {
            fprintf(stderr, "jev info: unknown argument '%s'\nusage: jev info DIR [--tensors] [--sha256]\n", argv[i]);
            return 2;
        }
    }
    if (!dir) {
        fprintf(stderr, "usage: jev info DIR [--tensors] [--sha256]\n");
        return 2;
    }
    struct jev_error err = {0};
    struct jev_model *m = NULL;
    if (jev_model_open(dir, NULL, &m, &err) != JEV_OK) {
        fprintf(stderr, "jev info: %s\n", err.msg);
        return 1;
    }
    const struct jev_st_set *s = &m->tensors;
    const struct jev_layout_names ln = jev_layout_names(m->layout);
    printf("model:     %s\n", dir);
    printf("layout:    %s (tensor names %s*, %s*)\n", jev_layout_name(m->layout), ln.text, ln.vision);
    printf("files:     %d safetensors file%s%s, %d tensors, %.1f MiB\n", s->n_files, s->n_files > 1 ? "s" : "",
           s->sharded ? " (model.safetensors.index.json)" : "", s->n_tensors, (double)s->total_bytes / (1 << 20));
    print_config(m);

    uint64_t bytes[JEV_DTYPE_COUNT] = {0};
    int32_t count[JEV_DTYPE_COUNT] = {0};
    for (int32_t i = 0; i < s->n_tensors; i++) {
        bytes[s->by_name[i]->dtype] += s->by_name[i]->nbytes;
        count[s->by_name[i]->dtype]++;
    }
    printf("dtypes:   ");
    for (int d = 0; d < JEV_DTYPE_COUNT; d++)
        if (count[d])
            printf(" %s %d tensors %llu bytes;", jev_dtype_name((enum jev_dtype)d), count[d],
                   (unsigned long long)bytes[d]);
    printf("\n");
    if (sha) {
        char hex[JEV_SHA256_HEX];
        if (jev_model_weights_sha256(m, hex, &err) != JEV_OK) {
            fprintf(stderr, "jev info: %s\n", err.msg);
            jev_model_free(m);
            return 1;
        }
        printf("sha256:    %s\n", hex);
    }
    if (tensors) {
        for (int32_t i = 0; i < s->n_tensors; i++) {
            const struct jev_st_tensor *t = s->by_name[i];
            char sh[160];
            printf("  %-64s %-5s %-22s %12llu\n", t->name, jev_dtype_name(t->dtype),
                   jev_st_shape_str(t->shape, t->ndim, sh, sizeof sh), (unsigned long long)t->nbytes);
        }
    }
    jev_model_free(m);
    return 0;
}
