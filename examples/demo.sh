#!/bin/sh
# The demo, run by `make demo` as `sh examples/demo.sh build/plan`: the
# main job of the tool on a Llama-style model, short and readable.
#
#  1. writes the program and the expert recipe's plan: an 8-layer
#     Llama-style decoder (hidden 4096, 32 heads, seq 2048, batch 32, vocab
#     32000, bf16) on dp x tp x pp = 2 x 2 x 2, Megatron tensor parallelism,
#     two pipeline stages under 1F1B, trained with SGD (bench/gen_plan.py);
#  2. searches a plan for it (the dynamic program over every op's legal
#     strategies, priced on the H100 model) and prints the cost table
#     against the recipe;
#  3. verifies the found plan on the CPU runner: the training step with its
#     pipeline schedule, every microbatch, gradient and update compared with
#     the single-device program, at reduced shapes that keep the sharding;
#  4. draws the pipeline schedule, prints the plan hash and writes the plan.
#
# `make tour` walks every example. Files go to DEMO_OUT (default
# build/demo). Exits non-zero when a step fails.
set -u
PLAN=${1:-build/plan}
case $PLAN in */*) ;; *) PLAN=./$PLAN ;; esac
if [ ! -x "$PLAN" ]; then
  echo "demo: no plan tool at '$PLAN' (build it with make, or pass its path)" >&2
  exit 2
fi
HERE=$(cd "$(dirname "$0")" && pwd)
OUTDIR=${DEMO_OUT:-build/demo}
mkdir -p "$OUTDIR" || exit 2
out=$(mktemp) || exit 2
trap 'rm -f "$out"' EXIT INT TERM
fail() { echo "demo: FAILED: $1"; sed 's/^/  /' "$out"; exit 1; }

recipe=$OUTDIR/llama8-recipe.plan.yaml
found=$OUTDIR/llama8.plan.yaml
echo "== 1. an 8-layer Llama-style model on dp x tp x pp = 2 x 2 x 2 (the Megatron recipe)"
python3 "$HERE/../bench/gen_plan.py" --layers 8 --dp 2 --tp 2 --pp 2 \
  --train sgd -o "$recipe" >"$out" 2>&1 || fail "gen_plan.py"
"$PLAN" validate "$recipe" >"$out" 2>&1 || fail "plan validate"
printf '  %s\n' "$(tail -n 1 "$out" | sed 's/ xxh3:.*//')"

echo
echo "== 2. search a plan (dp over every op's legal strategies, H100 model)"
"$PLAN" search "$recipe" --strategy dp --limit 16 --hardware h100 \
  -o "$found" >"$out" 2>&1 || fail "plan search"
grep -v '^dp: note' "$out" | sed 's/^/  /'
cost_of() { "$PLAN" cost --hardware h100 "$1" 2>/dev/null; }
cost_of "$recipe" >"$out.r" || fail "plan cost (recipe)"
cost_of "$found" >"$out.f" || fail "plan cost (found)"
step() { sed -n 's/^  step  *\([0-9.]* ms\).*/\1/p' "$1"; }
bubble() { sed -n 's/.*bubble \([0-9.]* ms\).*/\1/p' "$1"; }
peak() { sed -n 's/^  peak \([0-9.]* GB\).*/\1/p' "$1"; }
sync() { sed -n 's/.*gradient sync \([0-9.]* ms\).*/\1/p' "$1"; }
printf '  %-8s %12s %12s %12s %16s\n' plan "step" "bubble" "grad sync" "peak memory"
printf '  %-8s %12s %12s %12s %16s\n' recipe "$(step "$out.r")" "$(bubble "$out.r")" \
  "$(sync "$out.r")" "$(peak "$out.r")"
printf '  %-8s %12s %12s %12s %16s\n' found "$(step "$out.f")" "$(bubble "$out.f")" \
  "$(sync "$out.f")" "$(peak "$out.f")"
rm -f "$out.r" "$out.f"

echo
echo "== 3. verify the found plan on the CPU runner (simulated ranks, reduced shapes)"
"$PLAN" verify --reduce "$found" >"$out" 2>&1 || fail "plan verify"
grep '^reduced:' "$out" | cut -c1-100 | sed 's/$/.../; s/^/  /'
grep '^training:' "$out" | sed 's/ (lr.*compared:/; compared:/; s/^/  /'
printf '  %s\n' "$(tail -n 1 "$out" | sed 's/^[^:]*: //')"

echo
echo "== 4. the pipeline schedule, the plan's hash, the plan file"
"$PLAN" schedule "$found" --svg "$OUTDIR/llama8-1f1b.svg" >"$out" 2>&1 ||
  fail "plan schedule"
grep '^rank [0-9]*:\|^makespan' "$out" | sed 's/^/  /'
printf '  timeline: %s\n' "$OUTDIR/llama8-1f1b.svg"
h=$("$PLAN" hash "$found" 2>&1) || fail "plan hash"
printf '  plan hash: %s\n  plan file: %s\n' "$h" "$found"
echo
echo "demo: a plan found, priced against the recipe, verified equal on the CPU runner, and written"
