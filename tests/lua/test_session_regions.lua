-- Regions made in a Lua session (p:pin, p:manual) are the regions a plan
-- file writes: the same plan hash as the YAML-written equivalent, through
-- save and load; a search keeps the pinned ops; the manual body verifies
-- equal. Mistakes raise at the script's line, in the script's terms.
local plan = require "plan"

local function check(cond, what) if not cond then error(what, 2) end end
local tmp = os.tmpname()
os.remove(tmp)
local function cleanup() os.remove(tmp .. ".plan.yaml") end

-- pinned: the region as a plan file writes it
local yaml = assert(plan.parse([[
libplan: "1.0"
program: {path: mlp-program.yaml}
mesh:
  axes: [dp=2, tp=2]
strategies:
  mlp.act: {in: [RR], out: RR}
regions:
  - {name: act-replicated, kind: pinned, ops: [mlp.act]}
]], "pinned.plan.yaml", "examples"))
local p = assert(plan.new{program = "examples/mlp-program.yaml", mesh = "dp=2,tp=2"})
check(not p:pinned("mlp.act"), "not pinned before")
assert(p:pin{name = "act-replicated", ops = {"mlp.act"},
             strategies = {["mlp.act"] = {["in"] = {"RR"}, out = {"RR"}}}})
check(p:pinned("mlp.act") and not p:pinned("mlp.fc1"), "pinned after p:pin")
check(p:hash() == yaml:hash(), "p:pin: the hash of the YAML-written region: " ..
      p:hash() .. " vs " .. yaml:hash())
assert(p:save(tmp .. ".plan.yaml"))
local back = assert(plan.load(tmp .. ".plan.yaml"))
check(back:hash() == yaml:hash(), "p:pin: saved and loaded, the same hash")
check(back:pinned("mlp.act"), "p:pin: saved and loaded, still pinned")

-- a strategy leaves the pinned op as pinned
local util = assert(load(plan.source("strategies/util"), "=util"))()
local greedy = assert(load(plan.source("strategies/greedy"), "=greedy"))(util)
local placed = greedy(p, {outputs = p:outputs(), hardware = "h100"})
util.deliver_outputs(p, placed, p:outputs())
local s = p:strategy("mlp.act")
check(s["in"][1] == "RR" and s.out[1] == "RR", "greedy moved the pinned op")
local ok, findings = p:validate()
check(ok, "the searched plan validates: " .. tostring(findings[1]))
local eq, report = p:verify()
check(eq == true, "the searched plan verifies equal: " .. tostring(report))

-- a pattern pins every op it matches (their strategies set by p:apply)
local g = assert(plan.new{program = "examples/mlp-program.yaml", mesh = "dp=2,tp=2"})
for _, op in ipairs(g:ops()) do g:apply(op, g:strategies(op)[1]) end
assert(g:pin{ops = "mlp.fc*"})
check(g:pinned("mlp.fc1") and g:pinned("mlp.fc2") and not g:pinned("mlp.act"),
      "a pattern pins what it matches")
check(g:text():find("name: pinned%-1"), "a pin without a name is named pinned-1")

-- manual: the equivalent of examples/mlp-manual.plan.yaml
local m_yaml = assert(plan.load("examples/mlp-manual.plan.yaml"))
-- the same plan without its region, as the session's start
local m_src = assert(io.open("examples/mlp-manual.plan.yaml")):read("a")
local bare_src = m_src:gsub("\nregions:\n.-\nprovenance:", "\nprovenance:")
check(bare_src ~= m_src, "the manual example's region taken out")
local function bare() return assert(plan.parse(bare_src, "examples/bare.plan.yaml", "examples")) end
local m = bare()
check(m:hash() ~= m_yaml:hash(), "without its region, another hash")
assert(m:manual{name = "row-parallel-by-hand", ops = {"mlp.act", "mlp.fc2"},
                inputs = {h = "S(0)S(1)", w2 = "RS(0)"},
                outputs = {y = "S(0)R"},
                body = [[
return function(h, w2)
  local a = gelu(h)           -- on each rank's block of h
  local y = matmul(a, w2)     -- partial sums over tp
  return all_reduce(y, "tp")  -- summed by hand
end
]]})
check(m:hash() == m_yaml:hash(), "p:manual: the hash of the YAML-written region: " ..
      m:hash() .. " vs " .. m_yaml:hash())
assert(m:save(tmp .. ".plan.yaml"))
local mback = assert(plan.load(tmp .. ".plan.yaml"))
check(mback:hash() == m_yaml:hash(), "p:manual: saved and loaded, the same hash")
eq, report = mback:verify()
check(eq == true, "the manual region verifies equal: " .. tostring(report))
eq = m:verify()
check(eq == true, "the session's manual region verifies equal")
-- a body that computes something else is NOT EQUAL, as from YAML
local wrong = bare()
assert(wrong:manual{name = "r", ops = {"mlp.act", "mlp.fc2"},
                    inputs = {h = "S(0)S(1)", w2 = "RS(0)"}, outputs = {y = "S(0)R"},
                    body = [[return function(h, w2)
  return all_reduce(matmul(relu(h), w2), "tp")
end]]})
eq = wrong:verify()
check(eq == false, "a body that computes relu is not equal")

-- mistakes: raised at this file's line, never at generated YAML
local function raises(f, want, what)
  local okf, err = pcall(f)
  check(not okf, what .. ": no error")
  err = tostring(err)
  check(err:find(want, 1, true), what .. ": " .. err)
  check(err:find("test_session_regions.lua:%d+:"), what .. ": not at the script's line: " .. err)
  check(not err:find("<plan"), what .. ": names generated text: " .. err)
end
local q = assert(plan.new{program = "examples/mlp-program.yaml", mesh = "dp=2,tp=2"})
raises(function() q:pin{ops = {"mlp.actt"}} end,
       "pin: no op 'mlp.actt'; did you mean 'mlp.act'?", "an unknown op")
raises(function() q:pin{ops = {"mlp.act"}} end,
       "op 'mlp.act' has no strategy to keep", "an op without a strategy")
raises(function() q:pin{ops = "nothing.*"} end,
       "the pattern 'nothing.*' matches no op", "a pattern that matches nothing")
raises(function() m:pin{ops = {"mlp.act"}} end,
       "op 'mlp.act' is in regions 'row-parallel-by-hand' and 'pinned-1'",
       "an op already in a region")
check(m:hash() == m_yaml:hash(), "a refused region leaves the plan as it was")
local before = m:strategy("mlp.act")
raises(function()
  m:pin{ops = {"mlp.act"}, strategies = {["mlp.act"] = {["in"] = {"RR"}, out = {"RR"}}}}
end, "op 'mlp.act' is in regions", "a refused pin with strategies")
check(m:strategy("mlp.act")["in"][1] == before["in"][1] and m:hash() == m_yaml:hash(),
      "a refused pin takes its strategies back")
raises(function() q:manual{name = "x", ops = {"mlp.act"}, body = "return function(h) retrun h end"} end,
       "manual region 'x', body line:1:", "a body that does not compile")
raises(function() q:manual{name = "x", ops = {"mlp.act"}, inputs = {hh = "RR"}, body = "return 1"} end,
       "inputs: no tensor 'hh'; did you mean 'h'?", "an unknown boundary tensor")
raises(function() q:manual{name = "x", ops = {"mlp.act"}, inputs = {h = "S(5)R"}, body = "return 1"} end,
       "inputs['h']", "a boundary placement that does not fit")
cleanup()
print("test_session_regions: ok")
