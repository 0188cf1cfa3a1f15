/*
 * config-json.c - config.json -> struct jev_config (see config-json.h).
 *
 * Every field is read through one of the typed readers below, which name the
 * field with its full path in every message ("text_config.rope_parameters.
 * mrope_section: expected an array of 3 integers"). Sizes that the real
 * config.json always carries are required; a few keys that HF itself
 * defaults (conv kernel, eps, max positions, rope shape) get HF's defaults.
 * Features this engine does not implement (MoE, DeepStack, other rope types,
 * other quantization modes) are refused with JEV_ERR_UNSUPPORTED rather than
 * silently mis-read.
 */
#include "model/config-json.h" // defines: jev_config_parse

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- typed field readers ---- */

struct reader {
    const char *label;     /* file name for messages */
    struct jev_error *err; /* where failures go */
};

/* What a wrongly typed value was, for "expected an integer, got a string". */
static const char *type_name(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "?";
}

/*
 * Every field message has one shape: "<file>: <path of the field>: <what>".
 * prefix is the dotted parent path ("text_config.", "" at the top level) so
 * the user can find the key without guessing which object it lives in.
 */
static enum jev_status fail_field(const struct reader *r, const char *prefix, const char *key, const char *fmt,
                                  const char *detail) {
    char what[256];
    snprintf(what, sizeof what, fmt, detail);
    return jev_fail(r->err, JEV_ERR_FORMAT, "%s: %s%s: %s", r->label, prefix, key, what);
}

/*
 * An integer field in [lo, hi]; when absent, *out = def if !required.
 * JSON null counts as absent (HF writes
 * null for unset optional ids). The range keeps every size far inside
 * int32 so that later products (heads * dim, rows * cols) cannot overflow.
 */
static enum jev_status get_int(const struct reader *r, const json_t *o, const char *prefix, const char *key,
                               bool required, int64_t def, int64_t lo, int64_t hi, int32_t *out) {
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        if (required)
            return fail_field(r, prefix, key, "missing%s", "");
        *out = (int32_t)def;
        return JEV_OK;
    }
    if (!json_is_integer(v))
        return fail_field(r, prefix, key, "expected an integer, got %s", type_name(v));
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi) {
        char range[96];
        snprintf(range, sizeof range, "%lld is outside %lld..%lld", (long long)x, (long long)lo, (long long)hi);
        return fail_field(r, prefix, key, "%s", range);
    }
    *out = (int32_t)x;
    return JEV_OK;
}

/* A real-valued field; integers are accepted too (rope_theta is written as 10000000). */
static enum jev_status get_num(const struct reader *r, const json_t *o, const char *prefix, const char *key,
                               bool required, double def, double *out) {
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        if (required)
            return fail_field(r, prefix, key, "missing%s", "");
        *out = def;
        return JEV_OK;
    }
    if (!json_is_number(v))
        return fail_field(r, prefix, key, "expected a number, got %s", type_name(v));
    *out = json_number_value(v);
    return JEV_OK;
}

/* A boolean field; absent or null gives def. */
static enum jev_status get_bool(const struct reader *r, const json_t *o, const char *prefix, const char *key, bool def,
                                bool *out) {
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return JEV_OK;
    }
    if (!json_is_boolean(v))
        return fail_field(r, prefix, key, "expected a boolean, got %s", type_name(v));
    *out = json_is_true(v);
    return JEV_OK;
}

/*
 * A string field (model_type, hidden_act, rope_type, mode); *out = NULL
 * when absent and not required.
 */
static enum jev_status get_str(const struct reader *r, const json_t *o, const char *prefix, const char *key,
                               bool required, const char **out) {
    const json_t *v = json_object_get(o, key);
    *out = NULL;
    if (!v || json_is_null(v))
        return required ? fail_field(r, prefix, key, "missing%s", "") : JEV_OK;
    if (!json_is_string(v))
        return fail_field(r, prefix, key, "expected a string, got %s", type_name(v));
    *out = json_string_value(v);
    return JEV_OK;
}

/*
 * A sub-object (text_config, rope_parameters, quantization); *out = NULL
 * when absent or null.
 */
