"""Plans from Python: load, hash, views, validate, verify, cost, save."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import unittest

from util import (BLOCK, MLP, MLP_PROGRAM, PIPELINE, TOOL, libplan)



def read(path):
    with open(path) as f:
        return f.read()


MLP_TEXT = read(MLP)
FC2_GOOD = "mlp.fc2: {in: [S(0)S(1), RS(0)], out: S(0)P(sum)}"
FC2_BAD = "mlp.fc2: {in: [S(0)S(1), RS(0)], out: S(0)R}"


class TestLoad(unittest.TestCase):
    def test_load_and_hash_match_the_tool(self):
        with libplan.load(MLP) as p:
            self.assertEqual(p.file, MLP)
            self.assertTrue(p.has_mesh)
            h = p.hash()
            self.assertRegex(h, r"^xxh3:[0-9a-f]{32}$")
            self.assertNotEqual(p.hash("program"), h)
            self.assertEqual(p.program.hash(), p.hash("program"))
        if os.access(TOOL, os.X_OK):
            out = subprocess.run([TOOL, "hash", MLP], capture_output=True,
                                 text=True).stdout.strip()
            self.assertEqual(out, h)

    def test_overlap_entries(self):
        with libplan.load(MLP) as p:
            self.assertEqual(p.overlap, [])
        path = os.path.join(os.path.dirname(MLP), "fsdp-tp-overlap.plan.yaml")
        with libplan.load(path) as p:
            ov = p.overlap
        self.assertEqual(len(ov), 3)
        self.assertEqual(ov[0], {"param": "layers.1.*", "start": "after layers.0.fc1"})
        self.assertEqual(ov[1], {"chunks": 2, "input": "layers.1.fc1", "operand": 0})
        self.assertEqual(ov[2], {"grad_sync": "layers.*", "start": "ready",
                                 "stream": 2, "wait": "end"})

    def test_parse_equals_load(self):
        with libplan.parse(MLP_TEXT, name="m.yaml",
                           base_dir=os.path.dirname(MLP)) as p, \
                libplan.load(MLP) as q:
            self.assertEqual(p.hash(), q.hash())
            self.assertEqual(p.diff(q), [])

    def test_views(self):
        with libplan.load(MLP) as p:
            m = p.mesh
            self.assertEqual(m.axes, ("dp", "tp"))
            self.assertEqual(m.sizes, (2, 2))
            self.assertEqual(m.devices, (0, 1, 2, 3))
            self.assertEqual(m.shape, {"dp": 2, "tp": 2})
            self.assertEqual(m.coords(3), (1, 1))
            self.assertEqual(p.placements,
                             {"x": "S(0)R", "w1": "RS(1)", "w2": "RS(0)"})
            self.assertEqual(p.placement("w1"), "RS(1)")
            self.assertEqual(p.placement_spec("w1"),
                             (libplan.Replicate(), libplan.Shard(1)))
            st = p.strategy("mlp.fc2")
            self.assertEqual(st.inputs, ("S(0)S(1)", "RS(0)"))
            self.assertEqual(st.outputs, ("S(0)P(sum)",))
            self.assertEqual(st.parsed().outputs[0],
                             (libplan.Shard(0), libplan.Partial("sum")))
            ops = p.ops
            self.assertEqual([o.name for o in ops],
                             ["mlp.fc1", "mlp.act", "mlp.fc2"])
            self.assertEqual(ops[0].inputs, ("x", "w1"))
            self.assertEqual(ops[0].stage, -1)
            t = {t.name: t for t in p.tensors}
            self.assertEqual(t["w1"].shape, (16, 64))
            self.assertEqual(t["w1"].role, "param")
            self.assertIsNone(t["h"].placement)
            self.assertEqual(p.program.shape("y"), (8, 16))
            self.assertEqual(len(p.program), 3)
            with self.assertRaises(libplan.NotFoundError):
                p.placement("nope")
            with self.assertRaises(libplan.NotFoundError):
                p.placement(99)
            self.assertEqual(p.placement(1), "RS(1)")
            with self.assertRaises(libplan.NotFoundError):
                p.strategy("nope")

    def test_show(self):
        with libplan.load(MLP) as p:
            text = p.show()
            self.assertIn("mlp.fc2  matmul  S(0)S(1) RS(0)  S(0)P(sum)", text)
            self.assertIn("w1  RS(1)", text)
        with libplan.load(PIPELINE) as p:
            self.assertIn("stage", p.show())

    def test_program(self):
        with libplan.load_program(MLP_PROGRAM) as prog:
            self.assertEqual(prog.op(0).kind, "matmul")
            sig = prog.signatures()
            self.assertIn("mlp.fc1", sig["ops"])
            self.assertIn("w1", sig["tensors"])
            text = prog.text()
            with libplan.Program.parse(text) as again:
                self.assertEqual(again.hash(), prog.hash())
            self.assertIn("libplan.Program", repr(prog))

    def test_pipeline_views_and_schedule(self):
        with libplan.load(PIPELINE) as p:
            self.assertGreater(p.stage_count, 1)
            stages = {o.stage for o in p.ops}
            self.assertEqual(stages, set(range(p.stage_count)))
            with p.schedule() as s:
                self.assertEqual(s.stages, p.stage_count)
                found, res = s.simulate()
                self.assertTrue(found.ok)
                self.assertTrue(res["simulated"])
                self.assertGreater(res["makespan"], 0)
                self.assertEqual(s.actions(0)[0].kind, "F")
                self.assertIn("<svg", s.write("svg"))
        with libplan.Schedule.generate("gpipe", 2, 2, 4) as g:
            self.assertEqual(g.kind, "gpipe")

    def test_schedules_named_in_1_1(self):
        # zbv and dualpipev named by a plan: its schedule is that kind, on
        # 2 ranks with 4 stages in a V, zero bubble apart from R - 1 (F 1,
        # I 1, W 1: 3 v m + R - 1 = 25), the text written as format 1.1
        for k in ("zbv", "dualpipev"):
            path = os.path.join(os.path.dirname(PIPELINE),
                                "transformer4-%s.plan.yaml" % k)
            with libplan.load(path) as p:
                self.assertTrue(p.validate().ok)
                self.assertIn('libplan: "1.1"', p.text())
                self.assertIn("schedule: %s" % k, p.text())
                with p.schedule() as s:
                    self.assertEqual(s.kind, k)
                    self.assertEqual((s.ranks, s.stages, s.microbatches),
                                     (2, 4, 4))
                    # stage 3 runs on rank 0 (the V), not 3 mod 2
                    self.assertIn(3, {a.stage for a in s.actions(0)})
                    self.assertNotIn(3, {a.stage for a in s.actions(1)})
                    found, res = s.simulate()
                    self.assertTrue(found.ok)
                    self.assertEqual(res["makespan"], 3 * 2 * 4 + 2 - 1)
            # a 1.0 file naming it: a version error at the name
            text = read(path).replace('libplan: "1.1"', 'libplan: "1.0"')
            with self.assertRaises(libplan.VersionError) as cm:
                libplan.parse(text, "v10.yaml", os.path.dirname(path))
            self.assertIn("schedule: %s is a format 1.1 field" % k,
                          str(cm.exception))
        with libplan.load(MLP) as p, self.assertRaises(libplan.NotFoundError):
            p.schedule()


class TestChecks(unittest.TestCase):
    def test_validate(self):
        with libplan.load(BLOCK) as p:
            self.assertTrue(p.validate().ok)
        with libplan.parse(MLP_TEXT.replace(FC2_GOOD, FC2_BAD), "bug.yaml",
                           os.path.dirname(MLP)) as p:
            found = p.validate()
            self.assertFalse(found.ok)
            f = found.errors[0]
            self.assertEqual(f.code, "strategy.illegal")
            self.assertEqual(f.object, "mlp.fc2")
            self.assertEqual((f.file, f.line), ("bug.yaml", 29))
            self.assertGreater(f.column, 0)
            self.assertIn("bug.yaml:29:", str(f))


    def test_verify_distributed(self):
        """One process per mesh rank (four, under mpirun on localhost):
        every process gets the one-process verdict, the records count
        every rank's elements, a bug is found at the same op."""
        code = ("import json, os, sys, libplan\n"
                "with libplan.parse(open(sys.argv[1]).read(), 'p.yaml',\n"
                "                   os.path.dirname(sys.argv[2])) as p:\n"
                "    r = p.verify(distributed=True, timeout=60)\n"
                "    out = os.path.join(sys.argv[3], 'rank-%s.json' %\n"
                "                       os.environ['OMPI_COMM_WORLD_RANK'])\n"
                "    with open(out, 'w') as f:\n"
                "        json.dump([r.equal, r.first_op,\n"
                "                   r.to_dict()['tensors']], f)\n")
        for text in (MLP_TEXT, MLP_TEXT.replace(FC2_GOOD, FC2_BAD)):
            with libplan.parse(text, "p.yaml", os.path.dirname(MLP)) as p:
                one = p.verify()
            with tempfile.TemporaryDirectory() as d:
                src = os.path.join(d, "p.yaml")
                with open(src, "w") as f:
                    f.write(text)
                env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
                           OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                           PYTHONPATH=os.path.dirname(libplan.__path__[0]))
                pr = subprocess.run(
                    ["mpirun", "--oversubscribe", "--mca", "btl",
                     "self,vader", "-quiet", "-np", "4", sys.executable,
                     "-c", code, src, MLP, d],
                    env=env, capture_output=True, text=True, timeout=120)
                self.assertEqual(pr.returncode, 0, pr.stderr)
                got = []
                for r in range(4):
                    with open(os.path.join(d, "rank-%d.json" % r)) as f:
                        got.append(json.load(f))
            for equal, first_op, tensors in got:
                self.assertEqual(equal, one.equal)
                self.assertEqual(first_op, one.first_op)
                self.assertEqual(tensors, one.to_dict()["tensors"])
        with libplan.load(MLP) as p:
            with self.assertRaises(libplan.UsageError):
                p.verify(rank=0)  # without distributed
            with self.assertRaises(libplan.UsageError):
                p.verify(distributed="/tmp/x", rank=4, world_size=4)
            with self.assertRaises(libplan.UsageError):
                p.verify(distributed=True, rank=0, world_size=4,
                         comm="tcp")
            with self.assertRaises(libplan.UsageError):  # not the mesh
                p.verify(distributed="/tmp/x", rank=0, world_size=3)
            with self.assertRaises(libplan.UsageError):
                p.verify(distributed="/tmp/x", rank=0, world_size=4,
                         timeout=float("inf"))

    def test_verify(self):
        with libplan.load(BLOCK) as p:
            r = p.verify()
            self.assertTrue(r.equal)
            self.assertTrue(r)
            self.assertIsNone(r.first_op)
            self.assertGreater(r.collectives["all_gather"], 0)
            self.assertIn("EQUAL", r.text)
            self.assertEqual(r.to_dict()["verdict"], "equal")
            self.assertTrue(p.verify(mode="float", seed=3, dtype="f64").equal)
            self.assertTrue(p.verify(mode="float",
                                     tolerances={"block.*": (1e-4, 1e-5)}))
            with self.assertRaises(libplan.UsageError):
                p.verify(mode="fuzzy")
            self.assertEqual(r.runner, "cpu")
            self.assertEqual(p.verify(runner="cpu").runner, "cpu")
            with self.assertRaises(libplan.UsageError):
                p.verify(runner="tpu")
            old = os.environ.get("PLAN_CUDA_PLUGIN")
            os.environ["PLAN_CUDA_PLUGIN"] = "/nonexistent/libplan-cuda.so"
            try:
                with self.assertRaises(libplan.UnsupportedError) as e:
                    p.verify(runner="cuda")
                self.assertIn("/nonexistent/libplan-cuda.so", str(e.exception))
            finally:
                if old is None:
                    del os.environ["PLAN_CUDA_PLUGIN"]
                else:
                    os.environ["PLAN_CUDA_PLUGIN"] = old
        with libplan.parse(MLP_TEXT.replace(FC2_GOOD, FC2_BAD), "bug.yaml",
                           os.path.dirname(MLP)) as p:
            r = p.verify()
            self.assertFalse(r.equal)
            self.assertEqual((r.first_op, r.first_tensor), ("mlp.fc2", "y"))
            self.assertIn("all-reduce", r.diagnosis)
            self.assertIn("mlp.fc2", repr(r))
        with libplan.load(PIPELINE) as p:  # run as its schedule says
            r = p.verify()
            self.assertTrue(r.equal)
            self.assertIn("8 microbatches, 1f1b", r.text)
        regions = os.path.join(os.path.dirname(PIPELINE), "..", "spec",
                               "vectors", "valid", "regions.yaml")
        with libplan.load(regions) as p:  # a manual region: not lowered
            with self.assertRaises(libplan.UnsupportedError):
                p.verify()

    def test_verify_training_step(self):
        path = os.path.join(os.path.dirname(MLP), "mlp-train.plan.yaml")
        if not os.path.exists(path):
            self.skipTest("no examples/mlp-train.plan.yaml")
        with libplan.load(path) as p:
            self.assertTrue(p.verify().equal)

    def test_verify_estimate(self):
        with libplan.load(BLOCK) as p:
            small, _ = p.reduce_shapes()
            with small:
                full, less = p.verify_estimate(), small.verify_estimate()
                self.assertGreater(less, 0)
                self.assertGreater(full, less)
                self.assertGreaterEqual(small.verify_estimate("float"), less)
            with self.assertRaises(libplan.UsageError):
                p.verify_estimate("fast")

    def test_reduce_shapes(self):
        with libplan.load(BLOCK) as p:
            small, summary = p.reduce_shapes()
            with small:
                self.assertIn("reduced", summary)
                self.assertTrue(small.verify().equal)

    def test_reduce_mesh(self):
        big = os.path.join(os.path.dirname(MLP), "dit-torus.plan.yaml")
        with libplan.load(big) as p:
            small, summary = p.reduce_shapes(mesh=True)
            with small:
                self.assertIn("mesh: dp 4->2, sp 4->2 (16->4 ranks)", summary)
                self.assertEqual(small.mesh.sizes, (2, 2))
                self.assertTrue(small.verify().equal)
            kept, summary = p.reduce_shapes()
            with kept:
                self.assertNotIn("mesh:", summary)
                self.assertEqual(kept.mesh.sizes, (4, 4))

    def test_cost(self):
        with libplan.load(MLP) as p:
            c = p.cost("h100")
            self.assertEqual(c.hardware, "h100-sxm")
            self.assertGreater(c.step_seconds, 0)
            self.assertGreater(c.memory_peak, 0)
            self.assertTrue(c.fits)
            self.assertEqual([o.name for o in c.ops],
                             ["mlp.fc1", "mlp.act", "mlp.fc2"])
            self.assertEqual(c.collectives[0].kind, "all_reduce")
            self.assertEqual(len(c.memory), 1)
            d = json.loads(c.json)
            self.assertIsInstance(d, dict)
            self.assertIn("step", c.text)
            slow = p.cost("h100", parameters={"kernel_floor": 1e-3})
            self.assertGreater(slow.step_seconds, c.step_seconds)
            with self.assertRaises(libplan.NotFoundError):
                p.cost("no-such-gpu")
            with self.assertRaises(libplan.NotFoundError):
                p.cost(parameters={"no.such": 1})
        self.assertIn("h100-sxm", libplan.cost_profiles())

    def test_drift_and_check_program(self):
        with libplan.load(MLP) as p:
            self.assertEqual(p.drift(MLP_PROGRAM), [])
            m = p.check_program(MLP_PROGRAM)
            self.assertTrue(m.ok)
            self.assertEqual(m.placements["w1"], "RS(1)")
            self.assertEqual(m.strategies["mlp.fc1"].outputs, ("S(0)S(1)",))
            edited = read(MLP_PROGRAM).replace("[64, 16]", "[64, 32]")
            self.assertNotEqual(edited, read(MLP_PROGRAM))
            with libplan.Program.parse(edited, "edited.yaml") as prog:
                m = p.check_program(prog)
                self.assertFalse(m.ok)
                self.assertTrue(any(f.object in ("w2", "mlp.fc2")
                                    for f in m.findings.errors))
                with self.assertRaises(libplan.DriftError) as cm:
                    p.check_program(prog, strict=True)
                self.assertIsInstance(cm.exception, libplan.InvalidError)
                self.assertTrue(cm.exception.findings)

    def test_diff(self):
        with libplan.load(MLP) as a, libplan.parse(
                MLP_TEXT.replace("w2: RS(0)", "w2: RR"), "b.yaml",
                os.path.dirname(MLP)) as b:
            d = a.diff(b)
            self.assertTrue(d)
            self.assertTrue(any("w2" in f.message or f.object == "w2"
                                for f in d))


