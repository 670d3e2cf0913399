#!/bin/sh
# The Lua tests: every tests/lua/test_*.lua runs in the plan tool's host
# (`plan run`), and, unless this is a sanitizer build (SAN=1: the ASan
# runtime must come first in the process), again in a stock lua5.4 that
# loads plan.so with `require "plan"`. A test script raises on failure.
# The tests' own C module (alloc_limit.c, which refuses memory for
# test_unwind.lua) is built here first and found through LUA_CPATH.
# usage: tests/lua/run.sh PLAN_BINARY PLAN_SO
PLAN=${1:?usage: run.sh PLAN_BINARY PLAN_SO}
SO=${2:?usage: run.sh PLAN_BINARY PLAN_SO}
DIR=$(cd "$(dirname "$0")" && pwd)
passed=0; failed=0
tmp=$(mktemp -d)
# alloc_limit, the tests' C module that refuses memory (test_unwind.lua)
LUA_INC=$(pkg-config --cflags lua5.4 2>/dev/null || echo -I/usr/include/lua5.4)
if ${CC:-cc} -std=c11 -Wall -Wextra -Werror -O1 -g -shared -fPIC $LUA_INC \
    -o "$tmp/alloc_limit.so" "$DIR/alloc_limit.c"; then
  passed=$((passed+1))
else
  failed=$((failed+1)); echo "FAIL: tests/lua/alloc_limit.c does not build"
fi
export LUA_CPATH="$tmp/?.so;;"
# the searched plans are written to temporary folders and name the
# repository's programs by path: a root that holds those
PLAN_PROGRAM_ROOT=$(cd "$DIR/../.." && pwd)
export PLAN_PROGRAM_ROOT
for t in "$DIR"/test_*.lua; do
  if PLAN_TOOL=$PLAN "$PLAN" run "$t" >/tmp/lua-test.$$ 2>&1; then
    passed=$((passed+1))
  else
    failed=$((failed+1)); echo "FAIL (plan run): $(basename "$t")"; cat /tmp/lua-test.$$
  fi
  if [ "${SAN:-0}" != 1 ] && command -v lua5.4 >/dev/null 2>&1; then
    if PLAN_TOOL=$PLAN LUA_CPATH="$(dirname "$SO")/?.so;$tmp/?.so;;" lua5.4 "$t" >/tmp/lua-test.$$ 2>&1; then
      passed=$((passed+1))
    else
      failed=$((failed+1)); echo "FAIL (lua5.4 + plan.so): $(basename "$t")"; cat /tmp/lua-test.$$
    fi
  fi
done
rm -f /tmp/lua-test.$$

# plan search / plan replay from the command line
check() { # NAME WANT_RC CMD...
  name=$1; want=$2; shift 2
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" -eq "$want" ]; then passed=$((passed+1)); else
    failed=$((failed+1)); echo "FAIL: $name: exit $rc, wanted $want"; echo "$out"; fi
}
has() { # NAME WORDS (in the last output)
  if printf '%s' "$out" | grep -qF -- "$2"; then passed=$((passed+1)); else
    failed=$((failed+1)); echo "FAIL: $1: output lacks '$2'"; echo "$out"; fi
}
for s in megatron greedy beam dp ilp exhaustive hetero; do
  check "search $s" 0 "$PLAN" search examples/mlp-program.yaml --mesh dp=2,tp=2 --strategy $s -o "$tmp/$s.yaml"
  has "search $s" "strategy $s on dp=2,tp=2: modeled step"
  check "verify $s" 0 "$PLAN" verify "$tmp/$s.yaml"
  check "replay $s" 0 "$PLAN" replay "$tmp/$s.yaml"
  has "replay $s" "replayed: xxh3:"
done
# a plan saved elsewhere still finds its program
mkdir -p "$tmp/sub/deeper"
check "search into a subfolder" 0 "$PLAN" search examples/mlp-program.yaml --mesh tp=2 --strategy greedy -o "$tmp/sub/deeper/p.yaml"
check "validate it" 0 "$PLAN" validate "$tmp/sub/deeper/p.yaml"
# a user strategy file, and a self-contained plan that replays without it
cat > "$tmp/all-r.lua" <<'LUA'
local util = ...
return function(p, opts)
  local placed = {}
  for _, name in ipairs(p:ops()) do
    local op = p:op(name)
    if not p:pinned(name) then p:apply(name, p:strategies(name)[1]) end
    util.record(p, op, p:strategy(name), placed)
  end
  return placed
