-- The interactive session of `plan run -i` (cli/run.c), as `lua -i` has
-- one: the plan module loaded as the global `plan`, a line read at a time
-- (an unfinished statement continues on the next line), each expression's
-- values printed, a plan as its table of ops and strategies; the last
-- value is kept in `_`. An error prints its message and the session goes
-- on. Returns function(input, output, editor), which reads to the end of
-- input; editor (on a terminal, cli/line_edit.c) reads the lines instead,
-- with line editing and history, and prints the prompt itself.
local plan = require "plan"

-- A plan (the module's userdata) or not: it answers p:ops().
local function ops_of(v)
  if type(v) ~= "userdata" then return nil end
  local ok, ops = pcall(function() return v:ops() end)
  return ok and type(ops) == "table" and ops or nil
end

-- A plan as a table: one row per op, its kind and strategy.
local function plan_table(p, ops)
  local rows, w = {}, {2, 4}
  for _, name in ipairs(ops) do
    local s = p:strategy(name)
    local st = s and ("in [" .. table.concat(s["in"], ", ") .. "] out [" ..
                      table.concat(s.out, ", ") .. "]") or "-"
    if p:pinned(name) then st = st .. " (pinned)" end
    rows[#rows + 1] = {name, p:op(name).kind, st}
    w[1] = math.max(w[1], #name)
    w[2] = math.max(w[2], #rows[#rows][2])
  end
  local out = {tostring(p) .. "  " .. p:hash(),
               ("  %-" .. w[1] .. "s  %-" .. w[2] .. "s  %s"):format("op", "kind", "strategy")}
  for _, r in ipairs(rows) do
    out[#out + 1] = ("  %-" .. w[1] .. "s  %-" .. w[2] .. "s  %s"):format(r[1], r[2], r[3])
  end
  return table.concat(out, "\n")
end

local function show(output, v)
  local ops = ops_of(v)
  output:write(ops and plan_table(v, ops) or tostring(v), "\n")
end

return function(input, output, editor)
  _G.plan = plan
  local pending
  while true do
    local prompt = pending and ">> " or "> "
    local line
    if editor then
      line = editor:read(prompt)
    else
      output:write(prompt)
      output:flush()
      line = input:read("l")
    end
    if not line then
      output:write("\n")
      return
    end
    local src = pending and pending .. "\n" .. line or line
    local chunk, err = load("return " .. src, "=stdin", "t")
    if not chunk then chunk, err = load(src, "=stdin", "t") end
    if not chunk and err:find("<eof>$") then
      pending = src -- an unfinished statement: read on
    elseif not chunk then
      pending = nil
      output:write(err, "\n")
    else
      pending = nil
      local r = table.pack(xpcall(chunk, function(m)
        return debug and debug.traceback(tostring(m), 2) or tostring(m)
      end))
      if not r[1] then
        output:write(tostring(r[2]), "\n")
      elseif r.n > 1 then
        for i = 2, r.n do show(output, r[i]) end
        _G._ = r[r.n]
      end
    end
  end
end
