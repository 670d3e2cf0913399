-- Shard ratios by linear programming, and pipeline stages sized to their
-- devices, for meshes of unlike devices (docs/heterogeneous.md). Loaded
-- with the strategies' util as its argument; returns a table:
--
--   ratios.solve(p, opts)   the LP's weights for every mesh axis that
--                           shards work, for the strategies p holds
--   ratios.apply(p, sol)    writes them into p's placements (S(d|w...))
--   ratios.stage_cut(p, opts) the layers of each pipeline stage
--
-- The LP (HAP's, per mesh axis a of size n): the shares x_0..x_{n-1} of
-- the work a splits (sum 1) and the step T,
--
--   minimise T   subject to   T >= C_r * x_{i(r)} + F_r   for every rank r
--
-- where i(r) is r's index on a, C_r the seconds r's device spends on the
-- ops a splits were it to do all of that work (n times its even piece),
-- and F_r the rest of its step: the ops a leaves whole and the
-- communication, which the shares do not change. The axes are solved one
-- at a time, each with the others' shares fixed, twice over (the LP of
-- one axis is exact; the product of shares over several axes is not
-- linear). The shares are rounded to integer weights in units of
-- 1/granularity (default 16), every weight at least 1, reduced by their
-- gcd.
local plan = require "plan"
local util = ...

local M = {}

