#!/bin/sh
# Tests of the `plan` tool on inputs whose size once decided whether it
# ran at all:
# - a 120k-op chain whose names come in the order that made the old
#   middle-pivot name sort recurse once per op (a stack overflow in every
#   verb that hashes): validate and hash finish, agree, in seconds;
# - many glob patterns: prefixed ones are fast, leading-wildcard ones are
#   refused at the bound (2^27 ops x pattern bytes), in seconds;
# - a plan of 300 regions hashes every one (the hash once took the first
#   256); regions x ops over 2^27 is refused at the regions' position;
# - a mesh of 4194304 ranks over an 8-element relu: verify and verify
#   --reduce are refused with exit 3 and the reason (ranks x buffers over
#   the verifier's limit of rank blocks), at once, under `timeout 10`.
#
# usage: sh tests/cli/scale.sh PATH/TO/plan
# Prints "cli-scale: N passed, M failed" and exits non-zero when anything
# failed.

plan=${1:?usage: scale.sh PATH/TO/plan}
case $plan in /*) ;; *) plan=$(pwd)/$plan ;; esac
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/tests/lib.sh"
lib_init cli-scale

# ---- the adversarial name order --------------------------------------------

sh "$root/tests/gen_chain.sh" 120000 adversarial >"$tmp/adv.yaml"

expect_in 0 "validate a 120k-op chain in adversarial name order" 60 validate "$tmp/adv.yaml"
has "$out" "valid (0 errors, 0 warnings) xxh3:" "validate the adversarial chain"
vhash=$(sed -n 's/.* \(xxh3:[0-9a-f]*\)$/\1/p' "$out")
expect_in 0 "hash a 120k-op chain in adversarial name order" 60 hash "$tmp/adv.yaml"
if [ -n "$vhash" ] && [ "$(cat "$out")" = "$vhash" ]; then ok; else
  bad "hash and validate print different hashes ($vhash)"
fi

# ---- many glob patterns ------------------------------------------------------

# a literal prefix picks the ops a pattern can match out of the sorted
# names: 12000 patterns over 120k ops, each covering ten, stay fast
awk '/^  "\*": / { next } { print }
  /^strategies:$/ { for (k = 0; k < 12000; k++) printf "  \"n%06d*\": {in: [R], out: R}\n", k }' \
  "$tmp/adv.yaml" >"$tmp/globs.yaml"
expect_in 0 "12000 prefixed glob patterns over 120k ops" 30 validate "$tmp/globs.yaml"
has "$out" "valid (0 errors, 0 warnings)" "12000 prefixed glob patterns"
# patterns that start with a wildcard scan every op: bounded, refused at
# the pattern that passes the bound, in seconds
awk '{ print }
  /^strategies:$/ { for (k = 0; k < 30000; k++) printf "  \"*z%d\": {in: [R], out: R}\n", k }' \
  "$tmp/adv.yaml" >"$tmp/wild.yaml"
expect_in 2 "30000 leading-wildcard patterns over 120k ops" 40 validate "$tmp/wild.yaml"
has "$err" "wild.yaml:" "leading-wildcard patterns: the position"
has "$err" "error: strategies: the glob patterns scan more than 2^27 ops x pattern bytes" \
  "leading-wildcard patterns"

# ---- many regions ------------------------------------------------------------

# regions N R LAST: a chain of N ops with R pinned regions, region i
# holding op i (region R-1 holding op LAST instead)
regions() {
  awk -v n="$1" -v r="$2" -v last="$3" 'BEGIN {
    print "libplan: \"1.0\"\nprogram:\n  name: chain\n  tensors:"
    print "    x: {shape: [8], dtype: f32, role: input}\n  ops:"
    prev = "x"
    for (i = 0; i < n; i++) {
      printf "    - {name: n%05d, op: relu, in: [%s], out: t%05d}\n", i, prev, i
      prev = sprintf("t%05d", i)
    }
    printf "  outputs: [%s]\n", prev
    print "mesh:\n  axes: [dp=1]\nplacements:\n  x: R\nstrategies:"
    print "  \"*\": {in: [R], out: R}\nregions:"
    for (i = 0; i < r; i++)
      printf "  - {name: r%05d, kind: pinned, ops: [n%05d]}\n", i, i < r - 1 ? i : last
  }'
}
# the hash covers every region, not only the first 256
regions 400 300 299 >"$tmp/r300a.yaml"
regions 400 300 350 >"$tmp/r300b.yaml"
expect_in 0 "hash a plan of 300 regions" 20 hash "$tmp/r300a.yaml"
cp "$out" "$tmp/r300a.hash"
expect_in 0 "hash it with its last region changed" 20 hash "$tmp/r300b.yaml"
if cmp -s "$out" "$tmp/r300a.hash"; then
  bad "the 300th region's ops do not change the plan hash"
else ok; fi
# regions x ops is bounded (each region holds a flag per op)
regions 20000 7000 6999 >"$tmp/rmany.yaml"
expect_in 2 "7000 regions over 20000 ops" 20 validate "$tmp/rmany.yaml"
has "$err" "rmany.yaml:20015:3: error: 7000 regions over a program of 20000 ops: more than 2^27 regions x ops" \
  "7000 regions over 20000 ops"
# under the bound, every pass over the regions is linear in regions x ops
regions 20000 6000 5999 >"$tmp/rfew.yaml"
expect_in 0 "6000 regions over 20000 ops" 20 validate "$tmp/rfew.yaml"
has "$out" "valid (0 errors, 0 warnings)" "6000 regions over 20000 ops"

# ---- a mesh far larger than the data ---------------------------------------

cat >"$tmp/wide.yaml" <<'EOF'
libplan: "1.0"
program:
  name: tiny
  tensors:
    x: {shape: [8], dtype: f32, role: input}
  ops:
    - {name: act, op: relu, in: [x], out: y}
    - {name: act2, op: relu, in: [y], out: z}
    - {name: act3, op: relu, in: [z], out: z3}
    - {name: act4, op: relu, in: [z3], out: z4}
  outputs: [z4]
mesh:
  axes: [dp=4194304]
placements:
  x: R
strategies:
  act: {in: [R], out: R}
  act2: {in: [R], out: R}
  act3: {in: [R], out: R}
  act4: {in: [R], out: R}
EOF
expect_in 0 "validate a 4M-rank mesh" 10 validate "$tmp/wide.yaml"
for mode in "" "--reduce shapes"; do
  expect_in 3 "verify $mode on a 4M-rank mesh is refused" 10 verify $mode "$tmp/wide.yaml"
  has "$err" "verifying would simulate 4194304 ranks x 5 buffers" "verify $mode on a 4M-rank mesh"
  has "$err" "more than the 16777216 rank blocks" "verify $mode on a 4M-rank mesh"
done
# --reduce shrinks the mesh too: the 4M ranks verify through 2
expect_in 0 "verify --reduce on a 4M-rank mesh" 10 verify --reduce "$tmp/wide.yaml"
has "$out" "mesh: dp 4194304->2 (4194304->2 ranks)" "verify --reduce on a 4M-rank mesh"
has "$out" "EQUAL (exact mode" "verify --reduce on a 4M-rank mesh"
# the same program on 8 ranks, each holding one element, still verifies
sed 's/dp=4194304/dp=8/; s/x: R/x: S(0)/; s/{in: \[R\], out: R}/{in: [S(0)], out: S(0)}/g' \
  "$tmp/wide.yaml" >"$tmp/eight.yaml"
expect_in 0 "verify the same relu on 8 ranks" 10 verify "$tmp/eight.yaml"
has "$out" "EQUAL" "verify the same relu on 8 ranks"

lib_report
