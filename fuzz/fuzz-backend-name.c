/*
 * fuzz-backend-name.c - any bytes as a backend name (jev_model_params.backend, the CLI's
 * --backend) -> jev_backend_parse (backend/registry.h): accepted names are exactly cpu, cuda and
 * cuda:N with N in 0..255 (cuda only where the registry has it), everything else a clear error,
 * never a crash.
 * Seeds: fuzz/corpus/backend-name/.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/registry.h" // defines: jev_backend_parse, jev_backend_find

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *name = malloc(size + 1);
    if (!name)
        return 0;
    memcpy(name, data, size);
    name[size] = '\0';
    const struct jev_backend_reg *reg = NULL;
    int32_t device = -1;
    struct jev_error err = {0};
    enum jev_status s = jev_backend_parse(name, &reg, &device, &err);
    if (s == JEV_OK) {
        /* accepted: cpu, or (where the registry has it) cuda / cuda:N */
        bool cpu = strcmp(name, "cpu") == 0 && reg == jev_backend_find("cpu") && device == 0;
        bool cuda =
            strncmp(name, "cuda", 4) == 0 && reg && reg == jev_backend_find("cuda") && device >= 0 && device <= 255;
        if (!cpu && !cuda)
            __builtin_trap();
    } else if (err.msg[0] == '\0' || (s != JEV_ERR_INVALID_ARG && s != JEV_ERR_UNSUPPORTED)) {
        __builtin_trap();
    }
    free(name);
    return 0;
}