static enum jev_status get_obj(const struct reader *r, const json_t *o, const char *prefix, const char *key,
                               json_t **out) {
    json_t *v = json_object_get(o, key);
    *out = NULL;
    if (!v || json_is_null(v))
        return JEV_OK;
    if (!json_is_object(v))
        return fail_field(r, prefix, key, "expected an object, got %s", type_name(v));
    *out = v;
    return JEV_OK;
}

/* ---- token ids ---- */

/*
 * Adds one eos id (an integer in [0, vocab)) unless already present.
 * Stop tokens come from up to three places (text_config, the top level,
 * generation_config.json) and overlap; they are merged without duplicates
 * and must be real rows of the embedding.
 */
static enum jev_status add_eos(const struct reader *r, struct jev_config *c, const char *field, const json_t *v) {
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= c->text.vocab_size) {
        char what[64];
        snprintf(what, sizeof what, "ids in 0..%d", c->text.vocab_size - 1);
        return fail_field(r, field, "", "expected an id or a list of %s", what);
    }
    int32_t id = (int32_t)json_integer_value(v);
    for (int i = 0; i < c->ids.n_eos; i++)
        if (c->ids.eos[i] == id)
            return JEV_OK;
    if (c->ids.n_eos >= JEV_MAX_EOS)
        return jev_fail(r->err, JEV_ERR_FORMAT, "%s: %s: more than %d distinct stop tokens", r->label, field,
                        JEV_MAX_EOS);
    c->ids.eos[c->ids.n_eos++] = id;
    return JEV_OK;
}

/*
 * eos_token_id of object o: an id or a list of ids in HF configs (both
 * accepted), or absent.
 */
static enum jev_status read_eos(const struct reader *r, struct jev_config *c, const json_t *o, const char *field) {
    const json_t *v = json_object_get(o, "eos_token_id");
    if (!v || json_is_null(v))
        return JEV_OK;
    if (json_is_array(v)) {
        size_t i;
        const json_t *e;
        json_array_foreach(v, i, e) JEV_TRY(add_eos(r, c, field, e));
        return JEV_OK;
    }
    return add_eos(r, c, field, v);
}

/* ---- text config ---- */

/*
 * rope: rope_parameters (new HF) or rope_theta / rope_scaling / partial_rotary_factor (legacy).
 * HF v5 writes rope_parameters {rope_type, rope_theta, partial_rotary_factor,
 * mrope_section, mrope_interleaved}; older configs put rope_theta and
 * partial_rotary_factor at the text level and the M-RoPE keys in
 * rope_scaling. The new place wins when both exist. rotary_dim must come
 * out as an integer: HF takes int(head_dim * factor), and a config where
 * that truncates is more likely a typo than intended.
 * Note: HF's Qwen3.5 code always interleaves the M-RoPE axes and ignores
 * mrope_interleaved; the flag is still read (default true) so that the
 * sectioned form stays available to a config that asks for it.
 */
static enum jev_status read_rope(const struct reader *r, const json_t *t, const char *tp, struct jev_text_config *x) {
    json_t *rp = NULL, *legacy = NULL;
    JEV_TRY(get_obj(r, t, tp, "rope_parameters", &rp));
    JEV_TRY(get_obj(r, t, tp, "rope_scaling", &legacy));
    char rpp[96];
    snprintf(rpp, sizeof rpp, "%srope_parameters.", tp);
    char lgp[96];
    snprintf(lgp, sizeof lgp, "%srope_scaling.", tp);

    /* rope_type (or legacy "type"): only the default (M-)RoPE is implemented */
    const char *type = NULL;
    if (rp)
        JEV_TRY(get_str(r, rp, rpp, "rope_type", false, &type));
    if (!type && legacy) {
        JEV_TRY(get_str(r, legacy, lgp, "rope_type", false, &type));
        if (!type)
            JEV_TRY(get_str(r, legacy, lgp, "type", false, &type));
    }
    if (type && strcmp(type, "default") != 0 && strcmp(type, "mrope") != 0)
        return jev_fail(r->err, JEV_ERR_UNSUPPORTED, "%s: %srope_type '%s' is not supported (only \"default\")",
                        r->label, rp ? rpp : lgp, type);

