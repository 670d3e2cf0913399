-- The joint search (make bench-joint, run as `plan run
-- bench/bench_joint.lua`): the 32-layer Llama-3-8B-shaped training step
-- (examples/models/llama-32l.pp.plan.yaml: batch 16 x 2048 tokens, H100
-- profile) on 32 devices in 4 hosts and on 64 devices in 8 hosts. The
-- baselines, measured in the same run: the hand-written pipelined recipe
-- (dp=2 x tp=4 x pp=4, 1F1B, 8 microbatches, on 32 devices), priced as it
-- is, and one megatron run on that plan (what the search costs against a
-- single recipe run). Prints the candidates' count and time, each recipe's
-- best, the chosen plan and the ratios.
local plan = require "plan"
local util = assert(load(plan.source("strategies/util"), "=util"))()
local joint = assert(load(plan.source("joint"), "=joint"))(util)
local megatron = assert(load(plan.source("strategies/megatron"),
                             "=megatron"))(util)

local dir = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
local path = dir .. "/../examples/models/llama-32l.pp.plan.yaml"
local p = assert(plan.load(path))
local hand = assert(p:cost("h100"))

local t0 = os.clock()
local q = assert(plan.load(path))
util.clear_decisions(q)
util.deliver_outputs(q, megatron(q, {hardware = "h100", outputs = q:outputs()}),
                     q:outputs())
local one = os.clock() - t0
q:close()

local function row_text(r)
  local how = {}
  if r.microbatches then
    how[#how + 1] = ("%d microbatches, %s"):format(r.microbatches, r.schedule)
  end
  if r.recompute then how[#how + 1] = r.recompute .. " recompute" end
  return ("%s%s: %.1f ms, %.2f GiB"):format(r.mesh, #how > 0 and
    " (" .. table.concat(how, ", ") .. ")" or "", r.step * 1e3, r.memory / 2^30)
end

print(("hand-written recipe dp=2,tp=4,pp=4 (8 microbatches, 1f1b): %.1f ms, " ..
       "%.2f GiB; one megatron run on it %.2f s"):format(hand.step * 1e3,
       hand.memory / 2^30, one))
for _, case in ipairs({{32, 4}, {64, 8}}) do
  local r = assert(joint.search(p, {devices = case[1], hosts = case[2],
                                    hardware = "h100"}))
  print(("%d devices on %d hosts: %d candidates in %.2f s (%.1fx one recipe run)")
        :format(case[1], case[2], #r.rows, r.seconds, r.seconds / one))
  for _, name in ipairs({"megatron", "fsdp"}) do
    if r.recipes[name] then print("  " .. name .. "'s best " .. row_text(r.recipes[name])) end
  end
  print(("  chosen (%s) %s%s"):format(r.row.strategy, row_text(r.row),
        case[1] == 32 and ("; %.2fx the hand-written recipe's step on these " ..
        "devices"):format(r.row.step / hand.step) or ""))
  r.plan:close()
end
