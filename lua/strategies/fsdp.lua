-- fsdp: ZeRO-3 / fully sharded data parallelism (Rajbhandari et al.,
-- "ZeRO", 2020; PyTorch FSDP), combined with Megatron tensor parallelism
-- on an axis named tp when the mesh has one (TorchTitan's fsdp x tp):
--   * the axis named fsdp (else dp, else the first) and an axis named dp
--     beside it split the batch, dim 0 of every activation;
--   * every parameter is stored sharded on dim 0 along the fsdp axis and
--     used whole on it: its placement says S(0) there while every op that
--     reads it wants R, so each use all-gathers it, and the backward's
--     mirror reduce-scatters its gradient into the shard (the optimizer
--     then updates only the shard);
--   * on tp, the projections are column and row parallel as in megatron
--     (util.recipe).
-- A parameter whose dim 0 the shards do not divide stays as it is used.
local util = ...

return function(p, _opts)
  local mesh = p:mesh()
  local tp = util.axis(p, "tp")
  local dp = util.axis(p, "dp")
  local shard = util.axis(p, "fsdp") or dp
  if not shard then
    for i = 1, #mesh do
      if i ~= tp then shard = i; break end
    end
  end
  local batch = {shard}
  if dp and dp ~= shard then batch[2] = dp end
  local placed = util.recipe(p, {batch = batch, tp = tp,
                                 cp = util.axis(p, "cp")})
  if not shard then return placed end
  local done = {}
  for _, name in ipairs(p:ops()) do
    for _, t in ipairs(p:op(name).inputs) do
      if not done[t] and util.is_param(p, t) and placed[t] then
        done[t] = true
        local e = util.entries(placed[t])
        -- dim 0 holds the shards of every axis splitting it, this one too
        local parts = mesh[shard].size
        for a, x in ipairs(e) do
          if x == "S(0)" and a ~= shard then parts = parts * mesh[a].size end
        end
        if e[shard] == "R" and p:tensor(t).shape[1] % parts == 0 then
          e[shard] = "S(0)"
          placed[t] = table.concat(e)
          p:set_placement(t, placed[t])
        end
      end
    end
  end
  return placed
end
