-- The search driver of plan_search and plan_replay (lua/search_api.c runs
-- it; `plan search` and `plan replay` call those). The chunk returns
-- {search = fn, replay = fn}; each takes a request table from the C side
-- and returns a result table. A search starts from a program on a mesh, or
-- from a plan: the plan's pinned ops keep their strategies, every other
-- decision is made again. The strategy is a built-in
-- (lua/strategies/NAME.lua) or a Lua file returning function(p, opts)
-- that applies a strategy to every op it is free to decide and returns
-- where each tensor ends up ({tensor = placement}).
--
-- The driver prints nothing. Input that cannot be used comes back as
-- {error = message, code = status name, at = a message with a position};
-- the strategy's failures raise, after req.ran is set; the strategy's
-- notes go to req.notes.
local plan = require "plan"

local util_src = assert(plan.source("strategies/util"))
local util = assert(load(util_src, "=strategies/util.lua", "t"))()
local placement = assert(load(assert(plan.source("placement")),
                              "=placement.lua", "t"))(util)
local overlap = assert(load(assert(plan.source("overlap")),
                            "=overlap.lua", "t"))(util)
local joint = assert(load(assert(plan.source("joint")), "=joint.lua",
                          "t"))(util)

-- The plan methods a sandboxed strategy may call: everything a strategy
-- needs to read, decide and price; nothing that writes a file, lowers or
-- verifies, or reaches another plan.
local SANDBOX_METHODS = {
  "hash", "text", "ops", "op", "tensor", "mesh", "outputs", "pinned",
  "devices", "set_devices", "stats", "strategies", "strategy", "apply",
  "undo", "clear_strategy", "placement", "set_placement", "cost", "cost_op",
  "cost_redist", "validate", "provenance", "device_hardware",
  "hardware_figure", "search_placement", "topology", "cost_op_rank",
}

-- What a sandboxed strategy sees of plan p: a table of those methods,
-- with p out of its reach.
local function plan_proxy(p)
  local methods = {}
  for _, m in ipairs(SANDBOX_METHODS) do
    methods[m] = function(_, ...) return p[m](p, ...) end
  end
  return setmetatable({}, {__index = methods, __metatable = false,
                           __tostring = function() return tostring(p) end})
end

-- The strategy's function and its source text; or nil, a message, the
-- status name and the message that carries a position, when it cannot be
-- read, compiled or run. `text`: the script of a file strategy, instead
-- of reading the file. `sandbox_load`: load the script into the sandbox
-- with it (lua/sandbox.c): it then sees a copy of util and, for the plan,
-- plan_proxy's methods.
local function strategy_fn(name, text, sandbox_load)
  local src, chunkname = text
  if src then
    chunkname = "@" .. name
  elseif name:match("%.lua$") then
    local f, err = io.open(name, "r")
    if not f then
      return nil, "search: cannot read strategy '" .. name .. "': " .. err,
             "io"
    end
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
      local hint = plan.suggest(name, known)
      return nil, "search: no strategy '" .. name .. "'" ..
             (hint and "; " .. hint or "") .. " (built-in: " ..
             table.concat(known, ", ") .. "; or a FILE.lua)", "notfound"
    end
    chunkname = "=strategies/" .. name .. ".lua"
  end
  local chunk, err
  local arg = util
  if sandbox_load then
    chunk, err = sandbox_load(src, chunkname)
    arg = {}
    for k, v in pairs(util) do arg[k] = v end
  else
    chunk, err = load(src, chunkname, "t")
  end
  if not chunk then return nil, "search: " .. err, "syntax", err end
  local ok, fn = pcall(chunk, arg)
  if not ok then return nil, tostring(fn), "invalid", tostring(fn) end
  if type(fn) ~= "function" then
    return nil, "search: strategy '" .. name .. "' does not return a function",
           "invalid"
  end
  if sandbox_load then
    local inner = fn
    fn = function(p, sopts) return inner(plan_proxy(p), sopts) end
  end
  return fn, src
end

