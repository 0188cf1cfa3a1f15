/*
 * test-download.c - `jev download` against tests/data/fake-hub.py, a
 * loopback hub (Python standard library) serving files the test writes:
 * the wanted files arrive byte-identical and the others do not; a dropped
 * connection leaves only a .part that the rerun resumes with a Range
 * request; a wrong lfs.sha256 fails naming the file and both hashes and
 * leaves no file; a missing repository is a 404 naming the URL. The resume
 * rules on a part already on disk (jev_download_run): longer than the listed
 * file (dropped, fetched whole), exactly its size (verified without a
 * request; a corrupt one is refused and deleted), a server that ignores the
 * Range (the part is started over, not appended to), a 416 (the part is
 * dropped and fetched once more), and a size unlike the listing's (refused
 * naming both sizes, nothing kept). Plus the listing parser's rules on names,
 * sizes and hashes.
 * The server binds port 0 on 127.0.0.1, reports its port through a file,
 * and exits by itself after 30 s if the test dies before killing it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/sha256.h"              // defines: jev_sha256_file, jev_sha256_hex
#include "common/download/download.h" // defines: jev_download_listing_parse, jev_download_wanted

#define BIG_SIZE 300000 /* model.safetensors: over fake-hub's 64 KiB drop threshold */

static char g_base[512]; /* $JEV_TEST_DIR/download */
static char g_root[600]; /* the files the hub serves */

static const char *bin(void) { return getenv("JEV_JEV_BIN") ? getenv("JEV_JEV_BIN") : "build/jev"; }

/* ---- fixtures ---- */

