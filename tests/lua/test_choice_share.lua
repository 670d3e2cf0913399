-- The recipes and greedy choose once per kind of op. util.recipe scores an op's
-- strategies only the first time it meets its key (the op's structure,
-- where its inputs stand, which are parameters or tables from consts) and
-- applies that choice to every op of a repeated layer. Checked against a
-- reference that scores every strategy of every op as the recipe's rule
-- says (the first of the highest score), on programs with repeated layers
-- and on the examples' plans, over meshes with tp, sp, cp, ep and fsdp
-- axes: the same strategy for every op. greedy takes a repeated op's
-- choice (util.choice_key) and makes the plan it makes with opts.share =
-- false, pricing every op, on the same programs and meshes. And the
-- sharing is real: on 8 layers both ask p:strategies no more often than
-- on 2.
local plan = require "plan"

local function check(cond, what) if not cond then error(what, 2) end end

local util = assert(load(plan.source("strategies/util"), "=util"))()
local function strategy(name)
  return assert(load(plan.source("strategies/" .. name), "=" .. name))(util)
end

local function clear(p)
  for _, op in ipairs(p:ops()) do p:clear_strategy(op) end
  for _, op in ipairs(p:ops()) do
    for _, t in ipairs(p:op(op).inputs) do
      if not p:tensor(t).producer then p:set_placement(t, nil) end
    end
  end
end

-- The reference: the recipe's scoring rule, written out plainly and run
-- on every strategy of every op (no memo of any kind).
local projections = {matmul = true, linear = true}
local function is_param(p, t)
  local x = p:tensor(t)
  return not x.producer and x.role == "param"
end
local function from_consts(p, t)
  local x = p:tensor(t)
  if not x.producer then return x.role == "const" end
  for _, u in ipairs(p:op(x.producer).inputs) do
    if not from_consts(p, u) then return false end
  end
  return true
