-- Repeated-layer sharing (util.repeats, util.share_lists): the layers of a
-- 3-layer transformer are found as copies of one layer; dp makes the
-- same plan with and without the sharing (the same hash, so every layer
-- placed alike, and the same modeled objective), and the sharing lists
-- and prices each layer's strategies once (fewer cost evaluations). (ilp
-- is left out: CBC does not prove this program's optimum in seconds.)
local plan = require "plan"

local function check(cond, what) if not cond then error(what, 2) end end

local util = assert(load(plan.source("strategies/util"), "=util"))()
local function strategy(name)
  return assert(load(plan.source("strategies/" .. name), "=" .. name))(util)
end

local PROGRAM = "tests/lua/data/layers-program.yaml"

local function search(mesh, name, share)
  local p = assert(plan.new{program = PROGRAM, mesh = mesh})
  local before = p:stats()
  local steps = 0
  local opts = {outputs = p:outputs(), hardware = "h100", share = share,
                progress = function() steps = steps + 1 end}
  local placed = strategy(name)(p, opts)
  util.deliver_outputs(p, placed, p:outputs())
  local ok, findings = p:validate()
  check(ok, name .. ": invalid plan: " .. tostring(findings[1]))
  local st = p:stats()
  local evals = st.cost_op + st.cost_redist - before.cost_op - before.cost_redist
  return p, evals, steps
end

local function objective(p)
  local choice = {}
  for i, op in ipairs(p:ops()) do choice[i] = p:strategy(op) end
  return util.objective(p, p:ops(), choice, p:outputs(), "h100")
end

-- the liveness the strategies use: t is read after op i, or an output
local function liveness(p, ops)
  local last, outputs = {}, {}
  for i, name in ipairs(ops) do
    for _, t in ipairs(p:op(name).inputs) do last[t] = i end
  end
  for _, t in ipairs(p:outputs()) do outputs[t] = true end
  return function(t, i) return (last[t] or 0) > i or outputs[t] end
end

-- the layers: three copies of one period, found before any strategy
do
  local p = assert(plan.new{program = PROGRAM, mesh = "dp=2,tp=2"})
  local ops = p:ops()
  local alive = liveness(p, ops)
  local units = util.repeats(p, ops, alive)
  local big, period = 0, nil
  for _, u in ipairs(units) do
    if u.last > u.first then
      big = big + 1
      local n = u.last - u.first + 1
      check(period == nil or period == n, "copies of different lengths")
      period = n
      check(p:op(ops[u.first]).name:match("^layers%.%d+%.ln1$"),
            "a copy starts at " .. ops[u.first])
    end
  end
  check(big == 3, "found " .. big .. " copies of a layer, not 3")
  check(units[2].sig == units[3].sig, "the first two copies differ")
  local info = util.share_lists(p, ops, units, select(2, util.repeats(p, ops,
    alive)), "h100", true)
  check(info[units[2].first].list == info[units[3].first].list,
        "the copies' strategy lists are not shared")
end

-- the pieces dp solves: every op once, in order; each layer cut alike,
-- with the residual stream passed over its attention (a piece that reads
-- neither the layer's input nor writes the residual add)
do
  local p = assert(plan.new{program = PROGRAM, mesh = "dp=2,tp=2"})
  local ops = p:ops()
  local alive = liveness(p, ops)
  local layers, opv, key = util.repeats(p, ops, alive)
  local pieces = util.split_units(layers, opv, key, alive, 8)
  local nextop = 1
  for _, u in ipairs(pieces) do
    check(u.first == nextop and u.last >= u.first, "pieces out of order at " .. nextop)
    nextop = u.last + 1
  end
  check(nextop == #ops + 1, "the pieces miss ops")
  check(#pieces > #layers, "no layer was cut")
  local index = {}
  for i, name in ipairs(ops) do index[name] = i end
  local by_layer = {}
  for _, u in ipairs(pieces) do
    local k = ops[u.first]:match("^layers%.(%d+)%.")
    if k then
      by_layer[k] = by_layer[k] or {}
      local rel = u.first - index[("layers.%s.ln1"):format(k)]
      table.insert(by_layer[k], rel .. ":" .. (u.last - u.first + 1))
    end
  end
  check(table.concat(by_layer["1"], " ") == table.concat(by_layer["2"], " "),
        "layers 1 and 2 cut differently")
  local sigs = {}
  for _, u in ipairs(pieces) do sigs[u.sig] = (sigs[u.sig] or 0) + 1 end
  local attn
  for _, u in ipairs(pieces) do
    if ops[u.first] == "layers.1.attn.q" then attn = u end
  end
  check(attn and attn.last - attn.first >= 8, "no attention piece in layer 1")
  check(sigs[attn.sig] >= 2, "the attention pieces are not alike")
  for t in pairs(attn.canon) do
    check(t ~= "layers.0.mlp.res.out" and t ~= "layers.1.attn.res.out",
          "the attention piece touches the residual stream (" .. t .. ")")
  end
  -- a gap longer than the program cuts nothing
  local whole = util.split_units(layers, opv, key, alive, #ops)
  check(#whole == #layers, "a piece without a long gap")
end

for _, mesh in ipairs{"dp=2,tp=2", "tp=4"} do
  for _, name in ipairs{"dp"} do
    local a, ea, steps = search(mesh, name, true)
    local b, eb = search(mesh, name, false)
    check(a:hash() == b:hash(), name .. " on " .. mesh ..
          ": another plan without the sharing")
    local oa, ob = objective(a), objective(b)
    check(math.abs(oa - ob) <= 1e-12 * ob, name .. ": objective " .. oa ..
          " with the sharing, " .. ob .. " without")
    check(ea < eb, ("%s on %s: %d cost evaluations with the sharing, %d " ..
                    "without"):format(name, mesh, ea, eb))
    check(steps > 0, name .. ": no progress reported")
    if name == "dp" then
      -- the same layer placed alike in its middle copies
      local ops = a:ops()
      local function layer(k)
        local t = {}
        for _, op in ipairs(ops) do
          local rest = op:match("^layers%." .. k .. "%.(.*)$")
          if rest then
            local s = a:strategy(op)
            t[rest] = table.concat(s["in"], ",") .. ">" .. table.concat(s.out, ",")
          end
        end
        return t
      end
      local l0, l1 = layer(0), layer(1)
      local n = 0
      for k, v in pairs(l1) do n = n + 1; check(l0[k] ~= nil, "missing " .. k); _ = v end
      check(n > 10, "layer 1 has " .. n .. " ops")
    end
  end
end
