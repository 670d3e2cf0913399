#!/bin/sh
# Untrusted plan files: each attack is a plan a stranger could send, run
# under `timeout` so that a regression fails instead of hanging.
# - replay trusts nothing in the file: the script its provenance carries
#   runs only with --trust-embedded-script, and then in the sandbox; a
#   strategy file runs only when named with --strategy and only with the
#   recorded hash; the path the provenance records is never read;
# - the sandbox's limits hold (a manual region's body, and the embedded
#   script): pcall cannot swallow the instruction limit, C library loops
#   are charged (string.rep, table.move, table.insert, patterns), no
#   finalizer runs (Lua runs them unhooked), memory is capped with the ops
#   a body traces, and there is a wall clock.
# usage: tests/security/run.sh PLAN_BINARY [LIBPLAN_SEARCH_SO]
PLAN=${1:?usage: run.sh PLAN_BINARY [LIBPLAN_SEARCH_SO]}
LIB=${2:-}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
passed=0; failed=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ok() { passed=$((passed+1)); }
bad() { failed=$((failed+1)); echo "FAIL: $*"; }
# expect NAME WANT_RC CMD...: runs CMD (at most 20 s); its output in $out
expect() {
  name=$1; want=$2; shift 2
  out=$(timeout 20 "$@" 2>&1); rc=$?
  if [ "$rc" -eq "$want" ]; then ok; else bad "$name: exit $rc, wanted $want"; echo "$out"; fi
}
has() { # NAME TEXT: the last output has TEXT
  if printf '%s' "$out" | grep -qF -- "$2"; then ok; else bad "$1: output lacks '$2'"; echo "$out"; fi
}
not_made() { # NAME FILE: the attack left no FILE
  if [ -e "$2" ]; then bad "$1: $2 was made"; rm -f "$2"; else ok; fi
}

# ---- replay -----------------------------------------------------------------
cat >"$tmp/all-r.lua" <<'LUA'
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
expect "search with a strategy file" 0 "$PLAN" search "$ROOT/examples/mlp-program.yaml" --mesh dp=2 --strategy "$tmp/all-r.lua" --self-contained -o "$tmp/benign.yaml"
# evil.yaml: benign.yaml with another script in its provenance (the plan
# hash is the same: provenance is not hashed). make_plan NAME LUA [keep]:
# the script LUA as script_text, with its hash unless "nohash".
make_plan() {
  python3 - "$tmp/benign.yaml" "$tmp/$1" "$2" "${3:-}" <<'PY'
import re, sys
src, dst, lua, mode = sys.argv[1:5]
text = open(src).read()
body = "".join("    " + l + "\n" for l in lua.splitlines())
text = re.sub(r"  script_text: \|\n(?:    .*\n|\n)+", lambda m: "  script_text: |\n" + body, text)
if mode == "nohash":
    text = re.sub(r'  script: "xxh3:[0-9a-f]+"\n', "", text)
if mode == "nosource":
    text = re.sub(r"  script_text: \|\n(?:    .*\n)+", "", text)
    text = re.sub(r'  strategy: .*\n', '  strategy: "%s"\n' % lua, text)
open(dst, "w").write(text)
PY
}
pwned=$tmp/pwned
# (a temp file first, as the script seen in the wild did, then the marker)
evil="local name = os.tmpname() local f = io.open('$pwned', 'w') f:write(name) f:close()
return function(p) return {} end"
make_plan evil.yaml "$evil" nohash
expect "the evil plan validates" 0 "$PLAN" validate "$tmp/evil.yaml"
a=$("$PLAN" hash "$tmp/benign.yaml"); b=$("$PLAN" hash "$tmp/evil.yaml")
[ "$a" = "$b" ] && ok || bad "the evil plan's hash differs from the benign one's ($a, $b)"
expect "replay never runs an embedded script unasked" 2 "$PLAN" replay "$tmp/evil.yaml"
has "replay never runs an embedded script unasked" "--trust-embedded-script"
not_made "replay never runs an embedded script unasked" "$pwned"
expect "an embedded script trusted runs in the sandbox" 2 "$PLAN" replay "$tmp/evil.yaml" --trust-embedded-script
has "an embedded script trusted runs in the sandbox" "global 'os'"
not_made "an embedded script trusted runs in the sandbox" "$pwned"
# the recorded path is never read: a file there with other content
printf '%s\n' "$evil" >"$tmp/evil.lua"
make_plan ondisk.yaml "$tmp/evil.lua" nosource
expect "replay does not run the recorded strategy path" 2 "$PLAN" replay "$tmp/ondisk.yaml"
has "replay does not run the recorded strategy path" "--strategy FILE"
not_made "replay does not run the recorded strategy path" "$pwned"
expect "--strategy FILE: not the recorded hash" 2 "$PLAN" replay "$tmp/ondisk.yaml" --strategy "$tmp/evil.lua"
has "--strategy FILE: not the recorded hash" "is not the script the plan was made with"
not_made "--strategy FILE: not the recorded hash" "$pwned"
expect "--strategy FILE with the recorded hash" 0 "$PLAN" replay "$tmp/ondisk.yaml" --strategy "$tmp/all-r.lua"
has "--strategy FILE with the recorded hash" "replayed: xxh3:"
expect "the benign embedded script, trusted" 0 "$PLAN" replay "$tmp/benign.yaml" --trust-embedded-script
# an embedded script whose hash is not the recorded one is refused
make_plan rehashed.yaml "$evil"
expect "an embedded script without its recorded hash" 2 "$PLAN" replay "$tmp/rehashed.yaml" --trust-embedded-script
has "an embedded script without its recorded hash" "does not have its recorded hash"
# the sandboxed script reaches no more than the plan methods it is given
make_plan escape.yaml "local util = ...
return function(p)
  assert(getmetatable(p) == false, 'the metatable shows')
  assert(p.save == nil and p.lower == nil and p.verify == nil, 'p has save')
  assert(not load and not require and not io and not os, 'loaders')
  assert(getmetatable('') == false, 'the string metatable shows')
  assert(not string.dump, 'string.dump')
  error('reached the end')
