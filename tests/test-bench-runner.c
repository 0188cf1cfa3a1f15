/*
 * test-bench-runner.c - `jev bench`'s runner on a tiny synthetic model with
 * a small photo: the record it writes passes the jev-bench/1 validator and
 * holds what spec/benchmark.md asks for (every sample, rotated path order,
 * forward counts, memory, raw generated outputs with their ids, agreement
 * within 1e-5); the peers' dump follows docs/bench-inputs.md (prompts =
 * prefix + suffix, label ids, pixel file hash, image-token run); the git
 * commit reader follows HEAD through loose refs, packed-refs and a
 * worktree's gitdir/commondir.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/sha256.h"         // defines: jev_sha256_file
#include "common/bench/runner.h" // defines: jev_bench_run, jev_bench_git_commit
#include "tiny-model.h"          // defines: tiny_model_write, tiny_test_dir

static char ROOT[4096];  /* $JEV_TEST_DIR/bench-runner, absolute */
static char MODEL[4200]; /* the tiny model */
static char WORK[4200];  /* the workload with a small photo */
static bool QUICK;       /* JEV_TEST_QUICK */

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int setup(void **state) {
    (void)state;
    const char *d = getenv("JEV_TEST_DIR");
    char rel[1024];
    snprintf(rel, sizeof rel, "%s/bench-runner", d ? d : "build/test-data");
    mkdir(rel, 0755);
    if (!realpath(rel, ROOT)) /* absolute: the worktree case writes an absolute gitdir */
        return -1;
    snprintf(MODEL, sizeof MODEL, "%s/tiny-mlx4", ROOT);
    if (tiny_model_write(MODEL, JEV_SYNTH_MLX4) != 0)
        return -1;
    /* the benchmark's workload with the 7x5 test photo (70 image tokens) */
    json_error_t je;
    json_t *w = json_load_file("bench/dog-workload.json", 0, &je);
    if (!w)
        return -1;
    json_object_set_new(w, "image", json_string("tests/data/rgb8.png"));
    snprintf(WORK, sizeof WORK, "%s/workload.json", ROOT);
    int rc = json_dump_file(w, WORK, JSON_INDENT(1));
    json_decref(w);
    QUICK = getenv("JEV_TEST_QUICK") != NULL;
    return rc;
}

static json_t *get(json_t *o, const char *path) {
    /* "a.b.c" */
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *k = strtok(buf, "."); k && o; k = strtok(NULL, "."))
        o = json_object_get(o, k);
    return o;
}

/* ---- the record ---- */

