-- The placement search (p:search_placement) and the mesh shape search
-- (lua/placement.lua) from the Lua side, on cases known by hand: a ring
-- all-reduce over 16 devices of a wrapped 4x4 torus has every ring edge
-- one hop on the snake curve (twice the row-major ring's link speed);
-- tp's all-reduce inside an NVLink island beats it across the network;
-- with every device doing the same work and only tp communicating, the
-- shape with tp=1 needs no collective and wins, and tp=4 inside an island
-- beats tp=8 across islands.
local plan = require "plan"

local function check(cond, what) if not cond then error(what, 2) end end

local util = assert(load(plan.source("strategies/util"), "=util"))()
local placement = assert(load(plan.source("placement"), "=placement"))(util)

local prog = "tests/lua/data/rowmm-program.yaml"

-- the row-parallel strategy (batch on dp, the contraction on tp, the
-- output a partial sum over tp delivered replicated there), shared with
-- the CLI tests
local rowpar = assert(loadfile("tests/lua/data/rowpar.lua"))(util)

-- ---- the torus: snake beats row-major --------------------------------
local p = assert(plan.new{program = prog, mesh = "tp=16"})
util.deliver_outputs(p, rowpar(p), p:outputs())
check(p:validate(), "the row-parallel plan is valid")
check(p:topology() == nil, "no topology yet")
local none, msg = p:search_placement{}
check(none == nil and msg:find("no topology", 1, true), "no topology: " .. tostring(msg))
local torus = {torus = {dims = {4, 4}, wrap = true}}
local r = assert(p:search_placement{topology = torus, hardware = "tpu-v5e"})
check(r.curve == "snake", "the snake curve, not " .. r.curve)
check(r.candidates == 4, "default, row-major, snake, tiled: " .. r.candidates)
check(#r.list == r.candidates and r.list[1].curve == "default", "the list")
check(r.gain > 1 and math.abs(r.gain - r.default / r.step) < 1e-12, "a gain")
-- every step of the snake is one hop: neighbours on the torus
for i = 1, 15 do
  local a, b = r.devices[i], r.devices[i + 1]
  local dr, dc = math.abs(a // 4 - b // 4), math.abs(a % 4 - b % 4)
  check(dr + dc == 1, ("devices %d, %d are not neighbours"):format(a, b))
end
-- the what-if stays with the call, and without apply the order too
check(p:topology() == nil, "the what-if topology is not kept")
check(p:devices()[5] == 4, "the order is not kept without apply")
-- the best candidate's step is the least in the list
for _, c in ipairs(r.list) do check(c.step >= r.step, c.curve .. " is cheaper") end
-- applied: the plan's devices are the snake's, and its cost says so
assert(p:set_topology(torus, "tpu-v5e"))
check(p:topology() == "torus", "the topology is set")
local before = p:cost("tpu-v5e").step
r = assert(p:search_placement{hardware = "tpu-v5e", apply = true})
check(p:devices()[5] == r.devices[5] and r.devices[5] == 7, "applied")
local after = p:cost("tpu-v5e").step
check(after < before and math.abs(before / after - r.gain) < 1e-9,
      ("the cost follows: %g -> %g"):format(before, after))
-- a torus of another size is refused, naming the counts
local bad, berr = p:set_topology({torus = {dims = {4, 3}}})
check(bad == nil and berr:find("12 devices", 1, true), tostring(berr))
check(not pcall(p.set_topology, p, {torus = {dims = "4x4"}}), "dims is a list")
p:close()

-- ---- levels: tp inside the NVLink island -----------------------------
local islands = {levels = {{name = "nvlink", size = 4}, {name = "ib"}}}
p = assert(plan.new{program = prog, mesh = "dp=2,tp=4"})
util.deliver_outputs(p, rowpar(p), p:outputs())
-- interleaved: each tp group spans both islands
assert(p:set_devices{0, 4, 1, 5, 2, 6, 3, 7})
r = assert(p:search_placement{topology = islands, hardware = "h100", apply = true})
check(r.curve == "host-major" and r.order == "dp,tp", r.curve .. " " .. r.order)
check(r.gain > 1, "inside the island is faster")
for i, d in ipairs(p:devices()) do check(d == i - 1, "tp groups are islands") end
-- per-device hardware as a what-if changes the step, not the plan
local mixed = {"h100", "h100", "h100", "h100", "a100", "a100", "a100", "a100"}
local rm = assert(p:search_placement{topology = islands, device_hardware = mixed})
check(rm.step > r.step, "A100s are slower")
check(p:device_hardware() == nil, "the what-if hardware is not kept")
local badhw, herr = p:search_placement{topology = islands,
                                       device_hardware = {"h100", "h100", "h100",
                                       "h100", "x9", "a100", "a100", "a100"}}
check(badhw == nil and herr:find("x9", 1, true), tostring(herr))
p:close()

-- ---- the topology specs ------------------------------------------------
local t = assert(placement.topology("torus:4x2:nowrap"))
check(t.torus.dims[1] == 4 and t.torus.dims[2] == 2 and t.torus.wrap == false, "torus spec")
t = assert(placement.topology("levels:nvlink=4,pcie=2,ib"))
check(#t.levels == 3 and t.levels[2].size == 2 and t.levels[3].size == nil, "levels spec")
for _, s in ipairs{"torus:4xx4", "torus:", "levels:ib=2", "levels:a,b",
                   "ring:4", "torus:4x4:both", "torus:0x4"} do
  check(placement.topology(s) == nil, "refused: " .. s)
end

-- ---- the shapes of 8 devices ----------------------------------------------
local shapes = placement.shapes(8, {"dp", "tp"})
local texts = {}
for i, s in ipairs(shapes) do texts[i] = s.text end
check(table.concat(texts, " ") == "dp=1,tp=8 dp=2,tp=4 dp=4,tp=2 dp=8,tp=1",
      table.concat(texts, " "))
check(#placement.shapes(8, {"dp", "tp", "pp"}) == 10, "8 over three axes: 10 shapes")
check(#placement.shapes(12, {"a", "b"}) == 6, "the divisors of 12")

-- ---- the mesh shape search ----------------------------------------------
p = assert(plan.new{program = prog, mesh = "dp=2,tp=4"})
local res = assert(placement.search_shapes(p, {strategy = rowpar, hardware = "h100",
                                               topology = islands,
                                               placement = true}))
local by = {}
for _, e in ipairs(res.list) do by[e.mesh] = e.step end
local order = {}
for i, e in ipairs(res.list) do order[i] = e.mesh end
check(table.concat(order, " ") == "dp=2,tp=4 dp=1,tp=8 dp=4,tp=2 dp=8,tp=1",
      "the plan's own shape first, then in order: " .. table.concat(order, " "))
check(#res.list == 4, "four shapes")
-- tp=1: no collective at all
check(res.mesh == "dp=8,tp=1", "dp=8 needs no all-reduce: " .. res.mesh)
check(res.plan:cost("h100").step == res.step, "the best plan's step")
-- tp=4 in an island beats tp=8 across the network
check(by["dp=2,tp=4"] < by["dp=1,tp=8"], "tp inside the island")
check(res.gain > 1 and math.abs(res.gain - by["dp=2,tp=4"] / res.step) < 1e-12,
      "the gain over the plan's own shape")
res.plan:close()
-- a pinned region's placements hold only on its own mesh
local pinned = assert(plan.load("tests/lua/data/mlp-pinned.plan.yaml"))
local none2, perr = placement.search_shapes(pinned, {})
check(none2 == nil and perr:find("pinned", 1, true), tostring(perr))

-- ---- the tour's figures (examples/hetero.lua): their direction ---------
-- the DiT block on sp=16 over a wrapped 4x4 tpu-v5e torus: the searched
-- placement's modeled step under the row-major order's
local dit = assert(plan.load("examples/models/dit-block.recipe.plan.yaml"))
local dtext = dit:text(true):gsub("axes: %[dp=2, sp=4%]", "axes: [dp=1, sp=16]", 1)
dit:close()
local d16 = assert(plan.parse(dtext, "dit-block on sp=16"))
check(d16:validate(), "the DiT block on sp=16 is valid")
local dr = assert(d16:search_placement{topology = {torus = {dims = {4, 4}}},
                                        hardware = "tpu-v5e"})
check(dr.curve ~= "default" and dr.gain > 1,
      ("DiT placement gain %s %g"):format(dr.curve, dr.gain))
d16:close()
-- the Llama block on H100s and A100s: ratio shards under even ones
local ratios = assert(load(plan.source("ratios"), "=ratios"))(util)
local ll = assert(plan.load("examples/models/llama3-8b-layer.recipe.plan.yaml"))
local n = #ll:devices()
local hw = {}
for i = 1, n do hw[i] = i <= n // 2 and "h100" or "a100" end
local sol = ratios.solve(ll, {device_hardware = hw})
check(sol.even / sol.step > 1, ("ratio gain %g"):format(sol.even / sol.step))
ll:close()
-- a plan's own topology and hardware (format 1.1, from the file) go with
-- every candidate shape of the same devices
local dt = assert(plan.load("examples/dit-torus.plan.yaml"))
local other = assert(plan.parse(dt:text(true):gsub("axes: %[dp=4, sp=4%]",
                                                   "axes: [dp=2, sp=8]", 1),
                                "dit-torus on dp=2,sp=8"))
assert(other:set_topology(nil))
check(other:topology() == nil, "the copy starts without a topology")
assert(other:copy_physical_from(dt))
check(other:topology() == "torus", "the torus copied: " .. tostring(other:topology()))
check(other:text():find("torus:", 1, true), "written with the torus")
local small = assert(plan.new{program = "examples/mlp-program.yaml", mesh = "dp=2"})
local okc, cerr = small:copy_physical_from(dt)
check(not okc and tostring(cerr):find("devices"), "16 devices onto 2 refused: " .. tostring(cerr))
small:close()
other:close()
local dts = assert(placement.search_shapes(dt, {}))
check(#dts.list == 5, "5 shapes of 16 over dp,sp: " .. #dts.list)
for _, e in ipairs(dts.list) do
  check(e.step, "shape " .. e.mesh .. " priced on the torus: " .. tostring(e.error))
end
check(dts.plan:topology() == "torus", "the best shape keeps the torus")
-- sp=4 groups are torus rows (rings of 4): the plan's own shape wins, and
-- every other shape, whose groups leave a row, is slower on the torus
check(dts.mesh == "dp=4,sp=4", "the best shape: " .. dts.mesh)
for _, e in ipairs(dts.list) do
  check(e.mesh == "dp=4,sp=4" or e.step > dts.step * 1.1,
        e.mesh .. " slower than the rows: " .. tostring(e.step))
end
dts.plan:close()
-- per-device hardware replaces the mesh's one profile, as a file holds one
-- or the other: the plan saves and reads back, with the same hash
assert(dt:set_device_hardware((function()
  local l = {}
  for i = 1, 16 do l[i] = i <= 8 and "tpu-v5e" or "h100" end
  return l
end)()))
local back = assert(plan.parse(dt:text(true), "dit-torus with profiles"))
check(back:hash() == dt:hash(), "per-device hardware reads back: " .. back:hash())
local dh = back:device_hardware()
check(dh[16].name == "h100-sxm" and dh[1].name == "tpu-v5e",
      "the profiles read back: " .. dh[1].name .. ", " .. dh[16].name)
back:close()
-- an alias names the same profile: one hash
local function with_profile(name)
  return assert(plan.parse(table.concat({"libplan: \"1.1\"",
    "program: {tensors: {x: {shape: [4], dtype: f32, role: input}}, " ..
      "ops: [{name: r, op: relu, in: [x], out: y}]}",
    "mesh:", "  axes: [dp=2]",
    "  hardware: {profiles: {a: " .. name .. ", b: a100}, devices: [a, b]}", ""}, "\n"),
    "alias " .. name))
end
local h1, h2 = with_profile("h100"), with_profile("h100-sxm")
check(h1:hash() == h2:hash(), "h100 and h100-sxm hash alike")
h1:close()
h2:close()
dt:close()
print("ok")
