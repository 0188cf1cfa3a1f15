/*
 * schema-build.c - the builder of "jev-bench/2" records: what the benchmark
 * runner calls to start a record, add every sample and the agreement of each
 * decision count, and write the file atomically. Also the host probe that
 * fills the environment (CPU, machine, compiler, library versions, date).
 *
 * What it is not: the runner (it times nothing) or the validator (schema.c),
 * which jev_bench_record_write calls before anything reaches the disk, so a
 * record that is written always loads back.
 *
 * Constraints: the builder copies every string it is given (the caller's
 * buffers may be reused at once). Generated text may end inside a UTF-8
 * sequence when generation stops at a token limit; such bytes are stored as
 * U+FFFD so that the JSON stays valid and the rest of the output is kept.
 * Derived fields (requested and valid decisions/s) are computed here, once,
 * from total_ms and the valid flag.
 */
#include "common/bench/schema.h" // defines: struct jev_bench_record, jev_bench_record_*

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <cblas.h>          // defines: openblas_get_config
#include <jconfig.h>        // defines: LIBJPEG_TURBO_VERSION
#include <openssl/crypto.h> // defines: OpenSSL_version
#include <pcre2.h>          // defines: pcre2_config
#include <spng.h>           // defines: spng_version_string
#include <utf8proc.h>       // defines: utf8proc_iterate, utf8proc_version

#include "jev.h" // defines: jev_version

/* ---- record ---- */

struct jev_bench_record {
    json_t *root;                                                 /* the record being built */
    json_t *runs;                                                 /* borrowed: root.runs */
    json_t *agreement;                                            /* borrowed: root.agreement */
    int32_t counts[JEV_BENCH_MAX_COUNTS];                         /* settings.counts */
    int32_t n_counts;                                             /* entries of counts */
    char paths[JEV_BENCH_MAX_PATHS][JEV_BENCH_MAX_PATH_NAME + 1]; /* settings.paths */
    int32_t n_paths;                                              /* entries of paths */
    int32_t repeats;                                              /* settings.repeats */
};

/* ---- JSON values ---- */

