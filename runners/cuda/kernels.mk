# The CUDA runner's op kernels (runners/cuda/kernels*.cu, gemm*.cu).
# Included from the Makefile.
#
#   make check-cuda-emu  builds the kernel sources with the host C++
#                        compiler (emulation: runners/cuda/emu.h, no CUDA
#                        needed) and runs tests/cuda/test_cuda_emu.c, the
#                        agreement test against the CPU runner
#   make cuda-kernels    compiles the kernel sources with nvcc into
#                        $(BUILD)/runners/cuda/*.o (the pattern rule of
#                        runners/cuda/cuda.mk), as the plugin links them

CUDA_KERN_SRC := $(sort $(wildcard runners/cuda/kernels*.cu runners/cuda/gemm*.cu))
CUDA_KERN_OBJ := $(CUDA_KERN_SRC:%.cu=$(BUILD)/%.o)
CUDA_EMU_OBJ := $(CUDA_KERN_SRC:runners/cuda/%.cu=$(BUILD)/cuda-emu/%.o)
CUDA_EMU_TEST := $(BUILD)/tests/cuda/test_cuda_emu

# No contraction of a * b + c into fma, on the device or the host: the
# kernels then round like the CPU runner's plain C, bit for bit.
$(CUDA_KERN_OBJ): NVCC_FLAGS += --fmad=false

CUDA_EMU_CXXFLAGS := -x c++ -std=c++17 -fPIC $(OPT) -ffp-contract=off \
  -fno-exceptions -fno-rtti -Wall -Wextra -Wshadow -Wpointer-arith \
  -Wformat=2 -Wno-format-nonliteral -Wmissing-declarations -Werror \
  -Ilibplan/include -Ilibplan/src -Iverifier -Irunners/cpu -Irunners \
  -Irunners/cuda $(CXXFLAGS)

.PHONY: check-cuda-emu cuda-kernels

$(BUILD)/cuda-emu/%.o: runners/cuda/%.cu
	@mkdir -p $(dir $@)
	@echo "CXX $< (emulated)"
	@$(CXX) $(CUDA_EMU_CXXFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/tests/cuda/test_cuda_emu.o: tests/cuda/test_cuda_emu.c
	@mkdir -p $(dir $@)
	@echo "CC $<"
	@$(CC) $(CFLAGS_ALL) -Irunners/cuda -Itests -MMD -MP -c $< -o $@

$(CUDA_EMU_TEST): $(BUILD)/tests/cuda/test_cuda_emu.o $(CUDA_EMU_OBJ) $(STATIC)
	$(CXX) $(LDFLAGS) -o $@ $< $(CUDA_EMU_OBJ) $(STATIC) $(LDLIBS_ALL) -lcmocka

check-cuda-emu: $(CUDA_EMU_TEST)
	@sh tests/run_unit.sh $(CUDA_EMU_TEST)

cuda-kernels: $(CUDA_KERN_OBJ)
