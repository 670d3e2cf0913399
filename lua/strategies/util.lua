-- Helpers shared by the built-in strategies (not a strategy itself).
local util = {}

-- The per-axis entries of a placement string: "S(0)RP(sum)" ->
-- {"S(0)", "R", "P(sum)"}.
function util.entries(pl)
  local out, i = {}, 1
  while i <= #pl do
    local c = pl:sub(i, i)
    if c == "R" or pl:sub(i + 1, i + 1) ~= "(" then
      out[#out + 1] = c; i = i + 1
    else
      local j = pl:find(")", i, true)
      out[#out + 1] = pl:sub(i, j); i = j + 1
    end
  end
  return out
end

-- A note for the user, its pieces joined: through opts.note, which the
-- search driver gives (plan search prints the notes on stderr), or on
-- stderr when the strategy runs without one.
-- Refuses the search: it cannot be done here (a size past a strategy's
-- limit), which is not a failure of the strategy: the caller gets
-- PLAN_EUNSUPPORTED ("cannot run here", exit 3) and the message, without
-- a traceback.
function util.refuse(...)
  local why = table.concat({...})
  error(setmetatable({unsupported = why},
                     {__tostring = function(e) return e.unsupported end}))
end

function util.note(opts, ...)
  local msg = table.concat({...})
  if opts.note then opts.note(msg) else io.stderr:write(msg, "\n") end
end

-- The index of the mesh axis named `name` (or nil).
function util.axis(p, name)
  for i, a in ipairs(p:mesh()) do
    if a.name == name then return i end
  end
end

-- Where each input of `op` stands before the op runs: the placement its
-- producer's strategy made, the leaf's storage placement, or nil (a leaf
-- not placed yet: free to take what the op wants).
function util.current(_p, op, placed)
  local cur = {}
  for j, t in ipairs(op.inputs) do cur[j] = placed[t] end
  return cur
end

-- After op's strategy s is chosen: record where its outputs stand, and
-- give each leaf input not placed yet the placement s wants (storage in
-- the consumer's layout costs nothing).
function util.record(p, op, s, placed)
  for j, t in ipairs(op.inputs) do
    if placed[t] == nil then
      placed[t] = s["in"][j]
      if not p:tensor(t).producer then p:set_placement(t, s["in"][j]) end
    end
  end
  for k, t in ipairs(op.outputs) do placed[t] = s.out[k] end
end

-- The time of strategy s for op, with the redistributions of its inputs
-- from where they stand.
function util.step_cost(p, op, s, placed, hw)
  local c = p:cost_op(op.name, s, hw)
  for j, t in ipairs(op.inputs) do
    local from = placed[t]
    if from and from ~= s["in"][j] then
      c = c + p:cost_redist(t, from, s["in"][j], hw)
    end
  end
  return c
end

-- What fixes a cost-driven choice for op (named name): its structure
-- (p:op_key: kind, attributes, operands' dtypes, shapes and roles, so its
-- strategies, their order and, but for calibrations keyed on names, their
-- costs) and where each input stands before it (placed[t], "?" for a leaf
-- not placed yet). Ops of repeated layers share it.
function util.choice_key(p, name, op, placed)
  local parts = {p:op_key(name)}
  for j, t in ipairs(op.inputs) do parts[j + 1] = placed[t] or "?" end
  return table.concat(parts, "\n")
end

-- The time of delivering the program outputs: partial values reduced.
function util.delivery(pl)
  local e = util.entries(pl)
  for i, x in ipairs(e) do
    if x:sub(1, 1) == "P" then e[i] = "R" end
  end
  return table.concat(e)
end

function util.delivery_cost(p, outputs, placed, hw)
  local c = 0
  for _, t in ipairs(outputs) do
    local to = util.delivery(placed[t])
    if to ~= placed[t] then c = c + p:cost_redist(t, placed[t], to, hw) end
  end
  return c
end

-- The searches' objective, additive over ops so that exact strategies can
-- decompose it: every op's compute under its strategy, plus every
-- redistribution of an input from where it stands to where the op wants
-- it (a leaf is stored where its first consumer wants it), plus delivering
-- the outputs. choice[i] is the strategy of the i-th op.
function util.objective(p, ops, choice, outputs, hw)
  local placed, c = {}, 0
  for i, name in ipairs(ops) do
    local op = p:op(name)
    c = c + util.step_cost(p, op, choice[i], placed, hw)
    for j, t in ipairs(op.inputs) do
      if placed[t] == nil then placed[t] = choice[i]["in"][j] end
    end
    for k, t in ipairs(op.outputs) do placed[t] = choice[i].out[k] end
  end
  return c + util.delivery_cost(p, outputs, placed, hw)
end

-- Program outputs are delivered where their producers leave them, except
-- partial values, which are reduced (R on those axes).
function util.deliver_outputs(p, placed, outputs)
  for _, t in ipairs(outputs) do p:set_placement(t, util.delivery(placed[t])) end
end

-- The layers of a program for the exact strategies (dp, ilp): the ops cut
-- after op i where at most two tensors are live (the residual stream, a
-- constant every layer reads), each segment {first, last} with a
-- structural signature `sig` (op kinds, shapes, strategy lists, wiring,
-- which tensors outlive it): two segments with one signature are the same
-- layer. `canon` names the tensors a segment touches canonically
-- (externals x1, x2... in first-use order, its outputs o<k>_<j>) and
-- `actual` maps back. info[i] = {op, list}; alive_after(t, i): t is read
-- after op i (or is an output).
function util.layers(p, info, alive_after)
  local n = #info
  local produced = {}
  local segments, start = {}, 1
  for i = 1, n do
    for _, t in ipairs(info[i].op.inputs) do produced[t] = true end
    for _, t in ipairs(info[i].op.outputs) do produced[t] = true end
    local count = 0
    for t in pairs(produced) do
      if alive_after(t, i) then count = count + 1 end
    end
    if count <= 2 or i == n then
      segments[#segments + 1] = {first = start, last = i}
      start = i + 1
    end
  end

  -- a segment's structure, and the canonical names of the tensors it
  -- touches: externals x1, x2... in first-use order, its outputs o<k>_<j>
  local function describe(seg)
    local canon, ext, parts = {}, {}, {}
    local local_out = {}
    for i = seg.first, seg.last do
      local op = info[i].op
      for k, t in ipairs(op.outputs) do local_out[t] = "o" .. (i - seg.first) .. "_" .. k end
    end
    for i = seg.first, seg.last do
      local op = info[i].op
      local sig = {op.kind}
      for _, t in ipairs(op.inputs) do
        local c = local_out[t]
        if not c then
          c = canon[t]
          if not c then
            ext[#ext + 1] = t
            c = "x" .. #ext
          end
        end
        canon[t] = c
        local x = p:tensor(t)
        sig[#sig + 1] = c .. ":" .. x.dtype .. "[" .. table.concat(x.shape, ",") .. "]" ..
                        (alive_after(t, seg.last) and "+" or "-")
      end
      for _, t in ipairs(op.outputs) do
        canon[t] = local_out[t]
        local x = p:tensor(t)
        sig[#sig + 1] = canon[t] .. ":" .. x.dtype .. "[" .. table.concat(x.shape, ",") .. "]" ..
                        (alive_after(t, seg.last) and "+" or "-")
      end
      for _, s in ipairs(info[i].list) do
        sig[#sig + 1] = table.concat(s["in"], ",") .. ">" .. table.concat(s.out, ",")
      end
      parts[#parts + 1] = table.concat(sig, " ")
    end
    seg.canon, seg.ext = canon, ext
    seg.sig = table.concat(parts, "\n")
    local actual = {}
    for t, c in pairs(canon) do actual[c] = t end
    seg.actual = actual
  end
  for _, seg in ipairs(segments) do describe(seg) end

  return segments
end

-- Each unit's signature and the canonical names of the tensors it touches
-- (util.repeats documents the fields); key[i]: op i's structural key.
local function describe(units, opv, key, alive_after)
  for _, u in ipairs(units) do
    local canon, ext, parts, local_out = {}, {}, {}, {}
    for i = u.first, u.last do
      for k, t in ipairs(opv[i].outputs) do
        local_out[t] = "o" .. (i - u.first) .. "_" .. k
      end
    end
    for i = u.first, u.last do
      local op = opv[i]
      local sig = {key[i]}
      for _, t in ipairs(op.inputs) do
        local c = local_out[t] or canon[t]
        if not c then
          ext[#ext + 1] = t
          c = "x" .. #ext
        end
        canon[t] = c
        sig[#sig + 1] = c .. (alive_after(t, u.last) and "+" or "-")
      end
      for _, t in ipairs(op.outputs) do
        canon[t] = local_out[t]
        sig[#sig + 1] = canon[t] .. (alive_after(t, u.last) and "+" or "-")
      end
      parts[#parts + 1] = table.concat(sig, " ")
    end
    u.canon, u.ext = canon, ext
    u.sig = table.concat(parts, "\n")
    local actual = {}
    for t, c in pairs(canon) do actual[c] = t end
    u.actual = actual
  end
end

-- cross[c]: the tensors crossing the cut before op c (c = 1 .. n + 1):
-- touched before op c and read at or after it, or an output.
local function crossings(opv, alive_after)
  local n, first, last, delta = #opv, {}, {}, {}
  for i = 1, n do
    for _, t in ipairs(opv[i].inputs) do
      first[t] = first[t] or i
      last[t] = i
    end
    for _, t in ipairs(opv[i].outputs) do first[t] = first[t] or i end
  end
  for t, f in pairs(first) do
    local l = alive_after(t, n) and n + 1 or (last[t] or f)
    if l > f then
      delta[f + 1] = (delta[f + 1] or 0) + 1
      delta[l + 1] = (delta[l + 1] or 0) - 1
    end
  end
  local cross, acc = {}, 0
  for c = 1, n + 1 do
    acc = acc + (delta[c] or 0)
    cross[c] = acc
  end
  return cross
end

-- The repeated layers of a program (AutoParallel's observation: a model
-- is a few distinct layers repeated), found before any strategy is
-- listed. Each op's key is its structure (p:op_key: kind, attributes,
-- operand dtypes, shapes and roles; a pinned op's strategy) and its
-- wiring (each input as the distance back to its producer, or a leaf).
-- The layer is the period P of the longest run of ops whose keys repeat P
-- later (the candidate periods are the distances between equal keys; the
-- most ops covered by whole copies wins, ties the smaller P); its copies
-- start where the fewest tensors cross the cut. Ops outside the copies
-- are units of their own.
--
-- Returns the units in program order, each {first, last, sig, canon,
-- actual, ext}: `sig` the structural signature (two units with one sig
-- are the same layer: same keys, same wiring in canonical names, the
-- same tensors outliving it), `canon` the canonical names of the tensors
-- the unit touches (externals x1, x2... in first-use order, its outputs
-- o<k>_<j>), `actual` the way back. alive_after(t, i): t is read after
-- op i (or is an output).
function util.repeats(p, ops, alive_after)
  local n = #ops
  local opv, key, producer = {}, {}, {}
  for i, name in ipairs(ops) do
    local op = p:op(name)
    opv[i] = op
    local parts = {p:op_key(name)}
    if p:pinned(name) then
      local s = p:strategy(name)
      parts[#parts + 1] = "pin " .. table.concat(s["in"], ",") .. ">" ..
                          table.concat(s.out, ",")
    end
    for _, t in ipairs(op.inputs) do
      local pr = producer[t]
      parts[#parts + 1] = pr and (i - pr[1]) .. "." .. pr[2] or "L"
    end
    for k, t in ipairs(op.outputs) do producer[t] = {i, k} end
    key[i] = table.concat(parts, " ")
  end

  -- the candidate periods: the distances between consecutive equal keys,
  -- the most frequent first
  local seen, gaps, cand = {}, {}, {}
  for i = 1, n do
    local j = seen[key[i]]
    if j then
      local g = i - j
      if not gaps[g] then cand[#cand + 1] = g end
      gaps[g] = (gaps[g] or 0) + 1
    end
    seen[key[i]] = i
  end
  table.sort(cand, function(a, b)
    if gaps[a] ~= gaps[b] then return gaps[a] > gaps[b] end
    return a < b
  end)
  local P, a0, b0, covered = nil, nil, nil, 0
  for c = 1, math.min(#cand, 8) do
    local g = cand[c]
    local i = 1
    while i + g <= n do
      if key[i] == key[i + g] then
        local j = i
        while j + g <= n and key[j] == key[j + g] do j = j + 1 end
        -- ops i .. j - 1 + g repeat with period g
        local len = j - i + g
        local cov = (len // g) * g
        if len // g >= 2 and (cov > covered or (cov == covered and g < P)) then
          P, a0, b0, covered = g, i, j - 1 + g, cov
        end
        i = j + 1
      else
        i = i + 1
      end
    end
  end

  local units = {}
  local function single(i) units[#units + 1] = {first = i, last = i} end
  if not P then
    for i = 1, n do single(i) end
  else
    local cross = crossings(opv, alive_after)
    local start, best_copies, best_cross
    for c = a0, a0 + P - 1 do
      local copies = (b0 - c + 1) // P
      if best_copies == nil or copies > best_copies or
         (copies == best_copies and cross[c] < best_cross) then
        start, best_copies, best_cross = c, copies, cross[c]
      end
    end
    for i = 1, start - 1 do single(i) end
    for k = 0, best_copies - 1 do
      units[#units + 1] = {first = start + k * P, last = start + (k + 1) * P - 1}
    end
    for i = start + best_copies * P, n do single(i) end
  end

  describe(units, opv, key, alive_after)
  return units, opv, key
end

-- The units cut where a tensor passes untouched (the residual stream of a
-- pre-norm layer, read by the norm and again by the residual add): a
-- unit is cut after an op that touches a tensor and before the next op
-- that reads it, when `gap` or more ops lie between the two. A piece's
-- solve then depends only on the tensors it touches, so the pieces
-- between are solved once for every placement of the passed tensor (a
-- unit's solves are per entry state). Returns the pieces, described as
-- util.repeats describes its units; key is util.repeats' third result.
function util.split_units(units, opv, key, alive_after, gap)
  -- live after op i: cross[i + 1]
  local cross = crossings(opv, alive_after)
  local out = {}
  for _, u in ipairs(units) do
    local touched, cut = {}, {}
    local narrow = math.max(cross[u.first], cross[u.last + 1]) + 1
    for i = u.first, u.last do
      for _, t in ipairs(opv[i].inputs) do
        local a = touched[t]
        if a and i - a - 1 >= gap then
          if cross[a + 1] <= narrow then cut[a] = true end
          if cross[i] <= narrow then cut[i - 1] = true end
        end
        touched[t] = i
      end
      for _, t in ipairs(opv[i].outputs) do touched[t] = i end
    end
    local start = u.first
    for i = u.first, u.last do
      if cut[i] or i == u.last then
        out[#out + 1] = {first = start, last = i}
        start = i + 1
      end
    end
  end
  describe(out, opv, key, alive_after)
  return out
end

-- The strategy lists and op costs of the exact strategies, shared by
-- repeated layers: info[i] = {op, list, cost} where an op of a unit that
-- repeats an earlier one (the same sig) shares that one's list and cost
-- table (cost[si], filled by the caller), so the strategies of a
-- repeated op are listed and priced once. A repeated op whose cost under
-- its first strategy differs from its counterpart's (the cost model keys
-- on names: calibrations) makes its unit a class of its own. With
-- `share` false every op lists its own. Sets u.class (the units of one
-- class are solved once) and u.rep (the class's first unit).
function util.share_lists(p, ops, units, opv, hw, share)
  local info, rep_of = {}, {}
  local function own(i)
    local name = ops[i]
    local list = p:pinned(name) and {p:strategy(name)} or p:strategies(name)
    info[i] = {op = opv[i], list = list, cost = {}}
  end
  for ui, u in ipairs(units) do
    local r = share and rep_of[u.sig]
    if r then
      local same = true
      for i = u.first, u.last do
        local ri = r.first + (i - u.first)
        local s = info[ri].list[1]
        if s then
          local c = info[ri].cost[1]
          if c == nil then
            c = p:cost_op(ops[ri], s, hw)
            info[ri].cost[1] = c
          end
          if p:cost_op(ops[i], s, hw) ~= c then same = false; break end
        end
      end
      if not same then r = nil end
    end
    if r then
      for i = u.first, u.last do
        local ri = r.first + (i - u.first)
        info[i] = {op = opv[i], list = info[ri].list, cost = info[ri].cost}
      end
      u.class, u.rep = r.class, r
    else
      for i = u.first, u.last do own(i) end
      u.class, u.rep = ui, u
      if share and not rep_of[u.sig] then rep_of[u.sig] = u end
    end
  end
  return info
end

-- The expert recipes (megatron, fsdp), found by pattern on the graph.
-- cfg.batch: the axes that split the batch (dim 0 of every activation;
-- parameters replicated on them); cfg.tp: the tensor-parallel axis or
-- nil; cfg.seq: sequence parallelism on tp (want_entry); cfg.cp: the
-- context-parallel axis (every input's sequence, dim 1, split); cfg.ep: the
-- expert-parallel axis (also in cfg.batch), splitting the experts of the
-- ops that read [experts, ...] weights, the rest batch-split. On tp, a
-- projection (a matmul or linear reading a parameter) whose activation
-- arrives replicated is column parallel (its output split on the last
-- dim), one whose activation arrives split on its last dim is row
-- parallel (a partial sum out, reduced where the next op reads it);
-- every other op keeps the layout its inputs arrive in (the head split of
-- attention, the replicated norms and residual adds), partial sums
-- reduced first. Among an op's legal strategies it takes the one that
-- matches those wants best; ties go to the earlier strategy.
local projections = {matmul = true, linear = true}

local function is_param(p, t)
  local x = p:tensor(t)
  return not x.producer and x.role == "param"
end
util.is_param = is_param

-- Whether tensor t is a const or computed from consts alone (a rotary
-- table cut from a const): a table, never an activation. Memoized in
-- cfg.from_consts.
local function from_consts(p, t, cfg)
  local memo = cfg.from_consts
  if memo[t] ~= nil then return memo[t] end
  local x = p:tensor(t)
  local yes
  if not x.producer then
    yes = x.role == "const"
  else
    yes = true
    for _, u in ipairs(p:op(x.producer).inputs) do
      if not from_consts(p, u, cfg) then yes = false; break end
    end
  end
  memo[t] = yes
  return yes
end

-- What op's input j should be on axis a. With cfg.seq (sequence
-- parallelism on tp), an activation of rank 3 or more that would be
-- replicated on tp outside a projection is split on its sequence (dim 1)
-- instead, a partial sum reduce-scattered there; a projection gathers its
-- activation unless it arrives split on its features (row parallel).
local function want_entry(p, op, j, a, cur, cfg, kind)
  local t = op.inputs[j]
  local e
  if a == cfg.ep and kind.expert then
    -- expert parallel: the expert dim (0) of the weights and of the
    -- dispatched tokens that meet them
    return "S(0)"
  end
  if a == cfg.tp and cfg.vocab and kind.vocab and j == 1 then
    -- vocab parallel (Megatron): the table's rows split, each rank looks
    -- up the ids it owns, the masked partial sums reduced where read
    return "S(0)"
  end
  if cur[j] then
    e = util.entries(cur[j])[a]
    if e:sub(1, 1) == "P" then e = "R" end
  elseif cfg.batch_set[a] then
    -- parameters and tables have no batch dim
    return (is_param(p, t) or from_consts(p, t, cfg)) and "R" or "S(0)"
  elseif a == cfg.cp then
    -- context parallel: an input's sequence (dim 1) split, which every op
    -- then keeps (attention's queries split, its keys and values gathered)
    local x = p:tensor(t)
    if from_consts(p, t, cfg) then return nil end -- a table: cut as its reader is
    return (is_param(p, t) or #x.shape < 2) and "R" or "S(1)"
  else
    e = "R"
  end
  if cfg.seq and a == cfg.tp then
    local x = p:tensor(t)
    local rank = #x.shape
    if kind.proj and j == 1 then
      if e ~= "S(" .. (rank - 1) .. ")" then e = "R" end
    elseif e == "R" and rank >= 3 and x.role ~= "param" and
           not from_consts(p, t, cfg) then
      e = "S(1)"
    end
  end
  return e
end

-- The per-axis entries of placement text pl, parsed once per text (memo
-- a table owned by the caller; the lists are shared: read only).
local function entries_of(memo, pl)
  local e = memo[pl]
  if not e then
    e = util.entries(pl)
    memo[pl] = e
  end
  return e
end

-- The best strategy of op under cfg: the first with the highest score.
-- What an input should be on an axis (want_entry) does not depend on the
-- strategy, so it is asked once per input and axis, not once per
-- strategy (an op has hundreds of strategies on a 4-axis mesh).
local function recipe_best(p, op, strategies, cur, cfg, kind)
  local proj = kind.proj
  local naxes, tp, batch_set = #cfg.mesh, cfg.tp, cfg.batch_set
  local memo = cfg.entries_memo
  local nin = #op.inputs
  local want, skip = {}, {}
  for j = 1, nin do
    -- a projection's parameters on tp follow from its output's layout
    skip[j] = proj and tp and is_param(p, op.inputs[j])
    local w = {}
    for a = 1, naxes do
      if not (skip[j] and a == tp) then
        local e = want_entry(p, op, j, a, cur, cfg, kind)
        w[a] = e == nil and true or e -- true: any entry will do
      end
    end
    want[j] = w
  end
  local col_act, row_act, col_out
  if proj and tp then
    local act = want_entry(p, op, 1, tp, cur, cfg, kind)
    local rank_in = #p:tensor(op.inputs[1]).shape
    local rank_out = #p:tensor(op.outputs[1]).shape
    col_act = act == "R"
    col_out = "S(" .. (rank_out - 1) .. ")"
    row_act = act == "S(" .. (rank_in - 1) .. ")"
  end
  local best, best_score
  for _, s in ipairs(strategies) do
    local score = 0
    local sin = s["in"]
    for j = 1, #sin do
      local e, w = entries_of(memo, sin[j]), want[j] or {}
      for a = 1, naxes do
        local x = w[a]
        if x == true or (x ~= nil and e[a] == x) then
          score = score + (batch_set[a] and 100 or 10)
        end
      end
    end
    local out = entries_of(memo, s.out[1])
    if proj and tp then
      if col_act and out[tp] == col_out then
        score = score + 30 -- column parallel
      elseif row_act and out[tp] == "P(sum)" then
        score = score + 30 -- row parallel
      end
    end
    for a = 1, naxes do
      -- a partial sum leaves only a row-parallel projection
      local x = out[a]
      if x and x:sub(1, 1) == "P" and not (proj and a == tp) then
        score = score - 5
      end
    end
    if best_score == nil or score > best_score then
      best, best_score = s, score
    end
  end
  return best
end

-- What decides an op's recipe strategy beyond the op's own structure
-- (p:op_key: kind, attributes, operands' dtypes, shapes and roles, which
-- fix its strategies and their order): where its inputs stand, and which
-- are parameters or tables from consts. Ops of repeated layers share it,
-- so the choice is made once.
local function recipe_key(p, name, op, cur, cfg, kind)
  local parts = {p:op_key(name), kind.proj and "p" or "-",
                 kind.vocab and "v" or "-", kind.expert and "e" or "-"}
  for j, t in ipairs(op.inputs) do
    parts[#parts + 1] = (cur[j] or "?") ..
                        (is_param(p, t) and "+p" or "") ..
                        (from_consts(p, t, cfg) and "+c" or "")
  end
  return table.concat(parts, "\n")
end

-- Applies the recipe of cfg to every op p leaves free; returns where each
-- tensor ends up.
function util.recipe(p, cfg)
  cfg.mesh = p:mesh()
  cfg.from_consts = {}
  cfg.batch_set = {}
  cfg.entries_memo = {}
  for _, a in ipairs(cfg.batch or {}) do cfg.batch_set[a] = true end
  local placed, chosen = {}, {} -- chosen: the strategy by recipe_key

  for _, name in ipairs(p:ops()) do
    local op = p:op(name)
    if not p:pinned(name) then
      local cur = util.current(p, op, placed)
      -- a projection reads a parameter; an expert op one of rank 3 or
      -- more ([experts, in, out]), when the mesh has an ep axis
      local kind = {}
      for j = 1, #op.inputs do
        local t = op.inputs[j]
        if is_param(p, t) then
          if j >= 2 and projections[op.kind] then kind.proj = true end
          if j == 1 and op.kind == "embedding" then kind.vocab = true end
          if cfg.ep and #p:tensor(t).shape >= 3 then kind.expert = true end
        end
      end
      local key = recipe_key(p, name, op, cur, cfg, kind)
      local best = chosen[key]
      if not best then
        best = recipe_best(p, op, p:strategies(name), cur, cfg, kind)
        chosen[key] = best
      end
      p:apply(name, best)
    end
    util.record(p, op, p:strategy(name), placed)
  end
  return placed
end

-- Clears every decision a search makes again: unpinned strategies, leaf
-- storage placements and, unless keep_outputs, delivered output placements.
function util.clear_decisions(p, keep_outputs)
  for _, name in ipairs(p:ops()) do
    if not p:pinned(name) then p:clear_strategy(name) end
  end
  for _, name in ipairs(p:ops()) do
    for _, t in ipairs(p:op(name).inputs) do
      if not p:tensor(t).producer then p:set_placement(t, nil) end
    end
  end
  if not keep_outputs then
    for _, t in ipairs(p:outputs()) do p:set_placement(t, nil) end
  end
end

return util
