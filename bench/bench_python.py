#!/usr/bin/env python3
"""The Python binding's speed on a large plan: loading it from Python and
looking up the placement of every tensor, against the C tool's `plan
validate` of the same file. Target: Python <= 1.2 x validate + 2 us per
lookup (each best of --reps runs, same machine, same run).

usage: PYTHONPATH=bindings/python python3 bench/bench_python.py \
           [--plan bench/out/plan-100000.yaml] [--tool build/plan] [--reps 3]
(`bench/run.sh` writes the plan; gen_plan.py --ops N writes another.)
"""

import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))

import libplan  # noqa: E402


def best(f, reps):
    out = None
    for _ in range(reps):
        t = time.perf_counter()
        f()
        dt = time.perf_counter() - t
        out = dt if out is None else min(out, dt)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--plan", default=os.path.join(HERE, "out",
                                                   "plan-100000.yaml"))
    ap.add_argument("--tool", default=os.path.join(ROOT, "build", "plan"))
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    if not os.path.exists(a.plan):
        subprocess.run([sys.executable, os.path.join(HERE, "gen_plan.py"),
                        "-o", a.plan], check=True)
    with libplan.load(a.plan) as p:
        names = [t.name for t in p.program.tensors]

    tool = best(lambda: subprocess.run([a.tool, "validate", a.plan],
                                       stdout=subprocess.DEVNULL, check=True),
                a.reps)

    def py():
        with libplan.load(a.plan) as p:
            for n in names:
                p.placement(n)
    t = best(py, a.reps)
    with libplan.load(a.plan) as p:
        lookups = best(lambda: [p.placement(n) for n in names], a.reps)
    bound = 1.2 * tool + 2e-6 * len(names)
    print("plan validate (C tool)      %8.3f s" % tool)
    print("python load + %d lookups %8.3f s (lookups alone %.2f us each)"
          % (len(names), t, lookups / len(names) * 1e6))
    print("bound 1.2 x validate + 2 us x lookups = %.3f s: %s"
          % (bound, "ok" if t <= bound else "OVER"))
    return 0 if t <= bound else 1


if __name__ == "__main__":
    sys.exit(main())
