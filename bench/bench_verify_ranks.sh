#!/bin/sh
# Verify time against the rank count, no reduction (make
# bench-verify-ranks; docs/verify.md, "Speed"): a 4-layer Llama-style
# training step (bench/gen_plan.py: hidden 64, 8 heads, ffn 128, seq 16,
# vocab 64, 2 sequences a dp rank, SGD) on dp x tp = 8, with dp = 16, 32,
# 64, 128 and 256 (128 to 2048 ranks), verified at full size in exact
# mode. Prints the wall seconds and peak memory of each, the seconds per
# rank and their ratio to the 128-rank run's (at most linear: a ratio
# near 1).
# usage: bench_verify_ranks.sh BUILD_DIR   (RANKS="128 256 512 1024 2048")
set -eu
build=${1:-build}
plan=$build/plan
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
RANKS=${RANKS:-"128 256 512 1024 2048"}
printf '%-6s %-10s %10s %12s %14s %8s\n' ranks mesh wall memory "per rank" ratio
base=
for n in $RANKS; do
  dp=$((n / 8))
  python3 "$here/gen_plan.py" --layers 4 --dp "$dp" --tp 8 --batch $((2 * dp)) \
    --seq 16 --hidden 64 --heads 8 --ffn 128 --vocab 64 --train sgd \
    -o "$tmp/p.yaml" 2>/dev/null
  /usr/bin/time -f '%e %M' -o "$tmp/t" "$plan" verify "$tmp/p.yaml" >"$tmp/out" 2>&1 ||
    { echo "verify on $n ranks failed:"; tail -3 "$tmp/out"; exit 1; }
  grep -q ': EQUAL' "$tmp/out" || { echo "not EQUAL on $n ranks"; exit 1; }
  set -- $(cat "$tmp/t")
  per=$(awk -v s="$1" -v n="$n" 'BEGIN { printf "%.2f", 1000 * s / n }')
  [ -n "$base" ] || base=$per
  printf '%-6s %-10s %8.2f s %9.0f MB %11s ms %7.2fx\n' "$n" "dp=$dp,tp=8" "$1" \
    "$(awk -v k="$2" 'BEGIN { print k / 1024 }')" "$per" \
    "$(awk -v a="$per" -v b="$base" 'BEGIN { print a / b }')"
done
