#!/usr/bin/env python3
"""Writes a large, valid libplan plan: a many-layer decoder-only transformer
trained with data parallelism (dp) x Megatron tensor parallelism (tp), for
the load benchmark (bench/bench_load.c, bench/run.sh).

The program is what a tracing front end would emit: one op per line in flow
style, hierarchical names (layers.17.attn.q), every param declared, every op
with an explicit strategy that is legal under its sharding rule
(libplan/src/ir/sharding_rules.c), and a placement for every input, param and
const. Per layer:

  ln1        rmsnorm      [B,S,H]           x R / S(seq) with --sp
  attn.q/k/v matmul       column parallel   (or attn.qkv + attn.qkv.split)
  *.heads    reshape      [B,S,H] -> [B,S,NH,D]  (tp shards NH)
  *.perm     permute      -> [B,NH,S,D]
  attn.k.t   transpose    -> [B,NH,D,S]
  attn.scores matmul, attn.scale scale, attn.mask add, attn.softmax softmax
  attn.ctx   matmul, attn.ctx.perm permute, attn.ctx.merge reshape
  attn.o     matmul       row parallel -> P(sum) over tp
  attn.res   add          (consumes attn.o as R, or S(seq) with --sp)
  ln2, mlp.fc1 (column), mlp.act gelu, mlp.fc2 (row), mlp.res add

with an embedding (vocab parallel) in front and final norm, lm head and
cross-entropy loss behind. Output is deterministic: the same arguments give
the same bytes.

With --pp P > 1 the mesh gets a third axis, pp, every placement R along
it, and a pipeline section (spec/plan-format.md 4.4): the layers split
evenly over --stages stages (default P; the embedding in the first, the
final norm, head and loss in the last), --microbatches (default 2P) under
--schedule (gpipe, 1f1b (default), interleaved-1f1b, zb-h1, looped-bfs,
interleaved-zb, zbv or dualpipev). Stage s runs on pp rank s mod P, so
interleaved-1f1b and interleaved-zb take a multiple (at least two) of P
stages, looped-bfs a multiple, and gpipe, 1f1b and zb-h1 exactly P; zbv and
dualpipev place 2P stages in a V (stage s < P on rank s, s >= P on rank
2P - 1 - s). The last four are format 1.1 names: such a plan is written as
libplan "1.1". The batch must split into the microbatches and each of
those over dp.

With --train sgd|adam the plan is a training step: a training section
(4.5) with the optimizer (SGD: lr 0.05, momentum 0.9; Adam: lr 1e-3;
--lr overrides), --steps (default 2) and grad_sync {"*": all_reduce}, which
delivers every param's gradient in its storage placement, all-reduced
wherever it comes out partial. The program's loss is loss.out either way.
--train none (the default) writes no training section.

--comment TEXT (repeatable) puts "# TEXT" lines at the top, then a line
with the command that wrote the file (its arguments but the comments).
Without new options the output is byte for byte what earlier versions
wrote.

usage: gen_plan.py [-o FILE] [--ops N | --layers L] [--dp 4] [--tp 8]
                   [--pp 1] [--stages S] [--microbatches M]
                   [--schedule gpipe|1f1b|interleaved-1f1b|zb-h1|...]
                   [--train none|sgd|adam] [--lr X] [--steps N] [--sp]
                   [--qkv separate|fused] [--comment TEXT]... [--batch B]
                   [--seq S] [--hidden H] [--heads NH] [--ffn F] [--vocab V]
                   [--dtype f64|f32|bf16|f16]
"""

import argparse
import math
import re
import shlex
import sys

SCHEDULES = ("gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "looped-bfs",
             "interleaved-zb", "zbv", "dualpipev")
# the schedules a plan names from format 1.1 on
SCHEDULES_1_1 = ("looped-bfs", "interleaved-zb", "zbv", "dualpipev")


def command_line(argv):
    """The command that wrote the file: its arguments but --comment's."""
    args, skip = [], False
    for x in argv:
        if skip:
            skip = False
        elif x == "--comment":
            skip = True
        elif not x.startswith("--comment="):
            args.append(x)
    return " ".join(shlex.quote(x) for x in ["python3", "bench/gen_plan.py"] + args)


