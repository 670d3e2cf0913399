-- Placements with shard ratios in Lua (format 1.1): p:placement and
-- p:strategy give the weights (S(0|3:1)R, never a set number), a text a
-- plan takes back unchanged; new weights are added to the plan's sets
-- (p:set_placement, p:apply), checked as a file's are; a plan read as
-- format 1.0 that takes them is written as 1.1 (the lowest version that
-- holds its content).
local plan = require "plan"

local function check(cond, what) if not cond then error(what, 2) end end
local function raises(f, words)
  local ok, err = pcall(f)
  check(not ok, "expected an error containing '" .. words .. "'")
  check(tostring(err):find(words, 1, true),
        "error '" .. tostring(err) .. "' lacks '" .. words .. "'")
end

local p = assert(plan.load("examples/mlp-ratios.plan.yaml"))
check(p:placement("x") == "S(0|3:1)R", "x: " .. tostring(p:placement("x")))
check(p:placement("y") == "S(1|3:1)S(0|1:3)", "y: " .. tostring(p:placement("y")))
local s = p:strategy("mlp.fc2")
check(s["in"][1] == "S(0|3:1)S(1)" and s.out[1] == "S(0|3:1)P(sum)",
      "fc2: " .. s["in"][1] .. " -> " .. s.out[1])
for _, st in ipairs(p:strategies("mlp.act")) do
  for _, pl in ipairs(st.out) do check(not pl:find("#", 1, true), "no set number: " .. pl) end
end

-- pasted back: the same plan
local h0 = p:hash()
assert(p:set_placement("x", p:placement("x")))
assert(p:apply("mlp.fc2", p:strategy("mlp.fc2")))
check(p:hash() == h0, "pasting the weights back keeps the plan")

-- new weights: 1:3 through the whole chain, a valid plan that verifies
assert(p:set_placement("x", "S(0|1:3)R"))
check(p:placement("x") == "S(0|1:3)R", "x now " .. p:placement("x"))
assert(p:apply("mlp.fc1", {["in"] = {"S(0|1:3)R", "RS(1)"}, out = {"S(0|1:3)S(1)"}}))
assert(p:apply("mlp.act", {["in"] = {"S(0|1:3)S(1)"}, out = {"S(0|1:3)S(1)"}}))
assert(p:apply("mlp.fc2", {["in"] = {"S(0|1:3)S(1)", "RS(0)"}, out = {"S(0|1:3)P(sum)"}}))
check(p:hash() ~= h0, "other weights, another plan")
check(p:validate(), "valid with the weights swapped")
check(p:verify{mode = "exact"} == true, "verifies EQUAL (exact)")
check(p:verify{mode = "float"} == true, "verifies EQUAL (float)")
-- weights as a file's: reduced by their gcd, one per index, positive
assert(p:set_placement("x", "S(0|2:6)R"))
check(p:placement("x") == "S(0|1:3)R", "reduced: " .. p:placement("x"))
raises(function() p:set_placement("x", "S(0|3:1:1)R") end, "3 shard weights for mesh axis dp")
raises(function() p:set_placement("x", "S(0|0:1)R") end, "placement 'S(0|0:1)R'")

-- a long weight list (128 ranks, 7-digit weights): given back whole
local w = {}
for i = 1, 128 do w[i] = tostring(1000000 + i) end
local long = "S(0|" .. table.concat(w, ":") .. ")"
local q = assert(plan.parse(table.concat({
  'libplan: "1.1"', "program:", "  tensors:", "    x: {shape: [1024, 4]}",
  "  ops:", "    - {name: act, op: relu, in: [x], out: y}", "mesh:",
  "  axes: [dp=128]", "placements:", "  x: " .. long,
  "strategies:", "  act: {in: [" .. long .. "], out: " .. long .. "}", ""}, "\n"), "long.yaml"))
check(#long > 1024, "the list is long")
check(q:placement("x") == long, "the long list given back")
check(q:strategy("act").out[1] == long, "the long list in a strategy")

-- a 1.0 plan that takes ratios becomes a 1.1 document, and back
local old = assert(plan.load("examples/mlp-megatron.plan.yaml"))
check(old:text():find('libplan: "1.0"', 1, true), "read as 1.0")
local h10 = old:hash()
assert(old:set_placement("x", "S(0|3:1)R"))
check(old:placement("x") == "S(0|3:1)R", "x takes the weights")
check(old:text():find('libplan: "1.1"', 1, true), "written as 1.1 with ratios")
assert(old:set_placement("x", "S(0)R"))
check(old:text():find('libplan: "1.0"', 1, true), "1.0 again without them")
check(old:hash() == h10, "the same plan, the same hash")
print("placement weights: ok")
