-- megatron: the expert recipe, the baseline every search must match or
-- beat (Shoeybi et al., "Megatron-LM", 2019), found by pattern on the
-- graph (util.recipe):
--   * data parallel: the axis named dp (else the first axis that is not
--     tp) splits the batch, dim 0 of every activation; parameters are
--     replicated on it;
--   * tensor parallel: along the axis named tp (else the second), q/k/v
--     (or a fused qkv), gate and up are column parallel (the activation
--     replicated, the output features split), o and down row parallel
--     (the contraction split, a partial sum reduced once a block); the
--     ops between keep the head split; norms and residual adds run
--     replicated on tp;
--   * sequence parallel (Korthikanti et al., 2022) when the tp axis is
--     named sp (no axis named tp) or opts.sequence_parallel is set: norms
--     and residual adds split the sequence over that axis, gathered before
--     a column-parallel projection, reduce-scattered after a row-parallel
--     one;
--   * vocab parallel embedding: the table's rows (the vocabulary) split
--     over tp, its output a masked partial sum reduced where it is read
--     (opts.vocab_parallel = false keeps the table replicated); the
--     head is column parallel and the loss reads its logits split over
--     the vocabulary as they come (the vocab-parallel cross-entropy: the
--     op all-reduces each token's max, sum of exps and label logit);
--   * context parallel on an axis named cp: every input's sequence (dim
--     1) split over it, which the ops keep; attention's queries stay
--     split and its keys and values are gathered;
--   * expert parallel on an axis named ep: the ops that read expert
--     weights ([experts, in, out]) split the experts over it, every other
--     op the batch; the tokens move by all-to-all between the two.
local util = ...

return function(p, opts)
  local mesh = p:mesh()
  local tp = util.axis(p, "tp")
  local seq = opts and opts.sequence_parallel and true or false
  local vocab = not (opts and opts.vocab_parallel == false)
  if not tp and util.axis(p, "sp") then tp, seq = util.axis(p, "sp"), true end
  local ep = util.axis(p, "ep")
  local dp = util.axis(p, "dp")
  if not dp and tp ~= 1 and ep ~= 1 then dp = 1 end
  if not tp and #mesh >= 2 and dp == 1 and ep ~= 2 and util.axis(p, "cp") ~= 2 then
    tp = 2
  end
  local batch = {}
  if dp then batch[#batch + 1] = dp end
  if ep then batch[#batch + 1] = ep end
  return util.recipe(p, {batch = batch, tp = tp, ep = ep,
                         cp = util.axis(p, "cp"),
                         seq = seq and tp ~= nil, vocab = vocab})
end
