/*
 * cli-setup.c - the commands' shared set-up (cli-setup.h): options, model,
 * planning, the one engine and its decider.
 */
#include "common/cli-setup.h" // defines: struct cli_setup

#include <stdio.h>
#include <string.h>

#include "backend/registry.h" // defines: jev_precision_parse
#include "base/log.h"         // defines: jev_log_set_level
#include "common/cli-args.h"  // defines: cli_parse_long

void cli_setup_init(struct cli_setup *s, const char *cmd) {
    memset(s, 0, sizeof *s);
    s->cmd = cmd;
    s->ep = jev_engine_default_params();
    s->dp = jev_decider_default_params();
}

int cli_setup_arg(struct cli_setup *s, const char *a, const char *v) {
    if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
        s->verbose = true;
        return CLI_ARG_FLAG;
    }
    bool model = !strcmp(a, "--model"), threads = !strcmp(a, "--threads"), backend = !strcmp(a, "--backend");
    bool precision = !strcmp(a, "--precision"), step = !strcmp(a, "--step-tokens");
    if (!model && !threads && !backend && !precision && !step)
        return CLI_ARG_NOT_MINE;
    if (!v)
        return CLI_ARG_MISSING;
    if (model) {
        s->dir = v;
    } else if (precision) {
        /* the name here; whether the backend can run it, at the engine (jev_engine_init says what to use) */
        if (jev_precision_parse(v, &s->ep.precision, NULL) != JEV_OK)
            return CLI_ARG_BAD;
    } else if (backend) {
        s->backend = v; /* checked by the model load (backend/registry.h), which names what is wrong */
    } else if (step) {
        long n = 0;
        if (cli_parse_long(v, 16, 65536, &n) != 0)
            return CLI_ARG_BAD;
        s->ep.prefill_chunk = (int32_t)n;
    } else {
        long n = 0;
        if (cli_parse_long(v, 0, 1024, &n) != 0)
            return CLI_ARG_BAD;
        s->threads = (int32_t)n;
    }
    return CLI_ARG_VALUE;
}

enum jev_status cli_setup_load(struct cli_setup *s, struct jev_error *err) {
    if (s->verbose)
        jev_log_set_level(JEV_LOG_INFO);
    if (!s->dir)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "--model DIR is required");
    struct jev_model_params mp = jev_model_default_params();
    mp.n_threads = s->threads;
    mp.backend = s->backend;
    mp.no_vision = s->no_vision;
    return jev_model_open(s->dir, &mp, &s->model, err);
}

enum jev_status cli_setup_plan(struct cli_setup *s, const struct jev_request *r, const struct jev_decide_params *p,
                               struct jev_error *err) {
    if (!s->model || s->engine)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "jev %s: planning needs the model loaded and no engine yet", s->cmd);
    if (!s->planner)
        JEV_TRY(jev_decider_planner(s->model, &s->dp, &s->planner, err));
    struct jev_decide_params pp = *p; /* the slice of the engine to be: whether a suffix may fork light */
    if (pp.prefill_chunk == 0 && s->ep.prefill_chunk > 0)
        pp.prefill_chunk = s->ep.prefill_chunk;
    struct jev_engine_params need = {0};
    JEV_TRY(jev_decide_plan(s->planner, r, &pp, &need, err));
    int32_t batch = need.max_batch, states = need.max_states, tokens = need.max_tokens;
    /* The first plan sets max_batch, later ones grow it: the plan counts the sequences alive at once
     * exactly, and each is committed memory on a device (the 0.8B model's DeltaNet state is 20 MB a
     * sequence: the library default of 64 would hold 1.3 GB). max_tokens keeps the default as its
     * floor (the longest sequence the engine takes; host memory only); the K/V pool is sized below,
     * from the pages the plan holds at once. */
    if (!s->planned || batch > s->ep.max_batch)
        s->ep.max_batch = batch;
    /* label scoring's forks are light (model/state.h): only the prefix and text mode's forks hold a state */
    if (!s->planned || states > s->ep.max_states)
        s->ep.max_states = states;
    /* the K/V pages alive at once, from the plan: the default (twice max_tokens, with max_tokens' floor
     * of 8192) is 256 pages of 1.5 MiB on the 0.8B model, where the benchmark's largest batch takes 73 */
    if (!s->planned || need.kv_tokens > s->ep.kv_tokens)
        s->ep.kv_tokens = need.kv_tokens;
    s->planned = true;
    if (tokens > s->ep.max_tokens)
        s->ep.max_tokens = tokens;
    return JEV_OK;
}

enum jev_status cli_setup_open(struct cli_setup *s, bool with_decider, struct jev_error *err) {
    if (!s->model || s->engine)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "jev %s: one engine per command, after the model", s->cmd);
    jev_decider_free(s->planner);
    s->planner = NULL;
    enum jev_status st = jev_engine_init(s->model, &s->ep, &s->engine);
    if (st != JEV_OK)
        return jev_fail(err, st, "%s", s->engine ? jev_engine_last_error(s->engine) : "out of memory for the engine");
    if (s->verbose)
        fprintf(stderr,
                "jev %s: engine: %s backend, %s precision, %d threads, max_batch %d, max_states %d, max_tokens %d, "
                "prefill_chunk %d, K/V pages %d\n",
                s->cmd, s->engine->ops->name, jev_precision_name(s->engine->params.precision),
                jev_pool_size(s->engine->pool), s->engine->params.max_batch, s->engine->params.max_states,
                s->engine->params.max_tokens, s->engine->params.prefill_chunk, s->engine->state.n_pages);
    if (with_decider)
        JEV_TRY(jev_decider_init(s->model, s->engine, &s->dp, &s->decider, err));
    return JEV_OK;
}

void cli_setup_free(struct cli_setup *s) {
    jev_decider_free(s->decider);
    jev_engine_free(s->engine);
    jev_decider_free(s->planner);
    jev_model_free(s->model);
    s->decider = s->planner = NULL;
    s->engine = NULL;
    s->model = NULL;
    if (s->verbose) {
        int64_t engines = 0, mirrors = 0;
        jev_engine_counts(&engines, &mirrors);
        fprintf(stderr, "jev %s: engines made %lld, weight mirrors made %lld\n", s->cmd, (long long)engines,
                (long long)mirrors);
    }
}
