-- greedy: ops in topological order; each takes the legal strategy with the
-- least modeled time, its own compute plus bringing its inputs from where
-- their producers left them. Ties keep the earlier strategy in the op's
-- canonical list, so the search is deterministic.
local util = ...

return function(p, opts)
  local placed = {}
  local ops = p:ops()
  local progress = opts.progress or function() end
  for i, name in ipairs(ops) do
    if i % 64 == 1 then progress("ops", i - 1, #ops) end
    local op = p:op(name)
    if not p:pinned(name) then
      local best, best_cost
      for _, s in ipairs(p:strategies(name)) do
        local c = util.step_cost(p, op, s, placed, opts.hardware)
        if best_cost == nil or c < best_cost then best, best_cost = s, c end
      end
      p:apply(name, best)
    end
    util.record(p, op, p:strategy(name), placed)
  end
  progress("ops", #ops, #ops)
  return placed
end
