#!/bin/sh
# The cost model against published training throughput (docs/cost.md,
# "Against published numbers"). Generates the plans of two published
# configurations (bench/gen_published.py), lays the dense one out with
# `plan search --strategy fsdp`, prices both with `plan cost --hardware
# h100 --format json`, and prints the modeled step, tokens/s per GPU and
# MFU next to the published figures, with their ratio (modeled /
# published), and the breakdown of the modeled step.
#
#   llama3-8b   TorchTitan, docs/performance.md, Table 1 (Llama 3.1 8B, 8
#               H100s, FSDP 8, local batch 2, seq 8192, selective AC, bf16,
#               no torch.compile): 5,762 tokens/s per GPU.
#   mixtral     Megatron-Core MoE README (megatron/core/transformer/moe):
#               468 TFLOPS per GPU, Mixtral 8x7B bf16, 64 H100s, TP1 EP8
#               PP4 VP8, seq 4096, micro batch 1, global batch 256, vocab
#               32K. Modeled on dp=2 x ep=8 x pp=4 (attention data
#               parallel over the 16 GPUs of a stage, one expert a GPU of
#               ep), 16 microbatches, interleaved-1f1b with 8 stages of one
#               layer a pipeline rank; and the same with 1f1b (4 stages).
#
# usage: bench/bench_published.sh [BUILD_DIR]   (default: build)
#   EXTRA="--set efficiency.matmul=0.6"  passed to every `plan cost`
set -eu
BUILD=${1:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
TOOL=$BUILD/plan
OUT=$HERE/out/published
mkdir -p "$OUT"
EXTRA=${EXTRA:-}

# -- Llama 3 8B, TorchTitan: FSDP over 8, local batch 2, seq 8192 ------------
python3 "$HERE/gen_published.py" llama3-8b --ranks 8 --local-batch 2 \
  --seq 8192 -o "$OUT/llama3-8b.program.yaml"
"$TOOL" search "$OUT/llama3-8b.program.yaml" --strategy fsdp --hardware h100 \
  --quiet -o "$OUT/llama3-8b.fsdp.plan.yaml" >/dev/null
# shellcheck disable=SC2086
"$TOOL" cost --hardware h100 --format json $EXTRA \
  "$OUT/llama3-8b.fsdp.plan.yaml" >"$OUT/llama3-8b.cost.json"
# the published machine (TorchTitan's Grand Teton H100s: HBM2e at 2.4 TB/s,
# 500 W; its peak "between SXM and NVL"): the NVL's dense bf16 peak
# (NVIDIA H100 datasheet, H100 NVL: 1,671 TFLOPS bf16 with sparsity)
# shellcheck disable=SC2086
"$TOOL" cost --hardware h100 --format json $EXTRA \
  --set flops.bf16=835.5e12 --set memory_bandwidth=2.4e12 \
  "$OUT/llama3-8b.fsdp.plan.yaml" >"$OUT/llama3-8b.nvl.cost.json"

# -- Mixtral 8x7B, Megatron-Core: dp=2 x ep=8 x pp=4, 16 microbatches -------
for v in 8 1; do
  python3 "$HERE/gen_published.py" mixtral --layers 32 --dp 2 --ep 8 --pp 4 \
    --vstages $v --microbatches 16 --local-batch 16 --seq 4096 \
    -o "$OUT/mixtral-8x7b.v$v.plan.yaml"
  # exit 1 when it does not fit (1f1b without recomputation: the first
  # stage's activations); the time is what is compared
  # shellcheck disable=SC2086
  "$TOOL" cost --hardware h100 --format json $EXTRA \
    "$OUT/mixtral-8x7b.v$v.plan.yaml" >"$OUT/mixtral-8x7b.v$v.cost.json" \
    2>"$OUT/mixtral-8x7b.v$v.fit.txt" || [ $? -eq 1 ]
done

python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
PEAK = 989.4e12                       # H100 SXM dense bf16 (the profile)
H, L, NH, KV, D, F = 4096, 32, 32, 8, 128, 14336

def load(name):
    with open("%s/%s" % (out, name)) as f:
        return json.load(f)

def terms(d):
    """The modeled step split by what bounds it: matmul-class ops on the
    tensor cores (forward, backward, recompute), memory-bound ops,
    collectives (with a pipeline's transfers), optimizer, bubble. With a
    pipeline the parts are summed over the stages: a rank's share is
    divided by the pipeline ranks (the stages are alike)."""
    t = d["time"]
    pp = 1
    if d.get("pipeline"):
        for ax in d["mesh"].split(" x "):
            if ax.startswith("pp="):
                pp = int(ax[3:])
    mm = sum(o["seconds"] + o["backward_seconds"] for o in d["ops"]
             if o["bound"] == "compute") / pp
    attn = sum(o["seconds"] + o["backward_seconds"] for o in d["ops"]
               if o["kind"] == "attention") / pp
    comp = (t["compute_forward"] + t["compute_backward"] + t["recompute"]) / pp
    coll = (t["collectives_forward"] + t["collectives_backward"] +
            t["grad_sync"] + t["pipeline_transfers"]) / pp
    return dict(step=t["step"], mm=mm, attn=attn, other=comp - mm,
                coll=coll, opt=t["optimizer"] / pp, bubble=t["bubble"])


# FLOPs a token, each source's own convention. TorchTitan (train.py,
# get_num_flop_per_token): 6 x the parameters but the embedding, plus
# 12 l h q t (attention, causal sparsity not taken off).
layer = 2 * H * NH * D + 2 * H * KV * D + 3 * H * F + 2 * H
llama_params = L * layer + H + H * 128256
llama_fpt = 6 * llama_params + 12 * L * NH * D * 8192
# Megatron-LM (training.py, num_floating_point_operations), Mixtral:
# 12 l h^2 [(1 + g/a + s/h) + (f/h) k 3/2 + V / (2 l h)] a token.
mix_fpt = 12 * L * H * H * ((1 + KV / NH + 4096 / H) + (F / H) * 2 * 1.5
                            + 32000 / (2 * L * H))

rows = []
for name, f, tokens, gpus, fpt, pub_tps, src in (
        ("Llama 3 8B, FSDP 8 (h100-sxm)", "llama3-8b.cost.json",
         16 * 8192, 8, llama_fpt, 5762.0, "TorchTitan"),
        ("Llama 3 8B, FSDP 8 (NVL peak, 2.4 TB/s)", "llama3-8b.nvl.cost.json",
         16 * 8192, 8, llama_fpt, 5762.0, "TorchTitan"),
        ("Mixtral 8x7B, EP8 PP4, interleaved v=8", "mixtral-8x7b.v8.cost.json",
         256 * 4096, 64, mix_fpt, 468e12 / mix_fpt, "Megatron-Core"),
        ("Mixtral 8x7B, EP8 PP4, 1f1b", "mixtral-8x7b.v1.cost.json",
         256 * 4096, 64, mix_fpt, 468e12 / mix_fpt, "Megatron-Core")):
    d = load(f)
    tm = terms(d)
    tps = tokens / tm["step"] / gpus
    rows.append((name, tm, tps, pub_tps, fpt, src))

print("%-40s %9s %11s %11s %7s %6s %6s" % (
    "configuration", "step", "tok/s/GPU", "published", "ratio", "MFU", "pub"))
for name, tm, tps, pub, fpt, src in rows:
    print("%-40s %7.3f s %11.0f %11.0f %6.2fx %5.1f%% %5.1f%%" % (
        name, tm["step"], tps, pub, tps / pub, 100 * tps * fpt / PEAK,
        100 * pub * fpt / PEAK))
print()
print("breakdown of the modeled step, seconds a GPU (forward, backward,")
print("recompute; with a pipeline a rank's share of the stages):")
print("%-40s %8s %8s %8s %8s %8s %8s %10s" % (
    "configuration", "matmul", "(attn)", "memory", "collect.", "optim.",
    "bubble", "e_matmul="))
for name, tm, tps, pub, fpt, src in rows:
    # the matmul efficiency (default 0.7) at which the modeled step would
    # equal the published one, everything else as modeled
    target = tm["step"] * tps / pub
    rest = tm["step"] - tm["mm"]
    e = 0.7 * tm["mm"] / (target - rest) if target > rest else float("inf")
    print("%-40s %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f %10.2f" % (
        name, tm["mm"], tm["attn"], tm["other"], tm["coll"], tm["opt"],
        tm["bubble"], e))
PY
