/*
 * registry.c - the table of backends (registry.h), the name parser, and the
 * names of the precision modes the backends run (jev_precision_name / _parse).
 *
 * The table lists every backend the source tree has, built or not, so that
 * a name this build left out gets the build flag that adds it, and a
 * malformed name the list of names. This file and the CUDA backend are the
 * only places that know JEV_HAVE_CUDA.
 */
#include "backend/registry.h" // defines: struct jev_backend_reg

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct known {
    const char *name;                  /* as in --backend */
    const char *what;                  /* for messages: "CUDA" */
    bool devices;                      /* takes ":N" */
    const char *flag;                  /* the build flag that adds it; NULL = always built */
    const struct jev_backend_reg *reg; /* NULL when this build left it out */
};

static const struct known backends[] = {
    {"cpu", "CPU", false, NULL, &jev_backend_reg_cpu},
#ifdef JEV_HAVE_CUDA
    {"cuda", "CUDA", true, "make CUDA=1", &jev_backend_reg_cuda},
#else
    {"cuda", "CUDA", true, "make CUDA=1", NULL},
#endif
};

#define N_KNOWN ((int32_t)(sizeof backends / sizeof backends[0]))

int32_t jev_backend_count(void) {
    int32_t n = 0;
    for (int32_t i = 0; i < N_KNOWN; i++)
        n += backends[i].reg != NULL;
    return n;
}

const struct jev_backend_reg *jev_backend_at(int32_t i) {
    for (int32_t k = 0; k < N_KNOWN && i >= 0; k++)
        if (backends[k].reg && i-- == 0)
            return backends[k].reg;
    return NULL;
}

const struct jev_backend_reg *jev_backend_find(const char *name) {
    for (int32_t k = 0; name && k < N_KNOWN; k++)
        if (!strcmp(name, backends[k].name))
            return backends[k].reg;
    return NULL;
}

/* "cpu, cuda or cuda:N" from the table, for the message of a name that is none of them. */
static void expected(char *out, size_t size) {
    size_t at = 0;
    out[0] = '\0';
    for (int32_t k = 0; k < N_KNOWN && at < size; k++) {
        const char *sep = k == 0 ? "" : k == N_KNOWN - 1 && !backends[k].devices ? " or " : ", ";
        at += (size_t)snprintf(out + at, size - at, "%s%s", sep, backends[k].name);
        if (backends[k].devices && at < size)
            at += (size_t)snprintf(out + at, size - at, "%s%s:N", k == N_KNOWN - 1 ? " or " : ", ", backends[k].name);
    }
}

/*
 * The grammar first, then whether this build has it: "cuda:x" is a malformed name in any build,
 * "cuda" in a CPU build a valid name this build cannot run.
 */
enum jev_status jev_backend_parse(const char *spec, const struct jev_backend_reg **reg, int32_t *device,
                                  struct jev_error *err) {
    *reg = NULL;
    *device = 0;
    const char *name = spec ? spec : "cpu";
    const struct known *k = NULL;
    size_t len = 0;
    for (int32_t i = 0; i < N_KNOWN && !k; i++) {
        len = strlen(backends[i].name);
        if (!strncmp(name, backends[i].name, len) && (name[len] == '\0' || (name[len] == ':' && backends[i].devices)))
            k = &backends[i];
    }
    if (!k) {
        char names[128];
        expected(names, sizeof names);
        return jev_fail(err, JEV_ERR_INVALID_ARG, "backend \"%s\": expected %s", name, names);
    }
    if (name[len] == ':') {
        const char *d = name + len + 1;
        char *end = NULL;
        long v = strtol(d, &end, 10);
        if (d[0] < '0' || d[0] > '9' || *end != '\0' || v < 0 || v > 255) /* digits only: no sign, no space */
            return jev_fail(err, JEV_ERR_INVALID_ARG, "backend \"%s\": the device is a number 0..255", name);
        *device = (int32_t)v;
    }
    if (!k->reg) {
        *device = 0;
        return jev_fail(err, JEV_ERR_UNSUPPORTED, "backend \"%s\": this build has no %s backend (build with %s)", name,
                        k->what, k->flag);
    }
    *reg = k->reg;
    return JEV_OK;
}

void jev_backend_describe(const struct jev_backend_reg *reg, struct jev_backend *be, struct jev_backend_info *info) {
    memset(info, 0, sizeof *info);
    info->memory_bytes = -1;
    if (reg && reg->describe && be)
        reg->describe(be, info);
}

void jev_backend_summary(char *out, size_t size) {
    size_t at = 0;
    out[0] = '\0';
    for (int32_t k = 0; k < N_KNOWN && at < size; k++)
        if (backends[k].reg)
            at += (size_t)snprintf(out + at, size - at, "%s%s", at ? ", " : "", backends[k].name);
    for (int32_t k = 0; k < N_KNOWN && at < size; k++)
        if (!backends[k].reg)
            at += (size_t)snprintf(out + at, size - at, "; %s adds %s", backends[k].flag, backends[k].name);
}

/* The names of include/jev.h's enum jev_precision live here, beside the backends that run them. */
const char *jev_precision_name(enum jev_precision p) {
    switch (p) {
    case JEV_PRECISION_EXACT: return "exact";
    case JEV_PRECISION_FAST: return "fast";
    }
    return "unknown";
}

enum jev_status jev_precision_parse(const char *name, enum jev_precision *out, struct jev_error *err) {
    *out = JEV_PRECISION_EXACT;
    if (!name || !strcmp(name, "exact"))
        return JEV_OK;
    if (!strcmp(name, "fast")) {
        *out = JEV_PRECISION_FAST;
        return JEV_OK;
    }
    return jev_fail(err, JEV_ERR_INVALID_ARG, "precision \"%.40s\": expected exact or fast", name);
}
