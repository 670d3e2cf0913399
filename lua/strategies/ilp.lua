-- ilp: exact for the searches' additive objective (util.objective) by an
-- integer linear program solved by CBC (plan.milp), as AutoParallel
-- solves its sharding problem.
--
--   x[i][s] = 1 when op i takes strategy s      sum over s of x[i][s] = 1
--   z[e][a][b] >= X(e, a) + Y(e, b) - 1, z >= 0  (a redistribution a -> b)
--
-- For each input e of an op (a tensor t): X(e, a) sums the x of the
-- strategies that leave t at placement a (its producer's, or for a leaf
-- read again, the strategies of its first consumer that store it at a),
-- Y(e, b) sums the x of the consumer's strategies that want it at b. A
-- leaf's first read costs nothing (it is stored where wanted). Minimised:
-- the ops' compute, each z times the time of its redistribution, and the
-- delivery of the outputs. `seconds` bounds the solver (default 60); a
-- note says when the optimum was not proven. A program past the solver's
-- 10,000,000 columns is refused before anything is priced (util.refuse:
-- cannot run here), with the count.
--
-- Per distinct layer (AutoParallel's clustering of repeated subgraphs):
-- the layers are cut as for dp (util.layers), and the ops of a layer that
-- repeats an earlier one share that layer's x columns, their costs (and
-- those of their inputs' redistributions) added to the shared columns. So
-- the program has the size of its distinct layers, not of the model, and
-- its optimum is exact among the plans whose identical layers take
-- identical strategies (every built-in recipe is one); dp, exact without
-- that condition, says what it would cost to drop it.
local plan = require "plan"
local util = ...

local MAX_COLUMNS = 10000000 -- plan.milp's

return function(p, opts)
  local hw = opts.hardware
  local ops = p:ops()
  local producer, first_use = {}, {}
  local obj, rows = {}, {}
  local function col(c) obj[#obj + 1] = c; return #obj end
  local last, outputs = {}, {}
  for i, name in ipairs(ops) do
    for _, t in ipairs(p:op(name).inputs) do last[t] = i end
  end
  for _, t in ipairs(opts.outputs) do outputs[t] = true end
  local share = opts.share ~= false
  local progress = opts.progress or function() end
  local units, opv = util.repeats(p, ops, function(t, i)
    return (last[t] or 0) > i or outputs[t]
  end)
  progress("layers", 0, 0)
  local info = util.share_lists(p, ops, units, opv, hw, share)
  -- rep[i]: the op whose columns op i shares (itself, or its counterpart
  -- in the first copy of its layer)
  local rep = {}
  for _, u in ipairs(units) do
    for i = u.first, u.last do rep[i] = u.rep.first + (i - u.first) end
  end
  for i, name in ipairs(ops) do
    local op, list = info[i].op, info[i].list
    if rep[i] == i then
      local xs = {}
      for si, s in ipairs(list) do
        local c = info[i].cost[si]
        if c == nil then
          c = p:cost_op(name, s, hw)
          info[i].cost[si] = c
        end
        xs[si] = col(c)
      end
      info[i].x = xs
      local ones = {}
      for si = 1, #list do ones[si] = 1 end
      rows[#rows + 1] = {cols = xs, coefs = ones, sense = "=", rhs = 1}
    else
      -- the same list and costs as its counterpart (util.share_lists)
      info[i].x = info[rep[i]].x
      local cost = info[rep[i]].cost
      for si = 1, #list do
        local x = info[i].x[si]
        obj[x] = obj[x] + cost[si]
      end
    end
    for k, t in ipairs(op.outputs) do producer[t] = {i, k} end
  end
  -- a redistribution's time, by the tensor's role, dtype and shape
  local shape_keys, redist_memo = {}, {}
  local function redist(t, a, b)
    local k = shape_keys[t]
    if not k then
      local x = p:tensor(t)
      k = x.role .. " " .. x.dtype .. "[" .. table.concat(x.shape, ",") .. "]"
      shape_keys[t] = k
    end
    k = k .. "|" .. a .. "|" .. b
    local c = redist_memo[k]
    if c == nil then
      c = p:cost_redist(t, a, b, hw)
      redist_memo[k] = c
    end
    return c
  end
  -- the x columns of op i grouped by a placement: pick(s) gives it
  local function groups(i, pick)
    local g, order = {}, {}
    for si, s in ipairs(info[i].list) do
      local pl = pick(s)
      if not g[pl] then g[pl] = {}; order[#order + 1] = pl end
      table.insert(g[pl], info[i].x[si])
    end
    return g, order
  end
  -- an edge repeated by a repeated layer (the same columns on both ends)
  -- adds its cost to the first one's z columns
  -- The edges first, to size the program before pricing anything: past
  -- plan.milp's columns the search is refused at once (cannot run here).
  local edge_list, fresh_keys, columns = {}, {}, #obj
  for i = 1, #ops do
    local op = info[i].op
    for j, t in ipairs(op.inputs) do
      local from, forder, key
      local pr = producer[t]
      if pr then
        from, forder = groups(pr[1], function(s) return s.out[pr[2]] end)
        key = "o" .. rep[pr[1]] .. ":" .. pr[2]
      elseif first_use[t] then
        local f = first_use[t]
        from, forder = groups(f[1], function(s) return s["in"][f[2]] end)
        key = "i" .. rep[f[1]] .. ":" .. f[2]
      else
        first_use[t] = {i, j}
      end
      if from then
        key = key .. ">" .. rep[i] .. ":" .. j
        local to, torder = groups(i, function(s) return s["in"][j] end)
        edge_list[#edge_list + 1] = {t = t, key = key, from = from, forder = forder,
                                     to = to, torder = torder}
        if not fresh_keys[key] then
          fresh_keys[key] = true
          columns = columns + #forder * #torder
        end
      end
    end
  end
  if columns > MAX_COLUMNS then
    util.refuse(("ilp: the program would have up to %d columns, more than " ..
                 "the %d the solver takes (%d ops; a column per strategy " ..
                 "and per pair of placements of each edge); use dp or beam, " ..
                 "or a mesh with fewer axes"):format(columns, MAX_COLUMNS, #ops))
  end
  local edges = {}
  for _, e in ipairs(edge_list) do
    local t, key, from, forder, to, torder =
      e.t, e.key, e.from, e.forder, e.to, e.torder
    local zs = edges[key]
    local fresh = zs == nil
    if fresh then zs = {}; edges[key] = zs end
    for _, a in ipairs(forder) do
      for _, b in ipairs(torder) do
        local c = a ~= b and redist(t, a, b) or 0
        local zk = a .. ">" .. b
        if c > 0 and not fresh and zs[zk] then
          obj[zs[zk]] = obj[zs[zk]] + c
        elseif c > 0 then
          local z = col(c)
          zs[zk] = z
          local cols, coefs = {z}, {1}
          for _, x in ipairs(from[a]) do cols[#cols + 1] = x; coefs[#coefs + 1] = -1 end
          for _, x in ipairs(to[b]) do cols[#cols + 1] = x; coefs[#coefs + 1] = -1 end
          rows[#rows + 1] = {cols = cols, coefs = coefs, sense = ">=", rhs = -1}
        end
      end
    end
  end
  -- delivering the outputs: a cost on the producer's strategies
  for _, t in ipairs(opts.outputs) do
    local i, k = producer[t][1], producer[t][2]
    for si, s in ipairs(info[i].list) do
      local from = s.out[k]
      local to = util.delivery(from)
      if to ~= from then
        local x = info[i].x[si]
        obj[x] = obj[x] + p:cost_redist(t, from, to, hw)
      end
    end
  end
  -- in microseconds: seconds-sized coefficients fall under the solver's
  -- tolerances
  local n = #obj
  for c = 1, n do obj[c] = obj[c] * 1e6 end
  local lower, upper, integer = {}, {}, {}
  for c = 1, n do lower[c] = 0; upper[c] = 1; integer[c] = false end
  for i = 1, #ops do
    for _, x in ipairs(info[i].x) do integer[x] = true end
  end
  -- the first incumbent: the megatron recipe's choices for each op's first
  -- occurrence (the recipe treats identical layers alike, but for the
  -- first layer's input), so that a solver stopped by its time limit
  -- still returns a plan near the recipe; the z columns follow
  local start = {}
  local megatron = assert(load(assert(plan.source("strategies/megatron")),
                               "=strategies/megatron.lua", "t"))(util)
  if pcall(megatron, p, opts) then
    local function key(st) return table.concat(st["in"], ",") .. ">" .. table.concat(st.out, ",") end
    for i, name in ipairs(ops) do
      if rep[i] == i then -- a tied op takes its first occurrence's
        local want = key(p:strategy(name))
        for k, x in ipairs(info[i].x) do
          start[x] = key(info[i].list[k]) == want and 1 or 0
        end
      end
    end
  end
  progress("solve", 0, 0)
  local r, err = plan.milp{obj = obj, lower = lower, upper = upper,
                          integer = integer, rows = rows, start = start,
                          seconds = tonumber(opts.seconds) or 60}
  if not r then error("ilp: " .. err, 0) end
  if not r.optimal then
    util.note(opts, "ilp: note: the solver stopped before proving the optimum")
  end
  local placed = {}
  for i, name in ipairs(ops) do
    local best, bv
    for si, x in ipairs(info[i].x) do
      if bv == nil or r.x[x] > bv then best, bv = si, r.x[x] end
    end
    local s = info[i].list[best]
    if not p:pinned(name) then p:apply(name, s) end
    util.record(p, info[i].op, s, placed)
  end
  return placed
end
