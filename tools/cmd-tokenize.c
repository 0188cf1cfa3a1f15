/*
 * cmd-tokenize.c - `jev tokenize`: prints the token ids and pieces of a text,
 * or (--bench) measures the tokenizer's encode speed and load time.
 *
 *   jev tokenize [--tokenizer FILE | --model DIR] [--json] [--no-special] TEXT
 *   jev tokenize [...] --file F
 *   jev tokenize [--tokenizer FILE | --model DIR] --bench [--seconds S]
 *
 * The tokenizer defaults to $JEV_TOKENIZER, else the stand-in
 * .cache/tokenizer-qwen3/tokenizer.json under the current directory.
 * --no-special encodes the text as user text (added tokens not matched).
 * The benchmark texts are generated here (seeded shuffles of an English and a
 * Chinese paragraph, about 1 MB each), so runs compare across machines.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/pool.h"      // defines: jev_pool_*, jev_cpu_count
#include "base/read-file.h" // defines: jev_read_file
#include "base/timing.h"    // defines: jev_now_ms
#include "commands.h"       // defines: cmd_tokenize
#include "decide/request.h" // defines: JEV_DECIDE_MAX_BODY_BYTES
#include "text/tokenizer.h" // defines: jev_tokenizer_*

/* ---- output ---- */

/* Writes s[0..n) as a JSON string body (UTF-8 kept, controls escaped). */
static void put_json_string(FILE *f, const char *s, size_t n) {
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c == '\t')
            fputs("\\t", f);
        else if (c == '\r')
            fputs("\\r", f);
        else if (c < 0x20 || c == 0x7f)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static int print_tokens(const struct jev_tokenizer *tok, const struct jev_tokens *ids, bool json) {
    struct jev_error err = {0};
    char *text;
    size_t text_len;
    if (jev_tokenizer_decode(tok, ids->ids, ids->n, 0, &text, &text_len, &err) != JEV_OK) {
        fprintf(stderr, "jev tokenize: %s\n", err.msg);
        return 1;
    }
    if (json) {
        printf("{\"n\": %zu, \"ids\": [", ids->n);
        for (size_t i = 0; i < ids->n; i++)
            printf("%s%d", i ? ", " : "", (int)ids->ids[i]);
        printf("], \"pieces\": [");
        for (size_t i = 0; i < ids->n; i++) {
            size_t len = 0;
            const char *p = jev_tokenizer_piece(tok, ids->ids[i], &len);
            if (i)
                printf(", ");
            put_json_string(stdout, p, len);
        }
        printf("], \"decoded\": ");
        put_json_string(stdout, text, text_len);
        printf("}\n");
    } else {
        for (size_t i = 0; i < ids->n; i++) {
            size_t len = 0, blen = 0;
            const char *p = jev_tokenizer_piece(tok, ids->ids[i], &len);
            const char *b = jev_tokenizer_piece_bytes(tok, ids->ids[i], &blen);
            printf("%8d  ", (int)ids->ids[i]);
            put_json_string(stdout, p, len);
            printf("  ");
            put_json_string(stdout, b, blen);
            printf("%s\n", jev_tokenizer_is_special(tok, ids->ids[i]) ? "  (special)" : "");
        }
        printf("%zu tokens\n", ids->n);
    }
    free(text);
    return 0;
}

/* ---- benchmark ---- */

static const char bench_en[] =
    "The quick brown fox jumps over the lazy dog while the committee reviews its budget for 2025. "
    "Engineers measured throughput, latency and memory on every machine, then wrote a short report. "
    "\"It's not what we expected,\" she said; they'd rerun the tests at 09:30 on Monday (UTC+2). "
    "Tokenizers split text into words, numbers, punctuation and whitespace before merging byte pairs. "
    "for (int i = 0; i < n; i++) { total += values[i] * weights[i]; }\n"
    "Visit https://example.org/docs?id=42&lang=en for details, or email support@example.org.\n";

static const char bench_zh[] = "自然语言处理是人工智能的一个重要分支，它研究如何让计算机理解和生成人类语言。"
                               "今天天气很好，我们去公园散步，看到很多人在跑步、下棋和放风筝。"
                               "模型在二零二五年发布后，研究人员测量了它在不同机器上的速度和内存占用。"
                               "分词器先把文本切成词、数字和标点，再按照合并规则组合字节对。"
                               "这本书讲述了一个关于友谊、勇气和成长的故事，深受读者喜爱。\n";

/* A ~size-byte text of the sentences of base (split after '.', '。' or
 * newline), concatenated in a seeded random order. */
