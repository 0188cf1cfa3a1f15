/*
 * config.c - derived sizes and consistency checks for struct jev_config.
 */
#include "model/config.h" // defines: struct jev_config

#include <math.h>

/* The caller (jev_config_parse) puts the file's path in front of the message. */
static enum jev_status need(struct jev_error *err, bool ok, const char *what) {
    return ok ? JEV_OK : jev_fail(err, JEV_ERR_FORMAT, "%s", what);
}

enum jev_status jev_config_derive(struct jev_config *c, struct jev_error *err) {
    struct jev_text_config *t = &c->text;
    JEV_TRY(need(err, t->vocab_size > 0 && t->hidden > 0 && t->intermediate > 0,
                 "text_config: vocab_size, hidden_size and intermediate_size must be positive"));
    JEV_TRY(
        need(err, t->n_layers > 0 && t->n_layers <= JEV_MAX_LAYERS, "text_config.num_hidden_layers must be in 1..256"));
    t->n_full_layers = t->n_linear_layers = 0;
    for (int i = 0; i < t->n_layers; i++) {
        if (t->layer_kind[i] == JEV_LAYER_FULL)
            t->n_full_layers++;
        else
            t->n_linear_layers++;
    }
    if (t->n_full_layers > 0) {
        JEV_TRY(need(err, t->n_heads > 0 && t->n_kv_heads > 0 && t->head_dim > 0,
                     "text_config: attention heads and head_dim must be positive"));
        JEV_TRY(need(err, t->n_heads % t->n_kv_heads == 0,
                     "text_config: num_attention_heads must be a multiple of num_key_value_heads"));
        JEV_TRY(need(err, t->rotary_dim > 0 && t->rotary_dim <= t->head_dim && t->rotary_dim % 2 == 0,
                     "text_config: head_dim * partial_rotary_factor must be an even number <= head_dim"));
        JEV_TRY(need(err, t->mrope_section[0] + t->mrope_section[1] + t->mrope_section[2] == t->rotary_dim / 2,
                     "text_config.rope_parameters.mrope_section must sum to rotary_dim / 2"));
        JEV_TRY(need(err, t->rope_theta > 0, "text_config.rope_parameters.rope_theta must be positive"));
    }
    if (t->n_linear_layers > 0) {
        JEV_TRY(need(err, t->lin_k_heads > 0 && t->lin_v_heads > 0 && t->lin_k_dim > 0 && t->lin_v_dim > 0,
                     "text_config: linear attention heads and head dims must be positive"));
        JEV_TRY(need(err, t->lin_v_heads % t->lin_k_heads == 0,
                     "text_config: linear_num_value_heads must be a multiple of linear_num_key_heads"));
        JEV_TRY(need(err, t->conv_kernel >= 1 && t->conv_kernel <= 16,
                     "text_config.linear_conv_kernel_dim must be in 1..16"));
    }
    t->q_proj_out = t->n_heads * t->head_dim * 2;
    t->kv_dim = t->n_kv_heads * t->head_dim;
    t->attn_out = t->n_heads * t->head_dim;
    t->lin_key_dim = t->lin_k_heads * t->lin_k_dim;
    t->lin_value_dim = t->lin_v_heads * t->lin_v_dim;
    t->conv_dim = 2 * t->lin_key_dim + t->lin_value_dim;

    if (c->has_vision) {
        struct jev_vision_config *v = &c->vision;
        JEV_TRY(need(err, v->depth > 0 && v->hidden > 0 && v->n_heads > 0 && v->hidden % v->n_heads == 0,
                     "vision_config: depth, hidden_size and num_heads must be positive, hidden a multiple of heads"));
        JEV_TRY(
            need(err, v->patch > 0 && v->temporal_patch > 0 && v->merge > 0 && v->in_channels > 0,
                 "vision_config: patch_size, temporal_patch_size, spatial_merge_size, in_channels must be positive"));
        JEV_TRY(need(err, v->out_hidden == t->hidden, "vision_config.out_hidden_size must equal text hidden_size"));
        v->head_dim = v->hidden / v->n_heads;
        JEV_TRY(need(err, v->head_dim % 4 == 0, "vision_config: head dim must be a multiple of 4 (2-D rotary)"));
        v->patch_dim = v->in_channels * v->temporal_patch * v->patch * v->patch;
        int side = (int)lround(sqrt((double)v->n_pos_embed));
        JEV_TRY(need(err, side > 0 && side * side == v->n_pos_embed,
                     "vision_config.num_position_embeddings must be a square"));
        v->pos_side = side;
        v->merge_in = v->hidden * v->merge * v->merge;
    }
    return JEV_OK;
}
