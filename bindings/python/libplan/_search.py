"""Plan search, replay and lowering through the `plan` tool.

The search strategies are Lua (lua/search.lua and lua/strategies/) run by
the tool's embedded interpreter; the C API has no search entry point, so
these functions run `plan search` / `plan replay` and load the result. The
tool is looked for: the `tool` argument, $LIBPLAN_TOOL, `plan` beside the
library (build/plan next to build/libplan.so.0; libplan/bin/plan in a wheel),
then `plan` on PATH.
"""

import os
import re
import shutil
import subprocess
import tempfile

from . import _lib
from ._plan import Plan
from ._program import Program
from .builder import ProgramBuilder
from .errors import InvalidError, UnsupportedError, UsageError

__all__ = ["find_tool", "search", "replay", "lower"]


def find_tool(tool=None):
    """The path of the `plan` tool, or UnsupportedError saying where it was
    looked for."""
    cands = [tool, os.environ.get("LIBPLAN_TOOL")]
    here = os.path.dirname(os.path.realpath(_lib.path)) if os.path.sep in \
        _lib.path else None
    if here:
        cands += [os.path.join(here, "plan"),
                  os.path.join(here, "bin", "plan")]
    for c in cands:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    found = shutil.which("plan")
    if found:
        return found
    raise UnsupportedError(
        "the plan tool was not found (tried the tool argument, $LIBPLAN_TOOL, "
        "beside %s, and PATH); search and replay run it" % _lib.path)


_POS = re.compile(r"^(?:plan:? ?\w*: )?(.+?):(\d+):(\d+): (?:error: )?(.*)$")


def _run(args):
    r = subprocess.run(args, capture_output=True, text=True)
    lines = [l for l in (r.stderr or r.stdout).splitlines() if l.strip()]
    msg = lines[0] if lines else "exit status %d" % r.returncode
    return r.returncode, r.stdout, msg


def _fail(cls, code, what, msg):
    """The tool's first error line as an exception, with its position when
    it names one (file:line:column: ...)."""
    m = _POS.match(msg)
    if m:
        return cls("%s: %s" % (what, m.group(4)), code, m.group(1),
                   int(m.group(2)), int(m.group(3)))
    msg = re.sub(r"^plan:? (?:search|replay)?:? ?", "", msg)
    return cls("%s: %s" % (what, msg), code)


def _mesh_arg(mesh):
    if isinstance(mesh, str):
        return mesh
    items = mesh.items() if isinstance(mesh, dict) else mesh
    return ",".join("%s=%d" % (a, n) for a, n in items)


def search(program, mesh=None, strategy="greedy", hardware=None, seed=None,
           width=None, limit=None, self_contained=None, tool=None):
    """Searches a plan for `program` (a path, Program or ProgramBuilder) on
    `mesh` ({"dp": 2, "tp": 4} or "dp=2,tp=4") with a built-in strategy
    ("megatron", "greedy", "beam", "dp", "exhaustive") or a Lua file, priced
    on `hardware`; or, given a Plan or a plan path and no mesh, makes every
    decision of that plan again but its pinned regions. Returns the Plan,
    with the provenance `replay` needs. A program from memory makes a
    self-contained plan. InvalidError when the strategy fails or makes an
    invalid plan; UsageError for bad arguments (the tool's message)."""
    exe = find_tool(tool)
    with tempfile.TemporaryDirectory(prefix="libplan-search-") as tmp:
        if isinstance(program, (Program, ProgramBuilder, Plan)):
            src = os.path.join(tmp, "input.yaml")
            text = (program.text(self_contained=True)
                    if isinstance(program, Plan) else
                    program.yaml() if isinstance(program, ProgramBuilder)
                    else program.text())
            with open(src, "w") as f:
                f.write(text)
            if self_contained is None:
                self_contained = True
        else:
            src = os.fspath(program)
        out = os.path.join(tmp, "plan.yaml")
        args = [exe, "search", src]
        if mesh is not None:
            args += ["--mesh", _mesh_arg(mesh)]
        if strategy:
            args += ["--strategy", os.fspath(strategy)]
        for flag, v in (("--hardware", hardware), ("--seed", seed),
                        ("--width", width), ("--limit", limit)):
            if v is not None:
                args += [flag, str(v)]
        if self_contained:
            args.append("--self-contained")
        args += ["-o", out]
        rc, _, msg = _run(args)
        if rc == 1:
            raise _fail(InvalidError, -6, "search failed", msg)
        if rc != 0:
            raise _fail(UsageError, -8, "plan search", msg)
        # read from memory so the result does not depend on the temp folder
        with open(out) as f:
            text = f.read()
        base = os.path.dirname(os.path.abspath(src))
        if not self_contained:
            # the tool wrote the program path relative to `out`: load from
            # the file itself while it exists
            p = Plan.load(out)
            text = p.text(self_contained=True)
            p.close()
        return Plan.parse(text, name="<search>", base_dir=base)


def replay(plan, tool=None):
    """Makes a searched plan again from its provenance. Returns (same,
    message): same is True when the plan hashes agree."""
    exe = find_tool(tool)
    with tempfile.TemporaryDirectory(prefix="libplan-replay-") as tmp:
        if isinstance(plan, Plan):
            path = os.path.join(tmp, "plan.yaml")
            with open(path, "w") as f:
                f.write(plan.text(self_contained=True))
        else:
            path = os.fspath(plan)
        rc, out, msg = _run([exe, "replay", path])
        if rc not in (0, 1):
            raise _fail(UsageError, -8, "plan replay", msg)
        return rc == 0, out.strip() or msg


def lower(plan, tool=None):
    """The SPMD program every rank runs (spec/lowered-format.md), as text:
    `plan lower`. InvalidError for an invalid plan, UnsupportedError for
    what is not lowered yet."""
    exe = find_tool(tool)
    with tempfile.TemporaryDirectory(prefix="libplan-lower-") as tmp:
        if isinstance(plan, Plan):
            path = os.path.join(tmp, "plan.yaml")
            with open(path, "w") as f:
                f.write(plan.text(self_contained=True))
        else:
            path = os.fspath(plan)
        out = os.path.join(tmp, "lowered.yaml")
        rc, _, msg = _run([exe, "lower", "-o", out, path])
        if rc == 1:
            raise _fail(InvalidError, -6, "plan lower", msg)
        if rc == 3:
            raise _fail(UnsupportedError, -10, "plan lower", msg)
        if rc != 0:
            raise _fail(UsageError, -8, "plan lower", msg)
        with open(out) as f:
            return f.read()
