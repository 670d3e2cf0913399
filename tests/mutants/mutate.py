#!/usr/bin/env python3
"""Mutation testing of the verifier: every example is lowered, every bug
class (classes.py) writes its mutants of the lowered program, and each
mutant is verified in exact and float mode. A mutant that changes the
numbers must be NOT EQUAL, one that provably does not must be EQUAL; a
mutant the loader refuses (exit 2) is counted as refused at load. Prints
a table by class and mode and exits 1 on any miss, false alarm or error.

usage: mutate.py [--plan build/plan] [--examples GLOB,...] [--classes C,...]
                 [--per-class N] [--sample-seed S] [--seeds 0,1]
                 [--modes exact,float] [--unit-axis EXAMPLE:AXIS ...]
                 [--reduce auto|always|mesh] [--cap EXAMPLE:N ...] [--timeout S]
                 [--jobs N] [-v]
"""

import argparse
import os
import random
import re
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import runner  # noqa: E402
from classes import CLASSES  # noqa: E402
from lowered import Lowered  # noqa: E402

OUTCOMES = ["caught", "missed", "equal-ok", "false-alarm", "refused", "error"]


def judge(expect, outcome):
    if outcome == "refused":
        return "refused"
    if outcome not in ("equal", "not-equal"):
        return "error"
    if expect == "differs":
        return "caught" if outcome == "not-equal" else "missed"
    return "equal-ok" if outcome == "equal" else "false-alarm"


def programs(args, tmp):
    """(name, lowered text, reduce?) for every example that lowers, and
    the --unit-axis variants; prints why the others are skipped."""
    unit = {}
    for u in args.unit_axis:
        ex, ax = u.split(":")
        unit.setdefault(ex, []).append(ax)
    out = []
    for name, path in runner.examples(args.examples):
        dst = os.path.join(tmp, name + ".lowered.yaml")
        why = runner.lower(args.plan, path, dst)
        if why:
            print("skip %s: %s" % (name, why))
            continue
        with open(dst) as f:
            text = f.read()
        ref = re.search(r"^program:\n  path: \"?([^\"\n]+)", text, re.M)
        # a program by path: `plan lower -o` writes it relative to the
        # lowered file's folder (tmp, where the mutants go too), which a
        # loader keeps to its own folder tree: copied beside them, named
        # by its file name
        if ref:
            src = os.path.normpath(os.path.join(tmp, ref.group(1)))
            shutil.copy(src, tmp)
            text = text.replace(ref.group(0), ref.group(0).replace(ref.group(1), os.path.basename(src)), 1)
        big = runner.declared_elements(text) > args.full_bound
        red = args.reduce in ("always", "mesh") or big
        if big:
            print("%s: %d declared elements, over %d: verified with --reduce" % (
                name, runner.declared_elements(text), args.full_bound))
        cap = cap_of(args, name)
        if cap and cap != args.per_class:
            print("%s: at most %d mutants per class (--cap), seeded %d" % (name, cap, args.sample_seed))
        out.append((name, text, red))
        for ax in unit.get(name, []):
            lw = Lowered(text)
            lw.set_axis_size(ax, 1)
            out.append(("%s[%s=1]" % (name, ax), lw.text(), red))
    return out


def cap_of(args, name):
    """The most mutants per class for this example: its --cap, else
    --per-class (0: all)."""
    for c in args.cap:
        ex, _, n = c.rpartition(":")
        if ex == name:
            return int(n)
    return args.per_class


def mutants(args, name, text):
    lw = Lowered(text)
    cap = cap_of(args, name)
    for cls in args.classes:
        made = list(CLASSES[cls](lw))
        if cap and len(made) > cap:
            rnd = random.Random("%s/%s/%d" % (name, cls, args.sample_seed))
            made = rnd.sample(made, cap)
        for tag, mtext, expect, reason in made:
            yield cls, "%s/%s/%s" % (name, cls, tag), mtext, expect, reason