static void write_file(const char *dir, const char *name, const void *data, size_t n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static int setup(void **state) {
    (void)state;
    const char *tmp = getenv("JEV_TEST_DIR") ? getenv("JEV_TEST_DIR") : "build/test-data";
    snprintf(g_base, sizeof g_base, "%s/download", tmp);
    snprintf(g_root, sizeof g_root, "%s/root", g_base);
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", g_base, g_root);
    if (system(cmd) != 0)
        return -1;
    static unsigned char big[BIG_SIZE];
    uint32_t x = 12345;
    for (size_t i = 0; i < sizeof big; i++) {
        x = x * 1664525u + 1013904223u;
        big[i] = (unsigned char)(x >> 24);
    }
    write_file(g_root, "model.safetensors", big, sizeof big);
    write_file(g_root, "config.json", "{\"model_type\": \"qwen3_5\"}\n", 26);
    write_file(g_root, "tokenizer.json", "{}\n", 3);
    write_file(g_root, "README.md", "# tiny\n", 7);
    write_file(g_root, "extra.bin", "not wanted", 10);
    write_file(g_root, "empty.safetensors", "", 0);
    return 0;
}

/* ---- the hub ---- */

struct hub {
    pid_t pid;     /* the python process */
    int port;      /* its port */
    char log[700]; /* its request log */
};

static void hub_start(struct hub *h, const char *mode, const char *tag) {
    char port_file[700];
    snprintf(port_file, sizeof port_file, "%s/%s.port", g_base, tag);
    snprintf(h->log, sizeof h->log, "%s/%s.log", g_base, tag);
    unlink(port_file);
    unlink(h->log);
    h->pid = fork();
    assert_true(h->pid >= 0);
    if (h->pid == 0) {
        execlp("python3", "python3", "tests/data/fake-hub.py", "--root", g_root, "--repo", "org/tiny", "--mode", mode,
               "--log", h->log, "--port-file", port_file, "--lifetime", "30", (char *)NULL);
        _exit(127);
    }
    /* wait for the port, at most 10 s */
    for (int i = 0; i < 500; i++) {
        FILE *f = fopen(port_file, "r");
        if (f) {
            int ok = fscanf(f, "%d", &h->port);
            fclose(f);
            if (ok == 1)
                return;
        }
        int st;
        if (waitpid(h->pid, &st, WNOHANG) == h->pid)
            fail_msg("fake-hub.py exited before serving (status %d)", st);
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    kill(h->pid, SIGTERM);
    waitpid(h->pid, NULL, 0);
    fail_msg("fake-hub.py wrote no port in 10 s");
}

static void hub_stop(struct hub *h) {
    kill(h->pid, SIGTERM);
    waitpid(h->pid, NULL, 0);
}

/* Runs `jev download ARGS` (stderr too) into out; returns the exit status. */
static int jev(const char *args, char *out, size_t size) {
    char cmd[2000];
    snprintf(cmd, sizeof cmd, "%s download %s 2>&1", bin(), args);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    size_t n = fread(out, 1, size - 1, f);
    out[n] = '\0';
    int st = pclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int download(const struct hub *h, const char *repo, const char *dir, char *out, size_t size) {
    char args[1400];
    snprintf(args, sizeof args, "%s --endpoint http://127.0.0.1:%d/ --dir '%s/%s'", repo, h->port, g_base, dir);
    return jev(args, out, size);
}

static bool exists(const char *dir, const char *name) {
    char path[1400];
    snprintf(path, sizeof path, "%s/%s/%s", g_base, dir, name);
    struct stat st;
    return stat(path, &st) == 0;
}

static void assert_same_file(const char *dir, const char *name) {
    char a[1400], b[1400], ha[JEV_SHA256_HEX], hb[JEV_SHA256_HEX];
    struct jev_error err = {0};
    snprintf(a, sizeof a, "%s/%s", g_root, name);
    snprintf(b, sizeof b, "%s/%s/%s", g_base, dir, name);
    assert_int_equal(jev_sha256_file(a, ha, &err), JEV_OK);
    if (jev_sha256_file(b, hb, &err) != JEV_OK)
        fail_msg("%s: %s", name, err.msg);
    assert_string_equal(ha, hb);
}

static int count_lines(const char *path, const char *needle) {
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof line, f))
        n += strstr(line, needle) != NULL;
    fclose(f);
    return n;
}

/* ---- end to end ---- */

static void test_download_and_rerun(void **state) {
    (void)state;
    struct hub h;
    hub_start(&h, "normal", "normal");
    static char out[8192];
    int rc = download(&h, "org/tiny", "d1", out, sizeof out);
    if (rc != 0)
        fail_msg("rc %d: %s", rc, out);
    assert_non_null(strstr(out, "5 files fetched"));
    assert_same_file("d1", "model.safetensors");
    assert_same_file("d1", "config.json");
    assert_same_file("d1", "tokenizer.json");
    assert_same_file("d1", "README.md");
    assert_same_file("d1", "empty.safetensors");
    assert_false(exists("d1", "extra.bin"));
    assert_false(exists("d1", ".partial"));
    /* every file came through the redirect */
    assert_int_equal(count_lines(h.log, "/blobs/"), 5);
    /* a rerun finds everything in place and transfers nothing */
    assert_int_equal(download(&h, "org/tiny", "d1", out, sizeof out), 0);
    assert_non_null(strstr(out, "0 files fetched"));
    assert_int_equal(count_lines(h.log, "/blobs/"), 5);
    hub_stop(&h);
}

static void test_resume_after_drop(void **state) {
    (void)state;
    struct hub h;
    hub_start(&h, "drop", "drop");
    static char out[8192];
    assert_int_equal(download(&h, "org/tiny", "d2", out, sizeof out), 1);
    assert_non_null(strstr(out, "run again to resume"));
    assert_false(exists("d2", "model.safetensors"));
    char part[1400];
    snprintf(part, sizeof part, "%s/d2/.partial/model.safetensors.part", g_base);
    struct stat st;
    assert_int_equal(stat(part, &st), 0);
    assert_int_equal(st.st_size, BIG_SIZE / 2);
    int rc = download(&h, "org/tiny", "d2", out, sizeof out);
    if (rc != 0)
        fail_msg("rc %d: %s", rc, out);
    char want[64];
    snprintf(want, sizeof want, "/blobs/model.safetensors range=bytes=%d-", BIG_SIZE / 2);
    assert_int_equal(count_lines(h.log, want), 1);
    assert_same_file("d2", "model.safetensors");
    assert_false(exists("d2", ".partial"));
    hub_stop(&h);
}

static void test_sha_mismatch(void **state) {
    (void)state;
    struct hub h;
    hub_start(&h, "badsha", "badsha");
    static char out[8192];
    assert_int_equal(download(&h, "org/tiny", "d3", out, sizeof out), 1);
    char listed[JEV_SHA256_HEX], real[JEV_SHA256_HEX], path[1400];
    jev_sha256_hex("not the file", 12, listed);
    struct jev_error err = {0};
    snprintf(path, sizeof path, "%s/model.safetensors", g_root);
    assert_int_equal(jev_sha256_file(path, real, &err), JEV_OK);
    char want[300];
    snprintf(want, sizeof want, "model.safetensors: sha256 mismatch: expected %s, got %s", listed, real);
    if (!strstr(out, want))
        fail_msg("no '%s' in: %s", want, out);
    assert_true(exists("d3", "empty.safetensors")); /* its listed hash was right */
    assert_false(exists("d3", "model.safetensors"));
    assert_false(exists("d3", ".partial/model.safetensors.part"));
    hub_stop(&h);
}

static void test_404_and_usage(void **state) {
    (void)state;
    struct hub h;
    hub_start(&h, "normal", "missing");
    static char out[8192];
    assert_int_equal(download(&h, "org/missing", "d4", out, sizeof out), 1);
    char url[256];
    snprintf(url, sizeof url, "HTTP 404 (not found) for http://127.0.0.1:%d/api/models/org/missing/revision/main",
             h.port);
    if (!strstr(out, url))
        fail_msg("no '%s' in: %s", url, out);
    assert_false(exists("d4", ""));
    hub_stop(&h);
    assert_int_equal(jev("", out, sizeof out), 2);
    assert_int_equal(jev("org/tiny --dir", out, sizeof out), 2);
    assert_int_equal(jev("org/tiny --bogus 1", out, sizeof out), 2);
    assert_int_equal(jev("'org/ti ny' --dir /nonexistent/x", out, sizeof out), 1);
    assert_non_null(strstr(out, "bad repository id"));
}

/* ---- resume rules, through jev_download_run ---- */

/* dir's .partial/model.safetensors.part with the first n bytes of the served file, the
 * byte at `flip` inverted (flip < 0: none), then extra zero bytes. */
static void seed_part(const char *dir, size_t n, long flip, size_t extra) {
    char path[1400], src[1400];
    snprintf(path, sizeof path, "%s/%s/.partial", g_base, dir);
    char cmd[3000];
    snprintf(cmd, sizeof cmd, "rm -rf '%s/%s' && mkdir -p '%s'", g_base, dir, path);
    assert_int_equal(system(cmd), 0);
    snprintf(src, sizeof src, "%s/model.safetensors", g_root);
    FILE *f = fopen(src, "rb");
    assert_non_null(f);
    unsigned char *b = calloc(1, n + extra);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, n, f), n);
    fclose(f);
    if (flip >= 0)
        b[flip] ^= 0xff;
    snprintf(path + strlen(path), sizeof path - strlen(path), "/model.safetensors.part");
    f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, n + extra, f), n + extra);
    assert_int_equal(fclose(f), 0);
    free(b);
}

