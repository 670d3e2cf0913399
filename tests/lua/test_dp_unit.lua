-- plan.dp_unit (lua/plan_dp.c), the dp strategy's inner loop, against a
-- plain Lua DP of the same definition on random units: every state made
-- from every state and strategy, the cheaper kept per live state, past
-- `limit` the cheapest (ties: the earlier made). The C unit leaves out
-- transitions dearer than the limit-th cheapest so far and prices each
-- (input, from, to) once; neither may change the result: the same final
-- states, costs and choices, for limits that cut and limits that do not.
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
print("test_dp_unit: ok (" .. cases .. " runs)")
