#!/bin/sh
# Regenerates the recorded outputs of the conformance vectors:
#
#   sh spec/vectors/regen.sh build/plan
#
# For every valid/NAME.yaml it writes
#   NAME.hashes     the exact output of `plan hash --part all NAME.yaml`
#   NAME.canonical  the exact output of `plan hash --part plan --canonical
#                   NAME.yaml` (`--part program` for a program-only file)
# and removes recorded files whose vector is gone. Run it only when a change
# to the format or the canonical form is intended, and review the diff: every
# changed hash is a change every user of the format sees. The invalid/
# vectors record their expectation in their first line and need no
# regeneration.
set -u
if [ $# -ne 1 ]; then
  echo "usage: sh spec/vectors/regen.sh PLAN_BINARY" >&2
  exit 2
fi
PLAN=$1
case $PLAN in /*) ;; *) PLAN=$(pwd)/$PLAN ;; esac
if [ ! -x "$PLAN" ]; then
  echo "regen: '$1' is not an executable plan tool" >&2
  exit 2
fi
DIR=$(cd "$(dirname "$0")" && pwd)/valid
cd "$DIR" || exit 2
fail=0 n=0
for f in *.yaml; do
  name=${f%.yaml}
  if ! "$PLAN" hash --part all "$f" >"$name.hashes.tmp" 2>"$name.err.tmp"; then
    echo "regen: $f does not load:" >&2
    cat "$name.err.tmp" >&2
    rm -f "$name.hashes.tmp" "$name.err.tmp"
    fail=1
    continue
  fi
  part=program
  grep -q '^plan ' "$name.hashes.tmp" && part=plan
  if ! "$PLAN" hash --part "$part" --canonical "$f" >"$name.canonical.tmp" \
       2>"$name.err.tmp"; then
    echo "regen: $f: no canonical $part encoding:" >&2
    cat "$name.err.tmp" >&2
    rm -f "$name.hashes.tmp" "$name.canonical.tmp" "$name.err.tmp"
    fail=1
    continue
  fi
  mv "$name.hashes.tmp" "$name.hashes"
  mv "$name.canonical.tmp" "$name.canonical"
  rm -f "$name.err.tmp"
  n=$((n + 1))
done
# recorded outputs of vectors that no longer exist
for r in *.hashes *.canonical; do
  [ -e "$r" ] || continue
  [ -e "${r%.*}.yaml" ] || { rm -f "$r"; echo "regen: removed stale $r"; }
done
echo "regen: recorded $n vectors in spec/vectors/valid"
exit $fail
