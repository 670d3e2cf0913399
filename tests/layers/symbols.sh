#!/bin/sh
# The libraries export exactly the public API, and nothing internal leaks
# into a program that links the archives.
# - libplan.so exports every PLAN_API function of the core's headers (all
#   but verify.h and search.h), and nothing else;
# - libplan-verify.so exports those of every header but search.h;
# - libplan-search.so exports those of every header (not luaopen_plan);
# - every global symbol the archives define starts with plan_ (an
#   embedder's own names cannot collide with ours).
# Usage: symbols.sh BUILD_DIR
set -u
build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0; n=0
ok() { n=$((n+1)); }
bad() { n=$((n+1)); fail=$((fail+1)); echo "FAIL: $1"; }

# PLAN_API declarations: the name before the first '(' of each.
# A declaration may wrap after its return type (clang-format does that for
# long ones): a PLAN_API line without '(' is joined with the next.
api() { # HEADER...
  for h in "$@"; do
    awk '/^PLAN_API/ && !/\(/ { held = $0; next }
         held != "" { $0 = held " " $0; held = "" }
         { print }' "$h" |
      sed -n 's/^PLAN_API [^(]*[ *]\(plan_[a-z0-9_]*\)(.*/\1/p'
  done | sort -u
}
inc=$root/libplan/include/libplan
api $(ls "$inc"/*.h | grep -v -e '/verify\.h$' -e '/search\.h$') >"$tmp/core.api"
api $(ls "$inc"/*.h | grep -v '/search\.h$') >"$tmp/verify.api"
api "$inc"/*.h >"$tmp/all.api"
[ -s "$tmp/core.api" ] || bad "no PLAN_API declaration found in $inc"

exports() { nm -D --defined-only "$1" | awk '$2 ~ /^[TDBRVW]$/ {print $3}' | sort -u; }
check_exports() { # LIB API_LIST
  if [ ! -f "$1" ]; then bad "$1 is not built"; return; fi
  exports "$1" >"$tmp/got"
  extra=$(comm -23 "$tmp/got" "$2")
  missing=$(comm -13 "$tmp/got" "$2")
  if [ -n "$extra" ]; then bad "$(basename "$1") exports what no header declares: $(echo $extra)"; else ok; fi
  if [ -n "$missing" ]; then bad "$(basename "$1") lacks declared functions: $(echo $missing)"; else ok; fi
  echo "symbols: $(basename "$1") exports $(wc -l <"$tmp/got") functions"
}
check_exports "$build/libplan.so.0" "$tmp/core.api"
check_exports "$build/libplan-verify.so.0" "$tmp/verify.api"
check_exports "$build/libplan-search.so.0" "$tmp/all.api"

for a in "$build/libplan.a" "$build/libplan-verify.a"; do
  if [ ! -f "$a" ]; then bad "$a is not built"; continue; fi
  leaks=$(nm -g --defined-only "$a" 2>/dev/null | awk 'NF == 3 && $3 !~ /^plan_/ {print $3}' | sort -u)
  if [ -n "$leaks" ]; then bad "$(basename "$a") defines globals without the plan_ prefix: $(echo $leaks)"; else ok; fi
done

echo "symbols: $((n-fail)) passed, $fail failed"
[ "$fail" -eq 0 ]