class TestShardingSvg(unittest.TestCase):
    def test_picture_is_the_cli_s(self):
        with tempfile.TemporaryDirectory() as tmp, libplan.load(MLP) as p:
            svg = p.sharding_svg("w1")
            self.assertIn('data-rank="3" data-block="[0:16, 32:64]"', svg)
            out = os.path.join(tmp, "w1.svg")
            subprocess.run([TOOL, "show", "--svg", out, "--tensor", "w1",
                            MLP], check=True)
            self.assertEqual(read(out), svg)
            with self.assertRaises(libplan.NotFoundError) as cm:
                p.sharding_svg("W1")
            self.assertIn("did you mean 'w1'", str(cm.exception))


class TestSave(unittest.TestCase):
    def test_save_text_roundtrip(self):
        with tempfile.TemporaryDirectory() as tmp, libplan.load(BLOCK) as p:
            out = os.path.join(tmp, "copy.plan.yaml")
            p.save(out)
            with libplan.load(out) as q:
                self.assertEqual(q.hash(), p.hash())
            self.assertEqual(read(out), p.text())
            p.save(os.path.join(tmp, "full.yaml"), self_contained=True)
            with libplan.parse(p.text(self_contained=True)) as q:
                self.assertEqual(q.hash(), p.hash())
            with self.assertRaises(libplan.FileError) as cm:
                p.save(os.path.join(tmp, "no", "such", "dir.yaml"))
            self.assertIsInstance(cm.exception, OSError)

    def test_by_path_plan_saves_relative(self):
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(os.path.dirname(MLP), "mlp-by-path.plan.yaml")
            with libplan.load(src) as p:
                out = os.path.join(tmp, "sub", "p.yaml")
                os.makedirs(os.path.dirname(out))
                p.save(out)
                # the program is outside the new file's folder tree: refused
                # unless a root that holds both is given
                with self.assertRaises(libplan.InvalidError) as cm:
                    libplan.load(out)
                self.assertIn("leads outside the folder", str(cm.exception))
                self.assertEqual(cm.exception.file, out)
                with libplan.load(out, program_root="/") as q:
                    self.assertEqual(q.hash(), p.hash())