    /* theta: rope_parameters.rope_theta, else top-level rope_theta */
    double theta = 0, prf = 0;
    bool have_theta = rp && json_object_get(rp, "rope_theta");
    if (have_theta)
        JEV_TRY(get_num(r, rp, rpp, "rope_theta", true, 0, &theta));
    else
        JEV_TRY(get_num(r, t, tp, "rope_theta", true, 0, &theta));
    if (rp && json_object_get(rp, "partial_rotary_factor"))
        JEV_TRY(get_num(r, rp, rpp, "partial_rotary_factor", true, 0, &prf));
    else
        JEV_TRY(get_num(r, t, tp, "partial_rotary_factor", false, 0.25, &prf));
    if (!(prf > 0 && prf <= 1))
        return fail_field(r, tp, "partial_rotary_factor", "must be in (0, 1]%s", "");
    x->rope_theta = theta;
    double rd = prf * (double)x->head_dim;
    x->rotary_dim = (int32_t)rd;
    if ((double)x->rotary_dim != rd)
        return fail_field(r, tp, "partial_rotary_factor", "head_dim * partial_rotary_factor is not an integer%s", "");

    /* mrope_section / mrope_interleaved: rope_parameters, else rope_scaling, else HF's defaults */
    const json_t *src = rp && json_object_get(rp, "mrope_section") ? rp : legacy;
    const char *sp = src == rp ? rpp : lgp;
    const json_t *ms = src ? json_object_get(src, "mrope_section") : NULL;
    if (ms) {
        if (!json_is_array(ms) || json_array_size(ms) != 3)
            return fail_field(r, sp, "mrope_section", "expected an array of 3 integers%s", "");
        for (int i = 0; i < 3; i++) {
            const json_t *e = json_array_get(ms, (size_t)i);
            if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) > 4096)
                return fail_field(r, sp, "mrope_section", "expected an array of 3 integers in 0..4096%s", "");
            x->mrope_section[i] = (int32_t)json_integer_value(e);
        }
    } else {
        static const int32_t def[3] = {11, 11, 10}; /* Qwen3_5TextRotaryEmbedding's default */
        memcpy(x->mrope_section, def, sizeof def);
    }
    const json_t *isrc = rp && json_object_get(rp, "mrope_interleaved") ? rp : legacy;
    JEV_TRY(get_bool(r, isrc, isrc == rp ? rpp : lgp, "mrope_interleaved", true, &x->mrope_interleaved));
    return JEV_OK;
}

/*
 * layer_types is authoritative when present (its length must match the
 * layer count); otherwise HF's rule: full attention iff (i + 1) % interval
 * == 0, interval default 4.
 */
static enum jev_status read_layer_kinds(const struct reader *r, const json_t *t, const char *tp,
                                        struct jev_text_config *x) {
    const json_t *lt = json_object_get(t, "layer_types");
    if (lt && !json_is_null(lt)) {
        if (!json_is_array(lt) || json_array_size(lt) != (size_t)x->n_layers) {
            char what[96];
            snprintf(what, sizeof what, "expected an array of %d layer types (num_hidden_layers)", x->n_layers);
            return fail_field(r, tp, "layer_types", "%s", what);
        }
        for (int i = 0; i < x->n_layers; i++) {
            const char *s = json_string_value(json_array_get(lt, (size_t)i));
            if (s && strcmp(s, "linear_attention") == 0)
                x->layer_kind[i] = JEV_LAYER_LINEAR;
            else if (s && strcmp(s, "full_attention") == 0)
                x->layer_kind[i] = JEV_LAYER_FULL;
            else {
                char what[96];
                snprintf(what, sizeof what, "entry %d is not \"linear_attention\" or \"full_attention\"", i);
                return fail_field(r, tp, "layer_types", "%s", what);
            }
        }
        return JEV_OK;
    }
    int32_t interval;
    JEV_TRY(get_int(r, t, tp, "full_attention_interval", false, 4, 1, JEV_MAX_LAYERS, &interval));
    for (int i = 0; i < x->n_layers; i++) /* HF: full attention iff (i + 1) % interval == 0 */
        x->layer_kind[i] = (i + 1) % interval == 0 ? JEV_LAYER_FULL : JEV_LAYER_LINEAR;
    return JEV_OK;
}

