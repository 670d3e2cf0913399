#!/usr/bin/env python3
"""The false-alarm sweep: every example plan, unmutated, over seeds x
{exact, float} x {full size, --reduce} must verify EQUAL. Full size is
skipped (and said) above a bound on the declared elements. Prints a table
by example and exits 1 on any answer but EQUAL.

usage: false_alarms.py [--plan build/plan] [--examples GLOB,...]
                       [--seeds 0-19] [--modes exact,float]
                       [--sizes full,reduce] [--timeout S] [--jobs N]
"""

import argparse
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import runner  # noqa: E402


def seed_list(text):
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--plan", default=os.path.join(runner.ROOT, "build", "plan"))
    ap.add_argument("--examples", default="")
    ap.add_argument("--seeds", default="0-19")
    ap.add_argument("--modes", default="exact,float")
    ap.add_argument("--sizes", default="full,reduce")
    ap.add_argument("--timeout", type=int, default=120)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--full-bound", type=int, default=runner.FULL_BOUND,
                    help="declared elements above which full size is not run")
    args = ap.parse_args()
    seeds, modes, sizes = seed_list(args.seeds), args.modes.split(","), args.sizes.split(",")
    start = time.time()
    runs, counts, bad, rows, notrun = [], {}, [], [], set()
    with ThreadPoolExecutor(args.jobs) as pool:
        for name, path in runner.examples([g for g in args.examples.split(",") if g]):
            with open(path) as f:
                n = runner.declared_elements(f.read())
            rows.append(name)
            for size in sizes:
                if size == "full" and n > args.full_bound:
                    print("%s: full size skipped: %d declared elements, over %d" % (name, n, args.full_bound))
                    continue
                for mode in modes:
                    for seed in seeds:
                        fut = pool.submit(runner.verify, args.plan, path, mode, seed, size == "reduce", args.timeout)
                        runs.append((name, size, mode, seed, fut))
        for name, size, mode, seed, fut in runs:
            got, said = fut.result()
            col = "%s %s" % (mode, size)
            if got == "unsupported":  # exit 3: the check cannot run here
                if (name, size) not in notrun:
                    print("%s (%s): not run: %s" % (name, size, said))
                notrun.add((name, size))
                continue
            ok = got == "equal"
            counts[(name, col + (" ok" if ok else " BAD"))] = counts.get((name, col + (" ok" if ok else " BAD")), 0) + 1
            if not ok:
                bad.append("FALSE ALARM: %s (%s mode, seed %d%s): %s: %s" % (
                    name, mode, seed, ", --reduce" if size == "reduce" else "", got, said))
    cols = ["%s %s %s" % (m, s, v) for s in sizes for m in modes for v in ("ok", "BAD")]
    print()
    runner.table(rows, cols, counts, "example")
    for line in bad:
        print(line)
    print("false alarms: %d verifications in %.0f s; %d not EQUAL" % (len(runs), time.time() - start, len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