/* A JSON string of s, NULL -> null; invalid UTF-8 bytes become U+FFFD. */
static json_t *jstr(const char *s) {
    if (s == NULL)
        return json_null();
    json_t *j = json_string(s);
    if (j != NULL)
        return j;
    size_t n = strlen(s);
    char *clean = malloc(n * 3 + 1); /* each bad byte grows to 3 */
    if (clean == NULL)
        return NULL;
    size_t o = 0;
    const utf8proc_uint8_t *p = (const utf8proc_uint8_t *)s;
    for (size_t i = 0; i < n;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t len = utf8proc_iterate(p + i, (utf8proc_ssize_t)(n - i), &cp);
        if (len <= 0) {
            memcpy(clean + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        } else {
            memcpy(clean + o, s + i, (size_t)len);
            o += (size_t)len;
            i += (size_t)len;
        }
    }
    clean[o] = '\0';
    j = json_string(clean);
    free(clean);
    return j;
}

/* Integers with JEV_BENCH_NONE (any negative) -> null. */
static json_t *jint(int64_t v) { return v < 0 ? json_null() : json_integer((json_int_t)v); }

/* Numbers with NAN (any non-finite) -> null. */
static json_t *jnum(double v) { return isfinite(v) ? json_real(v) : json_null(); }

/* Integers where 0 is meaningless too (pixels, cores, threads): <= 0 -> null. */
static json_t *jpos(int64_t v) { return v <= 0 ? json_null() : json_integer((json_int_t)v); }

/* A tri-state (1 / 0 / JEV_BENCH_NONE) as true / false / null. */
static json_t *jbool01(int32_t v) { return v < 0 ? json_null() : json_boolean(v != 0); }

/* Sets obj[key] = v (stealing v); false when v or the insertion failed. */
static bool put(json_t *obj, const char *key, json_t *v) { return v != NULL && json_object_set_new(obj, key, v) == 0; }

/* Appends v to arr (stealing v); false when v or the append failed. */
static bool push(json_t *arr, json_t *v) { return v != NULL && json_array_append_new(arr, v) == 0; }

/* ---- environment ---- */

/* The environment object. Sub-objects are built first and attached at the
 * end, so one failure path (NULL) frees everything; jansson's *_new
 * setters free their value even when they fail. */
static json_t *env_json(const struct jev_bench_env *e) {
    json_t *env = json_object();
    json_t *peer = e->peer_name ? json_object() : json_null();
    json_t *jev = json_object(), *model = json_object(), *weights = json_array(), *image = json_object();
    json_t *libs = json_object(), *cpu = json_object();
    json_t *gpu = e->gpu_name ? json_object() : json_null();
    bool ok = env && peer && jev && model && weights && image && libs && cpu && gpu;
    if (ok && e->peer_name)
        ok = put(peer, "name", jstr(e->peer_name)) && put(peer, "version", jstr(e->peer_version));
    ok = ok && put(jev, "version", jstr(e->jev_version)) && put(jev, "git_commit", jstr(e->git_commit));
    for (int32_t i = 0; ok && i < e->n_weights; i++) {
        json_t *w = json_object();
        ok = w && put(w, "file", jstr(e->weights[i].file)) && put(w, "bytes", jint(e->weights[i].bytes)) &&
             put(w, "sha256", jstr(e->weights[i].sha256));
        ok = push(weights, w) && ok;
    }
    ok = ok && put(model, "id", jstr(e->model_id)) && put(model, "dir", jstr(e->model_dir)) &&
         put(model, "synthetic", jbool01(e->model_synthetic));
    ok = ok && put(image, "path", jstr(e->image_path)) && put(image, "sha256", jstr(e->image_sha256)) &&
         put(image, "width", jpos(e->image_width)) && put(image, "height", jpos(e->image_height)) &&
         put(image, "resized_width", jpos(e->resized_width)) && put(image, "resized_height", jpos(e->resized_height));
    for (int32_t i = 0; ok && i < e->n_libraries; i++)
        ok = put(libs, e->library_names[i], jstr(e->library_versions[i]));
    ok = ok && put(cpu, "model", jstr(e->cpu_model)) && put(cpu, "cores", jpos(e->cpu_cores)) &&
         put(cpu, "threads", jpos(e->threads));
    if (ok && e->gpu_name)
        ok = put(gpu, "name", jstr(e->gpu_name)) && put(gpu, "driver", jstr(e->gpu_driver)) &&
             put(gpu, "memory_bytes", jpos(e->gpu_memory_bytes));
    /* model takes weights; env takes the rest (put steals even on failure paths below) */
    ok = ok && put(model, "weights", json_incref(weights));
    ok = ok && put(env, "peer", json_incref(peer)) && put(env, "jev", json_incref(jev)) &&
         put(env, "model", json_incref(model)) && put(env, "image", json_incref(image)) &&
         put(env, "libraries", json_incref(libs)) && put(env, "compiler", jstr(e->compiler)) &&
         put(env, "cpu", json_incref(cpu)) && put(env, "backend", jstr(e->backend)) &&
         put(env, "gpu", json_incref(gpu)) && put(env, "date", jstr(e->date)) &&
         put(env, "machine", jstr(e->machine)) && put(env, "os", jstr(e->os));
    json_decref(peer);
    json_decref(jev);
    json_decref(model);
    json_decref(weights);
    json_decref(image);
    json_decref(libs);
    json_decref(cpu);
    json_decref(gpu);
    if (!ok) {
        json_decref(env);
        return NULL;
    }
    return env;
}

/* The first line of /proc/cpuinfo's "model name", or "" when absent. */
static void cpu_model_read(char *out, size_t size) {
    out[0] = '\0';
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f == NULL)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10))
            continue;
        char *colon = strchr(line, ':');
        if (colon == NULL)
            continue;
        colon++;
        while (*colon == ' ' || *colon == '\t')
            colon++;
        colon[strcspn(colon, "\r\n")] = '\0';
        snprintf(out, size, "%s", colon);
        break;
    }
    fclose(f);
}

void jev_bench_nvidia_driver(const char *text, char *out, size_t size) {
    out[0] = '\0';
    const char *k = strstr(text, "Kernel Module");
    if (k == NULL)
        return;
    for (const char *w = k + strlen("Kernel Module"); *w && *w != '\n';) {
        w += strspn(w, " \t");
        size_t n = strcspn(w, " \t\r\n");
        size_t digits = strspn(w, "0123456789.");
        if (n > 0 && digits == n && memchr(w, '.', n) && isdigit((unsigned char)w[0])) {
            snprintf(out, size, "%.*s", (int)n, w);
            return;
        }
        w += n;
    }
}

