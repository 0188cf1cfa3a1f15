/*
 * cmd-decide.c - `jev decide`: one decision request through the model, by
 * one path, printed as a table (default) or as the System One / OpenAI
 * response body (--json).
 *
 * Input: a request body (--request, System One by default, --openai for the
 * OpenAI shape) or the benchmark workload (--workload F --decisions N).
 * --image F attaches an image file to a request that has none. --dump-ids F
 * writes the inputs the scoring paths build (token ids, pixel values, label
 * and candidate ids) for scripts/reference/decision_goldens.py and peers.
 *
 * The engine is sized for the request before it is built (common/cli-setup.h:
 * the model's tokenizer plans, then one engine of the planned size, at least
 * the defaults).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/read-file.h"   // defines: jev_read_file
#include "common/cli-args.h"  // defines: cli_parse_long
#include "common/cli-setup.h" // defines: struct cli_setup, cli_setup_plan, cli_setup_open
#include "commands.h"         // defines: cmd_decide
#include "decide/pipeline.h"  // defines: jev_decide_run, struct jev_decider
#include "decide/qtype.h"     // defines: jev_qtype_get
#include "wire/response.h"    // defines: jev_response_*
#include "wire/route.h"       // defines: jev_decide_body
#include "wire/request.h"     // defines: jev_request_parse_*, struct jev_request_error

static void usage(FILE *f) {
    fprintf(f, "usage: jev decide --model DIR (--request R.json | --workload F --decisions N) [options]\n\n"
               "  --model DIR          a model directory (HF bf16 or MLX 4-bit layout)\n"
               "  --request FILE       a System One request body (POST /v1/systemone)\n"
               "  --openai             the request is the OpenAI shape (POST /v1/decisions)\n"
               "  --workload FILE      the benchmark workload (bench/dog-workload.json) ...\n"
               "  --decisions N        ... with N decisions (decision i asks question i mod 8, id q%%02d)\n"
               "  --image FILE         attach an image (JPEG or PNG) to a request without one\n"
               "  --path P             shared (default), independent or generate\n"
               "  --scoring S          label (default: stable one-token labels) or text (complete option texts)\n"
               "  --norm N             text scoring: sum (default) or mean of the token log-probabilities\n"
               "  --batch N|all        shared path: suffixes per forward (default 4)\n"
               "  --step-tokens N      tokens per forward slice, the engine's (default: the backend's, 512 on the\n"
               "                       CPU, 1024 on CUDA)\n"
               "  --image-max-side N   resize within N x N before smart_resize (default 768; 0 = no bound)\n"
               "  --max-new-tokens N   generate: new-token budget (default max(128, 24 x questions))\n"
               "  --threads N          worker threads (default: all cores)\n"
               "  --backend B          cpu (default), cuda or cuda:N (a CUDA build: make CUDA=1)\n"
               "  --precision M        exact (default: f32 math) or fast (bf16 products: CUDA, AVX512-BF16 CPUs)\n"
               "  -v                   the engine's sizes, and the engines the command made, on stderr\n"
               "  --json               print the response body instead of the table\n"
               "  --dump-ids FILE      write the scoring inputs (ids, pixels, labels, candidates) as JSON\n");
}

/* The table: one line per question with its winner, confidence and every option's probability. */
static void print_table(const struct jev_request *r, const struct jev_decide_result *res,
                        const struct jev_decide_params *p) {
    if (res->generated) {
        printf("generated output (%s): %s\n", res->valid ? "valid" : "INVALID", res->gen.raw ? res->gen.raw : "");
        if (!res->valid)
            printf("reason: %s\n", res->gen.reason);
    }
    if (res->answers.n > 0 && (res->valid || !res->generated)) {
        printf("%-16s %-7s %-16s %8s  probabilities\n", "question", "type", "answer", "conf");
        for (int32_t i = 0; i < r->n_questions; i++) {
            const struct jev_question *q = &r->questions[i];
            const struct jev_answer *a = &res->answers.items[i];
            char ans[64];
            jev_qtype_get(q->type)->summary(q, a, ans, sizeof ans); /* the winner, or a score's expected level */
            printf("%-16.16s %-7s %-16s %8.4f ", q->id, jev_qtype_name(q->type), ans, a->confidence);
            for (int32_t k = 0; k < a->n; k++)
                printf(" %s=%.6f", q->options[k].key, a->probs[k]);
            printf("\n");
        }
    }
    const struct jev_decide_stats *s = &res->stats;
    printf("\n%s path, %s scoring%s: %d questions, total %.1f ms (image %.1f, vision %.1f, prefill %.1f, "
           "scoring %.1f)\n",
           jev_decide_path_name(p->path), jev_decide_scoring_name(p->scoring),
           p->scoring == JEV_SCORING_TEXT ? (p->norm == JEV_TRIE_MEAN ? " (mean)" : " (sum)") : "", r->n_questions,
           s->total_ms, s->image_ms, s->vision_ms, s->prefill_ms, s->scoring_ms);
    printf("LM forwards %lld, vision forwards %lld, LM tokens %lld, prefix %d tokens (%d image), forks %d, "
           "peak %.1f MiB engine memory, %d sequences\n",
           (long long)s->lm_forwards, (long long)s->vision_forwards, (long long)s->lm_tokens, s->prefix_tokens,
           s->image_tokens, s->forks, (double)s->peak_bytes / 1048576.0, s->peak_seqs);
}

