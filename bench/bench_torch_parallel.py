"""Step time of a parallelize'd MLP against a hand-written
parallelize_module of the same plan, in one run (gloo, CPU, 4 processes).

The plan: Megatron tensor parallelism of a two-layer MLP on tp=4: fc1
column parallel, fc2 row parallel (its bias P(sum), added once to the
partial sums), the output replicated: one all-reduce a forward, as
ColwiseParallel / RowwiseParallel run it. A step is forward, a loss,
backward and an SGD step; each model runs BENCH_STEPS steps after
BENCH_WARMUP, interleaved in rounds so both see the same machine load;
the figures are each model's median step time and their ratio. Target:
parallelize within 1.1x.

    python3 bench/bench_torch_parallel.py          (launches torchrun)

Environment: BENCH_NPROC (4), BENCH_STEPS (50), BENCH_WARMUP (5),
BENCH_BATCH (64), BENCH_DIM (256), BENCH_HIDDEN (1024). Prints one line;
exit 0 (1 when a model's figures are not the other's, which would make
the comparison meaningless).
"""

import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def env_int(name, default):
    return int(os.environ.get(name, default))


def launch():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(ROOT, "bindings", "python")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           "--nproc_per_node", str(env_int("BENCH_NPROC", 4)),
           os.path.abspath(__file__)]
    return subprocess.run(cmd, env=env, timeout=900).returncode


def mlp(dim, hidden):
    import torch

    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = torch.nn.Linear(dim, hidden)
            self.act = torch.nn.GELU()
            self.fc2 = torch.nn.Linear(hidden, dim)

        def forward(self, x):
            return self.fc2(self.act(self.fc1(x)))

    return MLP()


def worker():
    import torch
    import torch.distributed as dist
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor.parallel import (ColwiseParallel,
                                                   RowwiseParallel,
                                                   parallelize_module)
    import libplan
    import libplan.torch as lt

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    batch, dim = env_int("BENCH_BATCH", 64), env_int("BENCH_DIM", 256)
    hidden = env_int("BENCH_HIDDEN", 1024)
    steps, warmup = env_int("BENCH_STEPS", 50), env_int("BENCH_WARMUP", 5)
    torch.manual_seed(0)
    x = torch.randn(batch, dim)
    base = mlp(dim, hidden)
    with lt.program_from_module(base, (x,)) as prog:
        plan = libplan.make_plan(
            prog, {"tp": world},
            placements={"x": "R", "fc1.weight": "S(0)", "fc1.bias": "S(0)",
                        "fc2.weight": "S(1)", "fc2.bias": "P(sum)"},
            strategies={"fc1": (["R", "S(0)", "S(0)"], "S(1)"),
                        "act": (["S(1)"], "S(1)"),
                        "fc2": (["S(1)", "S(1)", "P(sum)"], "P(sum)")},
            outputs={"fc2": "R"})
    ours, theirs = mlp(dim, hidden), mlp(dim, hidden)
    ours.load_state_dict(base.state_dict())
    theirs.load_state_dict(base.state_dict())
    lt.parallelize(ours, plan)
    parallelize_module(theirs, lt.device_mesh(plan),
                       {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()})
    models = {"parallelize": ours, "parallelize_module": theirs}
    opts = {k: torch.optim.SGD(m.parameters(), lr=1e-3)
            for k, m in models.items()}
    losses = {k: [] for k in models}

    def step(name):
        m, opt = models[name], opts[name]
        opt.zero_grad()
        y = m(x)
        if isinstance(y, DTensor):
            y = y.to_local()  # replicated: the whole output
        loss = (y ** 2).mean()
        loss.backward()
        opt.step()
        losses[name].append(float(loss.detach()))

    for _ in range(warmup):
        for name in models:
            step(name)
    rounds = {k: [] for k in models}
    for _ in range(steps):
        for name in models:
            dist.barrier()
            t0 = time.perf_counter()
            step(name)
            rounds[name].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) * 1e3 for k, v in rounds.items()}
    same = all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in
               zip(losses["parallelize"], losses["parallelize_module"]))
    if rank == 0:
        ratio = med["parallelize"] / med["parallelize_module"]
        print("bench_torch_parallel: MLP %dx%d->%d->%d on tp=%d (gloo, "
              "CPU): parallelize %.3f ms/step, parallelize_module %.3f "
              "ms/step, ratio %.2fx (target <= 1.1x: %s); losses %s"
              % (batch, dim, hidden, dim, world, med["parallelize"],
                 med["parallelize_module"], ratio,
                 "met" if ratio <= 1.1 else "missed",
                 "equal" if same else "DIFFER"), flush=True)
    dist.barrier()  # every rank done before any tears its links down
    dist.destroy_process_group()
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(worker() if "RANK" in os.environ else launch())
