"""Building programs and plans from Python.

The builder writes the plan format (spec/plan-format.md) as YAML flow
collections (JSON syntax, which YAML reads) and hands the text to libplan,
so a built program is checked exactly like a file: names, shapes (inferred
for produced tensors), op attributes, regions. A mistake is reported at the
caller's line that made the entry (the `b.op(...)`, `pin(...)` or
`make_plan(...)` call), never at a line of the generated text.
"""

import json
import os
import sys

from . import placements as _pl
from ._common import _int
from .errors import Error, InvalidError, UsageError
from ._plan import Plan
from ._program import Program

FORMAT = "1.0"
# The plan document make_plan writes is read as format 1.1, which holds
# shard ratios (Shard(0, ratios=[3, 1]), "S(0|3:1)R"); a plan without
# them is written and hashed as 1.0 all the same (the lowest version that
# holds its content).
PLAN_FORMAT = "1.1"
_PKG = os.path.dirname(os.path.abspath(__file__))


def _caller():
    """(file, line) of the nearest frame outside this package: the user's
    call."""
    f = sys._getframe(1)
    while f is not None and os.path.dirname(
            os.path.abspath(f.f_code.co_filename)) == _PKG:
        f = f.f_back
    return (f.f_code.co_filename, f.f_lineno) if f is not None else ("", 0)


def _parse_at(parse, lines, name, default):
    """parse(text) of the (text, where) lines; an error at a line of the
    generated text is raised again at the caller's line that made it."""
    try:
        return parse("\n".join(t for t, _ in lines) + "\n")
    except Error as e:
        if e.file != name:
            raise
        where = lines[e.line - 1][1] if 0 < e.line <= len(lines) else None
        e.file, e.line = where or default
        e.column = 0
        raise e.with_traceback(None) from None


def _j(v):
    return json.dumps(v, separators=(", ", ": "))


def _shape(shape):
    out = []
    for d in shape:
        if isinstance(d, tuple):  # ("batch", 8): a named dim
            out.append("%s=%d" % (d[0], _int(d[1], "a dim's size")))
        else:
            out.append(_int(d, "a dim's size"))
    return out


