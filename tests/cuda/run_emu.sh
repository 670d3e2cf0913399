#!/bin/sh
# Plans verified through the CUDA runner's plugin built for the host
# (BUILD/libplan-cuda-emu.so: the CUDA kernels and the virtual-rank
# all-reduce compiled through runners/cuda/emu.h, behind the real entry
# point), loaded by `plan verify --runner cuda` with PLAN_CUDA_PLUGIN:
#
#   agreement  every example plan (the model plans reduced), exact and
#              float mode: the same exit status and verdict as --runner cpu,
#              and the report names the cuda runner
#   corpus     the lowered bug corpus (tests/corpus/lowered/run.sh) through
#              --runner cuda: every bug caught, with the same first
#              divergent op and diagnosis as on the CPU runner
#   sweep      the op-rule sweep (tests/unit/test_sweep.c) on the 2x2 mesh
#              with SWEEP_RUNNER=cuda: every op, every legal strategy,
#              verified equal in both modes
#   dist       distributed verification (tests/dist/run.sh) with
#              --runner cuda --comm mpi: a process per rank, each running
#              its ops through the plugin
#
# These check the CUDA path's plumbing (the loader, the vtable, the
# verifier's use of run_op and of the all-reduce hook, blocks' offsets and
# global dims through the plugin, every op's host dispatch); whether the
# kernels compute what the CPU runner's do is tests/cuda/test_cuda_emu.c's
# check (an op wrong alike in the reference run and the ranks' runs can
# still verify EQUAL here). What neither can see is a device:
# tests/gpu/run.sh runs these checks on one. usage: sh tests/cuda/run_emu.sh
# BUILD. Prints a line per check and
# "cuda-emu: N passed, M failed"; exits 1 when anything failed.

build=${1:?usage: run_emu.sh BUILD}
case $build in /*) ;; *) build=$(pwd)/$build ;; esac
root=$(cd "$(dirname "$0")/../.." && pwd)
plan=$build/plan
PLAN_CUDA_PLUGIN=$build/libplan-cuda-emu.so
export PLAN_CUDA_PLUGIN
tmp=$(mktemp -d "${TMPDIR:-/tmp}/libplan-cuda-emu.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT INT TERM
passed=0
failed=0

pass() {
  passed=$((passed + 1))
  echo "ok    $*"
}
fail() {
  failed=$((failed + 1))
  echo "FAIL  $*"
}

# verdict FILE: the report's verdict word
verdict() {
  grep -o ': EQUAL (\|: NOT EQUAL (' "$1" | head -n 1
}

cd "$root" || exit 2
for f in examples/*.plan.yaml examples/models/*.plan.yaml; do
  case $f in */models/*) red=--reduce ;; *) red= ;; esac
  for mode in exact float; do
    "$plan" verify --runner cpu --mode $mode $red "$f" >"$tmp/cpu" 2>&1
    rc_cpu=$?
    "$plan" verify --runner cuda --mode $mode $red "$f" >"$tmp/cuda" 2>&1
    rc_cuda=$?
    name="agreement $(basename "$f") ($mode)"
    if [ $rc_cpu -ne $rc_cuda ]; then
      fail "$name: exit $rc_cuda on cuda, $rc_cpu on cpu"
      sed -n '1,6s/^/      /p' "$tmp/cuda"
    elif [ "$(verdict "$tmp/cpu")" != "$(verdict "$tmp/cuda")" ]; then
      fail "$name: verdicts differ"
    elif ! grep -q '^runner: cuda: ' "$tmp/cuda"; then
      fail "$name: the report does not name the cuda runner"
    else
      pass "$name:$(verdict "$tmp/cuda" | sed 's/^:\(.*\) ($/\1/')"
    fi
  done
done

# shard ratios (format 1.1): the plans and the lowered file, whose
# all-gather, reduce-scatter and all-to-all move unequal pieces, EQUAL on
# cuda in both modes
"$plan" lower -o "$tmp/ratios.lowered.yaml" examples/mlp-ratios.plan.yaml
for f in examples/mlp-ratios.plan.yaml "$tmp/ratios.lowered.yaml" \
         examples/mlp-ratios-train.plan.yaml; do
  for mode in exact float; do
    "$plan" verify --runner cuda --mode $mode "$f" >"$tmp/cuda" 2>&1
    rc=$?
    name="ratios $(basename "$f") ($mode)"
    case $f in *train*) want="1 reduce_scatter" ;;
      *) want="1 all_gather, 1 reduce_scatter, 1 all_to_all" ;; esac
    if [ $rc -eq 0 ] && [ "$(verdict "$tmp/cuda")" = ": EQUAL (" ] &&
       grep -qF "$want" "$tmp/cuda" && grep -q '^runner: cuda: ' "$tmp/cuda"; then
      pass "$name: EQUAL"
    else
      fail "$name: exit $rc, wanted EQUAL with $want on cuda"
      sed -n '1,6s/^/      /p' "$tmp/cuda"
    fi
  done
done

# the corpus through a wrapper that adds --runner cuda to every verify
cat >"$tmp/plan-cuda" <<WRAP
#!/bin/sh
v=\$1; shift
exec "$plan" "\$v" --runner cuda "\$@"
WRAP
chmod +x "$tmp/plan-cuda"
if sh tests/corpus/lowered/run.sh "$tmp/plan-cuda" >"$tmp/corpus" 2>&1 &&
   ! grep -q '^FAIL' "$tmp/corpus"; then
  pass "corpus: $(tail -n 1 "$tmp/corpus") on cuda"
else
  fail "corpus on cuda:"
  grep -A 3 '^FAIL' "$tmp/corpus" | sed -n '1,12s/^/      /p'
fi

if SWEEP_RUNNER=cuda SWEEP_MESH="[2,2]" "$build/tests/test_sweep" >"$tmp/sweep" 2>&1; then
  pass "sweep on cuda: $(grep '^sweep: .*legal' "$tmp/sweep")"
else
  fail "sweep on cuda:"
  grep -E 'FAIL|ERROR|failures' "$tmp/sweep" | sed -n '1,8s/^/      /p'
fi

if sh tests/dist/run.sh "$plan" --runner cuda --comm mpi >"$tmp/dist" 2>&1; then
  pass "$(tail -n 1 "$tmp/dist")"
else
  fail "distributed on cuda:"
  grep -A 3 '^FAIL' "$tmp/dist" | sed -n '1,12s/^/      /p'
fi

echo "cuda-emu: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
