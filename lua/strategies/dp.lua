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
-- Layers solved once (AutoParallel's observation): the repeated layers
-- are found by structure before any strategy is listed (util.repeats:
-- the period of the longest run of ops whose structure and wiring
-- repeat), and every other op is a unit of its own. A unit's own DP, from
-- one entry state (where the tensors it reads from before it stand) to
-- every exit state, is solved once per (layer, entry state) and reused
-- for every copy of the layer, whose strategies are listed and priced
-- once (util.share_lists); the units are then chained by a DP over the
-- states between them. A layer is cut further where a tensor passes
-- untouched over 8 ops or more (util.split_units: the residual stream of
-- a pre-norm block, read by the norm and again by the residual add), so
-- the attention between is solved once per placement of what it reads,
-- whatever the residual's placement, which the chain carries past it.
-- Both levels are exact, so the result is the
-- optimum of the whole objective, the same plan as without the sharing
-- (opts.share == false: every unit solved and priced on its own).
--
-- Past `limit` states (default 64) after an op or between units, only the
-- cheapest are kept and the result may not be optimal (a note says so):
-- `--limit 16` makes a fast, bounded search of a large model.
local plan = require "plan"
local util = ...

return function(p, opts)
  local max_states = tonumber(opts.limit) or 64
  local hw = opts.hardware
  local ops = p:ops()
  local last, outputs = {}, {}
  for i, name in ipairs(ops) do
    for _, t in ipairs(p:op(name).inputs) do last[t] = i end
  end
  for _, t in ipairs(opts.outputs) do outputs[t] = true end
  local function alive_after(t, i) return (last[t] or 0) > i or outputs[t] end
  local layers, opv, key = util.repeats(p, ops, alive_after)
  local segments = util.split_units(layers, opv, key, alive_after, 8)
  local info = util.share_lists(p, ops, segments, opv, hw, opts.share ~= false)
  local progress = opts.progress or function() end

  -- costs, each computed once
  local redist_memo = {}
  local function redist(t, from, to, name)
    if from == to then return 0 end
    local k = (name or t) .. "|" .. from .. "|" .. to
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
  local function by_rank(x, y)
    if x.cost ~= y.cost then return x.cost < y.cost end
    return x.rank < y.rank
  end
  -- the k-th smallest cost of the states made
  local function kth_cost(made, k)
    local costs = {}
    for q, st in ipairs(made) do costs[q] = st.cost end
    table.sort(costs)
    return costs[k]
  end
  local function kept(states)
    for r, st in ipairs(states) do st.rank = r end
    if #states > max_states then
      -- those below the max_states-th cost, then the earliest made at it
      local t = kth_cost(states, max_states)
      local room = max_states
      for _, st in ipairs(states) do
        if st.cost < t then room = room - 1 end
      end
      local keep = {}
      for _, st in ipairs(states) do
        if st.cost < t or (st.cost == t and room > 0) then
          if st.cost == t then room = room - 1 end
          keep[#keep + 1] = st
        end
      end
      table.sort(keep, by_rank)
      states = keep
      exact = false
    end
    return states
  end

  -- placements as the integer ids of plan.dp_run
  local id_of, pl_of = {}, {}
  -- the units' redistributions, priced in C on these ids: memoized by
  -- the tensor's role, dtype and shape (all a redistribution's time
  -- depends on), each placement parsed once
  local pricer = p:redist_pricer(pl_of, hw)
  local class_of = {}
  local function class(t)
    local c = class_of[t]
    if not c then c = pricer:class(t); class_of[t] = c end
    return c
  end
  local function id(pl)
    local v = id_of[pl]
    if not v then
      v = #pl_of + 1
      pl_of[v], id_of[pl] = pl, v
    end
    return v
  end
  -- an op's strategies as ids and costs, once per (shared) list
  local arrays_of = {}
  local function arrays(i)
    local list = info[i].list
    local a = arrays_of[list]
    if not a then
      local nin, nout = #info[i].op.inputs, #info[i].op.outputs
      local cost, sin, sout = {}, {}, {}
      for si, s in ipairs(list) do
        cost[si] = op_cost(i, si)
        for j = 1, nin do sin[(si - 1) * nin + j] = id(s["in"][j]) end
        for k = 1, nout do sout[(si - 1) * nout + k] = id(s.out[k]) end
      end
      a = {cost = cost, sin = sin, sout = sout, nin = nin, nout = nout}
      arrays_of[list] = a
    end
    return a
  end

  -- The DP over a segment's ops from one entry state (plan.dp_run).
  -- Within a segment the live set after each op is the same for every
  -- state (liveness depends only on the position), so a state is an
  -- array of placements aligned with that set. touched[t]: the segment's
  -- canonical name of t, a tensor it reads or writes. Returns the states
  -- after the segment's last op ({cost, arr, choice}), with their live
  -- tensors' names.
  local units = {}
  local function run(seg, touched, entry)
    -- the live lists, and where each entry of the next one comes from
    local before = {}
    for t, _ in pairs(entry) do before[#before + 1] = t end
    table.sort(before, function(x, y) return touched[x] < touched[y] end)
    local arr, layout = {}, {}
    for k, t in ipairs(before) do
      arr[k] = id(entry[t])
      layout[k] = touched[t]
    end
    -- the compiled unit: one per (class, the tensors the entry places)
    local ukey = seg.class .. ":" .. table.concat(layout, ",")
    local cu = units[ukey]
    local live = before
    if cu then
      for i = seg.first, seg.last do
        local op, nlive, seen = info[i].op, {}, {}
        for _, t in ipairs(op.outputs) do
          if alive_after(t, i) and not seen[t] then nlive[#nlive + 1] = t; seen[t] = true end
        end
        for _, t in ipairs(live) do
          if alive_after(t, i) and not seen[t] then nlive[#nlive + 1] = t; seen[t] = true end
        end
        for _, t in ipairs(op.inputs) do
          if touched[t] and alive_after(t, i) and not seen[t] then
            nlive[#nlive + 1] = t; seen[t] = true
          end
        end
        live = nlive
      end
    else
      local steps = {}
      for i = seg.first, seg.last do
        local op = info[i].op
        local pos = {}
        for k, t in ipairs(live) do pos[t] = k end
        local nlive, src, seen = {}, {}, {}
        for k, t in ipairs(op.outputs) do
          if alive_after(t, i) and not seen[t] then
            nlive[#nlive + 1] = t; src[#nlive] = -k; seen[t] = true
          end
        end
        for k, t in ipairs(live) do
          if alive_after(t, i) and not seen[t] then
            nlive[#nlive + 1] = t; src[#nlive] = k; seen[t] = true
          end
        end
        for j, t in ipairs(op.inputs) do
          if touched[t] and alive_after(t, i) and not seen[t] then
            nlive[#nlive + 1] = t; src[#nlive] = -1000 - j; seen[t] = true
          end
        end
        local inpos, cls = {}, {}
        for j, t in ipairs(op.inputs) do
          inpos[j] = pos[t] or 0
          cls[j] = class(t)
        end
        local a = arrays(i)
        steps[#steps + 1] = {cost = a.cost, sin = a.sin, sout = a.sout,
                             nin = a.nin, nout = a.nout, inpos = inpos, src = src,
                             cls = cls}
        live = nlive
      end
      cu = {unit = plan.dp_unit{nentry = #arr, ops = steps}}
      units[ukey] = cu
    end
    -- the unit was compiled on the first segment of its class: its op k
    -- is that segment's, whose tensors have this one's shapes (classes)
    local finals, ok = cu.unit:run(arr, max_states, pricer)
    if not ok then exact = false end
    return finals, live
  end

  -- the segment's DP from one entry state, in canonical names, memoized;
  -- each result's key is its exit placements in the order of their
  -- canonical names (the same names for every result of a class)
  local memo = {}
  local function solve(seg, ekey, ents, from)
    local m = memo[seg.class]
    if not m then m = {}; memo[seg.class] = m end
    if m[ekey] then return m[ekey] end
    local placed = {}
    for _, t in ipairs(ents) do placed[t] = from[t] end
    local finals, live = run(seg, seg.canon, placed)
    local results = {}
    local enames
    for r, st in ipairs(finals) do
      local exit = {}
      for k, t in ipairs(live) do exit[seg.canon[t]] = pl_of[st.arr[k]] end
      if not enames then enames = select(2, state_key(exit)) end
      local parts = {}
      for k, c in ipairs(enames) do parts[k] = exit[c] end
      results[r] = {cost = st.cost, exit = exit, choice = st.choice,
                    key = table.concat(parts, ";")}
    end
    -- the results by cost (ties: by number), for the chain's bound
    local order = {}
    for r = 1, #results do order[r] = r end
    table.sort(order, function(x, y)
      local a, b = results[x].cost, results[y].cost
      if a ~= b then return a < b end
      return x < y
    end)
    results.order = order
    m[ekey] = results
    return results
  end

  -- the chain over the cuts. After a segment every state places the same
  -- tensors (liveness depends on the position alone): those the segment
  -- does not touch, passed on from the state before, and the segment's
  -- exit. A state's key is the passed placements in the order of their
  -- names, then its exit's key; where each tensor stands is made only
  -- for the states kept. Once more than max_states states are made, a
  -- pair dearer than the max_states-th cheapest so far is not looked at
  -- (as in plan.dp_run: costs only fall and states are only added, so it
  -- could never be kept; the bound is refreshed as the states double).
  local states = {{cost = 0, placed = {}}}
  for u, seg in ipairs(segments) do
    progress("units", u - 1, #segments)
    -- every state places the same tensors here: those the segment reads
    -- (its entry, in the order of their canonical names) and those it
    -- passes on, in the order of their names
    local ents, pnames, ehead = {}, {}, {}
    for t in pairs(states[1].placed) do
      if seg.canon[t] then
        ents[#ents + 1] = t
      elseif alive_after(t, seg.last) then
        pnames[#pnames + 1] = t
      end
    end
    table.sort(ents, function(x, y) return seg.canon[x] < seg.canon[y] end)
    table.sort(pnames) -- never pairs order
    for k, t in ipairs(ents) do ehead[k] = seg.canon[t] .. "=" end
    -- the states made, by passed key then exit key (no string made per
    -- pair), and in the order they were first made
    local by_key, made = {}, {}
    local bound, next_check = math.huge, 4 * max_states
    -- the keys' parts: as many as ents and pnames for every state
    local eparts, pparts, within = {}, {}, {}
    for _, st in ipairs(states) do
      local placed = st.placed
      for k, t in ipairs(ents) do eparts[k] = ehead[k] .. placed[t] end
      local results = solve(seg, table.concat(eparts, ";"), ents, placed)
      -- the results within the bound as the state begins, taken in their
      -- own order (so the states are made as by the loop over all)
      local base, order, n = st.cost, results.order, 0
      while n < #order and base + results[order[n + 1]].cost <= bound do
        n = n + 1
        within[n] = order[n]
      end
      if n > 0 then
        for k = #within, n + 1, -1 do within[k] = nil end
        if n == #order then
          for k = 1, n do within[k] = k end
        elseif n > 1 then
          table.sort(within)
        end
        for k, t in ipairs(pnames) do pparts[k] = placed[t] end
        local pkey = table.concat(pparts, ";")
        local row = by_key[pkey]
        if not row then row = {}; by_key[pkey] = row end
        for k = 1, n do
          local r = results[within[k]]
          local c = base + r.cost
          if c <= bound then
            local old = row[r.key]
            if old == nil then
              old = {cost = c, exit = r.exit, back = st, seg = seg,
                     choice = r.choice}
              row[r.key] = old
              made[#made + 1] = old
              if #made >= next_check then
                bound = kth_cost(made, max_states)
                next_check = 2 * next_check
              end
            elseif c < old.cost then
              old.cost, old.exit, old.back, old.choice = c, r.exit, st, r.choice
            end
          end
        end
      end
    end
    states = kept(made)
    for _, st in ipairs(states) do
      local placed, from = {}, st.back.placed
      for _, t in ipairs(pnames) do placed[t] = from[t] end
      for c, pl in pairs(st.exit) do placed[seg.actual[c]] = pl end
      st.placed, st.exit = placed, nil
    end
  end
  progress("units", #segments, #segments)

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
