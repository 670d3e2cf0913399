# The CUDA runner's op kernels (runners/cuda/kernels*.cu, gemm*.cu).
# Included from the Makefile.
#
#   make check-cuda-emu  builds the kernel sources with the host C++
#                        compiler (emulation: runners/cuda/emu.h, no CUDA
#                        needed) and runs the agreement test against the
#                        CPU runner: tests/cuda/test_cuda_emu.c (the tests)
#                        over tests/cuda/agree*.c (the harness, the cases)
#   make cuda-kernels    compiles the kernel sources with nvcc into
#                        $(BUILD)/runners/cuda/*.o (the pattern rule of
#                        runners/cuda/cuda.mk), as the plugin links them
#   make check-cuda-gpu  the same test against those objects, on the GPU
#                        (skipped, and said so, without a usable device)

CUDA_KERN_SRC := $(sort $(wildcard runners/cuda/kernels*.cu runners/cuda/gemm*.cu))
CUDA_KERN_OBJ := $(CUDA_KERN_SRC:%.cu=$(BUILD)/%.o)
CUDA_EMU_OBJ := $(CUDA_KERN_SRC:runners/cuda/%.cu=$(BUILD)/cuda-emu/%.o)
CUDA_EMU_TEST := $(BUILD)/tests/cuda/test_cuda_emu
# The agreement test's sources, each compiled twice: for the host test
# here, and with PLAN_CUDA_DEVICE_TEST for the device test below (every
# file of it sees the same ON_DEVICE: tests/cuda/agree.h).
CUDA_AGREE_SRC := tests/cuda/test_cuda_emu.c $(sort $(wildcard tests/cuda/agree*.c))
CUDA_EMU_TEST_OBJ := $(CUDA_AGREE_SRC:tests/cuda/%.c=$(BUILD)/tests/cuda/%.o)
CUDA_GPU_TEST_OBJ := $(CUDA_AGREE_SRC:tests/cuda/%.c=$(BUILD)/tests/cuda/device/%.o)

# No contraction of a * b + c into fma, on the device or the host: the
# kernels then round like the CPU runner's plain C, bit for bit.
$(CUDA_KERN_OBJ): NVCC_FLAGS += --fmad=false

CUDA_EMU_CXXFLAGS := -x c++ -std=c++17 -fPIC $(OPT) -ffp-contract=off \
  -fno-exceptions -fno-rtti -Wall -Wextra -Wshadow -Wpointer-arith \
  -Wformat=2 -Wno-format-nonliteral -Wmissing-declarations -Werror \
  -Ilibplan/include -Ilibplan/src -Irunners -Irunners/cuda $(CXXFLAGS)

.PHONY: check-cuda-emu cuda-kernels check-cuda-gpu

# The emulation needs a C++ compiler (the kernels are templates); without
# one the suite fails saying so rather than passing untested.
.PHONY: cuda-emu-cxx
cuda-emu-cxx:
	@command -v $(CXX) >/dev/null 2>&1 || { echo "check-cuda-emu: no C++ compiler ($(CXX)): install g++" >&2; exit 2; }

$(BUILD)/cuda-emu/%.o: runners/cuda/%.cu | cuda-emu-cxx
	@mkdir -p $(dir $@)
	@echo "CXX $< (emulated)"
	@$(CXX) $(CUDA_EMU_CXXFLAGS) -MMD -MP -c $< -o $@

$(CUDA_EMU_TEST_OBJ): $(BUILD)/tests/cuda/%.o: tests/cuda/%.c
	@mkdir -p $(dir $@)
	@echo "CC $<"
	@$(CC) $(CFLAGS_ALL) -Irunners/cuda -Itests -MMD -MP -c $< -o $@

$(CUDA_EMU_TEST): $(CUDA_EMU_TEST_OBJ) $(CUDA_EMU_OBJ) $(STATIC)
	$(CXX) $(LDFLAGS) -o $@ $(CUDA_EMU_TEST_OBJ) $(CUDA_EMU_OBJ) $(STATIC) \
	  $(LDLIBS_ALL) -lcmocka

check-cuda-emu: $(CUDA_EMU_TEST)
	@sh tests/run_unit.sh $(CUDA_EMU_TEST)

cuda-kernels: $(CUDA_KERN_OBJ)

# The same agreement test against the nvcc objects, for a GPU machine:
# exit 77 (no usable device) is reported as skipped, not passed.
CUDA_GPU_TEST := $(BUILD)/tests/cuda/test_cuda_gpu

$(CUDA_GPU_TEST_OBJ): $(BUILD)/tests/cuda/device/%.o: tests/cuda/%.c
	@mkdir -p $(dir $@)
	@echo "CC $< (device)"
	@$(CC) $(CFLAGS_ALL) -DPLAN_CUDA_DEVICE_TEST -Irunners/cuda -Itests -MMD -MP -c $< -o $@

$(CUDA_GPU_TEST): $(CUDA_GPU_TEST_OBJ) $(CUDA_KERN_OBJ) $(STATIC)
	$(NVCC) $(CUDA_ARCH) -o $@ $(CUDA_GPU_TEST_OBJ) $(CUDA_KERN_OBJ) $(STATIC) \
	  $(CUDA_LIBS) $(PKG_LIBS) -lm -lcmocka

check-cuda-gpu: $(CUDA_GPU_TEST)
	@$(CUDA_GPU_TEST); rc=$$?; \
	if [ $$rc -eq 77 ]; then echo "check-cuda-gpu: skipped (no usable CUDA device)"; \
	elif [ $$rc -ne 0 ]; then echo "FAILED: $(CUDA_GPU_TEST)"; exit 1; fi

