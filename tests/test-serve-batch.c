/*
 * test-serve-batch.c - answers do not depend on company: `jev serve`
 * (through the binary, children on port 0 over the tiny synthetic model)
 * answers eight different requests (one to six questions of every type, two
 * with images, one with a prefix longer than a prefill slice, one sent twice
 * at once) one at a time, then all at once in shuffled orders on fresh
 * servers, with kept prefixes and without; every answer in company has the
 * same keys, choices and usage as alone and its probabilities within 1e-6,
 * and with OpenBLAS's SkylakeX kernels (rows of a product independent of the
 * other rows: backend/cpu/cpu-matmul.c) the same bytes; and the forwards did
 * hold several requests (/metrics), so the comparison is of batched answers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "answer-diff.h" // defines: answer_diff
#include "serve-test.h"  // defines: struct reply, serve_child_run
#include "tiny-model.h"  // defines: tiny_model_write, tiny_test_dir

enum { N = 8 };
static char model_dir[1024];
static char *bodies[N];

static char *base64_file(const char *path) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static unsigned char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    assert_true(feof(f)); /* the whole file */
    fclose(f);
    static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *o = malloc((n + 2) / 3 * 4 + 1);
    assert_non_null(o);
    size_t k = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v =
            (uint32_t)buf[i] << 16 | (i + 1 < n ? (uint32_t)buf[i + 1] << 8 : 0) | (i + 2 < n ? buf[i + 2] : 0);
        o[k++] = t[v >> 18 & 63];
        o[k++] = t[v >> 12 & 63];
        o[k++] = i + 1 < n ? t[v >> 6 & 63] : '=';
        o[k++] = i + 2 < n ? t[v & 63] : '=';
    }
    o[k] = '\0';
    return o;
}

/* A request of n questions cycling through the three types (k options for a choice), over a state of
 * `reps` sentences, with an image file when one is named. */
static char *request(int n, int k, int reps, int salt, const char *image) {
    json_t *qs = json_object();
    for (int i = 0; i < n; i++) {
        char id[16], ins[128];
        snprintf(id, sizeof id, "q%d", i);
        snprintf(ins, sizeof ins, "Question %d of case %d: what about the door?", i, salt);
        json_t *q;
        if ((i + salt) % 3 == 0) {
            q = json_pack("{s:s, s:s}", "type", "noul", "instructions", ins);
        } else if ((i + salt) % 3 == 1) {
            json_t *crit = json_object();
            for (int c = 0; c < k; c++) {
                char key[24];
                snprintf(key, sizeof key, "option%d", c);
                json_object_set_new(crit, key, c % 2 ? json_string("a described option") : json_null());
            }
            q = json_pack("{s:s, s:s, s:o}", "type", "choice", "instructions", ins, "criteria", crit);
        } else {
            q = json_pack("{s:s, s:s, s:[s,s,s]}", "type", "score", "instructions", ins, "criteria", "low", "mid",
                          "high");
        }
        json_object_set_new(qs, id, q);
    }
    char note[8192];
    int at = snprintf(note, sizeof note, "case %d:", salt);
    for (int i = 0; i < reps && at < (int)sizeof note - 32; i++)
        at += snprintf(note + at, sizeof note - (size_t)at, " a red door number %d.", i);
    json_t *root = json_pack("{s:{s:s}, s:o}", "state", "note", note, "questions", qs);
    if (image) {
        char *b64 = base64_file(image);
        size_t m = strlen(b64) + 64;
        char *url = malloc(m);
        snprintf(url, m, "data:image/png;base64,%s", b64);
        json_object_set_new(root, "images", json_pack("[s]", url));
        free(url);
        free(b64);
    }
    char *s = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    assert_non_null(s);
    return s;
}

static int setup(void **state) {
    (void)state;
    tiny_test_dir("serve-batch", "tiny-hf", model_dir, sizeof model_dir);
    if (tiny_model_write(model_dir, JEV_SYNTH_HF) != 0)
        return -1;
    bodies[0] = request(3, 3, 1, 0, NULL);
    bodies[1] = request(1, 4, 2, 1, NULL);
    bodies[2] = request(6, 5, 3, 2, NULL);
    bodies[3] = request(2, 3, 1, 3, "tests/data/alpha-257x181.png");
    bodies[4] = request(4, 2, 1, 4, "tests/data/rgb8.png");
    bodies[5] = request(2, 6, 120, 5, NULL); /* a prefix over one prefill slice (512 tokens) */
    bodies[6] = request(5, 8, 4, 6, NULL);
    bodies[7] = strdup(bodies[0]); /* the same request twice at once: one prefix, prefilled once */
    return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    for (int i = 0; i < N; i++)
        free(bodies[i]);
    curl_global_cleanup();
    return 0;
}

struct sender {
    int port;
    int idx;
    pthread_barrier_t *go;
    struct reply r;
};