end" nohash
expect "what the sandboxed script sees" 1 "$PLAN" replay "$tmp/escape.yaml" --trust-embedded-script
has "what the sandboxed script sees" "reached the end"
make_plan loop.yaml "return function(p)
  while true do pcall(function() while true do end end) end
end" nohash
expect "the embedded script: pcall cannot swallow the limit" 1 "$PLAN" replay "$tmp/loop.yaml" --trust-embedded-script
has "the embedded script: pcall cannot swallow the limit" "the script ran past 100 million instructions"
make_plan gc.yaml "return function(p)
  setmetatable({}, {__gc = function() while true do end end})
end" nohash
expect "the embedded script: no finalizers" 1 "$PLAN" replay "$tmp/gc.yaml" --trust-embedded-script
has "the embedded script: no finalizers" "no __gc metamethods"
make_plan rep.yaml "return function(p) local s = ('x'):rep(2^40) end" nohash
expect "the embedded script: string.rep over the memory cap" 1 "$PLAN" replay "$tmp/rep.yaml" --trust-embedded-script
has "the embedded script: string.rep over the memory cap" "memory limit"
# Python: the same options, the same refusals
if [ -n "$LIB" ] && [ -f "$LIB" ]; then
  expect "python: replay refuses, then sandboxes" 0 env PYTHONPATH="$ROOT/bindings/python" \
    LIBPLAN_LIBRARY="$LIB" LIBPLAN_TOOL="$PLAN" python3 -c "
import libplan, sys
path = sys.argv[1]
try:
    libplan.replay(path)
    sys.exit('replayed the embedded script unasked')
except libplan.UsageError as e:
    assert 'trust' in str(e), e
try:
    libplan.replay(path, trust_embedded_script=True)
    sys.exit('the embedded script ran with io')
except libplan.UsageError as e:
    assert \"global 'os'\" in str(e), e
same, msg = libplan.replay(sys.argv[2], strategy=sys.argv[3])
assert same, msg
print('ok')
" "$tmp/evil.yaml" "$tmp/ondisk.yaml" "$tmp/all-r.lua"
  not_made "python: replay refuses, then sandboxes" "$pwned"
fi