-- The next order of the list a (of axis numbers) in lexicographic order,
-- in place; false after the last.
local function next_order(a)
  local i = #a - 1
  while i >= 1 and a[i] >= a[i + 1] do i = i - 1 end
  if i < 1 then return false end
  local j = #a
  while a[j] <= a[i] do j = j - 1 end
  a[i], a[j] = a[j], a[i]
  local lo, hi = i + 1, #a
  while lo < hi do a[lo], a[hi] = a[hi], a[lo]; lo, hi = lo + 1, hi - 1 end
  return true
end

-- The device list of one order of the mesh axes: device(rank) is the
-- rank's coordinates read in that axis order.
local function devices_of(mesh, n, order)
  local devs = {}
  for r = 0, n - 1 do
    local coord, x = {}, r
    for a = #mesh, 1, -1 do coord[a] = x % mesh[a].size; x = x // mesh[a].size end
    local d = 0
    for _, a in ipairs(order) do d = d * mesh[a].size + coord[a] end
    devs[r + 1] = d
  end
  return devs
end

-- Placement as a search decision: the device order under which the plan's
-- modeled step is least; ties keep the earlier. Orders of the axes larger
-- than 1 (an axis of size 1 moves no device) are tried one at a time in
-- lexicographic order, iota first, each made only when tried; the search
-- stops when `seconds` of processor time are spent (default 60) and keeps
-- the best order so far, with a note.
local function search_devices(p, hw, seconds, note)
  local mesh, n, order = p:mesh(), 1, {}
  for i, a in ipairs(mesh) do
    n = n * a.size
    if a.size > 1 then order[#order + 1] = i end
  end
  local total = 1
  for k = 2, #order do total = total * k end
  local limit, t0 = tonumber(seconds) or 60, os.clock()
  local best, best_cost, tried = nil, nil, 0
  repeat
    local devs = tried > 0 and devices_of(mesh, n, order) or nil
    p:set_devices(devs)
    tried = tried + 1
    local c = p:cost(hw)
    if c and (best_cost == nil or c.step < best_cost) then
      best, best_cost = devs, c.step
    end
  until not next_order(order) or os.clock() - t0 >= limit
  p:set_devices(best)
  if tried < total and note then
    note(string.format("devices: %d of %d axis orders tried in %g s " ..
                       "(--seconds), the best of those kept", tried, total,
                       limit))
  end
end

-- Runs the strategy fn (its source src) on p; returns the provenance
-- table to record and the strategy's processor time.
local function run_search(p, opts, fn, src)
  util.clear_decisions(p)
  if opts.topology_table then
    local ok, err = p:set_topology(opts.topology_table, opts.hardware)
    if not ok then error(err, 0) end
  end
  if opts.devices == "search" or opts.placement then p:set_devices(nil) end
  local sopts = {hardware = opts.hardware, seed = tonumber(opts.seed) or 0,
                 width = opts.width, limit = opts.limit,
                 seconds = opts.seconds, outputs = p:outputs(),
                 note = opts.note, share = not opts.no_share,
                 progress = opts.progress}
  local t0 = os.clock()
  local placed = fn(p, sopts)
  local seconds = os.clock() - t0
  if type(placed) ~= "table" then
    error("search: strategy '" .. opts.strategy .. "' returned no placements", 0)
  end
  util.deliver_outputs(p, placed, p:outputs())
  if opts.devices == "search" then
    search_devices(p, opts.hardware, opts.seconds, opts.note)
  end
  local placed_on
  if opts.placement then
    local r, err = p:search_placement{hardware = opts.hardware, apply = true}
    if not r then error("search: " .. err, 0) end
    placed_on = r
    if opts.note and not opts.quiet_placement then
      opts.note(("placement: %s%s of %d assignments on the topology: " ..
                 "modeled step %.4g ms, the default order %.4g ms " ..
                 "(%.2fx)"):format(r.curve, r.order ~= "" and " " .. r.order or "",
                 r.candidates, r.step * 1e3, r.default * 1e3, r.gain))
    end
  end
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
  if opts.placement then prov.search.placement = "search" end
  if opts.topology then prov.search.topology = opts.topology end
  if opts.mesh_shape then prov.search.mesh_shape = "search" end
  if opts.no_share then prov.search.share = false end
  if opts.self_contained and opts.strategy:match("%.lua$") then
    prov.script_text = src
  end
  return prov, seconds, placed_on
end

-- The notes of the strategies, in req.notes.
local function note_fn(req)
  req.notes = req.notes or {}
  return function(msg) req.notes[#req.notes + 1] = tostring(msg) end
end

-- The plan of the request: a plan file, or a plan in memory.
local function load_plan(req)
  if req.path then return plan.load(req.path) end
  return plan.parse(req.text, req.name, req.base_dir)
end

-- A mesh shape holds only names, sizes, '=' and ',' (as plan.new checks).
local function mesh_ok(mesh)
  return mesh ~= "" and not mesh:find("[^%w_=, ]")
end

-- The plan a search starts from: a plan (file or memory), a program file
-- on a mesh (plan.new), or a program in memory, whose canonical text with
-- the mesh added is a plan with the program inline.
local function start_plan(req)
  if req.is_plan then return load_plan(req) end
  if req.path then return plan.new{program = req.path, mesh = req.mesh} end
  local prog, err = plan.parse(req.text, req.name, req.base_dir)
  if not prog then return nil, err end
  if not mesh_ok(req.mesh) then
    return nil, "plan.new: mesh '" .. req.mesh .. "' is not NAME=SIZE[,NAME=SIZE...]"
  end
  local text = prog:text(true) .. "mesh: {axes: [" ..
               req.mesh:gsub(",", ", ") .. "]}\n"
  prog:close()
  return plan.parse(text, req.name, req.base_dir)
end

-- The mesh of p as text: "dp=2,tp=4".
local function mesh_text(p)
  local parts = {}
  for _, a in ipairs(p:mesh()) do parts[#parts + 1] = a.name .. "=" .. a.size end
  return table.concat(parts, ",")
end

local function stats(p)
  local st = p:stats()
  return st.cost_op + st.cost_redist + st.cost_plan
end

-- The mesh shape search of plan_search: the strategy run on every
-- factorisation of p's device count over its axis names (placement.shapes;
-- p's own shape first, winning ties), each priced by its modeled step;
-- returns the best shape's plan, its provenance and the strategy's time.
local function search_shapes(req, p, opts, fn, src)
  local provs, placed, seconds = {}, {}, 0
  local res, err = placement.search_shapes(p, {
    hardware = opts.hardware,
    make = (req.path and not req.is_plan) and function(mesh)
      return plan.new{program = req.path, mesh = mesh}
    end or nil,
    run = function(q, mesh)
      local o = setmetatable({mesh = mesh, quiet_placement = true},
                             {__index = opts})
      local ok, prov, s, r = pcall(run_search, q, o, fn, src)
      if not ok then return nil, tostring(prov) end
      placed[q] = r
      seconds = seconds + s
      if not q:validate() then return nil, "an invalid plan" end
      local c, cerr = q:cost(opts.hardware)
      if not c then return nil, cerr end
      provs[q] = prov
      return c.step
    end})
  if not res then error(err, 0) end
  local parts = {}
  for _, e in ipairs(res.list) do
    parts[#parts + 1] = e.mesh .. " " .. (e.step and ("%.4g ms"):format(e.step * 1e3)
                                           or "failed")
  end
  opts.note(("mesh shape: %s of %d shapes: modeled step %.4g ms%s; %s"):format(
            res.mesh, #res.list, res.step * 1e3,
            res.gain and (", the plan's own shape %.4g ms (%.2fx)"):format(
              res.given * 1e3, res.gain) or "",
            table.concat(parts, ", ")))
  local r = placed[res.plan]
  if r then
    opts.note(("placement on %s: %s%s of %d assignments: modeled step " ..
               "%.4g ms, the default order %.4g ms (%.2fx)"):format(res.mesh,
               r.curve, r.order ~= "" and " " .. r.order or "", r.candidates,
               r.step * 1e3, r.default * 1e3, r.gain))
  end
  return res.plan, provs[res.plan], seconds
end

-- A byte count in binary units scaled to it ("19.03 GiB").
local function bytes_text(n)
  local units, i = {"B", "KiB", "MiB", "GiB", "TiB"}, 1
  while n >= 1024 and i < #units do n, i = n / 1024, i + 1 end
  return i == 1 and ("%d B"):format(n) or ("%.2f %s"):format(n, units[i])
end

-- The joint search (joint.lua) for req.joint_devices on req.joint_hosts:
-- every candidate priced, then the winner's recipe run again on its plan
-- as a search of that plan would run it (so `plan replay` makes it
-- again); notes each recipe's best. Returns the plan, its provenance and
-- the seconds, or nil and a result with the error.
local function search_joint(req, p, opts)
  local given = req.strategy and req.strategy ~= "greedy" and req.strategy
  local gfn, gsrc
  if given then
    gfn, gsrc = strategy_fn(given)
    if not gfn then return nil, {error = gsrc, code = "usage"} end
  end
  local given_cost = req.is_plan and p:cost(opts.hardware) or nil
  local res, err = joint.search(p, {devices = req.joint_devices,
                                    hosts = req.joint_hosts,
                                    hardware = opts.hardware,
                                    strategy = given, strategy_fn = gfn,
                                    progress = req.progress})
  if not res and err:find("fits", 1, true) then
    util.refuse("search: ", err) -- nothing fits: cannot run here
  elseif not res then
    return nil, {error = err, code = "usage"}
  end
  local function line(what, r)
    local how = {}
    if r.microbatches then
      how[#how + 1] = ("%d microbatches, %s"):format(r.microbatches, r.schedule)
    end
    if r.recompute then how[#how + 1] = r.recompute .. " recompute" end
    return ("%s %s%s: modeled step %.4g ms, %s per device"):format(
      what, r.mesh, #how > 0 and " (" .. table.concat(how, ", ") .. ")" or "",
      r.step * 1e3, bytes_text(r.memory))
  end
  if req.is_plan and given_cost and given_cost.step then
    opts.note(("joint: the plan as given, %s: modeled step %.4g ms, %s " ..
               "per device"):format(mesh_text(p), given_cost.step * 1e3,
               bytes_text(given_cost.memory)))
  end
  local names = {}
  for name in pairs(res.recipes) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do
    opts.note(line("joint: " .. name .. "'s best", res.recipes[name]))
  end
  opts.note(("joint: %d candidates of %d devices on %d hosts in %.3g s; " ..
             "chosen %s"):format(#res.rows, req.joint_devices,
             req.joint_hosts or 1, res.seconds, res.row.strategy))
  local q = res.plan
  opts.strategy = res.row.strategy
  local fn, src = strategy_fn(res.row.strategy)
  local prov, seconds = run_search(q, opts, fn, src)
  prov.search.mesh = nil
  prov.search.joint = {devices = req.joint_devices,
                       hosts = req.joint_hosts or 1}
  return q, prov, seconds + res.seconds
end

-- search: {path | text, name, base_dir, is_plan, mesh, strategy, hardware,
-- seed, width, limit, seconds, devices, self_contained, placement,
-- topology, mesh_shape, no_share, progress = fn(what, done, total)} ->
-- {plan, step, memory, fits, evaluations, seconds}
local function search(req)
  if req.joint_devices and not req.is_plan then
    req.mesh = "dp=" .. req.joint_devices -- the joint search chooses it
  end
  local p, err = start_plan(req)
  if not p then return {error = err, code = "load"} end
  -- STRATEGY+overlap: the strategy, then the overlap search
  local strategy, with_overlap = req.strategy or "greedy", req.overlap
  if strategy:match("%+overlap$") then
    strategy, with_overlap = strategy:sub(1, -9), true
  end
  local opts = {strategy = strategy, mesh = req.mesh or mesh_text(p),
                hardware = req.hardware, seed = req.seed, width = req.width,
                limit = req.limit, seconds = req.seconds,
                devices = req.devices and "search" or nil,
                placement = req.placement or nil, topology = req.topology,
                mesh_shape = req.mesh_shape or nil,
                self_contained = req.self_contained, note = note_fn(req),
                no_share = req.no_share or nil, progress = req.progress}
  local fn, src, code, at = strategy_fn(opts.strategy)
  if not fn then return {error = src, code = code, at = at} end
  if opts.topology then
    local t, terr = placement.topology(opts.topology)
    if not t then return {error = "search: --topology: " .. terr, code = "usage"} end
    opts.topology_table = t
    if not opts.mesh_shape then -- a torus of another size is the caller's mistake
      local pok, ok, serr = pcall(p.set_topology, p, t, opts.hardware)
      if not pok then ok, serr = nil, ok end
      if not ok then return {error = "search: --topology: " .. tostring(serr), code = "usage"} end
    end
  end
  if opts.placement and not opts.topology and not p:topology() then
    return {error = "search: --placement search needs a topology: the " ..
            "plan's mesh has none (give one with --topology)", code = "usage"}
  end
  if opts.mesh_shape then
    local _, perr = placement.program_text(p)
    if perr then return {error = "search: " .. perr, code = "usage"} end
  end
  if opts.hardware then -- an unknown profile is the caller's mistake
    local _, herr = p:cost(opts.hardware)
    if herr and herr:find("unknown hardware profile", 1, true) then
      return {error = "search: " .. herr, code = "usage"}
    end
  end
  if req.joint_devices then
    local bad = joint.check(p, req.joint_devices, req.joint_hosts)
    if bad then return {error = bad, code = "usage"} end
  end
  req.ran = true
  local prov, seconds
  if req.joint_devices then
    p, prov, seconds = search_joint(req, p, opts)
    if not p then return prov end
  elseif opts.mesh_shape then
    p, prov, seconds = search_shapes(req, p, opts, fn, src)
  else
    prov, seconds = run_search(p, opts, fn, src)
  end
  if with_overlap then
    local q, res = overlap.search(p, {hardware = opts.hardware,
                                      seconds = opts.seconds,
                                      name = req.path or req.name})
    if q then
      opts.note(("overlap: %d entries for %d collectives of one layer%s: " ..
                 "modeled step %.4g ms, without overlap %.4g ms (%.2fx); " ..
                 "%.3g s"):format(res.entries, res.chains,
                 res.layers > 0 and (" (applied to its %d copies)"):format(res.layers) or "",
                 res.step * 1e3, res.step_no_overlap * 1e3,
                 res.step_no_overlap / res.step, res.seconds))
      p:close()
      p = q
      prov.search.overlap = true
    else -- a pipeline, manual regions: the plan as the strategy made it
      opts.note("overlap: not searched: " .. tostring(res))
    end
  end
  local ok, findings = p:validate()
  if not ok then
    return {error = "plan search: the plan it made is invalid", code = "invalid",
            findings = findings}
  end
  local c, cerr = p:cost(opts.hardware)
  if not c then error("plan search: " .. cerr, 0) end
  prov.cost = {step_seconds = c.step, memory_bytes = c.memory, fits = c.fits}
  p:set_provenance(prov)
  return {plan = p, step = c.step, memory = c.memory, fits = c.fits,
          evaluations = stats(p), seconds = seconds}
end

-- The folder of the plan a replay reads, where the strategy path its
-- provenance records is resolved against (as a program path is).
local function plan_dir(req)
  if req.path then return req.path:match("^(.*)/[^/]*$") or "." end
  return req.base_dir or "."
end

-- A relative path resolved against folder dir.
local function against(dir, path)
  if path:sub(1, 1) == "/" or dir == "." then return path end
  return dir .. "/" .. path
end

-- The strategy a replay runs: trusting nothing in the plan file. A
-- built-in runs by its name; a file strategy runs from the file the user
-- names (req.script), whose hash must be the recorded one, or from the
-- script the provenance carries, only when req.trust_embedded_script, and
-- then in the sandbox. Returns strategy_fn's values.
local function replay_strategy(req, rec, name)
  local what = req.path or req.name
  local function text(v) return type(v) == "string" and v or nil end
  rec = {script = text(rec.script), script_text = text(rec.script_text)}
  if req.script then
    -- the file named: from the working folder, else (a relative path, as
    -- the provenance records it) from the plan's folder
    local f, err = io.open(req.script, "r")
    if not f and req.script:sub(1, 1) ~= "/" then
      local alt = against(plan_dir(req), req.script)
      local g = io.open(alt, "r")
      if g then f, req.script = g, alt end
    end
    if not f then
      return nil, "cannot read strategy '" .. req.script ..
             "': " .. err, "io"
    end
    local src = f:read("a")
    f:close()
    if not rec.script then
      return nil, what .. ": its provenance records no script hash to check '" ..
             req.script .. "' against", "invalid"
    end
    if plan.hash_text(src) ~= rec.script then
      return nil, ("%s: '%s' is not the script the plan was made with " ..
                   "(its hash is %s; the provenance records %s)")
                  :format(what, req.script, plan.hash_text(src), rec.script),
             "invalid"
    end
    return strategy_fn(req.script, src)
  end
  if not name:match("%.lua$") then
    local fn, src, code, at = strategy_fn(name)
    if not fn then
      src = src .. " (the plan records strategy '" .. name .. "')"
    end
    return fn, src, code, at
  end
  if not rec.script_text then
    -- the path is never read unasked: named, as resolved against the
    -- plan's folder, for the user to pass
    return nil, ("%s: the plan was made with the strategy file '%s': name " ..
                 "it with --strategy FILE (--strategy %s)%s"):format(what,
                 name, against(plan_dir(req), name),
                 rec.script and " (its hash must be " .. rec.script .. ")" or ""),
           "usage"
  end
  if not req.trust_embedded_script then
    return nil, ("%s: its provenance carries the script of '%s'; replay " ..
                 "runs a script from a plan file only when told to " ..
                 "(--trust-embedded-script, in the sandbox), or name the " ..
                 "file with --strategy FILE"):format(what, name), "usage"
  end
  if rec.script and plan.hash_text(rec.script_text) ~= rec.script then
    return nil, ("%s: the script it carries does not have its recorded " ..
                 "hash %s"):format(what, tostring(rec.script)), "invalid"
  end
  -- from here on, the whole state is under the sandbox's limits
  req.sandbox_start()
  return strategy_fn(name, rec.script_text, req.sandbox_load)
end

-- replay: {path | text, name, base_dir, script, trust_embedded_script,
-- sandbox_start, sandbox_load} -> {plan, same, recorded,
-- replayed, strategy, note, diff, evaluations, seconds}: strip the plan's
-- own decisions, search again with what its provenance recorded, and
-- compare the hashes.
local function replay(req)
  local p, err = load_plan(req)
  if not p then return {error = err, code = "load"} end
  local want = p:hash()
  local rec = p:provenance()
  if not rec or type(rec.strategy) ~= "string" then
    return {error = (req.path or req.name) .. ": no search in its provenance",
            code = "notfound"}
  end
  local q = assert(load_plan(req))
  local with_overlap = rec.search and rec.search.overlap == true
  if with_overlap then -- searched again, from the plan without it
    local bare = overlap.without(q)
    q:close()
    q = bare
  end
  local opts = {strategy = rec.strategy, seed = rec.seed,
                hardware = rec.search and rec.search.hardware ~= "default" and
                           rec.search.hardware or nil,
                mesh = rec.search and rec.search.mesh,
                width = rec.search and rec.search.width,
                limit = rec.search and rec.search.limit,
                seconds = rec.search and rec.search.seconds,
                devices = rec.search and rec.search.devices,
                placement = rec.search and rec.search.placement == "search" or nil,
                topology = rec.search and rec.search.topology,
                -- the shape search chose the recorded mesh: the replay
                -- runs the strategy on it (and records the same)
                mesh_shape = rec.search and rec.search.mesh_shape == "search" or nil,
                no_share = rec.search and rec.search.share == false or nil,
                note = note_fn(req)}
  if type(opts.topology) == "string" then
    local t, terr = placement.topology(opts.topology)
    if not t then return {error = "replay: " .. terr, code = "invalid"} end
    opts.topology_table = t
  end
  local fn, src, code, at = replay_strategy(req, rec, opts.strategy)
  if not fn then return {error = src, code = code, at = at} end
  req.ran = true
  local prov, seconds = run_search(q, opts, fn, src)
  if with_overlap then
    local r, res = overlap.search(q, {hardware = opts.hardware,
                                      seconds = opts.seconds,
                                      name = req.path or req.name})
    if not r then error("replay: " .. res, 0) end
    q:close()
    q = r
  end
  local got = q:hash()
  local note
  if rec.script and prov.script ~= rec.script then
    note = ("strategy '%s' has changed since the plan was made (script %s, now %s)")
           :format(rec.strategy, tostring(rec.script), prov.script)
  end
  return {plan = q, same = got == want, recorded = want, replayed = got,
          strategy = rec.strategy, note = note,
          diff = got ~= want and p:diff(q) or nil,
          evaluations = stats(q), seconds = seconds}
end

return {search = search, replay = replay}
