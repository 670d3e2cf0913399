"""plan upgrade from Python: libplan.upgrade_text and libplan.upgrade give
what the tool gives, keep every part's meaning, leave current files alone,
refuse newer majors with a position, and write atomically."""

import os
import shutil
import subprocess
import tempfile
import unittest

from util import ROOT, TOOL, libplan

VECTORS = os.path.join(ROOT, "spec", "vectors", "valid")
OLD_PLAN = os.path.join(VECTORS, "plan-base.yaml")         # format 0.1
OLD_BYPATH = os.path.join(VECTORS, "plan-bypath.yaml")     # program by path
CURRENT = os.path.join(VECTORS, "v1-plan-base.yaml")       # format 1.0


def read(path):
    with open(path) as f:
        return f.read()


class TestUpgradeText(unittest.TestCase):
    def test_upgraded_and_checked(self):
        r = libplan.upgrade_text(read(OLD_PLAN), "plan-base.yaml")
        self.assertTrue(r.upgraded)
        self.assertEqual(r.from_version, "0.1")
        self.assertTrue(r.layout_kept)
        self.assertEqual(set(r.before), {"plan", "program", "mesh"})
        # the new text is current and hashes as reported
        self.assertIn('libplan: "1.0"', r.text)
        self.assertIn("x-upgraded-from:", r.text)
        with libplan.parse(r.text, "up.yaml") as p:
            for part, h in r.after.items():
                self.assertEqual(p.hash(part), h, part)
            self.assertTrue(p.validate().ok)
        with libplan.load(OLD_PLAN) as p:
            for part, h in r.before.items():
                self.assertEqual(p.hash(part), h, part)
        # the version changes every hash: the encoding carries it
        self.assertNotEqual(r.before["plan"], r.after["plan"])

    def test_same_as_the_tool(self):
        if not os.access(TOOL, os.X_OK):
            self.skipTest("no plan tool at %s" % TOOL)
        out = subprocess.run([TOOL, "upgrade", OLD_PLAN], capture_output=True,
                             text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        r = libplan.upgrade_text(read(OLD_PLAN), OLD_PLAN)
        self.assertEqual(r.text, out.stdout)

    def test_current_file_left_alone(self):
        r = libplan.upgrade_text(read(CURRENT), "v1.yaml")
        self.assertFalse(r.upgraded)
        self.assertIsNone(r.text)
        self.assertEqual(r.from_version, "1.0")

    def test_newer_major_refused_with_position(self):
        text = read(OLD_PLAN).replace('libplan: "0.1"', 'libplan: "2.0"')
        with self.assertRaises(libplan.VersionError) as e:
            libplan.upgrade_text(text, "new.yaml")
        self.assertEqual(e.exception.file, "new.yaml")
        self.assertGreater(e.exception.line, 0)


class TestUpgradeFile(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="libplan-upgrade-")

    def tearDown(self):
        shutil.rmtree(self.dir)

    def copy(self, src):
        dst = os.path.join(self.dir, os.path.basename(src))
        shutil.copy(src, dst)
        return dst

    def test_in_place_and_out(self):
        path = self.copy(OLD_PLAN)
        out = os.path.join(self.dir, "out.yaml")
        r = libplan.upgrade(path, out=out)
        self.assertEqual(read(out), r.text)
        self.assertEqual(read(path), read(OLD_PLAN))  # untouched
        r2 = libplan.upgrade(path, in_place=True)
        self.assertEqual(read(path), r2.text)
        # again: current now, nothing written
        before = read(path)
        self.assertFalse(libplan.upgrade(path, in_place=True).upgraded)
        self.assertEqual(read(path), before)
        self.assertEqual(sorted(os.listdir(self.dir)),
                         ["out.yaml", "plan-base.yaml"])  # no temporaries

    def test_failure_writes_nothing(self):
        path = os.path.join(self.dir, "bad.yaml")
        with open(path, "w") as f:
            f.write(read(OLD_PLAN).replace("mesh:", "mesh: [", 1))
        before = read(path)
        with self.assertRaises(libplan.Error):
            libplan.upgrade(path, in_place=True)
        self.assertEqual(read(path), before)
        self.assertEqual(os.listdir(self.dir), ["bad.yaml"])

    def test_program_by_path_stays_in_its_folder(self):
        plan = self.copy(OLD_BYPATH)
        self.copy(os.path.join(VECTORS, "program-mlp.yaml"))
        r = libplan.upgrade(plan)
        self.assertTrue(r.program_by_path)
        other = tempfile.mkdtemp(prefix="libplan-upgrade-other-")
        try:
            with self.assertRaises(libplan.UsageError):
                libplan.upgrade(plan, out=os.path.join(other, "x.yaml"))
            self.assertEqual(os.listdir(other), [])
        finally:
            shutil.rmtree(other)
        libplan.upgrade(plan, in_place=True)
        with libplan.load(plan) as p:
            self.assertTrue(p.validate().ok)


if __name__ == "__main__":
    unittest.main()
