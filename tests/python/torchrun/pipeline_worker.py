"""Run under torchrun (gloo, CPU, 4 processes): a 4-layer MLP whose plan
cuts it into two pipeline stages, parallelized with
libplan.torch.parallelize (torch.distributed.pipelining in the plan's
action order) and run for one training step, then one SGD step.

- On a mesh of the pipeline axis alone (pp=2, ranks 0 and 1; ranks 2 and
  3 wait), under gpipe, 1f1b and zb-h1.
- With another mesh axis inside the stages: dp=2 x pp=2 (the batch split
  over dp, the weights replicated, their gradients all-reduced over dp;
  zb-h1, so the all-reduces run in the weight-gradient actions; the
  plan searched by greedy) and tp=2 x pp=2 (Megatron: l0 and l2
  column-parallel, l1 and l3 row-parallel; 1f1b; searched by megatron),
  stage 0 holding l0 alone, so the activation crossing the boundary is
  split (dp: its rows, tp: its columns). Each searched plan is checked
  equal to the hand-written one the negative cases change.
- Negative cases: the dp plan with grad_sync none (each replica keeps its
  own gradients) and the tp plan with l2's weight placed on its input dim
  (and l2 said to take it so).

Per case and rank, one line "ok NAME {json}" (or "FAIL NAME {json}")
with: the compute actions this rank ran against the plan's for its
pipeline rank, the loss against the single-device module's (on the last
stage's ranks), the largest difference of the gradients, and of the
parameters after the SGD step, of the parameters this rank holds from the
single-device module's, libplan's verify of the same plan (rank 0), and
for a mesh with other axes the collectives CommDebugMode counted in the
step against those the lowered plan runs on this rank's stages."""

import json
import os
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # tests/python: util

from util import libplan  # noqa: E402  (the in-tree binding)

SCHEDULES = ("gpipe", "1f1b", "zb-h1")
MICROBATCHES = 4
LR = 0.1
TOL = 1e-6  # f32, absolute: loss, gradients, updated parameters
STAGE_OPS = (("l0", "relu", "l1", "relu_1"),
             ("l2", "relu_2", "l3", "sub", "mul", "mean"))
# the cut of the plans with other axes: stage 0 holds l0 alone
SHORT_STAGE_OPS = (("l0", "relu"),
                   ("l1", "relu_1", "l2", "relu_2", "l3", "sub", "mul",
                    "mean"))


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


def _dp_strategies():
    """Every op on the batch split over dp; the loss a partial sum (each
    rank's rows' sum over the global count, as greedy makes it)."""
    b = "S(0)R"
    st = {o: ([b, "RR", "RR"], b) for o in ("l0", "l1", "l2", "l3")}
    st.update({o: ([b], b) for o in ("relu", "relu_1", "relu_2")})
    st.update(sub=([b, b], b), mul=([b, b], b), mean=([b], "P(sum)R"))
    return {"x": b, "y": b}, st


def _tp_strategies(wrong=False):
    """Megatron on tp: column-parallel l0 and l2 (out S(1)), row-parallel
    l1 and l3 (partial sums, all-reduced before the next op). `wrong`:
    l2's weight split on its input dim, and l2 said to take it so."""
    r, col, part = "RR", "S(1)R", "P(sum)R"
    pl, st = {}, {}
    for layer, kind in (("l0", "col"), ("l1", "row"), ("l2", "col"),
                        ("l3", "row")):
        if kind == "col":
            pl[layer + ".weight"] = pl[layer + ".bias"] = "S(0)R"
            st[layer] = ([r, "S(0)R", "S(0)R"], col)
        else:
            pl[layer + ".weight"], pl[layer + ".bias"] = col, part
            st[layer] = ([col, col, part], part)
    st.update(relu=([col], col), relu_1=([r], r), relu_2=([col], col),
              sub=([r, r], r), mul=([r, r], r), mean=([r], r))
    if wrong:
        pl["l2.weight"] = "S(1)R"
        st["l2"] = ([r, "S(1)R", "S(0)R"], col)
    return pl, st