class TestErrors(unittest.TestCase):
    def test_broken_yaml_has_position(self):
        with self.assertRaises(libplan.ParseError) as cm:
            libplan.parse('libplan: "0.1"\nprogram: {tensors: {x: [}\n',
                          name="broken.yaml")
        e = cm.exception
        self.assertEqual(e.code, -3)
        self.assertEqual(e.status, "syntax")
        self.assertEqual((e.file, e.line), ("broken.yaml", 2))
        self.assertGreater(e.column, 0)
        self.assertTrue(str(e).startswith("broken.yaml:2:%d: " % e.column))
        self.assertIsInstance(e, libplan.PlanError)

    def test_broken_file_has_position(self):
        with tempfile.TemporaryDirectory() as tmp:
            f = os.path.join(tmp, "bad.yaml")
            with open(f, "w") as fh:
                fh.write('libplan: "0.1"\nprogram:\n  tensors:\n'
                         '    x: {shape: [2], bogus: 1}\n  ops: []\n')
            with self.assertRaises(libplan.SchemaError) as cm:
                libplan.load(f)
            self.assertEqual((cm.exception.file, cm.exception.line), (f, 4))
            self.assertIsInstance(cm.exception, libplan.ParseError)

    def test_codes(self):
        cases = [
            ('libplan: "9.0"\n', libplan.VersionError),
            ('libplan: "0.1"\nprogram:\n  tensors: {x: {shape: [2]}}\n'
             '  ops:\n    - {name: a, op: relu, in: [nope], out: y}\n',
             libplan.InvalidError),
        ]
        for text, cls in cases:
            with self.subTest(cls=cls.__name__):
                with self.assertRaises(cls) as cm:
                    libplan.parse(text, name="t.yaml")
                self.assertGreater(cm.exception.line, 0)
        with self.assertRaises(libplan.FileError) as cm:
            libplan.load("/no/such/plan.yaml")
        self.assertIsInstance(cm.exception, OSError)
        self.assertEqual(cm.exception.code, -2)
        with self.assertRaises(libplan.UsageError):
            libplan.load(None)
        with self.assertRaises(libplan.UsageError):
            libplan.load(42)

    def test_closed_handles(self):
        p = libplan.load(MLP)
        prog = p.program
        p.close()
        p.close()  # idempotent
        self.assertTrue(p.closed)
        self.assertIn("closed", repr(p))
        for call in (p.hash, p.validate, p.verify, p.cost, lambda: p.mesh,
                     lambda: p.ops, lambda: p.text(),
                     lambda: p.placement("w1"), lambda: p.placements):
            with self.assertRaises(libplan.UsageError):
                call()
        with libplan.load(MLP) as q:
            with self.assertRaises(libplan.UsageError):
                q.diff(p)
        # A view keeps its plan alive on its own.
        view = libplan.load(MLP).program
        import gc
        gc.collect()
        self.assertEqual(view.op(0).name, "mlp.fc1")
        del prog

    def test_wrong_arguments_raise_library_errors(self):
        # every call, every kind of wrong argument: a libplan.Error, never
        # another exception and never a crash
        p = libplan.load(MLP)
        self.addCleanup(p.close)
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp)
        cwd = os.getcwd()
        os.chdir(tmp)  # where save(b"\xff\xfe") writes
        self.addCleanup(os.chdir, cwd)
        bad = [None, 3.5, object(), b"\xff\xfe", "", -1, 10 ** 30, ["x"]]
        calls = {
            "load": libplan.load, "parse": libplan.parse,
            "hash": p.hash, "canonical": p.canonical, "save": p.save,
            "placement": p.placement, "strategy": p.strategy,
            "stage": p.stage, "drift": p.drift, "diff": p.diff,
            "check_program": p.check_program,
            "verify mode": lambda a: p.verify(mode=a),
            "verify seed": lambda a: p.verify(seed=a),
            "verify dtype": lambda a: p.verify(mode="float", dtype=a),
            "verify tolerances": lambda a: p.verify(mode="float",
                                                    tolerances=a),
            "cost": p.cost, "cost parameters": lambda a: p.cost(parameters=a),
            "Program.load": libplan.Program.load,
            "op": p.program.op, "tensor": p.program.tensor,
            "shape": p.program.shape,
            "Schedule.generate": lambda a: libplan.Schedule.generate(a, 2, 2,
                                                                     2),
            "Schedule.generate ranks": lambda a: libplan.Schedule.generate(
                "gpipe", a, 2, 2),
            "parse_placement": lambda a: libplan.parse_placement(
                a if not isinstance(a, list) else 0),
        }
        for name, call in calls.items():
            for a in bad:
                with self.subTest(call=name, arg=a):
                    try:
                        call(a)
                    except libplan.Error:
                        pass

    def test_context_manager_closes_on_error(self):
        try:
            with libplan.load(MLP) as p:
                raise KeyError("x")
        except KeyError:
            pass
        self.assertTrue(p.closed)

    def test_last_error_is_per_thread(self):
        results = {}

        def fail(i):
            for _ in range(50):
                try:
                    libplan.parse("libplan: \"0.1\"\n" + "x" * i + ": [\n",
                                  name="t%d.yaml" % i)
                except libplan.Error as e:
                    if e.file != "t%d.yaml" % i:
                        results[i] = e.file
                        return
            results[i] = None

        ts = [threading.Thread(target=fail, args=(i,)) for i in range(1, 5)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual(results, {i: None for i in range(1, 5)})

    def test_shared_plan_on_threads(self):
        with libplan.load(BLOCK) as p:
            p.program.signatures()  # fills the cache before sharing
            results = []

            def work():
                for _ in range(5):
                    results.append(p.verify(mode="float").equal and
                                   p.cost().step_seconds > 0 and
                                   p.check_program(p.program).ok)

            ts = [threading.Thread(target=work) for _ in range(4)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            self.assertEqual(results, [True] * 20)

    def test_no_leak_over_many_cycles(self):
        def rss():
            with open("/proc/self/statm") as f:
                return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        for _ in range(200):
            libplan.parse(MLP_TEXT, base_dir=os.path.dirname(MLP)).close()
        before = rss()
        for _ in range(3000):
            with libplan.parse(MLP_TEXT, base_dir=os.path.dirname(MLP)) as p:
                p.validate()
            libplan.parse(MLP_TEXT, base_dir=os.path.dirname(MLP))  # by GC
        grown = rss() - before
        self.assertLess(grown, 8 << 20, "RSS grew %d bytes" % grown)


class TestBuilder(unittest.TestCase):
    def test_build_and_verify(self):
        b = libplan.ProgramBuilder("mlp")
        b.input("x", [("batch", 8), 16])
        b.param("w1", [16, 64])
        b.param("w2", [64, 16])
        b.op("matmul", ["x", "w1"], "h", name="fc1")
        b.op("gelu", "h", "a", name="act", approximate="tanh")
        b.op("matmul", ["a", "w2"], "y", name="fc2")
        with b.build() as prog:
            self.assertEqual(prog.shape("y"), (8, 16))
        S, R, P = libplan.Shard, libplan.Replicate, libplan.Partial
        with libplan.make_plan(
                b, {"dp": 2, "tp": 2},
                placements={"x": "S(0)R", "w1": (R(), S(1)), "w2": "RS(0)"},
                strategies={"fc1": (["S(0)R", "RS(1)"], "S(0)S(1)"),
                            "act": (["S(0)S(1)"], "S(0)S(1)"),
                            "fc2": ([(S(0), S(1)), "RS(0)"], (S(0), P()))},
                outputs={"y": "S(0)R"}) as plan:
            self.assertTrue(plan.validate().ok)
            self.assertTrue(plan.verify().equal)
            self.assertEqual(plan.strategy("fc2").outputs, ("S(0)P(sum)",))

    def test_shard_ratios_read_back_with_weights(self):
        # format 1.1: the weights, as objects or text, reach the plan and
        # come back in the spelling a file holds; without them the plan
        # is written as 1.0
        b = libplan.ProgramBuilder("mm")
        b.input("x", [8, 16])
        b.param("w", [16, 4])
        b.op("matmul", ["x", "w"], "y", name="fc")
        S, R = libplan.Shard, libplan.Replicate
        with libplan.make_plan(
                b, {"dp": 2},
                placements={"x": (S(0, ratios=[6, 2]),), "w": "R"},
                strategies={"fc": (["S(0|3:1)", "R"], "S(0|3:1)")},
                outputs={"y": "S(0|3:1)"}) as plan:
            self.assertTrue(plan.validate().ok)
            self.assertEqual(plan.placement("x"), "S(0|3:1)")
            self.assertEqual(plan.placement_spec("x"),
                             (S(0, ratios=[3, 1]),))
            self.assertEqual(plan.strategy("fc").inputs, ("S(0|3:1)", "R"))
            self.assertTrue(plan.text().startswith('libplan: "1.1"'))
        with libplan.make_plan(
                b, {"dp": 2}, placements={"x": "S(0)"},
                strategies={"fc": (["S(0)", "R"], "S(0)")},
                outputs={"y": "S(0)"}) as plan:
            self.assertTrue(plan.text().startswith('libplan: "1.0"'))

    def test_training_program(self):
        b = libplan.ProgramBuilder("m")
        b.input("x", [4, 8])
        b.param("w", [8, 2])
        b.op("matmul", ["x", "w"], "y", name="mm")
        b.op("reduce_sum", ["y"], "l", name="sum", dims=[0, 1])
        b.loss("l")
        with b.build() as p, p.grad() as g:
            self.assertEqual(g.shape("grad/w"), (8, 2))
            self.assertEqual(g.op(0).name, "mm")
        b = libplan.ProgramBuilder()
        b.input("x", [2])
        b.op("relu", "x", "y", name="r")
        with b.build() as p, self.assertRaises(libplan.InvalidError):
            p.grad()

    def test_builder_errors_have_positions(self):
        b = libplan.ProgramBuilder()
        b.input("x", [4])
        b.op("relu", ["missing"], "y", name="r")
        with self.assertRaises(libplan.InvalidError) as cm:
            b.build()
        self.assertGreater(cm.exception.line, 0)


class TestVersions(unittest.TestCase):
    def test_versions(self):
        self.assertEqual(libplan.abi_version(), libplan.ABI_VERSION)
        self.assertRegex(libplan.__version__, r"^\d+\.\d+\.\d+$")
        self.assertTrue(os.path.exists(libplan.library_path))


if __name__ == "__main__":
    unittest.main()
