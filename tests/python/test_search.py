"""Search and replay through the plan tool."""

import os
import shutil
import tempfile
import unittest

from util import MLP, MLP_PROGRAM, libplan, python



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
        with self.assertRaises(libplan.UsageError) as cm:
            libplan.search(MLP_PROGRAM, {"dp": 2}, strategy="no-such")
        self.assertIn("no strategy 'no-such'", str(cm.exception))
        with self.assertRaises(libplan.UsageError) as cm:
            libplan.search(MLP_PROGRAM, "dp=x")
        self.assertGreater(cm.exception.line, 0)

    def test_no_tool(self):
        with tempfile.TemporaryDirectory() as tmp:
            lib = os.path.join(tmp, os.path.basename(libplan.library_path))
            shutil.copy(libplan.library_path, lib)
            r = python("import libplan\n"
                       "try:\n"
                       "    libplan.search(%r, 'dp=2')\n"
                       "except libplan.UnsupportedError as e:\n"
                       "    print('unsupported:', e)\n" % MLP_PROGRAM,
                       env={"LIBPLAN_LIBRARY": lib, "LIBPLAN_TOOL": "",
                            "PATH": tmp})
            self.assertIn("unsupported: the plan tool was not found",
                          r.stdout, r.stderr)

if __name__ == "__main__":
    unittest.main()
