-- The installed Lua module from a stock lua5.4 (tests/install/run.sh):
-- prints the file `require "plan"` loads, then the plan hash of arg[1].
local found = package.searchpath("plan", package.cpath)
local plan = require "plan"
local p = assert(plan.load(arg[1]))
print(found)
print(p:hash())
