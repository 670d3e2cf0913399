#!/usr/bin/env python3
"""Writes the training plans of published configurations for
bench/bench_published.sh (docs/cost.md, "Against published numbers").

  llama3-8b   Llama 3 8B (32 layers, hidden 4096, 32 query and 8 key/value
              heads of 128, SwiGLU 14336, vocab 128256): vocab embedding, 32
              decoder layers with the fused causal `attention` op (a
              flash-attention kernel: scores never stored), final RMSNorm,
              lm head, cross-entropy; AdamW. A program on `fsdp=N` with
              the batch split; `plan search --strategy fsdp` shards every
              parameter (TorchTitan's FSDP2 recipe). Recompute: the ops
              TorchTitan's selective (op) checkpointing does not save.
  mixtral     Mixtral 8x7B layers (attention as above; a sparse MoE block:
              router, top 2 of 8, GShard dispatch at 1.0 x the even share,
              SwiGLU experts of 14336, combine), on dp x ep: attention
              data parallel over both axes, one expert a rank on ep (the
              dispatched tokens cross by all-to-all), the expert weights
              replicated over dp; AdamW, every gradient all-reduced where
              it comes out partial.

Output is deterministic (standard library only).
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "scripts"))
import gen_models as gm  # noqa: E402

TOOL = "bench/gen_published.py"


def attn_block(p, pre, x, B, S, X, W, BSH, BHSD, dt):
    """Pre-norm GQA attention with RoPE and the fused attention op on the
    residual stream x; returns the residual's name. W: the weights'
    placement, BSH: [B, S, heads, D], BHSD: [B, heads, S, D]."""
    c = gm.LLAMA
    H, NH, KV, D = c["H"], c["NH"], c["KV"], c["D"]
    p.param(pre + "attn_norm.weight", [H], dt, W)
    for n, out in (("q", NH * D), ("k", KV * D), ("v", KV * D)):
        p.param(pre + "attn.%s.weight" % n, [H, out], dt, W)
    p.param(pre + "attn.o.weight", [NH * D, H], dt, W)
    a = pre + "attn."
    p.op(pre + "attn_norm", "rmsnorm", [x, pre + "attn_norm.weight"],
         pre + "attn_norm.out", [X, W], X, "eps: " + c["eps"])
    h = pre + "attn_norm.out"
    R = p.pl()
    for n, heads in (("q", NH), ("k", KV), ("v", KV)):
        p.op(a + n, "matmul", [h, a + n + ".weight"], a + n + ".out", [X, W], X)
        p.op(a + n + ".heads", "reshape", [a + n + ".out"],
             a + n + ".heads.out", [X], BSH,
             "shape: [%s]" % gm.dims([B, S, heads, D]))
        p.op(a + n + ".perm", "permute", [a + n + ".heads.out"],
             a + n + ".perm.out", [BSH], BHSD, "perm: [0, 2, 1, 3]")
    gm.rope(p, a + "q.rope", a + "q.perm.out", BHSD, R, D)
    gm.rope(p, a + "k.rope", a + "k.perm.out", BHSD, R, D)
    p.op(a + "core", "attention", [a + "q.rope.out", a + "k.rope.out",
                                   a + "v.perm.out"], a + "ctx.out",
         [BHSD, BHSD, BHSD], BHSD, "causal: true")
    p.op(a + "ctx.perm", "permute", [a + "ctx.out"], a + "ctx.perm.out",
         [BHSD], BSH, "perm: [0, 2, 1, 3]")
    p.op(a + "ctx.merge", "reshape", [a + "ctx.perm.out"], a + "ctx.merge.out",
         [BSH], X, "shape: [%s]" % gm.dims([B, S, NH * D]))
    p.op(a + "o", "matmul", [a + "ctx.merge.out", a + "o.weight"], a + "o.out",
         [X, W], X)
    p.op(pre + "attn_res", "add", [x, a + "o.out"], pre + "attn_res.out",
         [X, X], X)
    return pre + "attn_res.out"


def dense_mlp(p, pre, x, X, W, dt):
    c = gm.LLAMA
    H, F = c["H"], c["F"]
    for n, shape in (("gate", [H, F]), ("up", [H, F]), ("down", [F, H])):
        p.param(pre + "mlp.%s.weight" % n, shape, dt, W)
    p.param(pre + "mlp_norm.weight", [H], dt, W)
    m = pre + "mlp."
    p.op(pre + "mlp_norm", "rmsnorm", [x, pre + "mlp_norm.weight"],
         pre + "mlp_norm.out", [X, W], X, "eps: " + c["eps"])
    for n in ("gate", "up"):
        p.op(m + n, "matmul", [pre + "mlp_norm.out", m + n + ".weight"],
             m + n + ".out", [X, W], X)
    p.op(m + "act", "silu", [m + "gate.out"], m + "act.out", [X], X)
    p.op(m + "mul", "mul", [m + "act.out", m + "up.out"], m + "mul.out",
         [X, X], X)
    p.op(m + "down", "matmul", [m + "mul.out", m + "down.weight"],
         m + "down.out", [X, W], X)
    p.op(pre + "mlp_res", "add", [x, m + "down.out"], pre + "mlp_res.out",
         [X, X], X)
    return pre + "mlp_res.out"


def moe_mlp(p, pre, x, S, X, SLOT_G, SLOT_E, EXP_W, dt, E=8, K=2, cap=1.0):
    c = gm.LLAMA
    H, F = c["H"], c["F"]
    C = int(round(cap * S * K / E))
    R = p.pl()
    p.param(pre + "moe_norm.weight", [H], dt, R)
    p.param(pre + "router.weight", [H, E], dt, R)
    for n, shape in (("gate", [E, 1, H, F]), ("up", [E, 1, H, F]),
                     ("down", [E, 1, F, H])):
        p.param(pre + "experts.%s.weight" % n, shape, dt, EXP_W)
    r, e = pre + "router.", pre + "experts."
    p.op(pre + "moe_norm", "rmsnorm", [x, pre + "moe_norm.weight"],
         pre + "moe_norm.out", [X, R], X, "eps: " + c["eps"])
    h = pre + "moe_norm.out"
    p.op(pre + "router", "matmul", [h, pre + "router.weight"], r + "logits",
         [X, R], X)
    p.op(r + "softmax", "softmax", [r + "logits"], r + "probs", [X], X,
         "dim: -1")
    p.op(r + "topk", "topk", [r + "probs"], [r + "topk.probs", r + "experts"],
         [X], [X, X], "k: %d" % K)
    p.op(r + "sum", "reduce_sum", [r + "topk.probs"], r + "sum.out", [X], X,
         "dims: [-1], keepdim: true")
    p.op(r + "norm", "div", [r + "topk.probs", r + "sum.out"], r + "weights",
         [X, X], X)
    p.op(pre + "dispatch", "moe_dispatch", [h, r + "experts"],
         pre + "dispatch.out", [X, X], SLOT_G,
         "experts: %d, capacity: %d" % (E, C))
    p.op(e + "gate", "matmul", [pre + "dispatch.out", e + "gate.weight"],
         e + "gate.out", [SLOT_E, EXP_W], SLOT_E)
    p.op(e + "up", "matmul", [pre + "dispatch.out", e + "up.weight"],
         e + "up.out", [SLOT_E, EXP_W], SLOT_E)
    p.op(e + "act", "silu", [e + "gate.out"], e + "act.out", [SLOT_E], SLOT_E)
    p.op(e + "mul", "mul", [e + "act.out", e + "up.out"], e + "mul.out",
         [SLOT_E, SLOT_E], SLOT_E)
    p.op(e + "down", "matmul", [e + "mul.out", e + "down.weight"],
         e + "down.out", [SLOT_E, EXP_W], SLOT_E)
    p.op(pre + "combine", "moe_combine", [e + "down.out", r + "experts",
                                          r + "weights"], pre + "combine.out",
         [SLOT_G, X, X], X)
    p.op(pre + "moe_res", "add", [x, pre + "combine.out"], pre + "moe_res.out",
         [X, X], X)
    return pre + "moe_res.out"


def head(p, x, B, S, V, X, W, TOK, dt):
    H = gm.LLAMA["H"]
    p.param("final_norm.weight", [H], dt, W)
    p.op("final_norm", "rmsnorm", [x, "final_norm.weight"], "final_norm.out",
         [X, W], X, "eps: " + gm.LLAMA["eps"])
    p.param("lm_head.weight", [H, V], dt, W)
    p.op("lm_head", "matmul", ["final_norm.out", "lm_head.weight"], "logits",
         [X, W], X)
    p.op("loss", "cross_entropy", ["logits", "labels"], "loss.out",
         [X, TOK], p.pl(**{a: "P(sum)" for a, _ in p.axes if a != "pp"}))


def rope_consts(p, S, dt):
    R = p.pl()
    for n in ("rope_cos", "rope_sin"):
        p.tensor(n, "{shape: [%d, %d], dtype: %s, role: const, init: "
                 "{recipe: %s, theta: %r}}" % (S, gm.LLAMA["D"], dt, n,
                                               gm.LLAMA["theta"]), R)


def tokens(p, B, S, V, TOK):
    for n in ("tokens", "labels"):
        p.tensor(n, "{shape: [batch=%d, seq=%d], dtype: i32, role: input, "
                 "range: [0, %d]}" % (B, S, V), TOK)


# TorchTitan's selective (op) activation checkpointing saves the outputs
# of the matmuls (every second one recomputed) and of the attention
# kernel, and recomputes everything else: here the norms, rope, silu and
# its product, and the second, fourth and sixth matmul of a layer (k, o,
# up; the seventh, down, is saved).
LLAMA_RECOMPUTE = ["layers.*.attn_norm", "layers.*.mlp_norm",
                   "layers.*.attn.q.rope*", "layers.*.attn.k.rope*",
                   "layers.*.mlp.act", "layers.*.mlp.mul",
                   "layers.*.attn.k", "layers.*.attn.o", "layers.*.mlp.up"]


def embedding(p, B, S, V, H, X, R, dt):
    """The tokens, rope tables and the embedding: its output's name."""
    tokens(p, B, S, V, X)
    rope_consts(p, S, dt)
    p.param("embed.weight", [V, H], dt, R)
    p.op("embed", "embedding", ["embed.weight", "tokens"], "embed.out",
         [R, X], X)
    return "embed.out"