end
local function want(p, op, j, a, cur, cfg, kind)
  local t = op.inputs[j]
  if a == cfg.ep and kind.expert then return "S(0)" end
  if a == cfg.tp and cfg.vocab and kind.vocab and j == 1 then return "S(0)" end
  local e
  if cur[j] then
    e = util.entries(cur[j])[a]
    if e:sub(1, 1) == "P" then e = "R" end
  elseif cfg.batch_set[a] then
    return (is_param(p, t) or from_consts(p, t)) and "R" or "S(0)"
  elseif a == cfg.cp then
    if from_consts(p, t) then return nil end
    return (is_param(p, t) or #p:tensor(t).shape < 2) and "R" or "S(1)"
  else
    e = "R"
  end
  if cfg.seq and a == cfg.tp then
    local x = p:tensor(t)
    local rank = #x.shape
    if kind.proj and j == 1 then
      if e ~= "S(" .. (rank - 1) .. ")" then e = "R" end
    elseif e == "R" and rank >= 3 and x.role ~= "param" and
           not from_consts(p, t) then
      e = "S(1)"
    end
  end
  return e
end
local function score(p, op, s, cur, cfg, kind)
  local total, naxes = 0, #p:mesh()
  for j = 1, #s["in"] do
    local e = util.entries(s["in"][j])
    for a = 1, naxes do
      if not (kind.proj and a == cfg.tp and is_param(p, op.inputs[j])) then
        local w = want(p, op, j, a, cur, cfg, kind)
        if w == nil or e[a] == w then
          total = total + (cfg.batch_set[a] and 100 or 10)
        end
      end
    end
  end
  local out = util.entries(s.out[1])
  if kind.proj and cfg.tp then
    local act = want(p, op, 1, cfg.tp, cur, cfg, kind)
    local rin, rout = #p:tensor(op.inputs[1]).shape, #p:tensor(op.outputs[1]).shape
    if act == "R" and out[cfg.tp] == "S(" .. (rout - 1) .. ")" then
      total = total + 30
    elseif act == "S(" .. (rin - 1) .. ")" and out[cfg.tp] == "P(sum)" then
      total = total + 30
    end
  end
  for a = 1, naxes do
    if out[a] and out[a]:sub(1, 1) == "P" and not (kind.proj and a == cfg.tp) then
      total = total - 5
    end
  end
  return total
end
local function reference(p, cfg)
  cfg.batch_set = {}
  for _, a in ipairs(cfg.batch or {}) do cfg.batch_set[a] = true end
  local placed, chose = {}, {}
  for _, name in ipairs(p:ops()) do
    local op = p:op(name)
    if not p:pinned(name) then
      local cur = util.current(p, op, placed)
      local kind = {}
      for j, t in ipairs(op.inputs) do
        if is_param(p, t) then
          if j >= 2 and projections[op.kind] then kind.proj = true end
          if j == 1 and op.kind == "embedding" then kind.vocab = true end
          if cfg.ep and #p:tensor(t).shape >= 3 then kind.expert = true end
        end
      end
      local best, best_score
      for _, s in ipairs(p:strategies(name)) do
        local v = score(p, op, s, cur, cfg, kind)
        if best_score == nil or v > best_score then best, best_score = s, v end
      end
      p:apply(name, best)
    end
    chose[name] = p:strategy(name)
    util.record(p, op, p:strategy(name), placed)
  end
  return chose
end

-- megatron's configuration of the recipe on p's mesh (as megatron.lua).
local function megatron_cfg(p)
  local mesh = p:mesh()
  local tp, seq = util.axis(p, "tp"), false
  if not tp and util.axis(p, "sp") then tp, seq = util.axis(p, "sp"), true end
  local ep, dp = util.axis(p, "ep"), util.axis(p, "dp")
  if not dp and tp ~= 1 and ep ~= 1 then dp = 1 end
  if not tp and #mesh >= 2 and dp == 1 and ep ~= 2 and util.axis(p, "cp") ~= 2 then
    tp = 2
  end
  local batch = {}
  if dp then batch[#batch + 1] = dp end
  if ep then batch[#batch + 1] = ep end
  return {batch = batch, tp = tp, ep = ep, cp = util.axis(p, "cp"),
          seq = seq and tp ~= nil, vocab = true}
end

local function same(p, chose, what)
  for _, name in ipairs(p:ops()) do
    local a, b = p:strategy(name), chose[name]
    check(a and b, what .. ": op " .. name .. " has no strategy")
    local ta = table.concat(a["in"], ",") .. ">" .. table.concat(a.out, ",")
    local tb = table.concat(b["in"], ",") .. ">" .. table.concat(b.out, ",")
    check(ta == tb, ("%s: op %s: the shared choice is %s, every op on its own %s")
                    :format(what, name, ta, tb))
  end
end

local tmp = os.tmpname()
local function gen_layers(n, extra)
  local cmd = ("python3 bench/gen_plan.py --layers %d --dp 2 --tp 4 %s -o - 2>/dev/null"
               .. " | sed '/^mesh:/,$d' > %s"):format(n, extra or "", tmp .. n)
  check(os.execute(cmd), "gen_plan.py failed")
  return tmp .. n
end

local cases = 0
local programs = {gen_layers(2), gen_layers(3, "--sp --qkv fused"),
                  "examples/mlp-program.yaml", "spec/vectors/valid/program-ops-moe.yaml",
                  "spec/vectors/valid/program-ops-gqa.yaml"}
local meshes = {"dp=2,tp=4", "dp=2,sp=4", "dp=2,fsdp=2,tp=4,cp=2", "dp=4,ep=2", "tp=8"}
for _, prog in ipairs(programs) do
  for _, mesh in ipairs(meshes) do
    local p = assert(plan.new{program = prog, mesh = mesh})
    local q = assert(plan.new{program = prog, mesh = mesh})
    util.recipe(p, megatron_cfg(p))
    same(p, reference(q, megatron_cfg(q)), prog .. " on " .. mesh)
    p:close(); q:close()
    cases = cases + 1
  end
end
-- the examples' plans, their decisions made again (pinned regions kept)
for _, path in ipairs{"examples/moe-experts.plan.yaml", "examples/dit-torus.plan.yaml",
                      "examples/models/llama-32l.recipe.plan.yaml",
                      "examples/models/mixtral-moe-layer.recipe.plan.yaml",
                      "examples/transformer-train.plan.yaml"} do
  local p, q = assert(plan.load(path)), assert(plan.load(path))
  clear(p); clear(q)
  util.recipe(p, megatron_cfg(p))
  same(p, reference(q, megatron_cfg(q)), path)
  p:close(); q:close()
  cases = cases + 1
end

-- greedy with its sharing against greedy pricing every op
local greedy = strategy("greedy")
local gcases = 0
for _, prog in ipairs(programs) do
  for _, mesh in ipairs(meshes) do
    for _, hw in ipairs{"h100", "a100"} do
      local p = assert(plan.new{program = prog, mesh = mesh})
      local q = assert(plan.new{program = prog, mesh = mesh})
      greedy(p, {outputs = p:outputs(), hardware = hw})
      greedy(q, {outputs = q:outputs(), hardware = hw, share = false})
      local chose = {}
      for _, name in ipairs(q:ops()) do chose[name] = q:strategy(name) end
      same(p, chose, "greedy: " .. prog .. " on " .. mesh .. ", " .. hw)
      p:close(); q:close()
      gcases = gcases + 1
    end
  end
end

-- Ops alike whose inputs stand apart: layer 0's first norm pinned to
-- each of its strategies in turn, so that layer 0's ops meet inputs
-- placed otherwise than layer 1's, which are the same ops
local pinned = 0
do
  local prog = programs[1]
  local p0 = assert(plan.new{program = prog, mesh = "dp=2,tp=4"})
  local list = p0:strategies("layers.0.ln1")
  p0:close()
  for k = 1, #list, math.max(1, #list // 6) do
    local p = assert(plan.new{program = prog, mesh = "dp=2,tp=4"})
    local q = assert(plan.new{program = prog, mesh = "dp=2,tp=4"})
    for _, x in ipairs{p, q} do
      x:pin{ops = {"layers.0.ln1"}, strategies = {["layers.0.ln1"] = list[k]}}
    end
    greedy(p, {outputs = p:outputs(), hardware = "h100"})
    greedy(q, {outputs = q:outputs(), hardware = "h100", share = false})
    local chose = {}
    for _, name in ipairs(q:ops()) do chose[name] = q:strategy(name) end
    same(p, chose, "greedy, layers.0.ln1 pinned to its strategy " .. k)
    p:close(); q:close()
    pinned = pinned + 1
  end
end
gcases = gcases + pinned

-- beam against a reference beam: every strategy of every op priced for
-- every partial plan, all the extensions sorted and the first kept
local function copy(t)
  local c = {}
  for k, v in pairs(t) do c[k] = v end
  return c
end
local function beam_reference(p, width)
  local beams = {{cost = 0, placed = {}, choice = {}}}
  for _, name in ipairs(p:ops()) do
    local op = p:op(name)
    local list = p:pinned(name) and {p:strategy(name)} or p:strategies(name)
    local nb = {}
    for bi, b in ipairs(beams) do
      for si, s in ipairs(list) do
        nb[#nb + 1] = {cost = b.cost + util.step_cost(p, op, s, b.placed, "h100"),
                       parent = b, s = s, key = bi * 100000 + si}
      end
    end
    table.sort(nb, function(x, y)
      if x.cost ~= y.cost then return x.cost < y.cost end
      return x.key < y.key
    end)
    beams = {}
    for i = 1, math.min(width, #nb) do
      local placed = copy(nb[i].parent.placed)
      for j, t in ipairs(op.inputs) do
        if placed[t] == nil then placed[t] = nb[i].s["in"][j] end
      end
      for k, t in ipairs(op.outputs) do placed[t] = nb[i].s.out[k] end
      local choice = copy(nb[i].parent.choice)
      choice[name] = nb[i].s
      beams[i] = {cost = nb[i].cost, placed = placed, choice = choice}
    end
  end
  return beams[1].choice
end
local beam = strategy("beam")
local bcases = 0
local beam_cases = {{1, "dp=2,tp=4", {1, 3, 8}}, {1, "dp=2,fsdp=2,tp=4,cp=2", {3}},
                    {2, "dp=2,sp=4", {1, 8}}, {3, "dp=2,tp=4", {2, 8}},
                    {4, "dp=4,ep=2", {3}}}
for _, bc in ipairs(beam_cases) do
  local prog, mesh = programs[bc[1]], bc[2]
  do
    for _, width in ipairs(bc[3]) do
      local expect
      for _, sh in ipairs{true, false} do
        local p = assert(plan.new{program = prog, mesh = mesh})
        if not expect then
          local q = assert(plan.new{program = prog, mesh = mesh})
          expect = beam_reference(q, width)
          q:close()
        end
        beam(p, {outputs = p:outputs(), hardware = "h100", width = width, share = sh})
        same(p, expect, ("beam (width %d, share %s): %s on %s")
                      :format(width, sh, prog, mesh))
        p:close()
        bcases = bcases + 1
      end
    end
  end
end

-- The sharing: p:strategies asked as often on 8 layers as on 2.
local function strategies_asked(prog, name, share)
  local p = assert(plan.new{program = prog, mesh = "dp=2,fsdp=2,tp=4,cp=2"})
  local asked = 0
  local proxy = setmetatable({}, {__index = function(_, k)
    return function(_, ...)
      if k == "strategies" then asked = asked + 1 end
      return p[k](p, ...)
    end
  end})
  strategy(name)(proxy, {outputs = p:outputs(), hardware = "h100", share = share})
  local nops = #p:ops()
  p:close()
  return asked, nops
end
local l2, l8 = gen_layers(2), gen_layers(8)
local counts = {}
for _, name in ipairs{"megatron", "greedy", "beam"} do
  local a2, n2 = strategies_asked(l2, name)
  local a8, n8 = strategies_asked(l8, name)
  check(n8 > 3 * n2, "8 layers have more ops than 2")
  check(a8 == a2, ("%s: p:strategies asked %d times on 8 layers, %d on 2")
                  :format(name, a8, a2))
  check(a2 < n2, ("%s: p:strategies asked %d times for %d ops"):format(name, a2, n2))
  counts[#counts + 1] = ("%s %d on 2 layers (%d ops), %d on 8 (%d ops)")
                        :format(name, a2, n2, a8, n8)
end
local u8, n8 = strategies_asked(l8, "greedy", false)
check(u8 == n8, ("greedy without sharing asked %d times for %d ops"):format(u8, n8))
os.remove(tmp); os.remove(tmp .. 2); os.remove(tmp .. 3); os.remove(tmp .. 8)
print(("choice sharing: recipe %d cases the same as every strategy scored, "
       .. "greedy %d the same as every op priced, beam %d the same as the "
       .. "reference beam; p:strategies: %s")
      :format(cases, gcases, bcases, table.concat(counts, "; ")))
