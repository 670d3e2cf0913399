"""Plan.lowered(): the lowered program's steps, buffers, layouts and outputs
as values, checked against the program, against each other and against the
text form Plan.lower() writes."""

import os
import re
import unittest

import subprocess

from util import EXAMPLES, MLP, TOOL, libplan

TRAIN = os.path.join(EXAMPLES, "mlp-train.plan.yaml")


def text_buffers(text):
    """The buffer names of a lowered file, in order."""
    part = text.split("\nbuffers:\n", 1)[1].split("\nsteps:", 1)[0]
    return [m.group(1) or m.group(2) for m in
            re.finditer(r'(?m)^  (?:"([^"]+)"|(\S+)): \{tensor:', part)]


class TestLowered(unittest.TestCase):
    def check_consistent(self, p, low):
        """Steps, buffers, layouts and outputs agree with each other, with
        the counts and with the text form."""
        text = p.lower()
        self.assertEqual([b.name for b in low.buffers], text_buffers(text))
        steps = text.split("\nsteps:\n", 1)[1].split("\nlayouts:", 1)[0]
        self.assertEqual(len(low.steps), len(steps.splitlines()))
        counts = low.collective_counts()
        self.assertEqual(set(counts), set(libplan._lowered.COLLECTIVES))
        for kind, n in counts.items():
            self.assertEqual(n, sum(st.kind == kind for st in low.steps), kind)
            self.assertEqual(n, steps.count("{collective: %s," % kind), kind)
        nb = len(low.buffers)
        for st in low.steps:
            self.assertTrue(all(0 <= b < nb for b in st.inputs + st.outputs))
            if st.kind in counts:
                self.assertIn(st.axis, p.mesh.axes)
                self.assertIsNone(st.op)
        prog = {t.name: t for t in low.program.tensors}
        for name, lay in low.layouts.items():
            buf = low.buffers[lay.buffer]
            self.assertEqual(buf.shape, prog[name].shape, name)
            self.assertEqual(buf.dtype, prog[name].dtype, name)
            self.assertEqual(lay.placement, buf.placement)
        for b in low.buffers:
            self.assertEqual(b.shape, prog[b.tensor].shape)
        for o in low.outputs:
            self.assertEqual(low.buffers[o.buffer].tensor, o.tensor)
            self.assertEqual(low.buffers[o.buffer].placement, o.required)

    def test_mlp(self):
        with libplan.load(MLP) as p:
            low = p.lowered()
            self.check_consistent(p, low)
            ops = [st for st in low.steps if st.kind == "op"]
            self.assertEqual([st.op for st in ops],
                             ["mlp.fc1", "mlp.act", "mlp.fc2"])
            self.assertEqual(ops[1].op_kind, "gelu")
            self.assertEqual(ops[1].attrs, {"approximate": "none"})
            self.assertEqual(ops[0].attrs["transpose_a"], False)
            ar = [st for st in low.steps if st.kind == "all_reduce"]
            self.assertEqual(len(ar), 1)
            self.assertEqual((ar[0].axis, ar[0].reduce, ar[0].dim),
                             ("tp", "sum", None))
            self.assertEqual(low.collective_counts()["all_reduce"], 1)
            self.assertEqual(low.layouts["w1"].placement, "RS(1)")
            self.assertEqual(low.outputs,
                             [libplan.LoweredOutput("y", 6, "S(0)R", None)])
            w1 = low.layouts["w1"].buffer
            # dp=2 x tp=2, row-major: rank 1 is dp 0, tp 1
            self.assertEqual(low.block(w1, 1), ((16, 32), (0, 32)))
            self.assertEqual(low.block(w1, 2), ((16, 32), (0, 0)))
            x = low.layouts["x"].buffer
            self.assertEqual(low.block(x, 3), ((4, 16), (4, 0)))
            with self.assertRaises(libplan.UsageError):
                low.block(w1, low.ranks)
            with self.assertRaises(libplan.UsageError):
                low.block(len(low.buffers), 0)
        # the plan closed: the lowered program borrowed it
        with self.assertRaises(libplan.UsageError):
            low.collective_counts()

    def test_training(self):
        with libplan.load(TRAIN) as p:
            low = p.lowered()
            self.check_consistent(p, low)
            grads = {o.tensor: o.gradient_of for o in low.outputs
                     if o.gradient_of}
            self.assertTrue(grads)
            for g, param in grads.items():
                self.assertEqual(g, "grad/" + param)
            fwd = len(p.program.ops)
            self.assertGreater(sum(st.kind == "op" for st in low.steps), fwd)
            low.close()
            self.assertTrue(low.closed)
            with self.assertRaises(libplan.UsageError):
                low.block(0, 0)

    def test_ratios(self):
        # shard ratios (format 1.1): buffers, layouts and outputs spell the
        # weights, as the file does, and parse into Shard(ratios=...)
        path = os.path.join(EXAMPLES, "mlp-ratios.plan.yaml")
        with libplan.load(path) as p:
            low = p.lowered()
            self.check_consistent(p, low)
            self.assertEqual(p.placement("x"), "S(0|3:1)R")
            self.assertEqual(low.layouts["x"].placement, "S(0|3:1)R")
            y = [o for o in low.outputs if o.tensor == "y"][0]
            self.assertEqual(y.required, "S(1|3:1)S(0|1:3)")
            self.assertEqual(libplan.parse_placement(y.required),
                             (libplan.Shard(1, ratios=[3, 1]),
                              libplan.Shard(0, ratios=[1, 3])))
            self.assertEqual(
                libplan.format_placement(libplan.parse_placement(y.required)),
                y.required)
            for b in low.buffers:
                self.assertNotIn("#", b.placement, b.name)
            kinds = {st.kind for st in low.steps}
            self.assertTrue({"all_gather", "reduce_scatter",
                             "all_to_all"} <= kinds)
            # 6 rows on dp index 0, 2 on index 1 (rank 2 is dp 1, tp 0)
            x = low.layouts["x"].buffer
            self.assertEqual(low.block(x, 0), ((6, 16), (0, 0)))
            self.assertEqual(low.block(x, 2), ((2, 16), (6, 0)))
            self.assertIn('placement: "S(0|3:1)R"', p.lower())

    def test_the_text_form_is_unchanged(self):
        # the binding's text is the tool's `plan lower` output
        tool = subprocess.run([TOOL, "lower", MLP], capture_output=True,
                              text=True, timeout=60, check=True).stdout
        with libplan.load(MLP) as p:
            self.assertEqual(p.lower(), tool)
            self.assertIsInstance(p.lowered(), libplan.Lowered)


if __name__ == "__main__":
    unittest.main()
