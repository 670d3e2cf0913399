local plan = require "plan"
local p = assert(plan.load("examples/mlp-megatron.plan.yaml"))
p:op("no-such-op")
