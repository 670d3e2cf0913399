#!/bin/sh
# Writes a chain plan of N relu ops to stdout, for the tests and benchmarks
# of the tool on large inputs.
#
# usage: sh tests/gen_chain.sh N [ORDER]
#   natural      names n0000000, n0000001, ... in chain order (the default)
#   unpadded     names op0, op1, ... (their sorted order is not chain order)
#   adversarial  chain position i gets the rank key[i] of the order that made
#                the old middle-pivot name sort recurse once per op: it
#                swapped the middle entry of a part to its front as the
#                pivot; with the smallest name there, the part left is
#                [a2 .. a(n-1), a1], one shorter (a ring buffer).
n=${1:?usage: gen_chain.sh N [natural|unpadded|adversarial]}
order=${2:-natural}
case $order in natural | unpadded | adversarial) ;; *)
  echo "gen_chain.sh: unknown order '$order'" >&2
  exit 2
  ;;
esac
awk -v n="$n" -v order="$order" 'BEGIN {
  for (i = 0; i < n; i++) key[i] = i
  if (order == "adversarial") {
    for (i = 0; i < n; i++) buf[i] = i
    head = 0; tail = n; r = 0
    while (tail - head >= 8) {
      a = head; b = head + int((tail - head) / 2)
      t = buf[a]; buf[a] = buf[b]; buf[b] = t
      key[buf[head]] = r++; head++
      buf[tail++] = buf[head++]
    }
    for (i = head; i < tail; i++) key[buf[i]] = r++
  }
  print "libplan: \"1.0\"\nprogram:\n  name: chain\n  tensors:"
  print "    x: {shape: [8], dtype: f32, role: input}\n  ops:"
  prev = "x"
  for (i = 0; i < n; i++) {
    if (order == "unpadded") { op = "op" i; o = "t" i }
    else { op = sprintf("n%07d", key[i]); o = sprintf("t%07d", key[i]) }
    printf "    - {name: %s, op: relu, in: [%s], out: %s}\n", op, prev, o
    prev = o
  }
  printf "  outputs: [%s]\n", prev
  print "mesh:\n  axes: [dp=1]\nplacements:\n  x: R\nstrategies:"
  print "  \"*\": {in: [R], out: R}"
}'
