# jev build. One Makefile, no generator: every src/**/*.c goes into libjev.a
# (what an embedder links), every common/**/*.c into libjev-common.a (the
# benchmark, synth, download, verify and CLI set-up: tool code, not shipped),
# every tests/test-*.c becomes one cmocka binary, tools/*.c make the `jev` CLI.
#
#   make            library + CLI (build/jev)
#   make test       setup check, build, run the whole suite (tests/run.sh)
#   make test-asan  the same suite under AddressSanitizer + UBSan (build-asan/)
#   make run        the README's main job
#   make fuzz       libFuzzer targets (clang), each run briefly
#   make $(BUILD)/bench/NAME   a benchmark program from bench/NAME.c
#
# Warnings are errors everywhere. BUILD selects the output folder so that the
# sanitizer build never mixes objects with the normal one.

BUILD    ?= build
CC       ?= cc
OPT      ?= -O2 -march=x86-64-v3 -mtune=generic
SANITIZE ?=
WARN     := -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
            -Wpointer-arith -Wcast-qual -Wdouble-promotion -Wno-unused-parameter -Werror
CFLAGS   += -std=c11 -D_GNU_SOURCE -g $(OPT) $(WARN) $(SANITIZE) -pthread -Iinclude -Isrc -I.
LDFLAGS  += $(SANITIZE) -pthread
LIBS     := -ljansson -lturbojpeg -lspng -lpcre2-8 -lutf8proc -lcurl -lcrypto -lopenblas -lm
# PORTABLE=1: a binary for the GPU machine (another distribution): every
# library static except libspng (Debian ships no .a), which is carried
# beside the binary and found through $ORIGIN.
ifeq ($(PORTABLE),1)
LIBS     := -Wl,-Bstatic -ljansson -lturbojpeg -lpcre2-8 -lutf8proc -lcrypto -lopenblas -lz \
            -Wl,-Bdynamic -lspng -lcurl -lgfortran -lm -ldl -Wl,-rpath,'$$ORIGIN'
endif

# CUDA=1: the CUDA backend (src/backend/cuda: host code in .c, kernels in .cu by nvcc for the
# H200's sm_90) joins the library; the engine can then run on a GPU. cudart is linked
# statically, cuBLAS dynamically (the GPU machine has it in /usr/local/cuda/lib64). Without
# CUDA=1 the folder is left out and asking for the CUDA backend names the build flag.
CUDA     ?= 0
CUDA_DIR ?= /usr/local/cuda
NVCC     ?= $(CUDA_DIR)/bin/nvcc
NVFLAGS  := -std=c++17 -O3 -arch=sm_90 -lineinfo -Iinclude -Isrc -DJEV_HAVE_CUDA \
            -Xcompiler -Wall,-Wextra,-Wno-unused-parameter,-Werror -Werror all-warnings

