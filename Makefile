# libplan build. `make help` lists the targets.
#
# Everything builds out of tree under $(BUILD) (default build/); the sanitizer
# run uses build-asan/. Dependencies are Debian packages; `make deps` installs
# the missing ones when run as root and otherwise prints the apt-get line.

PREFIX ?= /usr/local
BUILD ?= build
CC ?= cc
SAN ?= 0
FUZZ_SECONDS ?= 30
# Parallel jobs for make test's builds (each suite's prerequisites build in
# parallel; the suites themselves run one at a time).
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

PKGS := yaml-0.1 libxxhash openblas
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null || echo -lyaml -lxxhash -lopenblas)

WARN := -Wall -Wextra -Wshadow -Wmissing-prototypes -Wstrict-prototypes \
        -Wpointer-arith -Wformat=2 -Wno-format-nonliteral -Werror
OPT ?= -O2 -g
# Include paths by folder: each layer sees only what it may include
# (tests/layers/includes.py checks the includes themselves). The core: the
# public API and its own internals; the runners (runners/*.c, runners/cpu):
# also the runner interface; the verifier: also its own folder. Everything
# else (cli/, lua/, the tests, the benchmarks) sees every folder for now.
INC_CORE := -Ilibplan/include -Ilibplan/src
INC_RUNNERS := $(INC_CORE) -Irunners
INC_VERIFIER := $(INC_RUNNERS) -Iverifier
INC_ALL := -Ilibplan/include -Ilibplan/src -Iverifier -Irunners/cpu -Irunners
LAYER_INC = $(INC_ALL)
# The flags every C file compiles with, with its folder's include paths
# (LAYER_INC, set per object folder below; recursive, so each object's).
CFLAGS_ALL = -std=c11 -D_POSIX_C_SOURCE=200809L -pthread -fPIC -fvisibility=hidden $(OPT) $(WARN) \
             $(LAYER_INC) $(PKG_CFLAGS) $(CFLAGS)
$(BUILD)/libplan/src/%.o: LAYER_INC = $(INC_CORE)
$(BUILD)/runners/%.o: LAYER_INC = $(INC_RUNNERS)
$(BUILD)/verifier/%.o: LAYER_INC = $(INC_VERIFIER)
$(BUILD)/runners/mpi/%.o: LAYER_INC = $(INC_RUNNERS) $(MPI_CFLAGS)
LDLIBS_ALL := $(PKG_LIBS) -lm -pthread $(LDLIBS)
LUA_CFLAGS := $(shell pkg-config --cflags lua5.4 2>/dev/null || echo -I/usr/include/lua5.4)
LUA_LIBS := $(shell pkg-config --libs lua5.4 2>/dev/null || echo -llua5.4)
# CBC (coinor-libcbc-dev), the ilp strategy's solver: the Lua frontend only.
CBC_CFLAGS := $(shell pkg-config --cflags cbc 2>/dev/null || echo -I/usr/include/coin)
CBC_LIBS := $(shell pkg-config --libs cbc 2>/dev/null || echo -lCbcSolver -lCbc -lCgl -lOsiClp -lClp -lOsi -lCoinUtils)

ifeq ($(SAN),1)
CFLAGS_ALL += -fsanitize=address,undefined -fno-omit-frame-pointer \
              -fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=address,undefined
endif