static char *bench_text(const char *base, size_t size, uint64_t seed, size_t *out_len) {
    const char *starts[64];
    size_t lens[64], n = 0, blen = strlen(base);
    size_t i = 0;
    while (i < blen && n < 64) {
        size_t j = i;
        while (j < blen && base[j] != '.' && base[j] != '\n' && strncmp(base + j, "。", 3) != 0)
            j++;
        j += j < blen ? (base[j] == '.' || base[j] == '\n' ? 1 : 3) : 0;
        starts[n] = base + i;
        lens[n++] = j - i;
        i = j;
    }
    char *t = malloc(size + 256);
    if (t == NULL)
        return NULL;
    size_t m = 0;
    while (m < size) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        size_t k = (size_t)(seed >> 33) % n;
        memcpy(t + m, starts[k], lens[k]);
        m += lens[k];
    }
    *out_len = m;
    return t;
}

struct bench_job {
    const struct jev_tokenizer *tok; /* shared tokenizer */
    const char *text;                /* whole text */
    size_t len;                      /* its bytes */
    size_t n_chunks;                 /* it is encoded as this many chunks */
    size_t ids;                      /* ids produced (written by thread 0's chunks too) */
    int failed;                      /* any encode failed */
};

static void bench_chunk(void *arg, int64_t i, int thread) {
    (void)thread;
    struct bench_job *job = arg;
    size_t a = job->len * (size_t)i / job->n_chunks, b = job->len * (size_t)(i + 1) / job->n_chunks;
    /* cut at a newline so chunks do not split characters */
    while (a > 0 && a < job->len && job->text[a - 1] != '\n')
        a++;
    while (b < job->len && job->text[b - 1] != '\n')
        b++;
    if (b <= a)
        return;
    struct jev_tokens ids = {0};
    struct jev_error err = {0};
    if (jev_tokenizer_encode(job->tok, job->text + a, b - a, JEV_TOK_NO_ADDED, &ids, &err) != JEV_OK)
        __atomic_store_n(&job->failed, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&job->ids, ids.n, __ATOMIC_RELAXED);
    jev_tokens_free(&ids);
}

/* Encodes text once per repetition on 1 thread and on all cores; prints MB/s. */
static int bench_encode(const struct jev_tokenizer *tok, const char *name, const char *text, size_t len, double seconds,
                        struct jev_pool *pool) {
    struct bench_job job = {.tok = tok, .text = text, .len = len, .n_chunks = 1};
    double best1 = 1e30, t_start = jev_now_ms();
    int reps = 0;
    while (reps < 3 || (jev_now_ms() - t_start) < seconds * 1e3 * 0.5) {
        job.ids = 0;
        double t0 = jev_now_ms();
        bench_chunk(&job, 0, 0);
        double dt = jev_now_ms() - t0;
        best1 = dt < best1 ? dt : best1;
        reps++;
    }
    size_t ids1 = job.ids;
    int cores = jev_pool_size(pool);
    job.n_chunks = (size_t)cores * 8;
    double bestn = 1e30;
    t_start = jev_now_ms();
    int repn = 0;
    while (repn < 3 || (jev_now_ms() - t_start) < seconds * 1e3 * 0.5) {
        job.ids = 0;
        double t0 = jev_now_ms();
        jev_pool_run(pool, (int64_t)job.n_chunks, bench_chunk, &job);
        double dt = jev_now_ms() - t0;
        bestn = dt < bestn ? dt : bestn;
        repn++;
    }
    if (job.failed) {
        fprintf(stderr, "jev tokenize: encode failed during the benchmark\n");
        return 1;
    }
    double mb = (double)len / 1e6;
    printf("| encode %-7s | %8.2f MB | %9zu ids | %6.2f bytes/id | 1 thread %7.2f MB/s | %2d threads %7.2f MB/s "
           "(%6.2f MB/s per core) |\n",
           name, mb, ids1, (double)len / (double)(ids1 ? ids1 : 1), mb / (best1 / 1e3), cores, mb / (bestn / 1e3),
           mb / (bestn / 1e3) / cores);
    return 0;
}

