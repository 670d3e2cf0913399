#!/bin/sh
# Distributed verification (`plan verify --distributed`, docs/gpu.md): one
# process per mesh rank on the CPU runner, started by mpirun on localhost
# (shared memory only: --mca btl self,vader), the collectives over the
# library's MPI communicator. Every plan must get the verdict, the first
# divergent op and the per-tensor comparisons of the verification in one
# process; the bug corpus must be caught the same way; a launch that goes
# wrong (a rank killed, processes on different plans, a world that is not
# the mesh, no MPI) must fail with a reason, never hang.
#
# usage: sh tests/dist/run.sh PATH/TO/plan [VERIFY-OPTIONS...]
# VERIFY-OPTIONS go to every verification, distributed or not (for
# instance --runner cuda --comm mpi). DIST_MAX_RANKS=N leaves out the
# plans of more ranks (NCCL on N GPUs: one process per GPU); they are
# counted and named as left out. Prints "dist: N passed, M failed"
# and exits non-zero when anything failed.

plan=${1:?usage: run.sh PATH/TO/plan [VERIFY-OPTIONS...]}
shift
extra="$*"
one=$(printf '%s' "$extra" | sed 's/--comm [a-z]*//') # one process: no comm
case $plan in /*) ;; *) plan=$(pwd)/$plan ;; esac
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/libplan-dist.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT INT TERM

passed=0
failed=0
left_out=0
ok() { passed=$((passed + 1)); }
bad() {
  failed=$((failed + 1))
  echo "FAIL: $*"
}

# The mesh size of a plan, as its one-process verification reports it.
ranks_of() {
  "$plan" verify "$@" 2>/dev/null | sed -n 's/.*, \([0-9][0-9]*\) ranks[;,].*/\1/p' | head -n 1
}

# Each rank's process, under mpirun: its output in $tmp/TAG.R.{out,err,rc}
# (R its MPI rank). It exits 0 whatever the verdict, so that mpirun does
# not kill the others for it; the rc file holds the verdict.
cat >"$tmp/rank.sh" <<'END'
tag=$1
shift
r=${OMPI_COMM_WORLD_RANK:?not under mpirun}
"$@" >"$TMPD/$tag.$r.out" 2>"$TMPD/$tag.$r.err"
echo $? >"$TMPD/$tag.$r.rc"
END
# Open MPI on localhost: shared memory, no network; as root too; ranks
# that outlive a killed one (--enable-recovery); bounded in time. The
# ranks' leaks are not checked under the sanitizers (make asan): Open
# MPI's finalize unloads its components, whose allocations then show as
# unnamed leaks; memory errors still are.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 TMPD="$tmp"
mpi() {
  LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}detect_leaks=0" timeout 120 mpirun --oversubscribe --mca btl self,vader \
    --enable-recovery -quiet "$@" >>"$tmp/mpirun.out" 2>&1
}

# launch N TAG ARGS...: N processes of `plan verify --distributed` under
# mpirun, rank i's output in $tmp/TAG.i.{out,err,rc}; waits for all.
launch() {
  n=$1
  tag=$2
  shift 2
  rm -f "$tmp/$tag".*
  # shellcheck disable=SC2086 # the options, one word each
  mpi -np "$n" sh "$tmp/rank.sh" "$tag" "$plan" verify $extra --distributed \
    --timeout 60 "$@"
}

# The report (YAML: every tensor's comparison, with its element counts)
# without the diagnosis, made in one process only.
strip() {
  sed -e 's/, "diagnosis": .*}$/}/' "$1"
}

