-- luacheck (make lint): the strategies, the search driver and the Lua tests
-- run on Lua 5.4; a test script's globals are its own helpers.
std = "lua54"
max_line_length = false
files["tests/lua"] = {allow_defined_top = true}