/*
 * The text model. Sizes are required (every saved config has them; HF's
 * defaults are the 9B's and would silently build the wrong model);
 * conv kernel, eps and max positions default as in HF. Features outside
 * this engine (other activations, attention bias, experts) are refused.
 */
static enum jev_status read_text(const struct reader *r, const json_t *t, const char *tp, struct jev_text_config *x) {
    const int64_t big = 1 << 24; /* no dimension of a real model comes near this */
    JEV_TRY(get_int(r, t, tp, "vocab_size", true, 0, 1, 1 << 30, &x->vocab_size));
    JEV_TRY(get_int(r, t, tp, "hidden_size", true, 0, 1, big, &x->hidden));
    JEV_TRY(get_int(r, t, tp, "intermediate_size", true, 0, 1, big, &x->intermediate));
    JEV_TRY(get_int(r, t, tp, "num_hidden_layers", true, 0, 1, JEV_MAX_LAYERS, &x->n_layers));
    JEV_TRY(get_int(r, t, tp, "num_attention_heads", true, 0, 1, 4096, &x->n_heads));
    JEV_TRY(get_int(r, t, tp, "num_key_value_heads", true, 0, 1, 4096, &x->n_kv_heads));
    JEV_TRY(get_int(r, t, tp, "head_dim", true, 0, 1, 65536, &x->head_dim));
    JEV_TRY(get_int(r, t, tp, "linear_num_key_heads", true, 0, 1, 4096, &x->lin_k_heads));
    JEV_TRY(get_int(r, t, tp, "linear_num_value_heads", true, 0, 1, 4096, &x->lin_v_heads));
    JEV_TRY(get_int(r, t, tp, "linear_key_head_dim", true, 0, 1, 65536, &x->lin_k_dim));
    JEV_TRY(get_int(r, t, tp, "linear_value_head_dim", true, 0, 1, 65536, &x->lin_v_dim));
    JEV_TRY(get_int(r, t, tp, "linear_conv_kernel_dim", false, 4, 1, 16, &x->conv_kernel));
    JEV_TRY(get_int(r, t, tp, "max_position_embeddings", false, 32768, 1, INT32_MAX, &x->max_positions));
    /* products that later code multiplies must stay well inside int32 */
    if ((int64_t)x->n_heads * x->head_dim * 2 > big || (int64_t)x->n_kv_heads * x->head_dim > big ||
        (int64_t)x->lin_k_heads * x->lin_k_dim * 2 + (int64_t)x->lin_v_heads * x->lin_v_dim > big)
        return jev_fail(r->err, JEV_ERR_FORMAT, "%s: %sattention sizes are implausibly large", r->label, tp);
    double eps;
    JEV_TRY(get_num(r, t, tp, "rms_norm_eps", false, 1e-6, &eps));
    if (!(eps > 0 && eps < 1))
        return fail_field(r, tp, "rms_norm_eps", "must be in (0, 1)%s", "");
    x->rms_eps = (float)eps;
    JEV_TRY(read_layer_kinds(r, t, tp, x));
    JEV_TRY(read_rope(r, t, tp, x));

    const char *act;
    JEV_TRY(get_str(r, t, tp, "hidden_act", false, &act));
    if (act && strcmp(act, "silu") != 0)
        return jev_fail(r->err, JEV_ERR_UNSUPPORTED, "%s: %shidden_act '%s' is not supported (only \"silu\")", r->label,
                        tp, act);
    bool bias;
    JEV_TRY(get_bool(r, t, tp, "attention_bias", false, &bias));
    if (bias)
        return jev_fail(r->err, JEV_ERR_UNSUPPORTED, "%s: %sattention_bias true is not supported", r->label, tp);
    if (json_object_get(t, "num_experts"))
        return jev_fail(r->err, JEV_ERR_UNSUPPORTED, "%s: %snum_experts: mixture-of-experts models are not supported",
                        r->label, tp);
    return JEV_OK;
}

/* ---- vision config ---- */

/*
 * The vision tower. hidden_act selects the block MLP's GELU form (tanh for
 * gelu_pytorch_tanh, the Qwen3.5 default; erf for "gelu"). The LayerNorm
 * epsilon is not in the config: HF hard-codes 1e-6.
 */
