#!/bin/sh
# Repeated-layer sharing in the exact searches: Llama-style programs of
# 1, 4, 16, 32 and 126 layers (bench/gen_plan.py, hidden 4096, 32 heads;
# the program alone) on a 3-axis mesh (dp=2,tp=4,cp=2) and a 4-axis mesh
# (dp=2,fsdp=2,tp=4,cp=2), searched by dp and ilp with the sharing (the
# default) and without (--no-share), in the same run, H100 profile. For
# each: the processor seconds of the strategy (as `plan search` reports
# them), the cost evaluations, the modeled step of the plan, and the
# ratio of the times without and with the sharing. A search past
# LIMIT_S seconds of wall time (default 300) is stopped and shown as
# '>LIMIT'.
#
# usage: bench/bench_search_layers.sh [BUILD_DIR]   (default: build)
#   LAYERS="1 4 16 32 126" MESHES="..." STRATEGIES="dp ilp" LIMIT_S=300
set -eu
BUILD=${1:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
TOOL=$BUILD/plan
OUT=$HERE/out/search-layers
mkdir -p "$OUT"
LAYERS=${LAYERS:-"1 4 16 32 126"}
MESHES=${MESHES:-"dp=2,tp=4,cp=2 dp=2,fsdp=2,tp=4,cp=2"}
STRATEGIES=${STRATEGIES:-"dp ilp"}
LIMIT_S=${LIMIT_S:-300}
# one search: "seconds evaluations step" or ">LIMIT - -"
run() { # PROGRAM MESH STRATEGY [--no-share]
  line=$(timeout "$LIMIT_S" "$TOOL" search "$1" --mesh "$2" --strategy "$3" \
         --hardware h100 --quiet ${4:-} -o "$OUT/found.yaml" 2>/dev/null |
         tail -n 1) || line=""
  secs=$(printf '%s' "$line" | sed -n 's/.*cost evaluations in \([0-9.]*\) s.*/\1/p')
  evals=$(printf '%s' "$line" | sed -n 's/.*; \([0-9]*\) cost evaluations.*/\1/p')
  step=$(printf '%s' "$line" | sed -n 's/.*modeled step \([0-9.]*\) ms.*/\1/p')
  echo "${secs:->$LIMIT_S} ${evals:--} ${step:--}"
}
printf '%-7s %-22s %-4s %10s %10s %10s %10s %8s %10s %10s\n' layers mesh \
  strat "shared (s)" "evals" "alone (s)" "evals" ratio "step (ms)" "alone (ms)"
for layers in $LAYERS; do
  prog=$OUT/llama-$layers.yaml
  [ -s "$prog" ] || python3 "$HERE/gen_plan.py" --layers "$layers" --dp 2 --tp 4 \
    -o - 2>/dev/null | sed '/^mesh:/,$d' >"$prog"
  for mesh in $MESHES; do
    for s in $STRATEGIES; do
      set -- $(run "$prog" "$mesh" "$s")
      a_s=$1 a_e=$2 a_step=$3
      set -- $(run "$prog" "$mesh" "$s" --no-share)
      b_s=$1 b_e=$2 b_step=$3
      ratio=$(awk -v a="$a_s" -v b="$b_s" 'BEGIN {
        if (a ~ /^>/) print "-"; else if (b ~ /^>/) printf ">%.1f\n", substr(b, 2) / (a > 0 ? a : 1e-3);
        else printf "%.1f\n", b / (a > 0 ? a : 1e-3) }')
      printf '%-7s %-22s %-4s %10s %10s %10s %10s %8s %10s %10s\n' "$layers" "$mesh" \
        "$s" "$a_s" "$a_e" "$b_s" "$b_e" "$ratio" "$a_step" "$b_step"
    done
  done
done