def verify_mutant(args, path, mode, seed, red):
    """(outcome, what verify said) of one mutant; with --reduce mesh, an
    outcome "mesh-differs" (an error) when the reduced mesh's verdict is
    not the kept mesh's."""
    got, said = runner.verify(args.plan, path, mode, seed, red, args.timeout)
    if args.reduce != "mesh":
        return got, said
    kept, ksaid = runner.verify(args.plan, path, mode, seed, "shapes", args.timeout)
    if kept != got:
        return "mesh-differs", "mesh reduced: %s %s; mesh kept: %s %s" % (got, said, kept, ksaid)
    return got, said


def write(tmp, n, text):
    p = os.path.join(tmp, "m%05d.yaml" % n)
    with open(p, "w") as f:
        f.write(text)
    return p


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--plan", default=os.path.join(runner.ROOT, "build", "plan"))
    ap.add_argument("--examples", default="", help="name globs, comma separated (default all)")
    ap.add_argument("--classes", default=",".join(CLASSES))
    ap.add_argument("--per-class", type=int, default=0, help="at most N mutants per class and example (seeded)")
    ap.add_argument("--sample-seed", type=int, default=0)
    ap.add_argument("--seeds", default="0", help="verify seeds, comma separated")
    ap.add_argument("--modes", default="exact,float")
    ap.add_argument("--unit-axis", action="append", default=[], help="EXAMPLE:AXIS: also the example with AXIS of size 1")
    ap.add_argument("--cap", action="append", default=[],
                    help="EXAMPLE:N: at most N mutants per class for this example (seeded), said in the output")
    ap.add_argument("--reduce", choices=["auto", "always", "mesh"], default="auto")
    ap.add_argument("--timeout", type=int, default=60)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--full-bound", type=int, default=runner.FULL_BOUND,
                    help="declared elements above which full size is not run")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    args.examples = [g for g in args.examples.split(",") if g]
    args.classes = [c for c in args.classes.split(",") if c]
    for c in args.classes:
        if c not in CLASSES:
            ap.error("no class %r (classes: %s)" % (c, ", ".join(CLASSES)))
    seeds = [int(s) for s in args.seeds.split(",")]
    modes = args.modes.split(",")
    start = time.time()
    counts, bad, n = {}, [], 0
    with tempfile.TemporaryDirectory(prefix="plan-mutants.") as tmp, ThreadPoolExecutor(args.jobs) as pool:
        for name, text, red in programs(args, tmp):
            base = write(tmp, n, text)
            n += 1
            jobs = []
            for mode in modes:
                for seed in seeds:
                    got, said = runner.verify(args.plan, base, mode, seed, red, args.timeout)
                    v = judge("equal", got)
                    counts[("(unmutated) " + mode, v)] = counts.get(("(unmutated) " + mode, v), 0) + 1
                    if v != "equal-ok":
                        bad.append("%s: %s (unmutated, %s mode, seed %d): %s" % (v.upper(), name, mode, seed, said))
                        continue
                    for cls, mname, mtext, expect, reason in mutants(args, name, text):
                        p = write(tmp, n, mtext)
                        n += 1
                        fut = pool.submit(verify_mutant, args, p, mode, seed, red)
                        jobs.append((cls, mname, mode, seed, expect, reason, fut))
            for cls, mname, mode, seed, expect, reason, fut in jobs:
                got, said = fut.result()
                v = judge(expect, got)
                key = ("%s %s" % (cls, mode), v)
                counts[key] = counts.get(key, 0) + 1
                line = "%s: %s (%s mode, seed %d%s): %s; verify said: %s" % (
                    v.upper(), mname, mode, seed, ", --reduce" if red else "", reason, said)
                if v in ("missed", "false-alarm", "error"):
                    bad.append(line)
                elif args.verbose:
                    print(line)
    rows = ["(unmutated) " + m for m in modes] + ["%s %s" % (c, m) for c in args.classes for m in modes]
    print()
    runner.table(rows, OUTCOMES, counts, "class mode")
    for line in bad:
        print(line)
    total = sum(counts.values())
    print("mutants: %d verifications in %.0f s; %d misses, false alarms or errors" % (total, time.time() - start, len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
