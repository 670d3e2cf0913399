-- The expert recipes found by pattern on the graph: megatron on the
-- Llama-3-8B layer places every projection weight as the hand-written
-- Megatron recipe does (and the whole 32-layer model, vocab-parallel
-- embedding included, every op as its recipe), is modeled within a few
-- percent of it and
-- verifies EQUAL on the reduced program; its sequence-parallel form makes
-- the hand-written transformer block; on the Mixtral layer (ep) it makes
-- the expert-parallel recipe, and the DiT block on dp x sp verifies; on
-- the 2-D MLP it is still column then row parallel; fsdp stores every parameter sharded on dim 0
-- along the fsdp (or dp) axis, splits the batch there, keeps megatron's
-- tp, and verifies EQUAL on the training examples.
local plan = require "plan"

local function check(cond, what) if not cond then error(what, 2) end end

local tool = assert(os.getenv("PLAN_TOOL"), "PLAN_TOOL names the plan tool")
local util = assert(load(plan.source("strategies/util"), "=util"))()
local function strategy(name)
  return assert(load(plan.source("strategies/" .. name), "=" .. name))(util)
end

-- A search from a plan file (its decisions cleared) or a program on a mesh.
local function search(input, mesh, name, extra)
  local p = mesh and assert(plan.new{program = input, mesh = mesh})
                  or assert(plan.load(input))
  for _, op in ipairs(p:ops()) do p:clear_strategy(op) end
  for _, op in ipairs(p:ops()) do
    for _, t in ipairs(p:op(op).inputs) do
      if not p:tensor(t).producer then p:set_placement(t, nil) end
    end
  end
  local opts = {outputs = p:outputs(), hardware = "h100"}
  for k, v in pairs(extra or {}) do opts[k] = v end
  local placed = strategy(name)(p, opts)
  util.deliver_outputs(p, placed, p:outputs())
  local ok, findings = p:validate()
  check(ok, name .. ": invalid plan: " .. tostring(findings[1]))
  return p
end

-- `plan verify --reduce` on p (a self-contained plan), its report line.
local function verify_reduced(p)
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(p:text(true))
  f:close()
  local pipe = assert(io.popen(tool .. " verify --reduce " .. path .. " 2>&1"))
  local out = pipe:read("a")
  local ok = pipe:close()
  os.remove(path)
  return ok, out
end

local function param_placements(p)
  local out = {}
  for _, op in ipairs(p:ops()) do
    for _, t in ipairs(p:op(op).inputs) do
      if util.is_param(p, t) then out[t] = p:placement(t) or "RR" end
    end
  end
  return out
end

-- Every op of `ref` takes the same strategy in `got`.
local function same_strategies(ref, got, what, name)
  for _, op in ipairs(ref:ops()) do
    local a, b = ref:strategy(op), got:strategy(op)
    check(table.concat(a["in"], ",") == table.concat(b["in"], ",") and
          table.concat(a.out, ",") == table.concat(b.out, ","),
          what .. ": " .. op .. " differs from " .. name)
  end
end

-- megatron on the Llama-3-8B layer (dp=2 x tp=8) is the Megatron recipe
local recipe_file = "examples/models/llama3-8b-layer.recipe.plan.yaml"
local recipe = assert(plan.load(recipe_file))
local m = search(recipe_file, nil, "megatron")
local want, got = param_placements(recipe), param_placements(m)
local projections = 0
for t, pl in pairs(want) do
  check(got[t] == pl, "megatron: " .. t .. " is " .. tostring(got[t]) ..
        ", the recipe has " .. pl)
  if pl ~= "RR" then projections = projections + 1 end
end
check(projections == 7, "the recipe splits 7 projection weights, not " .. projections)
same_strategies(recipe, m, "megatron", "the recipe")
local rc, mc = recipe:cost("h100").step, m:cost("h100").step
check(math.abs(mc - rc) <= 0.03 * rc,
      string.format("megatron %.4g s, the recipe %.4g s", mc, rc))
