-- dp: exact for the searches' additive objective (util.objective), by
-- dynamic programming over the ops in topological order.
--
-- The state after an op is where every live tensor stands (each tensor
-- produced or placed and still to be read, with its placement): two
-- partial plans that leave the same state have the same best future, so
-- only the cheaper is kept (ties: the earlier). A transition costs the
-- op's compute under a strategy plus bringing its inputs from where the
-- state has them.
--
-- Layers solved once (AutoParallel's observation): the ops are cut where
-- few tensors are live (between the layers of a model, the residual
-- stream), and each segment between cuts gets a structural signature (op
-- kinds, shapes, strategy lists, wiring, which tensors outlive it). The
-- segment's own DP, from one entry state to every exit state, is solved
-- once per (signature, entry state) and reused for every identical layer;
-- the layers are then chained by a DP over the states at the cuts. Both
-- levels are exact, so the result is the optimum of the whole objective.
--
-- Past `limit` states (default 64) after an op or at a cut, only the
-- cheapest are kept and the result may not be optimal (a note says so):
-- `--limit 16` makes a fast, bounded search of a large model.
local util = ...

return function(p, opts)
  local max_states = tonumber(opts.limit) or 64
  local hw = opts.hardware
  local ops = p:ops()
  local info, last, outputs = {}, {}, {}
  for i, name in ipairs(ops) do
    local op = p:op(name)
    local list = p:pinned(name) and {p:strategy(name)} or p:strategies(name)
    info[i] = {op = op, list = list, cost = {}}
    for _, t in ipairs(op.inputs) do last[t] = i end
  end
  for _, t in ipairs(opts.outputs) do outputs[t] = true end
  local function alive_after(t, i) return (last[t] or 0) > i or outputs[t] end

  -- costs, each computed once
  local redist_memo = {}
  local function redist(t, from, to)
    if from == to then return 0 end
    local k = t .. "|" .. from .. "|" .. to
    local c = redist_memo[k]
    if c == nil then
      c = p:cost_redist(t, from, to, hw)
      redist_memo[k] = c
    end
    return c
  end
  local function op_cost(i, si)
    local c = info[i].cost[si]
    if c == nil then
      c = p:cost_op(ops[i], info[i].list[si], hw)
      info[i].cost[si] = c
    end
    return c
  end

  local function state_key(placed)
    local names = {}
    for t in pairs(placed) do names[#names + 1] = t end
    table.sort(names) -- never pairs order
    local parts = {}
    for k, t in ipairs(names) do parts[k] = t .. "=" .. placed[t] end
    return table.concat(parts, ";"), names
  end

  local exact = true

  -- The states made by a step, in the order they were first made; past
  -- max_states, only the cheapest (ties: the earlier).
  local function kept(by_key, order)
    local states = {}
    for r, key in ipairs(order) do
      states[r] = by_key[key]
      states[r].rank = r
    end
    if #states > max_states then
      table.sort(states, function(x, y)
        if x.cost ~= y.cost then return x.cost < y.cost end
        return x.rank < y.rank
      end)
      for r = #states, max_states + 1, -1 do states[r] = nil end
      exact = false
    end
    return states
  end

  -- The DP over a segment's ops from one entry state. Within a segment
  -- the live set after each op is the same for every state (liveness
  -- depends only on the position), so a state is an array of placements
  -- aligned with that set, and its key is their concatenation.
  -- touched[t]: the segment reads or writes t. Returns the states after
  -- the segment's last op, with their live tensors' names.
  local function run(seg, touched, entry)
    -- the live lists, and where each entry of the next one comes from
    local before = {}
    for t, _ in pairs(entry) do before[#before + 1] = t end
    table.sort(before)
    local arr = {}
    for k, t in ipairs(before) do arr[k] = entry[t] end
    local states = {{cost = 0, arr = arr}}
    local live = before
    for i = seg.first, seg.last do
      local op, list = info[i].op, info[i].list
      local pos = {}
      for k, t in ipairs(live) do pos[t] = k end
      local nlive, src = {}, {}
      local seen = {}
      for k, t in ipairs(op.outputs) do
        if alive_after(t, i) and not seen[t] then
          nlive[#nlive + 1] = t; src[#nlive] = {"out", k}; seen[t] = true
        end
      end
      for k, t in ipairs(live) do
        if alive_after(t, i) and not seen[t] then
          nlive[#nlive + 1] = t; src[#nlive] = {"prev", k}; seen[t] = true
        end
      end
      for j, t in ipairs(op.inputs) do
        if touched[t] and alive_after(t, i) and not seen[t] then
          nlive[#nlive + 1] = t; src[#nlive] = {"in", j}; seen[t] = true
        end
      end
      local inpos = {}
      for j, t in ipairs(op.inputs) do inpos[j] = pos[t] end
      local by_key, order = {}, {}
      local nn = #nlive
      for _, st in ipairs(states) do
        local sarr = st.arr
        for si, s in ipairs(list) do
          local c = st.cost + op_cost(i, si)
          local sin = s["in"]
          for j, t in ipairs(op.inputs) do
            local k = inpos[j]
            if k then c = c + redist(t, sarr[k], sin[j]) end
          end
          local na = {}
          for k = 1, nn do
            local r = src[k]
            if r[1] == "out" then na[k] = s.out[r[2]]
            elseif r[1] == "prev" then na[k] = sarr[r[2]]
            else na[k] = sin[r[2]] end
          end
          local key = table.concat(na, ";")
          local old = by_key[key]
          if old == nil or c < old.cost then
            if old == nil then order[#order + 1] = key end
            by_key[key] = {cost = c, arr = na, back = st, si = si, op = i}
          end
        end
      end
      states = kept(by_key, order)
      live = nlive
    end
    return states, live
  end

  -- the layers: cut where few tensors are live, each with its structural
  -- signature (util.layers)
  local segments = util.layers(p, info, alive_after)

  -- the segment's DP from one entry state, in canonical names, memoized
  local memo = {}
  local function solve(seg, entry)
    local placed = {}
    for c, pl in pairs(entry) do placed[seg.actual[c]] = pl end
    local ekey = state_key(entry)
    local m = memo[seg.sig]
    if not m then m = {}; memo[seg.sig] = m end
    if m[ekey] then return m[ekey] end
    local finals, live = run(seg, seg.canon, placed)
    local results = {}
    for r, st in ipairs(finals) do
      local choice, s = {}, st
      while s.op do
        choice[s.op - seg.first + 1] = s.si
        s = s.back
      end
      local exit = {}
      for k, t in ipairs(live) do exit[seg.canon[t]] = st.arr[k] end
      results[r] = {cost = st.cost, exit = exit, choice = choice}
    end
    m[ekey] = results
    return results
  end

  -- the chain over the cuts
  local states = {{cost = 0, placed = {}}}
  for _, seg in ipairs(segments) do
    local by_key, order = {}, {}
    for _, st in ipairs(states) do
      local entry, pass = {}, {}
      for t, pl in pairs(st.placed) do
        local c = seg.canon[t]
        if c then entry[c] = pl else pass[t] = pl end
      end
      for _, r in ipairs(solve(seg, entry)) do
        local placed = {}
        for t, pl in pairs(pass) do
          if alive_after(t, seg.last) then placed[t] = pl end
        end
        for c, pl in pairs(r.exit) do placed[seg.actual[c]] = pl end
        local c = st.cost + r.cost
        local key = state_key(placed)
        local old = by_key[key]
        if old == nil or c < old.cost then
          if old == nil then order[#order + 1] = key end
          by_key[key] = {cost = c, placed = placed, back = st, seg = seg, choice = r.choice}
        end
      end
    end
    states = kept(by_key, order)
  end

  -- the delivery of the outputs ends every path
  local best, best_cost
  for _, st in ipairs(states) do
    local c = st.cost
    for _, t in ipairs(opts.outputs) do
      local from = st.placed[t]
      c = c + redist(t, from, util.delivery(from))
    end
    if best_cost == nil or c < best_cost then best, best_cost = st, c end
  end
  if not exact then
    util.note(opts, "dp: note: more than ", max_states,
              " states after an op or at a cut; the cheapest were ",
              "kept, so the plan may not be optimal")
  end
  local choice = {}
  while best.seg do
    for k, si in pairs(best.choice) do choice[best.seg.first + k - 1] = si end
    best = best.back
  end
  local placed = {}
  for i, name in ipairs(ops) do
    local s = info[i].list[choice[i]]
    if not p:pinned(name) then p:apply(name, s) end
    util.record(p, info[i].op, s, placed)
  end
  return placed
end
