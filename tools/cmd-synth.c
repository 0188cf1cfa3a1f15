/*
 * cmd-synth.c - `jev synth`: writes a synthetic model directory (the real
 * Qwen3.5 file layout, seeded random weights) with common/synth/synth.c, then
 * lists what it wrote with the sha256 of every safetensors file.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/error.h"         // defines: struct jev_error
#include "base/sha256.h"        // defines: jev_sha256_file
#include "commands.h"           // defines: cmd_synth
#include "common/synth/synth.h" // defines: jev_synth_write

static void usage(FILE *f) {
    fprintf(f, "usage: jev synth --config CONFIG.json --out DIR [options]\n"
               "\n"
               "Writes a complete model directory with seeded random weights in the real file layout.\n"
               "\n"
               "  --config FILE     a Qwen3.5 config.json (configs/tiny.json, configs/qwen3.5-0.8b.json)\n"
               "  --out DIR         the directory to create (written next to it, then renamed into place)\n"
               "  --seed N          weight seed (default 1)\n"
               "  --layout L        hf (official bf16 checkpoint, default) or mlx4 (mlx-vlm, affine-quantized)\n"
               "  --bits N          mlx4 code bits: 2, 3, 4, 5, 6, 8 (default 4)\n"
               "  --group N         mlx4 group size (default 64)\n"
               "  --shard-mb N      split the weights into shards of at most N MiB + model.safetensors.index.json\n"
               "  --tokenizer DIR   where tokenizer.json + tokenizer_config.json come from\n"
               "                    (default .cache/tokenizer-qwen3)\n"
               "  --assets DIR      where preprocessor_config.json + chat_template.jinja come from (default configs)\n"
               "  --force           replace DIR when it exists\n");
}

/* Parses a non-negative integer argument; false when it is not one. */
static bool parse_u64(const char *s, unsigned long long *out) {
    char *end = NULL;
    if (!s || !*s || *s == '-')
        return false;
    *out = strtoull(s, &end, 10);
    return *end == '\0';
}

static int compare_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Lists the directory's files with sizes, and the sha256 of each .safetensors. */
static void list_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d)
        return;
    char *names[256];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < 256)
        if (e->d_name[0] != '.')
            names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, compare_names);
    for (int i = 0; i < n; i++) {
        char path[4096];
        struct stat sb;
        int k = snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (k > 0 && (size_t)k < sizeof path && stat(path, &sb) == 0) {
            printf("  %-40s %12lld bytes", names[i], (long long)sb.st_size);
            size_t len = strlen(names[i]);
            char hex[JEV_SHA256_HEX];
            struct jev_error err = {0};
            if (len > 12 && strcmp(names[i] + len - 12, ".safetensors") == 0 &&
                jev_sha256_file(path, hex, &err) == JEV_OK)
                printf("  sha256 %s", hex);
            printf("\n");
        }
        free(names[i]);
    }
}

int cmd_synth(int argc, char **argv) {
    struct jev_synth_params p = jev_synth_default_params();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        unsigned long long x = 0;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--force")) {
            p.force = true;
            continue;
        } else if (!v) {
            fprintf(stderr, "jev synth: %s needs a value\n", a);
            return 2;
        } else if (!strcmp(a, "--config")) {
            p.config_path = v;
        } else if (!strcmp(a, "--out")) {
            p.out_dir = v;
        } else if (!strcmp(a, "--tokenizer")) {
            p.tokenizer_dir = v;
        } else if (!strcmp(a, "--assets")) {
            p.assets_dir = v;
        } else if (!strcmp(a, "--layout")) {
            if (!strcmp(v, "hf"))
                p.layout = JEV_SYNTH_HF;
            else if (!strcmp(v, "mlx4") || !strcmp(v, "mlx"))
                p.layout = JEV_SYNTH_MLX4;
            else {
                fprintf(stderr, "jev synth: --layout must be hf or mlx4, not '%s'\n", v);
                return 2;
            }
        } else if (!strcmp(a, "--seed") && parse_u64(v, &x)) {
            p.seed = x;
        } else if (!strcmp(a, "--bits") && parse_u64(v, &x) && x <= 64) {
            p.bits = (int32_t)x;
        } else if (!strcmp(a, "--group") && parse_u64(v, &x) && x <= 1 << 20) {
            p.group = (int32_t)x;
        } else if (!strcmp(a, "--shard-mb") && parse_u64(v, &x) && x > 0 && x < (1ull << 30)) {
            p.shard_bytes = (int64_t)x << 20;
        } else {
            fprintf(stderr, "jev synth: bad option or value: %s %s\n\n", a, v);
            usage(stderr);
            return 2;
        }
        i++;
    }
    if (!p.config_path || !p.out_dir) {
        usage(stderr);
        return 2;
    }
    struct jev_error err = {0};
    struct jev_synth_report r;
    if (jev_synth_write(&p, &r, &err) != JEV_OK) {
        fprintf(stderr, "jev synth: %s\n", err.msg);
        return 1;
    }
    printf("wrote %s: layout %s, seed %llu, %d tensors in %d file%s, %lld parameters, %.1f MiB of weights, %.1f s\n",
           p.out_dir, p.layout == JEV_SYNTH_MLX4 ? "mlx4" : "hf", (unsigned long long)p.seed, r.n_tensors, r.n_shards,
           r.n_shards > 1 ? "s" : "", (long long)r.n_params, (double)r.bytes / (1 << 20), r.seconds);
    list_dir(p.out_dir);
    printf("sha256 %s %s\n", r.n_shards > 1 ? "model.safetensors.index.json" : "model.safetensors", r.sha256);
    return 0;
}