static enum jev_status read_vision(const struct reader *r, const json_t *v, struct jev_vision_config *x) {
    const char *vp = "vision_config.";
    JEV_TRY(get_int(r, v, vp, "depth", true, 0, 1, 1024, &x->depth));
    JEV_TRY(get_int(r, v, vp, "hidden_size", true, 0, 1, 1 << 16, &x->hidden));
    JEV_TRY(get_int(r, v, vp, "num_heads", true, 0, 1, 1024, &x->n_heads));
    JEV_TRY(get_int(r, v, vp, "intermediate_size", true, 0, 1, 1 << 18, &x->intermediate));
    JEV_TRY(get_int(r, v, vp, "in_channels", false, 3, 1, 16, &x->in_channels));
    JEV_TRY(get_int(r, v, vp, "patch_size", true, 0, 1, 64, &x->patch));
    JEV_TRY(get_int(r, v, vp, "temporal_patch_size", true, 0, 1, 16, &x->temporal_patch));
    JEV_TRY(get_int(r, v, vp, "spatial_merge_size", true, 0, 1, 8, &x->merge));
    JEV_TRY(get_int(r, v, vp, "out_hidden_size", true, 0, 1, 1 << 24, &x->out_hidden));
    JEV_TRY(get_int(r, v, vp, "num_position_embeddings", true, 0, 1, 1 << 20, &x->n_pos_embed));
    const char *act;
    JEV_TRY(get_str(r, v, vp, "hidden_act", false, &act));
    if (!act || strcmp(act, "gelu_pytorch_tanh") == 0 || strcmp(act, "gelu_tanh") == 0)
        x->gelu_tanh = true;
    else if (strcmp(act, "gelu") == 0)
        x->gelu_tanh = false;
    else
        return jev_fail(r->err, JEV_ERR_UNSUPPORTED,
                        "%s: vision_config.hidden_act '%s' is not supported (gelu_pytorch_tanh or gelu)", r->label,
                        act);
    const json_t *ds = json_object_get(v, "deepstack_visual_indexes");
    if (ds && json_is_array(ds) && json_array_size(ds) > 0)
        return jev_fail(r->err, JEV_ERR_UNSUPPORTED,
                        "%s: vision_config.deepstack_visual_indexes: DeepStack is not supported", r->label);
    x->eps = 1e-6f; /* nn.LayerNorm(eps=1e-6) in the HF vision blocks and merger */
    return JEV_OK;
}

/* ---- quantization ---- */

/* The code widths mlx's affine quantization supports. */
static bool valid_bits(int32_t b) { return b == 2 || b == 3 || b == 4 || b == 5 || b == 6 || b == 8; }

/* Overrides are sorted by module path so the loader can bsearch them per tensor. */
static int cmp_override(const void *a, const void *b) {
    return strcmp(((const struct jev_quant_override *)a)->path, ((const struct jev_quant_override *)b)->path);
}

/*
 * "quantization" (or "quantization_config"): defaults plus per-module entries.
 * mlx-lm / mlx-vlm write "quantization" (and a copy as "quantization_config"
 * for transformers); the first found is used. Besides bits / group_size /
 * mode, every key whose value is an object or a boolean is a per-module
 * override: {bits, group_size} for a module quantized differently, false
 * for one left in float. Other value types (numbers, strings) are ignored,
 * as mlx ignores them.
 */
