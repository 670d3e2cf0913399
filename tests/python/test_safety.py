"""The binding refuses what would crash or lie: a child object used after
its plan is closed, integers that do not fit the C type they are passed
as, NUL bytes in paths and names, NaN or negative tolerances, and
distributed verification's world size and rank out of range."""

import json
import os
import shutil
import tempfile
import unittest

from util import MLP, MLP_PROGRAM, PIPELINE, libplan, python

with open(MLP) as _f:
    MLP_TEXT = _f.read()

# Every call on a plan's program view once the plan is closed, each
# printed as the exception it raised (or "no error"): run in a child
# interpreter, so a use of freed memory fails the test instead of
# killing the test run.
_AFTER_CLOSE = r"""
import json, libplan
p = libplan.load(%r)
g = p.program
p.close()
calls = {
    "ops": lambda: g.ops, "tensors": lambda: g.tensors,
    "name": lambda: g.name, "len": lambda: len(g), "hash": g.hash,
    "op": lambda: g.op(0), "op by name": lambda: g.op("mlp.fc1"),
    "tensor": lambda: g.tensor(0), "shape": lambda: g.shape("x"),
    "signatures": g.signatures, "text": g.text, "grad": g.grad,
}
out = {}
for name, call in calls.items():
    try:
        call()
        out[name] = "no error"
    except Exception as e:
        out[name] = "%%s:%%s:%%s" %% (type(e).__name__,
                                   isinstance(e, ValueError), e)
out["closed"] = g.closed
out["repr"] = repr(g)
print(json.dumps(out))
"""

# The plan dropped while its program view lives: the view keeps the C
# object alive (and the collector must not free it under the view).
_DEL_PARENT = r"""
import gc, libplan
p = libplan.load(%r)
g = p.program
del p
gc.collect()
junk = [libplan.load(%r) for _ in range(20)]  # reuse of freed memory
print(len(g.ops), g.op(0).name, g.tensor("w1").shape, g.closed)
"""


class TestChildren(unittest.TestCase):
    def test_program_view_after_close_raises(self):
        r = python(_AFTER_CLOSE % MLP)
        self.assertEqual(r.returncode, 0, "the child died: %s" % r.stderr)
        out = json.loads(r.stdout)
        self.assertIs(out.pop("closed"), True)
        self.assertIn("closed", out.pop("repr"))
        for name, got in out.items():
            with self.subTest(call=name):
                self.assertEqual(got, "UsageError:True:plan is closed")

    def test_view_keeps_a_dropped_plan_alive(self):
        r = python(_DEL_PARENT % (MLP, MLP))
        self.assertEqual(r.returncode, 0, "the child died: %s" % r.stderr)
        self.assertEqual(r.stdout.split(), ["3", "mlp.fc1", "(16,", "64)",
                                            "False"])

    def test_plan_views_after_close(self):
        p = libplan.load(MLP)
        g = p.program
        p.close()
        self.assertTrue(g.closed)
        with self.assertRaisesRegex(ValueError, "^plan is closed$"):
            g.op(0)
        g.close()  # a view closes without freeing anything
        with self.assertRaisesRegex(ValueError, "closed"):
            g.op(0)