/* The kernel module's version, or "" when the file is absent (no NVIDIA driver) or says none. */
static void nvidia_driver_read(char *out, size_t size) {
    out[0] = '\0';
    FILE *f = fopen("/proc/driver/nvidia/version", "r");
    if (f == NULL)
        return;
    char line[512];
    if (fgets(line, sizeof line, f))
        jev_bench_nvidia_driver(line, out, size);
    fclose(f);
}

#define JEV_BENCH_STR2(x) #x
#define JEV_BENCH_STR(x) JEV_BENCH_STR2(x)

/* Host facts that the runner would otherwise have to gather itself. Only
 * fields the caller left unset are filled, so a peer harness or a test can
 * pin any of them. */
void jev_bench_env_detect(struct jev_bench_env *env, struct jev_bench_host *host) {
    memset(host, 0, sizeof *host);
    if (env->jev_version == NULL)
        env->jev_version = jev_version();
    if (env->cpu_model == NULL) {
        cpu_model_read(host->cpu_model, sizeof host->cpu_model);
        if (host->cpu_model[0])
            env->cpu_model = host->cpu_model;
    }
    if (env->gpu_name != NULL && env->gpu_driver == NULL) {
        nvidia_driver_read(host->gpu_driver, sizeof host->gpu_driver);
        if (host->gpu_driver[0])
            env->gpu_driver = host->gpu_driver;
    }
    if (env->cpu_cores < 1) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        env->cpu_cores = n > 0 ? (int32_t)n : JEV_BENCH_NONE;
    }
    struct utsname u;
    if (uname(&u) == 0) {
        if (env->machine == NULL) {
            snprintf(host->machine, sizeof host->machine, "%s", u.nodename);
            env->machine = host->machine;
        }
        if (env->os == NULL) {
            if (snprintf(host->os, sizeof host->os, "%s %s %s", u.sysname, u.release, u.machine) > 0)
                env->os = host->os; /* a cut text is still the right OS */
        }
    }
    if (env->compiler == NULL) {
#if defined(__clang__)
        snprintf(host->compiler, sizeof host->compiler, "clang %d.%d.%d", __clang_major__, __clang_minor__,
                 __clang_patchlevel__);
#elif defined(__GNUC__)
        snprintf(host->compiler, sizeof host->compiler, "gcc %d.%d.%d", __GNUC__, __GNUC_MINOR__, __GNUC_PATCHLEVEL__);
#else
        snprintf(host->compiler, sizeof host->compiler, "unknown C compiler");
#endif
        env->compiler = host->compiler;
    }
    if (env->date == NULL) {
        time_t now = time(NULL);
        struct tm tm;
        if (gmtime_r(&now, &tm) && strftime(host->date, sizeof host->date, "%Y-%m-%dT%H:%M:%SZ", &tm))
            env->date = host->date;
    }
    if (env->n_libraries == 0) {
        /* versions of the libraries linked into libjev (runtime where they tell, headers otherwise) */
        pcre2_config(PCRE2_CONFIG_VERSION, host->pcre2);
        snprintf(host->turbojpeg, sizeof host->turbojpeg, "%s", JEV_BENCH_STR(LIBJPEG_TURBO_VERSION));
        const char *names[] = {"jansson", "openssl", "pcre2", "utf8proc", "spng", "libjpeg-turbo", "openblas"};
        const char *versions[] = {jansson_version_str(), OpenSSL_version(OPENSSL_VERSION),
                                  host->pcre2,           utf8proc_version(),
                                  spng_version_string(), host->turbojpeg,
                                  openblas_get_config()};
        for (int32_t i = 0; i < 7; i++) {
            host->lib_names[i] = names[i];
            host->lib_versions[i] = versions[i];
        }
        host->n_libs = 7;
        env->n_libraries = host->n_libs;
        env->library_names = host->lib_names;
        env->library_versions = host->lib_versions;
    }
}

/* ---- building ---- */

/* All optional fields "not recorded", valid = true: a scoring path that
 * forgets to set a phase writes null, not a misleading 0. */
struct jev_bench_sample jev_bench_sample_default(void) {
    struct jev_bench_sample s;
    memset(&s, 0, sizeof s);
    s.order = JEV_BENCH_NONE;
    s.total_ms = NAN;
    s.vision_ms = NAN;
    s.prefill_ms = NAN;
    s.scoring_ms = NAN;
    s.lm_forwards = JEV_BENCH_NONE;
    s.vision_forwards = JEV_BENCH_NONE;
    s.peak_bytes = JEV_BENCH_NONE;
    s.valid = true;
    return s;
}