# agree NAME [ARGS...] PLAN: the distributed run's report (rank 0) is the
# one-process report; every rank exits with its verdict; only rank 0 writes.
agree() {
  name=$1
  shift
  # shellcheck disable=SC2086
  "$plan" verify $one --report yaml "$@" >"$tmp/one.out" 2>"$tmp/one.err"
  want=$?
  n=$(sed -n 's/^ranks: \([0-9][0-9]*\)$/\1/p' "$tmp/one.out")
  if [ -z "$n" ]; then
    bad "$name: the one-process run reports no ranks (exit $want)"
    sed -n '1,5s/^/    /p' "$tmp/one.err"
    return
  fi
  if [ -n "${DIST_MAX_RANKS:-}" ] && [ "$n" -gt "$DIST_MAX_RANKS" ]; then
    left_out=$((left_out + 1))
    echo "left out: $name ($n ranks, more than $DIST_MAX_RANKS)"
    return
  fi
  launch "$n" run --report yaml "$@"
  i=0
  while [ "$i" -lt "$n" ]; do
    got=$(cat "$tmp/run.$i.rc")
    if [ "$got" = "$want" ]; then ok; else
      bad "$name: rank $i exits $got, one process $want"
      sed -n '1,5s/^/    /p' "$tmp/run.$i.err"
    fi
    if [ "$i" -gt 0 ]; then
      if [ -s "$tmp/run.$i.out" ]; then bad "$name: rank $i wrote a report"; else ok; fi
    fi
    i=$((i + 1))
  done
  strip "$tmp/one.out" >"$tmp/one.txt"
  strip "$tmp/run.0.out" >"$tmp/dist.txt"
  if cmp -s "$tmp/one.txt" "$tmp/dist.txt"; then ok; else
    bad "$name: the report differs from the one-process one"
    diff "$tmp/one.txt" "$tmp/dist.txt" | sed -n '1,12s/^/    /p'
  fi
}

ex=$root/examples
for f in mlp-megatron mlp-by-path moe-experts transformer-block mlp-ratios; do
  agree "$f, exact" "$ex/$f.plan.yaml"
  agree "$f, float" --mode float "$ex/$f.plan.yaml"
done
agree "transformer-block, bf16" --dtype bf16 "$ex/transformer-block.plan.yaml"
# training steps: the loss, every gradient, the optimizer's update over
# the plan's steps (sharded masters gathered from the other processes,
# clipping's norms summed over them)
for f in mlp-train transformer-train transformer-train-nosp moe-train mlp-ratios-train lm-vocab-parallel; do
  agree "$f, exact" "$ex/$f.plan.yaml"
  agree "$f, float" --mode float "$ex/$f.plan.yaml"
done
# communication overlap (format 1.1): started collectives, their waits,
# chunked collectives over slices, each process its own ranks' slices
for f in mlp-overlap fsdp-tp-overlap; do
  agree "$f, exact" "$ex/$f.plan.yaml"
  agree "$f, float" --mode float "$ex/$f.plan.yaml"
done
# shard ratios (format 1.1): unequal pieces in the all-gather,
# reduce-scatter and all-to-all of the lowered file, each process its own
"$plan" lower -o "$tmp/ratios.lowered.yaml" "$ex/mlp-ratios.plan.yaml" ||
  bad "mlp-ratios: not lowered"
agree "mlp-ratios lowered, exact" "$tmp/ratios.lowered.yaml"
agree "mlp-ratios lowered, float" --mode float "$tmp/ratios.lowered.yaml"
# ZeRO (sharded optimizer state: the masters gathered across processes),
# FSDP (params stored sharded), Adam with clipping and loss scaling
mlpt=$ex/mlp-train.plan.yaml
sed 's|grad_sync: {"\*": all_reduce}|grad_sync: {"*": reduce_scatter}\
  optimizer_state: {w1: S(0)S(1), w2: S(1)S(0)}|' "$mlpt" >"$tmp/mlp-zero.plan.yaml"
sed -e 's|  w1: RS(1) .*|  w1: S(0)S(1)|' -e 's|  w2: RS(0) .*|  w2: S(1)S(0)|' \
  "$mlpt" >"$tmp/mlp-fsdp.plan.yaml"
sed -e 's|optimizer: {kind: sgd, lr: 0.125, momentum: 0.5}|optimizer: {kind: adam, lr: 0.01}|' \
    -e 's|  steps: 2|  steps: 3\
  clip_grad_norm: 0.5\
  loss_scale: 1024|' "$mlpt" >"$tmp/mlp-adam.plan.yaml"
for v in zero fsdp adam; do
  grep -q 'reduce_scatter\|S(0)S(1)$\|kind: adam' "$tmp/mlp-$v.plan.yaml" ||
    bad "mlp-train, $v: the variant was not made"
  agree "mlp-train $v, exact" "$tmp/mlp-$v.plan.yaml"
  agree "mlp-train $v, float" --mode float "$tmp/mlp-$v.plan.yaml"
done
for f in llama3-8b-layer.recipe gpt2-small-block.searched mixtral-moe-layer.recipe \
         dit-block.recipe; do
  # the shapes reduced, the mesh kept: one process per rank of it
  agree "models/$f, reduced" --reduce shapes "$ex/models/$f.plan.yaml"
done

