-- The ratio LP and the stage sizing (lua/ratios.lua) and the hetero
-- strategy: on a compute-bound matmul the LP's shares are the devices'
-- speed ratio (from the profiles' figures); the rounding keeps the sum
-- and every weight positive; the stage cut gives faster devices more
-- layers and keeps to memory; hetero makes a valid plan.
local plan = require "plan"

local function check(cond, what) if not cond then error(what, 2) end end

local util = assert(load(plan.source("strategies/util"), "=util"))()
local ratios = assert(load(plan.source("ratios"), "=ratios"))(util)

-- compute-bound: one large bf16 matmul split on the batch, stored and
-- delivered split (no collective at all)
local p = assert(plan.new{program = "tests/lua/data/bigmm-program.yaml", mesh = "dp=2"})
assert(p:apply("mm", {["in"] = {"S(0)", "R"}, out = {"S(0)"}}))
assert(p:set_placement("x", "S(0)"))
assert(p:set_placement("y", "S(0)"))
local hw = {"h100", "a100"}
local sol = ratios.solve(p, {device_hardware = hw})
local speed = p:hardware_figure("h100", "flops.bf16") / p:hardware_figure("a100", "flops.bf16")
local x = sol.continuous[1]
check(math.abs(x[1] / x[2] - speed) / speed < 0.01,
      ("shares %g:%g, speed ratio %g"):format(x[1], x[2], speed))
check(math.abs(x[1] + x[2] - 1) < 1e-9, "shares sum to 1")
-- the rounded weights: the speed ratio in sixteenths, reduced
local w1 = math.floor(16 * speed / (1 + speed) + 0.5)
local g = w1
local b = 16 - w1
while b ~= 0 do g, b = b, g % b end
local want = {w1 // g, (16 - w1) // g}
check(sol.axes[1] and sol.axes[1].weights[1] == want[1] and sol.axes[1].weights[2] == want[2],
      "weights " .. ratios.describe(sol) .. ", want " .. table.concat(want, ":"))
check(sol.step < sol.even, "ratios beat even pieces")
-- the LP's optimum: both devices finish together
local th = p:cost_op("mm", p:strategy("mm"), "h100")
local ta = p:cost_op("mm", p:strategy("mm"), "a100")
check(math.abs(sol.lp - 2 * th * x[1]) / sol.lp < 1e-3 and
      math.abs(sol.lp - 2 * ta * x[2]) / sol.lp < 1e-3, "T is each device's time")
-- like devices: even pieces, no ratios
local same = ratios.solve(p, {device_hardware = {"a100", "a100"}})
check(next(same.axes) == nil, "like devices take even pieces")
check(math.abs(same.step - same.even) < 1e-12, "like devices: no gain")
-- a finer unit
local fine = ratios.solve(p, {device_hardware = hw, granularity = 64})
local f = fine.axes[1].weights
check(math.abs(f[1] / f[2] - speed) < math.abs(want[1] / want[2] - speed) + 1e-9,
      "64ths are at least as close as 16ths")

-- rounding: sums, floors of one, gcd
local function sum(w) local s = 0 for _, v in ipairs(w) do s = s + v end return s end
local r = ratios.round({0.5, 0.25, 0.25}, 16)
check(r[1] == 2 and r[2] == 1 and r[3] == 1, "round 1/2 1/4 1/4: " .. table.concat(r, ":"))
r = ratios.round({0.999, 0.0005, 0.0005}, 16)
check(r[2] >= 1 and r[3] >= 1 and sum(r) == 16, "every weight positive: " .. table.concat(r, ":"))
r = ratios.round({0.7, 0.3}, 10)
check(r[1] == 7 and r[2] == 3, "round 7:3")
check(ratios.with_ratios("S(0)R", 1, {3, 1}) == "S(0|3:1)R", "compact spelling")
check(ratios.with_ratios("RS(1:1)", 2, {5, 3}) == "RS(1:1|5:3)", "with a level")
check(ratios.with_ratios("P(sum)R", 1, {3, 1}) == "P(sum)R", "a partial sum keeps no ratio")

-- the stage cut: faster stages take more layers
local counts, worst = ratios.cut({{1, 1, 1, 1, 1, 1}, {3, 3, 3, 3, 3, 3}}, {0, 0, 0, 0, 0, 0}, {0, 0})
check(counts[1] == 5 and counts[2] == 1 and worst == 5, "cut 3x faster: " .. table.concat(counts, "+"))
-- memory bounds the fast stage
counts = ratios.cut({{1, 1, 1, 1, 1, 1}, {3, 3, 3, 3, 3, 3}}, {1, 1, 1, 1, 1, 1}, {3, 0})
check(counts[1] == 3 and counts[2] == 3, "memory caps the fast stage: " .. table.concat(counts, "+"))
check(ratios.cut({{1, 1}, {1, 1}}, {5, 5}, {4, 4}) == nil, "no cut fits")

-- on a pipeline plan: stages 0-1 on H100s, 2-3 on A100s (pp is the minor
-- axis of dp=2 x pp=4, device = rank)
local pp = assert(plan.load("examples/pipeline-1f1b.plan.yaml"))
local devs = {}
for d = 0, 7 do devs[d + 1] = (d % 4) < 2 and "h100" or "a100" end
local cut = ratios.stage_cut(pp, {device_hardware = devs})
local total = 0
for _, c in ipairs(cut.counts) do total = total + c end
check(#cut.counts == 4 and cut.counts[1] > cut.counts[4],
      "faster stages get more layers: " .. table.concat(cut.counts, "+"))
check(#cut.stages[1] > #cut.stages[4], "stage op lists follow the cut")
if cut.even then check(cut.seconds <= cut.even, "the cut is no slower than even") end
local like = ratios.stage_cut(pp, {device_hardware = {"h100", "h100", "h100", "h100",
                                                      "h100", "h100", "h100", "h100"}})
check(like.counts[1] <= cut.counts[1], "like devices: no more layers up front")
check(total > 0, "layers counted")

-- the hetero strategy on like devices: the best candidate, a valid plan
local q = assert(plan.new{program = "examples/mlp-program.yaml", mesh = "dp=2,tp=2"})
local hetero = assert(load(plan.source("strategies/hetero"), "=hetero"))(util)
local notes = {}
local placed = hetero(q, {outputs = q:outputs(), hardware = "h100",
                          note = function(m) notes[#notes + 1] = m end})
util.deliver_outputs(q, placed, q:outputs())
check(q:validate(), "hetero: a valid plan")
check(notes[1] and notes[1]:find("with ratios even", 1, true), "hetero's note: " .. tostring(notes[1]))
-- format 1.1 spelling: weights given as text join the plan's sets and
-- come back as weights (the form a user pastes), also through a strategy
local rp = assert(plan.new{program = "tests/lua/data/bigmm-program.yaml", mesh = "dp=2"})
assert(rp:apply("mm", {["in"] = {"S(0|6:2)", "R"}, out = {"S(0|3:1)"}}))
assert(rp:set_placement("x", "S(0|3:1)"))
check(rp:placement("x") == "S(0|3:1)", "weights back: " .. tostring(rp:placement("x")))
check(rp:strategy("mm")["in"][1] == "S(0|3:1)", "reduced weights in a strategy: " ..
      tostring(rp:strategy("mm")["in"][1]))
check(rp:strategy("mm").out[1] == "S(0|3:1)", "weights of an output")
local ok = pcall(rp.set_placement, rp, "x", "S(0|3:0)")
check(not ok, "a zero weight is refused")
-- the LP's ratios on unlike devices are applied to the plan (uneven)
local sol2 = ratios.solve(p, {device_hardware = hw})
ratios.apply(p, sol2)
check(p:placement("x"):find("|", 1, true), "applied ratios: " .. p:placement("x"))
check(p:validate(), "applied ratios make a valid plan")

-- the per-device cost API: each rank's own piece on its own device
local d = assert(plan.new{program = "tests/lua/data/bigmm-program.yaml", mesh = "dp=2"})
assert(d:apply("mm", {["in"] = {"S(0)", "R"}, out = {"S(0)"}}))
assert(d:set_placement("x", "S(0)"))
assert(d:set_placement("y", "S(0)"))
local st = d:strategy("mm")
-- like devices: every rank's time is the op's
local one = d:cost_op("mm", st, "h100")
check(math.abs(d:cost_op_rank("mm", st, 1, "h100") - one) < 1e-15 and
      math.abs(d:cost_op_rank("mm", st, 2, "h100") - one) < 1e-15, "like ranks")
check(not pcall(d.cost_op_rank, d, "mm", st, 3), "rank 3 of 2 raises")
-- unlike devices set on the mesh: each rank at its device's speed
assert(d:set_device_hardware{"h100", "a100"})
local r1, r2 = d:cost_op_rank("mm", st, 1), d:cost_op_rank("mm", st, 2)
check(math.abs(r1 - d:cost_op("mm", st, "h100")) / r1 < 1e-12, "rank 1 on its H100")
check(math.abs(r2 - d:cost_op("mm", st, "a100")) / r2 < 1e-12, "rank 2 on its A100")
-- the LP from the mesh's own hardware (per-device pricing) agrees with the
-- what-if list (per-profile pricing)
local own = ratios.solve(d, {})
local whatif = ratios.solve(d, {device_hardware = {"h100", "a100"}})
check(ratios.describe(own) == ratios.describe(whatif) and
      math.abs(own.step - whatif.step) / own.step < 1e-9,
      ratios.describe(own) .. " vs " .. ratios.describe(whatif))
d:close()
print("test_ratios: ok")
