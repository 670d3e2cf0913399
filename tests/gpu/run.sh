#!/bin/sh
# The GPU check (docs/gpu.md): one command, under 8 minutes on one GPU, that
# runs the CUDA runner's tests and benchmarks from the GPU bundle (make
# gpu-bundle) and writes into OUTDIR:
#   results.txt   one line per check: "pass NAME: ...", "FAIL NAME: ..."
#                 or "skipped NAME: REASON", then the figures ("figure
#                 ...") and a summary line
#   NAME.log      each step's output
# The checks:
#   probe         plan verify --runner cuda loads the plugin and verifies
#                 a small plan (else every GPU check is skipped, with the
#                 reason: no GPU, a missing CUDA library, ...)
#   nccl-virtual  nccl_check --virtual 8: the virtual-rank collectives, and
#                 the verifier's device all-reduce bit-identical to the
#                 host loop
#   nccl-local    nccl_check --local 0: NCCL, one process driving every
#                 visible GPU (ncclCommInitAll)
#   nccl-comm     test_comm_nccl --device: the plugin's NCCL communicator
#                 (comm_open), one process per visible GPU (at most 8):
#                 exchanges and all-reduces on splits of the world
#   kernels       the op kernels' agreement test with the CPU runner, on
#                 the device (tests/cuda/test_cuda_emu.c and agree*.c
#                 built for it)
#   agreement     plan verify --runner cuda and --runner cpu, exact and
#                 float mode (and --dtype bf16 for the examples), over the
#                 example plans and the conformance vectors with a mesh:
#                 the same exit code and verdict
#   sweep         the op sweep (every op x dtype x legal strategy on a 2x2
#                 mesh, tests/unit/test_sweep.c) verified on cuda
#   corpus        the lowered bug corpus (tests/corpus/lowered): each
#                 file's expected verdict on cuda, both modes
#   dist-mpi      plan verify --distributed --runner cuda --comm mpi under
#                 mpirun (tests/dist/run.sh, the plans of up to 4 ranks): a
#                 process per rank sharing the GPU(s), the one-process
#                 report; skipped without mpirun (Open MPI) on the machine
#   dist-nccl     plan verify --distributed --runner cuda over NCCL, one
#                 process per visible GPU started as torchrun would (RANK,
#                 WORLD_SIZE, NCCL's id through a folder), on a data-parallel MLP of that
#                 many ranks (and the examples that fit, with 4 or more)
#   bench-gemm    bench_cuda: matmul TFLOP/s of the runner's gemm path and
#                 a direct cublasGemmEx, f32 and bf16
#   bench-layer-f32, bench-layer-own
#                 bench_cuda --layer: verification time of a Llama-3-8B
#                 decoder layer (hidden 4096, seq 2048, tp over 8 virtual
#                 ranks) in f32 and in its own bf16
# Without a GPU (or when the plugin cannot run) it writes the reason, marks
# every GPU check skipped and exits 0; a skip never counts as a pass. With
# one, it exits 1 when a check failed, else 0. Exit 2: bad usage or no
# bundle.
#
# usage: sh tests/gpu/run.sh OUTDIR   (from the repository, after make
#        gpu-bundle, or as BUNDLE/tests/gpu/run.sh on the GPU machine)
set -u
out=${1:?usage: run.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
if [ -x "$here/../../plan" ] && [ -f "$here/../../env.sh" ]; then
  bundle=$(cd "$here/../.." && pwd)
elif [ -x "$here/../../build/gpu-bundle/plan" ]; then
  bundle=$(cd "$here/../../build/gpu-bundle" && pwd)
else
  echo "gpu check: no bundle beside $here nor in build/gpu-bundle: run make gpu-bundle" >&2
  exit 2
fi
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
res=$out/results.txt
: >"$res"
start=$(date +%s)
budget=450 # seconds for everything, under the 8 minutes

PLAN_BUNDLE=$bundle
. "$bundle/env.sh"
plan=$bundle/plan
cd "$bundle" || exit 2

npass=0 nfail=0 nskip=0
result() { # pass|FAIL|skipped NAME TEXT
  echo "$1 $2: $3" >>"$res"
  echo "$1 $2: $3"
  case $1 in pass) npass=$((npass + 1)) ;; FAIL) nfail=$((nfail + 1)) ;; *) nskip=$((nskip + 1)) ;; esac
}
figure() { echo "figure $1" >>"$res"; echo "figure $1"; }
left() { echo $((budget - ($(date +%s) - start))); }
# cap SECONDS: the time a step may take, within what is left; never 0 or
# less (to timeout, 0 means no limit and a negative one is an error): with
# the budget spent, a step gets 1 s and reports that it timed out
cap() {
  l=$(left)
  [ "$l" -lt "$1" ] || l=$1
  [ "$l" -ge 1 ] || l=1
  echo "$l"
}
checks="nccl-virtual nccl-local nccl-comm kernels agreement sweep corpus dist-mpi dist-nccl bench-gemm bench-layer-f32 bench-layer-own"

