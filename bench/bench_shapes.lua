-- The mesh shape search's time (make bench-shapes, run as `plan run
-- bench/bench_shapes.lua`): the Llama-3 8B layer's program on 16 devices
-- over its axis names dp, tp (5 shapes) and, with a third name, over dp,
-- tp, sp (15 shapes), the Megatron recipe run and priced on each shape,
-- and with the placement search on two NVLink islands of 8. The baseline,
-- measured in the same run, is one recipe run and pricing on the plan's
-- own shape: the ratio says what the shapes (and assignments) cost over
-- it.
local plan = require "plan"
local util = assert(load(plan.source("strategies/util"), "=util"))()
local placement = assert(load(plan.source("placement"), "=placement"))(util)
local megatron = assert(load(plan.source("strategies/megatron"),
                             "=megatron"))(util)

local dir = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
local path = dir .. "/../examples/models/llama3-8b-layer.recipe.plan.yaml"
local p = assert(plan.load(path))
local islands = {levels = {{name = "nvlink", size = 8}, {name = "ib"}}}

local function run(q)
  local placed = megatron(q, {hardware = "h100", outputs = q:outputs()})
  util.deliver_outputs(q, placed, q:outputs())
  return assert(q:cost("h100")).step
end

local function clock(reps, fn)
  local t0 = os.clock()
  local out
  for _ = 1, reps do out = fn() end
  return (os.clock() - t0) / reps, out
end

local reps = tonumber(os.getenv("BENCH_REPS")) or 3
local prog = assert(placement.program_text(p))
local base = clock(reps, function()
  local q = assert(plan.parse(prog .. "mesh: {axes: [dp=2, tp=8]}\n", "base"))
  local s = run(q)
  q:close()
  return s
end)
print(("baseline: one recipe run on dp=2 x tp=8      %8.2f ms"):format(base * 1e3))
local cases = {
  {"dp, tp (16 devices)", {"dp", "tp"}, false},
  {"dp, tp + placement on 2x8 islands", {"dp", "tp"}, true},
  {"dp, tp, sp (16 devices)", {"dp", "tp", "sp"}, false},
}
for _, c in ipairs(cases) do
  local s, res = clock(reps, function()
    local r = assert(placement.search_shapes(p, {
      axes = c[2], devices = 16, hardware = "h100",
      topology = c[3] and islands or nil,
      run = function(q)
        local ok, step = pcall(run, q)
        if not ok then return nil, tostring(step) end
        if c[3] then
          local pr = assert(q:search_placement{hardware = "h100", apply = true})
          step = pr.step
        end
        return step
      end}))
    r.plan:close()
    return r
  end)
  local ran = 0
  for _, e in ipairs(res.list) do if e.step then ran = ran + 1 end end
  print(("%-38s %2d shapes (%2d ran) %8.2f ms  %5.1fx the baseline; best %s " ..
         "%.4g ms"):format(c[1], #res.list, ran, s * 1e3, s / base, res.mesh,
         res.step * 1e3))
end