def pipeline_plan(module, x, y, schedule, mesh=None, placements=None,
                  strategies=None, stages=STAGE_OPS, sync=None):
    """The traced module's plan with a pipeline section (two stages, the
    loss on the last) and a training section (SGD; `sync`: every
    gradient's grad_sync). Without placements and strategies, every
    placement R."""
    import libplan.torch as lt
    mesh = mesh or {"pp": 2}
    with lt.program_from_module(module, (x, y)) as prog:
        if strategies is None:
            rr = "R" * len(mesh)
            strategies = {o.name: ([rr] * len(o.inputs), rr)
                          for o in prog.ops}
        with libplan.make_plan(prog, mesh, placements=placements,
                               strategies=strategies,
                               outputs={"mean": "R" * len(mesh)}) as plan:
            lines = plan.text(self_contained=True).split("\n")
    at = next(i for i, ln in enumerate(lines) if ln.startswith("  outputs:"))
    lines.insert(at + 1, "  loss: mean")
    text = "\n".join(lines) + "pipeline:\n  axis: pp\n  stages:\n"
    text += "".join("    - {ops: [%s]}\n" % ", ".join(s) for s in stages)
    text += "  microbatches: %d\n  schedule: %s\n" % (MICROBATCHES, schedule)
    text += "training:\n  optimizer: {kind: sgd, lr: %g}\n" % LR
    if sync:
        text += '  grad_sync: {"*": %s}\n' % sync
    return libplan.parse(text)


# name: (schedule, mesh, hand-written (placements, strategies) or None,
#        the search strategy that makes the plan or None, stages, sync)
CASES = {
    "gpipe": ("gpipe", None, None, None, STAGE_OPS, None),
    "1f1b": ("1f1b", None, None, None, STAGE_OPS, None),
    "zb-h1": ("zb-h1", None, None, None, STAGE_OPS, None),
    # searched from the all-R plan: greedy and megatron make the
    # hand-written plans above (checked)
    "dp_pp": ("zb-h1", {"dp": 2, "pp": 2}, _dp_strategies, "greedy",
              SHORT_STAGE_OPS, None),
    "tp_pp": ("1f1b", {"tp": 2, "pp": 2}, _tp_strategies, "megatron",
              SHORT_STAGE_OPS, None),
    "dp_pp/no_sync": ("1f1b", {"dp": 2, "pp": 2}, _dp_strategies, None,
                      SHORT_STAGE_OPS, "none"),
    "tp_pp/wrong_dim": ("1f1b", {"tp": 2, "pp": 2},
                        lambda: _tp_strategies(wrong=True), None,
                        SHORT_STAGE_OPS, None),
}


def case_plan(name, module, x, y):
    """The case's plan, and whether a searched plan's strategies and
    placements are the hand-written ones (None when not searched)."""
    schedule, mesh, how, search, stages, sync = CASES[name]
    placements, strategies = how() if how and not search else (None, None)
    plan = pipeline_plan(module, x, y, schedule, mesh, placements,
                         strategies, stages, sync)
    if not search:
        return plan, None
    with plan:
        found = libplan.search(plan, strategy=search)
    with pipeline_plan(module, x, y, schedule, mesh, *how(),
                       stages=stages, sync=sync) as hand:
        same = found.placements == hand.placements and \
            all(str(found.strategy(o.name)) == str(hand.strategy(o.name))
                for o in hand.ops)
    return found, same


def planned_counts(plan, module, mesh_shape):
    """The collectives the lowered plan runs on the stages this rank
    holds, and those it runs after the schedule (not counted); (None, [])
    for a mesh of the pipeline axis alone."""
    from libplan.torch_pipeline import (pipeline_collectives,
                                        unstaged_collectives)
    if not mesh_shape:
        return None, []
    return (pipeline_collectives(plan, module.stages_held),
            unstaged_collectives(plan))


def full(t):
    from torch.distributed.tensor import DTensor
    return t.full_tensor() if isinstance(t, DTensor) else t