class ProgramBuilder:
    """Collects tensors and ops, then build() loads them as a Program.

        b = ProgramBuilder("mlp")
        b.input("x", [("batch", 8), 16])
        b.param("w1", [16, 64])
        b.op("matmul", ["x", "w1"], "h", name="mlp.fc1")
        prog = b.build()
    """

    def __init__(self, name=""):
        self.name = name
        self._tensors = {}
        self._where = {}  # ("tensor", name), op index, "outputs", "loss" -> the caller's (file, line)
        self._ops = []
        self._outputs = None
        self._loss = None

    def tensor(self, name, shape, dtype="f32", role=None, **fields):
        if name in self._tensors:
            raise ValueError("tensor %r declared twice" % name)
        d = {"shape": _shape(shape), "dtype": dtype}
        if role:
            d["role"] = role
        d.update(fields)
        self._tensors[name] = d
        self._where[("tensor", name)] = _caller()
        return name

    def input(self, name, shape, dtype="f32", **fields):
        return self.tensor(name, shape, dtype, "input", **fields)

    def param(self, name, shape, dtype="f32", **fields):
        return self.tensor(name, shape, dtype, "param", **fields)

    def const(self, name, shape, dtype="f32", init=None, **fields):
        if init is not None:
            fields["init"] = init
        return self.tensor(name, shape, dtype, "const", **fields)

    def op(self, kind, inputs, outputs, name=None, **attrs):
        """Adds an op; inputs/outputs are tensor names (a str or a list).
        Returns the op's name (default: the kind and its index)."""
        name = name or "%s_%d" % (kind, len(self._ops))
        o = {"name": name, "op": kind,
             "in": [inputs] if isinstance(inputs, str) else list(inputs),
             "out": outputs if isinstance(outputs, str) else list(outputs)}
        if attrs:
            o["attrs"] = attrs
        self._where[len(self._ops)] = _caller()
        self._ops.append(o)
        return name

    def outputs(self, names):
        self._outputs = list(names)
        self._where["outputs"] = _caller()

    def loss(self, name):
        self._loss = name
        self._where["loss"] = _caller()

    def _lines(self, where=None):
        """The `program:` section as (text, where) lines: where is the
        caller's (file, line) that made the entry, else `where`."""
        lines = [("program:", where)]
        if self.name:
            lines.append(("  name: %s" % _j(self.name), where))
        lines.append(("  tensors:" + ("" if self._tensors else " {}"), where))
        for k, v in self._tensors.items():
            lines.append(("    %s: %s" % (_j(k), _j(v)),
                          self._where.get(("tensor", k), where)))
        lines.append(("  ops:" + ("" if self._ops else " []"), where))
        for i, o in enumerate(self._ops):
            lines.append(("    - %s" % _j(o), self._where.get(i, where)))
        if self._outputs is not None:
            lines.append(("  outputs: %s" % _j(self._outputs),
                          self._where.get("outputs", where)))
        if self._loss is not None:
            lines.append(("  loss: %s" % _j(self._loss),
                          self._where.get("loss", where)))
        return lines

    def program_yaml(self):
        """The `program:` section (without the version line)."""
        return "\n".join(t for t, _ in self._lines()) + "\n"

    def yaml(self):
        return 'libplan: "%s"\n%s' % (FORMAT, self.program_yaml())

    def build(self, name="<builder>"):
        where = _caller()
        lines = [('libplan: "%s"' % FORMAT, where)] + self._lines(where)
        return _parse_at(lambda t: Program.parse(t, name=name), lines, name,
                         where)


def _program_yaml(program):
    if isinstance(program, ProgramBuilder):
        return program.program_yaml()
    if isinstance(program, Program):
        text = program.text()
    else:
        text = str(program)
    # drop the version line of a standalone program document
    return "\n".join(l for l in text.splitlines()
                     if not l.startswith("libplan:")) + "\n"


def _placement_text(p):
    return p if isinstance(p, str) else _pl.format(p)


class Region:
    """A pinned or manual region for make_plan (made by pin() or
    manual()); `where` is the caller's (file, line) that made it."""

    def __init__(self, entry, strategies, where):
        self.entry = entry
        self.strategies = strategies
        self.where = where

    def __repr__(self):
        return "Region(%s %r)" % (self.entry["kind"], self.entry["name"])


def _op_list(ops, what):
    ops = [ops] if isinstance(ops, str) else list(ops)
    if not ops or not all(isinstance(o, str) and o for o in ops):
        raise UsageError("%s: ops must be an op name or pattern, or a list "
                         "of them" % what)
    return ops


def pin(ops, strategies=None, name=None):
    """A pinned region over ops (names or patterns): a search keeps their
    strategies, which `strategies` ({op or glob: (inputs, outputs)}, as
    make_plan takes) may set."""
    entry = {"name": name, "kind": "pinned", "ops": _op_list(ops, "pin")}
    return Region(entry, dict(strategies or {}), _caller())


def manual(name, ops, body, inputs=None, outputs=None):
    """A manual region: its ops computed by the Lua `body` at lowering
    (docs/lua.md, "Manual regions"); inputs and outputs are its boundary
    placements ({tensor: placement})."""
    if not isinstance(name, str) or not name:
        raise UsageError("manual: the region needs a name")
    if not isinstance(body, str):
        raise UsageError("manual: region %r needs a Lua body (a str)" % name)
    entry = {"name": name, "kind": "manual", "ops": _op_list(ops, "manual")}
    for key, v in (("inputs", inputs), ("outputs", outputs)):
        if v:
            entry[key] = {k: _placement_text(p) for k, p in v.items()}
    # a body reads as a YAML block scalar does: ending in one newline
    entry["body"] = body if body.endswith("\n") else body + "\n"
    return Region(entry, {}, _caller())


