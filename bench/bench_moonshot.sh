#!/bin/sh
# The 405B moonshot (make bench-moonshot; docs/cost.md, "The 405B
# moonshot"): a Llama-3-405B-scale training step (bench/gen_published.py:
# 126 layers, hidden 16384, seq 8192, a global batch of 4096 sequences,
# AdamW) on a 4-axis mesh of 16,384 ranks, dp=16 x fsdp=8 x tp=8 x pp=16,
# 16 stages of 7 or 8 layers, 32 microbatches, 1F1B. Each step is timed
# (wall seconds and peak resident memory, /usr/bin/time) and must succeed:
#   generate   the program (gen_published.py) and the recipe's input
#              (bench/recipe_input.py: the mesh and the pipeline)
#   search     `plan search --strategy megatron` on that mesh (the
#              recipe: tp column/row parallel, heads split, vocab-parallel
#              embedding, the batch over dp and fsdp)
#   validate   `plan validate` of the plan found
#   hash       `plan hash` of it
#   verify     `plan verify --reduce` of it (shapes and mesh reduced;
#              exact mode, then float mode): EQUAL wanted
# and the total against the targets: under 60 s, under 4 GB.
# usage: bench_moonshot.sh BUILD_DIR
set -u
build=${1:-build}
plan=$build/plan
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

total=0 peak=0
step() { # NAME COMMAND...: runs it timed, adds to the totals, stops on failure
  name=$1
  shift
  if ! /usr/bin/time -f '%e %M' -o "$tmp/time" "$@" >"$tmp/out" 2>"$tmp/err"; then
    echo "$name failed:"
    cat "$tmp/out" "$tmp/err"
    exit 1
  fi
  set -- $(tail -1 "$tmp/time")
  total=$(awk -v a="$total" -v b="$1" 'BEGIN { print a + b }')
  [ "$2" -gt "$peak" ] && peak=$2
  printf '%-10s %8.2f s %10.1f MB   %s\n' "$name" "$1" "$(awk -v k="$2" 'BEGIN { print k / 1024 }')" \
    "$(grep -v '^training:' "$tmp/out" | tail -1 | cut -c1-150)"
}

printf '%-10s %10s %13s   %s\n' step wall "peak memory" "what it said"
step generate sh -c "python3 '$root/bench/gen_published.py' llama3-8b --size 405b \
  --layers 126 --seq 8192 --local-batch 32 --ranks 128 -o '$tmp/prog.yaml' &&
  python3 '$root/bench/recipe_input.py' '$tmp/prog.yaml' dp=16,fsdp=8,tp=8,pp=16 \
  126 '$tmp/in.yaml' 32 && grep -c 'name:' '$tmp/in.yaml'"
step search "$plan" search "$tmp/in.yaml" --strategy megatron --hardware h100 \
  --quiet -o "$tmp/plan.yaml"
step validate "$plan" validate "$tmp/plan.yaml"
step hash "$plan" hash "$tmp/plan.yaml"
step verify "$plan" verify --reduce "$tmp/plan.yaml"
grep -q ': EQUAL' "$tmp/out" || { echo "verify: not EQUAL"; cat "$tmp/out"; exit 1; }
grep '^reduced:' "$tmp/out" | sed 's/^/    /' | cut -c1-400
printf '%-10s %8.2f s %10.1f MB   (targets: 60 s, 4096 MB)\n' total "$total" \
  "$(awk -v k="$peak" 'BEGIN { print k / 1024 }')"
awk -v t="$total" -v p="$peak" 'BEGIN { exit !(t < 60 && p < 4 * 1024 * 1024) }' ||
  { echo "moonshot: past a target"; exit 1; }