class TestIntegers(unittest.TestCase):
    def setUp(self):
        self.p = libplan.load(MLP)
        self.addCleanup(self.p.close)

    def test_range_error_is_overflow_and_usage(self):
        with self.assertRaises(OverflowError) as cm:
            self.p.placement(2 ** 62)
        self.assertIsInstance(cm.exception, libplan.UsageError)
        self.assertIsInstance(cm.exception, libplan.RangeError)
        self.assertIn("2^31", str(cm.exception))

    def test_tensor_and_op_indices(self):
        p = self.p
        for call, big in ((p.placement, 2 ** 62), (p.placement, 2 ** 32),
                          (p.placement_spec, 2 ** 32), (p.stage, 2 ** 32),
                          (p.strategy, 2 ** 32),
                          (p.program.shape, 2 ** 32),
                          (p.program.op, 2 ** 32),
                          (p.program.tensor, 2 ** 32)):
            with self.subTest(call=call.__name__, value=big):
                with self.assertRaises(OverflowError):
                    call(big)
        # in range but no such op: not stage -1 ("no pipeline")
        with self.assertRaises(libplan.NotFoundError):
            p.stage(3)
        with self.assertRaises(libplan.UsageError):
            p.placement(True)  # a bool is not an index

    def test_mesh_coords(self):
        m = self.p.mesh
        self.assertEqual([m.coords(r) for r in range(4)],
                         [(0, 0), (0, 1), (1, 0), (1, 1)])
        with self.assertRaises(OverflowError):
            m.coords(2 ** 63)
        for bad in (4, -1, 2 ** 40):
            with self.subTest(rank=bad):
                with self.assertRaises(libplan.UsageError):
                    m.coords(bad)
        with self.assertRaises(libplan.UsageError):
            m.coords(1.0)

    def test_load_threads_and_verify_seed(self):
        with self.assertRaises(OverflowError):
            libplan.load(MLP, threads=2 ** 40)
        with self.assertRaises(OverflowError):
            self.p.verify(seed=2 ** 64)
        with self.assertRaises(libplan.UsageError):
            libplan.load(MLP, threads=1.5)

    def test_schedule_ints(self):
        with self.assertRaises(OverflowError):
            libplan.Schedule.generate("gpipe", 2 ** 32 + 2, 2, 2)
        with self.assertRaises(OverflowError):
            libplan.Schedule.generate("gpipe", 2, 2, 2 ** 63)
        with libplan.load(PIPELINE) as p:
            s = p.schedule()
            self.assertTrue(s.actions(0))
            with self.assertRaises(OverflowError):
                s.actions(2 ** 32)  # was rank 0's actions
            with self.assertRaises(libplan.NotFoundError):
                s.actions(s.ranks)

    def test_search_options(self):
        for kw in ({"width": 2 ** 31}, {"width": 2 ** 32 + 1},
                   {"seed": 2 ** 63}, {"limit": 2 ** 64}):
            with self.subTest(**kw):
                with self.assertRaises(OverflowError):
                    libplan.search(MLP_PROGRAM, {"dp": 2}, "beam", **kw)

    def test_builder_and_placements_take_whole_numbers(self):
        b = libplan.ProgramBuilder("m")
        with self.assertRaises(libplan.UsageError):
            b.input("x", [2.5, 4])  # was a dim of 2
        with self.assertRaises(libplan.UsageError):
            b.input("y", [("batch", 8.7)])
        with self.assertRaises(libplan.UsageError):
            libplan.make_plan("tensors: {}\nops: []\n", {"dp": 2.5})
        with self.assertRaises(libplan.UsageError):
            libplan.Shard(1.5)
        with self.assertRaises(libplan.UsageError):
            libplan.Shard(0, level=0.5)
        self.assertEqual(libplan.Shard(1, 0).compact(), "S(1:0)")
        self.assertEqual(libplan.parse_placement("S(0:1)R")[0],
                         libplan.Shard(0, 1))


class TestDistributedArguments(unittest.TestCase):
    def setUp(self):
        self.p = libplan.load(MLP)
        self.addCleanup(self.p.close)
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)

    def verify(self, **kw):
        return self.p.verify(distributed=os.path.join(self.dir, "rv"),
                             timeout=2, **kw)

    def test_world_size_out_of_range(self):
        # 2^40 was cut to 0: one process, and EQUAL; 2^32 + 4 to 4
        for world in (2 ** 40, 2 ** 32 + 4, 2 ** 31):
            with self.subTest(world_size=world):
                with self.assertRaises(OverflowError):
                    self.verify(rank=0, world_size=world)

    def test_world_size_and_rank_are_ints(self):
        for kw in ({"rank": 0, "world_size": True},
                   {"rank": False, "world_size": 4},
                   {"rank": 0, "world_size": 0},
                   {"rank": 0, "world_size": -4},
                   {"rank": -1, "world_size": 4},
                   {"rank": 0, "world_size": 4.0}):
            with self.subTest(**kw):
                with self.assertRaises(libplan.UsageError):
                    self.verify(**kw)

    def test_world_size_from_the_environment(self):
        code = ("import libplan, os\n"
                "p = libplan.load(%r)\n"
                "try:\n"
                "    p.verify(distributed=%r, timeout=2)\n"
                "    print('no error')\n"
                "except OverflowError as e:\n"
                "    print('OverflowError')\n" % (
                    MLP, os.path.join(self.dir, "rv")))
        r = python(code, env={"WORLD_SIZE": str(2 ** 40), "RANK": "0"})
        self.assertEqual(r.stdout.strip(), "OverflowError", r.stderr)


class TestFloats(unittest.TestCase):
    def test_tolerances_are_finite_and_not_negative(self):
        nan, inf = float("nan"), float("inf")
        with libplan.load(MLP) as p:
            for kw in ({"rtol": nan}, {"atol": nan}, {"rtol": inf},
                       {"atol": -1e-3}, {"rtol": -0.5},
                       {"tolerances": {"y": (nan, 0.0)}},
                       {"tolerances": {"y": (0.0, inf)}},
                       {"tolerances": {"y": (-1.0, 0.0)}}):
                with self.subTest(**{k: str(v) for k, v in kw.items()}):
                    with self.assertRaises(libplan.UsageError) as cm:
                        p.verify(mode="float", **kw)
                    self.assertIsInstance(cm.exception, ValueError)
            self.assertTrue(p.verify(mode="float", rtol=1e-6, atol=0))