def _strategy_line(k, ins, outs):
    # one output: a str or a tuple of placements; several: a list
    if isinstance(outs, str) or (isinstance(outs, tuple) and all(
            isinstance(x, _pl.Placement) for x in outs)):
        outs = [outs]
    return "  %s: %s" % (_j(k), _j({
        "in": [_placement_text(p) for p in ins],
        "out": [_placement_text(p) for p in outs]}))


def make_plan(program, mesh, placements=None, strategies=None, outputs=None,
              devices=None, name="<builder>", regions=None):
    """A Plan from a program (Program, ProgramBuilder or program YAML), a
    mesh ({"dp": 2, "tp": 2} or [("dp", 2), ("tp", 2)]), placements
    ({tensor: "S(0)R" or (Shard(0), Replicate())}), strategies ({op or glob:
    (inputs, outputs)}: inputs a list of placements; outputs one placement,
    or a list of them), output placements and regions (pin(...),
    manual(...)). A region naming no op, or one the plan's checks refuse,
    raises InvalidError at the line that made the region."""
    where = _caller()
    axes = list(mesh.items()) if isinstance(mesh, dict) else list(mesh)
    axes = ["%s=%d" % (a, _int(n, "mesh axis %s" % (a,))) for a, n in axes]
    regions = list(regions or [])
    for r in regions:
        if not isinstance(r, Region):
            raise UsageError("regions: %r is not a region (pin(...) or "
                             "manual(...))" % (r,))
    if isinstance(program, ProgramBuilder):
        prog = program._lines(where)
    else:
        prog = [(t, where) for t in _program_yaml(program).splitlines()]
    doc = [('libplan: "%s"' % PLAN_FORMAT, where)] + prog + [
        ("mesh:", where), ("  axes: %s" % _j(axes), where)]
    if devices is not None:
        doc.append(("  devices: %s" % _j(list(devices)), where))
    if placements:
        doc.append(("placements:", where))
        for k, v in placements.items():
            doc.append(("  %s: %s" % (_j(k), _j(_placement_text(v))), where))
    strat = [(k, v, where) for k, v in (strategies or {}).items()]
    for r in regions:
        strat += [(k, v, r.where) for k, v in r.strategies.items()]
    if strat:
        doc.append(("strategies:", where))
        seen = {}
        for k, (ins, outs), at in strat:
            if k in seen:
                raise UsageError("strategies: %r is given twice" % (k,))
            seen[k] = True
            doc.append((_strategy_line(k, ins, outs), at))
    if outputs:
        doc.append(("outputs:", where))
        for k, v in outputs.items():
            doc.append(("  %s: %s" % (_j(k), _j(_placement_text(v))), where))
    if regions:
        doc.append(("regions:", where))
        used = {r.entry["name"] for r in regions}
        n = 0
        for r in regions:
            e = dict(r.entry)
            if e["name"] is None:  # pinned-N, a name no other region has
                n += 1
                while "pinned-%d" % n in used:
                    n += 1
                e["name"] = "pinned-%d" % n
            doc.append(("  - %s" % _j(e), r.where))
    p = _parse_at(lambda t: Plan.parse(t, name=name), doc, name, where)
    if regions:
        _check_regions(p, doc, name, where)
    return p


def _check_regions(p, doc, name, where):
    """Raises at the region's line when the plan's checks find a region
    error or a region's op that is no op of the program."""
    for f in p.validate():
        if f.severity != "error" or f.file != name:
            continue
        if not (f.code.startswith("region.") or (
                f.code == "name.unknown" and f.message.startswith("regions"))):
            continue
        at = doc[f.line - 1][1] if 0 < f.line <= len(doc) else where
        p.close()
        e = InvalidError(f.message, file=at[0], line=at[1])
        raise e
