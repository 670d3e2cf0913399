-- Distributed verification from Lua: this script is rank 0 of a mesh of
-- four, the other ranks are `plan verify --distributed` processes started
-- here as a launcher would; the verdict is the one-process one.
local plan = require "plan"

local function check(cond, what) if not cond then error(what, 2) end end
local function raises(f, words)
  local ok, err = pcall(f)
  check(not ok, "expected an error containing '" .. words .. "'")
  check(tostring(err):find(words, 1, true),
        "error '" .. tostring(err) .. "' lacks '" .. words .. "'")
end

local tool = assert(os.getenv("PLAN_TOOL"), "PLAN_TOOL names the plan tool")
local file = "examples/mlp-megatron.plan.yaml"
local p = assert(plan.load(file))
local dir = os.tmpname()
os.remove(dir) -- a fresh path: the rendezvous folder is made there
for r = 1, 3 do
  os.execute(string.format(
    'RANK=%d WORLD_SIZE=4 "%s" verify --distributed "%s" --timeout 60 %s ' ..
    '>/dev/null 2>&1 &', r, tool, dir, file))
end
local eq, text = p:verify{distributed = dir, rank = 0, world_size = 4,
                          timeout = 60}
check(eq == true, "distributed verify: " .. tostring(text))
check(text:find("distributed: 4 processes, one rank each", 1, true),
      "the report says how it ran")
os.execute(string.format('rmdir "%s" 2>/dev/null', dir))

-- what goes wrong: a rank without a folder, a rank outside the world, a
-- world that is not the mesh (nil and the reason), an unknown transport
raises(function() p:verify{rank = 0} end, "go with distributed")
raises(function() p:verify{distributed = dir, rank = 4, world_size = 4} end,
       "rank must lie in [0, world_size)")
local none, msg = p:verify{distributed = dir, rank = 0, world_size = 3}
check(none == nil and msg:find("one process per mesh rank", 1, true),
      "a world that is not the mesh")
local none2, msg2 = p:verify{distributed = dir, rank = 0, world_size = 4,
                             comm = "mpi"}
check(none2 == nil and msg2:find("no communicator named 'mpi'", 1, true),
      "an unknown communicator")