/* jev_download_run of org/tiny from hub h into g_base/dir; the status, the message in err. */
static enum jev_status run_api(const struct hub *h, const char *dir, struct jev_error *err) {
    char ep[64], out[1400];
    snprintf(ep, sizeof ep, "http://127.0.0.1:%d/", h->port);
    snprintf(out, sizeof out, "%s/%s", g_base, dir);
    struct jev_download_opts o = {.repo = "org/tiny", .dir = out, .endpoint = ep};
    jev_error_clear(err);
    int n = 0;
    enum jev_status st = jev_download_run(&o, &n, err);
    printf("  %s: status %d, %d fetched%s%s\n", dir, st, n, st ? ": " : "", st ? err->msg : "");
    return st;
}

static void test_resume_rules(void **state) {
    (void)state;
    struct hub h;
    hub_start(&h, "normal", "resume");
    struct jev_error err = {0};
    /* longer than the listed file: not a prefix of it, dropped and fetched whole (no Range) */
    seed_part("r1", BIG_SIZE, -1, 5);
    assert_int_equal(run_api(&h, "r1", &err), JEV_OK);
    assert_same_file("r1", "model.safetensors");
    assert_int_equal(count_lines(h.log, "/blobs/model.safetensors range=bytes="), 0);
    assert_int_equal(count_lines(h.log, "/blobs/model.safetensors range=-"), 1);
    /* exactly the listed size and right: verified and renamed without a request */
    seed_part("r2", BIG_SIZE, -1, 0);
    assert_int_equal(run_api(&h, "r2", &err), JEV_OK);
    assert_same_file("r2", "model.safetensors");
    assert_int_equal(count_lines(h.log, "/blobs/model.safetensors"), 1); /* still only r1's */
    assert_false(exists("r2", ".partial"));
    /* the listed size but a corrupt byte: the sha256 refuses it, and the part is deleted so that
     * the next run fetches it instead of trusting it again */
    seed_part("r3", BIG_SIZE, 4242, 0);
    assert_int_equal(run_api(&h, "r3", &err), JEV_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "model.safetensors: sha256 mismatch"));
    assert_false(exists("r3", "model.safetensors"));
    assert_false(exists("r3", ".partial/model.safetensors.part"));
    assert_int_equal(run_api(&h, "r3", &err), JEV_OK);
    assert_same_file("r3", "model.safetensors");
    hub_stop(&h);
}

