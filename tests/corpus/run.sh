#!/bin/sh
# The bad-input corpus (the limits of libplan/src/yaml/yamldoc.h): hostile and invalid plan files, each
# refused by `plan validate` with exit 2, the file, line and column of the
# problem ("FILE:LINE:COL: error:"), nothing on stdout, and quickly.
#
# Committed cases are tests/corpus/bad/*.yaml; the first line of each is
#   # expect: CODE LINE COL
# with CODE the plan_status_name of the load error (syntax, schema, version,
# invalid, limit, io). The CLI prints no code, so the script checks exit
# status and position; tests/unit/test_load.c checks the codes of the same
# files through the library. Cases that would be big or binary in the tree
# (a huge scalar, NUL and invalid UTF-8 bytes, an empty file, deep nesting
# by the thousand) are generated into a temporary folder here.
#
# usage: sh tests/corpus/run.sh PATH/TO/plan
# Prints "corpus: N passed, M failed"; exits non-zero when anything failed.

plan=${1:?usage: run.sh PATH/TO/plan}
case $plan in /*) ;; *) plan=$(pwd)/$plan ;; esac
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/libplan-corpus.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT INT TERM

passed=0
failed=0
limit=10 # seconds a single file may take

if command -v timeout >/dev/null 2>&1; then
  to="timeout $limit"
else
  to=""
fi

# check FILE CODE LINE COL
check() {
  file=$1
  want="$3:$4"
  start=$(date +%s)
  $to "$plan" validate "$file" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  took=$(($(date +%s) - start))
  why=""
  if [ "$rc" -eq 124 ]; then
    why="took more than ${limit}s"
  elif [ "$rc" -ne 2 ]; then
    why="exit $rc, wanted 2"
  elif ! grep -F -e "$file:$want: error:" "$tmp/err" >/dev/null; then
    why="no '$file:$want: error:' (wanted $2 at $want)"
  elif [ -s "$tmp/out" ]; then
    why="wrote to stdout"
  elif [ "$took" -gt "$limit" ]; then
    why="took ${took}s"
  fi
  if [ -z "$why" ]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAIL: $(basename "$file"): $why"
    sed -n '1,3s/^/    /p' "$tmp/err"
  fi
}

# ---- committed cases ----------------------------------------------------------

n=0
for f in "$here"/bad/*.yaml; do
  [ -e "$f" ] || continue
  n=$((n + 1))
  # shellcheck disable=SC2046
  set -- $(sed -n '1s/^# expect: *//p' "$f")
  if [ $# -ne 3 ]; then
    failed=$((failed + 1))
    echo "FAIL: $(basename "$f"): first line is not '# expect: CODE LINE COL'"
    continue
  fi
  check "$f" "$1" "$2" "$3"
done
if [ "$n" -lt 20 ]; then
  failed=$((failed + 1))
  echo "FAIL: only $n committed cases in $here/bad"
fi

# ---- generated cases ----------------------------------------------------------

g=$tmp/gen
mkdir "$g"

# An empty file: no document at all.
: >"$g/empty.yaml"
check "$g/empty.yaml" syntax 1 1

# Only whitespace and newlines.
printf '\n\n   \n' >"$g/blank.yaml"
check "$g/blank.yaml" syntax 1 1

# A raw NUL byte (libyaml refuses control characters) at line 2, column 17.
printf 'libplan: "0.1"\nprogram: {ops: [\000]}\n' >"$g/nul.yaml"
check "$g/nul.yaml" syntax 2 17

# Invalid UTF-8: a lone continuation byte, and a truncated sequence at the
# end of the file.
printf 'libplan: "0.1"\nprogram:\n  name: caf\200\n  ops: []\n' >"$g/utf8.yaml"
check "$g/utf8.yaml" syntax 3 12
printf 'libplan: "0.1"\nprogram: {ops: []}\nx-note: \342\202' >"$g/utf8-end.yaml"
check "$g/utf8-end.yaml" syntax 3 9

# UTF-16 with a byte-order mark.
printf '\377\376l\000i\000b\000' >"$g/utf16.yaml"
check "$g/utf16.yaml" syntax 1 1

# A huge scalar: 2 MiB in one provenance string (limit 1 MiB).
{
  printf 'libplan: "0.1"\nprogram: {ops: []}\nprovenance:\n  note: '
  head -c 2097152 /dev/zero | tr '\000' 'a'
  printf '\n'
} >"$g/huge-scalar.yaml"
check "$g/huge-scalar.yaml" limit 4 9

# A huge key (explicit: libyaml takes plain keys of at most 1024
# characters).
{
  printf 'libplan: "0.1"\nprogram: {ops: []}\n? x-'
  head -c 1100000 /dev/zero | tr '\000' 'k'
  printf '\n: 1\n'
} >"$g/huge-key.yaml"
check "$g/huge-key.yaml" limit 3 3

# Nesting by the thousand, flow and block: refused at level 65.
{
  printf 'libplan: "0.1"\nprogram: '
  i=0
  while [ $i -lt 5000 ]; do printf '['; i=$((i + 1)); done
  printf '\n'
} >"$g/deep-5000.yaml"
check "$g/deep-5000.yaml" limit 2 73
awk 'BEGIN { printf "libplan: \"0.1\"\nx-deep:\n"; ind = "  ";
             for (i = 0; i < 2000; i++) { printf "%s- \n", ind; ind = ind "  " }
             print "program: {ops: []}" }' >"$g/deep-block-2000.yaml"