/* The settings object; batch 0 is written as "all", unset scoring/order get the protocol defaults. */
static json_t *settings_json(const struct jev_bench_settings *st) {
    json_t *set = json_object(), *counts = json_array(), *paths = json_array();
    bool ok = set && counts && paths;
    for (int32_t i = 0; ok && i < st->n_counts; i++)
        ok = push(counts, json_integer(st->counts[i]));
    for (int32_t i = 0; ok && i < st->n_paths; i++)
        ok = push(paths, jstr(st->paths[i]));
    ok = ok && put(set, "counts", json_incref(counts)) && put(set, "repeats", json_integer(st->repeats)) &&
         put(set, "warmup", json_integer(st->warmup)) &&
         put(set, "batch", st->batch == 0 ? json_string("all") : json_integer(st->batch)) &&
         put(set, "paths", json_incref(paths)) && put(set, "scoring", jstr(st->scoring ? st->scoring : "label")) &&
         put(set, "image_max_side", json_integer(st->image_max_side)) &&
         put(set, "prefill_chunk", jpos(st->prefill_chunk)) &&
         put(set, "max_new_tokens_min", jint(st->max_new_tokens_min)) &&
         put(set, "max_new_tokens_per_decision", jint(st->max_new_tokens_per_decision)) &&
         put(set, "order", jstr(st->order ? st->order : "rotated")) && put(set, "workload", jstr(st->workload)) &&
         put(set, "precision", jstr(st->precision));
    json_decref(counts);
    json_decref(paths);
    if (!ok) {
        json_decref(set);
        return NULL;
    }
    return set;
}

/* Checks what the builder itself relies on (counts, paths, repeats to
 * route samples), copies it, and builds the environment and settings once.
 * Everything else is checked by the validator at write time. */
enum jev_status jev_bench_record_init(struct jev_bench_record **out, const struct jev_bench_env *env,
                                      const struct jev_bench_settings *settings, struct jev_error *err) {
    *out = NULL;
    if (env->backend == NULL || env->backend[0] == '\0')
        return jev_fail(err, JEV_ERR_INVALID_ARG, "environment.backend: required");
    if (env->model_id == NULL || env->model_id[0] == '\0')
        return jev_fail(err, JEV_ERR_INVALID_ARG, "environment.model.id: required");
    if (settings->n_counts < 1 || settings->n_counts > JEV_BENCH_MAX_COUNTS)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "settings.counts: %d counts, expected 1 to %d", settings->n_counts,
                        JEV_BENCH_MAX_COUNTS);
    if (settings->n_paths < 1 || settings->n_paths > JEV_BENCH_MAX_PATHS)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "settings.paths: %d paths, expected 1 to %d", settings->n_paths,
                        JEV_BENCH_MAX_PATHS);
    if (settings->repeats < 1 || settings->repeats > JEV_BENCH_MAX_REPEATS)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "settings.repeats: %d, expected 1 to %d", settings->repeats,
                        JEV_BENCH_MAX_REPEATS);
    struct jev_bench_record *rec = calloc(1, sizeof *rec);
    if (rec == NULL)
        return jev_fail(err, JEV_ERR_NOMEM, "benchmark record: out of memory");
    for (int32_t i = 0; i < settings->n_counts; i++) {
        int32_t c = settings->counts[i];
        if (c < 1 || c > JEV_BENCH_MAX_DECISIONS || (i > 0 && c <= settings->counts[i - 1])) {
            free(rec);
            return jev_fail(err, JEV_ERR_INVALID_ARG, "settings.counts[%d]: %d (counts go 1..%d, increasing)", i, c,
                            JEV_BENCH_MAX_DECISIONS);
        }
        rec->counts[i] = c;
    }
    for (int32_t i = 0; i < settings->n_paths; i++) {
        const char *p = settings->paths[i];
        if (p == NULL || strlen(p) == 0 || strlen(p) > JEV_BENCH_MAX_PATH_NAME) {
            free(rec);
            return jev_fail(err, JEV_ERR_INVALID_ARG, "settings.paths[%d]: empty or longer than %d characters", i,
                            JEV_BENCH_MAX_PATH_NAME);
        }
        snprintf(rec->paths[i], sizeof rec->paths[i], "%s", p);
    }
    rec->n_counts = settings->n_counts;
    rec->n_paths = settings->n_paths;
    rec->repeats = settings->repeats;

    rec->root = json_object();
    rec->runs = json_array();
    rec->agreement = json_array();
    bool ok = rec->root && rec->runs && rec->agreement && put(rec->root, "schema", json_string(JEV_BENCH_SCHEMA)) &&
              put(rec->root, "environment", env_json(env)) && put(rec->root, "settings", settings_json(settings)) &&
              put(rec->root, "runs", json_incref(rec->runs)) &&
              put(rec->root, "agreement", json_incref(rec->agreement));
    /* the root holds its own references; the record's two pointers are borrowed */
    json_decref(rec->runs);
    json_decref(rec->agreement);
    if (!ok) {
        json_decref(rec->root);
        free(rec);
        return jev_fail(err, JEV_ERR_NOMEM, "benchmark record: out of memory (or a string is not UTF-8)");
    }
    *out = rec;
    return JEV_OK;
}

