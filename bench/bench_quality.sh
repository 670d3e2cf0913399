#!/bin/sh
# The joint search against TorchTitan's published recipes (make
# bench-quality; docs/cost.md, "Search against the recipes"): Llama 3 8B,
# 70B and 405B training steps (bench/gen_published.py: seq 8192, bf16,
# AdamW, TorchTitan's selective activation checkpointing as the plan's own
# recompute), each on a device count with 8 devices a host. For each case
# the joint search (`plan search --devices N --hosts N/8`) and, in the same
# run, the recipe's own plan, searched with its strategy on its mesh:
#   8B   FSDP over every device (TorchTitan's llama3_8b on 64 H100s);
#   70B  FSDP x TP 8 (TorchTitan's llama3_70b: tp 8, the rest FSDP);
#   405B FSDP x TP 8 x PP (Llama 3's 405B recipe: tp 8, pp 16; here pp 8
#        on 512 devices, interleaving left out), and Llama 3's own run
#        on 16,384 devices: TP 8 x PP 16 x DP 128 (here FSDP 128), a
#        global batch of 2048 sequences, 16 microbatches.
# Prints per case the recipe's modeled step and memory, the found plan's,
# their ratio, the search time, and `plan verify --reduce` of the found
# plan (EQUAL expected).
# usage: bench_quality.sh BUILD_DIR
set -u
build=${1:-build}
plan=$build/plan
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

step_of() { # FILE: the summary's modeled step in ms
  sed -n 's/.*modeled step \([0-9.]*\) ms.*/\1/p' "$1" | head -1
}
mem_of() { # FILE: the summary's peak memory, and whether it fits
  sed -n 's/.*peak memory \([0-9.]* [KMGT]iB\) per device\( (does not fit)\)*.*/\1\2/p' "$1" | head -1
}

printf '%-6s %-7s %-20s %-40s %-18s %-22s %-6s %-8s %s\n' model devices \
  recipe "recipe step, memory" found "found step, memory" ratio search verify
for case in "8b 32 64 1 1 fsdp=64" "8b 32 512 1 1 fsdp=512" \
            "70b 80 256 2 8 fsdp=32,tp=8" "405b 126 512 2 8 pp=8,fsdp=8,tp=8" \
            "405b 126 16384 1 8 pp=16,fsdp=128,tp=8 16"; do
  set -- $case
  size=$1 layers=$2 n=$3 lb=$4 tp=$5 mesh=$6 mb=${7:-}
  prog=$tmp/llama3-$size-$n.plan.yaml
  python3 "$root/bench/gen_published.py" llama3-8b --size "$size" \
    --layers "$layers" --seq 8192 --local-batch "$lb" --ranks $((n / tp)) \
    -o "$prog" || exit 1
  # the recipe: its strategy on its mesh (a pipeline cut as evenly as the
  # layers go, 1F1B, 2 microbatches a stage)
  recipe=$tmp/recipe-$size-$n.plan.yaml
  python3 "$root/bench/recipe_input.py" "$prog" "$mesh" "$layers" \
    "$tmp/recipe-in.yaml" $mb || exit 1
  "$plan" search "$tmp/recipe-in.yaml" --strategy fsdp --hardware h100 \
    --quiet -o "$recipe" >"$tmp/recipe.out" 2>"$tmp/recipe.err" || {
    echo "llama3-$size on $n: the recipe's search failed"; cat "$tmp/recipe.err"; exit 1; }
  found=$tmp/found-$size-$n.plan.yaml
  t0=$(date +%s.%N)
  "$plan" search "$prog" --devices "$n" --hosts $((n / 8)) --hardware h100 \
    --quiet -o "$found" >"$tmp/found.out" 2>"$tmp/found.err" || {
    echo "llama3-$size on $n: the joint search failed"; cat "$tmp/found.err"; exit 1; }
  t1=$(date +%s.%N)
  fmesh=$(sed -n 's/.*joint search on \([^:]*\):.*/\1/p' "$tmp/found.out")
  rs=$(step_of "$tmp/recipe.out") fs=$(step_of "$tmp/found.out")
  v=$(timeout 600 "$plan" verify --reduce "$found" 2>&1)
  case "$v" in
    *": EQUAL"*) verdict=EQUAL ;;
    *"rank blocks the verifier runs"*) verdict="not run: past the verifier's rank blocks" ;;
    *) verdict=$(echo "$v" | tail -1) ;;
  esac
  printf '%-6s %-7s %-20s %-40s %-18s %-22s %-6s %-8s %s\n' "$size" "$n" \
    "$mesh" "$rs ms, $(mem_of "$tmp/recipe.out")" "$fmesh" \
    "$fs ms, $(mem_of "$tmp/found.out")" \
    "$(awk -v a="$fs" -v b="$rs" 'BEGIN { printf "%.2fx", a / b }')" \
    "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f s", b - a }')" "$verdict"
  grep "joint:" "$tmp/found.err" | sed 's/^/    /'
done
