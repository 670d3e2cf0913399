-- beam: like greedy, but keeps the `width` cheapest partial plans (default
-- 8) after each op instead of one, each a strategy per op so far with its
-- accumulated modeled time. Ties are broken by the order partial plans were
-- made in (canonical: earlier beams, earlier strategies first).
--
-- Repeated layers are priced once: ops with one p:op_key share their
-- strategy list, and the costs of an op's strategies from where a partial
-- plan left its inputs (util.choice_key) are kept and given to every
-- later partial plan and op with that key, once the costs of the all-R
-- strategy and of the cheapest are found equal (the cost model keys
-- calibrations on names). opts.share == false (--no-share) prices all.
local util = ...

local function copy(t)
  local c = {}
  for k, v in pairs(t) do c[k] = v end -- a copy: the order does not matter
  return c
end

return function(p, opts)
  local width = tonumber(opts.width) or 8
  local ops = p:ops()
  local beams = {{cost = 0, placed = {}, choice = {}}}
  local progress = opts.progress or function() end
  local hw, share = opts.hardware, opts.share ~= false
  local lists, priced = {}, {} -- by p:op_key; by util.choice_key
  for oi, name in ipairs(ops) do
    progress("ops", oi - 1, #ops)
    local op = p:op(name)
    local pinned = p:pinned(name)
    local okey = share and not pinned and p:op_key(name)
    local list = pinned and {p:strategy(name)} or (okey and lists[okey])
    if not list then
      list = p:strategies(name)
      if okey then lists[okey] = list end
    end
    local all_r = okey and list[1] and p:cost_op(name, list[1], hw)
    -- the seconds of each strategy of list from where b left the inputs
    local function costs(b)
      local key = all_r and util.choice_key(p, name, op, b.placed)
      local v = key and priced[key]
      if v and v.all_r == all_r and
         util.step_cost(p, op, list[v.best], b.placed, hw) == v[v.best] then
        return v
      end
      v = {}
      for si, s in ipairs(list) do
        v[si] = util.step_cost(p, op, s, b.placed, hw)
        if not v.best or v[si] < v[v.best] then v.best = si end
      end
      v.all_r = all_r
      if key and not priced[key] then priced[key] = v end
      return v
    end
    -- the width cheapest extensions (ties: the earlier made), kept in
    -- order as they come: what sorting them all and taking the first gave
    local next_beams = {}
    for bi, b in ipairs(beams) do
      local v = costs(b)
      for si = 1, #list do
        local c, k = b.cost + v[si], bi * 100000 + si
        local n = #next_beams
        local last = next_beams[n]
        if n < width or c < last.cost or (c == last.cost and k < last.key) then
          local at = n < width and n + 1 or n
          while at > 1 do
            local y = next_beams[at - 1]
            if not (c < y.cost or (c == y.cost and k < y.key)) then break end
            next_beams[at] = y
            at = at - 1
          end
          next_beams[at] = {cost = c, parent = b, s = list[si], key = k}
        end
      end
    end
    beams = {}
    for i = 1, math.min(width, #next_beams) do
      local nb = next_beams[i]
      local placed = copy(nb.parent.placed)
      for j, t in ipairs(op.inputs) do
        if placed[t] == nil then placed[t] = nb.s["in"][j] end
      end
      for k, t in ipairs(op.outputs) do placed[t] = nb.s.out[k] end
      local choice = copy(nb.parent.choice)
      choice[name] = nb.s
      beams[i] = {cost = nb.cost, placed = placed, choice = choice}
    end
  end
  local best, placed = beams[1], {}
  for _, name in ipairs(ops) do
    local op = p:op(name)
    if not p:pinned(name) then p:apply(name, best.choice[name]) end
    util.record(p, op, p:strategy(name), placed)
  end
  return placed
end