static void test_server_ignores_range(void **state) {
    (void)state;
    struct hub h;
    hub_start(&h, "norange", "norange");
    struct jev_error err = {0};
    /* a correct half: the request asks for the rest, the server sends all of it with 200, and
     * the part is started over instead of appended to (which would double the first half) */
    seed_part("r4", BIG_SIZE / 2, -1, 0);
    assert_int_equal(run_api(&h, "r4", &err), JEV_OK);
    char want[64];
    snprintf(want, sizeof want, "/blobs/model.safetensors range=bytes=%d-", BIG_SIZE / 2);
    assert_int_equal(count_lines(h.log, want), 1);
    assert_same_file("r4", "model.safetensors");
    hub_stop(&h);
}

static void test_size_mismatch(void **state) {
    (void)state;
    struct hub h;
    hub_start(&h, "badsize", "badsize");
    struct jev_error err = {0};
    char want[200];
    snprintf(want, sizeof want, "model.safetensors: got %d bytes, the listing says %d", BIG_SIZE, BIG_SIZE + 10);
    /* fetched whole, 10 bytes short of the listing: refused naming both sizes, nothing kept */
    seed_part("r5", 0, -1, 0);
    assert_int_equal(run_api(&h, "r5", &err), JEV_ERR_FORMAT);
    if (!strstr(err.msg, want))
        fail_msg("no '%s' in: %s", want, err.msg);
    assert_false(exists("r5", "model.safetensors"));
    assert_false(exists("r5", ".partial/model.safetensors.part"));
    /* a part as long as the real file: the server answers its Range with 416, the part is
     * dropped and fetched once more from the start (then refused as above) */
    seed_part("r6", BIG_SIZE, -1, 0);
    assert_int_equal(run_api(&h, "r6", &err), JEV_ERR_FORMAT);
    if (!strstr(err.msg, want))
        fail_msg("no '%s' in: %s", want, err.msg);
    snprintf(want, sizeof want, "/blobs/model.safetensors range=bytes=%d-", BIG_SIZE);
    assert_int_equal(count_lines(h.log, want), 1);
    assert_int_equal(count_lines(h.log, "/blobs/model.safetensors range=-"), 2); /* r5's and r6's restart */
    assert_false(exists("r6", ".partial/model.safetensors.part"));
    hub_stop(&h);
}