SOVERSION := 0
# Two libraries by need. libplan (the core: read, validate, hash, diff,
# price, lower, schedule) needs libyaml and xxHash only. libplan-verify adds
# the verifier, the CPU runner (OpenBLAS) and the communicators; as a shared
# library it carries the core too (one copy of it, and of the thread's last
# error, per process), so a program links one of the two.
CORE_SRC := $(sort $(wildcard libplan/src/*/*.c))
CORE_OBJ := $(CORE_SRC:%.c=$(BUILD)/%.o)
VERIFY_SRC := $(sort $(wildcard verifier/*.c runners/*.c runners/cpu/*.c))
VERIFY_OBJ := $(VERIFY_SRC:%.c=$(BUILD)/%.o)
LIB_SRC := $(CORE_SRC) $(VERIFY_SRC)
LIB_OBJ := $(CORE_OBJ) $(VERIFY_OBJ)
CLI_SRC := $(sort $(wildcard cli/*.c))
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/%.o)
UNIT_SRC := $(sort $(wildcard tests/unit/test_*.c))
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
HEADERS := $(sort $(wildcard libplan/include/libplan/*.h))
HEADER_CHECKS := $(HEADERS:libplan/include/libplan/%.h=$(BUILD)/headers/%.o)
# The Lua module (lua/): linked into the tool and built as plan.so. Its Lua
# sources (the search driver, lua/strategies/) are embedded as C.
LUA_FILES := $(sort $(wildcard lua/*.lua lua/strategies/*.lua))
# The search API (libplan/search.h) and the Lua host it shares with the
# tool's `plan run`: the tool and libplan-search.so, not plan.so.
SEARCH_SRC := lua/lua_host.c lua/search_api.c
SEARCH_OBJ := $(SEARCH_SRC:%.c=$(BUILD)/%.o)
LUA_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(sort $(filter-out $(SEARCH_SRC),$(wildcard lua/*.c)))) \
           $(BUILD)/gen/lua_sources.o
LUA_MOD := $(BUILD)/plan.so
BENCH_SRC := $(sort $(wildcard bench/*.c))
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)

CORE_STATIC := $(BUILD)/libplan.a
VERIFY_STATIC := $(BUILD)/libplan-verify.a
# What the tool, the tests and the plugins link: both archives, in order.
STATIC := $(VERIFY_STATIC) $(CORE_STATIC)
CORE_SHARED := $(BUILD)/libplan.so.$(SOVERSION)
# The full library (core + verifier): what the Python binding loads.
SHARED := $(BUILD)/libplan-verify.so.$(SOVERSION)
# The full library and search (libplan/search.h): libplan-verify's objects,
# the Lua module's (from an archive, so that --exclude-libs hides
# luaopen_plan) and the search API; needs Lua 5.4 and CBC.
LUA_STATIC := $(BUILD)/libplan-lua.a
SEARCH_SHARED := $(BUILD)/libplan-search.so.$(SOVERSION)
CORE_LIBS := $(shell pkg-config --libs yaml-0.1 libxxhash 2>/dev/null || echo -lyaml -lxxhash) -lm -pthread
TOOL := $(BUILD)/plan
# The MPI communicator (runners/mpi): a plugin linked with libmpi, which
# the library dlopens for a distributed run (runners/comm_mpi_load.c); its
# one object sees mpi.h (as system headers: no warnings of theirs).
MPI_CFLAGS := $(patsubst -I%,-isystem %,$(shell mpicc --showme:compile 2>/dev/null || pkg-config --cflags ompi-c))
MPI_LIBS := $(shell mpicc --showme:link 2>/dev/null || pkg-config --libs ompi-c)
MPI_PLUGIN := $(BUILD)/libplan-comm-mpi.so

.PHONY: check-format all help deps deps-python test check-unit check-headers check-symbols check-conformance \
        check-cli check-dist check-models check-lua check-security check-python check-corpus check-docs pictures check-install wheel demo tour bench asan fuzz check-fuzz fmt lint install uninstall clean \
        tests-build

all: $(STATIC) $(CORE_SHARED) $(SHARED) $(BUILD)/libplan.so $(BUILD)/libplan-verify.so \
     $(SEARCH_SHARED) $(BUILD)/libplan-search.so $(TOOL) $(LUA_MOD) $(MPI_PLUGIN)

help:
	@echo "make            build libplan.a, libplan.so and the plan tool"
	@echo "make deps       install missing Debian packages (root) or say which"
	@echo "make test       every test: unit, headers, conformance, CLI, sanitizers"
	@echo "make demo       search, price, verify and write a plan for a Llama-style model"
	@echo "make tour       validate, hash, verify and show every example"
	@echo "make bench      run the benchmarks (bench/)"
	@echo "make asan       unit + conformance + corpus tests under ASan/UBSan"
	@echo "make fuzz       run the libFuzzer targets for FUZZ_SECONDS each"
	@echo "make check-fuzz run each libFuzzer target briefly from the seeds (in make test)"
	@echo "make wheel      build the Python wheel (with libplan-search) in build/wheel"
	@echo "make cuda       build the CUDA runner plugin and its GPU tests (needs nvcc)"
	@echo "make gpu-bundle build/gpu-bundle: the tool, plugin and GPU tests for a GPU machine"
	@echo "make gpu-check  run the GPU tests and benchmarks (skipped without a GPU)"
	@echo "make fmt        clang-format the C sources"
	@echo "make lint       cppcheck over the C sources"
	@echo "make install    install under PREFIX (default /usr/local), DESTDIR for staging"
	@echo "make uninstall  remove what make install put under PREFIX"

deps:
	@sh scripts/deps.sh

deps-python:
	@sh scripts/deps-python.sh

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "CC $<"
	@$(CC) $(CFLAGS_ALL) -MMD -MP -c $< -o $@

$(CORE_STATIC): $(CORE_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

$(VERIFY_STATIC): $(VERIFY_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

# -z defs: the core links with libyaml and xxHash alone, nothing else.
$(CORE_SHARED): $(CORE_OBJ)
	$(CC) -shared -Wl,-soname,libplan.so.$(SOVERSION) -Wl,-z,defs -Wl,--as-needed \
	  $(LDFLAGS) -o $@ $^ $(CORE_LIBS)

$(SHARED): $(LIB_OBJ)
	$(CC) -shared -Wl,-soname,libplan-verify.so.$(SOVERSION) -Wl,-z,defs -Wl,--as-needed \
	  $(LDFLAGS) -o $@ $^ $(LDLIBS_ALL)

$(LUA_STATIC): $(LUA_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

$(SEARCH_SHARED): $(LIB_OBJ) $(SEARCH_OBJ) $(LUA_STATIC)
	$(CC) -shared -Wl,-soname,libplan-search.so.$(SOVERSION) -Wl,-z,defs -Wl,--as-needed \
	  -Wl,--exclude-libs,ALL $(LDFLAGS) -o $@ $(LIB_OBJ) $(SEARCH_OBJ) $(LUA_STATIC) \
	  $(LUA_LIBS) $(CBC_LIBS) $(LDLIBS_ALL)

$(BUILD)/libplan-search.so: $(SEARCH_SHARED)
	ln -sf libplan-search.so.$(SOVERSION) $@

$(BUILD)/libplan.so: $(CORE_SHARED)
	ln -sf libplan.so.$(SOVERSION) $@

$(BUILD)/libplan-verify.so: $(SHARED)
	ln -sf libplan-verify.so.$(SOVERSION) $@

$(CLI_OBJ) $(LUA_OBJ): CFLAGS_ALL += $(LUA_CFLAGS) $(CBC_CFLAGS) -Ilua
$(SEARCH_OBJ): CFLAGS_ALL += $(LUA_CFLAGS) -Ilua

# The runner plugins' last folder to look in (runners/plugin_load.c).
$(BUILD)/runners/plugin_load.o: CFLAGS_ALL += -DPLAN_PREFIX='"$(PREFIX)"'

$(BUILD)/gen/lua_sources.c: scripts/embed_lua.py $(LUA_FILES)
	@mkdir -p $(dir $@)
	python3 scripts/embed_lua.py $@ lua $(LUA_FILES)

$(BUILD)/gen/lua_sources.o: $(BUILD)/gen/lua_sources.c
	@$(CC) $(CFLAGS_ALL) -c $< -o $@

$(TOOL): $(CLI_OBJ) $(SEARCH_OBJ) $(LUA_OBJ) $(STATIC)
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(SEARCH_OBJ) $(LUA_OBJ) $(STATIC) $(LDLIBS_ALL) $(LUA_LIBS) $(CBC_LIBS)

# libplan.a's symbols stay hidden in the plugin, as in the CUDA one.
$(MPI_PLUGIN): $(BUILD)/runners/mpi/comm_mpi.o $(STATIC)
	$(CC) -shared $(LDFLAGS) -o $@ $< -Wl,--exclude-libs,ALL $(STATIC) \
	  $(MPI_LIBS) $(LDLIBS_ALL) -Wl,-z,defs

# For a stock lua5.4 (`require "plan"`): the interpreter provides Lua itself.
$(LUA_MOD): $(LUA_OBJ) $(STATIC)
	$(CC) -shared $(LDFLAGS) -Wl,--exclude-libs,ALL -o $@ $(LUA_OBJ) $(STATIC) $(LDLIBS_ALL) $(CBC_LIBS)

# The Lua module built against an installed libplan found by pkg-config,
# for the rockspec (libplan-scm-1.rockspec: `luarocks make`): plan.so's
# sources, linked to the shared libplan-verify instead of the archives.
# luarocks passes CFLAGS, LUA_INCDIR and, to rock-install, INST_LIBDIR.
ROCK_BUILD ?= build-rock
ROCK_LUA_CFLAGS = $(if $(LUA_INCDIR),-I$(LUA_INCDIR),$(LUA_CFLAGS))
.PHONY: rock rock-install
rock:
	@mkdir -p $(ROCK_BUILD)
	python3 scripts/embed_lua.py $(ROCK_BUILD)/lua_sources.c lua $(LUA_FILES)
	$(CC) -std=c11 -D_POSIX_C_SOURCE=200809L -fPIC -shared $(CFLAGS) \
	  $$(pkg-config --cflags libplan-verify) -Ilua $(ROCK_LUA_CFLAGS) $(CBC_CFLAGS) \
	  -o $(ROCK_BUILD)/plan.so $(filter-out $(SEARCH_SRC),$(wildcard lua/*.c)) \
	  $(ROCK_BUILD)/lua_sources.c $$(pkg-config --libs libplan-verify) $(CBC_LIBS)
rock-install:
	install -d $(INST_LIBDIR)
	install -m 755 $(ROCK_BUILD)/plan.so $(INST_LIBDIR)/plan.so

# The search API's test links the Lua objects too, and runs the tool.
$(BUILD)/tests/test_search_api: tests/unit/test_search_api.c $(SEARCH_OBJ) $(LUA_OBJ) $(STATIC) | $(TOOL)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -Itests -MMD -MP $(LDFLAGS) -o $@ $< $(SEARCH_OBJ) $(LUA_OBJ) $(STATIC) \
	  $(LDLIBS_ALL) $(LUA_LIBS) $(CBC_LIBS) -lcmocka

$(BUILD)/tests/%: tests/unit/%.c $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -Itests -MMD -MP $(LDFLAGS) -o $@ $< $(STATIC) $(LDLIBS_ALL) -lcmocka

# Each public header must compile on its own, seeing only the public API.
$(BUILD)/headers/%.o: LAYER_INC = -Ilibplan/include
$(BUILD)/headers/%.o: libplan/include/libplan/%.h
	@mkdir -p $(dir $@)
	printf '#include "libplan/%s.h"\n' $* > $(BUILD)/headers/$*.c
	$(CC) $(CFLAGS_ALL) -c $(BUILD)/headers/$*.c -o $@

$(BUILD)/bench/%: bench/%.c $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -MMD -MP $(LDFLAGS) -o $@ $< $(STATIC) $(LDLIBS_ALL)

tests-build: all $(UNIT_BIN) $(HEADER_CHECKS)

# The libraries export exactly the headers' PLAN_API functions; the archives
# define no global without the plan_ prefix (tests/layers/symbols.sh).
check-symbols: $(STATIC) $(CORE_SHARED) $(SHARED) $(SEARCH_SHARED)
	@sh tests/layers/symbols.sh $(BUILD)

# The layers: each folder's includes against its allow list, and the
# symbol references between the layers' objects (tests/layers/includes.py);
# then its self-test, which must catch an injected forbidden include and
# reference.
.PHONY: check-layers
check-layers: $(STATIC) $(CLI_OBJ) $(LUA_OBJ)
	@python3 tests/layers/includes.py --build $(BUILD)
	@python3 tests/layers/includes.py --self-test --build $(BUILD)

check-headers: $(HEADER_CHECKS)
	@echo "headers: $(words $(HEADER_CHECKS)) compile alone"

check-unit: $(UNIT_BIN) $(MPI_PLUGIN)
	@sh tests/run_unit.sh $(UNIT_BIN)

check-conformance: $(TOOL)
	@sh tests/conformance/run.sh $(TOOL)

check-corpus: $(TOOL)
	@sh tests/corpus/run.sh $(TOOL)
	@sh tests/corpus/lowered/run.sh $(TOOL)

# Mutation testing of the verifier and the false-alarm sweep
# (tests/mutants): a seeded sample here, everything in `make mutants`.
MUTANT_SEEDS ?= 0
MUTANT_SAMPLE := mlp-megatron,mlp-train,transformer-block,transformer-train,moe-experts,mlp-ratios,mlp-ratios-train,mlp-overlap,fsdp-tp-overlap,lm-vocab-parallel
# examples with axes above 2: every mutant verified with the mesh reduced
# and kept, the same verdict wanted (mesh reduction finds what it hides)
MUTANT_MESH_SAMPLE := gpt2-small-block.recipe,llama3-8b-layer.recipe,dit-block.recipe,dit-torus,mixtral-moe-layer.recipe,hetero-llama
# pipelined examples, mutated in their lowered files (pipeline classes too)
MUTANT_PIPE_SAMPLE := pipeline-grid,pipeline-1f1b
.PHONY: check-mutants mutants false-alarms
check-mutants: $(TOOL)
	@python3 tests/mutants/mutate.py --plan $(TOOL) --examples $(MUTANT_SAMPLE),gpt2-small-block.recipe,$(MUTANT_PIPE_SAMPLE) \
	  --classes dropped,duplicated,other-axis,sum-to-max,gather-order,shard-dim,partial-read,wrong-operand,grad-sync,weight-swap,mb-pairing,wrong-stage,early-backward,dropped-accumulation,wait-late,reuse-in-flight,chunk-order \
	  --per-class 3 --unit-axis mlp-megatron:tp --unit-axis mlp-train:dp
	@python3 tests/mutants/false_alarms.py --plan $(TOOL) --examples $(MUTANT_SAMPLE),$(MUTANT_PIPE_SAMPLE) --seeds 0-2
	@python3 tests/mutants/mutate.py --plan $(TOOL) --examples $(MUTANT_MESH_SAMPLE) --reduce mesh --per-class 3 --jobs 2

# llama-32l.pp has 2,963 mutants at 3.5 s a verification (6 h for both
# modes on 2 cores); its 32 identical layers are sampled at 40 per class.
MUTANT_JOBS ?= 2
MUTANT_CAPS := --cap llama-32l.pp:40
mutants: $(TOOL)
	@rc=0; python3 tests/mutants/mutate.py --plan $(TOOL) --seeds $(MUTANT_SEEDS) --jobs $(MUTANT_JOBS) $(MUTANT_CAPS) \
	  --unit-axis mlp-megatron:tp --unit-axis mlp-train:dp || rc=1; \
	python3 tests/mutants/false_alarms.py --plan $(TOOL) --jobs $(MUTANT_JOBS) || rc=1; exit $$rc

false-alarms: $(TOOL)
	python3 tests/mutants/false_alarms.py --plan $(TOOL)

check-cli: $(TOOL)
	@sh tests/cli/run.sh $(TOOL)
	@sh tests/cli/scale.sh $(TOOL)
	@sh tests/cli/memory.sh $(TOOL)
	@sh tests/cli/schedules.sh $(TOOL)

# Untrusted files and hostile write targets, strict numeric flags.
.PHONY: check-security-files
check-security-files: $(TOOL)
	@sh tests/security/files.sh $(TOOL)

# The tool is built on the public API alone: every cli/*.c compiles with
# the public headers and Lua's and CBC's, none of libplan/src, verifier/ or
# runners/ (check-lua-public does the same for the Lua module).
.PHONY: check-cli-public
check-cli-public:
	@for f in $(CLI_SRC); do \
	  $(CC) -std=c11 -D_POSIX_C_SOURCE=200809L -fsyntax-only $(WARN) \
	    -Ilibplan/include -Ilua $(LUA_CFLAGS) $(CBC_CFLAGS) $$f || exit 1; \
	done
	@echo "cli-public: $(words $(CLI_SRC)) files compile with the public headers alone"

# The Lua module is built on the public API alone too: every lua/*.c
# compiles with the public headers, its own and Lua's and CBC's, none of
# libplan/src, verifier/ or runners/.
.PHONY: check-lua-public
LUA_PUBLIC_SRC := $(sort $(wildcard lua/*.c))
check-lua-public:
	@for f in $(LUA_PUBLIC_SRC); do \
	  $(CC) -std=c11 -D_POSIX_C_SOURCE=200809L -fsyntax-only $(WARN) \
	    -Ilibplan/include -Ilua $(LUA_CFLAGS) $(CBC_CFLAGS) $$f || exit 1; \
	done
	@echo "lua-public: $(words $(LUA_PUBLIC_SRC)) files compile with the public headers alone"

# plan verify --distributed: a process per rank under mpirun, over MPI
# (tests/dist/run.sh)
check-dist: $(TOOL) $(MPI_PLUGIN)
	@sh tests/dist/run.sh $(TOOL)

check-models: $(TOOL)
	@sh tests/models/run.sh $(TOOL)

# README.md and docs/*.md: shell blocks run, the CLI reference matches
# each verb's --help, relative links resolve (tests/docs/run.sh).
check-docs: $(TOOL) $(LUA_MOD)
	@sh tests/docs/run.sh $(TOOL)
	@sh tests/docs/architecture.sh && sh tests/docs/citations.sh
	@sh tests/docs/pictures.sh $(TOOL)

# the pictures in docs/img, written again (check-docs fails on stale ones)
pictures: $(TOOL)
	@sh tests/docs/pictures.sh $(TOOL) --write

check-lua: $(TOOL) $(LUA_MOD)
	@SAN=$(SAN) sh tests/lua/run.sh $(TOOL) $(LUA_MOD)

# Untrusted plan files: replay trusts nothing in them, the Lua sandbox's
# limits hold (tests/security/run.sh).
check-security: $(TOOL) $(SEARCH_SHARED)
	@sh tests/security/run.sh $(TOOL) $(abspath $(SEARCH_SHARED))

# The Python binding (bindings/python) against this build's libplan.so.
check-python: $(CORE_SHARED) $(SHARED) $(BUILD)/libplan-verify.so $(SEARCH_SHARED) $(TOOL)
	@LIBPLAN_LIBRARY=$(abspath $(SEARCH_SHARED)) LIBPLAN_TOOL=$(abspath $(TOOL)) \
	  python3 tests/python/run.py

# A wheel of the Python binding that carries the search library (the
# widest: search and replay in-process), in $(BUILD)/wheel.
wheel: $(SEARCH_SHARED)
	python3 bindings/python/build_backend.py --library $(SEARCH_SHARED) --out $(BUILD)/wheel

# The README's test command. Everything the suites run is built first
# (suites-build, in parallel), then the suites run two at a time
# (tests/suites.sh, SUITE_JOBS), each one's output printed whole: first
# the quick static checks, then the longest suites, so that the short ones
# fill the end.
SUITE_JOBS ?= 2
TEST_SUITES := check-format check-headers check-symbols check-layers check-cli-public check-lua-public \
  asan check-python check-cuda-emu-plugin check-unit check-cuda-emu-nccl lint cuda-build \
  check-mutants check-cli check-dist check-fuzz check-install check-docs check-lua check-security \
  check-models check-conformance check-corpus check-security-files check-cuda-emu check-cuda-virtual
test: deps deps-python
	$(MAKE) -j$(JOBS) suites-build
	@MAKE="$(MAKE)" JOBS=$(JOBS) SUITE_JOBS=$(SUITE_JOBS) sh tests/suites.sh $(TEST_SUITES)
	@echo "make test: all suites passed"

# What make test's suites run, built before any of them starts: no two
# suites running at once then build the same file. (A recipe, not
# prerequisites: the CUDA makefiles that name some of it come later.)
.PHONY: suites-build asan-build
suites-build:
	@$(MAKE) --no-print-directory tests-build $(CUDA_EMU_TEST) $(CUDA_EMU_PLUGIN) $(VEMU_TEST) \
	  $(FAKE_NCCL) $(FAKE_NCCL_NOSPLIT) $(COMM_NCCL_TEST) $(FUZZ_BIN) asan-build \
	  $(if $(NVCC),cuda $(BUILD)/gpu-bundle-bin/plan $(BUILD)/gpu-bundle-bin/test_sweep $(CUDA_GPU_TEST))

asan-build:
	@$(MAKE) --no-print-directory BUILD=build-asan SAN=1 OPT="-O1 -g" tests-build

# The sweep runs a third of its (case, mesh) pairs here (every op still
# swept); the plain run covers them all.
asan: asan-build
	SWEEP_SAMPLE=3 DIST_MAX_RANKS=4 $(MAKE) -j1 BUILD=build-asan SAN=1 OPT="-O1 -g" check-unit check-conformance check-corpus check-dist check-lua

demo: deps all
	@sh examples/demo.sh $(TOOL)

tour: deps all
	@sh examples/tour.sh $(TOOL)

bench: all $(BENCH_BIN)
	@sh bench/run.sh $(BUILD)

# The placement search's time on a torus and on levels
# (bench/bench_placement.c).
.PHONY: bench-placement
bench-placement: $(BUILD)/bench/bench_placement
	@$(BUILD)/bench/bench_placement

# dp and ilp with repeated-layer sharing against without it, in the same
# run: 1 to 126 layers on 3- and 4-axis meshes (bench/bench_search_layers.sh;
# minutes on 2 cores, not in `make bench` or `make test`).
.PHONY: bench-search-layers
bench-search-layers: $(BUILD)/plan
	@sh bench/bench_search_layers.sh $(BUILD)

# The overlap search's modeled step-time gain over no overlap, in the same
# run: the 32-layer Llama on a 3- and a 4-axis mesh (bench/bench_overlap.sh;
# a minute on 2 cores, not in `make bench` or `make test`).
.PHONY: bench-overlap
bench-overlap: $(BUILD)/plan
	@sh bench/bench_overlap.sh $(BUILD)

# The cost model's step against published training throughput: Llama 3 8B
# (TorchTitan, FSDP 8) and Mixtral 8x7B (Megatron-Core, EP8 PP4)
# (bench/bench_published.sh; under a second, not in `make bench`).
.PHONY: bench-published
bench-published: $(BUILD)/plan
	@sh bench/bench_published.sh $(BUILD)

# The mesh shape search's time against one recipe run in the same run
# (bench/bench_shapes.lua).
.PHONY: bench-shapes
bench-shapes: $(BUILD)/plan
	@PLAN_PROGRAM_ROOT=$(CURDIR) $(BUILD)/plan run bench/bench_shapes.lua

# The joint search (mesh, pipeline, recipe) on the 32-layer Llama against
# the hand-written pipelined recipe and one recipe run, in the same run
# (bench/bench_joint.lua).
.PHONY: bench-joint
bench-joint: $(BUILD)/plan
	@PLAN_PROGRAM_ROOT=$(CURDIR) $(BUILD)/plan run bench/bench_joint.lua

# The joint search against TorchTitan's published recipes on Llama 3 8B,
# 70B and 405B shapes, every found plan verified (bench/bench_quality.sh).
.PHONY: bench-quality
bench-quality: $(BUILD)/plan
	@sh bench/bench_quality.sh $(BUILD)

# Verify time against the rank count at full size (bench/bench_verify_ranks.sh).
.PHONY: bench-verify-ranks
bench-verify-ranks: $(BUILD)/plan
	@sh bench/bench_verify_ranks.sh $(BUILD)

# The 405B moonshot (bench/bench_moonshot.sh): a Llama-3-405B-scale step on
# 16,384 ranks generated, searched, validated, hashed and verified reduced.
.PHONY: bench-moonshot
bench-moonshot: $(BUILD)/plan
	@sh bench/bench_moonshot.sh $(BUILD)

# A parallelize'd MLP's step time against a hand-written parallelize_module
# of the same plan (bench/bench_torch_parallel.py; torch, 4 gloo processes).
.PHONY: bench-torch
bench-torch: $(CORE_SHARED) $(SHARED)
	@python3 bench/bench_torch_parallel.py

# Work in proportion to the input (bench/bench_scale.sh): validate and hash
# of 100k to 1M-op chains in three name orders, a 4M-rank verify. Not in
# `make bench` or `make test`: a few minutes on 2 cores.
.PHONY: bench-scale
bench-scale: all
	@sh bench/bench_scale.sh $(BUILD)

# The verify target (bench/bench_verify_models.sh): `plan verify --reduce`
# of every model example, exact and float, each under 5 s. Not in `make
# bench` or `make test`: a minute or two on 2 cores.
.PHONY: bench-verify-models
bench-verify-models: $(TOOL)
	@sh bench/bench_verify_models.sh $(BUILD)

# Fuzzing (libFuzzer, clang, with ASan and UBSan). The library's objects
# are built once with coverage (build-fuzz/obj, an archive of them) and
# linked into each target.
# `make fuzz` runs each target FUZZ_SECONDS on a corpus kept in
# build-fuzz/NAME.corpus; `make check-fuzz` (in make test) runs each
# FUZZ_CHECK_SECONDS from the seeds alone, with a fixed seed, so the run is
# short and the same each time: a finding (crash, leak, UB, a broken
# invariant) fails it.
FUZZ_SRC := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BIN := $(FUZZ_SRC:tests/fuzz/%.c=build-fuzz/%)
FUZZ_OBJ := $(LIB_SRC:%.c=build-fuzz/obj/%.o)
FUZZ_CHECK_SECONDS ?= 5
FUZZ_CC := clang -std=c11 -D_POSIX_C_SOURCE=200809L -g -O1 \
  -fsanitize=address,undefined -fno-sanitize-recover=undefined \
  $(INC_ALL) $(PKG_CFLAGS)
FUZZ_RUN = -max_len=65536 -rss_limit_mb=2048 -timeout=10
build-fuzz/obj/%.o: %.c
	@mkdir -p $(@D)
	$(FUZZ_CC) -fsanitize=fuzzer-no-link -c $< -o $@
build-fuzz/libplan-fuzz.a: $(FUZZ_OBJ)
	ar rcs $@ $^
build-fuzz/fuzz_%: tests/fuzz/fuzz_%.c build-fuzz/libplan-fuzz.a
	$(FUZZ_CC) -fsanitize=fuzzer $< build-fuzz/libplan-fuzz.a -o $@ $(LDLIBS_ALL)
fuzz: $(FUZZ_BIN)
	@for n in $(FUZZ_BIN); do \
	  mkdir -p $$n.corpus; \
	  $$n -max_total_time=$(FUZZ_SECONDS) $(FUZZ_RUN) \
	    $$n.corpus tests/fuzz/seeds || exit 1; \
	done
	@echo "fuzz: no findings"
check-fuzz: $(FUZZ_BIN)
	@pass=0; fail=0; for n in $(FUZZ_BIN); do \
	  c=$$(mktemp -d); \
	  if $$n -seed=1 -max_total_time=$(FUZZ_CHECK_SECONDS) $(FUZZ_RUN) \
	      -print_final_stats=0 $$c tests/fuzz/seeds >$$c.log 2>&1; then \
	    pass=$$((pass+1)); \
	    echo "ok    $$(basename $$n): $$(grep -o 'Done [0-9]* runs' $$c.log), $$(ls $$c | wc -l) new inputs"; \
	  else \
	    fail=$$((fail+1)); echo "FAIL  $$(basename $$n):"; tail -40 $$c.log; \
	  fi; \
	  rm -rf $$c $$c.log; \
	done; \
	echo "fuzz: $$pass passed, $$fail failed"; [ $$fail -eq 0 ]

# The C sources clang-format keeps (.clang-format); the CUDA sources are
# left to nvcc's dialect. `make fmt` rewrites them, `make check-format`
# (in make test) fails on any difference.
FMT_FILES := $(shell git ls-files '*.c' '*.h' 2>/dev/null | grep -v '^spec/')
fmt:
	clang-format -i $(FMT_FILES)

check-format:
	@clang-format --dry-run --Werror $(FMT_FILES) && \
	  echo "format: $(words $(FMT_FILES)) files as clang-format writes them"

# cppcheck over every C folder of the project, luacheck over the Lua sources
# and tests (.luacheckrc); in make test.
LINT_DIRS := libplan/src verifier runners cli lua
lint:
	cppcheck -j2 --quiet --error-exitcode=1 --enable=warning,portability \
	  --std=c11 --inline-suppr -Ilibplan/include -Ilibplan/src \
	  --suppress=missingIncludeSystem $(LINT_DIRS)
	luacheck --quiet --no-color lua tests/lua
	@echo "lint: cppcheck and luacheck found nothing"

# make install PREFIX=... [DESTDIR=...]: the libraries (libplan: the core;
# libplan-verify: the core, the verifier and the CPU runner), their headers
# and pkg-config files, the tool and its man page, the Lua module where a
# stock lua5.4 looks (LUA_CMOD_DIR; /usr/local/lib/lua/5.4 is on its
# default cpath) and the CUDA plugin when `make cuda` has built it.
# As root into /usr or /usr/local it runs ldconfig. make uninstall removes
# those files and nothing else.
LIBDIR := $(PREFIX)/lib
LUA_CMOD_DIR ?= $(PREFIX)/lib/lua/5.4
MAN1DIR := $(PREFIX)/share/man/man1
PLAN_VERSION := $(shell sed -n 's/.*PLAN_VERSION_STRING "\(.*\)"/\1/p' libplan/include/libplan/common.h)
PC_FILES := libplan.pc libplan-verify.pc libplan-search.pc
INSTALLED := $(addprefix $(LIBDIR)/,libplan.a libplan-verify.a \
               libplan.so.$(SOVERSION) libplan.so \
               libplan-verify.so.$(SOVERSION) libplan-verify.so \
               libplan-search.so.$(SOVERSION) libplan-search.so \
               libplan-cuda.so libplan-comm-mpi.so $(addprefix pkgconfig/,$(PC_FILES))) \
             $(HEADERS:libplan/include/%=$(PREFIX)/include/%) \
             $(PREFIX)/bin/plan $(MAN1DIR)/plan.1 $(LUA_CMOD_DIR)/plan.so

install: all
	install -d $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(PREFIX)/include/libplan \
	  $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(MAN1DIR) $(DESTDIR)$(LUA_CMOD_DIR)
	install -m 644 $(CORE_STATIC) $(VERIFY_STATIC) $(DESTDIR)$(LIBDIR)/
	install -m 755 $(CORE_SHARED) $(SHARED) $(SEARCH_SHARED) $(MPI_PLUGIN) $(DESTDIR)$(LIBDIR)/
	ln -sf libplan.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/libplan.so
	ln -sf libplan-verify.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/libplan-verify.so
	ln -sf libplan-search.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/libplan-search.so
	install -m 644 $(HEADERS) $(DESTDIR)$(PREFIX)/include/libplan/
	install -m 755 $(TOOL) $(DESTDIR)$(PREFIX)/bin/
	install -m 644 docs/plan.1 $(DESTDIR)$(MAN1DIR)/
	install -m 755 $(LUA_MOD) $(DESTDIR)$(LUA_CMOD_DIR)/
	@if [ -f $(CUDA_PLUGIN) ]; then install -m 755 $(CUDA_PLUGIN) $(DESTDIR)$(LIBDIR)/; \
	else echo "install: no $(CUDA_PLUGIN) (make cuda builds it): the cuda runner is not installed"; fi
	for pc in $(PC_FILES); do \
	  sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(PLAN_VERSION)|g' \
	    libplan/$$pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/$$pc || exit 1; \
	done
	@case "$(DESTDIR):$(LIBDIR)" in :/usr/lib|:/usr/local/lib) \
	  if [ "$$(id -u)" = 0 ] && command -v ldconfig >/dev/null; then ldconfig; fi ;; esac

uninstall:
	rm -f $(addprefix $(DESTDIR),$(INSTALLED))
	rmdir $(DESTDIR)$(PREFIX)/include/libplan 2>/dev/null || true

# make install into a temporary prefix, then each piece used from a clean
# environment: C programs through pkg-config (shared and static), the tool
# and its man page, the Lua module, the Python binding; then uninstall.
check-install: all
	@sh tests/install/run.sh $(BUILD)

clean:
	rm -rf build build-asan build-fuzz

# The CUDA runner's plugin, GPU tests and bundle: make cuda, gpu-bundle,
# gpu-check.
include runners/cuda/cuda.mk

# The CUDA runner's op kernels: check-cuda-emu (host emulation), cuda-kernels.
include runners/cuda/kernels.mk

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
