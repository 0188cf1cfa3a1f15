/*
 * install-probe.c - a program an embedder would write, built by
 * tests/test-install.c against an installed jev with `pkg-config --cflags
 * --libs jev` alone: loads a model directory, answers one System One request
 * and prints the HTTP status and the response body.
 */
#include <jev.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: install-probe MODEL_DIR\n");
        return 2;
    }
    char err[512];
    struct jev_model_params mp = jev_model_default_params();
    mp.n_threads = 1;
    struct jev_model *model = NULL;
    if (jev_model_load(argv[1], &mp, &model, err, sizeof err) != JEV_OK) {
        fprintf(stderr, "install-probe: %s\n", err);
        return 1;
    }
    struct jev_engine_params ep = jev_engine_default_params();
    struct jev_engine *engine = NULL;
    struct jev_decider *decider = NULL;
    int rc = 1;
    if (jev_engine_init(model, &ep, &engine) == JEV_OK && jev_decider_open(model, engine, &decider) == JEV_OK) {
        const char *body = "{\"state\":\"A red door.\",\"questions\":{\"red\":{\"type\":\"noul\","
                           "\"instructions\":\"Is the door red?\"}}}";
        char *response = NULL;
        int32_t http = 0;
        jev_decide_json(decider, body, strlen(body), JEV_REQUEST_SYSTEMONE, &response, &http);
        printf("jev %s: %d %s\n", jev_version(), http, response ? response : "(none)");
        rc = http == 200 ? 0 : 1;
        jev_free(response);
    } else {
        fprintf(stderr, "install-probe: %s\n", jev_engine_last_error(engine));
    }
    jev_decider_close(decider);
    jev_engine_free(engine);
    jev_model_free(model);
    return rc;
}
