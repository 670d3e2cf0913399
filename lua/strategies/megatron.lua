-- megatron: the expert recipe, the baseline every search must match or
-- beat (Shoeybi et al., "Megatron-LM", 2019; Korthikanti et al., "Reducing
-- Activation Recomputation in Large Transformer Models", 2022):
--   * data parallel: the axis named dp (else the first) splits the batch,
--     dim 0 of every activation;
--   * tensor parallel: along the axis named tp (else the second), a matmul
--     whose activation arrives replicated is column parallel (its output
--     features split), and one whose activation arrives split on its
--     features is row parallel (the contraction split, a partial sum out),
--     so each MLP or attention block needs one reduction; ops in between
--     keep the layout they receive when their rule allows it.
-- Among an op's legal strategies it takes the best by that recipe; ties go
-- to the earlier strategy in the canonical list.
local util = ...

local matmuls = {matmul = true, linear = true}

return function(p, _opts)
  local dp = util.axis(p, "dp") or 1
  local tp = util.axis(p, "tp") or (dp == 1 and 2 or 1)
  if #p:mesh() < 2 then tp = nil end
  local placed = {}
  for _, name in ipairs(p:ops()) do
    local op = p:op(name)
    if not p:pinned(name) then
      local cur = util.current(p, op, placed)
      local best, best_score
      for _, s in ipairs(p:strategies(name)) do
        local score = 0
        local e1 = util.entries(s["in"][1])
        if e1[dp] == "S(0)" then score = score + 100 end
        for j = 1, #s["in"] do
          if cur[j] == nil or cur[j] == s["in"][j] then score = score + 10 end
        end
        if tp then
          -- tensor parallelism never splits the batch
          if util.entries(s["in"][1])[tp] == "S(0)" then score = score - 50 end
          local uses_tp = false
          for j = 1, #s["in"] do
            if util.entries(s["in"][j])[tp] ~= "R" then uses_tp = true end
          end
          if uses_tp then score = score + 5 end
          if matmuls[op.kind] then
            local act = cur[1] and util.entries(cur[1])[tp] or "R"
            local out = util.entries(s.out[1])[tp]
            if act == "R" and out:sub(1, 1) == "S" then score = score + 3 end
            if act ~= "R" and out:sub(1, 1) == "P" then score = score + 3 end
          end
        end
        if best_score == nil or score > best_score then
          best, best_score = s, score
        end
      end
      p:apply(name, best)
    end
    util.record(p, op, p:strategy(name), placed)
  end
  return placed
end