# The plugin built for the host (tests/cuda/plugin_emu.cc: the emulated
# kernels and virtual-rank all-reduce behind the real entry point), and
# plans verified through it: `plan verify --runner cuda` and the op sweep
# on a 2x2 mesh, every legal strategy, against the CPU runner's verdicts
# (tests/cuda/run_emu.sh). No CUDA needed: make test runs it everywhere.
CUDA_EMU_PLUGIN := $(BUILD)/libplan-cuda-emu.so
CUDA_EMU_VEMU := $(BUILD)/cuda-emu/collectives_virtual.o

$(CUDA_EMU_VEMU): runners/cuda/collectives_virtual.cu | cuda-emu-cxx
	@mkdir -p $(dir $@)
	@echo "CXX $< (emulated)"
	@$(CXX) $(CUDA_EMU_CXXFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/cuda-emu/plugin_emu.o: tests/cuda/plugin_emu.cc | cuda-emu-cxx
	@mkdir -p $(dir $@)
	@echo "CXX $<"
	@$(CXX) $(CUDA_EMU_CXXFLAGS) -fvisibility=hidden -MMD -MP -c $< -o $@

# The NCCL communicator (comm_nccl.cu, with nccl_setup.cu) built for the
# host over collectives_emu.h and nccl_emu.h: NCCL is loaded at comm_open.
CUDA_EMU_COMM := $(BUILD)/cuda-emu/comm_nccl.o $(BUILD)/cuda-emu/nccl_setup.o

# libplan.a's symbols stay hidden in the plugin, as in the real one.
$(CUDA_EMU_PLUGIN): $(BUILD)/cuda-emu/plugin_emu.o $(CUDA_EMU_OBJ) $(CUDA_EMU_VEMU) $(CUDA_EMU_COMM) $(STATIC)
	$(CXX) -shared $(LDFLAGS) -o $@ $(BUILD)/cuda-emu/plugin_emu.o \
	  $(CUDA_EMU_OBJ) $(CUDA_EMU_VEMU) $(CUDA_EMU_COMM) \
	  -Wl,--exclude-libs,ALL $(STATIC) $(LDLIBS_ALL) -ldl -Wl,-z,defs

.PHONY: check-cuda-emu-plugin
check-cuda-emu-plugin: $(CUDA_EMU_PLUGIN) $(TOOL) $(BUILD)/tests/test_sweep
	@sh tests/cuda/run_emu.sh $(BUILD)

# The plugin's NCCL communicator on the host: tests/cuda/test_comm_nccl.c
# dlopens the plugin above, and runs its comm_open in 4 processes over
# tests/cuda/fake_nccl.c, a host library standing in for libnccl.so.2
# (PLAN_NCCL_LIBRARY), built with and without ncclCommSplit. No CUDA and
# no NCCL needed: make test runs it everywhere.
FAKE_NCCL := $(BUILD)/tests/cuda/libfake-nccl.so
FAKE_NCCL_NOSPLIT := $(BUILD)/tests/cuda/libfake-nccl-nosplit.so
COMM_NCCL_TEST := $(BUILD)/tests/cuda/test_comm_nccl

# A stand-in for libnccl.so.2 exports its functions: default visibility
# after the library's -fvisibility=hidden.
FAKE_NCCL_CFLAGS = $(CFLAGS_ALL) -fvisibility=default -Irunners/cuda

$(FAKE_NCCL): tests/cuda/fake_nccl.c runners/cuda/nccl_emu.h
	@mkdir -p $(dir $@)
	$(CC) $(FAKE_NCCL_CFLAGS) -shared $(LDFLAGS) -o $@ $<

$(FAKE_NCCL_NOSPLIT): tests/cuda/fake_nccl.c runners/cuda/nccl_emu.h
	@mkdir -p $(dir $@)
	$(CC) $(FAKE_NCCL_CFLAGS) -DFAKE_NCCL_NO_SPLIT -shared \
	  $(LDFLAGS) -o $@ $<

# libplan.a: the library the test and the plugin share.
$(COMM_NCCL_TEST): tests/cuda/test_comm_nccl.c $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -Irunners/cuda $(LDFLAGS) -o $@ $< $(STATIC) \
	  $(LDLIBS_ALL) -ldl

# Then plan verify --distributed --runner cuda --comm nccl through the
# same plugin and fakes (tests/dist/run.sh: every example, model and
# training plan and the bug corpus, a process per rank, the one-process
# report), with and without ncclCommSplit.
.PHONY: check-cuda-emu-nccl
check-cuda-emu-nccl: $(CUDA_EMU_PLUGIN) $(FAKE_NCCL) $(FAKE_NCCL_NOSPLIT) $(COMM_NCCL_TEST) $(TOOL)
	@$(COMM_NCCL_TEST) $(abspath $(CUDA_EMU_PLUGIN)) $(abspath $(FAKE_NCCL)) \
	  $(abspath $(FAKE_NCCL_NOSPLIT))
	@for lib in $(FAKE_NCCL) $(FAKE_NCCL_NOSPLIT); do \
	  echo "plan verify --distributed over the plugin's communicator on $$(basename $$lib):"; \
	  PLAN_CUDA_PLUGIN=$(abspath $(CUDA_EMU_PLUGIN)) PLAN_NCCL_LIBRARY=$$(cd $$(dirname $$lib) && pwd)/$$(basename $$lib) \
	    sh tests/dist/run.sh $(TOOL) --runner cuda --comm nccl || exit 1; \
	done