static void test_record(void **state) {
    (void)state;
    char out[4200];
    snprintf(out, sizeof out, "%s/benchmark.json", ROOT);
    remove(out);
    struct jev_bench_opts o = jev_bench_default_opts();
    o.model_dir = MODEL;
    o.model_synthetic = 1;
    o.workload = WORK;
    o.n_counts = 2;
    o.counts[0] = 1;
    o.counts[1] = QUICK ? 2 : 5;
    o.repeats = QUICK ? 1 : 3;
    o.batch = 4;
    o.threads = 2;
    o.output = out;
    o.git_commit = "0123456789abcdef0123456789abcdef01234567";
    struct jev_bench_outcome res;
    struct jev_error err = {0};
    if (jev_bench_run(&o, &res, &err) != JEV_OK)
        fail_msg("bench: %s", err.msg);
    assert_int_equal(res.n_samples, 2 * o.repeats * 3);
    json_t *rec = NULL;
    if (jev_bench_load_file(out, &rec, &err) != JEV_OK) /* the schema's own validator */
        fail_msg("record: %s", err.msg);
    assert_string_equal(json_string_value(get(rec, "environment.jev.git_commit")), o.git_commit);
    assert_true(json_is_true(get(rec, "environment.model.synthetic")));
    assert_int_equal(json_integer_value(get(rec, "environment.image.width")), 7);
    assert_int_equal(json_integer_value(get(rec, "environment.image.resized_width")), 320);
    assert_string_equal(json_string_value(get(rec, "settings.order")), "rotated");
    assert_int_equal(json_integer_value(get(rec, "settings.warmup")), 1);
    json_t *runs = json_object_get(rec, "runs");
    assert_int_equal(json_array_size(runs), 6);
    double gflops[2][3] = {{0}}; /* [more than one decision][path] */
    static const char *order[3] = {"generate_json", "independent", "shared"};
    size_t i;
    json_t *run;
    json_array_foreach(runs, i, run) {
        int64_t n = json_integer_value(json_object_get(run, "decisions"));
        const char *path = json_string_value(json_object_get(run, "path"));
        int k = 0;
        while (k < 3 && strcmp(order[k], path))
            k++;
        assert_true(k < 3);
        json_t *samples = json_object_get(run, "samples");
        assert_int_equal(json_array_size(samples), (size_t)o.repeats);
        size_t j;
        json_t *s;
        json_array_foreach(samples, j, s) {
            int64_t rep = json_integer_value(json_object_get(s, "repeat"));
            /* position in this repeat's rotation: paths rotated left by the repeat */
            assert_int_equal(json_integer_value(json_object_get(s, "order")), (k - rep % 3 + 3) % 3);
            int64_t lm = json_integer_value(json_object_get(s, "lm_forwards"));
            int64_t vis = json_integer_value(json_object_get(s, "vision_forwards"));
            json_t *ex = json_object_get(s, "extra");
            if (k == 2) { /* shared: one prefix, ceil(n / 4) suffix batches */
                assert_int_equal(lm, 1 + (n + 3) / 4);
                assert_int_equal(vis, 1);
            } else if (k == 1) { /* independent: one forward per decision */
                assert_int_equal(lm, n);
                assert_int_equal(vis, n);
            } else { /* generated: the raw text and its ids are kept */
                assert_true(json_is_string(json_object_get(s, "output")));
                json_t *ids = json_object_get(ex, "generated_ids");
                assert_int_equal(json_array_size(ids), json_integer_value(json_object_get(ex, "output_tokens")));
                assert_int_equal(vis, 1);
                assert_true(lm >= 1);
            }
            assert_int_equal(json_integer_value(json_object_get(ex, "image_tokens")), 70);
            /* the engine's own count of the work: the same in every repeat of a row (generation's ids
             * are the same too), and the shared path's below independent's past one decision */
            double gflop = json_number_value(json_object_get(ex, "gflop"));
            assert_true(gflop > 0);
            if (j > 0)
                assert_true(gflop == json_number_value(json_object_get(
                                          json_object_get(json_array_get(samples, 0), "extra"), "gflop")));
            gflops[n > 1][k] = gflop;
            assert_true(json_integer_value(json_object_get(s, "peak_bytes")) > 0);
            assert_string_equal(json_string_value(json_object_get(s, "peak_where")), "cpu");
            assert_int_equal(json_array_size(json_object_get(s, "decisions")), (size_t)n);
        }
    }
    assert_true(gflops[1][2] < gflops[1][1]); /* shared < independent at the larger count */
    /* the CPU's f32 FMA peak, measured in the same run */
    assert_true(json_number_value(get(rec, "environment.extra.fma_peak_gflops")) > 0);
    const char *isa = json_string_value(get(rec, "environment.extra.fma_peak_isa"));
    assert_non_null(isa);
    assert_true(!strcmp(isa, "avx512") || !strcmp(isa, "avx2"));
    json_t *ag;
    json_array_foreach(json_object_get(rec, "agreement"), i, ag) {
        double dp = json_number_value(json_object_get(ag, "direct_shared_max_prob_delta"));
        printf("agreement %lld: delta %.3g\n", (long long)json_integer_value(json_object_get(ag, "decisions")), dp);
        assert_true(dp <= 1e-5);
        assert_true(json_number_value(json_object_get(ag, "argmax_agreement")) == 1.0);
    }
    json_decref(rec);
}

/* ---- the peers' inputs ---- */