static void *sender_main(void *u) {
    struct sender *s = u;
    pthread_barrier_wait(s->go);
    s->r = serve_http(s->port, "POST", "/v1/systemone", bodies[s->idx]);
    return NULL;
}

/* All N requests at once, started in the order perm (a barrier releases them together). */
static void all_at_once(int port, const int *perm, struct reply *out) {
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, N);
    struct sender s[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        s[i] = (struct sender){.port = port, .idx = perm[i], .go = &go};
        assert_int_equal(pthread_create(&th[i], NULL, sender_main, &s[i]), 0);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        out[perm[i]] = s[i].r;
    }
    pthread_barrier_destroy(&go);
}

/* A value of /metrics ("name value" on a line of its own). */
static double metric(const char *text, const char *name) {
    size_t n = strlen(name);
    for (const char *at = text; (at = strstr(at, name)); at += n)
        if ((at == text || at[-1] == '\n') && at[n] == ' ')
            return atof(at + n + 1);
    return -1;
}

static void shuffle(int *perm, unsigned *seed) {
    for (int i = 0; i < N; i++)
        perm[i] = i;
    for (int i = N - 1; i > 0; i--) {
        int j = (int)(rand_r(seed) % (unsigned)(i + 1));
        int t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

static struct serve_child start(const char *const *extra) {
    struct serve_opts o = {.model_dir = model_dir, .extra = extra};
    struct serve_child c = serve_child_run(&o);
    if (c.port <= 0)
        fail_msg("jev serve did not start: '%s'", c.line);
    return c;
}

static void test_answers_do_not_depend_on_company(void **state) {
    (void)state;
    /* alone: one request at a time, each on a fresh server */
    char *alone[N];
    for (int i = 0; i < N; i++) {
        struct serve_child c = start(NULL);
        struct reply r = serve_http(c.port, "POST", "/v1/systemone", bodies[i]);
        serve_child_expect_clean_exit(serve_child_stop(&c, SIGTERM));
        if (r.status != 200)
            fail_msg("request %d alone: %ld %s", i, r.status, r.body ? r.body : "");
        alone[i] = r.body;
    }
    /* the duplicate is the same request: the same bytes alone */
    assert_string_equal(alone[0], alone[7]);
    /* in company: three shuffled rounds, kept prefixes (fresh, then warm) and none */
    const char *const reuse[] = {"--max-running", "8", NULL};
    const char *const fresh[] = {"--max-running", "8", "--no-prefix-reuse", NULL};
    const char *const *servers[] = {reuse, reuse, fresh};
    unsigned seed = 20261202;
    double worst = 0;
    int identical = 0, compared = 0;
    struct serve_child c = {0};
    double shared_forwards = 0;
    for (int round = 0; round < 3; round++) {
        if (round != 1) /* round 1 runs on round 0's server: its prefixes are kept */
            c = start(servers[round]);
        int perm[N];
        shuffle(perm, &seed);
        struct reply got[N];
        all_at_once(c.port, perm, got);
        struct reply m = serve_http(c.port, "GET", "/metrics", NULL);
        /* forwards that held more than one request: the sum of requests per forward over the count */
        double sum = metric(m.body, "jev_batch_requests_sum"), count = metric(m.body, "jev_batch_requests_count");
        shared_forwards += sum - count;
        printf("round %d (order %d %d %d %d %d %d %d %d): %g requests in %g forwards\n", round, perm[0], perm[1],
               perm[2], perm[3], perm[4], perm[5], perm[6], perm[7], sum, count);
        free(m.body);
        if (round != 0)
            serve_child_expect_clean_exit(serve_child_stop(&c, SIGTERM));
        for (int i = 0; i < N; i++) {
            if (got[i].status != 200)
                fail_msg("round %d, request %d: %ld %s", round, i, got[i].status, got[i].body ? got[i].body : "");
            double d = answer_diff(alone[i], got[i].body);
            if (d < 0 || d > 1e-6)
                fail_msg("round %d, request %d: |dp| %g (-1: not the same keys, choices or usage)\nalone: %s\nin "
                         "company: %s",
                         round, i, d, alone[i], got[i].body);
            worst = d > worst ? d : worst;
            identical += !strcmp(alone[i], got[i].body);
            compared++;
            free(got[i].body);
        }
    }
    printf("%d answers in company: %d bit-identical to alone, max |dp| %.3g (%s kernels)\n", compared, identical, worst,
           openblas_get_corename());
    assert_true(shared_forwards > 0); /* requests did share forwards */
    if (answer_exact_company())       /* the kernels allow it: the same bytes (backend/cpu/cpu-matmul.c) */
        assert_int_equal(identical, compared);
    for (int i = 0; i < N; i++)
        free(alone[i]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_answers_do_not_depend_on_company),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
