#!/bin/sh
# The overlap search's modeled gain (docs/cost.md, "Overlap"): the 32-layer
# Llama of examples/models/llama-32l.recipe.plan.yaml (its program alone,
# forward and loss, bf16), laid out by the fsdp strategy on a 3-axis mesh
# (dp=2,fsdp=4,tp=8) and a 4-axis mesh (dp=2,fsdp=2,sp=2,tp=4), 8 devices
# a host, H100 profile; then, in the same run, `plan search --overlap` on
# the same plan (the same strategy, then the overlap search). For each
# mesh: the modeled step without overlap (the baseline: every collective
# on the compute stream), with the searched overlap, their ratio, the
# overlap entries and the overlap search's processor seconds (model,
# CBC, the plans checked and priced). The plan found is validated.
#
# usage: bench/bench_overlap.sh [BUILD_DIR]   (default: build)
#   MESHES="dp=2,fsdp=4,tp=8 dp=2,fsdp=2,sp=2,tp=4" STRATEGY=fsdp
set -eu
BUILD=${1:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
TOOL=$BUILD/plan
OUT=$HERE/out/overlap
mkdir -p "$OUT"
MESHES=${MESHES:-"dp=2,fsdp=4,tp=8 dp=2,fsdp=2,sp=2,tp=4"}
STRATEGY=${STRATEGY:-fsdp}
# the program of the 32-layer Llama, and a plan of it per mesh (8 devices
# a host) for the search to make every decision of
awk 'NR == 1 || /^libplan:/ {next} /^program:/ {on = 1} on && /^[a-z]/ && !/^program:/ {exit} on' \
  "$ROOT/examples/models/llama-32l.recipe.plan.yaml" >"$OUT/program.part"
printf '%-24s %12s %12s %8s %8s %10s\n' mesh "no overlap" overlap gain entries "search s"
for mesh in $MESHES; do
  axes=$(printf '%s' "$mesh" | sed 's/,/, /g')
  name=$(printf '%s' "$mesh" | tr ',=' '-_')
  plan=$OUT/llama-32l.$name.plan.yaml
  { echo 'libplan: "1.0"'; cat "$OUT/program.part"
    printf 'mesh:\n  axes: [%s]\n  devices_per_host: 8\n' "$axes"; } >"$plan"
  "$TOOL" search "$plan" --strategy "$STRATEGY" --hardware h100 \
    -o "$OUT/plain.yaml" >/dev/null 2>&1
  "$TOOL" search "$plan" --strategy "$STRATEGY" --hardware h100 --overlap \
    -o "$OUT/overlap.yaml" 2>"$OUT/notes.txt" >/dev/null
  "$TOOL" validate "$OUT/overlap.yaml" >/dev/null
  plain=$("$TOOL" cost --hardware h100 --format json "$OUT/plain.yaml" |
          python3 -c 'import json,sys; print(json.load(sys.stdin)["time"]["step"])')
  with=$("$TOOL" cost --hardware h100 --format json "$OUT/overlap.yaml" |
         python3 -c 'import json,sys; t=json.load(sys.stdin)["time"]; print(t["step"])')
  note=$(grep '^overlap:' "$OUT/notes.txt" | tail -n 1)
  entries=$(printf '%s' "$note" | sed -n 's/^overlap: \([0-9]*\) entries.*/\1/p')
  secs=$(printf '%s' "$note" | sed -n 's/.*; \([0-9.e+-]*\) s$/\1/p')
  python3 -c 'import sys
m, a, b, e, s = sys.argv[1:]
a, b = float(a), float(b)
print("%-24s %9.2f ms %9.2f ms %7.2fx %8s %10s" % (m, a * 1e3, b * 1e3, a / b, e, s))' \
    "$mesh" "$plain" "$with" "$entries" "$secs"
done
