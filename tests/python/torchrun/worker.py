"""One process of a torchrun launch (gloo, CPU): runs every case of
cases.py parallelized with libplan.torch.parallelize on dp=2 x
tp=WORLD_SIZE/2 and checks that the run is the plan's. For each case:
CommDebugMode's collectives per kind equal the lowered plan's (the
forward's; for the training plan, mlp_train, the whole step's: forward,
backward and gradient sync); the loss, every gradient and every
parameter after one SGD step equal the single-device module's (TOL);
plan.verify() says EQUAL. Then
the negative cases (with --negative): gradients left unsynchronised, and
a weight placed with the wrong shard dim, must each fail a comparison.
Rank 0 prints one line per check ("ok CASE ..." / "FAIL CASE ...");
the exit status is 1 when any check failed. CASES (a space-separated
list) narrows the positive cases, for debugging."""

import json
import os
import sys

import torch
import torch.distributed as dist

from cases import case, make_plan  # also puts the binding on sys.path
import libplan
import libplan.torch as lt
from libplan.torch_parallel import (COLLECTIVES, comm_counts,
                                    comm_debug_mode, lowered_collectives)

TOL = 1e-5  # f32, absolute: loss, gradients and updated parameters
LR = 0.1


def say(rank, msg):
    if rank == 0:
        print(msg, flush=True)


def full(t):
    from torch.distributed.tensor import DTensor
    return t.full_tensor() if isinstance(t, DTensor) else t


def run_step(module, x, plan, mesh, counted, train):
    """Forward (counted), loss, backward, one SGD step: (loss, (forward
    counts, backward and sync counts), {name: grad}, {name: updated
    param}), all full tensors. `train`: the module's output is the loss
    (and the plan's lowered step has the backward: counted with the
    forward)."""
    if plan is not None:
        lt.parallelize(module, plan, mesh)
    mode, back = comm_debug_mode(), comm_debug_mode()
    with mode:
        y = module(x)
    loss = full(y) if train else (full(y) ** 2).mean()
    with back:  # compared with the forward's for a training plan's step
        loss.backward()
    counts = None
    if counted:
        fwd, bwd = comm_counts(mode), comm_counts(back)
        if train:
            fwd = {k: fwd.get(k, 0) + bwd.get(k, 0)
                   for k in set(fwd) | set(bwd)}
        counts = (fwd, {k: n for k, n in bwd.items() if n})
    grads = {n: full(p.grad).detach().clone()
             for n, p in module.named_parameters()}
    opt = torch.optim.SGD(module.parameters(), lr=LR, foreach=False)
    opt.step()
    params = {n: full(p).detach().clone()
              for n, p in module.named_parameters()}
    return loss.detach(), counts, grads, params


def compare(ref, got):
    """The largest difference of loss, gradients and parameters."""
    worst = float((ref[0] - got[0]).abs())
    for k in (2, 3):
        for n, t in ref[k].items():
            worst = max(worst, float((t - got[k][n]).abs().max()))
    return worst


def one(name, tp, world, rank, mesh_shape, variant=None):
    torch.manual_seed(0)
    factory, x, placements, strategies, outputs = case(name, tp)
    base = factory()
    train = name.endswith("_train")
    good = make_plan(base, x, mesh_shape, placements, strategies, outputs,
                     LR if train else None)
    plan = good
    if variant == "wrong_dim":
        # fc1's weight split on its input dim, and fc1 said to take it so:
        # a plan that computes partial sums and calls them column blocks
        op = "fc1" if "fc1" in strategies else "mlp.fc1"
        wrong, st = dict(placements), dict(strategies)
        wrong[op + ".weight"] = "RS(1)"
        ins, out = st[op]
        st[op] = ([ins[0], "RS(1)"] + list(ins[2:]), out)
        plan = make_plan(base, x, mesh_shape, wrong, st, outputs)
    if variant == "no_sync" and train:  # a valid plan, verify runs it
        plan = make_plan(base, x, mesh_shape, placements, strategies,
                         outputs, LR, "none")
    elif variant == "no_sync":
        plan = _without_sync(good)
    ref_mod, par_mod = factory(), factory()
    ref_mod.load_state_dict(base.state_dict())
    par_mod.load_state_dict(base.state_dict())
    ref = run_step(ref_mod, x, None, None, False, train)
    mesh = lt.device_mesh(plan)
    got = run_step(par_mod, x, plan, mesh, True, train)
    want = lowered_collectives(good)
    diff = compare(ref, got)
    run, backward = dict(got[1][0]), got[1][1]
    counts_ok = all(run.get(k, 0) == want[k] for k in COLLECTIVES) and \
        set(run) <= set(COLLECTIVES)
    verdict = None
    if rank == 0 and (variant != "no_sync" or train):
        try:
            verdict = plan.verify().equal
        except libplan.Error:  # a plan the verifier refuses to run
            verdict = False
    return {"case": name, "variant": variant, "world": world,
            "plan": want,
            "run": run, "backward_run": backward, "counts_equal": counts_ok,
            "max_diff": diff,
            "values_equal": diff <= TOL, "verify_equal": verdict}


def _without_sync(plan):
    """The same plan with every gradient left unsynchronised: lowered
    runs and verify see grad_sync none (a training section on a program
    without a loss does not validate, so this plan is run only)."""
    text = plan.text(self_contained=True)
    text += "training:\n  optimizer: {kind: sgd, lr: %g}\n" \
            "  grad_sync: {\"*\": none}\n" % LR
    return libplan.parse(text)


def main():
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo")
    tp = world // 2
    shape = {"dp": 2, "tp": tp}
    failed = 0
    try:
        for name in os.environ.get("CASES", "mlp mlp_train block embed").split():
            r = one(name, tp, world, rank, shape)
            good = r["counts_equal"] and r["values_equal"] and \
                (rank != 0 or r["verify_equal"])
            failed += not good
            say(rank, "%s %s %s" % ("ok" if good else "FAIL", name,
                                    json.dumps(r, sort_keys=True)))
        negatives = (("mlp_train", "no_sync"), ("block", "no_sync"),
                     ("mlp", "wrong_dim"), ("block", "wrong_dim"))
        for name, variant in negatives if "--negative" in sys.argv else ():
            r = one(name, tp, world, rank, shape, variant)
            # no sync: the values must differ; a wrong dim: verify says
            # NOT EQUAL and the run is not the good plan's collectives
            caught = not r["values_equal"] if variant == "no_sync" else \
                (rank != 0 or r["verify_equal"] is False) and \
                not r["counts_equal"]
            failed += not caught
            say(rank, "%s %s/%s caught=%s %s" % (
                "ok" if caught else "FAIL", name, variant, caught,
                json.dumps(r, sort_keys=True)))
        dist.barrier()  # every rank done before any tears its links down
    finally:
        dist.destroy_process_group()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
