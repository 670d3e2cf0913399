"""Shared by the mutation tool and the false-alarm sweep: finding and
lowering the examples, running `plan verify` under a timeout, and printing
a table of outcomes."""

import fnmatch
import glob
import os
import re
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# declared elements above which a program is verified with --reduce only
FULL_BOUND = 1 << 20


def examples(patterns):
    """The example plans, as (name, path), filtered by name globs."""
    paths = sorted(glob.glob(os.path.join(ROOT, "examples", "*.plan.yaml")))
    paths += sorted(glob.glob(os.path.join(ROOT, "examples", "models", "*.plan.yaml")))
    out = []
    for p in paths:
        name = os.path.basename(p)[: -len(".plan.yaml")]
        if not patterns or any(fnmatch.fnmatch(name, g) for g in patterns):
            out.append((name, p))
    return out


def declared_elements(text):
    """The elements of every tensor whose shape the program declares: a
    measure of the run's size (intermediates follow the declared ones)."""
    total = 0
    for m in re.finditer(r"shape: \[([^\]]*)\]", text):
        n = 1
        for d in m.group(1).split(","):
            d = d.strip()
            if d:
                n *= int(d.split("=")[-1])
        total += n
    return total


def lower(plan, path, out):
    """Lowers path to out; returns None or the reason it cannot be."""
    r = subprocess.run([plan, "lower", "-o", out, path], capture_output=True, text=True, timeout=120)
    if r.returncode == 0:
        return None
    return (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1]


def verify(plan, path, mode, seed, reduce, timeout):
    """Runs plan verify: (outcome, first line of what it said), outcome one
    of equal, not-equal, refused (exit 2), unsupported (exit 3), timeout,
    crash. reduce: False (full size), True (--reduce: shapes and mesh) or
    "shapes" (--reduce shapes: the mesh kept)."""
    how = {False: [], True: ["--reduce"], "shapes": ["--reduce", "shapes"]}[reduce]
    cmd = [plan, "verify", "--mode", mode, "--seed", str(seed)] + how + [path]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout", "no answer in %d s" % timeout
    said = [ln for ln in (r.stdout + r.stderr).splitlines() if not ln.startswith("reduced:")]
    first = next((ln for ln in said if "error" in ln or "NOT EQUAL" in ln), said[0] if said else "")
    outcome = {0: "equal", 1: "not-equal", 2: "refused", 3: "unsupported"}.get(r.returncode, "crash")
    return outcome, first.strip()


def table(rows, cols, counts, title):
    """Prints counts[(row, col)] as a table."""
    w = max([len(title)] + [len(r) for r in rows])
    cw = [max(len(c), 5) for c in cols]
    print("%-*s  %s" % (w, title, "  ".join("%*s" % (n, c) for n, c in zip(cw, cols))))
    for r in rows:
        print("%-*s  %s" % (w, r, "  ".join("%*d" % (n, counts.get((r, c), 0)) for n, c in zip(cw, cols))))
