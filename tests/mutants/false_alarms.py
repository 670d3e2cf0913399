#!/usr/bin/env python3
"""The false-alarm sweep: every example plan, unmutated, over seeds x
{exact, float} x {full size, --reduce} must verify EQUAL. Full size is
skipped (and said) above a bound on the declared elements. A pipelined
example is also verified from its lowered file (`plan lower`; the row
"NAME (lowered)"), which must say the same. Prints a table by example and
exits 1 on any answer but EQUAL.

usage: false_alarms.py [--plan build/plan] [--examples GLOB,...]
                       [--seeds 0-19] [--modes exact,float]
                       [--sizes full,reduce] [--lowered pipelined|none]
                       [--timeout S] [--jobs N]
"""

import argparse
import os
import re
import sys
import tempfile
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
    ap.add_argument("--lowered", choices=["pipelined", "none"], default="pipelined",
                    help="which examples are also verified from their lowered file")
    ap.add_argument("--full-bound", type=int, default=runner.FULL_BOUND,
                    help="declared elements above which full size is not run")
    args = ap.parse_args()
    seeds, modes, sizes = seed_list(args.seeds), args.modes.split(","), args.sizes.split(",")
    start = time.time()
    runs, counts, bad, rows, notrun = [], {}, [], [], set()
    tmp = tempfile.TemporaryDirectory(prefix="plan-false-alarms.")
    with tmp, ThreadPoolExecutor(args.jobs) as pool:
        targets = []
        for name, path in runner.examples([g for g in args.examples.split(",") if g]):
            with open(path) as f:
                text = f.read()
            targets.append((name, path, text))
            if args.lowered == "pipelined" and re.search(r"^pipeline:", text, re.M):
                dst = os.path.join(tmp.name, name + ".lowered.yaml")
                why = runner.lower(args.plan, path, dst)
                if why:
                    bad.append("NOT LOWERED: %s: %s" % (name, why))
                else:
                    targets.append((name + " (lowered)", dst, text))
        for name, path, text in targets:
            n = runner.declared_elements(text)
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
