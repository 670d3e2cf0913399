-- The joint search (lua/joint.lua): the candidate meshes are exactly the
-- factorisations over dp, fsdp, cp, tp and pp with tp within a host, pp at
-- most the layers and cp at most 8, without fsdp (counted here by brute
-- force); the layers a pipeline
-- cuts between keep one activation live, and the stage cut of the 4-layer
-- transformer into two stages is the hand-written one (embed and layers 0
-- and 1, then layers 2 and 3 with the head and the loss); the search on
-- 8 devices returns a valid plan no slower than any candidate that fits,
-- each recipe's best among the rows, and that plan verifies EQUAL; on the
-- 32-layer Llama it picks a pipeline no slower than the hand-written
-- pipelined recipe; bad device and host counts and a plan without
-- training are refused.
local plan = require "plan"

local function check(cond, what) if not cond then error(what, 2) end end

local util = assert(load(plan.source("strategies/util"), "=util"))()
local joint = assert(load(plan.source("joint"), "=joint"))(util)
local tool = assert(os.getenv("PLAN_TOOL"), "PLAN_TOOL names the plan tool")

-- ---- meshes ------------------------------------------------------------
for _, case in ipairs({{64, 8, 32}, {8, 4, 4}, {12, 6, 2}, {1, 1, 1}}) do
  local n, per_host, layers = case[1], case[2], case[3]
  local want = 0
  for dp = 1, n do for fsdp = 1, n do for cp = 1, 8 do for tp = 1, n do
    for pp = 1, n do
      if dp * fsdp * cp * tp * pp == n and per_host % tp == 0 and
         pp <= layers and (cp == 1 or fsdp == 1) then
        want = want + 1
      end
    end
  end end end end
  local got, seen = joint.meshes(n, per_host, layers), {}
  check(#got == want, ("%d devices: %d meshes, by hand %d"):format(n, #got, want))
  for _, m in ipairs(got) do
    local key = ("%d,%d,%d,%d,%d"):format(m.dp, m.fsdp, m.cp, m.tp, m.pp)
    check(not seen[key], "mesh listed twice: " .. key)
    seen[key] = true
    check(m.dp * m.fsdp * m.cp * m.tp * m.pp == n and per_host % m.tp == 0 and
          m.pp <= layers and m.cp <= 8, "not a candidate: " .. key)
  end
  check(#joint.meshes(n, per_host, layers, 1) <= #got, "max_cp 1: no cp")
end

-- ---- layers and the stage cut ------------------------------------------
local file = "examples/transformer4-1f1b.plan.yaml"
local p = assert(plan.load(file))
local segs = joint.layers(p)
local ops = p:ops()
check(segs[1].first == 1 and segs[#segs].last == #ops, "the layers cover every op")
for i = 2, #segs do
  check(segs[i].first == segs[i - 1].last + 1, "the layers are contiguous")
end
-- each transformer layer's attention and MLP halves end on the residual
check(#segs >= 8, "a cut after each residual add: " .. #segs .. " layers")

local q = assert(plan.parse((p:text(true):gsub("\npipeline:\n.-\ntraining:",
                                               "\ntraining:")), "<no pipeline>"))
local cut = assert(joint.stage_cut(q, 2, "h100"))
check(#cut.stages == 2, "two stages")
local function has(list, name)
  for _, x in ipairs(list) do if x == name then return true end end
  return false
end
check(has(cut.stages[1], "embed") and has(cut.stages[1], "layers.1.mlp.res") and
      not has(cut.stages[1], "layers.2.ln1"),
      "stage 0: embed and layers 0 and 1, as by hand")
check(has(cut.stages[2], "layers.2.ln1") and has(cut.stages[2], "loss"),
      "stage 1: layers 2 and 3, the head and the loss")

-- ---- the search ----------------------------------------------------------
local res = assert(joint.search(p, {devices = 8, hosts = 2, hardware = "h100"}))
check(res.plan:validate(), "the found plan is valid")
local c = assert(res.plan:cost("h100"))
check(c.fits and math.abs(c.step - res.row.step) <= 1e-12 * c.step,
      "the plan is priced as its row")
local fitting = 0
for _, row in ipairs(res.rows) do
  if row.fits then
    fitting = fitting + 1
    check(res.row.step <= row.step, "a faster candidate was left: " .. row.mesh)
  end
end
check(fitting >= 4, "candidates that fit: " .. fitting)
check(res.recipes.megatron and res.recipes.fsdp, "each recipe's best is listed")
for name, row in pairs(res.recipes) do
  check(row.strategy == name and row.step >= res.row.step, name .. "'s best row")
end
local given = assert(p:cost("h100"))
check(res.row.step <= given.step, ("found %.4g s, the plan as given %.4g s")
      :format(res.row.step, given.step))
local path = os.tmpname()
local f = assert(io.open(path, "w"))
f:write(res.plan:text(true))
f:close()
local pipe = assert(io.popen(tool .. " verify --reduce " .. path .. " 2>&1"))
local out = pipe:read("a")
pipe:close()
os.remove(path)
check(out:find("EQUAL", 1, true) and not out:find("NOT EQUAL", 1, true),
      "the found plan verifies: " .. out)

-- ---- the 32-layer Llama-3-8B-shaped model on 32 devices in 4 hosts ------
-- (batch 16 x 2048 tokens): no plan without a pipeline fits beside the
-- best one; a pipeline wins, no slower than the hand-written pipelined
-- recipe on these devices (dp=2 x tp=4 x pp=4, 8 microbatches)
local big = assert(plan.load("examples/models/llama-32l.pp.plan.yaml"))
local hand = assert(big:cost("h100"))
local r = assert(joint.search(big, {devices = 32, hosts = 4, hardware = "h100"}))
check(r.row.mesh:find("pp=[248]") and r.row.microbatches,
      "a pipeline: " .. r.row.mesh)
check(r.row.step <= hand.step, ("found %.4g s, the recipe %.4g s")
      :format(r.row.step, hand.step))
check(r.recipes.fsdp and r.row.step <= r.recipes.fsdp.step, "fsdp's best is slower")
r.plan:close()

-- ---- refusals ------------------------------------------------------------
local none, why = joint.search(p, {devices = 8, hosts = 3})
check(none == nil and why:find("do not split over 3 hosts", 1, true), tostring(why))
none, why = joint.search(p, {devices = 0})
check(none == nil and why:find("devices", 1, true), tostring(why))
local prog = assert(plan.new{program = "examples/mlp-program.yaml", mesh = "dp=2"})
none, why = joint.search(prog, {devices = 2})
check(none == nil and why:find("no training section", 1, true), tostring(why))
