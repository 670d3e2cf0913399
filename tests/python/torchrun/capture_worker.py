"""One process of a torchrun launch (gloo, CPU, 4 processes): runs
libplan.torch.capture on the cases below and prints, on rank 0, one line
per case: "ok CASE {json}" or "FAIL CASE {json}". A case passes when
capture's verdict is the expected one and, for a bug, names the module
path where it sits. Cases (CASES narrows them):

- rowpar / rowpar_no_allreduce: a hand-written Megatron MLP on plain
  tensors, fc1 column parallel, fc2 row parallel with its all-reduce
  (dist.all_reduce, c10d) before the bias, over tp=4; without the
  all-reduce the partial sums are added to the bias and returned.
- funcol / funcol_no_allreduce: the same with a functional all_reduce, on
  dp=2 x tp=2 (the batch on dp).
- tp_style / tp_style_wrong_dim: parallelize_module with ColwiseParallel
  for fc1 and RowwiseParallel for fc2 on tp=4; the bug: fc2's
  input_layouts says Shard(0) where fc1 leaves its output on dim 1.
"""

import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from cases import libplan  # noqa: F401  (puts the binding on sys.path)
import libplan.torch as lt

IN, HIDDEN, OUT = 16, 32, 16


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(IN, HIDDEN)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(HIDDEN, OUT)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class ColumnLinear(nn.Module):
    """The rows of W (and of b) this rank holds."""

    def __init__(self, full, tp, r):
        super().__init__()
        n = full.weight.shape[0] // tp
        self.weight = nn.Parameter(full.weight.detach()[r * n:(r + 1) * n])
        self.bias = nn.Parameter(full.bias.detach()[r * n:(r + 1) * n])

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)


class RowLinear(nn.Module):
    """The columns of W this rank holds; partial sums all-reduced over the
    group, then the (replicated) bias added once."""

    def __init__(self, full, tp, r, group, reduce):
        super().__init__()
        n = full.weight.shape[1] // tp
        self.weight = nn.Parameter(full.weight.detach()[:, r * n:(r + 1) * n])
        self.bias = nn.Parameter(full.bias.detach().clone())
        self.group, self.reduce = group, reduce

    def forward(self, x):
        y = F.linear(x, self.weight)
        if self.reduce == "c10d":
            dist.all_reduce(y, group=self.group)
        elif self.reduce == "funcol":
            import torch.distributed._functional_collectives as funcol
            y = funcol.all_reduce(y, "sum", self.group)
        return y + self.bias


class HandMLP(nn.Module):
    def __init__(self, ref, tp, r, group, reduce):
        super().__init__()
        self.fc1 = ColumnLinear(ref.fc1, tp, r)
        self.act = nn.GELU()
        self.fc2 = RowLinear(ref.fc2, tp, r, group, reduce)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


HAND = {"fc1.weight": "S(0)", "fc1.bias": "S(0)", "fc2.weight": "S(1)",
        "fc2.bias": "R"}


def hand_case(name, rank, world):
    ref = MLP()
    x = torch.randn(8, IN)
    prog = lt.program_from_module(ref, (x,))
    if name.startswith("rowpar"):
        mesh, tp, r = {"tp": world}, world, rank
        group, pl = None, dict(HAND, x="R")
        reduce = "none" if name.endswith("no_allreduce") else "c10d"
    else:  # funcol: dp=2 x tp=world/2, the batch on dp
        tp = world // 2
        mesh, r = {"dp": 2, "tp": tp}, rank % tp
        dp_r = rank // tp
        groups = [dist.new_group([d * tp + i for i in range(tp)])
                  for d in range(2)]
        group = groups[dp_r]
        pl = {k: "R" + v for k, v in HAND.items()}
        pl["x"] = "S(0)R"
        x = x[dp_r * 4:(dp_r + 1) * 4]
        reduce = "none" if name.endswith("no_allreduce") else "funcol"
    mod = HandMLP(ref, tp, r, group, reduce)
    out, rep = lt.capture(mod, (x,), prog, mesh, placements=pl,
                          outputs={"fc2": "S(0)R" if "dp" in mesh else "R"})
    return rep


def _styles(wrong):
    """fc1 column parallel, fc2 row parallel; the wrong plan says fc2's
    input is sharded on dim 0 where fc1 leaves it on dim 1 (its output
    dim) - a Shard dim written wrong in the plan. fc2's RowwiseParallel
    then takes each rank's [8, 8] block as rows of a [32, 8] tensor."""
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel,
                                                   RowwiseParallel)
    return {"fc1": ColwiseParallel(),
            "fc2": RowwiseParallel(input_layouts=Shard(0) if wrong else
                                   Shard(1))}


def style_case(name, rank, world):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import parallelize_module
    ref = MLP()
    x = torch.randn(8, IN)
    prog = lt.program_from_module(ref, (x,))
    mod = MLP()
    mod.load_state_dict(ref.state_dict())
    mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("tp",))
    parallelize_module(mod, mesh, _styles(name.endswith("wrong_dim")))
    try:
        out, rep = lt.capture(mod, (x,), prog, {"tp": world})
    except Exception as e:  # the wrong plan may also fail in DTensor
        return {"error": "%s: %s" % (type(e).__name__, e)}
    return rep


CASES = {"rowpar": (hand_case, True, None),
         "rowpar_no_allreduce": (hand_case, False, "fc2"),
         "funcol": (hand_case, True, None),
         "funcol_no_allreduce": (hand_case, False, "fc2"),
         "tp_style": (style_case, True, None),
         "tp_style_wrong_dim": (style_case, False, "fc2")}


def main():
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo")
    failed = 0
    try:
        for name in os.environ.get("CASES", " ".join(CASES)).split():
            fn, want_equal, at = CASES[name]
            torch.manual_seed(0)
            rep = fn(name, rank, world)
            if isinstance(rep, dict):
                res = dict(rep, equal=None)
                good = False
            else:
                res = rep.to_dict()
                good = rep.equal is want_equal and (
                    at is None or (rep.first_op or "").startswith(
                        "module %s" % at))
            failed += not good
            if rank == 0:
                print("%s %s %s" % ("ok" if good else "FAIL", name,
                                    json.dumps(res, sort_keys=True)),
                      flush=True)
        dist.barrier()  # every rank done before any tears its links down
    finally:
        dist.destroy_process_group()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
