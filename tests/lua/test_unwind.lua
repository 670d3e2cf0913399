-- Lua errors in the middle of the module's functions: each call runs again
-- and again with Lua's allocator refusing memory from its first, second,
-- third ... allocation on (alloc_limit, built by run.sh), so a memory error
-- is raised at every point of the call that allocates, until the call
-- needs no more. A raise must lose no C memory (the sanitizer build's leak
-- checker reports any at exit) and leave the plan usable; the call that
-- runs through gives the normal result. Raises on failure.
local plan = require "plan"
local alloc = require "alloc_limit"

local function check(cond, what) if not cond then error(what, 2) end end

-- Runs f(...) with the n-th allocation on refused, for n = 1, 2, ... until
-- nothing is refused; the results of that last run. `least`: the
-- allocations the call must make (so that some refusals come in its
-- middle, after the module holds C memory), 0 when absent.
local function each_refusal(what, least, f, ...)
  if type(least) ~= "number" then return each_refusal(what, 0, least, f, ...) end
  local n = 0
  while true do
    n = n + 1
    local r = table.pack(alloc.run(n, f, ...))
    local refused, ok = r[1], r[2]
    if not ok then
      check(refused, what .. ": failed with all its memory: " .. tostring(r[3]))
      check(tostring(r[3]):find("not enough memory", 1, true),
            what .. ": a refused allocation raised '" .. tostring(r[3]) .. "'")
    end
    if not refused then
      check(n > least, what .. ": " .. (n - 1) .. " allocations, not " .. least)
      return table.unpack(r, 3, r.n)
    end
  end
end

local function join(list) return table.concat(list, "\n") end

local p = assert(plan.load("examples/mlp-megatron.plan.yaml"))
local h0 = p:hash()
local e = assert(plan.new{program = "examples/mlp-program.yaml", mesh = "dp=2"})

-- p:validate(): the findings' list is built while the diagnostics are held
local ok, findings = e:validate()
local vok, vfindings = each_refusal("validate", 4, e.validate, e)
check(vok == ok and #findings == 3 and join(vfindings) == join(findings),
      "validate after refusals")

-- p:cost(): the report's text is held while the result table is built
local cost = p:cost()
local c = each_refusal("cost", 4, p.cost, p)
check(c.text == cost.text and c.step == cost.step and c.fits == cost.fits,
      "cost after refusals")

-- p:text(): the plan's text is held while it becomes a Lua string
check(each_refusal("text", 2, p.text, p) == p:text(), "text after refusals")
check(each_refusal("text, self-contained", 2, p.text, p, true) == p:text(true),
      "self-contained text after refusals")

-- p:strategies(op): the strategy list is held while the table is built
local s = p:strategies("mlp.fc2")
local vs = each_refusal("strategies", 4, p.strategies, p, "mlp.fc2")
check(#vs == #s and vs[#s].out[1] == s[#s].out[1], "strategies after refusals")

-- p:diff(q): the differences are held while listed
check(join(each_refusal("diff", 3, p.diff, p, e)) == join(p:diff(e)),
      "diff after refusals")

-- p:verify(): the report is held while its fields are pushed (a manual
-- region's body runs in its own state, with its own allocator)
local m = assert(plan.load("examples/mlp-manual.plan.yaml"))
local meq, mtext = each_refusal("verify", 4, m.verify, m)
check(meq == true and mtext == select(2, m:verify()), "verify after refusals")
local veq = each_refusal("verify, float", 4, p.verify, p,
                         {mode = "float", dtype = "f32", seed = 3})
check(veq == true, "float verify after refusals")

-- the rest of the module: nothing held, but nothing may break either
local path = os.tmpname()
each_refusal("load", plan.load, "examples/mlp-megatron.plan.yaml")
each_refusal("parse", plan.parse, p:text(), "p.yaml", "examples")
each_refusal("new", plan.new, {program = "examples/mlp-program.yaml",
                               mesh = "dp=2,tp=2"})
each_refusal("hash", p.hash, p)
each_refusal("tostring", tostring, p)
each_refusal("save", p.save, p, path, {self_contained = true})
each_refusal("lower", p.lower, p, path)
os.remove(path)
each_refusal("ops", p.ops, p)
each_refusal("op", p.op, p, "mlp.fc2")
each_refusal("tensor", p.tensor, p, "x")
each_refusal("mesh", p.mesh, p)
each_refusal("outputs", p.outputs, p)
each_refusal("devices", p.devices, p)
each_refusal("set_devices", p.set_devices, p, {0, 2, 1, 3})
each_refusal("set_devices, iota", p.set_devices, p, nil)
each_refusal("stats", p.stats, p)
each_refusal("strategy", p.strategy, p, "mlp.fc1")
each_refusal("placement", p.placement, p, "w1")
each_refusal("set_placement", p.set_placement, p, "w1", "RS(1)")
each_refusal("pinned", p.pinned, p, "mlp.fc1")
local st = p:strategy("mlp.fc1")
each_refusal("apply, undo", function()
  local applied = p:apply("mlp.fc1", st)
  if applied then p:undo() end
end)
each_refusal("cost_op", p.cost_op, p, "mlp.fc1", st)
each_refusal("cost_redist", p.cost_redist, p, "w1", "RS(1)", "RR")
each_refusal("set_provenance", p.set_provenance, p,
             {strategy = "megatron", seed = 0, opts = {1, 2, {deep = true}}})
each_refusal("provenance", p.provenance, p)
each_refusal("hash_text", plan.hash_text, "some text")
each_refusal("source", plan.source)
each_refusal("source, by name", plan.source, "search")
local r = each_refusal("milp", plan.milp, {obj = {1, 2}, rows = {
  {cols = {1, 2}, coefs = {1, 1}, sense = ">=", rhs = 1}}, start = {[1] = 1}})
check(r.objective == 1 and r.x[1] == 1, "milp after refusals")

-- the plan is as it was
p:set_provenance({strategy = "megatron", seed = 0})
check(p:hash() == h0, "the plan unchanged by the refusals")
check(p:stats().cost_plan > 1, "the cost calls counted")
print("test_unwind: ok")
