# jev build. One Makefile, no generator: every src/**/*.c goes into libjev.a
# (what an embedder links), every common/**/*.c into libjev-common.a (the
# benchmark, synth, download, verify and CLI set-up: tool code, not shipped),
# every tests/test-*.c becomes one cmocka binary, tools/*.c make the `jev` CLI.
#
#   make            library + CLI (build/jev)
#   make install    the CLI, libjev (.a and .so), jev.h and jev.pc under PREFIX (DESTDIR for staging)
#   make test       setup check, build, run the whole suite (tests/run.sh)
#   make test-asan  the same suite under AddressSanitizer + UBSan (build-asan/)
#   make test-tsan  the server's and the scheduler's tests under ThreadSanitizer (build-tsan/)
#   make run        the README's main job
#   make fuzz       libFuzzer targets (clang), each run briefly
#   make test-arm64 cross-build for aarch64 (build-arm64/), run its CPU tests and decisions under qemu
#   make $(BUILD)/bench/NAME   a benchmark program from bench/NAME.c
#
# Warnings are errors everywhere. BUILD selects the output folder so that the
# sanitizer build never mixes objects with the normal one.

BUILD    ?= build
CC       ?= cc
# OPT by the compiler's target CPU: x86-64-v3 (AVX2, FMA, F16C: the fast kernels' baseline) on
# x86-64; armv8-a on aarch64 (Linux aarch64-*, macOS arm64-*: NEON is part of it, and the kernels
# reach it through SIMDe, src/backend/cpu/cpu-simd.h); plain -O2 elsewhere.
CC_MACHINE := $(shell $(CC) -dumpmachine 2>/dev/null)
ifneq ($(filter x86_64-%,$(CC_MACHINE)),)
OPT      ?= -O2 -march=x86-64-v3 -mtune=generic
else ifneq ($(filter aarch64-% arm64-%,$(CC_MACHINE)),)
OPT      ?= -O2 -march=armv8-a
else
OPT      ?= -O2
endif
SANITIZE ?=
WARN     := -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
            -Wpointer-arith -Wcast-qual -Wdouble-promotion -Wno-unused-parameter -Werror
# -fPIC: the same objects make libjev.a and libjev.so; -fvisibility=hidden: the shared library
# exports the public header's JEV_API functions only.
CFLAGS   += -std=c11 -D_GNU_SOURCE -g $(OPT) $(WARN) $(SANITIZE) -pthread -fPIC -fvisibility=hidden \
            -Iinclude -Isrc -I.
LDFLAGS  += $(SANITIZE) -pthread
LIBS     := -ljansson -lturbojpeg -ljpeg -lspng -lpcre2-8 -lutf8proc -lcurl -lcrypto -lopenblas -lm
# PORTABLE=1: a binary for the GPU machine (another distribution): every
# library static except libspng (Debian ships no .a), which is carried
# beside the binary and found through $ORIGIN.
ifeq ($(PORTABLE),1)
LIBS     := -Wl,-Bstatic -ljansson -lturbojpeg -lpcre2-8 -lutf8proc -lcrypto -lopenblas -lz \
            -Wl,-Bdynamic -lspng -lcurl -lgfortran -lm -ldl -Wl,-rpath,'$$ORIGIN'
endif

# CUDA=1: the CUDA backend (src/backend/cuda: host code in .c, kernels in .cu by nvcc for the
# H200's sm_90) joins the library; the engine can then run on a GPU. cudart is linked
# statically, cuBLAS and cuBLASLt (the pinned products, cuda-gemm.c) dynamically (the GPU machine
# has them in /usr/local/cuda/lib64). Without
# CUDA=1 the folder is left out and asking for the CUDA backend names the build flag.
CUDA     ?= 0
CUDA_DIR ?= /usr/local/cuda
NVCC     ?= $(CUDA_DIR)/bin/nvcc
NVFLAGS  := -std=c++17 -O3 -arch=sm_90 -lineinfo -Iinclude -Isrc -DJEV_HAVE_CUDA -Xcompiler -fPIC,-fvisibility=hidden \
            -Xcompiler -Wall,-Wextra,-Wno-unused-parameter,-Werror -Werror all-warnings

