-- A manual region's body (run as sandboxed Lua at lowering): an op call
-- that raises leaves nothing behind for the next op, and an op's
-- attribute table is the caller's, unchanged. Raises on failure.
local plan = require "plan"

local function check(cond, what) if not cond then error(what, 2) end end

local src = assert(io.open("examples/mlp-manual.plan.yaml")):read("a")
-- The manual example with its gelu line replaced by `lines`.
local function with_body(lines)
  local text, n = src:gsub("local a = gelu%(h%)", function() return lines end)
  check(n == 1, "the example's gelu line")
  return assert(plan.parse(text, "m.yaml", "examples"))
end
local function verifies(lines, what)
  local eq, text = with_body(lines):verify()
  check(eq == true, what .. ": " .. tostring(text))
end

-- an op that raises after reading its attributes (an input that is no
-- tensor), caught by the body: its attributes (names made at run time, so
-- collected once the call is gone) do not reach the next op
verifies([[
        pcall(gelu, "no tensor", {[("bo" .. "gus")] = ("va" .. "lue")})
        for i = 1, 20000 do local junk = {i, tostring(i)} end
        local a = gelu(h)]], "attributes of a call that raised")
-- the same with an attribute refused while they are read, after another
-- (a list whose length can be taken once)
verifies([[
        local taken = 0
        local once = setmetatable({}, {__len = function()
          taken = taken + 1
          if taken > 1 then error("taken twice") end
          return 0
        end})
        pcall(transpose, h, {[("k" .. 1)] = once, [("k" .. 2)] = once})
        for i = 1, 20000 do local junk = {i, tostring(i)} end
        local a = gelu(h)]], "attributes of a call refused while read")
-- and with more attributes than the builder takes: refused as they are
-- staged, the ones staged before dropped
verifies([[
        local at = {}
        for i = 1, 9 do at["k" .. i] = i end
        local ok, err = pcall(gelu, h, at)
        assert(not ok and err:find("too many attributes"), err)
        local a = gelu(h)]], "more attributes than the builder takes")
-- and with too many operands
verifies([[
        pcall(gelu, h, h, h, h, h, h, h, h, h, h, h, h, h, h, h, h, h,
              {[("bo" .. "gus")] = 1})
        local a = gelu(h)]], "attributes of a call with too many operands")
-- a builder's refusal caught by the body leaves the next op alone too
verifies([[
        pcall(matmul, h, h, {[("bo" .. "gus")] = 1})
        local a = gelu(h)]], "attributes of a call the builder refused")

-- one attribute table for two calls: the list in it is read, not replaced
verifies([[
        local at = {dims = {0, 1}}
        local t = transpose(h, at)
        assert(type(at.dims) == "table" and at.dims[2] == 1, "dims kept")
        local a = gelu(transpose(t, at))]], "an attribute table used twice")

-- an op of several outputs: each its own handle
verifies([[
        local p1, p2 = split(all_gather(h, "tp", 1),
                             {dim = 1, sizes = {24, 40}, outputs = 2})
        assert(tostring(p1):find("[8, 24]", 1, true) and
               tostring(p2):find("[8, 40]", 1, true), tostring(p2))
        local a = gelu(h)]], "an op of two outputs")
print("test_region: ok")