# ---- manual regions ---------------------------------------------------------
# region NAME LUA: the Megatron example with LUA first in its body
region() {
  lua=$(printf '%s' "$2" | sed 's/[&/\]/\\&/g')
  sed "s/local a = gelu(h) /$lua local a = gelu(h) /" "$ROOT/examples/mlp-manual.plan.yaml" >"$tmp/$1"
}
region pcall.yaml "while true do pcall(function() while true do end end) end"
expect "region: pcall cannot swallow the limit" 2 "$PLAN" verify "$tmp/pcall.yaml"
has "region: pcall cannot swallow the limit" "the body ran past 100 million instructions"
region xpcall.yaml "while true do xpcall(function() while true do end end, function(e) return e end) end"
expect "region: nor xpcall" 2 "$PLAN" verify "$tmp/xpcall.yaml"
has "region: nor xpcall" "ran past 100 million instructions"
region rep.yaml 'local s = string.rep("", 2^62) assert(s == "")'
expect "region: string.rep of nothing many times" 0 "$PLAN" verify "$tmp/rep.yaml"
region rep2.yaml 'local s = ("ab"):rep(2^40, ",")'
expect "region: string.rep over the memory cap" 2 "$PLAN" verify "$tmp/rep2.yaml"
has "region: string.rep over the memory cap" "memory limit"
region move.yaml "table.move({}, 1, 2^40, 1, {})"
expect "region: table.move of 2^40 elements" 2 "$PLAN" verify "$tmp/move.yaml"
has "region: table.move of 2^40 elements" "ran past 100 million instructions"
region insert.yaml "table.insert(setmetatable({}, {__len = function() return 2^62 end}), 1, 0)"
expect "region: table.insert under a huge __len" 2 "$PLAN" verify "$tmp/insert.yaml"
has "region: table.insert under a huge __len" "ran past 100 million instructions"
region gc.yaml "setmetatable({}, {__gc = function() while true do end end}) for i = 1, 1e6 do local t = {} end"
expect "region: a finalizer (run with the hooks off) is refused" 2 "$PLAN" verify "$tmp/gc.yaml"
has "region: a finalizer (run with the hooks off) is refused" "no __gc metamethods"
region pattern.yaml 'local s = ("a"):rep(5000) s:find(("a-"):rep(30) .. "b")'
expect "region: a pattern that backtracks without end" 2 "$PLAN" verify "$tmp/pattern.yaml"
has "region: a pattern that backtracks without end" "pattern limit"
region gsub.yaml 'local s = ("a"):rep(3000) for i = 1, 10 do s:gsub(".-.-.-b", "") end'
expect "region: gsub that backtracks" 2 "$PLAN" verify "$tmp/gsub.yaml"
has "region: gsub that backtracks" "pattern limit"
region pattern-ok.yaml 'assert(("mlp.fc1"):match("^(.-)%.(.*)$") == "mlp")'
expect "region: an ordinary pattern still works" 0 "$PLAN" verify "$tmp/pattern-ok.yaml"
region ops.yaml "local x = h for i = 1, 1e8 do x = gelu(x) end"
expect "region: ops without end stop at the memory cap" 2 sh -c "ulimit -v 2000000; exec \"\$0\" verify \"\$1\"" "$PLAN" "$tmp/ops.yaml"
has "region: ops without end stop at the memory cap" "the body ran past its memory limit of 256 MiB"
region table.yaml "local t = {} for i = 1, 1e9 do t[i] = {} end"
expect "region: a table without end stops at the memory cap" 2 sh -c "ulimit -v 2000000; exec \"\$0\" verify \"\$1\"" "$PLAN" "$tmp/table.yaml"
has "region: a table without end stops at the memory cap" "memory limit of 256 MiB"
# the wall clock: comparisons of two long strings are slow instructions
region clock.yaml 'local a, b = ("x"):rep(2^25), ("x"):rep(2^25) while true do local _ = a == b end'
LIBPLAN_SANDBOX_SECONDS=1 expect "region: the wall-clock limit" 2 "$PLAN" verify "$tmp/clock.yaml"
has "region: the wall-clock limit" "the body ran past its time limit of 1 s"

echo "security: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
