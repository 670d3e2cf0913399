-- greedy: ops in topological order; each takes the legal strategy with the
-- least modeled time, its own compute plus bringing its inputs from where
-- their producers left them. Ties keep the earlier strategy in the op's
-- canonical list, so the search is deterministic.
--
-- An op like one decided before (util.choice_key: the same structure, its
-- inputs standing where that one's stood) has the same strategies at the
-- same costs, so it takes the same one without pricing them again: a
-- repeated layer is priced once. The cost model keys calibrations on op
-- names, so the costs are compared first, of the all-R strategy and of
-- the one taken; where either differs the op is priced on its own.
-- opts.share == false (--no-share) prices every op.
local util = ...

return function(p, opts)
  local placed = {}
  local ops = p:ops()
  local hw = opts.hardware
  local progress = opts.progress or function() end
  local share, taken = opts.share ~= false, {}
  for i, name in ipairs(ops) do
    if i % 64 == 1 then progress("ops", i - 1, #ops) end
    local op = p:op(name)
    if not p:pinned(name) then
      local key = share and util.choice_key(p, name, op, placed)
      local t = key and taken[key]
      local best
      if t and util.step_cost(p, op, t.s, placed, hw) == t.cost and
         p:cost_op(name, t.all_r, hw) == t.all_r_cost then
        best = t.s
      else
        local list, best_cost = p:strategies(name), nil
        for _, s in ipairs(list) do
          local c = util.step_cost(p, op, s, placed, hw)
          if best_cost == nil or c < best_cost then best, best_cost = s, c end
        end
        if key and not t and best then
          taken[key] = {s = best, cost = best_cost, all_r = list[1],
                        all_r_cost = p:cost_op(name, list[1], hw)}
        end
      end
      p:apply(name, best)
    end
    util.record(p, op, p:strategy(name), placed)
  end
  progress("ops", #ops, #ops)
  return placed
end