static enum jev_status read_quant(const struct reader *r, const json_t *root, struct jev_config *c,
                                  struct jev_quant_overrides *q) {
    const char *key = "quantization";
    json_t *qo = NULL;
    JEV_TRY(get_obj(r, root, "", key, &qo));
    if (!qo) {
        key = "quantization_config";
        JEV_TRY(get_obj(r, root, "", key, &qo));
    }
    if (!qo)
        return JEV_OK;
    char qp[40];
    snprintf(qp, sizeof qp, "%s.", key);
    c->quant.present = true;
    JEV_TRY(get_int(r, qo, qp, "bits", true, 0, 1, 8, &c->quant.bits));
    JEV_TRY(get_int(r, qo, qp, "group_size", true, 0, 1, 1 << 20, &c->quant.group_size));
    if (!valid_bits(c->quant.bits))
        return jev_fail(r->err, JEV_ERR_UNSUPPORTED, "%s: %sbits: %d is not supported (2, 3, 4, 5, 6 or 8)", r->label,
                        qp, c->quant.bits);
    const char *mode;
    JEV_TRY(get_str(r, qo, qp, "mode", false, &mode));
    if (mode && strcmp(mode, "affine") != 0)
        return jev_fail(r->err, JEV_ERR_UNSUPPORTED, "%s: %smode '%s' is not supported (only \"affine\")", r->label, qp,
                        mode);
    /* every other key is a module path: {bits, group_size} or false */
    size_t n = 0;
    const char *k;
    json_t *v;
    json_object_foreach(qo, k, v) {
        if (json_is_object(v) || json_is_boolean(v))
            n++;
    }
    if (!q || n == 0)
        return JEV_OK;
    q->items = calloc(n, sizeof *q->items);
    if (!q->items)
        return jev_fail(r->err, JEV_ERR_NOMEM, "%s: out of memory", r->label);
    json_object_foreach(qo, k, v) {
        if (!json_is_object(v) && !json_is_boolean(v))
            continue;
        struct jev_quant_override *o = &q->items[q->n];
        o->path = strdup(k);
        if (!o->path)
            return jev_fail(r->err, JEV_ERR_NOMEM, "%s: out of memory", r->label);
        q->n++;
        o->quantized = !json_is_false(v);
        o->bits = c->quant.bits;
        o->group = c->quant.group_size;
        if (json_is_object(v)) {
            char mp[300];
            snprintf(mp, sizeof mp, "%s%s.", qp, k);
            JEV_TRY(get_int(r, v, mp, "bits", false, c->quant.bits, 1, 8, &o->bits));
            JEV_TRY(get_int(r, v, mp, "group_size", false, c->quant.group_size, 1, 1 << 20, &o->group));
            if (!valid_bits(o->bits))
                return jev_fail(r->err, JEV_ERR_UNSUPPORTED, "%s: %sbits: %d is not supported", r->label, mp, o->bits);
        }
    }
    qsort(q->items, (size_t)q->n, sizeof *q->items, cmp_override);
    return JEV_OK;
}

/* bsearch by path; NULL when the module has no entry (the defaults apply). */
const struct jev_quant_override *jev_quant_overrides_find(const struct jev_quant_overrides *q, const char *path) {
    if (!q || q->n == 0)
        return NULL;
    struct jev_quant_override key = {.path = (char *)(uintptr_t)path};
    return bsearch(&key, q->items, (size_t)q->n, sizeof *q->items, cmp_override);
}

/* Safe on a zeroed struct; leaves it zeroed. */
void jev_quant_overrides_free(struct jev_quant_overrides *q) {
    if (!q)
        return;
    for (int32_t i = 0; i < q->n; i++)
        free(q->items[i].path);
    free(q->items);
    q->items = NULL;
    q->n = 0;
}

/* ---- top level ---- */

/*
 * A token id field in [0, vocab); -1 when absent and not required.
 * A special-token id: must be a row of the embedding.
 */
static enum jev_status get_id(const struct reader *r, const json_t *o, const char *key, bool required,
                              const struct jev_config *c, int32_t *out) {
    return get_int(r, o, "", key, required, -1, 0, c->text.vocab_size - 1, out);
}

/*
 * The outer Qwen3_5ForConditionalGeneration config, or a bare text config.
 * Vision is present iff vision_config is (HF would invent a default tower;
 * here a missing tower means a text-only model, and the vision token ids
 * become optional).
 */
