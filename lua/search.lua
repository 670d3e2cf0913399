-- The search driver of `plan search` and `plan replay` (run by the plan
-- tool with arguments KEY=VALUE; see cli/search.c). A search starts from a
-- program on a mesh, or from a plan: the plan's pinned ops keep their
-- strategies, every other decision is made again. The strategy is a
-- built-in (lua/strategies/NAME.lua) or a Lua file returning
-- function(p, opts) that applies a strategy to every op it is free to
-- decide and returns where each tensor ends up ({tensor = placement}).
local plan = require "plan"

local args = {}
for _, a in ipairs({...}) do
  local k, v = a:match("^([%w_]+)=(.*)$")
  if not k then error("search: argument '" .. a .. "' is not KEY=VALUE", 0) end
  args[k] = v
end

local util_src = assert(plan.source("strategies/util"))
local util = assert(load(util_src, "=strategies/util.lua", "t"))()

-- The strategy's function and its source text.
local function strategy_fn(name)
  local src, chunkname
  if name:match("%.lua$") then
    local f, err = io.open(name, "r")
    if not f then error("search: cannot read strategy '" .. name .. "': " .. err, 0) end
    src = f:read("a")
    f:close()
    chunkname = "@" .. name
  else
    src = plan.source("strategies/" .. name)
    if not src or name == "util" then
      local known = {}
      for _, n in ipairs(plan.source()) do
        local s = n:match("^strategies/(.+)$")
        if s and s ~= "util" then known[#known + 1] = s end
      end
      error("search: no strategy '" .. name .. "' (built-in: " ..
            table.concat(known, ", ") .. "; or a FILE.lua)", 0)
    end
    chunkname = "=strategies/" .. name .. ".lua"
  end
  local chunk, err = load(src, chunkname, "t")
  if not chunk then error("search: " .. err, 0) end
  local fn = chunk(util)
  if type(fn) ~= "function" then
    error("search: strategy '" .. name .. "' does not return a function", 0)
  end
  return fn, src
end

-- Every decision a search makes again is cleared: unpinned strategies,
-- leaf storage placements, delivered output placements.
local function strip(p)
  for _, name in ipairs(p:ops()) do
    if not p:pinned(name) then p:clear_strategy(name) end
  end
  for _, name in ipairs(p:ops()) do
    for _, t in ipairs(p:op(name).inputs) do
      if not p:tensor(t).producer then p:set_placement(t, nil) end
    end
  end
  for _, t in ipairs(p:outputs()) do p:set_placement(t, nil) end
end

-- Every order of the mesh axes over the physical devices (iota first):
-- device(rank) is the rank's coordinates read in that axis order. Returns
-- a list of device lists.
local function axis_orders(p)
  local mesh, n = p:mesh(), 1
  for _, a in ipairs(mesh) do n = n * a.size end
  local perms = {}
  local function permute(prefix, rest)
    if #rest == 0 then perms[#perms + 1] = prefix; return end
    for i = 1, #rest do
      local np, nr = {table.unpack(prefix)}, {table.unpack(rest)}
      np[#np + 1] = table.remove(nr, i)
      permute(np, nr)
    end
  end
  local all = {}
  for i = 1, #mesh do all[i] = i end
  permute({}, all)
  local orders = {}
  for k, perm in ipairs(perms) do
    local devs = {}
    for r = 0, n - 1 do
      local coord, x = {}, r
      for a = #mesh, 1, -1 do coord[a] = x % mesh[a].size; x = x // mesh[a].size end
      local d = 0
      for _, a in ipairs(perm) do d = d * mesh[a].size + coord[a] end
      devs[r + 1] = d
    end
    orders[k] = devs
  end
  return orders
end

-- Placement as a search decision: the device order (of the axis orders)
-- under which the plan's modeled step is least; ties keep the earlier
-- (iota first).
local function search_devices(p, hw)
  local best, best_cost
  for k, devs in ipairs(axis_orders(p)) do
    if k == 1 then p:set_devices(nil) else p:set_devices(devs) end
    local c = p:cost(hw)
    if c and (best_cost == nil or c.step < best_cost) then
      best, best_cost = k, c.step
    end
  end
  if best == 1 then p:set_devices(nil) else p:set_devices(axis_orders(p)[best]) end
end

-- Runs the strategy on p; returns the provenance table to record.
local function run_search(p, opts)
  local fn, src = strategy_fn(opts.strategy)
  strip(p)
  if opts.devices == "search" then p:set_devices(nil) end
  local sopts = {hardware = opts.hardware, seed = tonumber(opts.seed) or 0,
                 width = opts.width, limit = opts.limit,
                 seconds = opts.seconds, outputs = p:outputs()}
  local t0 = os.clock()
  local placed = fn(p, sopts)
  local seconds = os.clock() - t0
  if type(placed) ~= "table" then
    error("search: strategy '" .. opts.strategy .. "' returned no placements", 0)
  end
  util.deliver_outputs(p, placed, p:outputs())
  if opts.devices == "search" then search_devices(p, opts.hardware) end
  local prov = {
    tool = "libplan " .. plan.version,
    strategy = opts.strategy,
    script = plan.hash_text(src),
    seed = sopts.seed,
    search = {mesh = opts.mesh, hardware = opts.hardware or "default"},
  }
  if opts.width then prov.search.width = tonumber(opts.width) end
  if opts.limit then prov.search.limit = tonumber(opts.limit) end
  if opts.seconds then prov.search.seconds = tonumber(opts.seconds) end
  if opts.devices == "search" then prov.search.devices = "search" end
  if opts.self_contained == "1" and opts.strategy:match("%.lua$") then
    prov.script_text = src
  end
  return prov, seconds
end

local function check_valid(p, what)
  local ok, findings = p:validate()
  if not ok then
    for _, f in ipairs(findings) do io.stderr:write(f, "\n") end
    error(what .. ": the plan it made is invalid", 0)
  end
end

if args.mode == "replay" then
  -- replay: strip the plan's own decisions, search again with what its
  -- provenance recorded, and compare the hashes
  local p = assert(plan.load(args.plan))
  local want = p:hash()
  local rec = p:provenance()
  if not rec or not rec.strategy then
    io.stderr:write("plan replay: ", args.plan, ": no search in its provenance\n")
    return 2
  end
  local q = assert(plan.load(args.plan))
  local opts = {strategy = rec.strategy, seed = rec.seed,
                hardware = rec.search and rec.search.hardware ~= "default" and
                           rec.search.hardware or nil,
                mesh = rec.search and rec.search.mesh,
                width = rec.search and rec.search.width,
                limit = rec.search and rec.search.limit,
                seconds = rec.search and rec.search.seconds,
                devices = rec.search and rec.search.devices}
  if rec.script_text and opts.strategy:match("%.lua$") then
    local f = io.open(opts.strategy, "r")
    if not f then -- the script travels in the self-contained form
      local tmp = os.tmpname() .. ".lua"
      f = assert(io.open(tmp, "w")); f:write(rec.script_text); f:close()
      opts.strategy = tmp
    else
      f:close()
    end
  end
  -- a recorded strategy that cannot be read or compiled any more is bad
  -- input (exit 2), as for plan search
  local loaded, lerr = pcall(strategy_fn, opts.strategy)
  if not loaded then
    if opts.strategy ~= rec.strategy then os.remove(opts.strategy) end
    io.stderr:write("plan replay: ", tostring(lerr), " (the plan records ",
                    "strategy '", rec.strategy, "'; its self-contained form ",
                    "carries the script)\n")
    return 2
  end
  local ok, prov = pcall(run_search, q, opts)
  if opts.strategy ~= rec.strategy then os.remove(opts.strategy) end
  if not ok then error(prov, 0) end
  local got = q:hash()
  if rec.script and prov.script ~= rec.script then
    io.stderr:write("plan replay: note: strategy '", rec.strategy,
                    "' has changed since the plan was made (script ",
                    tostring(rec.script), ", now ", prov.script, ")\n")
  end
  if got == want then
    print(args.plan .. ": replayed: " .. got .. " (strategy " .. rec.strategy .. ")")
    return 0
  end
  print(args.plan .. ": replay differs: recorded " .. want .. ", replayed " .. got)
  for _, d in ipairs(p:diff(q)) do print("  " .. d) end
  return 1
end

-- search
local p, err
if args.plan then
  p, err = plan.load(args.plan)
else
  p, err = plan.new{program = args.program, mesh = args.mesh}
end
if not p then
  io.stderr:write("plan search: ", err, "\n")
  return 2
end
args.mesh = args.mesh or (function()
  local parts = {}
  for _, a in ipairs(p:mesh()) do parts[#parts + 1] = a.name .. "=" .. a.size end
  return table.concat(parts, ",")
end)()
args.strategy = args.strategy or "greedy"
-- a strategy that cannot be read or compiled is bad input (exit 2)
local loaded, lerr = pcall(strategy_fn, args.strategy)
if not loaded then
  io.stderr:write("plan search: ", tostring(lerr), "\n")
  return 2
end
local prov, seconds = run_search(p, args)
check_valid(p, "plan search")
local c, cerr = p:cost(args.hardware)
if not c then error("plan search: " .. cerr, 0) end
prov.cost = {step_seconds = c.step, memory_bytes = c.memory, fits = c.fits}
p:set_provenance(prov)
local ok, serr = p:save(args.out, {self_contained = args.self_contained == "1"})
if not ok then
  io.stderr:write("plan search: ", serr, "\n")
  return 2
end
-- the hash of the file as written: a program file of an older format
-- version, embedded, takes the plan's version and so a new program hash
local written = plan.load(args.out)
local hash = written and written:hash() or p:hash()
local st = p:stats()
local evals = st.cost_op + st.cost_redist + st.cost_plan
print(("%s: strategy %s on %s: modeled step %.3f ms, peak memory %.2f GiB " ..
       "per device%s; %d cost evaluations in %.3f s (%.0f/s); plan %s")
      :format(args.out, args.strategy, args.mesh, c.step * 1e3,
              c.memory / 2^30, c.fits and "" or " (does not fit)", evals,
              seconds, seconds > 0 and evals / seconds or 0, hash))
return 0
