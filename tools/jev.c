/*
 * jev.c - the command-line front end: dispatches to tools/cmd-*.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/registry.h" // defines: jev_backend_summary
#include "commands.h"         // defines: cmd_*
#include "jev.h"              // defines: jev_version

struct command {
    const char *name; /* subcommand */
    int (*fn)(int argc, char **argv);
    const char *help; /* one line */
};

static const struct command commands[] = {
    {"decide", cmd_decide, "answer typed questions about an image and a context"},
    {"run", cmd_run, "run a prompt through the language model: top tokens and speed"},
    {"synth", cmd_synth, "write a synthetic model directory (seeded random weights)"},
    {"info", cmd_info, "print a model directory's config and tensors"},
    {"tokenize", cmd_tokenize, "print the token ids and pieces of a text"},
    {"verify", cmd_verify, "check multi-token candidate scoring against full-vocabulary forwards"},
    {"bench", cmd_bench, "run the benchmark of the three decision paths"},
    {"report", cmd_report, "render a benchmark's raw JSON as Markdown + SVG"},
    {"download", cmd_download, "fetch a model repository from the Hugging Face hub"},
    {"serve", cmd_serve, "serve /v1/systemone and /v1/decisions over HTTP"},
};

/* OpenBLAS (Debian 12 ships 0.3.21, DYNAMIC_ARCH) picks its kernels from CPUID when it is
 * loaded, and on CPUs it does not know it falls back to "Prescott" (SSE3): on the GPU
 * machine's Xeon VM that made every sgemm 5-10x slower. OPENBLAS_CORETYPE is only read at
 * load time, so when it is unset, the CPU has AVX2 + FMA and OpenBLAS chose a pre-AVX2
 * kernel set, the CLI sets it (Haswell, or SkylakeX with AVX-512) and re-executes itself
 * once. The library itself never does this; embedders set the variable themselves.
 * x86 only: elsewhere (aarch64) there is no such fallback to mend, nor __builtin_cpu_supports. */
#if defined(__x86_64__) || defined(__i386__)
char *openblas_get_corename(void);

static void openblas_core_fixup(char **argv) {
    static const char *weak[] = {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom", "Sandybridge"};
    if (getenv("OPENBLAS_CORETYPE") || !__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
        return;
    const char *core = openblas_get_corename();
    int is_weak = 0;
    for (size_t i = 0; core && i < sizeof weak / sizeof weak[0]; i++)
        is_weak |= strcmp(core, weak[i]) == 0;
    if (!is_weak)
        return;
    int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                 __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    setenv("OPENBLAS_CORETYPE", avx512 ? "SkylakeX" : "Haswell", 1);
    execv("/proc/self/exe", argv); /* returns only on failure: carry on with the slow kernels */
}
#else
static void openblas_core_fixup(char **argv) { (void)argv; }
#endif

static void usage(FILE *f) {
    fprintf(f, "jev %s - typed decisions with a local vision-language model\n\nusage: jev COMMAND [options]\n\n",
            jev_version());
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\n`jev COMMAND --help` describes a command's options.\n");
}

int main(int argc, char **argv) {
    openblas_core_fixup(argv);
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        char backends[256];
        jev_backend_summary(backends, sizeof backends); /* "cpu, cuda" or "cpu; make CUDA=1 adds cuda" */
        printf("jev %s (backends: %s)\n", jev_version(), backends);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "jev: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
