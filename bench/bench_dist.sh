#!/bin/sh
# The distributed-verification benchmark: `plan verify` in one process
# (every rank simulated) against `plan verify --distributed` with one
# process per rank on this machine (the CPU runner, over MPI: mpirun on
# localhost, shared memory), on
# the same plans in the same run: wall time (best of BENCH_DIST_REPS,
# default 3), their ratio, and peak memory (one process; the largest of
# the distributed processes, and their sum). With more processes than
# cores the distributed run shares the cores, so the ratio is an upper
# bound on its overhead; each process holding the reference program is
# what the memory columns show.
#
# usage: bench/bench_dist.sh [BUILD_DIR]   (default: build)
set -eu
BUILD=${1:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
TOOL=$(cd "$(dirname "$BUILD/plan")" && pwd)/plan
REPS=${BENCH_DIST_REPS:-3}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/libplan-bench-dist.XXXXXX")
trap 'rm -rf "$TMP"' EXIT INT TERM
now() { date +%s.%N; }

# one_run PLAN ARGS: seconds and peak KB of one process
one_run() {
  t0=$(now)
  /usr/bin/time -f '%M' -o "$TMP/mem" "$TOOL" verify "$@" >/dev/null 2>&1 || true
  t1=$(now)
  echo "$(echo "$t1 - $t0" | bc) $(cat "$TMP/mem")"
}

# dist_run N ARGS: seconds, the largest and the summed peak KB of N
# processes, started by mpirun (shared memory, as root too)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cat >"$TMP/rank.sh" <<'END'
r=${OMPI_COMM_WORLD_RANK:?not under mpirun}
/usr/bin/time -f '%M' -o "$BENCH_TMP/mem.$r" "$@" >/dev/null 2>&1 || true
END
dist_run() {
  n=$1
  shift
  t0=$(now)
  BENCH_TMP=$TMP mpirun --oversubscribe --mca btl self,vader -quiet \
    -x BENCH_TMP -np "$n" sh "$TMP/rank.sh" "$TOOL" verify --distributed "$@" \
    >/dev/null 2>&1 || true
  t1=$(now)
  max=0
  sum=0
  i=0
  while [ "$i" -lt "$n" ]; do
    m=$(tail -n 1 "$TMP/mem.$i")
    sum=$((sum + m))
    [ "$m" -gt "$max" ] && max=$m
    i=$((i + 1))
  done
  echo "$(echo "$t1 - $t0" | bc) $max $sum"
}

# a training step big enough for the runs to outweigh starting processes:
# 2 layers, seq 256, hidden 512, on dp x tp = 2x2 (bench/gen_plan.py)
GEN=$HERE/out/dist/train-2l-2x2.plan.yaml
mkdir -p "$(dirname "$GEN")"
[ -s "$GEN" ] || python3 "$HERE/gen_plan.py" --layers 2 --dp 2 --tp 2 --batch 4 \
  --seq 256 --hidden 512 --heads 8 --ffn 2048 --vocab 1024 --train sgd \
  -o "$GEN" >/dev/null

printf '%-34s %5s %9s %9s %7s %10s %10s %10s\n' plan ranks "one (s)" "dist (s)" ratio \
  "one (MB)" "max (MB)" "sum (MB)"
for spec in "examples/transformer-block.plan.yaml" \
            "examples/transformer-train.plan.yaml" \
            "examples/moe-train.plan.yaml" \
            "--mode float examples/transformer-train.plan.yaml" \
            "--reduce examples/models/llama3-8b-layer.recipe.plan.yaml" \
            "$GEN"; do
  # shellcheck disable=SC2086 # the options, one word each
  set -- $spec
  eval "f=\${$#}"
  n=$("$TOOL" verify --report yaml "$@" 2>/dev/null | sed -n 's/^ranks: //p')
  : >"$TMP/one"
  : >"$TMP/dist"
  r=0
  while [ "$r" -lt "$REPS" ]; do
    (cd "$ROOT" && one_run "$@") >>"$TMP/one"
    (cd "$ROOT" && dist_run "$n" "$@") >>"$TMP/dist"
    r=$((r + 1))
  done
  o=$(sort -n "$TMP/one" | head -n 1)
  d=$(sort -n "$TMP/dist" | head -n 1)
  set -- $o $d
  name=$(basename "$f" .plan.yaml)
  case $spec in --mode*) name="$name (float)" ;; --reduce*) name="$name (reduced)" ;; esac
  printf '%-34s %5s %9.3f %9.3f %6.2fx %10d %10d %10d\n' "$name" "$n" "$1" "$3" \
    "$(echo "$3 / $1" | bc -l)" $(($2 / 1024)) $(($4 / 1024)) $(($5 / 1024))
done