def run(name, world_mesh):
    import torch
    import torch.distributed as dist
    import libplan.torch as lt
    from libplan.torch_parallel import (COLLECTIVES, comm_counts,
                                        comm_debug_mode)
    schedule, mesh_shape, _, _, stages, _ = CASES[name]
    torch.manual_seed(0)
    x, y = torch.randn(16, 8), torch.randn(16, 4)
    ref = mlp()
    module = mlp()
    module.load_state_dict(ref.state_dict())
    loss_ref = ref(x, y)
    loss_ref.backward()
    ref_grads = {n: p.grad.detach().clone()
                 for n, p in ref.named_parameters()}
    torch.optim.SGD(ref.parameters(), lr=LR).step()
    plan, searched_as_hand = case_plan(name, module, x, y)
    with plan:
        sched = plan.schedule()
        try:
            mesh = lt.device_mesh(plan) if mesh_shape else world_mesh
            module = lt.parallelize(module, plan, mesh)
            want = [(a.stage, a.kind, a.microbatch)
                    for a in sched.actions(module.pipeline_rank)
                    if a.kind in ("F", "B", "I", "W")]
        finally:
            sched.close()
        # libplan's own check of the same plan (rank 0 runs it)
        verdict = None
        if dist.get_rank() == 0:
            try:
                verdict = plan.verify().equal
            except libplan.Error:  # a plan the verifier refuses to run
                verdict = False
        if "/" not in name:
            planned, unstaged = planned_counts(plan, module, mesh_shape)
        # each activation's placement where it is made (its op's strategy
        # output), the loss's as delivered
        placements_of = {t: st.outputs[k] for st, o in
                         ((plan.strategy(o.name), o) for o in plan.ops)
                         for k, t in enumerate(o.outputs)}
        placements_of["mean"] = plan.placement("mean")
    if "/" in name:  # a negative case: counted against the correct plan
        base = CASES[name.split("/")[0]]
        with pipeline_plan(mlp(), x, y, schedule, mesh_shape, *base[2](),
                           stages=base[4], sync=base[5]) as good:
            planned, unstaged = planned_counts(good, module, mesh_shape)
    held_mods = {layer for k, ops in enumerate(stages) for layer in ops
                 if k in module.stages_held}
    module.prepare(x, y)  # builds the stages: not counted
    mode = comm_debug_mode()
    with mode:
        loss = module.step(x, y)
    counted = comm_counts(mode)
    # what crossed the stage boundary: a DTensor's local block, placed as
    # the plan places that tensor (its pp entry, R, dropped)
    crossed = module.boundaries()
    boundary_ok = all(p + "R" == placements_of[n] for n, (p, _) in
                      crossed.items())
    params = [(n, p) for n, p in module.named_parameters()
              if n.split(".")[0] in held_mods]
    gdiff = max(float((full(p.grad) - ref_grads[n]).abs().max())
                if p.grad is not None else float("inf") for n, p in params)
    torch.optim.SGD([p for _, p in params], lr=LR).step()
    refp = dict(ref.named_parameters())
    pdiff = max(float((full(p).detach() - refp[n].detach()).abs().max())
                for n, p in params)
    res = {"case": name, "schedule": schedule, "rank": dist.get_rank(),
           "pipeline_rank": module.pipeline_rank, "mesh": mesh_shape,
           "order_equal": [tuple(a) for a in module.executed] == want,
           "actions": len(want), "held": [n for n, _ in params],
           "executed": ["%d%s%d" % a for a in module.executed],
           "max_grad_diff": gdiff, "max_param_diff": pdiff,
           "verify_equal": verdict,
           "loss_diff": None if loss is None else
           abs(float(loss) - float(loss_ref.detach())),
           "searched_as_hand": searched_as_hand,
           "boundary": crossed, "boundary_placed": boundary_ok,
           "plan": planned, "run": counted, "unstaged": unstaged,
           "counts_equal": planned is not None and
           all(counted.get(k, 0) == planned[k] for k in COLLECTIVES)}
    values_ok = gdiff <= TOL and pdiff <= TOL and \
        (loss is None or res["loss_diff"] <= TOL)
    if name.endswith("/no_sync"):  # the values must differ
        ok = res["order_equal"] and not values_ok and verdict is not True
    elif name.endswith("/wrong_dim"):
        # verify sees it, and the counts of the ranks of l2's stage (the
        # others run as the correct plan)
        res["bug_held"] = "l2" in held_mods
        ok = res["order_equal"] and verdict is not True and \
            res["counts_equal"] is not res["bug_held"]
    else:
        ok = res["order_equal"] and values_ok and verdict is not False and \
            (planned is None or res["counts_equal"]) and not unstaged and \
            boundary_ok and bool(crossed) is bool(mesh_shape) and \
            searched_as_hand is not False
    # one write(2) per line: the ranks share the launcher's stdout, and
    # print() may write the text and its newline apart
    os.write(1, ("%s %s %s\n" % ("ok" if ok else "FAIL", name,
                                  json.dumps(res))).encode())
    return ok


def main():
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    dist.init_process_group("gloo")
    ok = True
    try:
        # the pipeline-axis-only plans run on ranks 0 and 1
        pairs = init_device_mesh("cpu", (dist.get_world_size() // 2, 2),
                                 mesh_dim_names=("pair", "pp"))
        for name in (os.environ.get("CASES") or " ".join(CASES)).split():
            if CASES[name][1] is None and pairs.get_local_rank(0) != 0:
                continue
            try:
                ok = run(name, pairs["pp"]) and ok
            except BaseException:
                # the ranks it leaves waiting end with the launch's timeout
                traceback.print_exc()
                raise
    finally:
        dist.barrier()
        dist.destroy_process_group()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
