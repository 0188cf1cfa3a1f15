/*
 * cpu-flags.h - the CPU's feature flags as Linux lists them (/proc/cpuinfo), for the tests whose
 * expectation depends on the CPU: fast mode runs on the CPU backend where it has AVX512-BF16
 * and is refused elsewhere (src/backend/cpu/cpu-matmul-bf16.c). Read independently of the
 * backend's own detection (cpuid), so that each checks the other (tests/test-cpu-fast.c).
 * Header-only; no cmocka needed. Not for other operating systems (no /proc/cpuinfo: no flags).
 */
#ifndef JEV_TESTS_CPU_FLAGS_H
#define JEV_TESTS_CPU_FLAGS_H

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Whether the first "flags" line of /proc/cpuinfo lists flag (a whole, space-delimited word). */
static inline bool cpu_flag(const char *flag) {
    static char line[16384];
    FILE *f = fopen("/proc/cpuinfo", "r");
    bool found = false, has = false;
    while (f && !found && fgets(line, sizeof line, f))
        found = !strncmp(line, "flags", 5);
    if (f)
        fclose(f);
    size_t n = strlen(flag);
    for (const char *p = found ? strstr(line, flag) : NULL; p && !has; p = strstr(p + 1, flag))
        has = (p[-1] == ' ' || p[-1] == '\t') && (p[n] == ' ' || p[n] == '\n' || p[n] == '\0');
    return has;
}

/* The CPU backend's fast mode can run here: AVX512-BF16 with AVX-512 F, BW, VL and DQ. */
static inline bool cpu_fast_mode(void) {
    return cpu_flag("avx512_bf16") && cpu_flag("avx512f") && cpu_flag("avx512bw") && cpu_flag("avx512vl") &&
           cpu_flag("avx512dq");
}

#endif