def main(argv=None):
    if argv is None:
        argv = sys.argv[1:]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", default="-", help="file (- for stdout)")
    ap.add_argument("--ops", type=int, default=100000,
                    help="number of ops wanted (the layer count is rounded "
                         "up so the plan has at least this many)")
    ap.add_argument("--layers", type=int, default=0,
                    help="number of layers (overrides --ops)")
    ap.add_argument("--dp", type=int, default=4)
    ap.add_argument("--tp", type=int, default=8)
    ap.add_argument("--pp", type=int, default=1,
                    help="pipeline ranks: the size of a third mesh axis, pp")
    ap.add_argument("--stages", type=int, default=0,
                    help="pipeline stages (default --pp; interleaved-1f1b: "
                         "a multiple of --pp, stage s on pp rank s mod pp; "
                         "zbv, dualpipev: 2 x --pp in a V)")
    ap.add_argument("--microbatches", type=int, default=0,
                    help="microbatches (default 2 x pp)")
    ap.add_argument("--schedule", choices=SCHEDULES, default="1f1b")
    ap.add_argument("--train", choices=["none", "sgd", "adam"], default="none",
                    help="add a training section with this optimizer")
    ap.add_argument("--lr", type=float, default=None,
                    help="learning rate (default 0.05 for sgd, 1e-3 for adam)")
    ap.add_argument("--steps", type=int, default=2,
                    help="optimizer steps a verification runs (with --train)")
    ap.add_argument("--comment", action="append", default=[],
                    help="a line for the header comment (repeatable)")
    ap.add_argument("--sp", action="store_true",
                    help="sequence parallel: the residual stream and the "
                         "norms are sharded on the sequence dim over tp")
    ap.add_argument("--qkv", choices=["separate", "fused"], default="separate")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--ffn", type=int, default=11008)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--dtype", choices=["f64", "f32", "bf16", "f16"],
                    default="bf16")
    a = ap.parse_args(argv)

    B, S, H, NH, F, V = a.batch, a.seq, a.hidden, a.heads, a.ffn, a.vocab
    dp, tp = a.dp, a.tp
    if H % NH:
        ap.error("--hidden must be a multiple of --heads")
    D = H // NH
    # Legality conditions of the sharding rules this plan relies on.
    for what, n, k in (("--heads", NH, tp), ("--ffn", F, tp),
                       ("--vocab", V, tp), ("--batch", B, dp),
                       ("--hidden", H, tp)):
        if n % k:
            ap.error("%s (%d) must be divisible by the mesh axis (%d)"
                     % (what, n, k))
    if a.sp and S % tp:
        ap.error("--seq must be divisible by --tp with --sp")
    for what, n in (("--batch", B), ("--seq", S), ("--heads", NH), ("--ffn", F)):
        if n < 2:
            ap.error("%s must be at least 2" % what)

    per_layer = 22 if a.qkv == "fused" else 25
    fixed = 4  # embedding, final norm, lm head, loss
    if a.layers > 0:
        L = a.layers
    else:
        L = max(1, -(-(a.ops - fixed) // per_layer))

    # The pipeline: S stages on the pp axis, M microbatches.
    pp = a.pp
    if pp < 1:
        ap.error("--pp must be at least 1")
    nst = a.stages or pp
    mb = a.microbatches or 2 * pp
    if pp > 1:
        if a.schedule in ("interleaved-1f1b", "interleaved-zb"):
            if nst % pp or nst < 2 * pp:
                ap.error("%s takes a multiple (at least two) of --pp "
                         "stages, not %d" % (a.schedule, nst))
        elif a.schedule == "looped-bfs":
            if nst % pp:
                ap.error("looped-bfs takes a multiple of --pp stages, not %d"
                         % nst)
        elif a.schedule in ("zbv", "dualpipev"):
            if nst != 2 * pp:
                ap.error("%s takes two stages per pp rank: --stages %d, not "
                         "%d" % (a.schedule, 2 * pp, nst))
            if a.schedule == "dualpipev" and mb < nst:
                ap.error("dualpipev takes at least as many microbatches as "
                         "stages (%d), not %d" % (nst, mb))
        elif nst != pp:
            ap.error("%s takes one stage per pp rank: --stages %d, not %d"
                     % (a.schedule, pp, nst))
        if L % nst:
            ap.error("the stages (%d) must divide the layers (%d)" % (nst, L))
        if mb < 1 or B % (mb * dp):
            ap.error("the batch (%d) must split into %d microbatches, each "
                     "over dp (%d)" % (B, mb, dp))
    elif a.stages or a.microbatches or a.schedule != "1f1b":
        ap.error("--stages, --microbatches and --schedule need --pp > 1")
    if a.train == "none" and (a.lr is not None or a.steps != 2):
        ap.error("--lr and --steps need --train")
    if a.steps < 1:
        ap.error("--steps must be at least 1")

    dt = a.dtype
    scale = repr(1.0 / math.sqrt(D))

    # Placements (compact form, one entry per mesh axis: dp then tp).
    RR = "RR"
    X = "S(0)S(1)" if a.sp else "S(0)R"  # residual stream / norms
    XG = "S(0)R"            # gathered activations feeding column matmuls
    COL_W = "RS(1)"         # column-parallel weight [in, out/tp]
    ROW_W = "RS(0)"         # row-parallel weight [in/tp, out]
    COL_OUT = "S(0)S(2)"    # [B, S, H/tp]
    HEADS = "S(0)S(2)"      # [B, S, NH/tp, D]
    BHSD = "S(0)S(1)"       # [B, NH/tp, S, D] and friends
    ROW_OUT = "S(0)P(sum)"  # row-parallel result before the all-reduce

    out = sys.stdout if a.output == "-" else open(a.output, "w", newline="\n")
    w = out.write

    tensors = []     # (name, text)
    ops = []         # text lines
    strategies = []  # (op, text)
    placements = []  # (tensor, text)

    def param(name, shape, pl):
        tensors.append((name, "{shape: [%s], dtype: %s, role: param}"
                        % (", ".join(str(s) for s in shape), dt)))
        placements.append((name, pl))

    def op(name, kind, ins, outs, strat_in, strat_out, attrs=None):
        o = outs[0] if len(outs) == 1 else "[%s]" % ", ".join(outs)
        line = "{name: %s, op: %s, in: [%s], out: %s" % (
            name, kind, ", ".join(ins), o)
        if attrs:
            line += ", attrs: {%s}" % attrs
        ops.append(line + "}")
        so = strat_out[0] if len(strat_out) == 1 else "[%s]" % ", ".join(strat_out)
        strategies.append((name, "{in: [%s], out: %s}" % (", ".join(strat_in), so)))

    # ---- inputs, embedding -------------------------------------------------
    tensors.append(("tokens", "{shape: [batch=%d, seq=%d], dtype: i32, "
                    "role: input, range: [0, %d]}" % (B, S, V)))
    tensors.append(("labels", "{shape: [batch=%d, seq=%d], dtype: i32, "
                    "role: input, range: [0, %d]}" % (B, S, V)))
    placements.append(("tokens", "S(0)R"))
    placements.append(("labels", "S(0)R"))
    tensors.append(("causal_mask", "{shape: [%d, %d], dtype: %s, role: const, "
                    "init: causal_mask}" % (S, S, dt)))
    placements.append(("causal_mask", RR))
    param("embed.weight", [V, H], "RS(0)")  # vocab parallel
    # The masked partial sum of a row-sharded table: P(sum) over tp.
    op("embed", "embedding", ["embed.weight", "tokens"], ["embed.out"],
       ["RS(0)", "S(0)R"], [ROW_OUT])
    x = "embed.out"

    # ---- layers ---------------------------------------------------------------
    for i in range(L):
        p = "layers.%d." % i
        param(p + "ln1.weight", [H], RR)
        op(p + "ln1", "rmsnorm", [x, p + "ln1.weight"], [p + "ln1.out"],
           [X, RR], [X], "eps: 1e-05")
        h = p + "ln1.out"
        heads = {}
        if a.qkv == "fused":
            param(p + "attn.qkv.weight", [H, 3 * H], COL_W)
            op(p + "attn.qkv", "matmul", [h, p + "attn.qkv.weight"],
               [p + "attn.qkv.out"], [XG, COL_W], [COL_OUT])
            # Per-head interleaved layout, so the split stays local to a rank.
            op(p + "attn.qkv.heads", "reshape", [p + "attn.qkv.out"],
               [p + "attn.qkv.heads.out"], [COL_OUT], [HEADS],
               "shape: [%d, %d, %d, %d]" % (B, S, NH, 3 * D))
            names = [p + "attn.%s.heads.out" % c for c in "qkv"]
            op(p + "attn.qkv.split", "split", [p + "attn.qkv.heads.out"],
               names, [HEADS], [HEADS] * 3,
               "dim: -1, sizes: [%d, %d, %d]" % (D, D, D))
            for c, n in zip("qkv", names):
                heads[c] = n
        else:
            for c in "qkv":
                param(p + "attn.%s.weight" % c, [H, H], COL_W)
                op(p + "attn." + c, "matmul", [h, p + "attn.%s.weight" % c],
                   [p + "attn.%s.out" % c], [XG, COL_W], [COL_OUT])
            for c in "qkv":
                op(p + "attn.%s.heads" % c, "reshape", [p + "attn.%s.out" % c],
                   [p + "attn.%s.heads.out" % c], [COL_OUT], [HEADS],
                   "shape: [%d, %d, %d, %d]" % (B, S, NH, D))
                heads[c] = p + "attn.%s.heads.out" % c
        for c in "qkv":
            op(p + "attn.%s.perm" % c, "permute", [heads[c]],
               [p + "attn.%s.perm.out" % c], [HEADS], [BHSD],
               "perm: [0, 2, 1, 3]")
        op(p + "attn.k.t", "transpose", [p + "attn.k.perm.out"],
           [p + "attn.k.t.out"], [BHSD], [BHSD], "dims: [-2, -1]")
        op(p + "attn.scores", "matmul", [p + "attn.q.perm.out", p + "attn.k.t.out"],
           [p + "attn.scores.out"], [BHSD, BHSD], [BHSD])
        op(p + "attn.scale", "scale", [p + "attn.scores.out"],
           [p + "attn.scale.out"], [BHSD], [BHSD], "factor: " + scale)
        op(p + "attn.mask", "add", [p + "attn.scale.out", "causal_mask"],
           [p + "attn.mask.out"], [BHSD, RR], [BHSD])
        op(p + "attn.softmax", "softmax", [p + "attn.mask.out"],
           [p + "attn.probs"], [BHSD], [BHSD], "dim: -1")
        op(p + "attn.ctx", "matmul", [p + "attn.probs", p + "attn.v.perm.out"],
           [p + "attn.ctx.out"], [BHSD, BHSD], [BHSD])
        op(p + "attn.ctx.perm", "permute", [p + "attn.ctx.out"],
           [p + "attn.ctx.perm.out"], [BHSD], [HEADS], "perm: [0, 2, 1, 3]")
        op(p + "attn.ctx.merge", "reshape", [p + "attn.ctx.perm.out"],
           [p + "attn.ctx.merge.out"], [HEADS], [COL_OUT],
           "shape: [%d, %d, %d]" % (B, S, H))
        param(p + "attn.o.weight", [H, H], ROW_W)
        op(p + "attn.o", "matmul", [p + "attn.ctx.merge.out", p + "attn.o.weight"],
           [p + "attn.o.out"], [COL_OUT, ROW_W], [ROW_OUT])
        # The all-reduce (or reduce-scatter with --sp) happens here.
        op(p + "attn.res", "add", [x, p + "attn.o.out"], [p + "attn.res.out"],
           [X, X], [X])
        x = p + "attn.res.out"
        param(p + "ln2.weight", [H], RR)
        op(p + "ln2", "rmsnorm", [x, p + "ln2.weight"], [p + "ln2.out"],
           [X, RR], [X], "eps: 1e-05")
        param(p + "mlp.fc1.weight", [H, F], COL_W)
        op(p + "mlp.fc1", "matmul", [p + "ln2.out", p + "mlp.fc1.weight"],
           [p + "mlp.fc1.out"], [XG, COL_W], [COL_OUT])
        op(p + "mlp.act", "gelu", [p + "mlp.fc1.out"], [p + "mlp.act.out"],
           [COL_OUT], [COL_OUT], "approximate: tanh")
        param(p + "mlp.fc2.weight", [F, H], ROW_W)
        op(p + "mlp.fc2", "matmul", [p + "mlp.act.out", p + "mlp.fc2.weight"],
           [p + "mlp.fc2.out"], [COL_OUT, ROW_W], [ROW_OUT])
        op(p + "mlp.res", "add", [x, p + "mlp.fc2.out"], [p + "mlp.res.out"],
           [X, X], [X])
        x = p + "mlp.res.out"

    # ---- head -----------------------------------------------------------------
    param("final_norm.weight", [H], RR)
    op("final_norm", "rmsnorm", [x, "final_norm.weight"], ["final_norm.out"],
       [X, RR], [X], "eps: 1e-05")
    param("lm_head.weight", [H, V], COL_W)
    op("lm_head", "matmul", ["final_norm.out", "lm_head.weight"], ["logits"],
       [XG, COL_W], [COL_OUT])
    # cross_entropy needs the class dim whole: the logits are gathered over
    # tp; the per-sample losses sum over dp (a P(sum) the output reduces).
    op("loss", "cross_entropy", ["logits", "labels"], ["loss.out"],
       ["S(0)R", "S(0)R"], ["P(sum)R"])

    # ---- write ------------------------------------------------------------------
    if a.comment:
        for c in a.comment:
            for line in c.split("\n"):
                w(("# " + line).rstrip() + "\n")
        w("# Written by: %s\n" % command_line(argv))
    w("# Generated by bench/gen_plan.py: a %d-layer transformer (%d ops), "
      "dp=%d x tp=%d%s, %s q/k/v.\n" % (L, len(ops), dp, tp,
                                         ", sequence parallel" if a.sp else "",
                                         a.qkv))
    w('libplan: "%s"\n' % ("1.1" if pp > 1 and a.schedule in SCHEDULES_1_1
                            else "1.0"))
    w("program:\n")
    w("  name: transformer-%dl\n" % L)
    w("  tensors:\n")
    for n, t in tensors:
        w("    %s: %s\n" % (n, t))
    w("  ops:\n")
    for line in ops:
        w("    - %s\n" % line)
    w("  outputs: [loss.out]\n")
    w("  loss: loss.out\n")
    if pp > 1:
        # every placement R along pp: one more entry per placement
        def add_pp(text):
            return re.sub(r"((?:R|S\(\d+\)|P\(\w+\)){2})(?![RSP(])",
                          lambda m: m.group(1) + "R", text)
        placements[:] = [(n, add_pp(pl)) for n, pl in placements]
        strategies[:] = [(n, add_pp(st)) for n, st in strategies]
    w("mesh:\n")
    if pp > 1:
        w("  axes: [dp=%d, tp=%d, pp=%d]\n" % (dp, tp, pp))
    else:
        w("  axes: [dp=%d, tp=%d]\n" % (dp, tp))
    w("  devices: iota\n")
    w("placements:\n")
    for n, pl in placements:
        w("  %s: %s\n" % (n, pl))
    w("strategies:\n")
    for n, s in strategies:
        w("  %s: %s\n" % (n, s))
    w("outputs:\n")
    w("  loss.out: %s\n" % ("RRR" if pp > 1 else "RR"))
    if pp > 1:
        # Stage s runs on pp rank s mod pp (spec 4.4): with more stages than
        # ranks (interleaved-1f1b) a rank holds stages s, s + pp, ...; zbv
        # and dualpipev put stage s >= pp on rank 2 pp - 1 - s.
        per = L // nst
        w("pipeline:\n  axis: pp\n  stages:\n")
        for st in range(nst):
            globs = ['"layers.%d.*"' % l for l in range(st * per, (st + 1) * per)]
            if st == 0:
                globs.insert(0, "embed")
            if st == nst - 1:
                globs += ["final_norm", "lm_head", "loss"]
            w("    - {ops: [%s]}\n" % ", ".join(globs))
        w("  microbatches: %d\n  schedule: %s\n" % (mb, a.schedule))
    if a.train != "none":
        # all_reduce: every param's gradient in its storage placement, summed
        # wherever it comes out partial (over dp; over tp too for the norm
        # weights under --sp). cross_entropy means over the global batch, so
        # the sum is the gradient: no division by dp.
        w("training:\n")
        if a.train == "sgd":
            lr = 0.05 if a.lr is None else a.lr
            w("  optimizer: {kind: sgd, lr: %r, momentum: 0.9}\n" % lr)
        else:
            lr = 1e-3 if a.lr is None else a.lr
            w("  optimizer: {kind: adam, lr: %r, beta1: 0.9, beta2: 0.999, "
              "eps: 1e-08}\n" % lr)
        w("  steps: %d\n" % a.steps)
        w('  grad_sync: {"*": all_reduce}\n')
    w("provenance: {strategy: megatron%s, tool: bench/gen_plan.py, "
      "layers: %d, seed: 0}\n" % ("-sp" if a.sp else "", L))
    if out is not sys.stdout:
        out.close()
    print("gen_plan: %d layers, %d ops, %d tensors declared -> %s"
          % (L, len(ops), len(tensors), a.output), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