/* Frees the record and its JSON tree (NULL is fine). */
void jev_bench_record_free(struct jev_bench_record *rec) {
    if (rec == NULL)
        return;
    json_decref(rec->root);
    free(rec);
}

/* The tree itself: for tests and for callers that want to add "extra" fields. */
json_t *jev_bench_record_json(struct jev_bench_record *rec) { return rec->root; }

/* The run object for (decisions, path), or NULL. */
static json_t *run_find(const struct jev_bench_record *rec, int32_t decisions, const char *path) {
    for (size_t i = 0; i < json_array_size(rec->runs); i++) {
        json_t *run = json_array_get(rec->runs, i);
        if (json_integer_value(json_object_get(run, "decisions")) == decisions &&
            !strcmp(json_string_value(json_object_get(run, "path")), path))
            return run;
    }
    return NULL;
}

/* The sample of a run with the given repeat, or NULL. */
static json_t *sample_find(const json_t *run, int32_t repeat) {
    const json_t *samples = json_object_get(run, "samples");
    for (size_t i = 0; i < json_array_size(samples); i++) {
        json_t *s = json_array_get(samples, i);
        if (json_integer_value(json_object_get(s, "repeat")) == repeat)
            return s;
    }
    return NULL;
}

/* One decision result: id, choice, options and (scoring paths) probabilities. */
static json_t *decision_json(const struct jev_bench_decision *d) {
    json_t *o = json_object(), *opts = json_array();
    json_t *probs = d->probs ? json_array() : json_null();
    bool ok = o && opts && probs;
    for (int32_t i = 0; ok && i < d->n_options; i++) {
        ok = push(opts, jstr(d->options[i]));
        if (ok && d->probs)
            ok = push(probs, jnum(d->probs[i]));
    }
    ok = ok && put(o, "id", jstr(d->id)) && put(o, "choice", jstr(d->choice)) && put(o, "options", json_incref(opts)) &&
         put(o, "probs", json_incref(probs));
    json_decref(opts);
    json_decref(probs);
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* Routes a sample to its run (created on first use, in insertion order;
 * readers order rows by the settings, not by the array). Refuses what
 * would make the record invalid later and is cheap to catch now: an
 * unknown count or path, a repeat out of range or given twice. */
enum jev_status jev_bench_record_add_sample(struct jev_bench_record *rec, int32_t decisions, const char *path,
                                            const struct jev_bench_sample *s, struct jev_error *err) {
    bool count_ok = false, path_ok = false;
    for (int32_t i = 0; i < rec->n_counts; i++)
        count_ok |= rec->counts[i] == decisions;
    for (int32_t i = 0; path && i < rec->n_paths; i++)
        path_ok |= !strcmp(rec->paths[i], path);
    if (!count_ok)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "sample for %d decisions: not in settings.counts", decisions);
    if (!path_ok)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "sample for path %s: not in settings.paths", path ? path : "(null)");
    if (s->repeat < 0 || s->repeat >= rec->repeats)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "sample repeat %d: expected 0..%d", s->repeat, rec->repeats - 1);
    if (!(isfinite(s->total_ms) && s->total_ms > 0.0))
        return jev_fail(err, JEV_ERR_INVALID_ARG, "sample (%d, %s) repeat %d: total_ms %g must be positive", decisions,
                        path, s->repeat, s->total_ms);
    if (s->decisions && s->n_decisions != decisions)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "sample (%d, %s): %d decision results for %d decisions", decisions,
                        path, s->n_decisions, decisions);

    json_t *run = run_find(rec, decisions, path);
    if (run == NULL) {
        run = json_object();
        bool made = run && put(run, "decisions", json_integer(decisions)) && put(run, "path", jstr(path)) &&
                    put(run, "samples", json_array());
        if (!made)
            json_decref(run);
        if (!made || !push(rec->runs, run))
            return jev_fail(err, JEV_ERR_NOMEM, "benchmark record: out of memory");
    }
    if (sample_find(run, s->repeat))
        return jev_fail(err, JEV_ERR_INVALID_ARG, "sample (%d, %s): repeat %d added twice", decisions, path, s->repeat);

    /* the one place where decisions/s are defined: count / wall time, 0 when invalid */
    double requested = (double)decisions * 1000.0 / s->total_ms;
    json_t *o = json_object();
    json_t *decs = s->decisions ? json_array() : json_null();
    bool ok = o && decs;
    for (int32_t i = 0; ok && s->decisions && i < s->n_decisions; i++)
        ok = push(decs, decision_json(&s->decisions[i]));
    ok = ok && put(o, "repeat", json_integer(s->repeat)) && put(o, "order", jint(s->order)) &&
         put(o, "total_ms", jnum(s->total_ms)) && put(o, "vision_ms", jnum(s->vision_ms)) &&
         put(o, "prefill_ms", jnum(s->prefill_ms)) && put(o, "scoring_ms", jnum(s->scoring_ms)) &&
         put(o, "lm_forwards", jint(s->lm_forwards)) && put(o, "vision_forwards", jint(s->vision_forwards)) &&
         put(o, "peak_bytes", jint(s->peak_bytes)) && put(o, "peak_where", jstr(s->peak_where)) &&
         put(o, "requested_decisions_per_s", json_real(requested)) &&
         put(o, "valid_decisions_per_s", json_real(s->valid ? requested : 0.0)) &&
         put(o, "valid", json_boolean(s->valid)) && put(o, "output", jstr(s->output)) &&
         put(o, "decisions", json_incref(decs));
    json_decref(decs);
    if (!ok || !push(json_object_get(run, "samples"), o)) {
        if (!ok)
            json_decref(o);
        return jev_fail(err, JEV_ERR_NOMEM, "benchmark record: out of memory adding a sample");
    }
    return JEV_OK;
}

