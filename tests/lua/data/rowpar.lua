-- A row-parallel strategy for rowmm-program.yaml (the placement and
-- shape search tests): the batch on dp, the contraction on tp, the output
-- a partial sum over tp, delivered replicated there (an all-reduce).
local util = ...
return function(p)
  local mesh = p:mesh()
  local dp, tp = util.axis(p, "dp"), util.axis(p, "tp")
  local function pl(a, b)
    local e = {}
    for i = 1, #mesh do e[i] = "R" end
    if dp and a then e[dp] = a end
    if tp and b then e[tp] = b end
    return table.concat(e)
  end
  assert(p:apply("fc", {["in"] = {pl("S(0)", "S(1)"), pl(nil, "S(0)")},
                        out = {pl("S(0)", "P(sum)")}}))
  assert(p:set_placement("x", pl("S(0)", "S(1)")))
  assert(p:set_placement("w", pl(nil, "S(0)")))
  return {y = pl("S(0)", nil)}
end