/* ---- listing parser ---- */

static enum jev_status parse(const char *json, struct jev_download_listing *l, struct jev_error *err) {
    jev_error_clear(err);
    return jev_download_listing_parse(json, strlen(json), l, err);
}

static void test_listing(void **state) {
    (void)state;
    assert_true(jev_download_wanted("config.json"));
    assert_true(jev_download_wanted("model-00001-of-00002.safetensors"));
    assert_true(jev_download_wanted("LICENSE"));
    assert_true(jev_download_wanted("chat_template.jinja"));
    assert_false(jev_download_wanted("pytorch_model.bin"));
    assert_false(jev_download_wanted(".safetensors"));
    assert_false(jev_download_wanted("config.json.bak"));

    struct jev_download_listing l;
    struct jev_error err = {0};
    const char *sha = "ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef0123456789";
    char json[1024];
    snprintf(json, sizeof json,
             "{\"siblings\": [{\"rfilename\": \"config.json\", \"size\": 10},"
             " {\"rfilename\": \"model.safetensors\", \"size\": 99, \"lfs\": {\"sha256\": \"%s\", \"size\": 99}},"
             " {\"rfilename\": \"onnx/model.safetensors\"}, {\"rfilename\": \"x.bin\"},"
             " {\"rfilename\": \"tokenizer.json\", \"lfs\": null}]}",
             sha);
    assert_int_equal(parse(json, &l, &err), JEV_OK);
    assert_int_equal(l.n, 3);
    assert_string_equal(l.files[0].name, "config.json");
    assert_int_equal(l.files[0].size, 10);
    assert_string_equal(l.files[0].sha256, "");
    assert_string_equal(l.files[1].name, "model.safetensors");
    assert_int_equal(l.files[1].size, 99);
    assert_string_equal(l.files[1].sha256, "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789");
    assert_string_equal(l.files[2].name, "tokenizer.json");
    assert_int_equal(l.files[2].size, -1);
    jev_download_listing_free(&l);

    static const struct {
        const char *json; /* a bad listing */
        const char *msg;  /* a piece of its error */
    } bad[] = {
        {"[]", "no \"siblings\""},
        {"{\"siblings\": 3}", "no \"siblings\""},
        {"{\"siblings\": [{\"size\": 1}]}", "siblings[0] has no string"},
        {"{\"siblings\": [{\"rfilename\": \"../model.safetensors\"}]}", "unsafe file name"},
        {"{\"siblings\": [{\"rfilename\": \".hidden.safetensors\"}]}", "unsafe file name"},
        {"{\"siblings\": [{\"rfilename\": \"config.json\", \"size\": -1}]}", "\"size\""},
        {"{\"siblings\": [{\"rfilename\": \"a.safetensors\", \"lfs\": {\"sha256\": \"xyz\"}}]}", "64 hex"},
        {"{\"siblings\": [{\"rfilename\": \"a.safetensors\", \"size\": 1, \"lfs\": {\"size\": 2}}]}", "differ"},
        {"{\"siblings\": [{\"rfilename\": \"README.md\"}, {\"rfilename\": \"README.md\"}]}", "listed twice"},
        {"{\"siblings\": [", "invalid JSON"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (parse(bad[i].json, &l, &err) != JEV_ERR_FORMAT)
            fail_msg("accepted: %s", bad[i].json);
        if (!strstr(err.msg, bad[i].msg))
            fail_msg("'%s' not in '%s'", bad[i].msg, err.msg);
        assert_int_equal(l.n, 0);
        assert_null(l.files);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_listing),
        cmocka_unit_test(test_download_and_rerun),
        cmocka_unit_test(test_resume_after_drop),
        cmocka_unit_test(test_sha_mismatch),
        cmocka_unit_test(test_404_and_usage),
        cmocka_unit_test(test_resume_rules),
        cmocka_unit_test(test_server_ignores_range),
        cmocka_unit_test(test_size_mismatch),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