/* Sets one count's agreement; a later call for the same count replaces it. */
enum jev_status jev_bench_record_add_agreement(struct jev_bench_record *rec, const struct jev_bench_agreement *a,
                                               struct jev_error *err) {
    json_t *o = json_object();
    bool ok = o && put(o, "decisions", json_integer(a->decisions)) &&
              put(o, "direct_shared_max_prob_delta", jnum(a->max_prob_delta)) &&
              put(o, "argmax_agreement", jnum(a->argmax_agreement)) &&
              put(o, "generated_shared_agreement", jnum(a->generated_agreement));
    if (ok && a->has_vs_exact) {
        /* one entry per path of the settings, in their order */
        json_t *fx = json_object();
        ok = fx && put(o, "fast_vs_exact", fx);
        for (int32_t i = 0; ok && i < rec->n_paths; i++) {
            json_t *e = json_object();
            ok = e && put(fx, rec->paths[i], e) && put(e, "max_prob_delta", jnum(a->vs_exact[i].max_prob_delta)) &&
                 put(e, "argmax_agreement", jnum(a->vs_exact[i].argmax_agreement));
        }
    } else if (ok) {
        ok = put(o, "fast_vs_exact", json_null());
    }
    if (!ok) {
        json_decref(o);
        return jev_fail(err, JEV_ERR_NOMEM, "benchmark record: out of memory adding agreement");
    }
    for (size_t i = 0; i < json_array_size(rec->agreement); i++) {
        if (json_integer_value(json_object_get(json_array_get(rec->agreement, i), "decisions")) == a->decisions) {
            json_array_set_new(rec->agreement, i, o);
            return JEV_OK;
        }
    }
    if (!push(rec->agreement, o))
        return jev_fail(err, JEV_ERR_NOMEM, "benchmark record: out of memory adding agreement");
    return JEV_OK;
}

/* ---- agreement from samples ---- */

/* Index of the largest probability (first on ties), or -1 without probs. */
static int argmax_of(const json_t *probs) {
    int best = -1;
    double bv = -1.0;
    for (size_t i = 0; i < json_array_size(probs); i++) {
        double v = json_number_value(json_array_get(probs, i));
        if (v > bv) {
            bv = v;
            best = (int)i;
        }
    }
    return best;
}