static void test_dump(void **state) {
    (void)state;
    char dir[4200], path[4300];
    snprintf(dir, sizeof dir, "%s/inputs", ROOT);
    struct jev_bench_opts o = jev_bench_default_opts();
    o.model_dir = MODEL;
    o.workload = WORK;
    o.n_counts = 2;
    o.counts[0] = 1;
    o.counts[1] = 9;
    o.dump_inputs = dir;
    struct jev_bench_outcome res;
    struct jev_error err = {0};
    for (int twice = 0; twice < 2; twice++) /* the second replaces the first */
        if (jev_bench_run(&o, &res, &err) != JEV_OK)
            fail_msg("dump: %s", err.msg);
    assert_true(res.dumped);
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    json_error_t je;
    json_t *m = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    assert_non_null(m);
    assert_string_equal(json_string_value(json_object_get(m, "format")), "jev-bench-inputs/1");
    assert_string_equal(json_string_value(get(m, "model.layout")), "mlx4");
    snprintf(path, sizeof path, "%s/pixel_values.f32", dir);
    char sha[JEV_SHA256_HEX];
    assert_int_equal(jev_sha256_file(path, sha, &err), JEV_OK);
    assert_string_equal(sha, json_string_value(get(m, "pixel_values.sha256")));
    json_t *shape = get(m, "pixel_values.shape"), *grid = get(m, "pixel_values.grid_thw");
    int64_t np = json_integer_value(json_array_get(shape, 0));
    assert_int_equal(np, json_integer_value(json_array_get(grid, 1)) * json_integer_value(json_array_get(grid, 2)));
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal((int64_t)sb.st_size, np * json_integer_value(json_array_get(shape, 1)) * 4);
    int64_t pad = json_integer_value(get(m, "special_ids.image_token_id"));
    json_t *r = json_array_get(json_object_get(m, "runs"), 1);
    assert_int_equal(json_integer_value(json_object_get(r, "decisions")), 9);
    json_t *prefix = get(r, "shared.prefix_ids"), *suf = get(r, "shared.suffix_ids"),
           *prompts = get(r, "independent.prompt_ids");
    /* the image tokens: one contiguous run of n_patches / 4 in the prefix */
    size_t k, n_pad = 0, first = 0, last = 0;
    json_t *v;
    json_array_foreach(prefix, k, v) if (json_integer_value(v) == pad) {
        if (n_pad++ == 0)
            first = k;
        last = k;
    }
    assert_int_equal((int64_t)n_pad, np / 4);
    assert_int_equal(last - first + 1, n_pad);
    for (size_t q = 0; q < 9; q++) {
        json_t *s = json_array_get(suf, q), *p = json_array_get(prompts, q);
        assert_int_equal(json_array_size(p), json_array_size(prefix) + json_array_size(s));
        json_array_foreach(p, k, v) {
            json_t *want = k < json_array_size(prefix) ? json_array_get(prefix, k)
                                                       : json_array_get(s, k - json_array_size(prefix));
            assert_int_equal(json_integer_value(v), json_integer_value(want));
        }
        /* one label id per option, unique within the decision */
        json_t *lab = json_array_get(json_object_get(r, "label_ids"), q);
        assert_int_equal(json_array_size(lab), json_array_size(json_array_get(json_object_get(r, "options"), q)));
        for (size_t a = 0; a < json_array_size(lab); a++)
            for (size_t b = a + 1; b < json_array_size(lab); b++)
                assert_true(json_integer_value(json_array_get(lab, a)) != json_integer_value(json_array_get(lab, b)));
    }
    assert_string_equal(json_string_value(json_array_get(json_object_get(r, "decision_ids"), 8)), "q08");
    assert_int_equal(json_integer_value(get(r, "generate_json.max_new_tokens")), 24 * 9);
    json_decref(m);
}

/* ---- git ---- */

static void test_git(void **state) {
    (void)state;
    char d[4200], p[9000], out[41];
    const char *sha1 = "1111111111111111111111111111111111111111", *sha2 = "2222222222222222222222222222222222222222";
    /* a plain repository: HEAD -> loose ref */
    snprintf(d, sizeof d, "%s/git1", ROOT);
    snprintf(p, sizeof p, "mkdir -p %s/.git/refs/heads %s/sub/dir", d, d);
    assert_int_equal(system(p), 0);
    snprintf(p, sizeof p, "%s/.git/HEAD", d);
    write_text(p, "ref: refs/heads/main\n");
    snprintf(p, sizeof p, "%s/.git/refs/heads/main", d);
    write_text(p, "1111111111111111111111111111111111111111\n");
    snprintf(p, sizeof p, "%s/sub/dir", d);
    assert_true(jev_bench_git_commit(p, out)); /* found from a subfolder */
    assert_string_equal(out, sha1);
    /* packed-refs only */
    snprintf(p, sizeof p, "%s/.git/refs/heads/main", d);
    remove(p);
    snprintf(p, sizeof p, "%s/.git/packed-refs", d);
    write_text(p, "# pack-refs with: peeled fully-peeled sorted\n"
                  "2222222222222222222222222222222222222222 refs/heads/main\n");
    assert_true(jev_bench_git_commit(d, out));
    assert_string_equal(out, sha2);
    /* a worktree: .git is a file naming its gitdir, whose refs live in the common folder */
    char wt[4300];
    snprintf(wt, sizeof wt, "%s/wt", ROOT);
    snprintf(p, sizeof p, "mkdir -p %s %s/.git/worktrees/wt", wt, d);
    assert_int_equal(system(p), 0);
    snprintf(p, sizeof p, "%s/.git", wt);
    char line[4400];
    snprintf(line, sizeof line, "gitdir: %s/.git/worktrees/wt\n", d);
    write_text(p, line);
    snprintf(p, sizeof p, "%s/.git/worktrees/wt/HEAD", d);
    write_text(p, "ref: refs/heads/main\n");
    snprintf(p, sizeof p, "%s/.git/worktrees/wt/commondir", d);
    write_text(p, "../..\n");
    assert_true(jev_bench_git_commit(wt, out));
    assert_string_equal(out, sha2);
    /* a detached HEAD */
    snprintf(p, sizeof p, "%s/.git/HEAD", d);
    write_text(p, "1111111111111111111111111111111111111111\n");
    assert_true(jev_bench_git_commit(d, out));
    assert_string_equal(out, sha1);
    /* no repository at all */
    snprintf(p, sizeof p, "%s/.git/HEAD", d);
    write_text(p, "garbage\n");
    assert_false(jev_bench_git_commit(d, out));
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_record), cmocka_unit_test(test_dump),
                                       cmocka_unit_test(test_git)};
    return cmocka_run_group_tests(tests, setup, NULL);
}