local ok, out = verify_reduced(m)
check(ok and out:find("EQUAL", 1, true), "megatron llama: " .. out)

-- the whole 32-layer model (dp=2 x tp=8): every op and parameter as the
-- hand-written recipe, the vocab-parallel embedding included (its table's
-- rows split over tp, the lookup a masked partial sum); with
-- vocab_parallel = false the table stays replicated
local l32_file = "examples/models/llama-32l.recipe.plan.yaml"
local l32_recipe = assert(plan.load(l32_file))
local l32 = search(l32_file, nil, "megatron")
for t, pl in pairs(param_placements(l32_recipe)) do
  check(param_placements(l32)[t] == pl, "megatron llama-32l: " .. t .. " is " ..
        tostring(param_placements(l32)[t]) .. ", the recipe has " .. pl)
end
check(param_placements(l32)["embed.weight"] == "RS(0)",
      "megatron: the embedding is not vocab parallel")
-- the vocab-parallel loss: the head's logits read split over tp as they
-- come, no gather before the loss
check(table.concat(l32:strategy("loss")["in"], ",") == "S(0)S(2),S(0)R",
      "megatron: the loss is not vocab parallel: " ..
      table.concat(l32:strategy("loss")["in"], ","))
same_strategies(l32_recipe, l32, "megatron llama-32l", "the recipe")
ok, out = verify_reduced(l32)
check(ok and out:find("EQUAL", 1, true), "megatron llama-32l: " .. out)
check(param_placements(search(l32_file, nil, "megatron",
                             {vocab_parallel = false}))["embed.weight"] == "RR",
      "megatron: vocab parallel with opts.vocab_parallel = false")

-- expert parallel on the Mixtral layer (ep=8): the experts split where
-- they meet their weights, the tokens elsewhere, as the recipe has it
local moe_file = "examples/models/mixtral-moe-layer.recipe.plan.yaml"
local moe_recipe = assert(plan.load(moe_file))
local moe = search(moe_file, nil, "megatron")
for t, pl in pairs(param_placements(moe_recipe)) do
  check(param_placements(moe)[t] == pl, "megatron ep: " .. t .. " is " ..
        tostring(param_placements(moe)[t]) .. ", the recipe has " .. pl)
end
same_strategies(moe_recipe, moe, "megatron ep", "the recipe")
ok, out = verify_reduced(moe)
check(ok and out:find("EQUAL", 1, true), "megatron mixtral: " .. out)

-- the DiT block on dp x sp: tensor and sequence parallel, and it verifies
local dit = search("examples/models/dit-block.recipe.plan.yaml", nil, "megatron")
check(dit:placement("attn.q.weight") == "RS(1)" and dit:placement("attn.o.weight") == "RS(0)",
      "megatron dit: q " .. tostring(dit:placement("attn.q.weight")))
ok, out = verify_reduced(dit)
check(ok and out:find("EQUAL", 1, true), "megatron dit: " .. out)

-- the 2-D MLP: still column, then row parallel
local mlp = search("examples/mlp-program.yaml", "dp=2,tp=2", "megatron")
local s1, s2 = mlp:strategy("mlp.fc1"), mlp:strategy("mlp.fc2")
check(s1["in"][1] == "S(0)R" and s1["in"][2] == "RS(1)" and s1.out[1] == "S(0)S(1)",
      "megatron fc1 is column parallel: " .. table.concat(s1["in"], ","))
check(s2["in"][1] == "S(0)S(1)" and s2["in"][2] == "RS(0)" and s2.out[1] == "S(0)P(sum)",
      "megatron fc2 is row parallel: " .. s2.out[1])

