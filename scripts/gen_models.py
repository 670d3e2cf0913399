#!/usr/bin/env python3
"""Writes the model programs of examples/models/ at real shapes, each with
its expert recipe plan (and, for the 32-layer Llama, a pipelined training
plan). The searched plans (*.searched.plan.yaml) are made from the recipes
by `plan search` (examples/models/README.md gives the commands); this
script does not write them.

Models:
  gpt2-small-block  one GPT-2 small block: layernorm, q/k/v/o linear with
                    bias, 12 heads, causal softmax attention, gelu MLP 3072;
                    hidden 768, seq 1024, batch 8. Megatron tp=4 x dp=2.
  llama3-8b-layer   one Llama-3-8B decoder layer: RMSNorm, RoPE (theta
                    500000), grouped-query attention (32 query heads, 8 kv
                    heads, head dim 128, kv heads repeated in place by
                    repeat_interleave), SwiGLU MLP 14336; hidden 4096,
                    seq 2048, batch 4. Megatron tp=8 x dp=2.
  llama-32l         32 such layers with a vocab-parallel embedding (128256),
                    final norm, lm head and cross-entropy loss; batch 16.
                    Megatron tp=8 x dp=2, and a 1F1B pipeline dp=2 x tp=4 x
                    pp=4 (8 layers a stage, 8 microbatches) trained with SGD.
  dit-block         a video diffusion-transformer block for inference
                    (adaLN-zero modulation, QK-norm, full attention, gelu
                    MLP): hidden 3072, 24 heads of 128, MLP 12288, 32760
                    tokens (21 latent frames of 30 x 52), batch 2 (the
                    classifier-free-guidance pair). Ulysses sequence
                    parallel: tokens sharded over sp=4, heads sharded
                    around attention, all-to-all in between; dp=2 over
                    the batch.

  mixtral-moe-layer a Mixtral-8x7B-style sparse MoE block: router
                    (softmax, top 2 of 8, renormalised), GShard dispatch
                    (each sequence a group, capacity 1280), SwiGLU experts
                    of 14336, weighted combine; hidden 4096, seq 4096,
                    batch 8. Expert parallel over ep=8, an all-to-all
                    to the experts and one back.

Output is deterministic: the same arguments give the same bytes.

usage: gen_models.py [-o DIR] [MODEL...]   (default: every model into
                                            examples/models)
"""

import argparse
import math
import os
import sys

TOOL = "scripts/gen_models.py"


class Plan:
    """A program with the recipe's decisions, written as a plan."""

    def __init__(self, name, axes):
        self.name = name
        self.axes = axes          # [(axis, size)], major to minor
        self.tensors = []         # (name, text)
        self.ops = []             # text
        self.strategies = []      # (op, text)
        self.placements = []      # (tensor, text)
        self.op_names = set()

    def pl(self, **entries):
        """A compact placement: the named axes' entries, R elsewhere."""
        for ax in entries:
            if ax not in [a for a, _ in self.axes]:
                raise ValueError("no mesh axis " + ax)
        return "".join(entries.get(a, "R") for a, _ in self.axes)

    def tensor(self, name, text, placement=None):
        self.tensors.append((name, text))
        if placement is not None:
            self.placements.append((name, placement))

    def param(self, name, shape, dtype, placement):
        self.tensor(name, "{shape: [%s], dtype: %s, role: param}"
                    % (", ".join(str(s) for s in shape), dtype), placement)

    def op(self, name, kind, ins, outs, s_in, s_out, attrs=None):
        if name in self.op_names:
            raise ValueError("op %s twice" % name)
        self.op_names.add(name)
        if isinstance(outs, str):
            outs = [outs]
        if isinstance(s_out, str):
            s_out = [s_out]
        if len(ins) != len(s_in) or len(outs) != len(s_out):
            raise ValueError("op %s: strategy arity" % name)
        o = outs[0] if len(outs) == 1 else "[%s]" % ", ".join(outs)
        line = "{name: %s, op: %s, in: [%s], out: %s" % (
            name, kind, ", ".join(ins), o)
        if attrs:
            line += ", attrs: {%s}" % attrs
        self.ops.append(line + "}")
        so = s_out[0] if len(s_out) == 1 else "[%s]" % ", ".join(s_out)
        self.strategies.append((name, "{in: [%s], out: %s}"
                                % (", ".join(s_in), so)))


def glob_strategies(strategies, layers):
    """Strategies of layers.N.X, the same for every N, as one pattern
    layers.*.X each; the other ops keep their exact names."""
    if layers < 2:
        return strategies
    by_suffix, order, out = {}, [], []
    for n, s in strategies:
        if n.startswith("layers."):
            i, suffix = n[len("layers."):].split(".", 1)
            if suffix not in by_suffix:
                by_suffix[suffix] = {}
                order.append(suffix)
            by_suffix[suffix][int(i)] = s
        else:
            out.append((n, s))
    # A pattern layers.*.X also matches layers.N.Y.X: no suffix may end
    # another one after a dot (two patterns on one op are an error).
    for a in order:
        for b in order:
            if a != b and b.endswith("." + a):
                raise ValueError("pattern suffixes %s and %s overlap" % (a, b))
    pats = []
    for suffix in order:
        vals = by_suffix[suffix]
        if sorted(vals) != list(range(layers)) or len(set(vals.values())) != 1:
            raise ValueError("layers differ at " + suffix)
        pats.append(('"layers.*.%s"' % suffix, vals[0]))
    # Keep the file's order readable: embedding first, then the layer
    # patterns, then what follows the layers.
    head = [x for x in out if x[0] in ("embed",)]
    tail = [x for x in out if x[0] not in ("embed",)]
    return head + pats + tail