# The Llama 3 sizes (Meta's model cards): hidden, query heads, key/value
# heads, SwiGLU width; every size has heads of 128 and the 128256 vocabulary
LLAMA_SIZES = {"8b": dict(H=4096, NH=32, KV=8, F=14336),
               "70b": dict(H=8192, NH=64, KV=8, F=28672),
               "405b": dict(H=16384, NH=128, KV=8, F=53248)}


def llama3_8b(path, n, local_batch, S, layers, recompute, size="8b"):
    gm.LLAMA.update(LLAMA_SIZES[size])
    c = gm.LLAMA
    V, H = c["V"], c["H"]
    B = local_batch * n
    dt = "bf16"
    p = gm.Plan("llama3-8b", [("fsdp", n)])
    X = p.pl(fsdp="S(0)")
    R = p.pl()
    x = embedding(p, B, S, V, H, X, R, dt)
    for i in range(layers):
        pre = "layers.%d." % i
        x = attn_block(p, pre, x, B, S, X, R, X, X, dt)
        x = dense_mlp(p, pre, x, X, R, dt)
    head(p, x, B, S, V, X, R, X, dt)
    training = ["training:",
                "  optimizer: {kind: adam, lr: 3e-4, weight_decay: 0.1}",
                '  grad_sync: {"*": auto}']
    if recompute:
        training.append("  recompute: [%s]" % ", ".join(
            '"%s"' % g for g in LLAMA_RECOMPUTE))
    gm.write(path, p, [
        "Llama 3 %s (%d layers), TorchTitan's recipe: local batch %d x %d "
        "ranks," % (size.upper(), layers, local_batch, n),
        "seq %d, bf16, AdamW; selective (op) activation checkpointing %s." % (
            S, "as recompute globs" if recompute else "off"),
        "Written by: python3 %s." % TOOL,
    ], [("loss.out", R)], loss="loss.out", training=training,
        devices_per_host=8, layers=layers)