LIB_SRC   := $(shell find src -name '*.c' -not -path 'src/backend/cuda/*' | sort)
CU_SRC    :=
ifeq ($(CUDA),1)
LIB_SRC   += $(sort $(wildcard src/backend/cuda/*.c))
CU_SRC    := $(sort $(wildcard src/backend/cuda/*.cu))
CFLAGS    += -DJEV_HAVE_CUDA -isystem $(CUDA_DIR)/include
LIBS      += -L$(CUDA_DIR)/lib64 -lcublas -lcudart_static -lrt -ldl -lstdc++ -Wl,-rpath,$(CUDA_DIR)/lib64
endif
LIB_OBJ   := $(LIB_SRC:%.c=$(BUILD)/%.o) $(CU_SRC:%.cu=$(BUILD)/%.cu.o)
COMMON_SRC := $(shell find common -name '*.c' | sort)
COMMON_OBJ := $(COMMON_SRC:%.c=$(BUILD)/%.o)
TOOL_SRC  := $(sort $(wildcard tools/*.c))
TOOL_OBJ  := $(TOOL_SRC:%.c=$(BUILD)/%.o)
TEST_SRC  := $(sort $(wildcard tests/test-*.c))
TEST_BIN  := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)

.SECONDARY:
.PHONY: all test test-asan run setup fuzz clean format bench cuda-tests cuda-build
all: $(BUILD)/jev $(TEST_BIN)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/%.cu.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/libjev.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libjev-common.a: $(COMMON_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/jev: $(TOOL_OBJ) $(BUILD)/libjev-common.a $(BUILD)/libjev.a
	$(CC) $(LDFLAGS) -o $@ $(TOOL_OBJ) $(BUILD)/libjev-common.a $(BUILD)/libjev.a $(LIBS)

# Tests may reuse CLI pieces (tools/cmd-*.c) by linking the object they need;
# the test itself says which through its own #include of the tool header.
$(BUILD)/tests/%: $(BUILD)/tests/%.o $(BUILD)/libjev-common.a $(BUILD)/libjev.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(BUILD)/libjev-common.a $(BUILD)/libjev.a $(LIBS) -lcmocka

# Benchmark programs (bench/*.c): linked like the CLI, so PORTABLE=1 carries them too.
$(BUILD)/bench/%: $(BUILD)/bench/%.o $(BUILD)/libjev-common.a $(BUILD)/libjev.a
	$(CC) $(LDFLAGS) -o $@ $< $(BUILD)/libjev-common.a $(BUILD)/libjev.a $(LIBS)

# The CUDA op parity tests (tests/cuda/): built with CUDA=1, run on the GPU machine
# (scripts/device/cuda-test.sh); CI has no GPU, so `make test` only compiles the backend.
CUDA_TEST_SRC := $(sort $(wildcard tests/cuda/test-*.c))
CUDA_TEST_BIN := $(CUDA_TEST_SRC:tests/cuda/%.c=$(BUILD)/tests-cuda/%)
cuda-tests: $(CUDA_TEST_BIN)
$(BUILD)/tests-cuda/%: $(BUILD)/tests/cuda/%.o $(BUILD)/libjev.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(BUILD)/libjev.a $(LIBS) -lcmocka

setup:
	@bash scripts/setup.sh

# The CUDA backend is compiled and linked on every test run (nvcc is on the development and CI
# machines; no GPU there, so its parity tests run on the GPU machine: scripts/device/cuda-check.sh).
test: setup all cuda-build
	@bash tests/run.sh $(BUILD)

cuda-build:
	@test -x $(NVCC) || { echo "make test: $(NVCC) not found: the CUDA backend must compile (CUDA_DIR=...)"; exit 1; }
	@$(MAKE) --no-print-directory CUDA=1 BUILD=build-cuda build-cuda/jev cuda-tests
	@echo "cuda-build: the CUDA backend, jev and the CUDA parity tests compile and link (build-cuda/)"

test-asan:
	@$(MAKE) --no-print-directory BUILD=build-asan OPT=-O1 \
	  SANITIZE="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" all
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  JEV_TEST_QUICK=1 bash tests/run.sh build-asan

run: setup all
	@bash scripts/main-job.sh $(BUILD)

bench: setup all
	@bash scripts/bench-cpu.sh $(BUILD)

FUZZ_SRC := $(sort $(wildcard fuzz/fuzz-*.c))
fuzz:
	@bash fuzz/run.sh $(FUZZ_SRC)

format:
	clang-format -i $(LIB_SRC) $(COMMON_SRC) $(TOOL_SRC) $(TEST_SRC) $(shell find src common include -name '*.h')

clean:
	rm -rf build build-asan build-fuzz build-portable build-cuda build-portable-cuda

# Header dependencies of every object (a stale object built against an older struct layout calls
# the wrong function pointers: the CUDA parity tests and bench programs are objects too).
-include $(LIB_OBJ:.o=.d) $(COMMON_OBJ:.o=.d) $(TOOL_OBJ:.o=.d) $(TEST_BIN:=.d) $(CUDA_TEST_SRC:tests/cuda/%.c=$(BUILD)/tests/cuda/%.d) \
         $(wildcard $(BUILD)/bench/*.d)