def write(path, p, header, outputs, loss=None, pipeline=None, training=None,
          provenance=None, devices_per_host=None, layers=1, devices=None):
    lines = []
    for c in header:
        lines.append(("# " + c).rstrip())
    lines.append('libplan: "1.0"')
    lines.append("program:")
    lines.append("  name: %s" % p.name)
    lines.append("  tensors:")
    for n, t in p.tensors:
        lines.append("    %s: %s" % (n, t))
    lines.append("  ops:")
    for o in p.ops:
        lines.append("    - %s" % o)
    lines.append("  outputs: [%s]" % ", ".join(n for n, _ in outputs))
    if loss:
        lines.append("  loss: %s" % loss)
    lines.append("mesh:")
    lines.append("  axes: [%s]" % ", ".join("%s=%d" % a for a in p.axes))
    if devices:
        lines.append("  devices: [%s]" % ", ".join(str(d) for d in devices))
    else:
        lines.append("  devices: iota")
    if devices_per_host:
        lines.append("  devices_per_host: %d" % devices_per_host)
    lines.append("placements:")
    for n, pl in p.placements:
        lines.append("  %s: %s" % (n, pl))
    lines.append("strategies:")
    for n, s in glob_strategies(p.strategies, layers):
        lines.append("  %s: %s" % (n, s))
    lines.append("outputs:")
    for n, pl in outputs:
        lines.append("  %s: %s" % (n, pl))
    if pipeline:
        lines.extend(pipeline)
    if training:
        lines.extend(training)
    if provenance:
        lines.append("provenance: {%s}" % provenance)
    with open(path, "w", newline="\n") as f:
        f.write("\n".join(lines) + "\n")


def dims(shape):
    return ", ".join(str(s) for s in shape)


# ---- GPT-2 small block ---------------------------------------------------------

def gpt2_small_block(outdir):
    B, S, H, NH, F = 8, 1024, 768, 12, 3072
    D = H // NH
    dt = "bf16"
    p = Plan("gpt2-small-block", [("dp", 2), ("tp", 4)])
    X = p.pl(dp="S(0)")                   # [B, S, H]: batch over dp
    R = p.pl()
    COL_W = p.pl(tp="S(0)")               # linear weight [out/tp, in]
    COL_B = p.pl(tp="S(0)")               # its bias [out/tp]
    ROW_W = p.pl(tp="S(1)")               # linear weight [out, in/tp]
    ROW_B = p.pl(tp="P(sum)")             # the bias enters once, as a partial
    COL = p.pl(dp="S(0)", tp="S(2)")      # [B, S, H/tp]
    HEADS = p.pl(dp="S(0)", tp="S(2)")    # [B, S, NH/tp, D]
    BHSD = p.pl(dp="S(0)", tp="S(1)")     # [B, NH/tp, S, D]
    ROW = p.pl(dp="S(0)", tp="P(sum)")

    p.tensor("x", "{shape: [batch=%d, seq=%d, hidden=%d], dtype: %s, role: input}"
             % (B, S, H, dt), X)
    p.tensor("causal_mask", "{shape: [%d, %d], dtype: %s, role: const, "
             "init: causal_mask}" % (S, S, dt), R)
    for n in ("ln1", "ln2"):
        p.param(n + ".weight", [H], dt, R)
        p.param(n + ".bias", [H], dt, R)
    for c in "qkv":
        p.param("attn.%s.weight" % c, [H, H], dt, COL_W)
        p.param("attn.%s.bias" % c, [H], dt, COL_B)
    p.param("attn.o.weight", [H, H], dt, ROW_W)
    p.param("attn.o.bias", [H], dt, R)
    p.param("mlp.fc1.weight", [F, H], dt, COL_W)
    p.param("mlp.fc1.bias", [F], dt, COL_B)
    p.param("mlp.fc2.weight", [H, F], dt, ROW_W)
    p.param("mlp.fc2.bias", [H], dt, R)

    p.op("ln1", "layernorm", ["x", "ln1.weight", "ln1.bias"], "ln1.out",
         [X, R, R], X, "eps: 1e-05")
    for c in "qkv":
        p.op("attn." + c, "linear",
             ["ln1.out", "attn.%s.weight" % c, "attn.%s.bias" % c],
             "attn.%s.out" % c, [X, COL_W, COL_B], COL)
    for c in "qkv":
        p.op("attn.%s.heads" % c, "reshape", ["attn.%s.out" % c],
             "attn.%s.heads.out" % c, [COL], HEADS,
             "shape: [%s]" % dims([B, S, NH, D]))
        p.op("attn.%s.perm" % c, "permute", ["attn.%s.heads.out" % c],
             "attn.%s.perm.out" % c, [HEADS], BHSD, "perm: [0, 2, 1, 3]")
    attention(p, "attn.", "attn.q.perm.out", "attn.k.perm.out",
              "attn.v.perm.out", D, BHSD, mask=("causal_mask", R))
    p.op("attn.ctx.perm", "permute", ["attn.ctx.out"], "attn.ctx.perm.out",
         [BHSD], HEADS, "perm: [0, 2, 1, 3]")
    p.op("attn.ctx.merge", "reshape", ["attn.ctx.perm.out"],
         "attn.ctx.merge.out", [HEADS], COL, "shape: [%s]" % dims([B, S, H]))
    p.op("attn.o", "linear", ["attn.ctx.merge.out", "attn.o.weight",
                              "attn.o.bias"], "attn.o.out",
         [COL, ROW_W, ROW_B], ROW)
    p.op("attn.res", "add", ["x", "attn.o.out"], "attn.res.out", [X, X], X)
    p.op("ln2", "layernorm", ["attn.res.out", "ln2.weight", "ln2.bias"],
         "ln2.out", [X, R, R], X, "eps: 1e-05")
    p.op("mlp.fc1", "linear", ["ln2.out", "mlp.fc1.weight", "mlp.fc1.bias"],
         "mlp.fc1.out", [X, COL_W, COL_B], COL)
    p.op("mlp.act", "gelu", ["mlp.fc1.out"], "mlp.act.out", [COL], COL,
         "approximate: tanh")
    p.op("mlp.fc2", "linear", ["mlp.act.out", "mlp.fc2.weight", "mlp.fc2.bias"],
         "mlp.fc2.out", [COL, ROW_W, ROW_B], ROW)
    p.op("mlp.res", "add", ["attn.res.out", "mlp.fc2.out"], "y", [X, X], X)

    write(os.path.join(outdir, "gpt2-small-block.recipe.plan.yaml"), p, [
        "One GPT-2 small transformer block (pre-norm): hidden 768, 12 heads of",
        "64, MLP 3072 (gelu, tanh approximation), causal attention; seq 1024,",
        "batch 8; bf16. Weights in nn.Linear layout [out, in] with biases.",
        "Recipe: Megatron tensor parallelism over tp=4 (column-parallel q/k/v",
        "and fc1, row-parallel o and fc2, whose bias enters as a partial sum so",
        "it is added once), 3 heads a rank; the batch over dp=2.",
        "Written by: python3 %s (edit the generator, not this file)." % TOOL,
    ], [("y", X)], provenance="strategy: megatron, tool: %s, seed: 0" % TOOL)


