/*
 * cli-setup.h - what every model-running command does before its own work:
 * take --model, --threads, --backend, --precision, --step-tokens and -v, load the model, size the
 * engine for what the command will ask of it, and open ONE engine (and a
 * decider over it) with those sizes.
 *
 * Order, the reason for this file: the model first (its tokenizer comes
 * with it), then the planning (cli_setup_plan: a planner decider tokenizes
 * the requests and reads the image's size, no engine yet), then the engine,
 * built once with the planned sizes. An engine is the costly part (its
 * weights mirror is a device copy of every weight on CUDA), so a command
 * never builds a throw-away one to plan with.
 *
 *     struct cli_setup cs;
 *     cli_setup_init(&cs, "decide");
 *     ... argument loop: cli_setup_arg(&cs, argv[i], argv[i + 1]) ...
 *     cli_setup_load(&cs, &err);                  // the model
 *     cli_setup_plan(&cs, &request, &params, &err); // any number of times
 *     cli_setup_open(&cs, true, &err);            // the engine and the decider
 *     ... cs.engine, cs.decider ...
 *     cli_setup_free(&cs);
 *
 * -v also prints the engine's sizes when it opens and, at cli_setup_free,
 * how many engines and weight mirrors the process made (tests check 1).
 *
 * What it is not: a command's own options or output; the library's API.
 */
#ifndef JEV_COMMON_CLI_SETUP_H
#define JEV_COMMON_CLI_SETUP_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"      // defines: struct jev_error
#include "decide/pipeline.h" // defines: struct jev_decider, struct jev_decider_params, jev_decide_plan
#include "model/engine.h"    // defines: struct jev_engine, struct jev_engine_params

struct cli_setup {
    /* options: cli_setup_arg fills them from the command line, or the caller sets them */
    const char *cmd;              /* the command's name, for messages ("decide") */
    const char *dir;              /* --model DIR */
    int32_t threads;              /* --threads N; 0 = all cores */
    const char *backend;          /* --backend B; NULL = cpu */
    bool verbose;                 /* -v / --verbose: set-up lines and INFO log lines on stderr */
    bool no_vision;               /* load without the vision tower (text-only commands) */
    struct jev_engine_params ep;  /* the engine's sizes: the defaults, grown by cli_setup_plan */
    struct jev_decider_params dp; /* the decider's (and the planner's) settings */
    bool planned;                 /* cli_setup_plan ran: ep.max_batch is the plan's, not the default */
    /* what it opened; cli_setup_free frees it */
    struct jev_model *model;     /* cli_setup_load */
    struct jev_decider *planner; /* cli_setup_plan's (no engine); freed by cli_setup_open */
    struct jev_engine *engine;   /* cli_setup_open */
    struct jev_decider *decider; /* cli_setup_open(with_decider) */
};

/* What cli_setup_arg did with an argument a and the word after it, v (NULL at the end). */
enum {
    CLI_ARG_MISSING = -2, /* a is a set-up option that needs a value and v is NULL */
    CLI_ARG_BAD = -1,     /* v is not a valid value for a */
    CLI_ARG_NOT_MINE = 0, /* a is not a set-up option */
    CLI_ARG_FLAG = 1,     /* a was a flag: one word used */
    CLI_ARG_VALUE = 2,    /* a took v: two words used */
};

/* No options, the engine's and the decider's defaults, nothing opened; cmd names the command. */
void cli_setup_init(struct cli_setup *s, const char *cmd);

/* Takes --model DIR, --threads N (0..1024), --backend B, --precision exact|fast (into ep.precision),
 * --step-tokens N (16..65536, into ep.prefill_chunk: the engine's forward slice; 0 there = the
 * backend's), -v / --verbose; see the enum above. */
int cli_setup_arg(struct cli_setup *s, const char *a, const char *v);

/* Loads the model of s->dir with s->threads, s->backend and s->no_vision. */
enum jev_status cli_setup_load(struct cli_setup *s, struct jev_error *err);

/* Sizes s->ep for request r with params p (jev_decide_plan on a planner decider made on first use,
 * before any engine): the first plan sets max_batch to the sequences it needs (not the library's
 * default: every sequence slot is device memory on CUDA), later plans grow it; max_tokens only
 * grows from the default. */
enum jev_status cli_setup_plan(struct cli_setup *s, const struct jev_request *r, const struct jev_decide_params *p,
                               struct jev_error *err);

/* Opens the command's one engine with s->ep (the planner goes first) and, when with_decider, the
 * decider over it with s->dp. A second call is an error: one engine per command. */
enum jev_status cli_setup_open(struct cli_setup *s, bool with_decider, struct jev_error *err);

/* Frees the decider, the engine, the planner and the model (what was opened), in that order. */
void cli_setup_free(struct cli_setup *s);

#endif