# The bug corpus: lowered programs that compute the wrong numbers are
# caught with the first divergent op of the one-process run.
# A file whose header says `# distributed: ARGS` is run with those
# (`none`: not run distributed)
# verify arguments in both runs: a check the one-process run alone makes
# (exact mode's fresh inputs for a constant output need every rank's
# blocks in one process) is left to the mode that sees the bug everywhere.
for f in "$root"/tests/corpus/lowered/*.yaml; do
  head -n 1 "$f" | grep -q '^# expect: not-equal' || continue
  # distributed verification runs no pipeline yet (exit 3, said)
  if grep -q '^pipeline:' "$f"; then
    left_out=$((left_out + 1))
    echo "left out: corpus $(basename "$f") (a pipeline: one process only)"
    continue
  fi
  dargs=$(sed -n '1,20s/^# distributed: //p' "$f" | head -n 1)
  # `# distributed: none`: a check only the one-process run makes in
  # every mode (the op-local checks of a traced tensor)
  if [ "$dargs" = none ]; then
    left_out=$((left_out + 1))
    echo "left out: corpus $(basename "$f") (one process only)"
    continue
  fi
  # shellcheck disable=SC2086
  agree "corpus $(basename "$f")${dargs:+ ($dargs)}" $dargs "$f"
done
# `order` means the same in one process and distributed
# (spec/lowered-format.md): the swapped orders above are the same bug;
# the identity order is the plain collective, EQUAL in both
for f in rank-order-swapped scatter-order-swapped a2a-order-swapped; do
  sed 's/order: \[1, 0\]/order: [0, 1]/' "$root/tests/corpus/lowered/$f.yaml" >"$tmp/$f-id.yaml"
  agree "$f with order [0, 1]" "$tmp/$f-id.yaml"
  if [ "$want" = 0 ]; then ok; else bad "$f with order [0, 1]: exit $want, not EQUAL"; fi
done

# The text report says how it ran.
launch 4 text "$ex/mlp-megatron.plan.yaml"
if grep -q '^distributed: 4 processes, one rank each' "$tmp/text.0.out"; then ok; else
  bad "the text report does not say it was distributed"
  sed -n '1,5s/^/    /p' "$tmp/text.0.out" "$tmp/text.0.err"
fi

# A launch that goes wrong.
mlp=$ex/mlp-megatron.plan.yaml
n=$(ranks_of "$mlp")
# shellcheck disable=SC2086
mpi -np $((n + 1)) sh "$tmp/rank.sh" w "$plan" verify $extra --distributed "$mlp"
rc=$(cat "$tmp/w.0.rc")
if [ "$rc" = 2 ] && grep -q "one process per mesh rank" "$tmp/w.0.err"; then ok; else
  bad "a world that is not the mesh: exit $rc"
fi
"$plan" verify --distributed "$mlp" >"$tmp/e.out" 2>"$tmp/e.err"
rc=$?
if [ "$rc" = 2 ] && grep -q "runs under a launcher: mpirun" "$tmp/e.err"; then ok; else
  bad "no launcher environment: exit $rc"
fi
# a folder that does not exist yet after --distributed is not a plan
"$plan" verify --distributed "$tmp/new.rv" "$mlp" >"$tmp/e.out" 2>"$tmp/e.err"
rc=$?
if [ "$rc" = 2 ] && grep -q "goes as --distributed=DIR" "$tmp/e.err"; then ok; else
  bad "--distributed NEWDIR PLAN: exit $rc"
fi
# rank 1 is killed at its third exchange on the MPI communicator (the
# test hook PLAN_TEST_MPI_DIE): every other rank gives up within its
# timeout, exit 3, naming the rank it waited for. NCCL's peers see a rank
# gone in NCCL: tests/cuda/test_comm_nccl.c.
killed() {
  start=$(date +%s)
  # shellcheck disable=SC2086
  PLAN_TEST_MPI_DIE=1:3 mpi -np "$n" sh "$tmp/rank.sh" k "$plan" verify $extra \
    --distributed --timeout 2 "$mlp"
  took=$(($(date +%s) - start))
  if [ "$(cat "$tmp/k.1.rc")" = 137 ]; then ok; else
    bad "the killed rank exits $(cat "$tmp/k.1.rc"), not 137 (SIGKILL)"
  fi
  if grep -q "rank 0: no progress within 2 s: rank 1 did not send" "$tmp/k.0.err"; then ok; else
    bad "rank 0 does not name the killed rank"
    sed -n '1,3s/^/    /p' "$tmp/k.0.err"
  fi
  i=0
  while [ "$i" -lt "$n" ]; do
    if [ "$i" != 1 ]; then
      rc=$(cat "$tmp/k.$i.rc")
      if [ "$rc" = 3 ] && [ "$took" -lt 20 ] &&
        grep -q "distributed verification: .* rank $i: no progress within 2 s: rank [0-9]* did not" "$tmp/k.$i.err"; then ok; else
        bad "a rank killed: rank $i exits $rc after ${took}s"
        sed -n '1,3s/^/    /p' "$tmp/k.$i.err"
      fi
    fi
    i=$((i + 1))
  done
}
case " $extra " in
  *" --comm mpi "*) killed ;;
  *" --runner cuda "*) echo "left out: a killed rank (its collectives are NCCL's)" ;;
  *) killed ;;
esac
# a launcher's ranks without MPI (torchrun's RANK, WORLD_SIZE) on the cpu
# runner: refused with the reason
if [ -z "$extra" ]; then
  RANK=0 WORLD_SIZE="$n" "$plan" verify --distributed --timeout 10 "$mlp" \
    >"$tmp/t.out" 2>"$tmp/t.err"
  rc=$?
  if [ "$rc" = 2 ] && grep -q "not started by an MPI launcher" "$tmp/t.err"; then ok; else
    bad "the cpu runner without MPI: exit $rc"
    sed -n '1,3s/^/    /p' "$tmp/t.err"
  fi
fi
# the processes verify different plans: refused by every one
other=$ex/moe-experts.plan.yaml
if [ "$(ranks_of "$other")" = "$n" ]; then
  # shellcheck disable=SC2086
  mpi -np 1 sh "$tmp/rank.sh" d "$plan" verify $extra --distributed --timeout 60 "$mlp" : \
    -np $((n - 1)) sh "$tmp/rank.sh" d "$plan" verify $extra --distributed --timeout 60 "$other"
  if [ "$(cat "$tmp/d.0.rc")" = 2 ] && grep -q "another plan" "$tmp/d.0.err"; then ok; else
    bad "processes on different plans: rank 0 exits $(cat "$tmp/d.0.rc")"
    sed -n '1,3s/^/    /p' "$tmp/d.0.err"
  fi
fi
# the processes run different lowered programs (the same plan, other
# steps), or compare with other tolerances: refused by every one
lo=$root/tests/corpus/lowered/rank-order-swapped.yaml
sed 's/, order: \[1, 0\]//' "$lo" >"$tmp/fixed.yaml"
if cmp -s "$lo" "$tmp/fixed.yaml"; then
  bad "the fixed lowered program was not made"
fi
for variant in lowered tolerances; do
  if [ $variant = lowered ]; then
    set -- "$lo" "$tmp/fixed.yaml"
  else
    set -- "--mode float $mlp" "--mode float --rtol 0.5 --atol 0.5 $mlp"
  fi
  # shellcheck disable=SC2086
  mpi -np 1 sh "$tmp/rank.sh" $variant "$plan" verify $extra --distributed --timeout 60 $1 : \
    -np 3 sh "$tmp/rank.sh" $variant "$plan" verify $extra --distributed --timeout 60 $2
  i=0
  while [ "$i" -lt 4 ]; do
    if [ "$(cat "$tmp/$variant.$i.rc")" = 2 ] && grep -q "another plan or with other options" "$tmp/$variant.$i.err"; then ok; else
      bad "processes with other $variant: rank $i exits $(cat "$tmp/$variant.$i.rc")"
      sed -n '1,3s/^/    /p' "$tmp/$variant.$i.out" "$tmp/$variant.$i.err"
    fi
    i=$((i + 1))
  done
done

# a pipelined plan is refused with the reason (exit 3)
pp=$ex/pipeline-1f1b.plan.yaml
# shellcheck disable=SC2086
mpi -np "$(ranks_of "$pp")" sh "$tmp/rank.sh" p "$plan" verify $extra --distributed "$pp"
rc=$(cat "$tmp/p.0.rc")
if [ "$rc" = 3 ] && grep -q "pipeline" "$tmp/p.0.err"; then ok; else
  bad "a pipelined plan: exit $rc"
fi

echo "dist${extra:+ ($extra)}: $passed passed, $failed failed${DIST_MAX_RANKS:+, $left_out plans left out}"
[ "$failed" -eq 0 ]