def attention(p, pre, q, k, v, D, BHSD, mask=None):
    """scores = q k^T / sqrt(D) (+ mask), softmax, ctx = probs v; every
    tensor [B, heads, S, D] or [B, heads, S, S] in BHSD."""
    p.op(pre + "k.t", "transpose", [k], pre + "k.t.out", [BHSD], BHSD,
         "dims: [-2, -1]")
    p.op(pre + "scores", "matmul", [q, pre + "k.t.out"], pre + "scores.out",
         [BHSD, BHSD], BHSD)
    p.op(pre + "scale", "scale", [pre + "scores.out"], pre + "scale.out",
         [BHSD], BHSD, "factor: %r" % (1.0 / math.sqrt(D)))
    s = pre + "scale.out"
    if mask:
        p.op(pre + "mask", "add", [s, mask[0]], pre + "mask.out",
             [BHSD, mask[1]], BHSD)
        s = pre + "mask.out"
    p.op(pre + "softmax", "softmax", [s], pre + "probs", [BHSD], BHSD,
         "dim: -1")
    p.op(pre + "ctx", "matmul", [pre + "probs", v], pre + "ctx.out",
         [BHSD, BHSD], BHSD)


# ---- Llama ---------------------------------------------------------------------

LLAMA = dict(H=4096, NH=32, KV=8, D=128, F=14336, V=128256, theta=500000.0,
             eps="1e-05")


