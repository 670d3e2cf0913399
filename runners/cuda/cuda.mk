# The CUDA runner's plugin, its GPU test kit and the GPU bundle (docs/gpu.md).
# Included from the Makefile. The library and the tool never link CUDA: the
# plugin $(BUILD)/libplan-cuda.so is dlopen'ed by `plan verify --runner cuda`.
#
#   make cuda         the plugin, tests/gpu/nccl_check and bench_cuda (nvcc)
#   make cuda-build   the same where nvcc exists, else says why it skips
#   make gpu-bundle   build/gpu-bundle/: the tool, the libraries, the plugin
#                     and the GPU tests, to copy to a GPU machine
#   make gpu-check    tests/gpu/run.sh on this machine (skips without a GPU)
#   make check-gpu-bundle  the bundle run from a copy, clean environment
#   make check-cuda-virtual  the virtual-rank collectives on the host

NVCC ?= $(or $(shell command -v nvcc 2>/dev/null),$(wildcard /usr/local/cuda/bin/nvcc))
CUDA_HOME ?= $(if $(NVCC),$(patsubst %/bin/nvcc,%,$(NVCC)),/usr/local/cuda)
# sm_90 (H100, H200) code plus its PTX, which newer GPUs compile at load.
CUDA_ARCH ?= -gencode arch=compute_90,code=sm_90 \
             -gencode arch=compute_90,code=compute_90
NVCC_FLAGS := -std=c++17 -O2 -g $(CUDA_ARCH) -Werror all-warnings \
              -Xcompiler -fPIC,-Wall,-Wextra,-Werror,-pthread \
              -Ilibplan/include -Ilibplan/src -Irunners -Irunners/cuda \
              $(PKG_CFLAGS) $(NVCCFLAGS)
# The CUDA runtime is linked statically, so the plugin needs only the
# driver and cuBLAS on the GPU machine (nccl_check needs NCCL too).
CUDA_LIBS := -L$(CUDA_HOME)/lib64 -lcublas -lcudart_static -ldl -lrt

