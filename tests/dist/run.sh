#!/bin/sh
# Distributed verification (`plan verify --distributed`, docs/gpu.md): one
# process per mesh rank on the CPU runner, the collectives over the
# library's TCP communicator, started here the way a launcher would
# (RANK, WORLD_SIZE). Every plan must get the verdict, the first divergent
# op and the per-tensor comparisons of the verification in one process;
# the bug corpus must be caught the same way; a launch that goes wrong
# (a rank missing, processes on different plans, a world that is not the
# mesh) must fail with a reason, never hang.
#
# usage: sh tests/dist/run.sh PATH/TO/plan [VERIFY-OPTIONS...]
# VERIFY-OPTIONS go to every verification, distributed or not (for
# instance --runner cuda --comm tcp). DIST_MAX_RANKS=N leaves out the
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

# launch N TAG ARGS...: N processes of `plan verify --distributed`, rank i's
# output in $tmp/TAG.i.{out,err,rc}; waits for all of them.
launch() {
  n=$1
  tag=$2
  shift 2
  dir=$tmp/$tag.rv
  i=0
  pids=
  while [ "$i" -lt "$n" ]; do
    # shellcheck disable=SC2086 # the options, one word each
    (RANK=$i WORLD_SIZE=$n "$plan" verify $extra --distributed "$dir" --timeout 60 "$@" \
       >"$tmp/$tag.$i.out" 2>"$tmp/$tag.$i.err"
     echo $? >"$tmp/$tag.$i.rc") &
    pids="$pids $!"
    i=$((i + 1))
  done
  for p in $pids; do wait "$p"; done
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
for f in mlp-megatron mlp-by-path moe-experts transformer-block; do
  agree "$f, exact" "$ex/$f.plan.yaml"
  agree "$f, float" --mode float "$ex/$f.plan.yaml"
done
agree "transformer-block, bf16" --dtype bf16 "$ex/transformer-block.plan.yaml"
# training steps: the loss, every gradient, the optimizer's update over
# the plan's steps (sharded masters gathered from the other processes,
# clipping's norms summed over them)
for f in mlp-train transformer-train transformer-train-nosp moe-train; do
  agree "$f, exact" "$ex/$f.plan.yaml"
  agree "$f, float" --mode float "$ex/$f.plan.yaml"
done
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
  agree "models/$f, reduced" --reduce "$ex/models/$f.plan.yaml"
done

# The bug corpus: lowered programs that compute the wrong numbers are
# caught with the first divergent op of the one-process run.
for f in "$root"/tests/corpus/lowered/*.yaml; do
  head -n 1 "$f" | grep -q '^# expect: not-equal' || continue
  agree "corpus $(basename "$f")" "$f"
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
RANK=0 WORLD_SIZE=$((n + 1)) "$plan" verify --distributed "$tmp/w.rv" "$mlp" \
  >"$tmp/w.out" 2>"$tmp/w.err"
rc=$?
if [ "$rc" = 2 ] && grep -q "one process per mesh rank" "$tmp/w.err"; then ok; else
  bad "a world that is not the mesh: exit $rc"
fi
"$plan" verify --distributed "$tmp/e.rv" "$mlp" >"$tmp/e.out" 2>"$tmp/e.err"
rc=$?
if [ "$rc" = 2 ] && grep -q "RANK and WORLD_SIZE" "$tmp/e.err"; then ok; else
  bad "no launcher environment: exit $rc"
fi
# rank 1 never starts: rank 0 gives up after its timeout, with the reason
start=$(date +%s)
RANK=0 WORLD_SIZE=$n "$plan" verify --distributed "$tmp/m.rv" --timeout 2 "$mlp" \
  >"$tmp/m.out" 2>"$tmp/m.err"
rc=$?
took=$(( $(date +%s) - start ))
if [ "$rc" = 3 ] && [ "$took" -lt 30 ] && grep -q "distributed verification" "$tmp/m.err"; then ok; else
  bad "a rank missing: exit $rc after ${took}s"
  sed -n '1,3s/^/    /p' "$tmp/m.err"
fi
# the processes verify different plans: refused by every one
other=$ex/moe-experts.plan.yaml
if [ "$(ranks_of "$other")" = "$n" ]; then
  dir=$tmp/d.rv
  (RANK=0 WORLD_SIZE=$n "$plan" verify --distributed "$dir" --timeout 60 "$mlp" \
     >"$tmp/d.0.out" 2>"$tmp/d.0.err"; echo $? >"$tmp/d.0.rc") &
  p0=$!
  i=1
  while [ "$i" -lt "$n" ]; do
    (RANK=$i WORLD_SIZE=$n "$plan" verify --distributed "$dir" --timeout 60 "$other" \
       >"$tmp/d.$i.out" 2>"$tmp/d.$i.err"; echo $? >"$tmp/d.$i.rc") &
    i=$((i + 1))
  done
  wait
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
  dir=$tmp/$variant.rv
  i=0
  while [ "$i" -lt 4 ]; do
    if [ $variant = lowered ]; then
      f=$lo
      [ "$i" -gt 0 ] && f=$tmp/fixed.yaml
      set -- "$f"
    else
      set -- --mode float "$mlp"
      [ "$i" -gt 0 ] && set -- --mode float --rtol 0.5 --atol 0.5 "$mlp"
    fi
    (RANK=$i WORLD_SIZE=4 "$plan" verify --distributed "$dir" --timeout 60 "$@" \
       >"$tmp/$variant.$i.out" 2>"$tmp/$variant.$i.err"; echo $? >"$tmp/$variant.$i.rc") &
    i=$((i + 1))
  done
  wait
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
RANK=0 WORLD_SIZE=$(ranks_of "$pp") "$plan" verify --distributed "$tmp/p.rv" "$pp" \
  >"$tmp/p.out" 2>"$tmp/p.err"
rc=$?
if [ "$rc" = 3 ] && grep -q "pipeline" "$tmp/p.err"; then ok; else
  bad "a pipelined plan: exit $rc"
fi

echo "dist${extra:+ ($extra)}: $passed passed, $failed failed${DIST_MAX_RANKS:+, $left_out plans left out}"
[ "$failed" -eq 0 ]