end
LUA
check "search with a file" 0 "$PLAN" search examples/mlp-program.yaml --mesh dp=2 --strategy "$tmp/all-r.lua" --self-contained -o "$tmp/user.yaml"
has "search with a file" "strategy $tmp/all-r.lua"
mv "$tmp/all-r.lua" "$tmp/all-r.moved"
# the script inline runs only when trusted, in the sandbox
check "replay with the script inline, not trusted" 2 "$PLAN" replay "$tmp/user.yaml"
has "replay with the script inline, not trusted" "--trust-embedded-script"
check "replay with the script inline" 0 "$PLAN" replay "$tmp/user.yaml" --trust-embedded-script
check "replay with the script named" 0 "$PLAN" replay "$tmp/user.yaml" --strategy "$tmp/all-r.moved"
# without the self-contained form, the strategy file must be named
mv "$tmp/all-r.moved" "$tmp/all-r.lua"
check "search with a file, not self-contained" 0 "$PLAN" search examples/mlp-program.yaml --mesh dp=2 --strategy "$tmp/all-r.lua" -o "$tmp/user2.yaml"
check "replay without its strategy file named" 2 "$PLAN" replay "$tmp/user2.yaml"
has "replay without its strategy file named" "--strategy FILE"
check "replay with its strategy file named" 0 "$PLAN" replay "$tmp/user2.yaml" --strategy "$tmp/all-r.lua"
mv "$tmp/all-r.lua" "$tmp/all-r.moved"
check "replay with a strategy file that is gone" 2 "$PLAN" replay "$tmp/user2.yaml" --strategy "$tmp/all-r.lua"
has "replay with a strategy file that is gone" "cannot read strategy"
# the strategy path is recorded relative to the plan's folder and resolved
# against it, as a program path is: the plan replays from another working
# folder with the recorded path named (never read unasked)
mv "$tmp/all-r.moved" "$tmp/all-r.lua"
mkdir -p "$tmp/plans" "$tmp/elsewhere"
cp examples/mlp-program.yaml "$tmp/plans/"
check "search a file strategy into another folder" 0 "$PLAN" search "$tmp/plans/mlp-program.yaml" --mesh dp=2 --strategy "$tmp/all-r.lua" -o "$tmp/plans/p.yaml"
out=$(cat "$tmp/plans/p.yaml"); has "the recorded strategy path is the plan folder's" "strategy: ../all-r.lua"
root=$(pwd)
case $PLAN in /*) ;; *) PLAN=$root/$PLAN ;; esac
cd "$tmp/elsewhere" || exit 2
check "replay from another folder: the path named, never read unasked" 2 "$PLAN" replay ../plans/p.yaml
has "replay from another folder: the path named, never read unasked" "--strategy ../plans/../all-r.lua"
check "replay from another folder with the recorded path" 0 "$PLAN" replay ../plans/p.yaml --strategy ../all-r.lua
has "replay from another folder with the recorded path" "replayed: xxh3:"
check "replay from another folder with the path from here" 0 "$PLAN" replay "$tmp/plans/p.yaml" --strategy "$tmp/all-r.lua"
printf '%s\n' '-- another script' >>"$tmp/all-r.lua"
check "replay from another folder: the hash is still checked" 2 "$PLAN" replay ../plans/p.yaml --strategy ../all-r.lua
has "replay from another folder: the hash is still checked" "is not the script the plan was made with"
cd "$root" || exit 2
# a replay that does not match: a strategy edited by hand
sed 's/mlp.act: {in: \[S(0)S(1)\], out: S(0)S(1)}/mlp.act: {in: [RR], out: RR}/' "$tmp/megatron.yaml" > "$tmp/edited.yaml"
if ! cmp -s "$tmp/megatron.yaml" "$tmp/edited.yaml"; then
  check "replay of an edited plan" 1 "$PLAN" replay "$tmp/edited.yaml"
  has "replay of an edited plan" "replay differs"
fi
check "search: unknown strategy" 2 "$PLAN" search examples/mlp-program.yaml --mesh dp=2 --strategy nope -o "$tmp/x.yaml"
has "search: unknown strategy" "no strategy 'nope'"
printf 'return function(p, opts\n' > "$tmp/broken.lua"
check "search: a strategy that does not compile" 2 "$PLAN" search examples/mlp-program.yaml --mesh dp=2 --strategy "$tmp/broken.lua" -o "$tmp/x.yaml"
has "search: a strategy that does not compile" "broken.lua:"
printf 'return function(p, opts) error("gave up") end\n' > "$tmp/fails.lua"
check "search: a strategy that raises" 1 "$PLAN" search examples/mlp-program.yaml --mesh dp=2 --strategy "$tmp/fails.lua" -o "$tmp/x.yaml"
has "search: a strategy that raises" "gave up"
check "search: no mesh" 2 "$PLAN" search examples/mlp-program.yaml -o "$tmp/x.yaml"
check "search: no output" 2 "$PLAN" search examples/mlp-program.yaml --mesh dp=2
# past a strategy's limits: cannot run here (exit 3), said without a trace
check "search: exhaustive over its limit" 3 "$PLAN" search examples/mlp-program.yaml --mesh dp=2,tp=2 --strategy exhaustive --limit 10 -o "$tmp/x.yaml"
has "search: exhaustive over its limit" "more than 10 combinations"
if printf '%s' "$out" | grep -q "stack traceback"; then
  failed=$((failed+1)); echo "FAIL: a refused search printed a traceback"; echo "$out"
else passed=$((passed+1)); fi
[ -e "$tmp/x.yaml" ] && { failed=$((failed+1)); echo "FAIL: a failed search wrote its output"; }
# the hand-written Megatron example is what the megatron strategy makes
check "replay the Megatron example" 0 "$PLAN" replay examples/mlp-megatron.plan.yaml
has "replay the Megatron example" "replayed: xxh3:"
# placement as a search decision: tp=4 inside a host of 4 devices
cat > "$tmp/hosts.yaml" <<YAML
libplan: "0.1"
program: {path: "$(pwd)/examples/mlp-program.yaml"}
mesh:
  axes: [tp=4, dp=2]
  devices_per_host: 4
YAML
check "search, device order kept" 0 "$PLAN" search "$tmp/hosts.yaml" --strategy megatron --hardware h100 -o "$tmp/h1.yaml"
kept=$(printf '%s' "$out" | sed -n 's/.*modeled step \([0-9.]*\) ms.*/\1/p')
check "search --devices search" 0 "$PLAN" search "$tmp/hosts.yaml" --strategy megatron --hardware h100 --devices search -o "$tmp/h2.yaml"
moved=$(printf '%s' "$out" | sed -n 's/.*modeled step \([0-9.]*\) ms.*/\1/p')
if awk "BEGIN { exit !($moved < $kept) }"; then passed=$((passed+1)); else
  failed=$((failed+1)); echo "FAIL: the device order search did not lower the step ($kept -> $moved ms)"; fi
