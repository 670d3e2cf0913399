#!/bin/sh
# The examples tour, run by `make tour` as `sh examples/tour.sh build/plan`:
# search a plan for the transformer block's program on a dp=2 x tp=2 mesh
# (the Megatron recipe, then the exact dynamic program, priced on the H100
# model), verify the found plan numerically on the CPU runner's simulated
# ranks, print it with its modeled costs, and replay the search from the
# plan's provenance. Then validate and hash every examples/*.plan.yaml,
# verify every example (exact and float mode; plans not lowered yet say
# so), draw a pipeline schedule, verify a pipelined training step under
# three schedules and draw their timelines, show two plans as tables, and
# price shard ratios and a stage cut for H100s beside A100s, and the
# searched placement of a DiT block on a 4x4 TPU v5e torus.
# Exits non-zero when anything fails. Its files go to DEMO_OUT (default
# build/demo).
set -u
PLAN=${1:-build/plan}
case $PLAN in */*) ;; *) PLAN=./$PLAN ;; esac
if [ ! -x "$PLAN" ]; then
  echo "demo: no plan tool at '$PLAN' (build it with make, or pass its path)" >&2
  exit 2
fi
DIR=$(dirname "$0")
fail=0
out=$(mktemp) || exit 2
trap 'rm -f "$out"' EXIT INT TERM

OUTDIR=${DEMO_OUT:-build/demo}
mkdir -p "$OUTDIR" || exit 2

echo "== search a plan for the transformer block on dp=2 x tp=2 (H100 model)"
for s in megatron dp; do
  if "$PLAN" search "$DIR/transformer-block.plan.yaml" --strategy $s \
       --hardware h100 -o "$OUTDIR/transformer-$s.plan.yaml" >"$out" 2>&1; then
    sed 's/^/  /' "$out"
  else
    echo "  FAILED: plan search --strategy $s"; sed 's/^/    /' "$out"; fail=1
  fi
done
found=$OUTDIR/transformer-dp.plan.yaml
echo
echo "== verify the found plan on the CPU runner (simulated ranks)"
for mode in exact float; do
  if "$PLAN" verify --mode $mode "$found" >"$out" 2>&1; then
    printf '  %s\n' "$(tail -n 1 "$out")"
  else
    echo "  FAILED: plan verify --mode $mode"; sed 's/^/    /' "$out"; fail=1
  fi
done
echo
echo "== the found plan"
"$PLAN" show "$found" || fail=1
echo
"$PLAN" cost --hardware h100 "$found" || fail=1
echo
echo "== replay the search from the plan's provenance"
if "$PLAN" replay "$found" >"$out" 2>&1; then sed 's/^/  /' "$out"; else
  echo "  FAILED: plan replay"; sed 's/^/    /' "$out"; fail=1; fi

echo
echo "== validate and hash every example plan"
for f in "$DIR"/*.plan.yaml; do
  name=$(basename "$f")
  if "$PLAN" validate "$f" >"$out" 2>&1; then
    verdict=$(tail -n 1 "$out" | sed 's/^.*: valid/valid/; s/ xxh3:.*$//')
    hash=$("$PLAN" hash "$f" 2>&1) || { hash="(no hash)"; fail=1; }
    printf '  %-28s %s  %s\n' "$name" "$hash" "$verdict"
    # warnings, if any, are worth seeing
    grep ': warning: ' "$out" | sed 's/^/    /'
  else
    printf '  %-28s FAILED\n' "$name"
    sed 's/^/    /' "$out"
    fail=1
  fi
done

echo
echo "== the standalone program and the plan that refers to it by path"
if prog=$("$PLAN" hash "$DIR/mlp-program.yaml" 2>&1); then
  printf '  %-28s program %s\n' mlp-program.yaml "$prog"
else
  printf '  %-28s FAILED: %s\n' mlp-program.yaml "$prog"
  fail=1
fi
if ref=$("$PLAN" hash --part program "$DIR/mlp-by-path.plan.yaml" 2>&1); then
  printf '  %-28s program %s\n' mlp-by-path.plan.yaml "$ref"
fi

echo
echo "== verify every example: lowered, run on simulated ranks, compared with the program"
for f in "$DIR"/*.plan.yaml; do
  name=$(basename "$f")
  for mode in exact float; do
    "$PLAN" verify --mode "$mode" "$f" >"$out" 2>&1
    rc=$?
    case $rc in
      0) printf '  %-28s %-5s %s\n' "$name" "$mode" "$(tail -n 1 "$out" | sed 's/^[^:]*: //')" ;;
      3) printf '  %-28s %-5s not run here: %s\n' "$name" "$mode" "$(tail -n 1 "$out" | sed 's/^plan: //; s/^error: //')" ;;
      *) printf '  %-28s %-5s FAILED (exit %s)\n' "$name" "$mode" "$rc"
         sed 's/^/    /' "$out"
         fail=1 ;;
    esac
  done
done

echo
echo "== the 1F1B pipeline schedule of pipeline-1f1b.plan.yaml"
if "$PLAN" schedule "$DIR/pipeline-1f1b.plan.yaml" --svg "$OUTDIR/1f1b.svg" >"$out" 2>&1; then
  sed 's/^/  /' "$out"
  echo "  (picture: $OUTDIR/1f1b.svg)"
else
  echo "  FAILED: plan schedule"; sed 's/^/    /' "$out"; fail=1
fi

echo
echo "== a pipelined training step: a 4-layer transformer on dp x tp x pp = 2 x 2 x 2, 4 microbatches"
for f in transformer4-1f1b transformer4-zb-h1 transformer4-interleaved; do
  if "$PLAN" verify "$DIR/$f.plan.yaml" >"$out" 2>&1; then
    printf '  %s\n' "$(grep '^training:' "$out" | cut -c1-110)..."
    printf '  %s\n' "$(tail -n 1 "$out" | sed 's/^[^:]*: //')"
  else
    echo "  FAILED: plan verify $f"; sed 's/^/    /' "$out"; fail=1
  fi
  if "$PLAN" schedule "$DIR/$f.plan.yaml" --svg "$OUTDIR/$f.svg" >"$out" 2>&1; then
    printf '  %s: %s (picture: %s)\n' "$f" "$(grep '^makespan' "$out")" "$OUTDIR/$f.svg"
  else
    echo "  FAILED: plan schedule $f"; sed 's/^/    /' "$out"; fail=1
  fi
done

for f in mlp-megatron.plan.yaml transformer-block.plan.yaml; do
  echo
  echo "== plan show $f"
  if ! "$PLAN" show "$DIR/$f"; then
    echo "  FAILED: plan show $f"
    fail=1
  fi
done

echo
echo "== unlike devices (H100 and A100): the LP's shard ratios and the stage cut; a placement on a torus (modeled)"
if "$PLAN" search "$DIR/hetero-llama.plan.yaml" --strategy hetero \
     -o "$OUTDIR/hetero-llama.plan.yaml" >"$out" 2>&1; then
  grep -v '^dp: note' "$out" | sed 's/^/  /'
else
  echo "  FAILED: plan search --strategy hetero"; sed 's/^/    /' "$out"; fail=1
fi
if "$PLAN" run "$DIR/hetero.lua" "$DIR/hetero-llama.plan.yaml" \
     "$DIR/models/llama3-8b-layer.recipe.plan.yaml" \
     "$DIR/models/dit-block.recipe.plan.yaml" "$DIR/pipeline-1f1b.plan.yaml" \
     >"$out" 2>&1; then
  cat "$out"
else
  echo "  FAILED: plan run hetero.lua"; sed 's/^/    /' "$out"; fail=1
fi

echo
if [ "$fail" -ne 0 ]; then
  echo "demo: some examples FAILED"
  exit 1
fi
echo "demo: the searched plan verifies equal and replays; every example is valid, and every lowered one verifies equal"