check "$g/deep-block-2000.yaml" limit 66 129

# The classic alias bomb ("billion laughs"), ten levels.
{
  printf 'libplan: "0.1"\nprogram: {ops: []}\nx-lol:\n  l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n'
  i=1
  while [ $i -lt 10 ]; do
    p=$((i - 1))
    printf '  l%d: &l%d [*l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d]\n' \
      $i $i $p $p $p $p $p $p $p $p $p $p
    i=$((i + 1))
  done
} >"$g/billion-laughs.yaml"
check "$g/billion-laughs.yaml" schema 4 7

# Many keys that collide in naive hashing do not make loading slow, and a
# duplicate among 100000 keys is still found (at the second occurrence).
awk 'BEGIN { print "libplan: \"0.1\""; print "program: {ops: []}"; print "x-many:";
             for (i = 0; i < 100000; i++) printf "  k%d: %d\n", i, i;
             print "  k77: again" }' >"$g/many-keys.yaml"
check "$g/many-keys.yaml" schema 100004 3

# A long line of 200000 ops in flow style with one unknown kind at the end.
awk 'BEGIN { printf "libplan: \"0.1\"\nprogram:\n  tensors: {x: {shape: [2]}}\n  ops: [";
             for (i = 0; i < 20000; i++) printf "{name: o%d, op: relu, in: x, out: t%d}, ", i, i;
             printf "{name: last, op: frob, in: x, out: z}]\n" }' >"$g/long-line.yaml"
col=$(head -4 "$g/long-line.yaml" | tail -1 | awk '{ print index($0, "frob") }')
check "$g/long-line.yaml" invalid 4 "$col"

# A scalar just under the limit is fine (not a false positive): validate
# exits 0 here.
{
  printf 'libplan: "0.1"\nprogram: {ops: [{name: a, op: relu, in: x, out: y}], tensors: {x: {shape: [2]}}}\nprovenance:\n  note: '
  head -c 1000000 /dev/zero | tr '\000' 'b'
  printf '\n'
} >"$g/big-ok.yaml"
if $to "$plan" validate "$g/big-ok.yaml" >/dev/null 2>"$tmp/err"; then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
  echo "FAIL: big-ok.yaml: a 1000000-byte scalar was refused"
  sed -n '1,3s/^/    /p' "$tmp/err"
fi

echo "corpus: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