def mixtral(path, dp, ep, local_batch, S, layers, cap, pp=1, vstages=1,
            microbatches=1):
    V = 32000
    H = gm.LLAMA["H"]
    n = dp * ep
    B = local_batch * n
    dt = "bf16"
    axes = [("dp", dp), ("ep", ep)] + ([("pp", pp)] if pp > 1 else [])
    p = gm.Plan("mixtral-8x7b", axes)
    X = p.pl(dp="S(0)", ep="S(0)")          # the batch over both axes
    SLOT_G = p.pl(dp="S(1)", ep="S(1)")     # [E, B, C, H] by group
    SLOT_E = p.pl(dp="S(1)", ep="S(0)")     # by expert on ep, group on dp
    EXP_W = p.pl(ep="S(0)")
    R = p.pl()
    x = embedding(p, B, S, V, H, X, R, dt)
    for i in range(layers):
        pre = "layers.%d." % i
        x = attn_block(p, pre, x, B, S, X, R, X, X, dt)
        x = moe_mlp(p, pre, x, S, X, SLOT_G, SLOT_E, EXP_W, dt, cap=cap)
    head(p, x, B, S, V, X, R, X, dt)
    training = ["training:",
                "  optimizer: {kind: adam, lr: 1e-4, weight_decay: 0.1}",
                '  grad_sync: {"*": auto}']
    pipeline = devices = None
    header = [
        "Mixtral 8x7B, %d layers on %s: local batch %d, seq %d,"
        % (layers, " x ".join("%s=%d" % a for a in axes), local_batch, S),
        "bf16, AdamW; expert capacity %.2f x the even share." % cap]
    if pp > 1:
        # stage s (of pp x vstages) on pp rank s mod pp, as Megatron's
        # virtual pipeline; the embedding in the first, the head last
        nst = pp * vstages
        per = layers // nst
        if per * nst != layers:
            raise ValueError("layers must divide into %d stages" % nst)
        pipeline = ["pipeline:", "  axis: pp", "  stages:"]
        for st in range(nst):
            globs = ['"layers.%d.*"' % l for l in range(st * per, (st + 1) * per)]
            if st == 0:
                globs.insert(0, "embed")
            if st == nst - 1:
                globs += ["final_norm", "lm_head", "loss"]
            pipeline.append("    - {ops: [%s]}" % ", ".join(globs))
        pipeline += ["  microbatches: %d" % microbatches, "  schedule: %s" % (
            "interleaved-1f1b" if vstages > 1 else "1f1b")]
        # Megatron's rank order (tp-cp-ep-dp-pp): ep inside a host of 8,
        # then dp, pp outermost: device = pp * dp * ep + dp_i * ep + ep_i
        devices = [q * dp * ep + d * ep + e
                   for d in range(dp) for e in range(ep) for q in range(pp)]
        header.append("Pipeline: %d stages on pp=%d, %d microbatches." % (
            nst, pp, microbatches))
    header.append("Written by: python3 %s." % TOOL)
    gm.write(path, p, header, [("loss.out", R)], loss="loss.out",
             training=training, pipeline=pipeline, devices=devices,
             devices_per_host=8, layers=layers)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", choices=["llama3-8b", "mixtral"])
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--seq", type=int, default=8192)
    ap.add_argument("--local-batch", type=int, default=2,
                    help="sequences a rank per step")
    ap.add_argument("--ranks", type=int, default=8, help="llama3-8b: fsdp size")
    ap.add_argument("--dp", type=int, default=2, help="mixtral: dp size")
    ap.add_argument("--ep", type=int, default=8, help="mixtral: ep size")
    ap.add_argument("--capacity", type=float, default=1.0,
                    help="mixtral: expert slots per group / even share")
    ap.add_argument("--pp", type=int, default=1, help="mixtral: pipeline ranks")
    ap.add_argument("--vstages", type=int, default=1,
                    help="mixtral: stages a pipeline rank (interleaved-1f1b)")
    ap.add_argument("--microbatches", type=int, default=1,
                    help="mixtral: with --pp")
    ap.add_argument("--no-recompute", action="store_true")
    ap.add_argument("--size", choices=sorted(LLAMA_SIZES), default="8b",
                    help="llama3-8b: the Llama 3 size (hidden, heads, MLP)")
    a = ap.parse_args(argv)
    if a.model == "llama3-8b":
        llama3_8b(a.output, a.ranks, a.local_batch, a.seq, a.layers,
                  not a.no_recompute, a.size)
    else:
        mixtral(a.output, a.dp, a.ep, a.local_batch, a.seq, a.layers,
                a.capacity, a.pp, a.vstages, a.microbatches)
    return 0


if __name__ == "__main__":
    sys.exit(main())
