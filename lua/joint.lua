-- The joint search: for a device count, the mesh, the pipeline and the
-- strategy chosen together by the cost model (docs/lua.md, "The joint
-- search"). Loaded with the strategies' util as its argument; returns
--
--   joint.meshes(n, per_host, layers)  the candidate meshes
--   joint.search(p, opts)              the best plan and the cost table
--
-- A candidate is a mesh over dp, fsdp, cp, tp and pp (sizes multiplying
-- to the device count, tp within a host, pp at most the layer count, cp
-- at most 8), each
-- recipe's strategy on its non-pipeline axes (megatron where fsdp is 1,
-- fsdp where it is more, and opts.strategy when given), and for pp > 1
-- the stages cut by the cost model (each stage's layers balanced, within
-- memory: ratios.stage_cut), a microbatch count, a schedule and
-- recomputation (none, the plan's own, every op). Every candidate is
-- priced by the cost model
-- (not run); the least modeled step among those that fit in memory wins.
local plan = require "plan"
local util = ...
local ratios = assert(load(assert(plan.source("ratios")), "=ratios.lua",
                           "t"))(util)

local M = {}

local function divisors(n)
  local out = {}
  for d = 1, n do
    if n % d == 0 then out[#out + 1] = d end
  end
  return out
end

-- Every {dp, fsdp, cp, tp, pp} with dp * fsdp * cp * tp * pp = n, tp
-- dividing the devices of a host (tensor parallelism stays on a host's
-- links), pp at most `layers`, cp at most `max_cp` (default 8; 1: no
-- context parallelism) and only where fsdp is 1; in order of pp, then tp,
-- then cp, then fsdp.
function M.meshes(n, per_host, layers, max_cp)
  local out = {}
  for _, pp in ipairs(divisors(n)) do
    if pp <= layers then
      for _, tp in ipairs(divisors(n // pp)) do
        if per_host % tp == 0 then
          for _, cp in ipairs(divisors(n // pp // tp)) do
            if cp <= (max_cp or 8) then
              local rest = n // pp // tp // cp
              for _, fsdp in ipairs(divisors(rest)) do
                -- cp with fsdp left out: its recipe's probe, on four axes,
                -- costs ten times the others'
                if cp == 1 or fsdp == 1 then
                  out[#out + 1] = {dp = rest // fsdp, fsdp = fsdp, cp = cp,
                                   tp = tp, pp = pp}
                end
              end
            end
          end
        end
      end
    end
  end
  return out
end

-- The top-level sections of a plan's text, {name = text}, and their order.
local function sections(text)
  local out, order, at = {}, {}, {}
  -- each section starts at a line that starts with its key
  local pos = 1
  while pos <= #text do
    local key = text:match("^([%w_%-]+):", pos)
    if key then
      order[#order + 1] = key
      at[#at + 1] = pos
    end
    local nl = text:find("\n", pos, true)
    if not nl then break end
    pos = nl + 1
  end
  for i, key in ipairs(order) do
    local last = (at[i + 1] or #text + 1) - 1
    local body = text:sub(at[i], last)
    if body:sub(-1) ~= "\n" then body = body .. "\n" end
    out[key] = body
  end
  return out, order
end

-- The mesh section of candidate m (axes of size 1 left out, but dp and tp
-- always named, so the recipes find them): pp outermost, tp innermost.
local function mesh_text(m, per_host)
  local axes = {}
  if m.pp > 1 then axes[#axes + 1] = "pp=" .. m.pp end
  axes[#axes + 1] = "dp=" .. m.dp
  if m.fsdp > 1 then axes[#axes + 1] = "fsdp=" .. m.fsdp end
  if m.cp > 1 then axes[#axes + 1] = "cp=" .. m.cp end
  axes[#axes + 1] = "tp=" .. m.tp
  return "mesh:\n  axes: [" .. table.concat(axes, ", ") .. "]\n" ..
         "  devices_per_host: " .. per_host .. "\n"
end

local function label(m)
  return ("dp=%d,fsdp=%d,%stp=%d,pp=%d"):format(m.dp, m.fsdp,
    m.cp > 1 and "cp=" .. m.cp .. "," or "", m.tp, m.pp)
end

-- The batch the microbatches split: dim 0 of the first input an op reads.
local function batch_of(p)
  for _, name in ipairs(p:ops()) do
    for _, t in ipairs(p:op(name).inputs) do
      local x = p:tensor(t)
      if x.role == "input" and not x.producer then return x.shape[1] end
    end
  end
end

-- The pipeline section: stages as lists of op names, m microbatches.
local function pipeline_text(stages, micro, schedule)
  local lines = {"pipeline:", "  axis: pp", "  stages:"}
  for _, ops in ipairs(stages) do
    local names = {}
    for i, op in ipairs(ops) do
      names[i] = '"' .. op:gsub('[\\"]', '\\%0') .. '"'
    end
    lines[#lines + 1] = "    - {ops: [" .. table.concat(names, ", ") .. "]}"
  end
  lines[#lines + 1] = "  microbatches: " .. micro
  lines[#lines + 1] = "  schedule: " .. schedule
  return table.concat(lines, "\n") .. "\n"
end

local function strategy_fn(name)
  if type(name) == "function" then return name end
  return assert(load(assert(plan.source("strategies/" .. name)),
                     "=strategies/" .. name .. ".lua", "t"))(util)
end

-- What a strategy decided on plan q: every op's strategy, and the
-- placement of every leaf and output.
local function decisions(q)
  local d = {ops = {}, tensors = {}}
  for _, name in ipairs(q:ops()) do
    d.ops[#d.ops + 1] = {name, q:strategy(name)}
    for _, t in ipairs(q:op(name).inputs) do
      if not q:tensor(t).producer then d.tensors[t] = q:placement(t) end
    end
  end
  for _, t in ipairs(q:outputs()) do d.tensors[t] = q:placement(t) end
  return d
end

-- Decisions d made again on q (a mesh of the same axis names, with a
-- pipeline axis in front when `pp`: replicated there, each stage's
-- devices holding what the whole mesh held): nil when one of them is
-- not legal there (a size that does not divide).
local function transplant(q, d, pp)
  local pre = pp and "R" or ""
  for t, pl in pairs(d.tensors) do
    if not pcall(q.set_placement, q, t, pre .. pl) then return nil end
  end
  for _, e in ipairs(d.ops) do
    local s = e[2]
    if pp then
      local ins, outs = {}, {}
      for i, x in ipairs(s["in"]) do ins[i] = pre .. x end
      for i, x in ipairs(s.out) do outs[i] = pre .. x end
      s = {["in"] = ins, out = outs}
    end
    local ok, done = pcall(q.apply, q, e[1], s)
    if not ok or done == false then return nil end
  end
  return q:validate() and q or nil
end

-- Runs strategy `name` on the plan of text `text`; the plan, or nil and a
-- message. A recipe decides by the axes' names and the graph, not by
-- their sizes: its decisions on one mesh (memo[key], key the names of the
-- axes larger than 1) are tried first on another of the same names, and
-- it runs again only where they are not legal.
local function run_strategy(text, what, name, hw, memo, key, pp)
  local q, err = plan.parse(text, what)
  if not q then return nil, err end
  if memo[key] and transplant(q, memo[key], pp) then return q end
  if memo[key] then -- what the transplant set is decided again
    q:close()
    q, err = plan.parse(text, what)
    if not q then return nil, err end
  end
  local ok, placed = pcall(strategy_fn(name), q,
                           {hardware = hw, seed = 0, outputs = q:outputs()})
  if not ok then q:close(); return nil, tostring(placed) end
  if type(placed) ~= "table" then
    q:close()
    return nil, "the strategy returned no placements"
  end
  util.deliver_outputs(q, placed, q:outputs())
  if not q:validate() then q:close(); return nil, "an invalid plan" end
  if not pp then memo[key] = memo[key] or decisions(q) end
  return q
end

local dtype_bytes = ratios.dtype_bytes

-- The layers of q a pipeline can cut between: after op i when at most one
-- activation (a produced tensor) is live, the residual stream; leaves
-- (parameters, consts such as rotary tables, inputs) are on every stage.
-- Returns {{first, last}...}.
function M.layers(q)
  local ops, last, outputs = q:ops(), {}, {}
  for _, t in ipairs(q:outputs()) do outputs[t] = true end
  for i, name in ipairs(ops) do
    for _, t in ipairs(q:op(name).inputs) do last[t] = i end
  end
  local live, count, segs, start = {}, 0, {}, 1
  for i, name in ipairs(ops) do
    local op = q:op(name)
    for _, t in ipairs(op.outputs) do
      if (last[t] or 0) > i or outputs[t] then live[t] = true; count = count + 1 end
    end
    for _, t in ipairs(op.inputs) do
      if live[t] and last[t] == i and not outputs[t] then
        live[t] = nil
        count = count - 1
      end
    end
    if count <= 1 or i == #ops then
      segs[#segs + 1] = {first = start, last = i}
      start = i + 1
    end
  end
  return segs
end

-- The stages of q's layers on a pipeline of pp: the cut that minimises the
-- slowest stage's compute (each op's seconds under its strategy, the cost
-- model's) with each stage's parameters, gradients and optimizer state
-- (4 x the parameter bytes) within a device's memory (ratios.cut).
-- Returns {counts, stages = {{op names}...}, seconds} or nil and a message.
function M.stage_cut(q, pp, hw)
  local ops, segs = q:ops(), M.layers(q)
  local cap = q:hardware_figure(hw or "h100", "memory") or 0
  local times, bytes, caps, seen = {}, {}, {}, {}
  for s = 1, pp do times[s], caps[s] = {}, cap end
  for l, seg in ipairs(segs) do
    local t, b = 0, 0
    for i = seg.first, seg.last do
      local name = ops[i]
      t = t + (q:cost_op(name, q:strategy(name), hw) or 0)
      for _, x in ipairs(q:op(name).inputs) do
        local v = q:tensor(x)
        if v.role == "param" and not v.producer and not seen[x] then
          seen[x] = true
          local n = 4 * (dtype_bytes[v.dtype] or 4)
          for _, d in ipairs(v.shape) do n = n * d end
          b = b + n
        end
      end
    end
    for s = 1, pp do times[s][l] = t end
    bytes[l] = b
  end
  local counts, worst = ratios.cut(times, bytes, caps)
  if not counts then return nil, worst end
  return {counts = counts, seconds = worst,
          stages = ratios.stage_ops(counts, segs, ops)}
end

-- The candidates of one mesh and strategy: without a pipeline the plan
-- itself; with one, its stages cut (ratios.stage_cut on the plan without
-- a pipeline section) and each microbatch count, schedule and
-- recomputation added to its text. Calls add(row, text) for each.
local function candidates(q, m, opts, add)
  local text = q:text(true)
  local s, order = sections(text)
  -- q's text with training.recompute `rec` (a YAML list) and the
  -- pipeline section `pipe` (or none)
  local function variant(rec, pipe)
    if not rec and not pipe then return nil end -- q itself
    local parts = {}
    for _, key in ipairs(order) do
      if key == "training" and rec then
        parts[#parts + 1] = s.training:gsub("\n$", "\n  recompute: " .. rec ..
                                            "\n", 1)
      elseif key ~= "provenance" then
        parts[#parts + 1] = s[key]
      end
    end
    parts[#parts + 1] = pipe
    return table.concat(parts)
  end
  -- recomputation only trades time for memory: each level (none, the
  -- plan's own selective one, every op) tried only when the one before
  -- does not fit
  local function each_level(row0, pipe)
    for _, level in ipairs(opts.recompute) do
      local row = {}
      for k, v in pairs(row0) do row[k] = v end
      row.recompute = level.name
      add(row, variant(level.list, pipe))
      if row.fits or row.error then break end
    end
  end
  if m.pp == 1 then
    each_level({}, nil)
    return
  end
  local cut, cerr = M.stage_cut(q, m.pp, opts.hardware)
  if not cut then return cerr end
  for _, micro in ipairs(opts.microbatches) do
    local n = micro * m.pp
    if opts.batch and opts.batch % (n * m.dp * m.fsdp) == 0 then
      for _, schedule in ipairs(opts.schedules) do
        each_level({microbatches = n, schedule = schedule, stages = cut.counts},
                   pipeline_text(cut.stages, n, schedule))
      end
    end
  end
end

-- joint.search(p, opts): opts = {devices = N, hosts = H (default 1),
-- hardware, strategy (a name, besides the recipes) and strategy_fn (its
-- function, else the built-in of that name), microbatches = {per stage
-- multipliers} (default {1, 2, 4}), schedules (default {"1f1b"}),
-- progress = fn(what, done, total)}. Returns {plan, row, rows = every candidate's
-- {mesh, strategy, microbatches, schedule, recompute, step, memory, fits,
-- error}, recipes = {name = its best row}, seconds}, or nil and a message.
-- nil when a joint search of p on `devices` on `hosts` can run, else why
-- not (the caller's input).
function M.check(p, devices, hosts, s)
  local n, h = tonumber(devices), tonumber(hosts) or 1
  if not n or n < 1 or h < 1 or n % h ~= 0 then
    return "joint search: " .. tostring(devices) ..
           " devices do not split over " .. h .. " hosts"
  end
  if not (s or sections(p:text(true))).training then
    return "joint search: the plan has no training section (the search " ..
           "prices a training step: add one, e.g. training: {optimizer: " ..
           "{kind: adam}}, to a program with a loss)"
  end
end

function M.search(p, opts)
  local t0 = os.clock()
  local s = sections(p:text(true))
  local bad = M.check(p, opts.devices, opts.hosts, s)
  if bad then return nil, bad end
  local n = tonumber(opts.devices)
  local per_host = n // (tonumber(opts.hosts) or 1)
  local base = s.libplan .. s.program
  local own = s.training:match("\n  recompute: (%[[^\n]*%])")
  local training = s.training:gsub("\n  recompute:[^\n]*", "")
  local layers = #M.layers(p)
  local fns = {megatron = "megatron", fsdp = "fsdp"}
  if opts.strategy then fns[opts.strategy] = opts.strategy_fn or opts.strategy end
  opts = {hardware = opts.hardware, strategy = opts.strategy,
          microbatches = opts.microbatches or {1, 2, 4},
          schedules = opts.schedules or {"1f1b"}, progress = opts.progress,
          max_cp = opts.max_cp,
          batch = batch_of(p), recompute = {{name = false}}}
  if own then
    opts.recompute[#opts.recompute + 1] = {name = "selective", list = own}
  end
  opts.recompute[#opts.recompute + 1] = {name = "full", list = '["*"]'}
  local rows, best, recipes = {}, nil, {}
  local memo = {}
  local meshes = M.meshes(n, per_host, layers, opts.max_cp)
  for mi, m in ipairs(meshes) do
    if opts.progress then opts.progress("meshes", mi - 1, #meshes) end
    local names = {m.fsdp > 1 and "fsdp" or "megatron"}
    if opts.strategy and opts.strategy ~= names[1] then
      names[2] = opts.strategy
    end
    for _, name in ipairs(names) do
      local text = base .. mesh_text(m, per_host) .. training
      local key = name .. (m.fsdp > 1 and ":fsdp" or "") ..
                  (m.cp > 1 and ":cp" or "")
      if not memo[key] then
        -- the recipe decides once per list of axis names, on a probe mesh
        -- where each axis has size 2 (on an axis of size 1 a choice is
        -- arbitrary, and would not carry over) and without the pipeline
        -- axis (where everything is replicated); a mesh whose sizes make
        -- a decision illegal runs it again
        local probe = {dp = 2, tp = 2, fsdp = m.fsdp > 1 and 2 or 1,
                       cp = m.cp > 1 and 2 or 1, pp = 1}
        local pq = run_strategy(base .. mesh_text(probe, per_host) ..
                                training, "<probe>", fns[name],
                                opts.hardware, memo, key)
        if pq then pq:close() end
      end
      local q, err = run_strategy(text, "<" .. label(m) .. ">", fns[name],
                                  opts.hardware, memo, key, m.pp > 1)
      local function add(row, ctext)
        row.mesh, row.strategy = label(m), name
        local c, r, cerr
        if ctext == nil then
          r = q
        else
          r, cerr = plan.parse(ctext, "<" .. label(m) .. ">")
        end
        if r then c, cerr = r:cost(opts.hardware) end
        if c then
          row.step, row.memory, row.fits = c.step, c.memory, c.fits
        else
          row.error = cerr
        end
        rows[#rows + 1] = row
        if c and c.fits and (not best or c.step < best.row.step) then
          if best and best.plan ~= q then best.plan:close() end
          best = {plan = r, row = row, text = ctext}
        elseif r and r ~= q then
          r:close()
        end
        local family = name
        if c and c.fits and (not recipes[family] or
                             c.step < recipes[family].step) then
          recipes[family] = row
        end
      end
      if q then
        local cerr = candidates(q, m, opts, add)
        if cerr then rows[#rows + 1] = {mesh = label(m), strategy = name,
                                        error = tostring(cerr)} end
        if not (best and best.plan == q) then q:close() end
      else
        rows[#rows + 1] = {mesh = label(m), strategy = name, error = err}
      end
    end
  end
  if not best then
    return nil, "joint search: no candidate of " .. n .. " devices fits " ..
           "in memory (" .. #rows .. " priced)"
  end
  return {plan = best.plan, row = best.row, rows = rows, recipes = recipes,
          seconds = os.clock() - t0}
end

return M