def rope(p, name, x, BHSD, R, D):
    """Rotary embedding, rotate-half form (HF Llama): x cos + rot(x) sin with
    rot(x) = concat(-x2, x1), x1 and x2 the halves of the head dim. The op
    `name` writes `name`.out."""
    pre = name + "."
    p.op(pre + "split", "split", [x], [pre + "x1", pre + "x2"], [BHSD],
         [BHSD, BHSD], "dim: -1, sizes: [%d, %d]" % (D // 2, D // 2))
    p.op(pre + "neg", "scale", [pre + "x2"], pre + "neg.out", [BHSD], BHSD,
         "factor: -1.0")
    p.op(pre + "rot", "concat", [pre + "neg.out", pre + "x1"], pre + "rot.out",
         [BHSD, BHSD], BHSD, "dim: -1")
    p.op(pre + "cos", "mul", [x, "rope_cos"], pre + "cos.out", [BHSD, R], BHSD)
    p.op(pre + "sin", "mul", [pre + "rot.out", "rope_sin"], pre + "sin.out",
         [BHSD, R], BHSD)
    p.op(name, "add", [pre + "cos.out", pre + "sin.out"], pre + "out",
         [BHSD, BHSD], BHSD)


def llama_layer(p, i, x, B, S, X, dt):
    """One decoder layer on the residual stream x ([B, S, H] in X); returns
    the name of its output. Megatron over tp, the batch over dp."""
    c = LLAMA
    H, NH, KV, D, F = c["H"], c["NH"], c["KV"], c["D"], c["F"]
    R = p.pl()
    COL_W = p.pl(tp="S(1)")               # matmul weight [in, out/tp]
    ROW_W = p.pl(tp="S(0)")               # matmul weight [in/tp, out]
    COL = p.pl(dp="S(0)", tp="S(2)")      # [B, S, out/tp]
    HEADS = p.pl(dp="S(0)", tp="S(2)")    # [B, S, heads/tp, D]
    BHSD = p.pl(dp="S(0)", tp="S(1)")     # [B, heads/tp, S, D]
    ROW = p.pl(dp="S(0)", tp="P(sum)")
    pre = "layers.%d." % i if i is not None else ""

    p.param(pre + "attn_norm.weight", [H], dt, R)
    for n, out in (("q", NH * D), ("k", KV * D), ("v", KV * D)):
        p.param(pre + "attn.%s.weight" % n, [H, out], dt, COL_W)
    p.param(pre + "attn.o.weight", [NH * D, H], dt, ROW_W)
    p.param(pre + "mlp_norm.weight", [H], dt, R)
    p.param(pre + "mlp.gate.weight", [H, F], dt, COL_W)
    p.param(pre + "mlp.up.weight", [H, F], dt, COL_W)
    p.param(pre + "mlp.down.weight", [F, H], dt, ROW_W)

    a = pre + "attn."
    p.op(pre + "attn_norm", "rmsnorm", [x, pre + "attn_norm.weight"],
         pre + "attn_norm.out", [X, R], X, "eps: " + c["eps"])
    h = pre + "attn_norm.out"
    for n, heads in (("q", NH), ("k", KV), ("v", KV)):
        p.op(a + n, "matmul", [h, a + n + ".weight"], a + n + ".out",
             [X, COL_W], COL)
        p.op(a + n + ".heads", "reshape", [a + n + ".out"],
             a + n + ".heads.out", [COL], HEADS,
             "shape: [%s]" % dims([B, S, heads, D]))
        p.op(a + n + ".perm", "permute", [a + n + ".heads.out"],
             a + n + ".perm.out", [HEADS], BHSD, "perm: [0, 2, 1, 3]")
    rope(p, a + "q.rope", a + "q.perm.out", BHSD, R, D)
    rope(p, a + "k.rope", a + "k.perm.out", BHSD, R, D)
    # Grouped-query attention: each kv head serves NH / KV query heads;
    # repeated in place, so kv head j's copies sit next to query heads
    # j * NH/KV ... and a tp shard of kv heads feeds the same shard of q.
    rep = "repeats: %d, dim: 1" % (NH // KV)
    p.op(a + "k.repeat", "repeat_interleave", [a + "k.rope.out"],
         a + "k.repeat.out", [BHSD], BHSD, rep)
    p.op(a + "v.repeat", "repeat_interleave", [a + "v.perm.out"],
         a + "v.repeat.out", [BHSD], BHSD, rep)
    attention(p, a, a + "q.rope.out", a + "k.repeat.out", a + "v.repeat.out",
              D, BHSD, mask=("causal_mask", R))
    p.op(a + "ctx.perm", "permute", [a + "ctx.out"], a + "ctx.perm.out",
         [BHSD], HEADS, "perm: [0, 2, 1, 3]")
    p.op(a + "ctx.merge", "reshape", [a + "ctx.perm.out"], a + "ctx.merge.out",
         [HEADS], COL, "shape: [%s]" % dims([B, S, NH * D]))
    p.op(a + "o", "matmul", [a + "ctx.merge.out", a + "o.weight"], a + "o.out",
         [COL, ROW_W], ROW)
    p.op(pre + "attn_res", "add", [x, a + "o.out"], pre + "attn_res.out",
         [X, X], X)
    x = pre + "attn_res.out"
    m = pre + "mlp."
    p.op(pre + "mlp_norm", "rmsnorm", [x, pre + "mlp_norm.weight"],
         pre + "mlp_norm.out", [X, R], X, "eps: " + c["eps"])
    for n in ("gate", "up"):
        p.op(m + n, "matmul", [pre + "mlp_norm.out", m + n + ".weight"],
             m + n + ".out", [X, COL_W], COL)
    p.op(m + "act", "silu", [m + "gate.out"], m + "act.out", [COL], COL)
    p.op(m + "mul", "mul", [m + "act.out", m + "up.out"], m + "mul.out",
         [COL, COL], COL)
    p.op(m + "down", "matmul", [m + "mul.out", m + "down.weight"],
         m + "down.out", [COL, ROW_W], ROW)
    out = pre + "mlp_res.out" if pre else "y"
    p.op(pre + "mlp_res", "add", [x, m + "down.out"], out, [X, X], X)
    return out


def llama_consts(p, S, dt):
    c = LLAMA
    R = p.pl()
    p.tensor("causal_mask", "{shape: [%d, %d], dtype: %s, role: const, "
             "init: causal_mask}" % (S, S, dt), R)
    for n in ("rope_cos", "rope_sin"):
        p.tensor(n, "{shape: [%d, %d], dtype: %s, role: const, init: "
                 "{recipe: %s, theta: %r}}" % (S, c["D"], dt, n, c["theta"]), R)


def llama3_8b_layer(outdir):
    B, S = 4, 2048
    dt = "bf16"
    c = LLAMA
    p = Plan("llama3-8b-layer", [("dp", 2), ("tp", 8)])
    X = p.pl(dp="S(0)")
    p.tensor("x", "{shape: [batch=%d, seq=%d, hidden=%d], dtype: %s, role: input}"
             % (B, S, c["H"], dt), X)
    llama_consts(p, S, dt)
    llama_layer(p, None, "x", B, S, X, dt)
    write(os.path.join(outdir, "llama3-8b-layer.recipe.plan.yaml"), p, [
        "One Llama-3-8B decoder layer: RMSNorm, RoPE (theta 500000, rotate-half",
        "form), grouped-query attention with 32 query heads and 8 key/value",
        "heads of 128 (the kv heads repeated in place by repeat_interleave),",
        "causal softmax, SwiGLU MLP (silu(gate) * up, then down) of 14336;",
        "hidden 4096, seq 2048, batch 4; bf16. Weights [in, out], no biases.",
        "Recipe: Megatron tensor parallelism over tp=8 (one kv head and its 4",
        "query heads a rank; column-parallel q/k/v, gate and up, row-parallel",
        "o and down), the batch over dp=2; 16 devices, 8 a host.",
        "Written by: python3 %s (edit the generator, not this file)." % TOOL,
    ], [("y", X)], devices_per_host=8,
        provenance="strategy: megatron, tool: %s, seed: 0" % TOOL)



def pipeline_lines(layers, stages, microbatches):
    """A Llama program's pipeline section (its lines): the layers cut as
    evenly as they go over the stages (the rest first), the embedding on
    the first stage, the final norm, head and loss on the last, 1F1B."""
    lines = ["pipeline:", "  axis: pp", "  stages:"]
    first = 0
    for st in range(stages):
        n = layers // stages + (1 if st < layers % stages else 0)
        globs = ['"layers.%d.*"' % k for k in range(first, first + n)]
        first += n
        if st == 0:
            globs.insert(0, "embed")
        if st == stages - 1:
            globs += ["final_norm", "lm_head", "loss"]
        lines.append("    - {ops: [%s]}" % ", ".join(globs))
    return lines + ["  microbatches: %d" % microbatches, "  schedule: 1f1b"]

def llama_32l(outdir, name, axes, pp=None, layers=32, B=16, S=2048,
              microbatches=8):
    dt = "bf16"
    c = LLAMA
    H, V = c["H"], c["V"]
    p = Plan("llama-32l", axes)
    X = p.pl(dp="S(0)")
    R = p.pl()
    p.tensor("tokens", "{shape: [batch=%d, seq=%d], dtype: i32, role: input, "
             "range: [0, %d]}" % (B, S, V), p.pl(dp="S(0)"))
    p.tensor("labels", "{shape: [batch=%d, seq=%d], dtype: i32, role: input, "
             "range: [0, %d]}" % (B, S, V), p.pl(dp="S(0)"))
    llama_consts(p, S, dt)
    p.param("embed.weight", [V, H], dt, p.pl(tp="S(0)"))  # vocab parallel
    # A row-sharded table gives the masked partial sum: P(sum) over tp.
    p.op("embed", "embedding", ["embed.weight", "tokens"], "embed.out",
         [p.pl(tp="S(0)"), p.pl(dp="S(0)")], p.pl(dp="S(0)", tp="P(sum)"))
    x = "embed.out"
    for i in range(layers):
        x = llama_layer(p, i, x, B, S, X, dt)
    p.param("final_norm.weight", [H], dt, R)
    p.op("final_norm", "rmsnorm", [x, "final_norm.weight"], "final_norm.out",
         [X, R], X, "eps: " + c["eps"])
    p.param("lm_head.weight", [H, V], dt, p.pl(tp="S(1)"))
    p.op("lm_head", "matmul", ["final_norm.out", "lm_head.weight"], "logits",
         [X, p.pl(tp="S(1)")], p.pl(dp="S(0)", tp="S(2)"))
    # the vocab-parallel loss: the logits stay split over tp (the op
    # all-reduces each token's max, sum of exps and label logit there, so
    # the loss is whole on tp); the per-sample losses a partial sum over dp.
    p.op("loss", "cross_entropy", ["logits", "labels"], "loss.out",
         [p.pl(dp="S(0)", tp="S(2)"), p.pl(dp="S(0)")], p.pl(dp="P(sum)"))
    shape = ", ".join("%s=%d" % a for a in axes)
    header = [
        "A %d-layer Llama-3-8B-style decoder: vocab-parallel embedding (128256)," % layers,
        "%d decoder layers as llama3-8b-layer (RMSNorm, RoPE, GQA 32/8 heads," % layers,
        "SwiGLU 14336), final RMSNorm, lm head and cross-entropy loss; hidden",
        "4096, seq %d, batch %d; bf16. Layer strategies are one pattern each" % (S, B),
        "(layers.*.X): every layer is laid out alike.",
    ]
    pipeline = training = None
    if pp:
        nst = dict(axes)["pp"]
        per = layers // nst
        pipeline = pipeline_lines(layers, nst, microbatches)
        training = ["training:", "  optimizer: {kind: sgd, lr: 0.01}",
                    '  grad_sync: {"*": all_reduce}']
        header += [
            "Plan: a training step (SGD, lr 0.01, every gradient all-reduced",
            "where it comes out partial), pipelined 1F1B over %d stages of %d" % (nst, per),
            "layers (the embedding on the first, norm, head and loss on the",
            "last), %d microbatches of %d; Megatron within a stage on %s." % (
                microbatches, B // microbatches, shape),
        ]
    else:
        header += [
            "Recipe: Megatron tensor parallelism (column-parallel q/k/v, gate,",
            "up and lm head, row-parallel o and down, vocab-parallel embedding)",
            "and the batch over dp, on %s (8 devices a host); forward and loss." % shape,
        ]
    header.append("Written by: python3 %s (edit the generator, not this file)." % TOOL)
    # With pp the last mesh axis, iota would put each tp group across
    # hosts (stride 4 over 8-device hosts): the order below keeps a tp
    # group on one host's NVLink and lets only the stages' point-to-point
    # transfers cross hosts (device = dp * 16 + pp * 4 + tp).
    devices = None
    if pp:
        sizes = dict(axes)
        devices = [d * 16 + q * 4 + t
                   for d in range(sizes["dp"]) for t in range(sizes["tp"])
                   for q in range(sizes["pp"])]
    write(os.path.join(outdir, name), p, header,
          [("loss.out", p.pl())], loss="loss.out", pipeline=pipeline,
          training=training, devices_per_host=8, layers=layers,
          provenance="strategy: megatron, tool: %s, seed: 0" % TOOL,
          devices=devices)


# ---- DiT -----------------------------------------------------------------------

def dit_block(outdir):
    B, N, H, NH, F = 2, 32760, 3072, 24, 12288
    D = H // NH
    dt = "bf16"
    p = Plan("dit-block", [("dp", 2), ("sp", 4)])
    R = p.pl()
    COND = p.pl(dp="S(0)")               # [B, 1, H] conditioning, per sample
    TOK = p.pl(dp="S(0)", sp="S(1)")     # [B, N, H] and [B, N, NH, D]: tokens over sp
    HEAD4 = p.pl(dp="S(0)", sp="S(2)")   # [B, N, NH, D]: heads over sp
    BHSD = p.pl(dp="S(0)", sp="S(1)")    # [B, NH, N, D]: heads over sp

    p.tensor("x", "{shape: [batch=%d, tokens=%d, hidden=%d], dtype: %s, "
             "role: input}" % (B, N, H, dt), TOK)
    p.tensor("c", "{shape: [batch=%d, 1, hidden=%d], dtype: %s, role: input}"
             % (B, H, dt), COND)
    p.tensor("norm.ones", "{shape: [%d], dtype: %s, role: const, init: ones}"
             % (H, dt), R)
    p.param("ada.weight", [H, 6 * H], dt, R)
    for n in "qkv":
        p.param("attn.%s.weight" % n, [H, H], dt, R)
    p.param("attn.q_norm.weight", [D], dt, R)
    p.param("attn.k_norm.weight", [D], dt, R)
    p.param("attn.o.weight", [H, H], dt, R)
    p.param("mlp.fc1.weight", [H, F], dt, R)
    p.param("mlp.fc2.weight", [F, H], dt, R)

    # adaLN-zero: shift, scale and gate for attention and MLP from c.
    p.op("ada.act", "silu", ["c"], "ada.act.out", [COND], COND)
    p.op("ada.mod", "matmul", ["ada.act.out", "ada.weight"], "ada.mod.out",
         [COND, R], COND)
    mods = ["ada.shift_msa", "ada.scale_msa", "ada.gate_msa",
            "ada.shift_mlp", "ada.scale_mlp", "ada.gate_mlp"]
    p.op("ada.split", "split", ["ada.mod.out"], mods, [COND], [COND] * 6,
         "dim: -1, sizes: [%s]" % dims([H] * 6))

    def modulate(pre, x, shift, scale):
        # layernorm without affine, then n * (1 + scale) + shift
        p.op(pre + "norm", "layernorm", [x, "norm.ones"], pre + "norm.out",
             [TOK, R], TOK, "eps: 1e-06")
        n = pre + "norm.out"
        p.op(pre + "mod.scale", "mul", [n, scale], pre + "mod.scale.out",
             [TOK, COND], TOK)
        p.op(pre + "mod.add", "add", [n, pre + "mod.scale.out"],
             pre + "mod.add.out", [TOK, TOK], TOK)
        p.op(pre + "mod.shift", "add", [pre + "mod.add.out", shift],
             pre + "mod.out", [TOK, COND], TOK)
        return pre + "mod.out"

    h = modulate("attn_", "x", "ada.shift_msa", "ada.scale_msa")
    for n in "qkv":
        p.op("attn." + n, "matmul", [h, "attn.%s.weight" % n], "attn.%s.out" % n,
             [TOK, R], TOK)
        p.op("attn.%s.heads" % n, "reshape", ["attn.%s.out" % n],
             "attn.%s.heads.out" % n, [TOK], TOK,
             "shape: [%s]" % dims([B, N, NH, D]))
        src = "attn.%s.heads.out" % n
        if n in "qk":
            # QK-norm over the head dim, on the token-sharded layout.
            p.op("attn.%s_norm" % n, "rmsnorm", [src, "attn.%s_norm.weight" % n],
                 "attn.%s_norm.out" % n, [TOK, R], TOK, "eps: 1e-06")
            src = "attn.%s_norm.out" % n
        # Ulysses: the permute reads its input sharded by heads, so lowering
        # puts an all-to-all (tokens -> heads) over sp in front of it.
        p.op("attn.%s.perm" % n, "permute", [src], "attn.%s.perm.out" % n,
             [HEAD4], BHSD, "perm: [0, 2, 1, 3]")
    attention(p, "attn.", "attn.q.perm.out", "attn.k.perm.out",
              "attn.v.perm.out", D, BHSD)
    p.op("attn.ctx.perm", "permute", ["attn.ctx.out"], "attn.ctx.perm.out",
         [BHSD], HEAD4, "perm: [0, 2, 1, 3]")
    # ... and back: the merge reads it sharded by tokens (all-to-all,
    # heads -> tokens).
    p.op("attn.ctx.merge", "reshape", ["attn.ctx.perm.out"],
         "attn.ctx.merge.out", [TOK], TOK, "shape: [%s]" % dims([B, N, H]))
    p.op("attn.o", "matmul", ["attn.ctx.merge.out", "attn.o.weight"],
         "attn.o.out", [TOK, R], TOK)
    p.op("attn.gate", "mul", ["attn.o.out", "ada.gate_msa"], "attn.gate.out",
         [TOK, COND], TOK)
    p.op("attn_res", "add", ["x", "attn.gate.out"], "attn_res.out",
         [TOK, TOK], TOK)
    h = modulate("mlp_", "attn_res.out", "ada.shift_mlp", "ada.scale_mlp")
    p.op("mlp.fc1", "matmul", [h, "mlp.fc1.weight"], "mlp.fc1.out", [TOK, R], TOK)
    p.op("mlp.act", "gelu", ["mlp.fc1.out"], "mlp.act.out", [TOK], TOK,
         "approximate: tanh")
    p.op("mlp.fc2", "matmul", ["mlp.act.out", "mlp.fc2.weight"], "mlp.fc2.out",
         [TOK, R], TOK)
    p.op("mlp.gate", "mul", ["mlp.fc2.out", "ada.gate_mlp"], "mlp.gate.out",
         [TOK, COND], TOK)
    p.op("mlp_res", "add", ["attn_res.out", "mlp.gate.out"], "y", [TOK, TOK], TOK)

    write(os.path.join(outdir, "dit-block.recipe.plan.yaml"), p, [
        "A diffusion-transformer block for video inference: adaLN-zero",
        "modulation from the conditioning c (shift, scale, gate for attention",
        "and MLP), layernorm without affine, full (non-causal) attention with",
        "24 heads of 128 and QK RMSNorm, gelu MLP 12288; hidden 3072, 32760",
        "tokens (21 latent frames of 30 x 52 patches), batch 2 (the",
        "classifier-free-guidance pair); bf16. Positional embedding and text",
        "cross-attention are left out.",
        "Recipe: Ulysses sequence parallelism over sp=4: the tokens are sharded",
        "outside attention, the heads (6 a rank) inside it, an all-to-all over",
        "sp in front of each q/k/v permute and one behind the attention; the",
        "batch over dp=2; weights replicated. Inference: no training section.",
        "Written by: python3 %s (edit the generator, not this file)." % TOOL,
    ], [("y", TOK)], provenance="strategy: ulysses, tool: %s, seed: 0" % TOOL)


# ---- Mixture of experts ----------------------------------------------------------

def moe_layer(outdir):
    """A Mixtral-8x7B-style sparse MoE block with expert parallelism."""
    B, S, H, F, E, K = 8, 4096, 4096, 14336, 8, 2
    C = 1280                        # capacity per group and expert: 1.25 S K / E
    dt = "bf16"
    p = Plan("mixtral-moe-layer", [("ep", 8)])
    R = p.pl()
    TOK = p.pl(ep="S(0)")                 # [B, S, ..]: a sequence (group) a rank
    SLOT_G = p.pl(ep="S(1)")              # [E, B, C, ..] as dispatched: by group
    SLOT_E = p.pl(ep="S(0)")              # [E, B, C, ..] at the experts: by expert
    EXP_W = p.pl(ep="S(0)")               # [E, 1, in, out]: one expert a rank

    p.tensor("x", "{shape: [batch=%d, seq=%d, hidden=%d], dtype: %s, role: input}"
             % (B, S, H, dt), TOK)
    p.param("moe_norm.weight", [H], dt, R)
    p.param("router.weight", [H, E], dt, R)
    p.param("experts.gate.weight", [E, 1, H, F], dt, EXP_W)
    p.param("experts.up.weight", [E, 1, H, F], dt, EXP_W)
    p.param("experts.down.weight", [E, 1, F, H], dt, EXP_W)

    p.op("moe_norm", "rmsnorm", ["x", "moe_norm.weight"], "moe_norm.out",
         [TOK, R], TOK, "eps: 1e-05")
    h = "moe_norm.out"
    p.op("router", "matmul", [h, "router.weight"], "router.logits",
         [TOK, R], TOK)
    p.op("router.softmax", "softmax", ["router.logits"], "router.probs",
         [TOK], TOK, "dim: -1")
    p.op("router.topk", "topk", ["router.probs"],
         ["router.topk.probs", "router.experts"], [TOK], [TOK, TOK],
         "k: %d" % K)
    p.op("router.sum", "reduce_sum", ["router.topk.probs"], "router.sum.out",
         [TOK], TOK, "dims: [-1], keepdim: true")
    p.op("router.norm", "div", ["router.topk.probs", "router.sum.out"],
         "router.weights", [TOK, TOK], TOK)
    # Each sequence is a group: its tokens fill each expert's C slots in
    # order; a choice past them is dropped (its residual passes through).
    p.op("dispatch", "moe_dispatch", [h, "router.experts"], "dispatch.out",
         [TOK, TOK], SLOT_G, "experts: %d, capacity: %d" % (E, C))
    # The experts read their own slots: an all-to-all from groups to experts.
    p.op("experts.gate", "matmul", ["dispatch.out", "experts.gate.weight"],
         "experts.gate.out", [SLOT_E, EXP_W], SLOT_E)
    p.op("experts.up", "matmul", ["dispatch.out", "experts.up.weight"],
         "experts.up.out", [SLOT_E, EXP_W], SLOT_E)
    p.op("experts.act", "silu", ["experts.gate.out"], "experts.act.out",
         [SLOT_E], SLOT_E)
    p.op("experts.mul", "mul", ["experts.act.out", "experts.up.out"],
         "experts.mul.out", [SLOT_E, SLOT_E], SLOT_E)
    p.op("experts.down", "matmul", ["experts.mul.out", "experts.down.weight"],
         "experts.down.out", [SLOT_E, EXP_W], SLOT_E)
    # And back: an all-to-all from experts to groups, then the weighted sum.
    p.op("combine", "moe_combine", ["experts.down.out", "router.experts",
                                    "router.weights"], "combine.out",
         [SLOT_G, TOK, TOK], TOK)
    p.op("moe.res", "add", ["x", "combine.out"], "y", [TOK, TOK], TOK)

    write(os.path.join(outdir, "mixtral-moe-layer.recipe.plan.yaml"), p, [
        "A Mixtral-8x7B-style sparse mixture-of-experts block: RMSNorm, a",
        "router (softmax over 8 experts, top 2, weights renormalised), GShard",
        "dispatch with each sequence a group and 1280 slots per expert (1.25 x",
        "its even share of 4096 x 2 choices), SwiGLU experts of 14336, the",
        "weighted combine and the residual; hidden 4096, seq 4096, batch 8;",
        "bf16. Attention is left out (see llama3-8b-layer).",
        "Recipe: expert parallelism over ep=8: a sequence a rank for the",
        "router, one expert a rank for the MLPs; the dispatched slots move",
        "from groups to experts by one all-to-all and back by another.",
        "Written by: python3 %s (edit the generator, not this file)." % TOOL,
    ], [("y", TOK)], devices_per_host=8,
        provenance="strategy: expert-parallel, tool: %s, seed: 0" % TOOL)


MODELS = {
    "gpt2-small-block": [gpt2_small_block],
    "llama3-8b-layer": [llama3_8b_layer],
    "llama-32l": [
        lambda d: llama_32l(d, "llama-32l.recipe.plan.yaml",
                            [("dp", 2), ("tp", 8)]),
        lambda d: llama_32l(d, "llama-32l.pp.plan.yaml",
                            [("dp", 2), ("tp", 4), ("pp", 4)], pp=True),
    ],
    "dit-block": [dit_block],
    "mixtral-moe-layer": [moe_layer],
}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--outdir", default=None,
                    help="folder (default examples/models beside scripts/)")
    ap.add_argument("models", nargs="*", help="default: all of " +
                    ", ".join(MODELS))
    a = ap.parse_args(argv)
    outdir = a.outdir or os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                      "..", "examples", "models")
    os.makedirs(outdir, exist_ok=True)
    for m in a.models or list(MODELS):
        if m not in MODELS:
            ap.error("unknown model %s (known: %s)" % (m, ", ".join(MODELS)))
        for f in MODELS[m]:
            f(outdir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
