-- The plan module: objects, errors, the search primitives (strategies,
-- apply, undo), validation, verification, saving. Raises on failure.
local plan = require "plan"

local function check(cond, what) if not cond then error(what, 2) end end
local function raises(f, words)
  local ok, err = pcall(f)
  check(not ok, "expected an error containing '" .. words .. "'")
  check(tostring(err):find(words, 1, true),
        "error '" .. tostring(err) .. "' lacks '" .. words .. "'")
end

check(type(plan.version) == "string" and plan.version:match("^%d+%.%d+"),
      "plan.version")

-- recoverable failures: nil, message (with the file)
local none, msg = plan.load("tests/lua/no-such-plan.yaml")
check(none == nil and msg:find("no%-such%-plan.yaml"), "load failure")
local bad, bmsg = plan.parse("libplan: \"0.1\"\nprogram: [", "bad.yaml")
check(bad == nil and bmsg:find("bad.yaml:%d+:%d+"), "parse failure has a position")

local p = assert(plan.load("examples/mlp-megatron.plan.yaml"))
check(tostring(p):find("mesh dp=2 x tp=2", 1, true), "__tostring")
local h0 = p:hash()
check(h0:match("^xxh3:%x+$"), "hash")

-- ops, tensors, mesh
local ops = p:ops()
check(#ops == 3 and ops[1] == "mlp.fc1", "ops in topological order")
local fc2 = p:op("mlp.fc2")
check(fc2.kind == "matmul" and fc2.inputs[2] == "w2" and fc2.index == 3, "op info")
check(p:op(1).name == "mlp.fc1", "op by index")
local x = p:tensor("x")
check(x.shape[1] == 8 and x.shape[2] == 16 and x.role == "input", "tensor info")
local mesh = p:mesh()
check(#mesh == 2 and mesh[2].name == "tp" and mesh[2].size == 2, "mesh")
raises(function() p:op("nope") end, "no op 'nope'")
raises(function() p:tensor("nope") end, "no tensor 'nope'")

-- communication overlap: the plan's entries as data (none here)
check(#p:overlap() == 0, "no overlap entries")
local ov = assert(plan.load("examples/fsdp-tp-overlap.plan.yaml")):overlap()
check(#ov == 3, "three overlap entries")
check(ov[1].select == "param" and ov[1].pattern == "layers.1.*" and
      ov[1].start == "after" and ov[1].start_op == "layers.0.fc1" and
      ov[1].wait == "in_place" and ov[1].chunks == 1 and ov[1].stream == 1,
      "FSDP prefetch entry")
check(ov[2].select == "input" and ov[2].operand == 0 and ov[2].chunks == 2 and
      ov[2].dim == nil, "chunked all-gather entry")
check(ov[3].select == "grad_sync" and ov[3].start == "ready" and
      ov[3].wait == "end" and ov[3].stream == 2, "gradient sync entry")

-- the strategy space: all-R first, every entry legal, the plan's own in it
local list = p:strategies("mlp.fc2")
check(#list > 4, "several strategies")
check(list[1]["in"][1] == "RR" and list[1].out[1] == "RR", "all-R first")
local cur = p:strategy("mlp.fc2")
local found = false
for _, s in ipairs(list) do
  if s["in"][1] == cur["in"][1] and s["in"][2] == cur["in"][2] and
     s.out[1] == cur.out[1] then found = true end
end
check(found, "the plan's own strategy is listed")
-- no listed strategy shards k without a partial output
for _, s in ipairs(list) do
  if s["in"][1]:find("S%(1%)") then check(s.out[1]:find("P"), "k sharded gives P") end
end

-- every listed strategy of every op validates when applied alone
for _, name in ipairs(ops) do
  for i, s in ipairs(p:strategies(name)) do
    check(p:apply(name, s), "apply")
    local ok, findings = p:validate()
    check(ok, name .. " strategy " .. i .. ": " .. tostring(findings[1]))
    check(p:undo(), "undo")
  end
end
check(p:hash() == h0, "undo restores the plan")
check(p:undo() == false, "nothing left to undo")

-- a strategy that breaks the rule is applied as given and found by validate
p:apply("mlp.act", {["in"] = {"S(0)P"}, out = {"S(0)P"}})
local ok, findings = p:validate()
check(not ok and findings[1]:find("strategy%."), "validate finds the bad strategy")
p:undo()
raises(function() p:apply("mlp.act", {["in"] = {"S(9)R"}, out = {"RR"}}) end,
       "placement 'S(9)R'")
raises(function() p:apply("mlp.act", {["in"] = {}, out = {"RR"}}) end,
       "'in' has 0 placements")

-- verification from Lua, and a wrong plan not equal
local eq, text = p:verify{mode = "float", seed = 2}
check(eq == true and text:find("EQUAL"), "verify equal")
check(p:verify{runner = "cpu"} == true, "verify on the cpu runner")
local nr, rmsg = p:verify{runner = "tpu"}
check(nr == nil and rmsg:find("no runner named 'tpu'"), "an unknown runner")
local est = p:verify_estimate()
check(math.type(est) == "integer" and est > 0, "a memory estimate")
check(p:verify_estimate{mode = "float"} >= est, "float mode needs as much")
raises(function() p:verify_estimate{mode = "fast"} end, "exact' or 'float")
p:apply("mlp.fc2", {["in"] = {"S(0)S(1)", "RS(0)"}, out = {"S(0)R"}})
local okv = p:validate()
check(not okv, "an all-reduce-free row-parallel output is invalid")
p:undo()

-- a manual region: its Lua body traced at lowering, verified against the
-- ops it replaces; a wrong body not equal, a body that breaks out of its
-- sandbox refused with its line
local m = assert(plan.load("examples/mlp-manual.plan.yaml"))
local meq, mtext = m:verify()
check(meq == true and mtext:find("1 all_reduce"), "manual region verifies")
local mpath = os.tmpname()
check(m:lower(mpath) == true, "a manual region lowers to a file")
local mfile = assert(io.open(mpath)):read("a")
os.remove(mpath)
check(mfile:find("regions:\n", 1, true) and
      mfile:find("{bind: \"y@0\", from: ", 1, true),
      "the lowered file carries the region's traced ops")
local src = assert(io.open("examples/mlp-manual.plan.yaml")):read("a")
local wrong = assert(plan.parse(src:gsub("gelu%(h%)", "relu(h)"), "w.yaml",
                                "examples"))
local weq, _, winfo = wrong:verify()
check(weq == false and winfo.first_op == "mlp.fc2", "wrong region caught")
local esc = assert(plan.parse(src:gsub("gelu%(h%)", "os.exit(1)"), "e.yaml",
                              "examples"))
local nv, emsg = esc:verify()
check(nv == nil and emsg:find("e.yaml:45: manual region") and
      emsg:find("global 'os'"), "sandbox: no os")

-- placements, saving, text round trip
check(p:placement("w1") == "RS(1)", "storage placement")
p:set_placement("w1", "RR")
check(p:placement("w1") == "RR", "set_placement")
p:set_placement("w1", "RS(1)")
check(p:hash() == h0, "placement restored")
local path = os.tmpname()
check(p:save(path, {self_contained = true}), "save")
local q = assert(plan.load(path))
check(q:hash() == h0, "saved plan has the same hash")
os.remove(path)
local t = p:text()
check(t:find("strategies:", 1, true), "text")

-- closing: methods refuse a closed plan, closing twice is harmless
do
  local r <close> = assert(plan.load("examples/mlp-megatron.plan.yaml"))
  check(r:hash() == h0, "to-be-closed plan")
end
q:close()
q:close()
raises(function() q:hash() end, "the plan is closed")
check(tostring(q) == "plan (closed)", "closed __tostring")

-- an empty plan for a program on a mesh
local e = assert(plan.new{program = "examples/mlp-program.yaml", mesh = "dp=2,tp=4"})
check(#e:mesh() == 2 and e:mesh()[2].size == 4, "plan.new mesh")
check(e:strategy("mlp.fc1") == nil, "no decisions yet")
local bm, bmm = plan.new{program = "examples/mlp-program.yaml", mesh = "dp=2]}\nx: 1"}
check(bm == nil and bmm:find("is not NAME=SIZE", 1, true), "plan.new refuses YAML in a mesh")
-- a mistake in the arguments is the caller's, at its line: never at the
-- text plan.new makes of them
local bx, bxm = plan.new{program = "examples/mlp-program.yaml", mesh = "dp=x"}
check(bx == nil and bxm:find("^[^:]*test_module%.lua:%d+: plan%.new: .*'dp=x'"),
      "a bad size is found at the caller's line: " .. tostring(bxm))
check(not bxm:find("<plan.new>", 1, true), "not at generated text: " .. bxm)
local np, nmsg = plan.new{program = 'no"such\nprogram.yaml', mesh = "dp=2"}
check(np == nil and nmsg:find("^[^:]*test_module%.lua:%d+: plan%.new: .*program"),
      "plan.new with a strange path, at the caller's line: " .. tostring(nmsg))
check(not nmsg:find("<plan.new>", 1, true), "not at generated text: " .. nmsg)

-- a MILP through CBC
local r = assert(plan.milp{obj = {0, 0, 5}, integer = {true, true, false},
  rows = {{cols = {1}, coefs = {1}, sense = "=", rhs = 1},
          {cols = {2}, coefs = {1}, sense = "=", rhs = 1},
          {cols = {3, 1, 2}, coefs = {1, -1, -1}, sense = ">=", rhs = -1}}})
check(r.optimal and r.objective == 5 and r.x[3] == 1, "milp")
local inf, infm = plan.milp{obj = {1}, rows = {{cols = {1}, coefs = {1}, sense = ">=", rhs = 2}}}
check(inf == nil and infm:find("infeasible"), "milp infeasible")
raises(function() plan.milp{obj = {1}, rows = {{cols = {2}, coefs = {1}}}} end, "no column 2")
-- random small 0/1 programs, every sense and columns in many rows (the
-- matrix is loaded at once, by columns): CBC's optimum equals the best of
-- all 2^n assignments
do
  local seed = 99
  local function rnd(k) seed = (seed * 1103515245 + 12345) % 2147483648; return seed % k + 1 end
  for _ = 1, 25 do
    local n, obj, rows = rnd(5) + 3, {}, {}
    for j = 1, n do obj[j] = rnd(21) - 11 end
    for _ = 1, rnd(6) do
      local cols, coefs = {}, {}
      for j = 1, n do
        if rnd(2) == 1 then cols[#cols + 1] = j; coefs[#coefs + 1] = rnd(7) - 4 end
      end
      local sense = ({"<=", ">=", "="})[rnd(3)]
      rows[#rows + 1] = {cols = cols, coefs = coefs, sense = sense, rhs = rnd(5) - 3}
    end
    local best
    for bits = 0, (1 << n) - 1 do
      local fits = true
      for _, row in ipairs(rows) do
        local v = 0
        for k, j in ipairs(row.cols) do v = v + row.coefs[k] * ((bits >> (j - 1)) & 1) end
        if (row.sense == "<=" and v > row.rhs) or (row.sense == ">=" and v < row.rhs) or
           (row.sense == "=" and v ~= row.rhs) then fits = false; break end
      end
      if fits then
        local c = 0
        for j = 1, n do c = c + obj[j] * ((bits >> (j - 1)) & 1) end
        if best == nil or c < best then best = c end
      end
    end
    local got, why = plan.milp{obj = obj, rows = rows}
    if best == nil then
      check(got == nil and why:find("infeasible"), "an infeasible program solved")
    else
      check(got and got.optimal and math.abs(got.objective - best) < 1e-9,
            ("milp %s, enumeration %s"):format(got and got.objective or why, best))
    end
  end
end
-- the device order
local d = assert(plan.load("examples/mlp-megatron.plan.yaml"))
local devs = d:devices()
check(#devs == 4 and devs[1] == 0 and devs[4] == 3, "iota devices")
check(d:set_devices({0, 2, 1, 3}), "set_devices")
check(d:devices()[2] == 2, "the order set")
local okd, errd = d:set_devices({0, 0, 1, 2})
check(okd == nil and errd:find("permutation"), "not a permutation")
raises(function() d:set_devices({0, 1}) end, "2 devices for a mesh of 4")
d:set_devices(nil)
check(d:hash() == h0, "iota again")
print("test_module: ok")
