/*
 * test-backends.c - the backend registry (backend/registry.h): what it
 * lists, the name parser (cpu, cuda, cuda:N; a name this build left out
 * names its build flag; anything else lists the names), an engine built
 * through it, and the op parity loop over every registered backend
 * (backend-parity.h). In this build the registry may hold the CPU alone;
 * tests/cuda/test-cuda-backends.c runs the same loop in the CUDA build on
 * the GPU machine.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "backend-parity.h" // defines: bp_run_all
#include "model/engine.h"   // defines: struct jev_engine, jev_engine_describe
#include "tiny-model.h"     // defines: tiny_model_open

static void test_registry_lists(void **state) {
    (void)state;
    int32_t n = jev_backend_count();
    assert_true(n >= 1);
    assert_string_equal(jev_backend_at(0)->name, "cpu"); /* the CPU is always there, first */
    assert_null(jev_backend_at(n));
    assert_null(jev_backend_at(-1));
    for (int32_t i = 0; i < n; i++) {
        const struct jev_backend_reg *r = jev_backend_at(i);
        assert_non_null(r->ops);
        assert_non_null(r->create);
        assert_non_null(r->destroy);
        assert_string_equal(r->ops->name, r->name);
        /* unset (0), every piece would join a batch whatever kernels its products take */
        assert_true(r->ops->min_batched_tokens >= 1);
        assert_ptr_equal(jev_backend_find(r->name), r);
    }
    assert_null(jev_backend_find("tpu"));
    assert_null(jev_backend_find(NULL));
    char line[256];
    jev_backend_summary(line, sizeof line);
    assert_true(strncmp(line, "cpu", 3) == 0);
    if (!jev_backend_find("cuda"))
        assert_non_null(strstr(line, "make CUDA=1 adds cuda"));
}

static void parse_ok(const char *spec, const char *name, int32_t device) {
    const struct jev_backend_reg *reg = NULL;
    int32_t dev = -1;
    struct jev_error err = {0};
    assert_int_equal(jev_backend_parse(spec, &reg, &dev, &err), JEV_OK);
    assert_non_null(reg);
    assert_string_equal(reg->name, name);
    assert_int_equal(dev, device);
}

static void parse_fails(const char *spec, enum jev_status st, const char *msg) {
    const struct jev_backend_reg *reg = NULL;
    int32_t dev = -1;
    struct jev_error err = {0};
    assert_int_equal(jev_backend_parse(spec, &reg, &dev, &err), st);
    assert_null(reg);
    if (!strstr(err.msg, msg))
        fail_msg("backend \"%s\": message \"%s\" lacks \"%s\"", spec, err.msg, msg);
}

static void test_registry_parse(void **state) {
    (void)state;
    parse_ok(NULL, "cpu", 0);
    parse_ok("cpu", "cpu", 0);
    const char *expected = "expected cpu, cuda or cuda:N";
    parse_fails("tpu", JEV_ERR_INVALID_ARG, expected);
    parse_fails("", JEV_ERR_INVALID_ARG, expected);
    parse_fails("cpu:0", JEV_ERR_INVALID_ARG, expected); /* the CPU has no devices */
    parse_fails("cudax", JEV_ERR_INVALID_ARG, expected);
    parse_fails("CPU", JEV_ERR_INVALID_ARG, expected);
    /* the grammar holds in every build */
    parse_fails("cuda:", JEV_ERR_INVALID_ARG, "the device is a number 0..255");
    parse_fails("cuda:256", JEV_ERR_INVALID_ARG, "the device is a number 0..255");
    parse_fails("cuda:-1", JEV_ERR_INVALID_ARG, "the device is a number 0..255");
    parse_fails("cuda: 1", JEV_ERR_INVALID_ARG, "the device is a number 0..255");
    parse_fails("cuda:1x", JEV_ERR_INVALID_ARG, "the device is a number 0..255");
    if (jev_backend_find("cuda")) {
        parse_ok("cuda", "cuda", 0);
        parse_ok("cuda:7", "cuda", 7);
    } else { /* a valid name this build left out: the message names the flag that adds it */
        parse_fails("cuda", JEV_ERR_UNSUPPORTED, "this build has no CUDA backend (build with make CUDA=1)");
        parse_fails("cuda:7", JEV_ERR_UNSUPPORTED, "make CUDA=1");
    }
}

/* The engine gets its instance from the registry entry the model names, and describes it. */
static void test_engine_through_registry(void **state) {
    (void)state;
    char dir[512];
    struct jev_model *model = NULL;
    assert_int_equal(tiny_model_open("backends", 1, dir, sizeof dir, &model), 0);
    assert_ptr_equal(model->backend, jev_backend_find("cpu"));
    struct jev_engine_params ep = jev_engine_default_params();
    ep.max_tokens = 256;
    ep.max_batch = 2;
    struct jev_engine *e = NULL;
    assert_int_equal(jev_engine_init(model, &ep, &e), JEV_OK);
    assert_ptr_equal(e->reg, model->backend);
    assert_ptr_equal(e->ops, model->backend->ops);
    assert_ptr_equal(e->be, e->backend); /* no profiler in front of it */
    struct jev_backend_info info;
    jev_engine_describe(e, &info);
    assert_string_equal(info.device, ""); /* the CPU: host memory, nothing to add */
    assert_int_equal(info.memory_bytes, -1);
    assert_int_equal(info.n_libs, 0);
    jev_engine_free(e);
    jev_model_free(model);
    /* a model naming a backend this build cannot run is refused at load, by the registry's message */
    struct jev_model_params mp = jev_model_default_params();
    mp.backend = "tpu";
    char msg[512];
    assert_int_equal(jev_model_load(dir, &mp, &model, msg, sizeof msg), JEV_ERR_INVALID_ARG);
    assert_null(model);
    assert_non_null(strstr(msg, "expected cpu, cuda or cuda:N"));
}

static void test_parity_loop(void **state) {
    (void)state;
    assert_int_equal(bp_run_all(), jev_backend_count());
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registry_lists),
        cmocka_unit_test(test_registry_parse),
        cmocka_unit_test(test_engine_through_registry),
        cmocka_unit_test(test_parity_loop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