{
  echo "bundle: $bundle"
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "host: $(uname -srm)"
  echo "LD_LIBRARY_PATH: $LD_LIBRARY_PATH"
  echo "CUDA libraries found in: ${PLAN_BUNDLE_CUDA_LIBS:-nowhere}"
  echo "CUDA libraries missing: ${PLAN_BUNDLE_MISSING:-none}"
  echo "C++ runtime: $PLAN_BUNDLE_CXX_USED"
  echo "C library: $(ldd --version 2>&1 | head -n 1)"
  command -v nvidia-smi >/dev/null 2>&1 && timeout 30 nvidia-smi
} >"$out/environment.log" 2>&1

# ---- probe: can the CUDA runner run here? ----------------------------------------
timeout 120 "$plan" verify --runner cuda examples/mlp-megatron.plan.yaml >"$out/probe.log" 2>&1
rc=$?
if [ "$rc" -ne 0 ]; then
  why=$(grep -m1 'error' "$out/probe.log" | sed 's/^plan: error: //')
  [ -n "$why" ] || why="plan verify --runner cuda exited $rc"
  if [ "$rc" -eq 3 ]; then
    echo "no GPU run: $why" >>"$res"
    result skipped probe "$why"
    for c in $checks; do result skipped "$c" "the CUDA runner cannot run here"; done
    echo "summary: $npass passed, $nfail failed, $nskip skipped (no GPU: nothing was checked)" >>"$res"
    echo "gpu check: skipped: $why"
    exit 0
  fi
  result FAIL probe "exit $rc: $why"
else
  result pass probe "$(grep -m1 '^runner:' "$out/probe.log" | sed 's/^runner: //')"
fi

# ---- NCCL and the virtual-rank collectives ---------------------------------------
nccl() { # NAME ARGS...
  name=$1
  shift
  timeout "$(cap 40)" "$bundle/tests/gpu/nccl_check" "$@" >"$out/$name.log" 2>&1
  rc=$?
  head1=$(head -n 1 "$out/$name.log")
  last=$(tail -n 1 "$out/$name.log")
  case $rc in
    0) result pass "$name" "$head1; $last" ;;
    3) result skipped "$name" "$head1" ;;
    124) result FAIL "$name" "timed out" ;;
    *) result FAIL "$name" "exit $rc: $last (see $name.log)" ;;
  esac
}
nccl nccl-virtual --virtual 8
nccl nccl-local --local 0

# ---- the plugin's NCCL communicator: one process per GPU ---------------------------
if [ -x "$bundle/tests/gpu/test_comm_nccl" ]; then
  ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
  [ "$ngpu" -ge 1 ] 2>/dev/null || ngpu=1
  [ "$ngpu" -le 8 ] || ngpu=8
  timeout "$(cap 60)" "$bundle/tests/gpu/test_comm_nccl" --device \
    "$bundle/libplan-cuda.so" "$ngpu" >"$out/nccl-comm.log" 2>&1
  rc=$?
  last=$(tail -n 1 "$out/nccl-comm.log")
  case $rc in
    0) result pass nccl-comm "$ngpu GPUs: $(grep -m1 '^      nccl ' "$out/nccl-comm.log" | sed 's/^ *//'); $last" ;;
    3) result skipped nccl-comm "$last" ;;
    124) result FAIL nccl-comm "timed out" ;;
    *) result FAIL nccl-comm "exit $rc: $last (see nccl-comm.log)" ;;
  esac
else
  result skipped nccl-comm "test_comm_nccl is not in this bundle"
fi

# ---- the op kernels against the CPU runner, on the device ------------------------
if [ -x "$bundle/tests/gpu/test_cuda_gpu" ]; then
  timeout "$(cap 60)" "$bundle/tests/gpu/test_cuda_gpu" >"$out/kernels.log" 2>&1
  rc=$?
  case $rc in
    0) result pass kernels "$(grep -m1 'PASSED' "$out/kernels.log")" ;;
    77) result skipped kernels "no usable CUDA device (test_cuda_gpu exit 77)" ;;
    124) result FAIL kernels "timed out" ;;
    *) result FAIL kernels "exit $rc (see kernels.log)" ;;
  esac
else
  result skipped kernels "test_cuda_gpu is not in this bundle"
fi