class TestMemoryLimit(unittest.TestCase):
    """verify runs the memory preflight the tool runs: a run estimated over
    the limit is refused before it starts, with the figures."""

    BIG = os.path.join(os.path.dirname(MLP), "models",
                       "llama3-8b-layer.recipe.plan.yaml")

    def test_over_the_limit_is_refused_with_the_figures(self):
        with libplan.load(self.BIG) as p:
            with self.assertRaises(libplan.UnsupportedError) as cm:
                p.verify(memory_limit=100 * 10 ** 6)
            msg = str(cm.exception)
            self.assertIn("needs about", msg)
            self.assertIn("GiB, 95.37 MiB available (the limit given)", msg)
            self.assertIn("--reduce verifies the same sharding", msg)

    def test_a_small_plan_fits_and_the_argument_is_checked(self):
        with libplan.load(MLP) as p:
            self.assertTrue(p.verify(memory_limit=10 ** 9))
            self.assertTrue(p.verify(memory_limit=False))
            self.assertTrue(p.verify())
            for bad in ("1GB", 1.5, True):
                with self.subTest(limit=bad):
                    with self.assertRaises(libplan.UsageError):
                        p.verify(memory_limit=bad)
            for bad in (0, -1, 2 ** 64):
                with self.subTest(limit=bad):
                    with self.assertRaises(libplan.RangeError):
                        p.verify(memory_limit=bad)


class TestNul(unittest.TestCase):
    """A NUL byte would cut the C string short: "a\\0b" would be "a"."""

    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)
        self.a = os.path.join(self.dir, "a")
        with open(self.a, "w") as f:
            f.write(MLP_TEXT)
        self.p = libplan.load(MLP)
        self.addCleanup(self.p.close)

    def assert_nul_refused(self, call, *args, **kw):
        with self.assertRaisesRegex(libplan.UsageError, "NUL") as cm:
            call(*args, **kw)
        self.assertIsInstance(cm.exception, ValueError)

    def test_paths(self):
        bad = self.a + "\x00b"
        self.assert_nul_refused(libplan.load, bad)
        self.assert_nul_refused(libplan.load, os.fsencode(bad))
        self.assert_nul_refused(libplan.Program.load, bad)
        self.assert_nul_refused(libplan.load_program, bad)
        self.assert_nul_refused(self.p.diff, bad)
        self.assert_nul_refused(self.p.drift, bad)
        self.assert_nul_refused(libplan.parse, MLP_TEXT,
                                base_dir=self.dir + "\x00x")
        out = os.path.join(self.dir, "out")
        self.assert_nul_refused(self.p.save, out + "\x00.yaml")
        self.assertFalse(os.path.exists(out))  # nothing written
        self.assert_nul_refused(self.p.cost, calibration=bad)
        self.assert_nul_refused(self.p.verify, distributed=bad, rank=0,
                                world_size=4)
        self.assert_nul_refused(libplan.upgrade, bad)
        self.assert_nul_refused(libplan.upgrade, self.a, out + "\x00x")
        self.assert_nul_refused(libplan.lower, bad)
        self.assert_nul_refused(libplan.replay, bad)

    def test_names(self):
        p = self.p
        self.assert_nul_refused(p.program.op, "mlp.fc1\x00junk")
        self.assert_nul_refused(p.program.tensor, "w1\x00junk")
        self.assert_nul_refused(p.program.shape, "w1\x00junk")
        self.assert_nul_refused(p.strategy, "mlp.fc1\x00junk")
        self.assert_nul_refused(p.stage, "mlp.fc1\x00junk")
        self.assert_nul_refused(p.cost, "h100\x00x")
        self.assert_nul_refused(p.verify, mode="float", dtype="f64\x00x")
        self.assert_nul_refused(p.verify, runner="cpu\x00x")
        self.assert_nul_refused(libplan.parse, MLP_TEXT, name="p\x00.yaml")
        with p.cost() as c:
            self.assert_nul_refused(c.write, "json\x00x")
        with p.verify() as r:
            self.assert_nul_refused(r.write, "json\x00x")

    def test_text_with_nul_is_the_library_s_to_judge(self):
        # a buffer goes over with its length: the parser sees the NUL and
        # says where it is
        with self.assertRaises(libplan.ParseError) as cm:
            libplan.parse(MLP_TEXT + "x: \x00\n", name="t.yaml")
        self.assertEqual(cm.exception.file, "t.yaml")
        self.assertGreater(cm.exception.line, 0)


if __name__ == "__main__":
    unittest.main()
