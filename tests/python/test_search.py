"""Search, replay and lowering: in-process over libplan-search, through
the plan tool over the other libraries (or given a tool), the same plans
either way."""

import os
import shutil
import tempfile
import unittest

from util import MLP, MLP_PROGRAM, ROOT, TOOL, libplan, python

from libplan import _lib

# build/libplan-verify.so.N beside the library under test: no search in it
VERIFY_LIB = os.path.join(os.path.dirname(os.path.realpath(
    libplan.library_path)), "libplan-verify.so.%d" % libplan.ABI_VERSION)
TAMPER = ("mlp.act: {in: [S(0)S(1)], out: S(0)S(1)}",
          "mlp.act: {in: [RR], out: RR}")


def read(path):
    with open(path) as f:
        return f.read()


try:
    libplan.find_tool()
    HAVE_TOOL = True
except libplan.UnsupportedError:
    HAVE_TOOL = False


@unittest.skipUnless(HAVE_TOOL, "the plan tool was not found")
class TestSearch(unittest.TestCase):
    def test_search_and_replay(self):
        with libplan.search(MLP_PROGRAM, {"dp": 2, "tp": 2},
                            strategy="dp") as p:
            self.assertTrue(p.validate().ok)
            self.assertTrue(p.verify().equal)
            same, msg = p.replay()
            self.assertTrue(same, msg)
            self.assertIn(p.hash(), msg)
            with tempfile.TemporaryDirectory() as tmp:
                out = os.path.join(tmp, "found.plan.yaml")
                p.save(out)
                self.assertTrue(libplan.replay(out)[0])

    def test_replay_trusts_nothing_in_the_file(self):
        # a file strategy, self-contained: its script replays only when
        # trusted (in the sandbox) or when the file is named, in-process
        # and through the tool alike
        script = ("local util = ...\n"
                  "return function(p, opts)\n"
                  "  local placed = {}\n"
                  "  for _, name in ipairs(p:ops()) do\n"
                  "    local op = p:op(name)\n"
                  "    if not p:pinned(name) then\n"
                  "      p:apply(name, p:strategies(name)[1])\n"
                  "    end\n"
                  "    util.record(p, op, p:strategy(name), placed)\n"
                  "  end\n"
                  "  return placed\n"
                  "end\n")
        with tempfile.TemporaryDirectory() as tmp:
            lua = os.path.join(tmp, "all-r.lua")
            with open(lua, "w") as f:
                f.write(script)
            with libplan.search(MLP_PROGRAM, "dp=2", strategy=lua,
                                self_contained=True) as p:
                for tool in (None, TOOL):
                    with self.assertRaises(libplan.UsageError) as cm:
                        p.replay(tool=tool)
                    self.assertIn("--trust-embedded-script", str(cm.exception))
                    same, msg = p.replay(tool=tool, trust_embedded_script=True)
                    self.assertTrue(same, msg)
                    same, msg = p.replay(tool=tool, strategy=lua)
                    self.assertTrue(same, msg)
                with open(lua, "a") as f:
                    f.write("-- edited\n")
                with self.assertRaises(libplan.UsageError) as cm:
                    p.replay(strategy=lua)
                self.assertIn("is not the script", str(cm.exception))
                with self.assertRaises(libplan.UsageError):
                    p.replay(strategy=lua, trust_embedded_script=True)

    def test_search_from_memory(self):
        with libplan.load_program(MLP_PROGRAM) as prog, \
                libplan.search(prog, "dp=2,tp=2", strategy="megatron") as p, \
                libplan.load(MLP) as want:
            self.assertEqual(p.strategies, want.strategies)
            self.assertEqual(p.placements, want.placements)

    def test_search_again(self):
        with libplan.load(MLP) as p, libplan.search(p, strategy="greedy") as q:
            self.assertEqual(q.mesh, p.mesh)
            self.assertTrue(q.validate().ok)

    def test_lower(self):
        with libplan.load(MLP) as p:
            text = p.lower()
            self.assertIn("all_reduce", text)
            self.assertEqual(libplan.lower(MLP), text)
        bug = read(MLP).replace("out: S(0)P(sum)}", "out: S(0)R}")
        with libplan.parse(bug, "bug.yaml", os.path.dirname(MLP)) as p:
            with self.assertRaises(libplan.InvalidError):
                p.lower()

    def test_failures(self):
        for tool in (None, TOOL):  # in-process, and the tool's
            with self.assertRaises(libplan.UsageError) as cm:
                libplan.search(MLP_PROGRAM, {"dp": 2}, strategy="no-such",
                               tool=tool)
            self.assertIn("no strategy 'no-such'", str(cm.exception))
            self.assertIsInstance(cm.exception, libplan.NotFoundError)
        with self.assertRaises(libplan.UsageError) as cm:
            libplan.search(MLP_PROGRAM, "dp=x")
        self.assertGreater(cm.exception.line, 0)

    def test_no_tool(self):
        # over a library without search: search runs the tool
        if not os.path.exists(VERIFY_LIB):
            self.skipTest("no %s (make all builds it)" % VERIFY_LIB)
        with tempfile.TemporaryDirectory() as tmp:
            lib = os.path.join(tmp, os.path.basename(VERIFY_LIB))
            shutil.copy(VERIFY_LIB, lib)
            r = python("import libplan\n"
                       "try:\n"
                       "    libplan.search(%r, 'dp=2')\n"
                       "except libplan.UnsupportedError as e:\n"
                       "    print('unsupported:', e)\n" % MLP_PROGRAM,
                       env={"LIBPLAN_LIBRARY": lib, "LIBPLAN_TOOL": "",
                            "PATH": tmp})
            self.assertIn("unsupported: the plan tool was not found",
                          r.stdout, r.stderr)


