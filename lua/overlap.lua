-- The overlap search (docs/training-and-pipelines.md, "Searching the
-- overlap"): per collective of ONE repeated layer, its decomposition
-- (1, 2 or 4 chunks) and its start and wait points, as a small
-- resource-constrained scheduling problem solved by CBC (plan.milp); the
-- layer's answer applied to every copy of the layer; the plan's
-- `overlap:` section written.
--
-- The problem, on the plan's lowered program without overlap (p:simulate):
-- each collective chain c (the steps of one redistribution) may start
-- before any op of its window (after its input is made, at most `window`
-- ops before its first reader) and be waited before a later one. It has
-- D(c, k) seconds of work in k chunks (every chunk pays its latency; a
-- chain over two links pipelines: its longest step plus the others / k).
-- y(c, t) of it is done under op t of its window; what is left, e(c), is
-- exposed. An op t gives its link at most its own time: summed over the
-- collectives on one link under the ops of one position in the layer
-- (every copy of the layer runs the same schedule, so a collective of
-- layer i started under layer i - 1's op competes with layer i - 1's own
-- collectives there), y <= the op's time. Minimise the sum of e(c), then
-- (a little) chunks, early starts and early waits. Solved for a few
-- windows; each answer priced by the stream simulation, the least kept.
local plan = require "plan"
local util = ...

local M = {}

local EPS = 1e-3 -- microseconds of objective per chunk or op of slack

local function same_origin(a, b)
  return a.kind == "collective" and b.kind == "collective" and
         a.origin_op == b.origin_op and a.origin_operand == b.origin_operand and
         a.grad_of == b.grad_of and a.param == b.param
end

-- The collective chains of a simulation's steps that an entry can select.
local function chains_of(steps)
  local out, i = {}, 1
  while i <= #steps do
    local s = steps[i]
    if s.kind == "collective" then
      local j = i
      while j < #steps and same_origin(steps[j + 1], s) do j = j + 1 end
      local c = {first = i, last = j, ready = s.ready, reader = #steps + 1,
                 origin_op = s.origin_op, operand = s.origin_operand,
                 grad_of = s.grad_of, chunkable = s.chunkable}
      local secs, link, top = {0, 0, 0}, nil, -1
      local per = {}
      for q = i, j do
        local st = steps[q]
        if st.reader < c.reader then c.reader = st.reader end
        per[#per + 1] = st.chunk_seconds
        if st.seconds > top then top, link = st.seconds, st.link end
      end
      -- D(c, k): the longest step's k chunks plus the others' / k
      for ki, k in ipairs({1, 2, 4}) do
        local sum, max = 0, 0
        for _, cs in ipairs(per) do
          sum = sum + cs[ki]
          if cs[ki] > max then max = cs[ki] end
        end
        secs[ki] = k == 1 and sum or max + (sum - max) / k
      end
      c.seconds, c.link = secs, link
      if (c.grad_of ~= "" or c.origin_op ~= "") and top > 0 and
         link ~= "local" then
        out[#out + 1] = c
      end
      i = j + 1
    else
      i = i + 1
    end
  end
  return out
end

-- The repeated layer: each forward op's copy (1..copies) and position in
-- the layer's class with the most copies, from util.repeats.
local function layers(p)
  local ops = p:ops()
  local last, outputs = {}, {}
  for i, name in ipairs(ops) do
    for _, t in ipairs(p:op(name).inputs) do last[t] = i end
  end
  for _, t in ipairs(p:outputs()) do outputs[t] = true end
  local function alive_after(t, i) return (last[t] or 0) > i or outputs[t] end
  local units = util.repeats(p, ops, alive_after)
  local count, best = {}, nil
  for _, u in ipairs(units) do
    if u.last > u.first then -- a layer, not an op of its own
      count[u.sig] = (count[u.sig] or 0) + 1
      if count[u.sig] >= 2 and (not best or count[u.sig] > count[best]) then
        best = u.sig
      end
    end
  end
  local where, names, copies = {}, {}, 0
  if best then
    for _, u in ipairs(units) do
      if u.sig == best then
        copies = copies + 1
        names[copies] = {}
        for i = u.first, u.last do
          where[ops[i]] = {copy = copies, pos = tostring(i - u.first)}
          names[copies][tostring(i - u.first)] = ops[i]
        end
      end
    end
  end
  return where, names, copies
end

-- Where a lowered op sits: {copy, key} (key: its position in the layer,
-- with a backward op's part), or a key of its own outside the layer.
local function locate(where, name)
  local base, part = name:match("^grad/(.+)/([^/]+)$")
  local w = where[base or name]
  if not w then return {key = "=" .. name} end
  return {copy = w.copy, key = w.pos .. (part and "/" .. part or "")}
end

-- The op named by key in copy q (nil when there is no such copy).
local function op_at(names, q, key)
  local pos, part = key:match("^([^/]*)/?(.*)$")
  local f = names[q] and names[q][pos]
  if not f then return nil end
  return part ~= "" and "grad/" .. f .. "/" .. part or f
end

-- A chain's identity in its layer: what made it, by position.
local function chain_id(c, steps, where)
  if c.grad_of ~= "" then
    -- by the op that makes the gradient
    local st = steps[c.ready]
    if not st or st.kind ~= "op" then return nil, "" end
    local w = locate(where, st.name)
    return w.copy, "g|" .. w.key
  end
  local w = locate(where, c.origin_op)
  return w.copy, "i|" .. w.key .. "|" .. c.operand
end

-- Builds and solves the scheduling problem of the chains cs of one copy;
-- returns per chain {k, a, w} (a: op step the start precedes; w: op step
-- the wait precedes, or nil: the first reader) and the model's exposure.
local function solve(cs, steps, opsteps, keyof, window, seconds)
  local obj, lower, upper, integer, rows = {}, {}, {}, {}, {}
  local function col(c, lo, hi, int)
    obj[#obj + 1] = c
    lower[#lower + 1] = lo
    upper[#upper + 1] = hi
    integer[#integer + 1] = int
    return #obj
  end
  local US = 1e6 -- the problem in microseconds
  local cap = {} -- [link .. key] = capacity
  local use = {} -- [link .. key] = {cols}
  local vars = {}
  for ci, c in ipairs(cs) do
    -- the window: op steps after its input is made, before its reader
    local ops = {}
    for _, t in ipairs(opsteps) do
      if t > c.ready and t < c.reader then ops[#ops + 1] = t end
    end
    -- at most `window` of them: the last before the reader, or (no
    -- reader: a gradient's sync, waited at the end) the first after the
    -- input
    if c.reader > #steps then
      while #ops > window do ops[#ops] = nil end
    else
      while #ops > window do table.remove(ops, 1) end
    end
    local v = {ops = ops, u = {}, x = {}, vw = {}, y = {}}
    vars[ci] = v
    local ks = {}
    for _, k in ipairs(c.chunkable) do
      if k <= 4 then ks[#ks + 1] = k end
    end
    local urow = {cols = {}, coefs = {}, sense = "=", rhs = 1}
    local work = {cols = {}, coefs = {}, sense = "=", rhs = 0}
    for _, k in ipairs(ks) do
      local ki = k == 1 and 1 or k == 2 and 2 or 3
      local j = col(EPS * (k - 1), 0, 1, true)
      v.u[#v.u + 1] = {k = k, col = j}
      urow.cols[#urow.cols + 1] = j
      urow.coefs[#urow.coefs + 1] = 1
      work.cols[#work.cols + 1] = j
      work.coefs[#work.coefs + 1] = -c.seconds[ki] * US
    end
    rows[#rows + 1] = urow
    local n = #ops
    -- starts: before op ops[a] (a = 1..n), or in place (a = n + 1)
    local xrow = {cols = {}, coefs = {}, sense = "=", rhs = 1}
    local order = {cols = {}, coefs = {}, sense = ">=", rhs = 0}
    for a = 1, n + 1 do
      local j = col(EPS * (n + 1 - a), 0, 1, true)
      v.x[a] = j
      xrow.cols[#xrow.cols + 1] = j
      xrow.coefs[#xrow.coefs + 1] = 1
      order.cols[#order.cols + 1] = j
      order.coefs[#order.coefs + 1] = -a
    end
    rows[#rows + 1] = xrow
    -- waits: before op ops[w] (w = 1..n), or at the first reader (n + 1)
    local wrow = {cols = {}, coefs = {}, sense = "=", rhs = 1}
    for w = 1, n + 1 do
      local j = col(EPS * (n + 1 - w), 0, 1, true)
      v.vw[w] = j
      wrow.cols[#wrow.cols + 1] = j
      wrow.coefs[#wrow.coefs + 1] = 1
      order.cols[#order.cols + 1] = j
      order.coefs[#order.coefs + 1] = w
    end
    rows[#rows + 1] = wrow
    -- a start in place needs no wait before the reader: w >= a
    rows[#rows + 1] = order
    for t = 1, n do
      local st = steps[ops[t]]
      local dur = st.seconds * US
      local j = col(0, 0, dur, false)
      v.y[t] = j
      work.cols[#work.cols + 1] = j
      work.coefs[#work.coefs + 1] = 1
      -- covered only after the start and before the wait
      local r1 = {cols = {j}, coefs = {1}, sense = "<=", rhs = 0}
      for a = 1, t do
        r1.cols[#r1.cols + 1] = v.x[a]
        r1.coefs[#r1.coefs + 1] = -dur
      end
      rows[#rows + 1] = r1
      local r2 = {cols = {j}, coefs = {1}, sense = "<=", rhs = 0}
      for w = t + 1, n + 1 do
        r2.cols[#r2.cols + 1] = v.vw[w]
        r2.coefs[#r2.coefs + 1] = -dur
      end
      rows[#rows + 1] = r2
      local rk = c.link .. "\0" .. keyof[ops[t]]
      if not cap[rk] or dur < cap[rk] then cap[rk] = dur end
      use[rk] = use[rk] or {}
      table.insert(use[rk], j)
    end
    local e = col(1, 0, c.seconds[3] * US + c.seconds[1] * US, false)
    v.e = e
    work.cols[#work.cols + 1] = e
    work.coefs[#work.coefs + 1] = 1
    rows[#rows + 1] = work
  end
  for rk, cols in pairs(use) do
    local coefs = {}
    for i = 1, #cols do coefs[i] = 1 end
    rows[#rows + 1] = {cols = cols, coefs = coefs, sense = "<=", rhs = cap[rk]}
  end
  if #obj == 0 then return {}, 0 end
  local r, err = plan.milp{obj = obj, lower = lower, upper = upper,
                           integer = integer, rows = rows, seconds = seconds}
  if not r then return nil, err end
  local out, exposed = {}, 0
  for ci, v in ipairs(vars) do
    local ans = {k = 1}
    for _, u in ipairs(v.u) do
      if r.x[u.col] > 0.5 then ans.k = u.k end
    end
    for a, j in pairs(v.x) do
      if r.x[j] > 0.5 and a <= #v.ops then ans.a = v.ops[a] end
    end
    for w, j in pairs(v.vw) do
      if r.x[j] > 0.5 and w <= #v.ops then ans.w = v.ops[w] end
    end
    exposed = exposed + r.x[v.e] / US
    out[ci] = ans
  end
  return out, exposed
end

local function quote(s)
  return '"' .. s:gsub('[\\"]', "\\%0") .. '"'
end

-- The plan's text with `entries` as its overlap section (any it had
-- replaced), format 1.1.
local function with_overlap(p, entries)
  local text = p:text(true)
  text = text:gsub('^libplan: "1%.0"', 'libplan: "1.1"', 1)
  local lines, out, skip = {}, {}, false
  for line in (text .. "\n"):gmatch("(.-)\n") do lines[#lines + 1] = line end
  if lines[#lines] == "" then lines[#lines] = nil end
  local ov = {}
  if #entries > 0 then
    ov[1] = "overlap:"
    for _, e in ipairs(entries) do ov[#ov + 1] = "  - " .. e end
  end
  local placed = false
  for _, line in ipairs(lines) do
    local top = line:match("^([%w_%-]+):")
    if top then skip = top == "overlap" end
    if top == "provenance" and not placed then
      for _, l in ipairs(ov) do out[#out + 1] = l end
      placed = true
    end
    if not skip then out[#out + 1] = line end
  end
  if not placed then
    for _, l in ipairs(ov) do out[#out + 1] = l end
  end
  return table.concat(out, "\n") .. "\n"
end

-- search(p, opts): {hardware, seconds (CBC's limit), window (ops a
-- collective may start ahead of its reader; default: 8, 16, 32 and one
-- layer's, at most 48, each solved and priced, the least step kept), name}
-- -> the plan with the overlap found (a new plan; p unchanged), and
-- {entries, step, step_no_overlap, exposed, chains, layers, window,
-- seconds} | nil, message
function M.search(p, opts)
  opts = opts or {}
  local t0 = os.clock()
  local sim, err = p:simulate{plain = true, serial = true, hardware = opts.hardware}
  if not sim then return nil, err end
  local steps = sim.steps
  local where, names, copies = layers(p)
  local opsteps, oppos, keyof = {}, {}, {}
  local loc = {}
  for i, s in ipairs(steps) do
    if s.kind == "op" then
      opsteps[#opsteps + 1] = i
      oppos[i] = #opsteps
      loc[i] = locate(where, s.name)
      keyof[i] = loc[i].key
    end
  end
  local opstep_of = {}
  for i, s in ipairs(steps) do
    if s.kind == "op" then opstep_of[s.name] = i end
  end
  local all = chains_of(steps)
  -- the chains by copy and identity
  local by = {}
  for _, c in ipairs(all) do
    local q, id = chain_id(c, steps, where)
    c.copy, c.id = q, id
    if q then
      by[q] = by[q] or {}
      by[q][id] = c
    end
  end
  local rep = copies >= 2 and copies // 2 + 1 or nil
  local period = 0
  for _ in pairs(names[rep or 1] or {}) do period = period + 1 end
  local cs = {}
  if rep and by[rep] then
    for _, c in ipairs(all) do
      if c.copy == rep then cs[#cs + 1] = c end
    end
  else -- no repeated layer: every chain is its own problem's
    cs = all
  end
  -- the answer of the layer, in every copy (or of each chain alone)
  local entries
  local function entry(c, ans, shift)
    local k = 1
    for _, ok in ipairs(c.chunkable) do
      if ok == ans.k then k = ans.k end
    end
    -- the layer's points in this copy (shift layers on)
    local function map(st)
      if not st then return nil end
      local l = loc[st]
      if not l.copy or not shift then return st end
      local name = op_at(names, l.copy + shift, l.key)
      return name and opstep_of[name] or false
    end
    local ai, wi = map(ans.a), map(ans.w)
    -- a start that does not hold in this copy: as early as it allows
    if ai ~= nil and (not ai or ai <= c.ready or ai >= c.reader) then ai = -1 end
    if wi ~= nil and (not wi or wi >= c.reader or wi <= c.ready or
                      (ai and ai > 0 and wi <= ai)) then
      wi = nil
    end
    if not ai and k == 1 then return end
    local parts = {}
    if c.grad_of ~= "" then
      parts[1] = "grad_sync: " .. quote(c.grad_of)
    else
      parts[1] = "input: " .. quote(c.origin_op) .. ", operand: " .. c.operand
    end
    if k > 1 then parts[#parts + 1] = "chunks: " .. k end
    parts[#parts + 1] = "stream: " .. (c.grad_of ~= "" and 2 or 1)
    if ai then
      -- after the op before ai, or as soon as the input is made
      local before = ai > 0 and opsteps[oppos[ai] - 1]
      if before and before > c.ready then
        parts[#parts + 1] = "start: " .. quote("after " .. steps[before].name)
      else
        parts[#parts + 1] = "start: ready"
      end
    end
    if wi then
      parts[#parts + 1] = "wait: " .. quote("before " .. steps[wi].name)
    end
    entries[#entries + 1] = "{" .. table.concat(parts, ", ") .. "}"
  end
  local function entries_of(answers)
    entries = {}
    if rep and by[rep] then
      for ci, c in ipairs(cs) do
        for q = 1, copies do
          local cq = by[q] and by[q][c.id]
          if cq then entry(cq, answers[ci], q - rep) end
        end
      end
    else
      for ci, c in ipairs(cs) do entry(c, answers[ci], nil) end
    end
    return entries
  end

  -- a plan with the entries es: checked (chunks the lowering refuses
  -- dropped) and priced
  local name = opts.name or "overlap-search"
  local function plan_of(es)
    local q, perr = plan.parse(with_overlap(p, es), name)
    if not q then return nil, "overlap: " .. perr end
    if not q:validate() then
      q:close()
      for i, e in ipairs(es) do es[i] = e:gsub(", chunks: %d+", "") end
      q = assert(plan.parse(with_overlap(p, es), name))
      local ok, findings = q:validate()
      if not ok then
        local msg = {}
        for _, f in ipairs(findings or {}) do
          msg[#msg + 1] = tostring(f.message or f)
        end
        q:close()
        return nil, "overlap: the plan found is invalid: " ..
                    table.concat(msg, "; ")
      end
    end
    local c, cerr = q:cost(opts.hardware)
    if not c then
      q:close()
      return nil, "overlap: " .. tostring(cerr)
    end
    return q, c
  end

  local c0, e0 = p:cost(opts.hardware)
  if not c0 then return nil, "overlap: " .. tostring(e0) end
  -- the problem solved for a few windows (the model and the streams do
  -- not agree on everything): the plan whose simulated step is least
  local windows = {}
  if tonumber(opts.window) then
    windows[1] = tonumber(opts.window)
  else
    local per = period > 0 and period or #opsteps
    local seen = {}
    for _, w in ipairs({8, 16, 32, per}) do
      w = math.min(w, math.max(8, per), 48)
      if not seen[w] then windows[#windows + 1] = w; seen[w] = true end
    end
    table.sort(windows)
  end
  local best, best_c, best_n, best_w, exposed_model
  local solve_seconds = 0
  for _, w in ipairs(windows) do
    local t1 = os.clock()
    local answers, exposed = solve(cs, steps, opsteps, keyof, w, opts.seconds)
    solve_seconds = solve_seconds + os.clock() - t1
    if not answers then
      if best then best:close() end
      return nil, "overlap: " .. tostring(exposed)
    end
    local es = entries_of(answers)
    local q, c = plan_of(es)
    if not q then
      if best then best:close() end
      return nil, c
    end
    if not best or c.step < best_c.step then
      if best then best:close() end
      best, best_c, best_n, best_w, exposed_model = q, c, #es, w, exposed
    else
      q:close()
    end
  end
  local res = {entries = best_n, chains = #cs, layers = rep and copies or 0,
               step_no_overlap = c0.step, step = best_c.step,
               exposed = best_c.exposed, model_exposed = exposed_model,
               window = best_w, windows = #windows,
               solve_seconds = solve_seconds, seconds = os.clock() - t0}
  local q = best
  if best_c.step >= c0.step then -- no gain: no overlap
    q:close()
    q = assert(plan.parse(with_overlap(p, {}), name))
    res.entries, res.step, res.exposed = 0, c0.step, c0.exposed
  end
  return q, res
end

-- p without its overlap section (a new plan).
function M.without(p)
  return assert(plan.parse(with_overlap(p, {}), "overlap-search"))
end

return M