static int run_bench(const char *path, double seconds) {
    struct jev_error err = {0};
    double best = 1e30;
    struct jev_tokenizer *tok = NULL;
    for (int r = 0; r < 3; r++) {
        double t0 = jev_now_ms();
        if (jev_tokenizer_load(path, &tok, &err) != JEV_OK) {
            fprintf(stderr, "jev tokenize: %s\n", err.msg);
            return 1;
        }
        double dt = jev_now_ms() - t0;
        best = dt < best ? dt : best;
        if (r < 2)
            jev_tokenizer_free(tok);
    }
    printf("| load    | %s | %d ids | best of 3: %.1f ms |\n", path, (int)jev_tokenizer_vocab_size(tok), best);
    struct jev_pool *pool = NULL;
    if (jev_pool_init(&pool, 0, &err) != JEV_OK) {
        fprintf(stderr, "jev tokenize: %s\n", err.msg);
        jev_tokenizer_free(tok);
        return 1;
    }
    size_t len_en = 0, len_zh = 0;
    char *en = bench_text(bench_en, 1 << 20, 1, &len_en), *zh = bench_text(bench_zh, 1 << 20, 2, &len_zh);
    int rc = 1;
    if (en != NULL && zh != NULL)
        rc = bench_encode(tok, "English", en, len_en, seconds, pool) |
             bench_encode(tok, "Chinese", zh, len_zh, seconds, pool);
    free(en);
    free(zh);
    jev_pool_free(pool);
    jev_tokenizer_free(tok);
    return rc;
}

/* ---- main ---- */

static void usage(FILE *f) {
    fprintf(f, "usage: jev tokenize [--tokenizer FILE | --model DIR] [--json] [--no-special] TEXT | --file F\n"
               "       jev tokenize [--tokenizer FILE | --model DIR] --bench [--seconds S]\n"
               "  --tokenizer FILE  tokenizer.json (default $JEV_TOKENIZER or .cache/tokenizer-qwen3/tokenizer.json)\n"
               "  --model DIR       use DIR/tokenizer.json\n"
               "  --file F          tokenize the bytes of file F\n"
               "  --json            one JSON object: ids, pieces, decoded text\n"
               "  --no-special      user-text mode: added tokens are not matched\n"
               "  --bench           encode MB/s (English, Chinese) and load time\n");
}

/* The largest --file: the most text a request can carry (its whole body);
 * no decision ever tokenizes more. */
#define TOKENIZE_MAX_FILE JEV_DECIDE_MAX_BODY_BYTES

int cmd_tokenize(int argc, char **argv) {
    const char *tok_path = getenv("JEV_TOKENIZER"), *file = NULL, *text = NULL;
    char model_path[4096];
    bool json = false, no_special = false, bench = false;
    double seconds = 2.0;
    if (tok_path == NULL || !*tok_path)
        tok_path = ".cache/tokenizer-qwen3/tokenizer.json";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--tokenizer") && i + 1 < argc) {
            tok_path = argv[++i];
        } else if (!strcmp(a, "--model") && i + 1 < argc) {
            snprintf(model_path, sizeof model_path, "%s/tokenizer.json", argv[++i]);
            tok_path = model_path;
        } else if (!strcmp(a, "--file") && i + 1 < argc) {
            file = argv[++i];
        } else if (!strcmp(a, "--seconds") && i + 1 < argc) {
            seconds = atof(argv[++i]);
        } else if (!strcmp(a, "--json")) {
            json = true;
        } else if (!strcmp(a, "--no-special")) {
            no_special = true;
        } else if (!strcmp(a, "--bench")) {
            bench = true;
        } else if (a[0] == '-' && a[1] == '-') {
            fprintf(stderr, "jev tokenize: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        } else if (text == NULL) {
            text = a;
        } else {
            fprintf(stderr, "jev tokenize: one TEXT argument only (quote it)\n");
            return 2;
        }
    }
    if (bench)
        return run_bench(tok_path, seconds);
    if ((text == NULL) == (file == NULL)) {
        usage(stderr);
        return 2;
    }
    struct jev_error err = {0};
    struct jev_tokenizer *tok = NULL;
    if (jev_tokenizer_load(tok_path, &tok, &err) != JEV_OK) {
        fprintf(stderr, "jev tokenize: %s\n", err.msg);
        return 1;
    }
    size_t len = 0;
    char *owned = NULL;
    if (file != NULL) {
        if (jev_read_file(file, TOKENIZE_MAX_FILE, &owned, &len, &err) != JEV_OK) {
            fprintf(stderr, "jev tokenize: %s\n", err.msg);
            jev_tokenizer_free(tok);
            return 1;
        }
        text = owned;
    } else {
        len = strlen(text);
    }
    struct jev_tokens ids = {0};
    int rc = 0;
    if (jev_tokenizer_encode(tok, text, len, no_special ? JEV_TOK_NO_ADDED : 0, &ids, &err) != JEV_OK) {
        fprintf(stderr, "jev tokenize: %s\n", err.msg);
        rc = 1;
    } else {
        rc = print_tokens(tok, &ids, json);
    }
    jev_tokens_free(&ids);
    free(owned);
    jev_tokenizer_free(tok);
    return rc;
}
