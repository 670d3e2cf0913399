-- The built-in strategies through the search driver's pieces: each makes
-- a valid plan that verifies equal; megatron reproduces the Megatron MLP;
-- dp and ilp equal exhaustive on graphs small enough for it and are never
-- worse than megatron; pinned ops are kept by every strategy; searches repeat.
local plan = require "plan"

local function check(cond, what) if not cond then error(what, 2) end end

local util = assert(load(plan.source("strategies/util"), "=util"))()
local function strategy(name)
  return assert(load(plan.source("strategies/" .. name), "=" .. name))(util)
end

local function search(input, mesh, name, extra)
  local p = mesh and assert(plan.new{program = input, mesh = mesh})
                  or assert(plan.load(input))
  for _, op in ipairs(p:ops()) do
    if not p:pinned(op) then p:clear_strategy(op) end
  end
  local opts = {outputs = p:outputs(), hardware = "h100"}
  for k, v in pairs(extra or {}) do opts[k] = v end
  local placed = strategy(name)(p, opts)
  util.deliver_outputs(p, placed, p:outputs())
  local ok, findings = p:validate()
  check(ok, name .. ": invalid plan: " .. tostring(findings[1]))
  return p
end

local function objective(p)
  local choice = {}
  for i, op in ipairs(p:ops()) do choice[i] = p:strategy(op) end
  return util.objective(p, p:ops(), choice, p:outputs(), "h100")
end

local names = {"megatron", "greedy", "beam", "dp", "ilp", "exhaustive"}
local programs = {
  {"examples/mlp-program.yaml", "dp=2,tp=2"},
  {"examples/mlp-program.yaml", "tp=4"},
  {"tests/lua/data/residual-program.yaml", "dp=2,tp=2"},
}
for _, case in ipairs(programs) do
  local cost = {}
  for _, name in ipairs(names) do
    local p = search(case[1], case[2], name)
    local eq, text = p:verify{mode = "exact"}
    check(eq, name .. " on " .. case[1] .. " " .. case[2] .. ": " .. text)
    cost[name] = objective(p)
    -- the same search again makes the same plan
    check(search(case[1], case[2], name):hash() == p:hash(),
          name .. ": not deterministic")
  end
  local what = case[1] .. " on " .. case[2]
  for _, exact in ipairs{"dp", "ilp"} do
    check(math.abs(cost[exact] - cost.exhaustive) <= 1e-9 * cost.exhaustive,
          what .. ": " .. exact .. " " .. cost[exact] .. " ~= exhaustive " ..
          cost.exhaustive)
  end
  check(cost.ilp <= cost.megatron * (1 + 1e-9), what .. ": ilp worse than megatron")
  for _, name in ipairs(names) do
    check(cost.exhaustive <= cost[name] * (1 + 1e-12),
          what .. ": " .. name .. " beats the oracle")
  end
  check(cost.dp <= cost.megatron * (1 + 1e-12), what .. ": dp worse than megatron")
end

-- megatron on the MLP is the Megatron plan
local m = search("examples/mlp-program.yaml", "dp=2,tp=2", "megatron")
local s1, s2 = m:strategy("mlp.fc1"), m:strategy("mlp.fc2")
check(s1["in"][1] == "S(0)R" and s1["in"][2] == "RS(1)" and s1.out[1] == "S(0)S(1)",
      "megatron fc1 is column parallel: " .. table.concat(s1["in"], ","))
check(s2["in"][2] == "RS(0)" and s2.out[1] == "S(0)P(sum)",
      "megatron fc2 is row parallel: " .. s2.out[1])

-- pinned ops keep their strategy, whatever the strategy
for _, name in ipairs(names) do
  local p = search("tests/lua/data/mlp-pinned.plan.yaml", nil, name)
  local s = p:strategy("mlp.act")
  check(s["in"][1] == "RR" and s.out[1] == "RR",
        name .. " moved the pinned op: " .. s["in"][1])
end
print("test_search: ok")