out=$(cat "$tmp/h2.yaml"); has "the searched device order" "devices: [0, 4, 1, 5, 2, 6, 3, 7]"
check "replay with a device order" 0 "$PLAN" replay "$tmp/h2.yaml"
check "verify with a device order" 0 "$PLAN" verify "$tmp/h2.yaml"
# the device order search over 7 axes (6 of them larger than 1: 720
# orders) obeys --seconds: it stops early, keeps the best so far, says so
cat > "$tmp/axes7.yaml" <<YAML
libplan: "0.1"
program: {path: "$(pwd)/examples/mlp-program.yaml"}
mesh:
  axes: [a=2, b=2, c=2, d=2, e=2, f=1, g=2]
  devices_per_host: 4
YAML
check "search --devices search --seconds" 0 timeout 60 "$PLAN" search "$tmp/axes7.yaml" --strategy greedy --hardware h100 --devices search --seconds 0.01 -o "$tmp/h7.yaml"
has "search --devices search --seconds" "axis orders tried in 0.01 s (--seconds)"
has "search --devices search --seconds" "of 720 axis orders"
check "validate the plan of a cut device search" 0 "$PLAN" validate "$tmp/h7.yaml"
check "replay: no search recorded" 2 "$PLAN" replay examples/moe-experts.plan.yaml
check "run: a script's error" 1 "$PLAN" run "$DIR/data/raises.lua"
has "run: a script's error" "stack traceback"
# a script's arguments, more than the C stack's first slots hold
check "run: many arguments" 0 "$PLAN" run "$DIR/data/args.lua" $(seq 1 300)
has "run: many arguments" "300 arguments, the last 300"
rm -rf "$tmp"
echo "lua: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
