"""Building programs and plans from Python.

The builder writes the plan format (spec/plan-format.md) as YAML flow
collections (JSON syntax, which YAML reads) and hands the text to libplan,
so a built program is checked exactly like a file: names, shapes (inferred
for produced tensors), op attributes.
"""

import json

from . import placements as _pl
from ._common import _int
from ._plan import Plan
from ._program import Program

FORMAT = "1.0"


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
        self._ops.append(o)
        return name

    def outputs(self, names):
        self._outputs = list(names)

    def loss(self, name):
        self._loss = name

    def program_yaml(self):
        """The `program:` section (without the version line)."""
        lines = ["program:"]
        if self.name:
            lines.append("  name: %s" % _j(self.name))
        lines.append("  tensors:")
        if not self._tensors:
            lines[-1] += " {}"
        for k, v in self._tensors.items():
            lines.append("    %s: %s" % (_j(k), _j(v)))
        lines.append("  ops:")
        if not self._ops:
            lines[-1] += " []"
        for o in self._ops:
            lines.append("    - %s" % _j(o))
        if self._outputs is not None:
            lines.append("  outputs: %s" % _j(self._outputs))
        if self._loss is not None:
            lines.append("  loss: %s" % _j(self._loss))
        return "\n".join(lines) + "\n"

    def yaml(self):
        return 'libplan: "%s"\n%s' % (FORMAT, self.program_yaml())

    def build(self, name="<builder>"):
        return Program.parse(self.yaml(), name=name)


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


def make_plan(program, mesh, placements=None, strategies=None, outputs=None,
              devices=None, name="<builder>"):
    """A Plan from a program (Program, ProgramBuilder or program YAML), a
    mesh ({"dp": 2, "tp": 2} or [("dp", 2), ("tp", 2)]), placements
    ({tensor: "S(0)R" or (Shard(0), Replicate())}), strategies ({op or glob:
    (inputs, outputs)}: inputs a list of placements; outputs one placement,
    or a list of them) and output placements."""
    axes = list(mesh.items()) if isinstance(mesh, dict) else list(mesh)
    axes = ["%s=%d" % (a, _int(n, "mesh axis %s" % (a,))) for a, n in axes]
    doc = ['libplan: "%s"' % FORMAT, _program_yaml(program).rstrip("\n"),
           "mesh:", "  axes: %s" % _j(axes)]
    if devices is not None:
        doc.append("  devices: %s" % _j(list(devices)))
    if placements:
        doc.append("placements:")
        for k, v in placements.items():
            doc.append("  %s: %s" % (_j(k), _j(_placement_text(v))))
    if strategies:
        doc.append("strategies:")
        for k, (ins, outs) in strategies.items():
            # one output: a str or a tuple of placements; several: a list
            if isinstance(outs, str) or (isinstance(outs, tuple) and all(
                    isinstance(x, _pl.Placement) for x in outs)):
                outs = [outs]
            doc.append("  %s: %s" % (_j(k), _j({
                "in": [_placement_text(p) for p in ins],
                "out": [_placement_text(p) for p in outs]})))
    if outputs:
        doc.append("outputs:")
        for k, v in outputs.items():
            doc.append("  %s: %s" % (_j(k), _j(_placement_text(v))))
    return Plan.parse("\n".join(doc) + "\n", name=name)