static enum jev_status parse_root(const struct reader *r, json_t *root, struct jev_config *c,
                                  struct jev_quant_overrides *q) {
    if (!json_is_object(root))
        return jev_fail(r->err, JEV_ERR_FORMAT, "%s: not a JSON object", r->label);
    const char *mt;
    JEV_TRY(get_str(r, root, "", "model_type", true, &mt));
    json_t *text = NULL, *vision = NULL;
    const char *tp = "text_config.";
    if (strcmp(mt, "qwen3_5") == 0) {
        JEV_TRY(get_obj(r, root, "", "text_config", &text));
        if (!text)
            return fail_field(r, "", "text_config", "missing%s", "");
        JEV_TRY(get_obj(r, root, "", "vision_config", &vision));
    } else if (strcmp(mt, "qwen3_5_text") == 0) {
        text = root; /* bare text config: fields at the top level */
        tp = "";
    } else {
        return jev_fail(r->err, JEV_ERR_UNSUPPORTED,
                        "%s: model_type '%s' is not supported (expected \"qwen3_5\" or \"qwen3_5_text\")", r->label,
                        mt);
    }
    JEV_TRY(read_text(r, text, tp, &c->text));

    /* tie_word_embeddings: the top level decides (HF ties from the outer config), else text_config */
    bool tie_text;
    JEV_TRY(get_bool(r, text, tp, "tie_word_embeddings", false, &tie_text));
    JEV_TRY(get_bool(r, root, "", "tie_word_embeddings", tie_text, &c->text.tie_embeddings));

    c->has_vision = vision != NULL;
    if (vision)
        JEV_TRY(read_vision(r, vision, &c->vision));
    JEV_TRY(get_id(r, root, "image_token_id", c->has_vision, c, &c->ids.image_pad));
    JEV_TRY(get_id(r, root, "video_token_id", false, c, &c->ids.video_pad));
    JEV_TRY(get_id(r, root, "vision_start_token_id", c->has_vision, c, &c->ids.vision_start));
    JEV_TRY(get_id(r, root, "vision_end_token_id", c->has_vision, c, &c->ids.vision_end));
    char ep[64];
    snprintf(ep, sizeof ep, "%seos_token_id", tp);
    JEV_TRY(read_eos(r, c, text, ep));
    if (text != root)
        JEV_TRY(read_eos(r, c, root, "eos_token_id"));
    JEV_TRY(read_quant(r, root, c, q));
    return JEV_OK;
}

/*
 * The size limit is checked before jansson sees the bytes; duplicate keys
 * are rejected (a config with two "hidden_size" keys is ambiguous).
 */
enum jev_status jev_config_parse(const char *json, size_t size, const char *label, struct jev_config *c,
                                 struct jev_quant_overrides *q, struct jev_error *err) {
    memset(c, 0, sizeof *c);
    if (q)
        memset(q, 0, sizeof *q);
    if (size > JEV_CONFIG_MAX_BYTES)
        return jev_fail(err, JEV_ERR_FORMAT, "%s: larger than the limit of %zu bytes", label, JEV_CONFIG_MAX_BYTES);
    json_error_t je;
    json_t *root = json_loadb(json, size, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return jev_fail(err, JEV_ERR_FORMAT, "%s: not valid JSON: %s (line %d, column %d)", label, je.text, je.line,
                        je.column);
    struct reader r = {label, err};
    enum jev_status st = parse_root(&r, root, c, q);
    json_decref(root);
    if (st != JEV_OK)
        return st;
    struct jev_error derr = {0}; /* the sizes do not fit together: named with the file's path */
    st = jev_config_derive(c, &derr);
    return st == JEV_OK ? JEV_OK : jev_fail(err, st, "%s: %s", label, derr.msg);
}

/* generation_config.json contributes only its stop tokens; other keys are sampling defaults. */
enum jev_status jev_config_add_generation(const char *json, size_t size, const char *label, struct jev_config *c,
                                          struct jev_error *err) {
    if (size > JEV_CONFIG_MAX_BYTES)
        return jev_fail(err, JEV_ERR_FORMAT, "%s: larger than the limit of %zu bytes", label, JEV_CONFIG_MAX_BYTES);
    json_error_t je;
    json_t *root = json_loadb(json, size, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return jev_fail(err, JEV_ERR_FORMAT, "%s: not valid JSON: %s (line %d, column %d)", label, je.text, je.line,
                        je.column);
    struct reader r = {label, err};
    enum jev_status st = json_is_object(root) ? read_eos(&r, c, root, "eos_token_id")
                                              : jev_fail(err, JEV_ERR_FORMAT, "%s: not a JSON object", label);
    json_decref(root);
    return st;
}