-- The hardware profile's name of each physical device (1-based by device
-- id): opts.device_hardware (a list of names, for what-if questions), the
-- mesh's per-device hardware, or opts.hardware (nil: the plan's own) for
-- every device.
function M.hardware(p, opts)
  local n = #p:devices()
  local names = {}
  if opts.device_hardware then
    if #opts.device_hardware ~= n then
      error(("ratios: %d device profiles for %d devices"):format(
            #opts.device_hardware, n), 0)
    end
    for d = 1, n do names[d] = opts.device_hardware[d] end
    return names
  end
  local hw = p:device_hardware()
  for d = 1, n do names[d] = hw and hw[d].name or opts.hardware or false end
  return names
end

-- The seconds of op `name` under strategy s on a device of profile hw
-- (false: the plan's own): the one place the model asks for a device's
-- time. With `rank` (1-based, a rank whose device has profile hw in the
-- mesh's own per-device hardware) the per-device cost model answers: that
-- rank's own piece on its device's hardware and calibration (a profile
-- the plan itself gives figures for is priced with them); else a model
-- of the built-in profile hw for every device.
function M.op_seconds(p, name, s, hw, rank)
  if rank then return assert(p:cost_op_rank(name, s, rank)) end
  return assert(p:cost_op(name, s, hw or nil))
end

-- For each profile name, a rank (1-based) whose device has it, when the
-- names are the mesh's own per-device hardware (not a what-if list): the
-- per-device cost model then prices that profile (M.op_seconds).
local function representatives(p, opts, names)
  if opts.device_hardware or not p:device_hardware() then return {} end
  local rep = {}
  for r, dev in ipairs(p:devices()) do
    local h = names[dev + 1]
    if h and not rep[h] then rep[h] = r end
  end
  return rep
end

-- Whether strategy s splits the op's work along mesh axis a: some operand
-- is not replicated there (split, or a partial sum of split work).
local function splits(s, a)
  for _, side in ipairs{s["in"], s.out} do
    for _, pl in ipairs(side) do
      if util.entries(pl)[a] ~= "R" then return true end
    end
  end
  return false
end

-- The coordinates of every rank (0-based, per axis) and its device's
-- profile.
local function ranks(p, names)
  local mesh, devs = p:mesh(), p:devices()
  local out = {}
  for r = 0, #devs - 1 do
    local coord, x = {}, r
    for a = #mesh, 1, -1 do coord[a] = x % mesh[a].size; x = x // mesh[a].size end
    out[r + 1] = {coord = coord, hw = names[devs[r + 1] + 1]}
  end
  return out
end

-- The model of p's step per rank: every op's even-piece seconds on each
-- profile and the axes it splits; each profile's communication (the
-- modeled step less its compute, the part the shares leave alone).
function M.model(p, opts)
  local names = M.hardware(p, opts)
  local mesh = p:mesh()
  local profiles, seen = {}, {}
  for _, h in ipairs(names) do
    if not seen[h] then seen[h] = true; profiles[#profiles + 1] = h end
  end
  local rep = representatives(p, opts, names)
  local ops = {}
  for _, name in ipairs(p:ops()) do
    local s = p:strategy(name)
    if s then
      local o = {name = name, t = {}, split = {}}
      for a = 1, #mesh do o.split[a] = mesh[a].size > 1 and splits(s, a) end
      for _, h in ipairs(profiles) do
        o.t[h] = M.op_seconds(p, name, s, h, rep[h])
      end
      ops[#ops + 1] = o
    end
  end
  local comm = {}
  for _, h in ipairs(profiles) do
    local c = p:cost(h or nil)
    local compute = 0
    for _, o in ipairs(ops) do compute = compute + o.t[h] end
    comm[h] = c and math.max(0, c.step - compute) or 0
  end
  return {mesh = mesh, ops = ops, comm = comm, ranks = ranks(p, names),
          names = names}
end

-- Even shares: 1/n on every axis.
function M.even(model)
  local shares = {}
  for a, ax in ipairs(model.mesh) do
    shares[a] = {}
    for i = 1, ax.size do shares[a][i] = 1 / ax.size end
  end
  return shares
end

-- The seconds of rank r's step under shares, split as C_r * x + F_r for
-- axis a (a = nil: the total).
local function rank_time(model, shares, r, a)
  local rk = model.ranks[r]
  local c, f = 0, model.comm[rk.hw]
  for _, o in ipairs(model.ops) do
    local t = o.t[rk.hw]
    for b, ax in ipairs(model.mesh) do
      if o.split[b] and b ~= a then
        t = t * ax.size * shares[b][rk.coord[b] + 1]
      end
    end
    if a and o.split[a] then c = c + t * model.mesh[a].size else f = f + t end
  end
  return c, f
end

-- The modeled step under shares: the slowest rank's time.
function M.step(model, shares)
  local worst = 0
  for r = 1, #model.ranks do
    local _, f = rank_time(model, shares, r, nil)
    worst = math.max(worst, f)
  end
  return worst
end

-- Whether some op splits its work along axis a.
local function axis_splits(model, a)
  for _, o in ipairs(model.ops) do if o.split[a] then return true end end
  return false
end

-- The LP of axis a with the other axes' shares fixed: the continuous
-- shares (a list of n) and the LP's T.
function M.lp_axis(model, shares, a, seconds)
  local n = model.mesh[a].size
  -- columns: x_1..x_n, then T; in microseconds, as the ilp strategy
  -- prices (seconds-sized coefficients fall under the solver's tolerances)
  local obj, lower, upper, integer = {}, {}, {}, {}
  for i = 1, n + 1 do obj[i] = 0; lower[i] = 0; upper[i] = 1; integer[i] = false end
  obj[n + 1], upper[n + 1] = 1, 1e15
  local rows = {}
  local sum = {cols = {}, coefs = {}, sense = "=", rhs = 1}
  for i = 1, n do sum.cols[i] = i; sum.coefs[i] = 1 end
  rows[1] = sum
  for r = 1, #model.ranks do
    local c, f = rank_time(model, shares, r, a)
    local i = model.ranks[r].coord[a] + 1
    -- T - C_r x_i >= F_r
    rows[#rows + 1] = {cols = {n + 1, i}, coefs = {1, -c * 1e6}, sense = ">=",
                       rhs = f * 1e6}
  end
  local res, err = plan.milp{obj = obj, lower = lower, upper = upper,
                             integer = integer, rows = rows,
                             seconds = seconds or 60}
  if not res then error("ratios: " .. err, 0) end
  local x = {}
  for i = 1, n do x[i] = math.max(0, res.x[i]) end
  return x, res.x[n + 1] / 1e6
end

local function gcd(a, b)
  while b ~= 0 do a, b = b, a % b end
  return a
end

-- Shares rounded to positive integer weights summing to g (largest
-- remainders first; every weight at least 1), divided by their gcd.
function M.round(x, g)
  local n = #x
  if g < n then g = n end
  local w, rest, total = {}, {}, 0
  for i = 1, n do
    local v = x[i] * g
    w[i] = math.max(1, math.floor(v))
    rest[i] = {i = i, r = v - math.floor(v)}
    total = total + w[i]
  end
  table.sort(rest, function(u, v)
    if u.r ~= v.r then return u.r > v.r end
    return u.i < v.i
  end)
  local k = 1
  while total < g do
    w[rest[k].i] = w[rest[k].i] + 1; total = total + 1
    k = k % n + 1
  end
  while total > g do -- the floors of 1 pushed it over: take from the largest
    local big = 1
    for i = 2, n do if w[i] > w[big] then big = i end end
    w[big] = w[big] - 1; total = total - 1
  end
  local d = w[1]
  for i = 2, n do d = gcd(d, w[i]) end
  for i = 1, n do w[i] = w[i] // d end
  return w
end

-- The shares that integer weights w give.
local function shares_of(w)
  local s, total = {}, 0
  for _, v in ipairs(w) do total = total + v end
  for i, v in ipairs(w) do s[i] = v / total end
  return s
end

local function all_equal(w)
  for i = 2, #w do if w[i] ~= w[1] then return false end end
  return true
end

-- The LP's ratios for the strategies p holds: {axes = {[a] = {name,
-- weights, shares}} (only axes whose weights differ), even = the modeled
-- step with even pieces, step = with the rounded weights, lp = the last
-- LP's continuous optimum, model}. opts: hardware, device_hardware,
-- granularity (16), rounds (2), seconds (the solver's limit per LP).
function M.solve(p, opts)
  local model = M.model(p, opts)
  local g = tonumber(opts.granularity) or 16
  local shares = M.even(model)
  local even = M.step(model, shares)
  local lp_t = even
  local cont = {}
  for _ = 1, tonumber(opts.rounds) or 2 do
    for a, ax in ipairs(model.mesh) do
      if ax.size > 1 and axis_splits(model, a) then
        local x, t = M.lp_axis(model, shares, a, opts.seconds)
        cont[a], lp_t = x, t
        shares[a] = x
      end
    end
  end
  local sol = {axes = {}, even = even, lp = lp_t, model = model,
               continuous = cont}
  local rounded = M.even(model)
  for a, x in pairs(cont) do
    local w = M.round(x, g)
    if not all_equal(w) then
      sol.axes[a] = {name = model.mesh[a].name, weights = w, shares = shares_of(w)}
      rounded[a] = sol.axes[a].shares
    end
  end
  sol.step = M.step(model, rounded)
  return sol
end

-- Placement pl with weights w on the S entry of axis a ("S(0)R" ->
-- "S(0|3:1)R"); other entries as they are.
function M.with_ratios(pl, a, w)
  local e = util.entries(pl)
  local x = e[a]
  if x and x:match("^S%(") and not x:find("|", 1, true) then
    e[a] = x:sub(1, -2) .. "|" .. table.concat(w, ":") .. ")"
  end
  return table.concat(e)
end

-- Placement pl with every axis of sol's weights applied.
local function rewrite(pl, sol)
  for a, ax in pairs(sol.axes) do pl = M.with_ratios(pl, a, ax.weights) end
  return pl
end

-- Writes sol's weights into every strategy and leaf placement of p, and
-- into the list `placed` (tensor -> placement, as strategies return it)
-- when given. An axis whose ratios make the plan invalid (an op whose
-- rule cannot split unequally there) is taken back, with a note; returns
-- the axes kept.
function M.apply(p, sol, placed, opts)
  local before = {strategies = {}, leaves = {}}
  for _, name in ipairs(p:ops()) do before.strategies[name] = p:strategy(name) end
  local leaves = {}
  for _, name in ipairs(p:ops()) do
    for _, t in ipairs(p:op(name).inputs) do
      if not p:tensor(t).producer and not leaves[t] then
        leaves[t] = true; leaves[#leaves + 1] = t
      end
    end
  end
  for _, t in ipairs(leaves) do before.leaves[t] = p:placement(t) end
  local function write(s)
    for name, st in pairs(before.strategies) do
      if st and not p:pinned(name) then
        local new = {["in"] = {}, out = {}}
        for j, pl in ipairs(st["in"]) do new["in"][j] = rewrite(pl, s) end
        for k, pl in ipairs(st.out) do new.out[k] = rewrite(pl, s) end
        assert(p:apply(name, new))
      end
    end
    for _, t in ipairs(leaves) do
      local pl = before.leaves[t]
      if pl then assert(p:set_placement(t, rewrite(pl, s))) end
    end
  end
  write(sol)
  local ok, findings = p:validate()
  if not ok then
    util.note(opts or {}, "ratios: the LP's ratios make the plan invalid (",
              tostring(findings and findings[1]), "); even pieces kept")
    write({axes = {}})
    sol.axes, sol.step = {}, sol.even
  end
  if placed then
    for t, pl in pairs(placed) do placed[t] = rewrite(pl, sol) end
  end
  return sol.axes
end

-- The text of sol's ratios: "dp 3:1, tp 1:1" (or "even").
function M.describe(sol)
  local parts = {}
  for a = 1, #sol.model.mesh do
    local ax = sol.axes[a]
    if ax then parts[#parts + 1] = ax.name .. " " .. table.concat(ax.weights, ":") end
  end
  return #parts > 0 and table.concat(parts, ", ") or "even"
end

-- ---- pipeline stages sized to their devices ------------------------------

-- The cut of L layers (in order) into S contiguous stages, each at least
-- one layer: times[s][l] the seconds of layer l on stage s's devices,
-- bytes[l] its memory, cap[s] stage s's memory per device (0: no limit).
-- Minimises the slowest stage; ties keep the earlier cut. Returns the
-- number of layers of each stage and the slowest stage's seconds, or nil
-- and a message when no cut fits the memory.
function M.cut(times, bytes, cap)
  local S, L = #times, #bytes
  if L < S then return nil, ("%d layers for %d stages"):format(L, S) end
  -- best[s][l]: the least slowest-stage time of layers 1..l on stages 1..s
  local best, from = {}, {}
  best[0] = {[0] = 0}
  for s = 1, S do
    best[s], from[s] = {}, {}
    for l = s, L - (S - s) do
      local t, m = 0, 0
      for k = l, s, -1 do -- stage s holds layers k..l
        t, m = t + times[s][k], m + bytes[k]
        if cap[s] and cap[s] > 0 and m > cap[s] then break end
        local prev = best[s - 1][k - 1]
        if prev then
          local v = math.max(prev, t)
          if best[s][l] == nil or v < best[s][l] then
            best[s][l], from[s][l] = v, k
          end
        end
      end
    end
  end
  if not best[S][L] then
    return nil, "no cut of the layers fits the stages' memory"
  end
  local counts, l = {}, L
  for s = S, 1, -1 do
    local k = from[s][l]
    counts[s] = l - k + 1
    l = k - 1
  end
  return counts, best[S][L]
end

local dtype_bytes = {f64 = 8, f32 = 4, bf16 = 2, f16 = 2, i64 = 8, i32 = 4,
                     i8 = 1, u8 = 1, bool = 1}
M.dtype_bytes = dtype_bytes

-- The op names of each stage of a cut: counts[s] layers for stage s, the
-- layers segs ({first, last} into ops) in order.
function M.stage_ops(counts, segs, ops)
  local stages, l = {}, 1
  for s = 1, #counts do
    local list = {}
    for k = l, l + counts[s] - 1 do
      for i = segs[k].first, segs[k].last do list[#list + 1] = ops[i] end
    end
    stages[s] = list
    l = l + counts[s]
  end
  return stages
end

-- The stages of p's layers on the pipeline axis (opts.axis, default
-- "pp"), each stage on the devices of its index there: {counts = layers
-- per stage, stages = {{ops...}...}, seconds = the slowest stage, even =
-- the slowest stage of the even cut (nil when L does not divide)}. A
-- layer is one of util.layers' segments (at most two tensors live across
-- a cut); its seconds on a stage are its ops' under their strategies on
-- the stage's slowest profile; its memory, its parameters' bytes times
-- opts.state_factor (default 4: weight, gradient, two optimizer moments),
-- against the smallest device memory of the stage.
function M.stage_cut(p, opts)
  local axis = util.axis(p, opts.axis or "pp")
  if not axis then error("ratios: no mesh axis '" .. (opts.axis or "pp") .. "'", 0) end
  local names = M.hardware(p, opts)
  local rk = ranks(p, names)
  local S = p:mesh()[axis].size
  local stage_hw = {}
  for s = 1, S do stage_hw[s] = {} end
  for _, r in ipairs(rk) do
    local h = stage_hw[r.coord[axis] + 1]
    if not h[r.hw] then h[r.hw] = true; h[#h + 1] = r.hw end
  end
  local ops = p:ops()
  local info, last = {}, {}
  for i, name in ipairs(ops) do
    local op = p:op(name)
    info[i] = {op = op, list = {p:strategy(name)}}
    for _, t in ipairs(op.inputs) do last[t] = i end
  end
  local outputs = {}
  for _, t in ipairs(p:outputs()) do outputs[t] = true end
  local segs = util.layers(p, info, function(t, i)
    return (last[t] or 0) > i or outputs[t]
  end)
  local cache = {}
  local rep = representatives(p, opts, names)
  local function seconds(i, h)
    local key = i .. "@" .. tostring(h)
    if not cache[key] then
      local s = info[i].list[1]
      cache[key] = s and M.op_seconds(p, ops[i], s, h, rep[h]) or 0
    end
    return cache[key]
  end
  local times, bytes, cap = {}, {}, {}
  local factor = tonumber(opts.state_factor) or 4
  for s = 1, S do
    times[s] = {}
    cap[s] = 0
    for _, h in ipairs(stage_hw[s]) do
      local m = h and p:hardware_figure(h, "memory") or 0
      if m > 0 and (cap[s] == 0 or m < cap[s]) then cap[s] = m end
    end
  end
  for l, seg in ipairs(segs) do
    local b, seen = 0, {}
    for i = seg.first, seg.last do
      for _, t in ipairs(info[i].op.inputs) do
        local x = p:tensor(t)
        if x.role == "param" and not seen[t] then
          seen[t] = true
          local n = dtype_bytes[x.dtype] or 4
          for _, d in ipairs(x.shape) do n = n * d end
          b = b + n * factor
        end
      end
    end
    bytes[l] = b
    for s = 1, S do
      local worst = 0
      for _, h in ipairs(stage_hw[s]) do
        local t = 0
        for i = seg.first, seg.last do t = t + seconds(i, h) end
        worst = math.max(worst, t)
      end
      times[s][l] = worst
    end
  end
  local counts, worst = M.cut(times, bytes, cap)
  if not counts then error("ratios: " .. worst, 0) end
  local out = {counts = counts, seconds = worst,
               stages = M.stage_ops(counts, segs, ops)}
  if #segs % S == 0 then
    local per, ev = #segs // S, 0
    for s = 1, S do
      local t = 0
      for k = (s - 1) * per + 1, s * per do t = t + times[s][k] end
      ev = math.max(ev, t)
    end
    out.even = ev
  end
  return out
end

return M