int cmd_decide(int argc, char **argv) {
    const char *req_path = NULL, *workload = NULL, *image = NULL, *dump = NULL;
    bool json = false, openai = false;
    long decisions = 0, max_side = 768, max_new = 0;
    struct jev_decide_params p = jev_decide_default_params();
    struct cli_setup cs;
    cli_setup_init(&cs, "decide");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long n = 0;
        int bad = 0, takes = 1, got = 0;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if ((got = cli_setup_arg(&cs, a, v)) != CLI_ARG_NOT_MINE) {
            bad = got == CLI_ARG_MISSING ? 2 : got == CLI_ARG_BAD ? 1 : 0;
            takes = got == CLI_ARG_VALUE ? 1 : 0;
        } else if (!strcmp(a, "--json")) {
            json = true, takes = 0;
        } else if (!strcmp(a, "--openai")) {
            openai = true, takes = 0;
        } else if (!v) {
            bad = 2;
        } else if (!strcmp(a, "--request")) {
            req_path = v;
        } else if (!strcmp(a, "--workload")) {
            workload = v;
        } else if (!strcmp(a, "--decisions")) {
            bad = cli_parse_long(v, 1, JEV_DECIDE_MAX_QUESTIONS, &decisions);
        } else if (!strcmp(a, "--image")) {
            image = v;
        } else if (!strcmp(a, "--dump-ids")) {
            dump = v;
        } else if (!strcmp(a, "--path")) {
            if (!strcmp(v, "shared"))
                p.path = JEV_DECIDE_SHARED;
            else if (!strcmp(v, "independent"))
                p.path = JEV_DECIDE_INDEPENDENT;
            else if (!strcmp(v, "generate") || !strcmp(v, "generate_json"))
                p.path = JEV_DECIDE_GENERATE;
            else
                bad = 1;
        } else if (!strcmp(a, "--scoring")) {
            if (!strcmp(v, "label"))
                p.scoring = JEV_SCORING_LABEL;
            else if (!strcmp(v, "text"))
                p.scoring = JEV_SCORING_TEXT;
            else
                bad = 1;
        } else if (!strcmp(a, "--norm")) {
            if (!strcmp(v, "sum"))
                p.norm = JEV_TRIE_SUM;
            else if (!strcmp(v, "mean"))
                p.norm = JEV_TRIE_MEAN;
            else
                bad = 1;
        } else if (!strcmp(a, "--batch")) {
            if (!strcmp(v, "all"))
                p.batch = 0;
            else if (!(bad = cli_parse_long(v, 1, JEV_DECIDE_MAX_QUESTIONS, &n)))
                p.batch = (int32_t)n;
        } else if (!strcmp(a, "--image-max-side")) {
            bad = cli_parse_long(v, 0, 16384, &max_side);
        } else if (!strcmp(a, "--max-new-tokens")) {
            bad = cli_parse_long(v, 1, 1 << 20, &max_new);
        } else {
            bad = 2;
        }
        if (bad) {
            if (bad == 2)
                fprintf(stderr, "jev decide: unknown or incomplete option '%s'\n\n", a);
            else
                fprintf(stderr, "jev decide: bad value '%s' for %s\n\n", v, a);
            usage(stderr);
            return 2;
        }
        i += takes;
    }
    if (!cs.dir || (!req_path == !workload) || (workload && decisions <= 0)) {
        fprintf(stderr, "jev decide: --model and one of --request or --workload (with --decisions) are required\n\n");
        usage(stderr);
        return 2;
    }
    p.max_new_tokens = (int32_t)max_new;

    /* the request */
    struct jev_request r;
    struct jev_request_error rerr = {0};
    enum jev_status s;
    if (workload) {
        s = jev_request_load_workload_file(workload, (int32_t)decisions, &r, &rerr);
    } else {
        size_t len = 0;
        char *body = NULL;
        struct jev_error rd = {0};
        if (jev_read_file(req_path, JEV_DECIDE_MAX_BODY_BYTES, &body, &len, &rd) != JEV_OK) {
            fprintf(stderr, "jev decide: cannot read the request: %s\n", rd.msg);
            return 1;
        }
        s = openai ? jev_request_parse_openai(body, len, NULL, &r, &rerr)
                   : jev_request_parse_systemone(body, len, NULL, &r, &rerr);
        free(body);
    }
    if (s != JEV_OK) {
        fprintf(stderr, "jev decide: %s: refused (%d %s): %s\n", workload ? workload : req_path, rerr.http_status,
                rerr.type ? rerr.type : "", rerr.message);
        return 1;
    }
    if (image && jev_request_set_image_path(&r, image, &rerr) != JEV_OK) {
        fprintf(stderr, "jev decide: --image: %s\n", rerr.message);
        jev_request_free(&r);
        return 2;
    }

    /* the model, the plan (its tokenizer), then the one engine of the planned size and its decider */
    struct jev_error err = {0};
    int rc = 1;
    cs.dp.image_max_side = max_side == 0 ? -1 : (int32_t)max_side;
    if (cli_setup_load(&cs, &err) != JEV_OK || cli_setup_plan(&cs, &r, &p, &err) != JEV_OK ||
        cli_setup_open(&cs, true, &err) != JEV_OK) {
        fprintf(stderr, "jev decide: %s\n", err.msg);
        goto done;
    }
    struct jev_decider *d = cs.decider;
    if (dump) {
        json_t *o = NULL;
        if (jev_decide_dump(d, &r, &p, &o, &err) != JEV_OK) {
            fprintf(stderr, "jev decide: %s\n", err.msg);
            goto done;
        }
        int w = json_dump_file(o, dump, JSON_COMPACT);
        json_decref(o);
        if (w != 0) {
            fprintf(stderr, "jev decide: %s: cannot write\n", dump);
            goto done;
        }
        fprintf(stderr, "jev decide: wrote the inputs to %s\n", dump);
    }
    struct jev_decide_result res;
    if (jev_decide_run(d, &r, &p, &res, &err) != JEV_OK) {
        fprintf(stderr, "jev decide: %s\n", err.msg);
        goto done;
    }
    if (json) {
        char *body = NULL;
        if (res.generated && !res.valid) {
            char msg[1024];
            snprintf(msg, sizeof msg, "generate_json: the output does not meet the schema: %.400s", res.gen.reason);
            body = jev_response_error(500, "server_error", msg);
            fprintf(stderr, "jev decide: raw output: %s\n", res.gen.raw ? res.gen.raw : "");
        } else {
            const char *name = strrchr(cs.dir, '/') ? strrchr(cs.dir, '/') + 1 : cs.dir;
            body = openai ? jev_response_openai(&r, &res.answers, name, &res.usage)
                          : jev_response_systemone(&r, &res.answers, name, &res.usage);
        }
        if (body)
            printf("%s\n", body);
        free(body);
        rc = res.generated && !res.valid ? 1 : 0;
    } else {
        print_table(&r, &res, &p);
        rc = 0;
    }
    jev_decide_result_free(&res);
done:
    cli_setup_free(&cs);
    jev_request_free(&r);
    return rc;
}
