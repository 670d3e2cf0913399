-- hetero: strategies and shard ratios for a mesh of unlike devices
-- (docs/heterogeneous.md). Each candidate strategy (the recipes megatron
-- and fsdp, the greedy search and the exact dp; the first that are legal
-- here) is run, the LP of lua/ratios.lua gives its ratios for the devices'
-- hardware, and the candidate with the least modeled step (its ratios
-- applied) is kept: the strategies and the ratios chosen jointly as the
-- best of these (strategy, LP ratios) pairs, each pair exact in its
-- ratios. A note says what was chosen and what the ratios gain over even
-- pieces. On a mesh of like devices the LP gives even pieces and the
-- plan is the best candidate's.
local plan = require "plan"
local util = ...

local ratios = assert(load(assert(plan.source("ratios")), "=ratios.lua", "t"))(util)

local CANDIDATES = {"megatron", "fsdp", "greedy", "dp"}

local function strategy(name)
  return assert(load(assert(plan.source("strategies/" .. name)),
                     "=strategies/" .. name .. ".lua", "t"))(util)
end

-- Runs candidate `name` on p, delivers the outputs and solves its ratios:
-- the placements it returned and the LP's solution, or nil and a message.
local function try(p, name, opts)
  util.clear_decisions(p, true)
  local ok, placed = pcall(strategy(name), p, opts)
  if not ok or type(placed) ~= "table" then return nil, tostring(placed) end
  util.deliver_outputs(p, placed, opts.outputs)
  local valid = p:validate()
  if not valid then return nil, "an invalid plan" end
  local sok, sol = pcall(ratios.solve, p, opts)
  if not sok then return nil, tostring(sol) end
  return placed, sol
end

return function(p, opts)
  local best, best_sol
  for _, name in ipairs(opts.candidates or CANDIDATES) do
    local placed, sol = try(p, name, opts)
    if placed and (best_sol == nil or sol.step < best_sol.step) then
      best, best_sol = name, sol
    end
  end
  if not best then error("hetero: no candidate strategy applies", 0) end
  local placed, sol = try(p, best, opts)
  ratios.apply(p, sol, placed, opts)
  util.note(opts, ("hetero: %s with ratios %s: modeled step %.4g ms, " ..
                   "even pieces %.4g ms (%.2fx)"):format(best,
                   ratios.describe(sol), sol.step * 1e3, sol.even * 1e3,
                   sol.step > 0 and sol.even / sol.step or 1))
  return placed
end
