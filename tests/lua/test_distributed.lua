-- Distributed verification from Lua: under mpirun on localhost, rank 0
-- of a mesh of four is this script (in `plan run`), the other ranks are
-- `plan verify --distributed` processes; the verdict is the one-process
-- one. Started plainly, the script launches that job and checks it.
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
if os.getenv("OMPI_COMM_WORLD_RANK") then -- rank 0 of the job
  local eq, text = p:verify{distributed = true, timeout = 60}
  check(eq == true, "distributed verify: " .. tostring(text))
  check(text:find("distributed: 4 processes, one rank each", 1, true),
        "the report says how it ran")
  return
end
local me = debug.getinfo(1, "S").source:gsub("^@", "")
local ok = os.execute(string.format(
  -- (the ranks' leaks unchecked under the sanitizers: Open MPI's
  -- finalize unloads its components, their allocations unnamed leaks)
  'OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ' ..
  'LSAN_OPTIONS=detect_leaks=0 timeout 120 ' ..
  'mpirun --oversubscribe --mca btl self,vader -quiet -np 1 "%s" run "%s" : ' ..
  '-np 3 "%s" verify --distributed --timeout 60 %s >/dev/null',
  tool, me, tool, file))
check(ok == true, "the job under mpirun failed")
local dir = os.tmpname()
os.remove(dir)

-- what goes wrong: a rank without a folder, a rank outside the world, a
-- world that is not the mesh (nil and the reason), an unknown transport
raises(function() p:verify{rank = 0} end, "go with distributed")
raises(function() p:verify{distributed = dir, rank = 4, world_size = 4} end,
       "rank must lie in [0, world_size)")
local none, msg = p:verify{distributed = dir, rank = 0, world_size = 3}
check(none == nil and msg:find("one process per mesh rank", 1, true),
      "a world that is not the mesh")
local none2, msg2 = p:verify{distributed = dir, rank = 0, world_size = 4,
                             comm = "tcp"}
check(none2 == nil and msg2:find("no communicator named 'tcp'", 1, true),
      "an unknown communicator")