CUDA_SRC := $(sort $(wildcard runners/cuda/*.cu))
# NCCL stays out of the plugin: plan verify runs every rank on one GPU and
# never calls it, and a machine with CUDA and cuBLAS but no NCCL must still
# load the plugin. nccl_check links the NCCL collectives itself.
NCCL_SRC := runners/cuda/collectives_nccl.cu
NCCL_OBJ := $(NCCL_SRC:%.cu=$(BUILD)/%.o)
CUDA_OBJ := $(filter-out $(NCCL_OBJ),$(CUDA_SRC:%.cu=$(BUILD)/%.o))
CUDA_PLUGIN := $(BUILD)/libplan-cuda.so
NCCL_CHECK := $(BUILD)/tests/gpu/nccl_check
BENCH_CUDA := $(BUILD)/bench/bench_cuda
GPU_BUNDLE := build/gpu-bundle

.PHONY: cuda cuda-build gpu-bundle gpu-check check-gpu-bundle check-cuda-virtual

$(BUILD)/runners/cuda/%.o: runners/cuda/%.cu
	@mkdir -p $(dir $@)
	@echo "NVCC $<"
	@$(NVCC) $(NVCC_FLAGS) -MD -MP -MF $(@:.o=.d) -c $< -o $@

# libplan.a supplies what the kernels use of the core; its symbols stay
# hidden in the plugin, so they never clash with the host's own copy.
$(CUDA_PLUGIN): $(CUDA_OBJ) $(STATIC)
	$(NVCC) -shared $(CUDA_ARCH) -o $@ $(CUDA_OBJ) -Xlinker --exclude-libs,ALL \
	  $(STATIC) $(CUDA_LIBS) $(PKG_LIBS) -lm -Xlinker -z,defs \
	  -Xlinker --disable-new-dtags -Xlinker -rpath,'$$ORIGIN'

$(BUILD)/tests/gpu/%.o: tests/gpu/%.cu
	@mkdir -p $(dir $@)
	@echo "NVCC $<"
	@$(NVCC) $(NVCC_FLAGS) -MD -MP -MF $(@:.o=.d) -c $< -o $@

# nccl_check calls the plugin's virtual-rank collectives (linked to the
# plugin, found beside it: $ORIGIN/..: build/ holds the plugin,
# build/tests/gpu the test) and its own copy of the NCCL ones.
$(NCCL_CHECK): $(BUILD)/tests/gpu/nccl_check.o $(NCCL_OBJ) $(CUDA_PLUGIN)
	$(NVCC) $(CUDA_ARCH) -o $@ $< $(NCCL_OBJ) -L$(BUILD) -l:libplan-cuda.so \
	  -Xlinker --disable-new-dtags -Xlinker -rpath,'$$ORIGIN/../..:$$ORIGIN' \
	  $(CUDA_LIBS) -lnccl

$(BUILD)/bench/bench_cuda.o: bench/bench_cuda.cu
	@mkdir -p $(dir $@)
	@echo "NVCC $<"
	@$(NVCC) $(NVCC_FLAGS) -Ibench -Iverifier -MD -MP -MF $(@:.o=.d) -c $< -o $@

# bench_cuda runs the verifier (libplan.a) on the plugin, and calls the
# plugin's gemm layer directly: linked to it, found beside it ($ORIGIN/..).
$(BENCH_CUDA): $(BUILD)/bench/bench_cuda.o $(STATIC) $(CUDA_PLUGIN)
	$(NVCC) $(CUDA_ARCH) -o $@ $< $(STATIC) -L$(BUILD) -l:libplan-cuda.so \
	  $(CUDA_LIBS) $(PKG_LIBS) -lm -Xlinker --disable-new-dtags \
	  -Xlinker -rpath,'$$ORIGIN/..:$$ORIGIN'

cuda: $(CUDA_PLUGIN) $(NCCL_CHECK) $(BENCH_CUDA)

# The virtual-rank collectives built for the host (collectives_emu.h) and
# their test: no CUDA needed, so make test runs it everywhere.
VEMU_OBJ := $(BUILD)/cuda-vemu/collectives_virtual.o
VEMU_TEST := $(BUILD)/tests/gpu/test_virtual_emu
$(VEMU_OBJ): runners/cuda/collectives_virtual.cu
	@mkdir -p $(dir $@)
	@echo "CXX $< (emulated)"
	@$(CXX) -x c++ -std=c++17 -fPIC $(OPT) -Wall -Wextra -Wshadow -Werror \
	  -Ilibplan/include -Ilibplan/src -Irunners -Irunners/cuda \
	  -MMD -MP -c $< -o $@

$(VEMU_TEST): tests/gpu/test_virtual_emu.c $(VEMU_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -Irunners/cuda -o $@ $< $(VEMU_OBJ) -lcmocka

check-cuda-virtual: $(VEMU_TEST)
	@sh tests/run_unit.sh $(VEMU_TEST)

# The bundle's own links of the tool and the op sweep: an $ORIGIN run path
# (DT_RPATH, which also serves the libraries' own dependencies), so the
# libraries copied beside them are found wherever the folder goes.
BUNDLE_RPATH := -Wl,--disable-new-dtags -Wl,-rpath,'$$ORIGIN'
$(BUILD)/gpu-bundle-bin/plan: $(CLI_OBJ) $(SEARCH_OBJ) $(LUA_OBJ) $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $(BUNDLE_RPATH) -o $@ $(CLI_OBJ) $(SEARCH_OBJ) $(LUA_OBJ) $(STATIC) \
	  $(LDLIBS_ALL) $(LUA_LIBS) $(CBC_LIBS)

$(BUILD)/gpu-bundle-bin/test_sweep: tests/unit/test_sweep.c $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -Itests $(LDFLAGS) -Wl,--disable-new-dtags \
	  -Wl,-rpath,'$$ORIGIN/../..' -o $@ $< $(STATIC) $(LDLIBS_ALL) -lcmocka

# `make test`: build breaks of the CUDA sources are caught where nvcc is,
# and the bundle is checked (tests/gpu/test_bundle.sh).
cuda-build:
	@if [ -n "$(NVCC)" ]; then $(MAKE) --no-print-directory check-gpu-bundle; \
	else echo "cuda: skipped (no nvcc on PATH or in /usr/local/cuda/bin): the CUDA plugin and the GPU bundle are not built"; fi

check-gpu-bundle: gpu-bundle
	@sh tests/gpu/test_bundle.sh $(GPU_BUNDLE) $(BUILD)

# The kernels' agreement test on the device (kernels.mk's CUDA_GPU_TEST)
# and the NCCL communicator's test (kernels.mk's COMM_NCCL_TEST, run with
# --device) go into the bundle too when they are defined.
gpu-bundle: all cuda $(BUILD)/gpu-bundle-bin/plan $(BUILD)/gpu-bundle-bin/test_sweep
	@if [ -n "$(CUDA_GPU_TEST)" ]; then $(MAKE) --no-print-directory $(CUDA_GPU_TEST); fi
	@if [ -n "$(COMM_NCCL_TEST)" ]; then $(MAKE) --no-print-directory $(COMM_NCCL_TEST); fi
	@sh tests/gpu/make_bundle.sh $(BUILD) $(GPU_BUNDLE) $(CUDA_GPU_TEST)

gpu-check: gpu-bundle
	@sh $(GPU_BUNDLE)/tests/gpu/run.sh $(BUILD)/gpu-check
