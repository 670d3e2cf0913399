#!/bin/sh
# The scale benchmark: work in proportion to the input.
# - `plan validate` and `plan hash` on chains of relu ops (100k, 200k,
#   400k and 1M ops on a one-device mesh) whose names come in three
#   orders: natural (n0000000, n0000001, ...), unpadded numbers (op0, op1,
#   ..., quadratic for the old name sort) and adversarial (the order that
#   made the old middle-pivot sort pick the smallest name at every level,
#   recursing once per op). For each: processor time (user + system, best
#   of BENCH_SCALE_REPS, default 1), time per op and its ratio to the 100k
#   chain of the same order; the target is a ratio of at most 1.5x.
# - `plan verify` of an 8-element relu on a 4194304-rank mesh: the time to
#   its answer (refused with exit 3 past the verifier's rank blocks).
# The chains are generated with awk into a temporary folder, one at a time.
#
# usage: bench/bench_scale.sh [BUILD_DIR]   (default: build)
# environment: BENCH_SCALE_SIZES (default "100000 200000 400000 1000000"),
#              BENCH_SCALE_REPS (default 1), BENCH_SCALE_TIMEOUT (seconds a
#              run may take, default 0: no limit; for timing an old build)
set -eu
BUILD=${1:-build}
TOOL=$(cd "$(dirname "$BUILD/plan")" && pwd)/plan
SIZES=${BENCH_SCALE_SIZES:-100000 200000 400000 1000000}
REPS=${BENCH_SCALE_REPS:-1}
LIMIT=${BENCH_SCALE_TIMEOUT:-0}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/libplan-bench-scale.XXXXXX")
trap 'rm -rf "$TMP"' EXIT INT TERM

# gen N ORDER: the chain plan on stdout
gen() {
  sh "$(dirname "$0")/../tests/gen_chain.sh" "$1" "$2"
}

# cpu VERB FILE: the best processor seconds of REPS runs ("exit-N" when the
# tool does not exit 0: 124 out of time, 139 a crash)
cpu() {
  best=
  k=0
  while [ "$k" -lt "$REPS" ]; do
    set +e
    /usr/bin/time -f '%U %S' -o "$TMP/t" timeout "$LIMIT" "$TOOL" "$1" "$2" \
      >/dev/null 2>&1
    rc=$?
    set -e
    if [ "$rc" -ne 0 ]; then
      echo "exit-$rc"
      return
    fi
    s=$(awk 'END { print $1 + $2 }' "$TMP/t")
    if [ -z "$best" ] || awk "BEGIN { exit !($s < $best) }"; then best=$s; fi
    k=$((k + 1))
  done
  echo "$best"
}

echo "scale: validate and hash, processor seconds (user + system), best of $REPS"
printf '%-12s %8s %9s %9s %9s %9s %9s %9s\n' order ops validate us/op ratio \
  hash us/op ratio
worst=0
for order in natural unpadded adversarial; do
  base_v=
  base_h=
  for n in $SIZES; do
    gen "$n" "$order" >"$TMP/chain.yaml"
    v=$(cpu validate "$TMP/chain.yaml")
    h=$(cpu hash "$TMP/chain.yaml")
    rm -f "$TMP/chain.yaml"
    if [ "${v#exit-}" != "$v" ] || [ "${h#exit-}" != "$h" ]; then
      printf '%-12s %8d   failed (validate %s, hash %s)\n' "$order" "$n" "$v" "$h"
      worst=fail
      continue
    fi
    pv=$(awk "BEGIN { print $v / $n * 1e6 }")
    ph=$(awk "BEGIN { print $h / $n * 1e6 }")
    [ -n "$base_v" ] || { base_v=$pv; base_h=$ph; }
    rv=$(awk "BEGIN { print $pv / $base_v }")
    rh=$(awk "BEGIN { print $ph / $base_h }")
    printf '%-12s %8d %9.3f %9.2f %8.2fx %9.3f %9.2f %8.2fx\n' "$order" "$n" \
      "$v" "$pv" "$rv" "$h" "$ph" "$rh"
    if [ "$worst" != fail ]; then
      worst=$(awk "BEGIN { m = $worst; if ($rv > m) m = $rv; if ($rh > m) m = $rh; print m }")
    fi
  done
done
if [ "$worst" = fail ]; then
  echo "time per op flat within 1.5x: FAIL (a run failed)"
elif awk "BEGIN { exit !($worst <= 1.5) }"; then
  echo "time per op flat within 1.5x: PASS (worst ratio ${worst}x)"
else
  echo "time per op flat within 1.5x: FAIL (worst ratio ${worst}x)"
fi

# ---- a mesh far larger than the data ---------------------------------------
cat >"$TMP/wide.yaml" <<'EOF'
libplan: "1.0"
program:
  name: tiny
  tensors:
    x: {shape: [8], dtype: f32, role: input}
  ops:
    - {name: act, op: relu, in: [x], out: y}
  outputs: [y]
mesh:
  axes: [dp=4194304]
placements:
  x: R
strategies:
  act: {in: [R], out: R}
EOF
for mode in "" "--reduce"; do
  set +e
  /usr/bin/time -f '%e %M' -o "$TMP/t" "$TOOL" verify $mode "$TMP/wide.yaml" \
    >"$TMP/out" 2>&1
  rc=$?
  set -e
  # GNU time puts "Command exited with non-zero status" before its line
  set -- $(tail -n 1 "$TMP/t")
  printf 'verify %-9s of an 8-element relu on 4194304 ranks: exit %d in %s s, %d MB peak\n' \
    "$mode" "$rc" "$1" "$(($2 / 1024))"
  grep -m 1 'error' "$TMP/out" | sed 's/^/  /' || true
done
