#!/bin/sh
# The examples tour, run by `make demo` as `sh examples/demo.sh build/plan`:
# validates every examples/*.plan.yaml and prints its plan hash, checks the
# standalone program file, verifies every example numerically (exact and
# float mode; plans not lowered yet, such as pipelines, say so), then shows
# two plans as tables (the Megatron MLP and the sequence-parallel
# transformer block). Exits non-zero when any example fails validation or
# verification, or cannot be read.
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

for f in mlp-megatron.plan.yaml transformer-block.plan.yaml; do
  echo
  echo "== plan show $f"
  if ! "$PLAN" show "$DIR/$f"; then
    echo "  FAILED: plan show $f"
    fail=1
  fi
done

echo
if [ "$fail" -ne 0 ]; then
  echo "demo: some examples FAILED"
  exit 1
fi
echo "demo: every example is valid, and every lowered one verifies equal"
