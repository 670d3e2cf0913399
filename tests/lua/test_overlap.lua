-- The overlap search (lua/overlap.lua) and the stream simulation seen
-- from Lua: on a four-layer FSDP stack it finds the repeated layer, gives
-- every copy the same schedule, gains modeled time, keeps the plain step
-- as it was, makes a valid plan that verifies EQUAL (`plan verify
-- --reduce`), and is deterministic; p:simulate's serial run is the sum of
-- its steps.
local plan = require "plan"

local function check(cond, what) if not cond then error(what, 2) end end

local tool = assert(os.getenv("PLAN_TOOL"), "PLAN_TOOL names the plan tool")
local util = assert(load(plan.source("strategies/util"), "=util"))()
local overlap = assert(load(plan.source("overlap"), "=overlap"))(util)
local fsdp = assert(load(plan.source("strategies/fsdp"), "=fsdp"))(util)

local p = assert(plan.new{program = "tests/lua/data/mlp4-program.yaml",
                          mesh = "dp=2,tp=2"})
util.deliver_outputs(p, fsdp(p, {outputs = p:outputs(), hardware = "h100"}),
                     p:outputs())
check(p:validate(), "fsdp makes a valid plan")

-- the serial simulation is the sum of its steps, and the report's step
local sim = assert(p:simulate{serial = true, hardware = "h100"})
local sum, gathers = 0, 0
for _, s in ipairs(sim.steps) do
  sum = sum + s.seconds
  if s.kind == "collective" then
    check(s.stream == 0, "serial: every collective on the compute stream")
    check(s.chunkable[1] == 1 and #s.chunk_seconds == 3, "chunk figures")
    if s.param ~= "" and s.origin_op ~= "" then gathers = gathers + 1 end
  end
end
check(gathers > 0, "FSDP gathers its weights for the ops that read them")
check(math.abs(sim.makespan - sum) <= 1e-12 * sum, "serial = sum")
local c0 = assert(p:cost("h100"))
check(not c0.overlapped and c0.step_no_overlap == c0.step,
      "no overlap: the plain step")
check(math.abs(sim.makespan - c0.step) <= 1e-9 * c0.step,
      "the serial run is the report's step")

-- the search
local q, res = overlap.search(p, {hardware = "h100"})
check(q, "overlap.search: " .. tostring(res))
check(res.layers >= 2, "a repeated layer found: " .. tostring(res.layers))
check(res.entries > 0, "some collective overlapped")
check(res.step < res.step_no_overlap, ("a gain: %g vs %g"):format(res.step,
      res.step_no_overlap))
local c1 = assert(q:cost("h100"))
check(c1.overlapped and c1.step == res.step, "the plan is priced with it")
check(c1.step_no_overlap == c0.step, "its step without overlap is p's, exactly")
check(q:validate(), "the plan found is valid")

-- every copy of the layer has the same schedule: each entry's shape with
-- the layer number taken out occurs once per copy, its start the same
-- number of layers back (the first copy, with no layer before it, starts
-- as soon as it can)
local shapes, shift, copies = {}, {}, {}
for _, e in ipairs(q:overlap()) do
  local layer = tonumber(e.pattern:match("^layers%.(%d+)%."))
  check(layer, "an entry of a layer: " .. e.pattern)
  local shape = table.concat({e.select, (e.pattern:gsub("%d+", "#")),
                              tostring(e.operand), e.chunks, e.stream,
                              e.wait}, " ")
  shapes[shape] = (shapes[shape] or 0) + 1
  copies[layer] = true
  local at = e.start_op and tonumber(e.start_op:match("^layers%.(%d+)%."))
  if at then
    check(shift[shape] == nil or shift[shape] == layer - at,
          "the same start in every copy: " .. shape)
    shift[shape] = layer - at
  end
end
local ncopies = 0
for _ in pairs(copies) do ncopies = ncopies + 1 end
check(ncopies >= res.layers, "every copy has entries")
for shape, n in pairs(shapes) do
  check(n >= res.layers, ("'%s' in %d copies of %d"):format(shape, n,
        res.layers))
end

-- deterministic
local q2, res2 = overlap.search(p, {hardware = "h100"})
check(q2 and q2:hash() == q:hash() and res2.entries == res.entries,
      "the same search finds the same plan")

-- verified: the chunks and the order hold
local path = os.tmpname()
local f = assert(io.open(path, "w"))
f:write(q:text(true))
f:close()
local pipe = assert(io.popen(tool .. " verify --reduce " .. path .. " 2>&1"))
local out = pipe:read("a")
local ok = pipe:close()
os.remove(path)
check(ok and out:find("EQUAL", 1, true) and not out:find("NOT EQUAL", 1, true),
      "verify --reduce: " .. out)

-- the plan without its overlap is p's plan again
local bare = overlap.without(q)
check(#bare:overlap() == 0 and bare:hash() == p:hash(), "without: p again")
print("test_overlap: ok")