@unittest.skipUnless(_lib.searches, "the library is not libplan-search")
@unittest.skipUnless(os.access(TOOL, os.X_OK), "the plan tool was not found")
class TestInProcess(unittest.TestCase):
    """Over libplan-search: the C API, compared with the tool."""

    def test_same_plan_as_the_tool(self):
        for strategy in ("megatron", "greedy"):
            with libplan.search(MLP_PROGRAM, "dp=2,tp=2",
                                strategy=strategy) as p, \
                    libplan.search(MLP_PROGRAM, "dp=2,tp=2", strategy=strategy,
                                   tool=TOOL) as q:
                self.assertEqual(p.hash(), q.hash(), strategy)
                self.assertEqual(p.hash("provenance"), q.hash("provenance"))
                self.assertTrue(p.validate().ok)
            # from memory too, and as `plan search -o` writes it
            with libplan.load_program(MLP_PROGRAM) as prog, \
                    libplan.search(prog, "dp=2,tp=2", strategy=strategy) as m, \
                    tempfile.TemporaryDirectory() as tmp:
                out = os.path.join(tmp, "found.yaml")
                r = python_tool(["search", MLP_PROGRAM, "--mesh", "dp=2,tp=2",
                                 "--strategy", strategy, "-o", out])
                self.assertEqual(r.returncode, 0, r.stderr)
                # its program is the repository's, outside tmp
                with libplan.load(out, program_root=ROOT) as f:
                    self.assertEqual(m.hash(), f.hash(), strategy)

    def test_replay_same_and_tampered(self):
        with libplan.search(MLP_PROGRAM, "dp=2,tp=2",
                            strategy="megatron") as p:
            same, msg = libplan.replay(p)
            self.assertTrue(same, msg)
            self.assertIn(p.hash(), msg)
            self.assertIn("(strategy megatron)", msg)
            self.assertEqual(libplan.replay(p, tool=TOOL)[0], True)
            text = p.text(self_contained=True)
        self.assertIn(TAMPER[0], text)
        with libplan.parse(text.replace(*TAMPER), "tampered.yaml") as t:
            same, msg = libplan.replay(t)
            self.assertFalse(same)
            head, *diff = msg.splitlines()
            self.assertTrue(head.startswith("tampered.yaml: replay differs: "
                                            "recorded %s, replayed "
                                            % t.hash()), head)
            self.assertTrue(diff and all(l.startswith("  ") for l in diff),
                            msg)
            self.assertIn("mlp.act", msg)
            same, tool_msg = libplan.replay(t, tool=TOOL)
            self.assertFalse(same)
            self.assertEqual(diff, tool_msg.splitlines()[1:])
        with self.assertRaises(libplan.NotFoundError) as cm:
            libplan.replay(os.path.join(os.path.dirname(MLP),
                                        "moe-experts.plan.yaml"))  # no search
        self.assertIsInstance(cm.exception, libplan.UsageError)
        self.assertIn("no search", str(cm.exception))

    def test_joint_search_same_as_the_tool(self):
        """search(devices=, hosts=): the joint search, in-process and
        through the tool alike."""
        t4 = os.path.join(ROOT, "examples", "transformer4-1f1b.plan.yaml")
        with libplan.search(t4, devices=8, hosts=2) as p, \
                libplan.search(t4, devices=8, hosts=2, tool=TOOL) as q:
            self.assertEqual(p.hash(), q.hash())
            self.assertEqual(len(p.mesh.devices), 8)
            self.assertTrue(p.validate().ok)
        with self.assertRaises(libplan.UsageError) as cm:
            libplan.search(t4, devices=8, hosts=3)
        self.assertIn("do not split over 3 hosts", str(cm.exception))
        with self.assertRaises(libplan.UsageError):
            libplan.search(t4, hosts=2)

    def test_strategy_file_that_raises(self):
        with tempfile.TemporaryDirectory() as tmp:
            lua = os.path.join(tmp, "fails.lua")
            with open(lua, "w") as f:
                f.write("return function(p, opts)\n"
                        "  error(\"gave up\")\n"
                        "end\n")
            with self.assertRaises(libplan.InvalidError) as cm:
                libplan.search(MLP_PROGRAM, "dp=2", strategy=lua, tool=TOOL)
            self.assertIn("gave up", str(cm.exception))
            # in-process: the file and line, and the whole story
            with self.assertRaises(libplan.InvalidError) as cm:
                libplan.search(MLP_PROGRAM, "dp=2", strategy=lua)
            e = cm.exception
            self.assertEqual((e.file, e.line), (lua, 2))
            self.assertEqual(e.message, "search failed: gave up")
            self.assertTrue(str(e).startswith("%s:2" % lua), str(e))
            self.assertIn("gave up\nstack traceback:", e.details)
            broken = os.path.join(tmp, "broken.lua")
            with open(broken, "w") as f:
                f.write("return function(p, opts\n")
            with self.assertRaises(libplan.ParseError) as cm:
                libplan.search(MLP_PROGRAM, "dp=2", strategy=broken)
            self.assertIsInstance(cm.exception, libplan.UsageError)
            self.assertEqual((cm.exception.file, cm.exception.line),
                             (broken, 2))

    def test_lower_same_as_the_tool(self):
        with libplan.load(MLP) as p:
            text = p.lower()
            self.assertEqual(text, p.lower(tool=TOOL))
            self.assertEqual(libplan.lower(MLP), text)
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "mlp.lowered.yaml")
            r = python_tool(["lower", "-o", out, MLP])
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(out) as f:
                self.assertEqual(f.read(), text)
            # and the same lowered hash, of the file and of the text
            again = os.path.join(tmp, "again.lowered.yaml")
            with open(again, "w") as f:
                f.write(text)
            h = [python_tool(["hash", f]) for f in (out, again)]
            self.assertEqual(h[0].returncode, 0, h[0].stderr)
            self.assertTrue(h[0].stdout.startswith("xxh3:"), h[0].stdout)
            self.assertEqual(h[0].stdout, h[1].stdout)
        bug = read(MLP).replace("out: S(0)P(sum)}", "out: S(0)R}")
        with libplan.parse(bug, "bug.yaml", os.path.dirname(MLP)) as p:
            with self.assertRaises(libplan.InvalidError) as cm:
                p.lower()
            self.assertEqual(cm.exception.file, "bug.yaml")
            self.assertGreater(cm.exception.line, 0)

    def test_no_temp_files(self):
        # in a fresh interpreter whose temp folder is new, and where making
        # a temp file fails: search, replay and lower leave nothing there
        with tempfile.TemporaryDirectory() as tmp:
            code = (
                "import tempfile, libplan\n"
                "assert tempfile.gettempdir() == %r\n"
                "def no(*a, **k): raise AssertionError('a temp file')\n"
                "for n in ('mkstemp', 'mkdtemp', 'NamedTemporaryFile',\n"
                "          'TemporaryDirectory', 'TemporaryFile'):\n"
                "    setattr(tempfile, n, no)\n"
                "prog = libplan.load_program(%r)\n"
                "p = libplan.search(prog, 'dp=2,tp=2', strategy='dp')\n"
                "assert libplan.replay(p)[0]\n"
                "q = libplan.search(%r, 'dp=2,tp=2', strategy='megatron')\n"
                "assert 'all_reduce' in q.lower()\n"
                "print('ok', p.hash())\n" % (tmp, MLP_PROGRAM, MLP_PROGRAM))
            r = python(code, env={"TMPDIR": tmp,
                                  "LIBPLAN_LIBRARY": libplan.library_path,
                                  "LIBPLAN_TOOL": "/nonexistent"})
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertTrue(r.stdout.startswith("ok xxh3:"), r.stdout)
            self.assertEqual(os.listdir(tmp), [])

    @unittest.skipUnless(os.path.exists(VERIFY_LIB),
                         "no libplan-verify to fall back over")
    def test_fallback_over_libplan_verify(self):
        code = (
            "import libplan\n"
            "from libplan import _lib\n"
            "assert _lib.verifies and not _lib.searches\n"
            "with libplan.search(%r, 'dp=2,tp=2', strategy='megatron') as p:\n"
            "    print(p.hash())\n"
            "    print(libplan.replay(p)[0])\n"
            "    print(len(p.lower()))\n" % MLP_PROGRAM)
        r = python(code, env={"LIBPLAN_LIBRARY": VERIFY_LIB,
                              "LIBPLAN_TOOL": TOOL})
        self.assertEqual(r.returncode, 0, r.stderr)
        h, same, n = r.stdout.split()
        with libplan.search(MLP_PROGRAM, "dp=2,tp=2",
                            strategy="megatron") as p:
            self.assertEqual(h, p.hash())
            self.assertEqual(same, "True")
            self.assertEqual(int(n), len(p.lower()))


def python_tool(args):
    """Runs the plan tool; the CompletedProcess (text)."""
    import subprocess
    return subprocess.run([TOOL] + args, capture_output=True, text=True,
                          timeout=120)


if __name__ == "__main__":
    unittest.main()