# ---- runner agreement: cpu and cuda give the same verdicts -------------------------
# exact and float mode for every plan with a mesh; bf16 too for the
# examples; at most 60 s (the runs not made are counted)
agree=0 differ=0 both_skip=0 notrun=0
astart=$(date +%s)
: >"$out/agreement.log"
for f in examples/*.plan.yaml spec/vectors/valid/*.yaml; do
  grep -q '^mesh:' "$f" || continue
  case $f in examples/*) modes="exact float bf16" ;; *) modes="exact float" ;; esac
  for mode in $modes; do
    if [ $(($(date +%s) - astart)) -ge 60 ] || [ "$(left)" -lt 150 ]; then
      notrun=$((notrun + 1))
      continue
    fi
    case $mode in bf16) args="--dtype bf16" ;; *) args="--mode $mode" ;; esac
    timeout 60 "$plan" verify --runner cpu $args "$f" >"$out/a.cpu" 2>&1
    rc_cpu=$?
    timeout 60 "$plan" verify --runner cuda $args "$f" >"$out/a.cuda" 2>&1
    rc_cuda=$?
    v_cpu=$(grep -o 'NOT EQUAL\|EQUAL' "$out/a.cpu" | head -n 1)
    v_cuda=$(grep -o 'NOT EQUAL\|EQUAL' "$out/a.cuda" | head -n 1)
    if [ "$rc_cpu" -eq 3 ] && [ "$rc_cuda" -eq 3 ]; then
      both_skip=$((both_skip + 1))
      echo "both cannot run: $f ($mode): $(grep -m1 error "$out/a.cpu")" >>"$out/agreement.log"
    elif [ "$rc_cpu" -eq "$rc_cuda" ] && [ "$v_cpu" = "$v_cuda" ]; then
      agree=$((agree + 1))
      echo "agree: $f ($mode): exit $rc_cpu ${v_cpu:-}" >>"$out/agreement.log"
    else
      differ=$((differ + 1))
      {
        echo "DIFFER: $f ($mode): cpu exit $rc_cpu ${v_cpu:-}, cuda exit $rc_cuda ${v_cuda:-}"
        sed 's/^/  cuda: /' "$out/a.cuda" | head -n 20
      } >>"$out/agreement.log"
    fi
  done
done
rm -f "$out/a.cpu" "$out/a.cuda"
if [ "$differ" -eq 0 ] && [ "$agree" -gt 0 ]; then
  result pass agreement "$agree runs agree (cpu vs cuda), $both_skip not runnable on either, $notrun not made (time limit)"
else
  result FAIL agreement "$differ runs differ, $agree agree, $notrun not made (see agreement.log)"
fi

# ---- the op sweep on cuda ----------------------------------------------------------
t=$(cap 90)
if [ "$t" -lt 30 ]; then
  result skipped sweep "out of time ($(left) s left)"
else
  SWEEP_RUNNER=cuda SWEEP_MESH='[2,2]' timeout "$t" "$bundle/tests/gpu/test_sweep" >"$out/sweep.log" 2>&1
  rc=$?
  line=$(grep '^sweep: .* legal' "$out/sweep.log" | tail -n 1)
  case $rc in
    0) result pass sweep "$line" ;;
    124) result FAIL sweep "did not finish in $t s" ;;
    *) result FAIL sweep "exit $rc: $(grep -m3 'NOT EQUAL\|returned' "$out/sweep.log" | tr '\n' ' ')" ;;
  esac
fi

# ---- the bug corpus on cuda ----------------------------------------------------------
cat >"$out/plan-cuda" <<EOF
#!/bin/sh
# plan, its verify on the CUDA runner
v=\$1; shift
exec "$plan" "\$v" --runner cuda "\$@"
EOF
chmod 755 "$out/plan-cuda"
t=$(cap 90)
timeout "$t" sh "$bundle/tests/corpus/lowered/run.sh" "$out/plan-cuda" >"$out/corpus.log" 2>&1
rc=$?
line=$(tail -n 1 "$out/corpus.log")
if [ "$rc" -eq 0 ] && ! grep -q '^FAIL' "$out/corpus.log" && grep -q ' 0 failed' "$out/corpus.log"; then
  result pass corpus "$line"
else
  result FAIL corpus "exit $rc: $line (see corpus.log)"
fi

# ---- distributed verification ---------------------------------------------------------
# a process per rank, every process on this machine's GPU(s), the
# collectives over MPI (several processes share a GPU; NCCL refuses that);
# the plans of up to 4 ranks: each process makes its own CUDA context
if command -v mpirun >/dev/null 2>&1; then
  t=$(cap 90)
  DIST_MAX_RANKS=4 timeout "$t" sh "$bundle/tests/dist/run.sh" "$plan" --runner cuda \
    --comm mpi >"$out/dist-mpi.log" 2>&1
  rc=$?
  line=$(tail -n 1 "$out/dist-mpi.log")
  if [ "$rc" -eq 0 ]; then
    result pass dist-mpi "$line"
  else
    result FAIL dist-mpi "exit $rc: $line (see dist-mpi.log)"
  fi
else
  result skipped dist-mpi "no mpirun on this machine (Open MPI: openmpi-bin)"
fi
# NCCL: a process per GPU. With fewer GPUs than the smallest example's
# ranks, a plan of one rank per visible GPU (the MLP, data parallel).
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
[ "$ngpu" -ge 1 ] || ngpu=1
if "$plan" search examples/mlp-program.yaml --mesh dp=$ngpu --strategy dp \
     -o "$out/mlp-dp$ngpu.plan.yaml" >"$out/dist-nccl.log" 2>&1; then
  d=$out/dist-nccl.rv
  r=0
  while [ "$r" -lt "$ngpu" ]; do
    (RANK=$r WORLD_SIZE=$ngpu LOCAL_RANK=$r timeout "$(cap 60)" "$plan" verify \
       --runner cuda --distributed="$d" --timeout 50 --program-root . \
       "$out/mlp-dp$ngpu.plan.yaml" \
       >"$out/dist-nccl.$r.log" 2>&1; echo $? >"$out/dist-nccl.$r.rc") &
    r=$((r + 1))
  done
  wait
  rc=$(cat "$out/dist-nccl.0.rc")
  cat "$out/dist-nccl.0.log" >>"$out/dist-nccl.log"
  how=$(grep -m1 '^distributed:' "$out/dist-nccl.0.log")
  case $rc in
    0) result pass dist-nccl "EQUAL on $ngpu GPU(s), one process each: $how" ;;
    3) result skipped dist-nccl "$(grep -m1 error "$out/dist-nccl.0.log")" ;;
    *) result FAIL dist-nccl "exit $rc: $(tail -n 2 "$out/dist-nccl.0.log" | tr '\n' ' ')" ;;
  esac
  if [ "$ngpu" -ge 4 ] && command -v mpirun >/dev/null 2>&1; then
    # the examples that fit, one GPU per rank, under mpirun
    DIST_MAX_RANKS=$ngpu timeout "$(cap 120)" sh "$bundle/tests/dist/run.sh" "$plan" \
      --runner cuda >>"$out/dist-nccl.log" 2>&1 ||
      result FAIL dist-nccl "the examples on NCCL: $(tail -n 1 "$out/dist-nccl.log")"
  fi
else
  result FAIL dist-nccl "plan search for a $ngpu-rank plan failed (see dist-nccl.log)"
fi

# ---- benchmarks ------------------------------------------------------------------------
timeout "$(cap 40)" "$bundle/bench/bench_cuda" --size 8192 --reps 10 >"$out/bench-gemm.log" 2>&1
rc=$?
if [ "$rc" -eq 0 ]; then
  result pass bench-gemm "$(grep -c TFLOP "$out/bench-gemm.log") figures"
elif [ "$rc" -eq 3 ]; then
  result skipped bench-gemm "$(tail -n 1 "$out/bench-gemm.log")"
else
  result FAIL bench-gemm "exit $rc: $(tail -n 1 "$out/bench-gemm.log")"
fi
grep 'TFLOP' "$out/bench-gemm.log" | while read -r l; do figure "$l"; done

# the Llama-3-8B layer at hidden 4096, seq 2048, tensor parallel over 8
# virtual ranks (dp 1; batch 2: a batch of 1 cannot pass the reshapes'
# dp rule)
sed -e 's/batch=4/batch=2/' -e 's/\[4, 2048/[2, 2048/g' \
    -e 's/axes: \[dp=2, tp=8\]/axes: [dp=1, tp=8]/' \
    examples/models/llama3-8b-layer.recipe.plan.yaml >"$out/llama3-8b-layer.tp8.plan.yaml"
# f32 gets up to 120 s, bf16 (the plan's own dtype) what is left
for d in f32 own; do
  name=bench-layer-$d
  if [ $d = f32 ]; then t=$(cap 120); else t=$(left); fi
  if [ "$t" -lt 30 ]; then
    result skipped $name "out of time ($(left) s left)"
    continue
  fi
  timeout "$t" "$bundle/bench/bench_cuda" --skip-gemm --dtype $d \
    --layer "$out/llama3-8b-layer.tp8.plan.yaml" >"$out/$name.log" 2>&1
  rc=$?
  case $rc in
    0) result pass $name "EQUAL" ;;
    3) result skipped $name "$(tail -n 1 "$out/$name.log")" ;;
    124) result FAIL $name "did not finish in $t s" ;;
    *) result FAIL $name "exit $rc: $(tail -n 2 "$out/$name.log" | tr '\n' ' ')" ;;
  esac
  grep '^verify' "$out/$name.log" | while read -r l; do figure "$l"; done
done

echo "summary: $npass passed, $nfail failed, $nskip skipped, $(($(date +%s) - start)) s" >>"$res"
echo "gpu check: $npass passed, $nfail failed, $nskip skipped; results in $res"
[ "$nfail" -eq 0 ]
