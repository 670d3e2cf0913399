-- The device assignment and the logical mesh shape as searched decisions
-- (docs/heterogeneous.md, "Placement search" and "Mesh shape search").
-- Loaded with the strategies' util as its argument; returns a table:
--
--   placement.topology(spec)      "torus:4x4" / "levels:nvlink=4,ib" as
--                                 the table p:set_topology takes
--   placement.shapes(n, names)    every factorisation of n devices over
--                                 the axis names (sizes 1 allowed)
--   placement.search_shapes(p, opts)  the strategy run on every shape of
--                                 p's program, each priced, the least kept
--
-- The placement search itself is p:search_placement (C: curves through
-- the topology's devices composed with orders of the mesh axes).
local plan = require "plan"
local util = ...

local M = {}

-- The topology table of a spec (the file's spelling, link figures left to
-- the hardware): "torus:4x4" (wrapped), "torus:4x2:nowrap" (a mesh
-- without wraparound), "levels:nvlink=4,ib" (islands of 4 joined by the
-- network; the last level has no size). nil and a message for anything
-- else.
function M.topology(spec)
  if type(spec) ~= "string" then return nil, "topology: not a string" end
  local kind, rest = spec:match("^(%a+):(.+)$")
  if kind == "torus" then
    local dims_s, flag = rest:match("^([%dx]+)(.*)$")
    local dims = {}
    for d in (dims_s or ""):gmatch("[^x]+") do dims[#dims + 1] = tonumber(d) end
    if #dims < 1 or #dims > 3 or (dims_s or ""):find("xx") or
       (dims_s or ""):match("^x") or (dims_s or ""):match("x$") then
      return nil, "topology '" .. spec .. "': torus:AxB[xC][:nowrap]"
    end
    for _, d in ipairs(dims) do
      if math.type(d) ~= "integer" or d < 1 then
        return nil, "topology '" .. spec .. "': a torus dim is a size >= 1"
      end
    end
    if flag ~= "" and flag ~= ":nowrap" and flag ~= ":wrap" then
      return nil, "topology '" .. spec .. "': after the dims only :wrap or :nowrap"
    end
    return {torus = {dims = dims, wrap = flag ~= ":nowrap"}}
  elseif kind == "levels" then
    local levels = {}
    for item in (rest .. ","):gmatch("([^,]*),") do
      local name, size = item:match("^([%a_][%w_%-]*)=(%d+)$")
      if not name then name = item:match("^([%a_][%w_%-]*)$") end
      if not name then
        return nil, "topology '" .. spec .. "': a level is NAME=SIZE, the last NAME"
      end
      levels[#levels + 1] = {name = name, size = size and tonumber(size)}
    end
    for i, l in ipairs(levels) do
      if (i < #levels) ~= (l.size ~= nil) or
         (l.size and (math.type(l.size) ~= "integer" or l.size < 1)) then
        return nil, "topology '" .. spec .. "': every level but the last " ..
               "has a size >= 1, the last none"
      end
    end
    if #levels > 4 then return nil, "topology '" .. spec .. "': at most 4 levels" end
    return {levels = levels}
  end
  return nil, "topology '" .. spec .. "': torus:AxB[xC][:nowrap] or " ..
         "levels:NAME=SIZE,...,NAME"
end

-- Every list of #names sizes >= 1 whose product is n, in lexicographic
-- order of the sizes (the last axis fastest): 8 over {dp, tp} gives 1x8,
-- 2x4, 4x2, 8x1. Each entry is {sizes = {...}, text = "dp=2,tp=4"}.
function M.shapes(n, names)
  local out, sizes = {}, {}
  local function rec(i, left)
    if i == #names then
      sizes[i] = left
      local parts = {}
      for k, name in ipairs(names) do parts[k] = name .. "=" .. sizes[k] end
      out[#out + 1] = {sizes = {table.unpack(sizes)},
                       text = table.concat(parts, ",")}
      return
    end
    for d = 1, left do
      if left % d == 0 then sizes[i] = d; rec(i + 1, left // d) end
    end
  end
  if #names > 0 and n >= 1 then rec(1, n) end
  return out
end

-- The mesh of p as text: "dp=2,tp=4".
function M.mesh_text(p)
  local parts = {}
  for _, a in ipairs(p:mesh()) do parts[#parts + 1] = a.name .. "=" .. a.size end
  return table.concat(parts, ",")
end

-- The canonical text of p's program (the plan's text before its mesh),
-- for a plan of it on another mesh; nil and a message when p pins a
-- region (a region's placements belong to p's own mesh).
function M.program_text(p)
  for _, name in ipairs(p:ops()) do
    if p:pinned(name) then
      return nil, "mesh shape search: op '" .. name .. "' is in a pinned " ..
             "region, whose placements hold only on the plan's own mesh"
    end
  end
  local text = p:text(true)
  local prog = text:match("^(.-\n)mesh:")
  if not prog then return nil, "mesh shape search: the plan has no mesh" end
  return prog
end

local function strategy(name)
  return assert(load(assert(plan.source("strategies/" .. name)),
                     "=strategies/" .. name .. ".lua", "t"))(util)
end

-- The default run of one shape's plan q: the strategy (a built-in's name
-- or a function(p, opts)) on q, its outputs delivered, the placement
-- searched when asked; returns the modeled step, or nil and a message.
local function run_default(q, opts)
  local fn = opts.strategy or "greedy"
  if type(fn) == "string" then fn = strategy(fn) end
  local sopts = {hardware = opts.hardware, seed = opts.seed or 0,
                 outputs = q:outputs(), note = opts.note}
  local ok, placed = pcall(fn, q, sopts)
  if not ok then return nil, tostring(placed) end
  if type(placed) ~= "table" then return nil, "the strategy returned no placements" end
  util.deliver_outputs(q, placed, q:outputs())
  if not q:validate() then return nil, "the strategy made an invalid plan" end
  if opts.placement then
    local r, err = q:search_placement{hardware = opts.hardware, apply = true}
    if not r then return nil, err end
  end
  local c, err = q:cost(opts.hardware)
  if not c then return nil, err end
  return c.step
end

-- The mesh shape search: for p's program (p a plan; its mesh gives the
-- axis names and the device count unless opts.axes / opts.devices do),
-- every shape of M.shapes, p's own first (it wins ties), each made into a
-- plan, given opts.topology (a table or a spec) and opts.device_hardware
-- when set, and run (opts.run(q, mesh) -> step | nil, message; default:
-- opts.strategy, opts.placement, opts.hardware as run_default). Returns
-- {plan = the best shape's plan, mesh = its text, step, given = p's own
-- shape's step (nil when it failed), gain = given / step, list = {{mesh,
-- step | error}...}}, or nil and a message when no shape runs.
function M.search_shapes(p, opts)
  opts = opts or {}
  local prog, err = M.program_text(p)
  if not prog then return nil, err end
  local names, n = opts.axes, opts.devices
  if not names then
    names = {}
    for i, a in ipairs(p:mesh()) do names[i] = a.name end
  end
  n = n or #p:devices()
  local topo = opts.topology
  if type(topo) == "string" then
    topo, err = M.topology(topo)
    if not topo then return nil, err end
  end
  local own = M.mesh_text(p)
  -- p's own shape first, the others in M.shapes' order
  local list = {}
  for _, shape in ipairs(M.shapes(n, names)) do
    if shape.text == own then table.insert(list, 1, shape)
    else list[#list + 1] = shape end
  end
  local make = opts.make or function(mesh)
    return plan.parse(prog .. "mesh: {axes: [" .. mesh:gsub(",", ", ") .. "]}\n",
                      opts.name or "<shape " .. mesh .. ">")
  end
  local run = opts.run or function(q) return run_default(q, opts) end
  local best, out = nil, {list = {}}
  for _, shape in ipairs(list) do
    local q, qerr = make(shape.text)
    local step
    -- the same devices: the candidate keeps p's hardware and topology
    if q and q ~= p then
      local ok, cerr = q:copy_physical_from(p)
      if not ok then q, qerr = nil, cerr end
    end
    if q and topo then
      local ok, terr = q:set_topology(topo, opts.hardware)
      if not ok then q, qerr = nil, terr end
    end
    if q and opts.device_hardware then
      local ok, herr = q:set_device_hardware(opts.device_hardware)
      if not ok then q, qerr = nil, herr end
    end
    if q then step, qerr = run(q, shape.text) end
    out.list[#out.list + 1] = {mesh = shape.text, step = step, error = qerr}
    if shape.text == own then out.given = step end
    if step and (not best or step < best.step) then
      if best and best.plan ~= q then best.plan:close() end
      best = {plan = q, mesh = shape.text, step = step}
    elseif q then
      q:close()
    end
  end
  if not best then
    return nil, "mesh shape search: no shape of " .. n .. " devices over " ..
           table.concat(names, ",") .. " runs (" ..
           tostring(out.list[1] and out.list[1].error) .. ")"
  end
  out.plan, out.mesh, out.step = best.plan, best.mesh, best.step
  out.gain = out.given and out.given / best.step or nil
  return out
end

return M
