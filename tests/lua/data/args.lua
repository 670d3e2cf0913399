-- `plan run` with many arguments: they arrive as the chunk's ... and in arg.
local n = select("#", ...)
assert(n == #arg and select(n, ...) == arg[n], "the arguments")
print(string.format("%d arguments, the last %s", n, arg[n]))
