#!/bin/sh
# Runs the load benchmark: generates a large transformer plan into bench/out/
# (once; again when the generator changes), checks that `plan validate`
# accepts it, and runs bench_load on it. Then runs the verifier benchmark
# (bench_verify), which writes its own plan, and the schedule benchmark
# (bench_schedule). `make bench` calls this.
#
# usage: bench/run.sh [BUILD_DIR]      (default: build)
# environment: BENCH_OPS   ops in the generated plan (default 100000)
#              BENCH_REPS  timed runs per step, best and median shown (5)
#              BENCH_ARGS  extra gen_plan.py options (e.g. "--sp --qkv fused")
#              BENCH_VERIFY       0 skips bench_verify (default 1)
#              BENCH_VERIFY_ARGS  bench_verify options (default: the full
#                                 size, phases summed only, "--quick"); the
#                                 scaled-down run (seq 128) adds the phase
#                                 breakdown
#              BENCH_SCHEDULE     0 skips bench_schedule (default 1)
#              BENCH_DIST         0 skips bench_dist.sh (default 1)
#              BENCH_TRAIN        0 skips bench_train (default 1)
#              BENCH_TRAIN_REPS   its runs per plan and mode (default 2)
set -eu

BUILD=${1:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
OPS=${BENCH_OPS:-100000}
REPS=${BENCH_REPS:-5}
ARGS=${BENCH_ARGS:-}
OUT=$HERE/out
TAG=$(printf '%s' "$ARGS" | tr -c 'A-Za-z0-9' '-' | sed 's/--*/-/g; s/^-//; s/-$//')
PLAN=$OUT/plan-$OPS${TAG:+-$TAG}.yaml
TOOL=$BUILD/plan
BENCH=$BUILD/bench/bench_load
VBENCH=$BUILD/bench/bench_verify
VERIFY=${BENCH_VERIFY:-1}
VARGS=${BENCH_VERIFY_ARGS:---quick}
SBENCH=$BUILD/bench/bench_schedule
SCHEDULE=${BENCH_SCHEDULE:-1}

for f in "$TOOL" "$BENCH" "$VBENCH" "$SBENCH" "$BUILD/bench/bench_upgrade"; do
  if [ ! -x "$f" ]; then
    echo "bench/run.sh: $f is missing; run 'make bench'" >&2
    exit 1
  fi
done
if ! command -v python3 >/dev/null 2>&1; then
  echo "bench/run.sh: python3 is needed to generate the plan" >&2
  exit 1
fi

mkdir -p "$OUT"
if [ ! -s "$PLAN" ] || [ -n "$(find "$HERE/gen_plan.py" -newer "$PLAN")" ]; then
  # shellcheck disable=SC2086 # ARGS is a list of options
  python3 "$HERE/gen_plan.py" --ops "$OPS" $ARGS -o "$PLAN.tmp"
  mv "$PLAN.tmp" "$PLAN"
fi

# The benchmark is only meaningful on a plan the tool accepts.
if ! "$TOOL" validate "$PLAN" >"$OUT/validate.txt" 2>&1; then
  tail -n 5 "$OUT/validate.txt" >&2
  echo "bench/run.sh: $PLAN does not validate" >&2
  exit 1
fi
tail -n 1 "$OUT/validate.txt"

# The tool itself, as a user runs it (GNU time gives its peak RSS).
if [ -x /usr/bin/time ] && /usr/bin/time -f '' true >/dev/null 2>&1; then
  /usr/bin/time -f "plan validate: %e s wall, peak RSS %M KiB" \
    "$TOOL" validate "$PLAN" >/dev/null
fi
echo

"$BENCH" "$PLAN" -n "$REPS"

echo
echo "== plan upgrade against plan validate, the same plan =="
"$BUILD/bench/bench_upgrade" "$PLAN" -n "$REPS"

if [ "$VERIFY" != 0 ]; then
  echo
  echo "== verifier: full size =="
  # shellcheck disable=SC2086 # VARGS is a list of options
  "$VBENCH" $VARGS
  echo
  echo "== verifier: scaled down (seq 128), with the phase breakdown =="
  "$VBENCH" --seq 128
fi

if [ "$SCHEDULE" != 0 ]; then
  echo
  echo "== schedules: 64 stages x 256 microbatches =="
  "$SBENCH" -n "$REPS"
fi

# The cost model: evaluations per second and whole-plan pricing on
# Llama-style stacks of 8 and 32 layers (BENCH_COST=0 skips it).
if [ "${BENCH_COST:-1}" != 0 ]; then
  CBENCH=$BUILD/bench/bench_cost
  if [ ! -x "$CBENCH" ]; then
    echo "bench/run.sh: $CBENCH is missing; run 'make bench'" >&2
    exit 1
  fi
  echo
  echo "== cost model: 8 and 32 layers on dp x tp = 2x4 and 8x8 =="
  cost_plans=""
  for spec in 8:2:4 8:8:8 32:2:4 32:8:8; do
    l=${spec%%:*} rest=${spec#*:}
    dp=${rest%%:*} tp=${rest#*:}
    f=$OUT/llama-${l}l-dp$dp-tp$tp.yaml
    if [ ! -s "$f" ] || [ -n "$(find "$HERE/gen_plan.py" -newer "$f")" ]; then
      python3 "$HERE/gen_plan.py" --layers "$l" --dp "$dp" --tp "$tp" \
        -o "$f.tmp" 2>/dev/null
      mv "$f.tmp" "$f"
    fi
    cost_plans="$cost_plans $f"
  done
  # shellcheck disable=SC2086 # a list of files
  "$CBENCH" -n "$REPS" $cost_plans
fi

# Pipelined training-step verification (BENCH_TRAIN=0 skips it): the
# 4-layer transformer at hidden 512, seq 256, batch 8 on dp x tp x pp =
# 2 x 2 x 2 under 1F1B with 4 microbatches, against the reference training
# step; the same step without the pipeline alongside.
if [ "${BENCH_TRAIN:-1}" != 0 ]; then
  TBENCH=$BUILD/bench/bench_train
  if [ ! -x "$TBENCH" ]; then
    echo "bench/run.sh: $TBENCH is missing; run 'make bench'" >&2
    exit 1
  fi
  echo
  echo "== training-step verification: 4 layers, hidden 512, seq 256, batch 8 =="
  for pp in 2 1; do
    f=$OUT/train-4l-h512-pp$pp.yaml
    if [ ! -s "$f" ] || [ -n "$(find "$HERE/gen_plan.py" -newer "$f")" ]; then
      mb=""
      [ "$pp" -gt 1 ] && mb="--microbatches 4"
      # shellcheck disable=SC2086 # mb is an option or nothing
      python3 "$HERE/gen_plan.py" --layers 4 --dp 2 --tp 2 --pp $pp $mb \
        --batch 8 --seq 256 --hidden 512 --heads 8 --ffn 2048 \
        --vocab 1024 --dtype f32 --train sgd --steps 1 \
        -o "$f.tmp" 2>/dev/null
      mv "$f.tmp" "$f"
    fi
    for mode in exact float; do
      "$TBENCH" "$f" --mode $mode -n "${BENCH_TRAIN_REPS:-2}"
    done
  done
fi

# Distributed verification: one process against a process per rank
# (BENCH_DIST=0 skips it).
if [ "${BENCH_DIST:-1}" != 0 ]; then
  echo
  echo "== verify: one process against a process per rank (TCP, this machine) =="
  sh "$HERE/bench_dist.sh" "$BUILD"
fi

# The search: the fixed table of strategies on Llama-style programs
# (BENCH_SEARCH=0 skips it).
if [ "${BENCH_SEARCH:-1}" != 0 ]; then
  echo
  echo "== search: 8 and 32 layers on dp x tp = 2x4 and 8x8, H100 =="
  sh "$HERE/bench_search.sh" "$BUILD"
fi