-- sequence parallel: the hand-written Megatron-SP transformer block
local block = "examples/transformer-block.plan.yaml"
local hand = assert(plan.load(block))
local sp = search(block, nil, "megatron", {sequence_parallel = true})
same_strategies(hand, sp, "megatron sequence parallel", block)
check(sp:strategy("block.ln1")["in"][1] == "S(0)S(1)", "ln1 is not sequence parallel")
local eq0, text0 = sp:verify{mode = "exact"}
check(eq0, "megatron sequence parallel: " .. text0)
-- a mesh whose tensor-parallel axis is named sp: the same plan
local f0 = assert(io.open(block, "r"))
local src = f0:read("a"):gsub("axes: %[dp=2, tp=2%]", "axes: [dp=2, sp=2]")
f0:close()
local named = assert(plan.parse(src, "sp.plan.yaml"))
for _, op in ipairs(named:ops()) do named:clear_strategy(op) end
util.deliver_outputs(named, strategy("megatron")(named, {outputs = named:outputs()}),
                     named:outputs())
check(named:mesh()[2].name == "sp", "the mesh is not dp x sp")
for _, op in ipairs(hand:ops()) do
  check(table.concat(named:strategy(op)["in"], ",") == table.concat(hand:strategy(op)["in"], ","),
        "megatron on dp x sp: " .. op .. " differs from " .. block)
end
-- without the flag the norms are replicated on tp
local nosp = search(block, nil, "megatron")
check(nosp:strategy("block.ln1")["in"][1] == "S(0)R", "ln1 without sequence parallelism")
check(nosp:strategy("block.attn.qkv").out[1] == "S(0)S(2)", "qkv is not column parallel")

-- fsdp: every parameter sharded on dim 0 along dp, tp as megatron's
for _, file in ipairs{"examples/mlp-train.plan.yaml", "examples/transformer-train.plan.yaml"} do
  local p = search(file, nil, "fsdp")
  local mp = search(file, nil, "megatron")
  local n = 0
  for t, pl in pairs(param_placements(p)) do
    local e, em = util.entries(pl), util.entries(param_placements(mp)[t])
    check(e[1] == "S(0)", "fsdp: " .. file .. ": " .. t .. " is " .. pl)
    check(e[2] == em[2], "fsdp: " .. file .. ": " .. t .. " on tp is " .. e[2] ..
          ", megatron's " .. em[2])
    n = n + 1
  end
  check(n >= 2, "fsdp: " .. file .. ": " .. n .. " parameters")
  for _, op in ipairs(p:ops()) do
    local s = p:strategy(op)
    for j, t in ipairs(p:op(op).inputs) do
      if util.is_param(p, t) then
        check(util.entries(s["in"][j])[1] == "R", "fsdp: " .. op .. " uses " .. t .. " sharded")
      end
    end
  end
  local eq, text = p:verify{mode = "exact"}
  check(eq, "fsdp on " .. file .. ": " .. text)
end
-- a mesh with an fsdp axis: the batch and the shards on it
local f = search("examples/mlp-program.yaml", "fsdp=4", "fsdp")
check(f:placement("w1") == "S(0)" and f:placement("w2") == "S(0)",
      "fsdp=4: weights " .. tostring(f:placement("w1")) .. ", " .. tostring(f:placement("w2")))
check(f:strategy("mlp.fc1")["in"][1] == "S(0)", "fsdp=4: the batch is not split")
local eq, text = f:verify{mode = "exact"}
check(eq, "fsdp on fsdp=4: " .. text)
-- the llama layer under fsdp x tp verifies on the reduced program
local fl = search(recipe_file, nil, "fsdp")
check(fl:placement("attn.q.weight") == "S(0)S(1)" and fl:placement("mlp.down.weight") == "S(0)S(0)",
      "fsdp x tp on llama: " .. tostring(fl:placement("attn.q.weight")))
ok, out = verify_reduced(fl)
check(ok and out:find("EQUAL", 1, true), "fsdp llama: " .. out)
print("recipes: ok")
