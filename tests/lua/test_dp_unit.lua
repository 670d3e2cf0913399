-- plan.dp_unit (lua/plan_dp.c), the dp strategy's inner loop, against a
-- plain Lua DP of the same definition on random units: every state made
-- from every state and strategy, the cheaper kept per live state, past
-- `limit` the cheapest (ties: the earlier made). The C unit leaves out
-- transitions dearer than the limit-th cheapest so far, skips those a
-- lower bound puts past it, and prices each (input, from, to) once; none
-- may change the result: the same final states, costs and choices, for
-- limits that cut and limits that do not.
local plan = require "plan"

local function check(cond, what) if not cond then error(what, 2) end end

-- a small deterministic generator (no math.random state shared with
-- anything else)
local seed = 12345
local function rnd(n)
  seed = (seed * 1103515245 + 12345) % 2147483648
  return seed % n + 1
end
local function rnd_cost() return rnd(1000000) / 1e6 end

local function random_unit()
  local nentry = rnd(3)
  local ops, nb = {}, nentry
  for i = 1, rnd(6) + 2 do
    local nin, n = rnd(2), rnd(40) + 4
    local op = {nin = nin, nout = 1, cost = {}, sin = {}, sout = {},
                inpos = {}, src = {}}
    for s = 1, n do
      op.cost[s] = rnd_cost()
      for j = 1, nin do op.sin[(s - 1) * nin + j] = rnd(6) end
      op.sout[s] = rnd(6)
    end
    for j = 1, nin do op.inpos[j] = rnd(nb + 1) - 1 end -- 0: not live
    op.src[1] = -1 -- the output
    for k = 1, nb do
      if rnd(3) > 1 and #op.src < 4 then op.src[#op.src + 1] = k end
    end
    if rnd(2) == 1 then op.src[#op.src + 1] = -1001 end -- input 1, as read
    nb = #op.src
    ops[i] = op
  end
  return nentry, ops
end

local prices = {}
local function price(k, j, from, to)
  local key = k * 1000000 + j * 10000 + from * 100 + to
  local c = prices[key]
  if not c then c = rnd_cost(); prices[key] = c end
  return c
end

-- the definition, plainly
local function reference(entry, ops, limit)
  local states = {{cost = 0, arr = entry, choice = {}}}
  for i, op in ipairs(ops) do
    local by_key, made = {}, {}
    for _, st in ipairs(states) do
      for s = 1, #op.cost do
        local c = st.cost + op.cost[s]
        for j = 1, op.nin do
          local k = op.inpos[j]
          local want = op.sin[(s - 1) * op.nin + j]
          if k > 0 and st.arr[k] ~= want then c = c + price(i, j, st.arr[k], want) end
        end
        local arr = {}
        for m, code in ipairs(op.src) do
          if code > 0 then arr[m] = st.arr[code]
          elseif code > -1000 then arr[m] = op.sout[(s - 1) * op.nout - code]
          else arr[m] = op.sin[(s - 1) * op.nin + (-code - 1000)] end
        end
        local key = table.concat(arr, ",")
        local old = by_key[key]
        if not old then
          local choice = {table.unpack(st.choice)}
          choice[i] = s
          old = {cost = c, arr = arr, choice = choice, q = #made + 1}
          by_key[key] = old
          made[#made + 1] = old
        elseif c < old.cost then
          local choice = {table.unpack(st.choice)}
          choice[i] = s
          old.cost, old.choice = c, choice
        end
      end
    end
    if #made > limit then
      table.sort(made, function(x, y)
        if x.cost ~= y.cost then return x.cost < y.cost end
        return x.q < y.q
      end)
      for r = #made, limit + 1, -1 do made[r] = nil end
    end
    states = made
  end
  return states
end

local cases = 0
for _ = 1, 200 do
  local nentry, ops = random_unit()
  local entry = {}
  for k = 1, nentry do entry[k] = rnd(6) end
  local u = plan.dp_unit{nentry = nentry, ops = ops}
  for _, limit in ipairs{1, 3, 8, 100000} do
    local got = u:run(entry, limit, price)
    local want = reference(entry, ops, limit)
    check(#got == #want, ("limit %d: %d states, want %d"):format(limit, #got, #want))
    for r, w in ipairs(want) do
      local g = got[r]
      check(math.abs(g.cost - w.cost) <= 1e-12 * (1 + w.cost),
            ("limit %d state %d: cost %.17g, want %.17g"):format(limit, r, g.cost, w.cost))
      check(table.concat(g.arr, ",") == table.concat(w.arr, ","),
            ("limit %d state %d: placements differ"):format(limit, r))
      check(table.concat(g.choice, ",") == table.concat(w.choice, ","),
            ("limit %d state %d: choices %s, want %s"):format(
              limit, r, table.concat(g.choice, ","), table.concat(w.choice, ",")))
    end
    cases = cases + 1
  end
end
check(cases == 800, "every case ran")

-- The same loop with the bound as the unit keeps it (made past 4 * limit
-- states, the limit-th cheapest so far, refreshed as the states double;
-- a transition dearer is not made and the step is cut): the unit skips
-- strategies a lower bound puts past it and takes the rest in their own
-- order, which must give these states exactly (costs to the bit, their
-- order, choices, the exact flag), ties included. Costs and prices here
-- come from a few values, so ties are everywhere.
local function bounded(entry, ops, limit, prices_of)
  local states, exact = {{cost = 0, arr = entry, choice = {}}}, true
  for i, op in ipairs(ops) do
    local by_key, made = {}, {}
    local bound, next_check, pruned = math.huge, 4 * limit, false
    for _, st in ipairs(states) do
      for s = 1, #op.cost do
        local c = st.cost + op.cost[s]
        for j = 1, op.nin do
          if c > bound then break end
          local k = op.inpos[j]
          local want = op.sin[(s - 1) * op.nin + j]
          if k > 0 and st.arr[k] ~= want then c = c + prices_of(i, j, st.arr[k], want) end
        end
        if c > bound then
          pruned = true
        else
          local arr = {}
          for m, code in ipairs(op.src) do
            if code > 0 then arr[m] = st.arr[code]
            elseif code > -1000 then arr[m] = op.sout[(s - 1) * op.nout - code]
            else arr[m] = op.sin[(s - 1) * op.nin + (-code - 1000)] end
          end
          local key = table.concat(arr, ",")
          local old = by_key[key]
          if not old then
            local choice = {table.unpack(st.choice)}
            choice[i] = s
            old = {cost = c, arr = arr, choice = choice, q = #made + 1}
            by_key[key] = old
            made[#made + 1] = old
            if #made >= next_check then
              local costs = {}
              for r, m in ipairs(made) do costs[r] = m.cost end
              table.sort(costs)
              bound = costs[limit]
              next_check = next_check * 2
            end
          elseif c < old.cost then
            local choice = {table.unpack(st.choice)}
            choice[i] = s
            old.cost, old.choice = c, choice
          end
        end
      end
    end
    if #made > limit or pruned then
      exact = false
      table.sort(made, function(x, y)
        if x.cost ~= y.cost then return x.cost < y.cost end
        return x.q < y.q
      end)
      for r = #made, limit + 1, -1 do made[r] = nil end
    end
    states = made
  end
  return states, exact
end

local tie_prices = {}
local function tie_price(k, j, from, to)
  local key = k * 1000000 + j * 10000 + from * 100 + to
  local c = tie_prices[key]
  if not c then c = (rnd(4) - 1) / 8; tie_prices[key] = c end
  return c
end

local tied, cut = 0, 0
for _ = 1, 60 do
  local nentry, ops = random_unit()
  for _, op in ipairs(ops) do
    -- more strategies, costs of a few values: ties and a bound that bites
    local n = rnd(60) + 20
    op.cost, op.sin, op.sout = {}, {}, {}
    for s = 1, n do
      op.cost[s] = (rnd(5) - 1) / 4
      for j = 1, op.nin do op.sin[(s - 1) * op.nin + j] = rnd(5) end
      op.sout[s] = rnd(5)
    end
  end
  local entry = {}
  for k = 1, nentry do entry[k] = rnd(5) end
  local u = plan.dp_unit{nentry = nentry, ops = ops}
  for _, limit in ipairs{1, 2, 8, 40} do
    local got, got_exact = u:run(entry, limit, tie_price)
    local want, want_exact = bounded(entry, ops, limit, tie_price)
    check(got_exact == want_exact, ("tied, limit %d: exact %s, want %s"):format(
      limit, tostring(got_exact), tostring(want_exact)))
    check(#got == #want, ("tied, limit %d: %d states, want %d"):format(limit, #got, #want))
    for r, w in ipairs(want) do
      local g = got[r]
      check(g.cost == w.cost, ("tied, limit %d state %d: cost %.17g, want %.17g"):format(
        limit, r, g.cost, w.cost))
      check(table.concat(g.arr, ",") == table.concat(w.arr, ","),
            ("tied, limit %d state %d: placements differ"):format(limit, r))
      check(table.concat(g.choice, ",") == table.concat(w.choice, ","),
            ("tied, limit %d state %d: choices %s, want %s"):format(
              limit, r, table.concat(g.choice, ","), table.concat(w.choice, ",")))
    end
    tied = tied + 1
    if not want_exact then cut = cut + 1 end
  end
end
check(tied == 240, "every tied case ran")
check(cut >= tied // 2 and cut < tied, cut .. " of the " .. tied .. " tied runs cut")

-- The redistribution pricer (p:redist_pricer) against p:cost_redist on
-- the placements a program's strategies use: the same seconds, pairs
-- priced once per class (role, dtype and shape) and counted as cost
-- evaluations, tensors of one class sharing it.
do
  local p = assert(plan.new{program = "tests/lua/data/layers-program.yaml",
                            mesh = "dp=2,tp=2,cp=2"})
  local pl_of, id_of, by_tensor = {}, {}, {}
  local function id(pl)
    if not id_of[pl] then pl_of[#pl_of + 1] = pl; id_of[pl] = #pl_of end
    return id_of[pl]
  end
  local pricer = p:redist_pricer(pl_of, "h100")
  local names = {}
  for _, op in ipairs(p:ops()) do
    local o = p:op(op)
    for _, s in ipairs(p:strategies(op)) do
      for j, t in ipairs(o.inputs) do
        local l = by_tensor[t]
        if not l then l = {}; by_tensor[t] = l; names[#names + 1] = t end
        if not l[s["in"][j]] then l[s["in"][j]] = true; l[#l + 1] = s["in"][j] end
      end
    end
  end
  table.sort(names)
  local key_class, pairs_seen, priced, asked, direct = {}, {}, 0, 0, 0
  local before = p:stats().cost_redist
  for _, t in ipairs(names) do
    local x = p:tensor(t)
    local key = x.role .. " " .. x.dtype .. "[" .. table.concat(x.shape, ",") .. "]"
    local c = pricer:class(t)
    check(key_class[key] == nil or key_class[key] == c,
          t .. ": another class than its shape's first tensor")
    for k, other in pairs(key_class) do
      check(k == key or other ~= c, t .. ": the class of another shape")
    end
    key_class[key] = c
    local l = by_tensor[t]
    for _ = 1, 40 do
      local a, b = l[rnd(#l)], l[rnd(#l)]
      local got = pricer:price(c, id(a), id(b))
      local want = 0
      if a ~= b then
        want = p:cost_redist(t, a, b, "h100") or 0
        direct = direct + 1
      end
      check(got == want, ("%s %s -> %s: %.17g, p:cost_redist %.17g"):format(
        t, a, b, got, want))
      asked = asked + 1
      local pk = c .. "|" .. a .. "|" .. b
      if a ~= b and not pairs_seen[pk] then pairs_seen[pk] = true; priced = priced + 1 end
    end
  end
  local st = pricer:stats()
  check(st.priced == priced, ("priced %d pairs, %d distinct"):format(st.priced, priced))
  check(priced < asked, "no pair asked twice")
  -- p:cost_redist's own calls and the pricer's, one per distinct pair
  check(p:stats().cost_redist - before == direct + priced,
        ("%d cost evaluations for %d calls and %d pairs"):format(
          p:stats().cost_redist - before, direct, priced))
  check(pcall(pricer.price, pricer, 99, 1, 2) == false, "a class that is not refused")
end
print("test_dp_unit: ok (" .. cases .. " runs, " .. tied .. " with ties, " .. cut .. " cut)")