/* The answer of a scored decision: its argmax option, else its choice. */
static const char *scored_answer(const json_t *d) {
    const json_t *probs = json_object_get(d, "probs");
    int k = json_is_array(probs) ? argmax_of(probs) : -1;
    if (k >= 0)
        return json_string_value(json_array_get(json_object_get(d, "options"), (size_t)k));
    return json_string_value(json_object_get(d, "choice"));
}

/* Agreement from the samples (definitions in schema.h). Samples are paired
 * by repeat: each repeat is one rotation of the paths over the same inputs,
 * and deterministic scoring makes the distributions of equal repeats
 * comparable. Decisions without probabilities are skipped, not counted as
 * agreeing. */
enum jev_status jev_bench_agreement_compute(const struct jev_bench_record *rec, int32_t decisions,
                                            struct jev_bench_agreement *out, struct jev_error *err) {
    out->decisions = decisions;
    out->max_prob_delta = NAN;
    out->argmax_agreement = NAN;
    out->generated_agreement = NAN;
    out->has_vs_exact = false;
    const json_t *ind = run_find(rec, decisions, JEV_BENCH_PATH_INDEPENDENT);
    const json_t *sh = run_find(rec, decisions, JEV_BENCH_PATH_SHARED);
    const json_t *gen = run_find(rec, decisions, JEV_BENCH_PATH_GENERATE);
    if (sh == NULL)
        return JEV_OK;
    double delta = 0.0;
    long agree = 0, compared = 0;
    for (int32_t r = 0; ind && r < rec->repeats; r++) {
        const json_t *a = sample_find(ind, r), *b = sample_find(sh, r);
        const json_t *da = a ? json_object_get(a, "decisions") : NULL, *db = b ? json_object_get(b, "decisions") : NULL;
        if (!json_is_array(da) || !json_is_array(db))
            continue;
        for (size_t j = 0; j < json_array_size(da) && j < json_array_size(db); j++) {
            const json_t *pa = json_object_get(json_array_get(da, j), "probs");
            const json_t *pb = json_object_get(json_array_get(db, j), "probs");
            if (!json_is_array(pa) || !json_is_array(pb))
                continue;
            if (json_array_size(pa) != json_array_size(pb))
                return jev_fail(err, JEV_ERR_INVALID_ARG,
                                "agreement at %d decisions: decision %zu has %zu independent vs %zu shared candidates",
                                decisions, j, json_array_size(pa), json_array_size(pb));
            for (size_t k = 0; k < json_array_size(pa); k++)
                delta = fmax(delta,
                             fabs(json_number_value(json_array_get(pa, k)) - json_number_value(json_array_get(pb, k))));
            agree += argmax_of(pa) == argmax_of(pb);
            compared++;
        }
    }
    if (compared > 0) {
        out->max_prob_delta = delta;
        out->argmax_agreement = (double)agree / (double)compared;
    }
    double sum = 0.0;
    long n_gen = 0;
    for (int32_t r = 0; gen && r < rec->repeats; r++) {
        const json_t *g = sample_find(gen, r), *b = sample_find(sh, r);
        if (g == NULL || b == NULL || !json_is_true(json_object_get(g, "valid")))
            continue;
        const json_t *dg = json_object_get(g, "decisions"), *db = json_object_get(b, "decisions");
        if (!json_is_array(dg) || !json_is_array(db) || json_array_size(dg) == 0 ||
            json_array_size(dg) != json_array_size(db))
            continue;
        long same = 0;
        for (size_t j = 0; j < json_array_size(dg); j++) {
            const char *x = json_string_value(json_object_get(json_array_get(dg, j), "choice"));
            const char *y = scored_answer(json_array_get(db, j));
            same += x && y && !strcmp(x, y);
        }
        sum += (double)same / (double)json_array_size(dg);
        n_gen++;
    }
    if (n_gen > 0)
        out->generated_agreement = sum / (double)n_gen;
    return JEV_OK;
}

/* The answer of the reference's decision: its argmax option, else its choice. */
static const char *ref_answer(const struct jev_bench_decision *d) {
    if (!d->probs)
        return d->choice;
    int32_t best = -1;
    double bv = -1.0;
    for (int32_t k = 0; k < d->n_options; k++)
        if (d->probs[k] > bv) {
            bv = d->probs[k];
            best = k;
        }
    return best >= 0 ? d->options[best] : d->choice;
}

