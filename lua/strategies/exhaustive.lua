-- exhaustive: every combination of the ops' legal strategies, each priced
-- by the searches' additive objective (util.objective: compute,
-- redistributions, delivery); the cheapest wins, ties to the earlier
-- combination. For small graphs only (at most `limit` combinations,
-- default 100000): the oracle the exact strategies are tested against.
local util = ...

return function(p, opts)
  local limit = tonumber(opts.limit) or 100000
  local ops, lists, total = p:ops(), {}, 1
  for i, name in ipairs(ops) do
    lists[i] = p:pinned(name) and {p:strategy(name)} or p:strategies(name)
    total = total * #lists[i]
    if total > limit then
      util.refuse(("exhaustive: more than %d combinations (op '%s'); use " ..
                   "another strategy"):format(limit, name))
    end
  end
  local idx, best, best_cost, choice = {}, nil, nil, {}
  for i = 1, #ops do idx[i] = 1 end
  for _ = 1, total do
    for i = 1, #ops do choice[i] = lists[i][idx[i]] end
    local c = util.objective(p, ops, choice, opts.outputs, opts.hardware)
    if best_cost == nil or c < best_cost then
      best, best_cost = {table.unpack(idx)}, c
    end
    local i = #ops -- the next combination: the last op varies fastest
    while i >= 1 do
      idx[i] = idx[i] + 1
      if idx[i] <= #lists[i] then break end
      idx[i] = 1
      i = i - 1
    end
  end
  local placed = {}
  for i, name in ipairs(ops) do
    local s = lists[i][best[i]]
    if not p:pinned(name) then p:apply(name, s) end
    util.record(p, p:op(name), s, placed)
  end
  return placed
end
