"""Regions from Python's builder (builder.pin, builder.manual) are the
regions a plan file writes: the same plan hash as the YAML-written
equivalent through save and load, kept by a search, verified equal; and
a builder mistake is reported at the caller's line, not at the generated
text."""

import os
import subprocess
import tempfile
import unittest

from util import EXAMPLES, MLP_PROGRAM, TOOL, libplan
from libplan import builder

HERE = os.path.abspath(__file__).replace(".pyc", ".py")

PINNED_YAML = """libplan: "1.0"
program: {path: mlp-program.yaml}
mesh:
  axes: [dp=2, tp=2]
strategies:
  mlp.act: {in: [RR], out: RR}
regions:
  - {name: act-replicated, kind: pinned, ops: [mlp.act]}
"""

BODY = """return function(h, w2)
  local a = gelu(h)           -- on each rank's block of h
  local y = matmul(a, w2)     -- partial sums over tp
  return all_reduce(y, "tp")  -- summed by hand
end
"""


def mlp_builder():
    b = libplan.ProgramBuilder("mlp")
    b.input("x", [("batch", 8), ("hidden", 16)])
    b.param("w1", [16, 64])
    b.param("w2", [64, 16])
    b.op("matmul", ["x", "w1"], "h", name="mlp.fc1")
    b.op("gelu", ["h"], "a", name="mlp.act")
    b.op("matmul", ["a", "w2"], "y", name="mlp.fc2")
    b.outputs(["y"])
    return b


def tool(*args, cwd=None):
    return subprocess.run([TOOL] + list(args), capture_output=True, text=True,
                          timeout=60, cwd=cwd)


class TestBuilderRegions(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def test_pin_has_the_yaml_hash_and_search_keeps_it(self):
        want = libplan.Plan.parse(PINNED_YAML, "pinned.yaml", EXAMPLES)
        region = builder.pin("mlp.act", name="act-replicated",
                             strategies={"mlp.act": (["RR"], "RR")})
        with open(MLP_PROGRAM) as f:
            text = f.read()
        p = builder.make_plan(text, {"dp": 2, "tp": 2}, regions=[region])
        self.assertEqual(p.hash(), want.hash())
        path = os.path.join(self.tmp.name, "pinned.plan.yaml")
        p.save(path, self_contained=True)
        with libplan.load(path) as back:
            self.assertEqual(back.hash(), want.hash())
        out = os.path.join(self.tmp.name, "searched.plan.yaml")
        r = tool("search", path, "--strategy", "greedy", "-o", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        with libplan.load(out) as s:
            st = s.strategy("mlp.act")
            self.assertEqual((st.inputs, st.outputs), (("RR",), ("RR",)))
        r = tool("verify", out)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("EQUAL", r.stdout)

    def test_manual_has_the_yaml_hash_and_verifies(self):
        with open(os.path.join(EXAMPLES, "mlp-manual.plan.yaml")) as f:
            want = libplan.Plan.parse(f.read(), "m.yaml", EXAMPLES)
        with libplan.load(os.path.join(EXAMPLES,
                                       "mlp-manual.plan.yaml")) as m:
            strategies = {op.name: (op.strategy.inputs, op.strategy.outputs)
                          for op in m.ops}
            placements = {"x": "S(0)R", "w1": "RS(1)", "w2": "RS(0)"}
        region = builder.manual("row-parallel-by-hand",
                                ["mlp.act", "mlp.fc2"], BODY,
                                inputs={"h": "S(0)S(1)", "w2": "RS(0)"},
                                outputs={"y": "S(0)R"})
        p = builder.make_plan(mlp_builder(), {"dp": 2, "tp": 2},
                              placements=placements, strategies=strategies,
                              outputs={"y": "S(0)R"}, regions=[region])
        self.assertEqual(p.hash(), want.hash())
        path = os.path.join(self.tmp.name, "manual.plan.yaml")
        p.save(path)
        with libplan.load(path) as back:
            self.assertEqual(back.hash(), want.hash())
        r = tool("verify", path)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("EQUAL", r.stdout)

    def assertAtLine(self, exc, line_text):
        """The error names this file and the line holding line_text."""
        with open(HERE) as f:
            lines = f.read().splitlines()
        want = [i + 1 for i, l in enumerate(lines)
                if l.endswith("# " + line_text)]
        self.assertEqual(len(want), 1, line_text)
        self.assertEqual(exc.file, HERE, str(exc))
        self.assertEqual(exc.line, want[0], str(exc))
        self.assertNotIn("<builder>", str(exc))

    def test_errors_at_the_callers_line(self):
        b = libplan.ProgramBuilder()
        b.input("x", [4])
        b.op("relu", ["missing"], "y", name="r")  # line at fault: op
        with self.assertRaises(libplan.InvalidError) as cm:
            b.build()
        self.assertAtLine(cm.exception, "line at fault: op")
        b = libplan.ProgramBuilder()
        b.input("x", [4])
        b.op("gleu", ["x"], "y", name="g")  # line at fault: kind
        with self.assertRaises(libplan.InvalidError) as cm:
            b.build()
        self.assertAtLine(cm.exception, "line at fault: kind")
        self.assertIn("did you mean 'gelu'?", str(cm.exception))
        r = builder.pin("mlp.actt")  # line at fault: pin
        with self.assertRaises(libplan.InvalidError) as cm:
            builder.make_plan(mlp_builder(), {"dp": 2}, regions=[r])
        self.assertAtLine(cm.exception, "line at fault: pin")
        self.assertIn("did you mean 'mlp.act'?", str(cm.exception))
        with self.assertRaises(libplan.Error) as cm:
            builder.make_plan(mlp_builder(), {"dp": 2},  # line at fault: mesh
                              placements={"x": "S(9)"})
        self.assertAtLine(cm.exception, "line at fault: mesh")
        # a tensor named like a section keeps its own line
        b = libplan.ProgramBuilder()
        b.input("x", [4])
        b.tensor("loss", [4], dtype="f33")  # line at fault: tensor loss
        b.op("relu", ["x"], "y", name="r")
        b.loss("y")
        with self.assertRaises(libplan.Error) as cm:
            b.build()
        self.assertAtLine(cm.exception, "line at fault: tensor loss")

    def test_findings_read_as_the_tools(self):
        p = builder.make_plan(mlp_builder(), {"dp": 2}, name="m.yaml")
        f = p.validate()[0]
        self.assertRegex(str(f), r"^m\.yaml:\d+:\d+: error: .* \[[a-z.]+\]$")


if __name__ == "__main__":
    unittest.main()
