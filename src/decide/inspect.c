/*
 * inspect.c - jev_decide_inspect (inspect.h): dc_run with its request
 * context kept on the heap and read through accessors, so that callers
 * above the decide layer never see the context's layout.
 */
#include "decide/inspect.h" // defines: struct jev_decide_inspection

#include <stdlib.h>
#include <string.h>

#include "decide/pipeline-int.h" // defines: dc_run, struct dc_req

struct jev_decide_inspection {
    struct dc_req q;                 /* the run's context (dc_run leaves it alive) */
    struct jev_decide_inputs inputs; /* views into q */
};

enum jev_status jev_decide_inspect(struct jev_decider *d, const struct jev_request *r,
                                   const struct jev_decide_params *p, struct jev_decide_result *res,
                                   struct jev_decide_inspection **out, struct jev_error *err) {
    *out = NULL;
    struct jev_decide_inspection *in = calloc(1, sizeof *in);
    if (!in) {
        memset(res, 0, sizeof *res);
        return jev_fail(err, JEV_ERR_NOMEM, "decide: out of memory for an inspection");
    }
    enum jev_status s = dc_run(d, r, p, res, err, &in->q);
    if (s != JEV_OK) {
        jev_decide_inspection_free(in);
        return s;
    }
    const struct dc_req *q = &in->q;
    in->inputs = (struct jev_decide_inputs){
        .prefix_ids = q->prefix.ids,
        .n_prefix = (int32_t)q->prefix.n,
        .has_image = q->has_image,
        .grid_h = q->vin.size.grid_h,
        .grid_w = q->vin.size.grid_w,
        .image_at = q->img_at,
        .n_image_tokens = q->n_img_tok,
        .image_embd = q->img_embd,
        .max_prompt = q->cap_prompt,
        .n_vocab = q->n_vocab,
    };
    *out = in;
    return JEV_OK;
}

void jev_decide_inspection_free(struct jev_decide_inspection *in) {
    if (!in)
        return;
    dc_req_free(&in->q);
    free(in);
}

const struct jev_decide_inputs *jev_decide_inspection_inputs(const struct jev_decide_inspection *in) {
    return &in->inputs;
}

const int32_t *jev_decide_inspection_suffix(const struct jev_decide_inspection *in, int32_t qi, int32_t *n) {
    *n = (int32_t)in->q.qs[qi].suffix.n;
    return in->q.qs[qi].suffix.ids;
}

const struct jev_trie *jev_decide_inspection_trie(const struct jev_decide_inspection *in, int32_t qi) {
    return in->q.qs[qi].has_trie ? &in->q.qs[qi].trie : NULL;
}

void jev_decider_drop_kept(struct jev_decider *d) { dc_kept_drop(d); }