/* Fast vs exact of one run (schema.h): every sample against the one exact reference. */
enum jev_status jev_bench_vs_exact_compute(const struct jev_bench_record *rec, int32_t decisions, const char *path,
                                           const struct jev_bench_decision *ref, int32_t n_ref,
                                           struct jev_bench_vs_exact *out, struct jev_error *err) {
    out->max_prob_delta = NAN;
    out->argmax_agreement = NAN;
    const json_t *run = run_find(rec, decisions, path);
    if (run == NULL)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "fast vs exact at %d decisions: no %s run", decisions, path);
    double delta = 0.0;
    long agree = 0, compared = 0, with_probs = 0;
    for (int32_t r = 0; r < rec->repeats; r++) {
        const json_t *smp = sample_find(run, r);
        const json_t *dec = smp ? json_object_get(smp, "decisions") : NULL;
        if (!json_is_array(dec))
            continue;
        if ((int32_t)json_array_size(dec) != n_ref)
            return jev_fail(err, JEV_ERR_INVALID_ARG,
                            "fast vs exact at %d decisions, %s: %zu decisions in repeat %d, %d in the exact run",
                            decisions, path, json_array_size(dec), r, n_ref);
        for (int32_t j = 0; j < n_ref; j++) {
            const json_t *d = json_array_get(dec, (size_t)j);
            const char *id = json_string_value(json_object_get(d, "id"));
            if (!id || !ref[j].id || strcmp(id, ref[j].id))
                return jev_fail(err, JEV_ERR_INVALID_ARG,
                                "fast vs exact at %d decisions, %s: decision %d is %s here, %s in the exact run",
                                decisions, path, j, id ? id : "(none)", ref[j].id ? ref[j].id : "(none)");
            const json_t *p = json_object_get(d, "probs");
            if (json_is_array(p) && ref[j].probs) {
                if ((int32_t)json_array_size(p) != ref[j].n_options)
                    return jev_fail(
                        err, JEV_ERR_INVALID_ARG,
                        "fast vs exact at %d decisions, %s: decision %s has %zu candidates, %d in the exact "
                        "run",
                        decisions, path, id, json_array_size(p), ref[j].n_options);
                for (int32_t k = 0; k < ref[j].n_options; k++)
                    delta = fmax(delta, fabs(json_number_value(json_array_get(p, (size_t)k)) - ref[j].probs[k]));
                with_probs++;
            }
            const char *x = scored_answer(d), *y = ref_answer(&ref[j]);
            agree += x && y && !strcmp(x, y);
            compared++;
        }
    }
    if (with_probs > 0)
        out->max_prob_delta = delta;
    if (compared > 0)
        out->argmax_agreement = (double)agree / (double)compared;
    return JEV_OK;
}

/* ---- writing ---- */

/* Sets or clears the free-text note. */
enum jev_status jev_bench_record_set_note(struct jev_bench_record *rec, const char *note, struct jev_error *err) {
    if (note == NULL || note[0] == '\0') {
        json_object_del(rec->root, "note");
        return JEV_OK;
    }
    if (!put(rec->root, "note", jstr(note)))
        return jev_fail(err, JEV_ERR_NOMEM, "benchmark record: out of memory setting the note");
    return JEV_OK;
}

/* Validates, serializes and writes atomically. A record that would not load
 * back is never written: the runner learns at once, not the reader later. */
enum jev_status jev_bench_record_write(struct jev_bench_record *rec, const char *path, struct jev_error *err) {
    struct jev_error inner = {0};
    if (jev_bench_validate(rec->root, &inner) != JEV_OK)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "%s not written: the record is incomplete or invalid: %s", path,
                        inner.msg);
    /* 15 significant digits: exact for every decimal a timer prints, short for readers */
    char *text = json_dumps(rec->root, JSON_INDENT(1) | JSON_REAL_PRECISION(15));
    if (text == NULL)
        return jev_fail(err, JEV_ERR_NOMEM, "%s: out of memory serializing the record", path);
    size_t n = strlen(text);
    char *full = realloc(text, n + 2);
    if (full == NULL) {
        free(text);
        return jev_fail(err, JEV_ERR_NOMEM, "%s: out of memory serializing the record", path);
    }
    full[n] = '\n';
    full[n + 1] = '\0';
    enum jev_status s = jev_bench_file_write(path, full, n + 1, err);
    free(full);
    return s;
}
