"""The models and plans the torchrun worker runs parallelized: a Megatron
MLP (examples/mlp-megatron.plan.yaml's placements on a traced nn.Linear
MLP), the same MLP with its loss in the module and a `training` section
(so the lowered plan is the training step: forward, backward, gradient
sync), a pre-norm transformer block with Megatron + sequence
parallelism (tests/python/test_torch.py's plan), and a vocab-parallel
embedding before a column-parallel head, on dp=2 x tp=world/2."""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # tests/python: util, test_torch

from util import libplan  # noqa: E402  (the in-tree binding)
import test_torch as tt  # noqa: E402

MLP_PLACEMENTS = {"x": "S(0)R", "fc1.weight": "RS(0)", "fc1.bias": "RS(0)",
                  "fc2.weight": "RS(1)", "fc2.bias": "RP(sum)"}
MLP_STRATEGIES = {"fc1": (["S(0)R", "RS(0)", "RS(0)"], "S(0)S(1)"),
                  "act": (["S(0)S(1)"], "S(0)S(1)"),
                  "fc2": (["S(0)S(1)", "RS(1)", "RP(sum)"], "S(0)P(sum)")}
MLP_OUTPUTS = {"fc2": "S(0)R"}


def mlp_module(hidden=32):
    """fc1, GELU, fc2 (tests/python/test_torch.py's MLP)."""
    return tt._mlp(hidden)


def train_module():
    """The MLP with its loss, mean(y * y), in its forward."""
    import torch

    class WithLoss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = mlp_module()

        def forward(self, x):
            y = self.inner(x)
            return (y * y).mean()

    return WithLoss()


# The MLP's plan under `inner.`, the loss's ops with the batch on dp: the
# mean is a partial average over dp, all-reduced into the replicated loss.
TRAIN_PLACEMENTS = {("inner." + k if k != "x" else k): v
                    for k, v in MLP_PLACEMENTS.items()}
TRAIN_STRATEGIES = dict({"inner." + k: v for k, v in MLP_STRATEGIES.items()},
                        mul=(["S(0)R", "S(0)R"], "S(0)R"),
                        mean=(["S(0)R"], "P(avg)R"))
TRAIN_OUTPUTS = {"mean": "RR"}
TRAINING = 'training:\n  optimizer: {kind: sgd, lr: %g}\n' \
           '  grad_sync: {"*": %s}\n'


def embed_module(vocab=32, d=16):
    """A token table and a projection back to the vocabulary: the two ends
    of a language model."""
    import torch

    class Embed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(vocab, d)
            self.fc = torch.nn.Linear(d, vocab, bias=False)

        def forward(self, x):
            return self.fc(self.emb(x))

    return Embed()


# A vocab-parallel table (its rows over tp: each rank looks up the ids it
# holds, a partial sum all-reduced before the column-parallel head).
EMBED_PLACEMENTS = {"x": "S(0)R", "emb.weight": "RS(0)", "fc.weight": "RS(0)"}
EMBED_STRATEGIES = {"emb": (["RS(0)", "S(0)R"], "S(0)P(sum)"),
                    "fc": (["S(0)R", "RS(0)"], "S(0)S(2)")}
EMBED_OUTPUTS = {"fc": "S(0)S(2)"}


def block_module(tp):
    return tt._block(d=16, heads=max(2, tp), seq=8)


def case(name, tp):
    """(module factory, example input, placements, strategies, outputs)."""
    import torch
    if name == "mlp":
        return (lambda: mlp_module(), torch.randn(8, 16), MLP_PLACEMENTS,
                MLP_STRATEGIES, MLP_OUTPUTS)
    if name == "mlp_train":
        return (train_module, torch.randn(8, 16), TRAIN_PLACEMENTS,
                TRAIN_STRATEGIES, TRAIN_OUTPUTS)
    if name == "embed":
        return (embed_module, torch.randint(0, 32, (8, 4)), EMBED_PLACEMENTS,
                EMBED_STRATEGIES, EMBED_OUTPUTS)
    return (lambda: block_module(tp), torch.randn(4, 8, 16),
            tt._BLOCK_PLACEMENTS, tt._BLOCK_STRATEGIES,
            {"add_2": tt._SP})


def make_plan(module, x, mesh, placements, strategies, outputs, lr=None,
              sync="auto"):
    """The plan of the traced module; with `lr`, a training plan (the
    module's output is the loss, SGD at that rate, every gradient synced
    as `sync` says)."""
    import libplan.torch as lt
    with lt.program_from_module(module, (x,)) as prog:
        plan = libplan.make_plan(prog, mesh, placements=placements,
                                 strategies=strategies, outputs=outputs)
    if lr is None:
        return plan
    with plan:
        lines = plan.text(self_contained=True).split("\n")
    at = next(i for i, ln in enumerate(lines) if ln.startswith("  outputs:"))
    lines.insert(at + 1, "  loss: %s" % next(iter(outputs)))
    return libplan.parse("\n".join(lines) + TRAINING % (lr, sync))
