#!/bin/sh
# Conformance run over spec/vectors (see spec/vectors/README.md):
#
#   sh tests/conformance/run.sh build/plan
#
# valid/NAME.yaml    validates (exit 0); `plan hash --part all` prints exactly
#                    NAME.hashes; the canonical encoding (plan part, or
#                    program part for a program-only file) is exactly
#                    NAME.canonical; each `# same-as: OTHER [PART...]` line
#                    holds (the hashes of PART, default plan, or program for
#                    program-only files, are equal) and each
#                    `# differs-from: OTHER [PART...]` line too (they differ).
# invalid/NAME.yaml  first line `# expect: CODE LINE COLUMN`: loading it exits
#                    2 and stderr names `NAME.yaml:LINE:COLUMN: error:`.
# Ends with "conformance: N passed, M failed"; exits 1 on any failure.
set -u
if [ $# -ne 1 ]; then
  echo "usage: sh tests/conformance/run.sh PLAN_BINARY" >&2
  exit 2
fi
PLAN=$1
case $PLAN in /*) ;; *) PLAN=$(pwd)/$PLAN ;; esac
if [ ! -x "$PLAN" ]; then
  echo "conformance: '$1' is not an executable plan tool" >&2
  exit 2
fi
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VEC=$ROOT/spec/vectors
TMP=$(mktemp -d) || exit 2
trap 'rm -rf "$TMP"' EXIT INT TERM
REGEN="sh spec/vectors/regen.sh build/plan"
pass=0 failn=0 regen_hint=0

fail() { # vector, reason
  failn=$((failn + 1))
  echo "FAIL $1: $2"
}

# The leading comment block of a vector (its header).
header() { sed -n '/^#/!q; p' "$1"; }

# hash_of NAME PART: the PART hash computed for valid/NAME in this run.
hash_of() { sed -n "s/^$2 *//p" "$TMP/$1.hashes" 2>/dev/null; }

# ---- valid vectors ------------------------------------------------------------
cd "$VEC/valid" || exit 2
for f in *.yaml; do
  name=${f%.yaml}
  ok=1
  if ! "$PLAN" validate "$f" >"$TMP/$name.validate" 2>&1; then
    fail "valid/$f" "does not validate clean:"
    sed 's/^/    /' "$TMP/$name.validate"
    ok=0
  fi
  if ! "$PLAN" hash --part all "$f" >"$TMP/$name.hashes" 2>"$TMP/$name.err"; then
    fail "valid/$f" "plan hash exits non-zero:"
    sed 's/^/    /' "$TMP/$name.err"
    continue
  fi
  if [ ! -f "$name.hashes" ]; then
    fail "valid/$f" "no recorded $name.hashes"
    regen_hint=1
    ok=0
  elif ! cmp -s "$TMP/$name.hashes" "$name.hashes"; then
    fail "valid/$f" "hashes differ from $name.hashes (- recorded, + now):"
    diff "$name.hashes" "$TMP/$name.hashes" | sed -n 's/^[<>]/    &/p' |
      sed 's/^    </    -/; s/^    >/    +/'
    regen_hint=1
    ok=0
  fi
  part=program
  grep -q '^plan ' "$TMP/$name.hashes" && part=plan
  if ! "$PLAN" hash --part "$part" --canonical "$f" >"$TMP/$name.canonical" \
       2>"$TMP/$name.err"; then
    fail "valid/$f" "plan hash --canonical exits non-zero"
    ok=0
  elif [ ! -f "$name.canonical" ]; then
    fail "valid/$f" "no recorded $name.canonical"
    regen_hint=1
    ok=0
  elif ! cmp -s "$TMP/$name.canonical" "$name.canonical"; then
    # show both around the first differing byte
    at=$(cmp "$name.canonical" "$TMP/$name.canonical" 2>/dev/null |
      sed -n 's/.* byte \([0-9]*\).*/\1/p')
    from=$(( ${at:-1} > 60 ? ${at:-1} - 60 : 1 ))
    fail "valid/$f" "canonical $part encoding differs from $name.canonical at byte ${at:-?}:"
    printf '    recorded: ...%s...\n' "$(tail -c +"$from" "$name.canonical" | head -c 140)"
    printf '    now:      ...%s...\n' "$(tail -c +"$from" "$TMP/$name.canonical" | head -c 140)"
    regen_hint=1
    ok=0
  fi
  [ $ok -eq 1 ] && pass=$((pass + 1))
done

# same-as / differs-from, over the hashes computed above
for f in *.yaml; do
  name=${f%.yaml}
  [ -f "$TMP/$name.hashes" ] || continue
  header "$f" | grep -E '^# *(same-as|differs-from):' |
    sed -E 's/^# *(same-as|differs-from): */\1 /' >"$TMP/$name.rel"
  while read -r rel other parts; do
    other=${other%.yaml}
    if [ ! -f "$other.yaml" ]; then
      fail "valid/$f" "$rel names '$other', which is no vector"
      continue
    fi
    if [ -z "$parts" ]; then
      parts=program
      grep -q '^plan ' "$TMP/$name.hashes" && parts=plan
    fi
    ok=1
    for part in $parts; do
      a=$(hash_of "$name" "$part")
      b=$(hash_of "$other" "$part")
      if [ -z "$a" ] || [ -z "$b" ]; then
        fail "valid/$f" "$rel $other: no $part hash on one side"
        ok=0
      elif [ "$rel" = same-as ] && [ "$a" != "$b" ]; then
        fail "valid/$f" "same-as $other: $part hashes differ ($a vs $b)"
        ok=0
      elif [ "$rel" = differs-from ] && [ "$a" = "$b" ]; then
        fail "valid/$f" "differs-from $other: $part hashes are equal ($a)"
        ok=0
      fi
    done
    [ $ok -eq 1 ] && pass=$((pass + 1))
  done <"$TMP/$name.rel"
done

# ---- invalid vectors ----------------------------------------------------------
cd "$VEC/invalid" || exit 2
for f in *.yaml; do
  set -- $(sed -n '1s/^# expect: *//p' "$f")
  if [ $# -ne 3 ]; then
    fail "invalid/$f" "first line is not '# expect: CODE LINE COLUMN'"
    continue
  fi
  code=$1 line=$2 col=$3
  case $code in
    syntax | schema | version | invalid | limit | io) ;;
    *) fail "invalid/$f" "unknown CODE '$code' in the expect line"; continue ;;
  esac
  "$PLAN" validate "$f" >"$TMP/out" 2>"$TMP/err"
  rc=$?
  want="$f:$line:$col: error:"
  if [ $rc -ne 2 ]; then
    fail "invalid/$f" "exit $rc, expected 2 ($code at $line:$col)$( [ $rc -gt 128 ] && echo ': the tool crashed')"
    sed 's/^/    /' "$TMP/out" "$TMP/err" | head -5
  elif ! grep -qF "$want" "$TMP/err"; then
    fail "invalid/$f" "expected '$want' ($code), got:"
    sed 's/^/    /' "$TMP/err" | head -5
  else
    pass=$((pass + 1))
  fi
done

if [ $regen_hint -eq 1 ]; then
  echo
  echo "Recorded hashes or canonical encodings differ. If the change to the"
  echo "format is intended, regenerate them and review the diff:"
  printf '    %s\n' "$REGEN"
fi
echo "conformance: $pass passed, $failn failed"
[ $failn -eq 0 ]
