"""Run under torchrun (gloo, CPU, 2 processes): a 4-layer MLP whose plan
cuts it into two pipeline stages, parallelized and run for one training
step under each of several schedules (libplan.torch.parallelize with a
pipelined plan: torch.distributed.pipelining in the plan's action order).
Per schedule, one line "ok NAME {json}" (or "FAIL NAME {json}") with: the
compute actions this rank ran against the plan's for its pipeline rank,
the loss against the single-device module's (on the last stage's rank),
libplan's verify of the same plan (rank 0), and the largest difference of the gradients of the parameters this rank
holds from the single-device module's."""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # tests/python: util

from util import libplan  # noqa: E402  (the in-tree binding)

SCHEDULES = ("gpipe", "1f1b", "zb-h1")
MICROBATCHES = 4


def mlp():
    import torch

    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.l0 = torch.nn.Linear(8, 8)
            self.l1 = torch.nn.Linear(8, 8)
            self.l2 = torch.nn.Linear(8, 8)
            self.l3 = torch.nn.Linear(8, 4)

        def forward(self, x, y):
            h = torch.relu(self.l0(x))
            h = torch.relu(self.l1(h))
            h = torch.relu(self.l2(h))
            d = self.l3(h) - y
            return (d * d).mean()

    return MLP()


def pipeline_plan(module, x, y, schedule):
    """The traced module's plan on a mesh of one pipeline axis of 2: every
    placement R, layers 0-1 on stage 0, the rest and the loss on stage 1."""
    import libplan.torch as lt
    with lt.program_from_module(module, (x, y)) as prog:
        strategies = {o.name: (["R"] * len(o.inputs), "R") for o in prog.ops}
        with libplan.make_plan(prog, {"pp": 2},
                               strategies=strategies) as plan:
            lines = plan.text(self_contained=True).split("\n")
    at = next(i for i, ln in enumerate(lines) if ln.startswith("  outputs:"))
    lines.insert(at + 1, "  loss: mean")
    return libplan.parse("\n".join(lines) + (
        "pipeline:\n  axis: pp\n  stages:\n"
        "    - {ops: [l0, relu, l1, relu_1]}\n"
        "    - {ops: [l2, relu_2, l3, sub, mul, mean]}\n"
        "  microbatches: %d\n  schedule: %s\n"
        "training:\n  optimizer: {kind: sgd, lr: 0.1}\n")
        % (MICROBATCHES, schedule))


def run(name):
    import torch
    import libplan.torch as lt
    torch.manual_seed(0)
    x, y = torch.randn(16, 8), torch.randn(16, 4)
    ref = mlp()
    module = mlp()
    module.load_state_dict(ref.state_dict())
    loss_ref = ref(x, y)
    loss_ref.backward()
    plan = pipeline_plan(module, x, y, name)
    with plan:
        sched = plan.schedule()
        rank_of = {}
        try:
            for r in range(sched.ranks):
                for a in sched.actions(r):
                    rank_of.setdefault(a.stage, r)
            mesh = lt.device_mesh(plan)
            module = lt.parallelize(module, plan, mesh)
            want = [(a.stage, a.kind, a.microbatch)
                    for a in sched.actions(module.pipeline_rank)
                    if a.kind in ("F", "B", "I", "W")]
            # libplan's own check of the same plan (rank 0 runs it)
            verdict = plan.verify().equal if module.pipeline_rank == 0 \
                else None
        finally:
            sched.close()
    loss = module.step(x, y)
    refp = dict(ref.named_parameters())
    diffs, held = [], []
    for qname, p in module.named_parameters():
        stage_of = 0 if qname.split(".")[0] in ("l0", "l1") else 1
        if stage_of not in module.stages_held:
            continue
        held.append(qname)
        diffs.append(float((p.grad - refp[qname].grad).abs().max())
                     if p.grad is not None else float("inf"))
    res = {"schedule": name, "rank": module.pipeline_rank,
           "order_equal": [tuple(a) for a in module.executed] == want,
           "actions": len(want), "held": held,
           "executed": ["%d%s%d" % a for a in module.executed],
           "max_grad_diff": max(diffs) if diffs else None,
           "verify_equal": verdict,
           "loss_diff": None if loss is None else
           abs(float(loss) - float(loss_ref))}
    ok = res["order_equal"] and held and res["max_grad_diff"] <= 1e-6 and \
        (loss is None or res["loss_diff"] <= 1e-6) and \
        verdict is not False
    # one write(2) per line: two ranks share the launcher's stdout, and
    # print() may write the text and its newline apart
    os.write(1, ("%s %s %s\n" % ("ok" if ok else "FAIL", name,
                                  json.dumps(res))).encode())
    return ok


def main():
    import torch.distributed as dist
    dist.init_process_group("gloo")
    ok = True
    try:
        for name in SCHEDULES:
            ok = run(name) and ok
    finally:
        dist.barrier()
        dist.destroy_process_group()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
