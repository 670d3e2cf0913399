-- beam: like greedy, but keeps the `width` cheapest partial plans (default
-- 8) after each op instead of one, each a strategy per op so far with its
-- accumulated modeled time. Ties are broken by the order partial plans were
-- made in (canonical: earlier beams, earlier strategies first).
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
  for oi, name in ipairs(ops) do
    progress("ops", oi - 1, #ops)
    local op = p:op(name)
    local list = p:pinned(name) and {p:strategy(name)} or p:strategies(name)
    local next_beams = {}
    for bi, b in ipairs(beams) do
      for si, s in ipairs(list) do
        local c = b.cost + util.step_cost(p, op, s, b.placed, opts.hardware)
        next_beams[#next_beams + 1] = {cost = c, parent = b, s = s,
                                       key = bi * 100000 + si}
      end
    end
    table.sort(next_beams, function(x, y)
      if x.cost ~= y.cost then return x.cost < y.cost end
      return x.key < y.key
    end)
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
