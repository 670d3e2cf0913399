-- The tour's heterogeneous figures (docs/heterogeneous.md), run as
-- `plan run examples/hetero.lua PLAN...`: for each plan, its devices split
-- in two halves by device id, H100s first, A100s after (as two hosts of
-- unlike GPUs would be; for a pipeline plan, the first half of the
-- stages on H100s), the shard ratios the LP gives its strategies and
-- the modeled step with even pieces and with those ratios; for a pipeline
-- plan, the stage cut sized to the devices against the even cut. Then
-- the DiT block's searched placement on a 4x4 TPU v5e torus.
local plan = require "plan"
local util = assert(load(plan.source("strategies/util"), "=util"))()
local ratios = assert(load(plan.source("ratios"), "=ratios"))(util)

for _, path in ipairs(arg) do
  local p = assert(plan.load(path))
  local n = #p:devices()
  local hw = {}
  for d = 1, n do hw[d] = d <= n // 2 and "h100" or "a100" end
  local name = path:match("[^/]*$")
  local pp = util.axis(p, "pp")
  if pp then
    -- the first half of the stages on H100s: by each rank's pp index
    local mesh, inner = p:mesh(), 1
    for a = pp + 1, #mesh do inner = inner * mesh[a].size end
    for r, dev in ipairs(p:devices()) do
      local s = ((r - 1) // inner) % mesh[pp].size
      hw[dev + 1] = s < mesh[pp].size // 2 and "h100" or "a100"
    end
    local cut = ratios.stage_cut(p, {device_hardware = hw})
    print(("  %-34s stages %s layers (H100 stages first): slowest stage " ..
           "%.3g ms, even cut %s"):format(name, table.concat(cut.counts, "+"),
           cut.seconds * 1e3, cut.even and ("%.3g ms (%.2fx)"):format(
           cut.even * 1e3, cut.even / cut.seconds) or "n/a"))
  else
    local sol = ratios.solve(p, {device_hardware = hw})
    print(("  %-34s %d H100 + %d A100: ratios %s: modeled step %.3g ms, " ..
           "even pieces %.3g ms (%.2fx)"):format(name, n // 2, n - n // 2,
           ratios.describe(sol), sol.step * 1e3, sol.even * 1e3,
           sol.even / sol.step))
  end
end

-- The DiT block's inference step on 16 chips of a wrapped 4x4 TPU v5e
-- torus (a what-if topology: links from the tpu-v5e profile) with the
-- sequence split 16 ways (the recipe's all-to-alls around attention and
-- the ring collectives of its sp axis): the placement search's curve
-- against the default row-major order.
do
  local dir = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
  local dit = assert(plan.load(dir .. "/models/dit-block.recipe.plan.yaml"))
  local text = dit:text(true):gsub("axes: %[dp=2, sp=4%]", "axes: [dp=1, sp=16]", 1)
  dit:close()
  local p = assert(plan.parse(text, "dit-block on sp=16"))
  local r = assert(p:search_placement{topology = {torus = {dims = {4, 4}}},
                                      hardware = "tpu-v5e"})
  print(("  %-34s 4x4 tpu-v5e torus, sp=16: placement %s of %d: modeled " ..
         "step %.4g ms, row-major %.4g ms (%.4fx)"):format("dit-block (inference)",
         r.curve, r.candidates, r.step * 1e3, r.default * 1e3, r.gain))
end
