#!/bin/sh
# The Lua tests: every tests/lua/test_*.lua runs in the plan tool's host
# (`plan run`), and, unless this is a sanitizer build (SAN=1: the ASan
# runtime must come first in the process), again in a stock lua5.4 that
# loads plan.so with `require "plan"`. A test script raises on failure.
# usage: tests/lua/run.sh PLAN_BINARY PLAN_SO
PLAN=${1:?usage: run.sh PLAN_BINARY PLAN_SO}
SO=${2:?usage: run.sh PLAN_BINARY PLAN_SO}
DIR=$(cd "$(dirname "$0")" && pwd)
passed=0; failed=0
for t in "$DIR"/test_*.lua; do
  if "$PLAN" run "$t" >/tmp/lua-test.$$ 2>&1; then
    passed=$((passed+1))
  else
    failed=$((failed+1)); echo "FAIL (plan run): $(basename "$t")"; cat /tmp/lua-test.$$
  fi
  if [ "${SAN:-0}" != 1 ] && command -v lua5.4 >/dev/null 2>&1; then
    if LUA_CPATH="$(dirname "$SO")/?.so;;" lua5.4 "$t" >/tmp/lua-test.$$ 2>&1; then
      passed=$((passed+1))
    else
      failed=$((failed+1)); echo "FAIL (lua5.4 + plan.so): $(basename "$t")"; cat /tmp/lua-test.$$
    fi
  fi
done
rm -f /tmp/lua-test.$$
echo "lua: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