LIB_SRC   := $(shell find src -name '*.c' -not -path 'src/backend/cuda/*' | sort)
CU_SRC    :=
ifeq ($(CUDA),1)
LIB_SRC   += $(sort $(wildcard src/backend/cuda/*.c))
CU_SRC    := $(sort $(wildcard src/backend/cuda/*.cu))
CFLAGS    += -DJEV_HAVE_CUDA -isystem $(CUDA_DIR)/include
LIBS      += -L$(CUDA_DIR)/lib64 -lcublas -lcublasLt -lcudart_static -lrt -ldl -lstdc++ -Wl,-rpath,$(CUDA_DIR)/lib64
endif
LIB_OBJ   := $(LIB_SRC:%.c=$(BUILD)/%.o) $(CU_SRC:%.cu=$(BUILD)/%.cu.o)
COMMON_SRC := $(shell find common -name '*.c' | sort)
COMMON_OBJ := $(COMMON_SRC:%.c=$(BUILD)/%.o)
TOOL_SRC  := $(sort $(wildcard tools/*.c))
TOOL_OBJ  := $(TOOL_SRC:%.c=$(BUILD)/%.o)
TEST_SRC  := $(sort $(wildcard tests/test-*.c))
TEST_BIN  := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)

.SECONDARY:
.PHONY: all test test-asan test-tsan test-arm64 run setup fuzz clean format bench cuda-tests cuda-build install
all: $(BUILD)/jev $(BUILD)/libjev.so $(TEST_BIN)

# setup (scripts/setup.sh: packages, the stand-in tokenizer, the SDK) comes before anything is
# compiled or run: an order-only prerequisite of every object and of every target that runs
# something, so that `make -j2 test` cannot compile against a header setup has not installed
# yet. It runs once per make; the sub-makes below are told it has (JEV_SETUP_RAN=1).
# SETUP_SH: tests/test-plumbing.c plants a slow stand-in to check the order.
SETUP_SH ?= scripts/setup.sh
SETUP    := $(if $(filter 1,$(JEV_SETUP_RAN)),,setup)

$(BUILD)/%.o: %.c | $(SETUP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/%.cu.o: %.cu | $(SETUP)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/libjev.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# The shared library embedders link (make install); its soname carries the major version.
$(BUILD)/libjev.so: $(LIB_OBJ)
	$(CC) $(LDFLAGS) -shared -Wl,-soname,libjev.so.$(JEV_MAJOR) -o $@ $^ $(LIBS)

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
# (scripts/device/cuda-check.sh); CI has no GPU, so `make test` only compiles the backend.
CUDA_TEST_SRC := $(sort $(wildcard tests/cuda/test-*.c))
CUDA_TEST_BIN := $(CUDA_TEST_SRC:tests/cuda/%.c=$(BUILD)/tests-cuda/%)
cuda-tests: $(CUDA_TEST_BIN)
$(BUILD)/tests-cuda/%: $(BUILD)/tests/cuda/%.o $(BUILD)/libjev.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(BUILD)/libjev.a $(LIBS) -lcmocka

setup:
	@bash $(SETUP_SH)

# make install [PREFIX=/usr/local] [DESTDIR=]: the CLI, the library (static and shared, with the
# soname links), the public header and a pkg-config file, as llama.cpp and whisper.cpp install.
# `cc app.c $$(pkg-config --cflags --libs jev)` then builds against it (tests/test-install.c).
PREFIX     ?= /usr/local
JEV_VERSION := $(shell sed -n 's/^\#define JEV_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)/\2/p' include/jev.h | paste -sd.)
JEV_MAJOR   := $(firstword $(subst ., ,$(JEV_VERSION)))
install: $(BUILD)/jev $(BUILD)/libjev.a $(BUILD)/libjev.so
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include
	install -m 755 $(BUILD)/jev $(DESTDIR)$(PREFIX)/bin/jev
	install -m 644 $(BUILD)/libjev.a $(DESTDIR)$(PREFIX)/lib/libjev.a
	install -m 755 $(BUILD)/libjev.so $(DESTDIR)$(PREFIX)/lib/libjev.so.$(JEV_VERSION)
	ln -sf libjev.so.$(JEV_VERSION) $(DESTDIR)$(PREFIX)/lib/libjev.so.$(JEV_MAJOR)
	ln -sf libjev.so.$(JEV_MAJOR) $(DESTDIR)$(PREFIX)/lib/libjev.so
	install -m 644 include/jev.h $(DESTDIR)$(PREFIX)/include/jev.h
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(JEV_VERSION)|' -e 's|@LIBS@|$(LIBS)|' jev.pc.in \
	  > $(DESTDIR)$(PREFIX)/lib/pkgconfig/jev.pc

# The CUDA backend is compiled and linked on every test run (nvcc is on the development and CI
# machines; no GPU there, so its parity tests run on the GPU machine: scripts/device/cuda-check.sh).
test: all cuda-build | $(SETUP)
	@bash tests/run.sh $(BUILD)

cuda-build: | $(SETUP)
	@test -x $(NVCC) || { echo "make test: $(NVCC) not found: the CUDA backend must compile (CUDA_DIR=...)"; exit 1; }
	@$(MAKE) --no-print-directory JEV_SETUP_RAN=1 CUDA=1 BUILD=build-cuda build-cuda/jev cuda-tests
	@echo "cuda-build: the CUDA backend, jev and the CUDA parity tests compile and link (build-cuda/)"

test-asan: | $(SETUP)
	@$(MAKE) --no-print-directory JEV_SETUP_RAN=1 BUILD=build-asan OPT=-O1 \
	  SANITIZE="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" all
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  JEV_TEST_QUICK=1 bash tests/run.sh build-asan

# The server's and the scheduler's tests (the HTTP threads, the scheduler thread, the shared batch, the
# drain, `jev serve` through the binary) under ThreadSanitizer. A report makes the process that has it
# exit 66 (a test binary, or the jev serve child its test then finds exited unclean): zero reports
# or the run fails. tests/tsan.supp says why each suppression is benign.
TSAN_TESTS := test-server test-http test-serve-cli test-serve-ops test-serve-batch test-batch test-device-fault
test-tsan: | $(SETUP)
	@rm -f $(addprefix build-tsan/tests/,$(filter-out $(TSAN_TESTS),$(notdir $(TEST_BIN))))
	@$(MAKE) --no-print-directory JEV_SETUP_RAN=1 BUILD=build-tsan OPT=-O1 \
	  SANITIZE="-fsanitize=thread -fno-omit-frame-pointer" build-tsan/jev $(TSAN_TESTS:%=build-tsan/tests/%)
	@TSAN_OPTIONS="exitcode=66 second_deadlock_stack=1 suppressions=$(CURDIR)/tests/tsan.supp" \
	  JEV_TEST_QUICK=1 bash tests/run.sh build-tsan

# The CPU backend on aarch64, from this x86-64 machine: Debian's cross compiler builds jev and the
# CPU tests below into build-arm64/ (the arm64 libraries through multiarch: scripts/setup-arm64.sh,
# which only this target runs), qemu-aarch64 runs the tests (tests/run.sh's JEV_TEST_RUNNER), then
# three requests decided on synthesized tiny models, whose answers must match the x86-64 build's
# (tests/arm64-decide.sh). The tests: the op parity tests (every fast kernel against its scalar
# reference), the LM, vision and decision goldens, the pieces they stand on; none needs a server or
# a network. OPENBLAS_CORETYPE=ARMV8: OpenBLAS's generic NEON kernels, whatever CPU qemu shows.
ARM64_CC    ?= aarch64-linux-gnu-gcc
ARM64_TESTS := test-base test-qtype test-safetensors test-ops test-ops-real-shapes test-lm \
               test-lm-golden test-vision test-vision-golden test-decide-golden
# One step after the other: the package install may upgrade libraries the x86-64 link reads.
test-arm64: | $(SETUP)
	@bash scripts/setup-arm64.sh
	@$(MAKE) --no-print-directory JEV_SETUP_RAN=1 $(BUILD)/jev
	@rm -f $(addprefix build-arm64/tests/,$(filter-out $(ARM64_TESTS),$(notdir $(TEST_BIN))))
	@$(MAKE) --no-print-directory JEV_SETUP_RAN=1 CC=$(ARM64_CC) BUILD=build-arm64 build-arm64/jev \
	  $(ARM64_TESTS:%=build-arm64/tests/%)
	@OPENBLAS_CORETYPE=ARMV8 JEV_TEST_RUNNER=qemu-aarch64 bash tests/run.sh build-arm64
	@bash tests/arm64-decide.sh $(BUILD)/jev build-arm64/jev

run: all | $(SETUP)
	@bash scripts/main-job.sh $(BUILD)

bench: all | $(SETUP)
	@bash scripts/bench-cpu.sh $(BUILD)

# the fuzz targets read the stand-in tokenizer that setup fetches (fuzz-decide-body aborts without it)
FUZZ_SRC := $(sort $(wildcard fuzz/fuzz-*.c))
fuzz: | $(SETUP)
	@bash fuzz/run.sh $(FUZZ_SRC)

format:
	clang-format -i $(LIB_SRC) $(COMMON_SRC) $(TOOL_SRC) $(TEST_SRC) $(shell find src common include -name '*.h')

clean:
	rm -rf build build-asan build-tsan build-fuzz build-portable build-cuda build-portable-cuda build-arm64

# Header dependencies of every object (a stale object built against an older struct layout calls
# the wrong function pointers: the CUDA parity tests and bench programs are objects too).
-include $(LIB_OBJ:.o=.d) $(COMMON_OBJ:.o=.d) $(TOOL_OBJ:.o=.d) $(TEST_BIN:=.d) $(CUDA_TEST_SRC:tests/cuda/%.c=$(BUILD)/tests/cuda/%.d) \
         $(wildcard $(BUILD)/bench/*.d)
