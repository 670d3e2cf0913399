"""Finding the library, the ABI check, numpy-free operation, the wheel."""

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import unittest
import zipfile

from util import BINDING, MLP, PIPELINE, ROOT, libplan, python

sys.path.insert(0, BINDING)
import build_backend  # noqa: E402  (bindings/python/build_backend.py)

HAVE_CC = shutil.which(os.environ.get("CC", "cc")) is not None
try:
    import numpy  # noqa: F401
    HAVE_NUMPY = True
except ImportError:
    HAVE_NUMPY = False


class TestLibrary(unittest.TestCase):
    def test_abi_check_names_both_versions(self):
        from libplan import _lib
        with self.assertRaises(libplan.LibraryError) as cm:
            _lib.check_abi(_lib.lib, "libplan.so.test", expected=99)
        msg = str(cm.exception)
        self.assertIn("ABI version %d" % libplan.ABI_VERSION, msg)
        self.assertIn("needs ABI 99", msg)
        self.assertIsInstance(cm.exception, ImportError)

    @unittest.skipUnless(HAVE_CC,
                         "no C compiler to build a mismatched library")
    def test_import_refuses_another_abi(self):
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "fake.c")
            so = os.path.join(tmp, "libplan.so.7")
            with open(src, "w") as f:
                f.write("int plan_abi_version(void) { return 7; }\n")
            subprocess.run([os.environ.get("CC", "cc"), "-shared", "-fPIC",
                            "-o", so, src], check=True)
            r = python("import libplan", env={"LIBPLAN_LIBRARY": so})
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("LibraryError", r.stderr)
            self.assertIn("has ABI version 7", r.stderr)
            self.assertIn("needs ABI %d" % libplan.ABI_VERSION, r.stderr)

    def test_missing_library_is_a_clear_import_error(self):
        r = python("import libplan",
                   env={"LIBPLAN_LIBRARY": "/no/such/libplan.so"})
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("LIBPLAN_LIBRARY=/no/such/libplan.so cannot be loaded",
                      r.stderr)

    def test_not_libplan(self):
        libc = None
        for c in ("/lib/x86_64-linux-gnu/libm.so.6", "/lib64/libm.so.6",
                  "/usr/lib/libm.so.6"):
            if os.path.exists(c):
                libc = c
        if libc is None:
            self.skipTest("no libm.so.6 at a known path")
        r = python("import libplan", env={"LIBPLAN_LIBRARY": libc})
        self.assertIn("is not libplan", r.stderr)

    def test_found_in_tree(self):
        # libplan-search first: it is a superset of libplan-verify
        for name in ("libplan-search.so.%d" % libplan.ABI_VERSION,
                     "libplan-verify.so.%d" % libplan.ABI_VERSION):
            if os.path.exists(os.path.join(ROOT, "build", name)):
                break
        else:
            self.skipTest("no build/%s in the source tree" % name)
        env = {"LIBPLAN_LIBRARY": ""}
        r = python("import libplan; print(libplan.library_path)", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), os.path.join(ROOT, "build", name))


def _core_library():
    """build/libplan.so.N beside the libplan-verify under test."""
    return os.path.join(os.path.dirname(os.path.realpath(
        libplan.library_path)), "libplan.so.%d" % libplan.ABI_VERSION)


def _installed_copy(tmp):
    """The package copied out of the source tree (as an installer puts it,
    without a library), for the loader's turn."""
    site = os.path.join(tmp, "site")
    shutil.copytree(os.path.join(BINDING, "libplan"),
                    os.path.join(site, "libplan"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    return site


class TestDiscovery(unittest.TestCase):
    """$LIBPLAN_LIBRARY, beside the package, the tree's build/, then the
    system's loader by SONAME: libplan-verify.so.N before libplan.so.N."""

    def setUp(self):
        self.lib = os.path.realpath(libplan.library_path)
        self.core = _core_library()
        if not os.path.exists(self.core):
            self.skipTest("no %s (make all builds it)" % self.core)

    def _lookup(self, site, libdir, cwd):
        return python("import libplan; print(libplan.library_path); "
                      "print(libplan._lib.verifies)",
                      env={"LIBPLAN_LIBRARY": "", "LD_LIBRARY_PATH": libdir},
                      cwd=cwd, path=site)

    def test_loader_finds_libplan_verify_first(self):
        with tempfile.TemporaryDirectory() as tmp:
            site = _installed_copy(tmp)
            libdir = os.path.join(tmp, "lib")
            os.mkdir(libdir)
            for n, target in (("libplan-verify.so.0", self.lib),
                              ("libplan.so.0", self.core)):
                os.symlink(target, os.path.join(libdir, n))
            r = self._lookup(site, libdir, tmp)
            self.assertEqual(r.returncode, 0, r.stderr)
            path, verifies = r.stdout.split()
            self.assertEqual(path, os.path.join(libdir, "libplan-verify.so.0"))
            self.assertEqual(verifies, "True")

    def test_loader_finds_libplan_search_before_libplan_verify(self):
        search = os.path.join(os.path.dirname(self.core),
                              "libplan-search.so.%d" % libplan.ABI_VERSION)
        verify = os.path.join(os.path.dirname(self.core),
                              "libplan-verify.so.%d" % libplan.ABI_VERSION)
        if not (os.path.exists(search) and os.path.exists(verify)):
            self.skipTest("no %s and %s (make all builds them)"
                          % (search, verify))
        with tempfile.TemporaryDirectory() as tmp:
            site = _installed_copy(tmp)
            libdir = os.path.join(tmp, "lib")
            os.mkdir(libdir)
            for target in (search, verify, self.core):
                os.symlink(target, os.path.join(libdir,
                                                os.path.basename(target)))
            r = python("import libplan; print(libplan.library_path); "
                       "print(libplan._lib.searches)",
                       env={"LIBPLAN_LIBRARY": "", "LD_LIBRARY_PATH": libdir},
                       cwd=tmp, path=site)
            self.assertEqual(r.returncode, 0, r.stderr)
            path, searches = r.stdout.split()
            self.assertEqual(path, os.path.join(libdir, "libplan-search.so.0"))
            self.assertEqual(searches, "True")

    def test_loader_falls_back_to_the_core_library(self):
        with tempfile.TemporaryDirectory() as tmp:
            site = _installed_copy(tmp)
            libdir = os.path.join(tmp, "lib")
            os.mkdir(libdir)
            os.symlink(self.core, os.path.join(libdir, "libplan.so.0"))
            r = self._lookup(site, libdir, tmp)
            self.assertEqual(r.returncode, 0, r.stderr)
            path, verifies = r.stdout.split()
            self.assertEqual(path, os.path.join(libdir, "libplan.so.0"))
            self.assertEqual(verifies, "False")

    def test_beside_the_package_before_the_loader(self):
        with tempfile.TemporaryDirectory() as tmp:
            site = _installed_copy(tmp)
            # the core beside the package, libplan-verify for the loader
            shutil.copy(self.core, os.path.join(site, "libplan"))
            libdir = os.path.join(tmp, "lib")
            os.mkdir(libdir)
            os.symlink(self.lib, os.path.join(libdir, "libplan-verify.so.0"))
            r = self._lookup(site, libdir, tmp)
            self.assertEqual(r.returncode, 0, r.stderr)
            path, verifies = r.stdout.split()
            self.assertEqual(path, os.path.join(site, "libplan",
                                                "libplan.so.0"))
            self.assertEqual(verifies, "False")

    def test_nothing_found_says_where_it_looked(self):
        with tempfile.TemporaryDirectory() as tmp:
            site = _installed_copy(tmp)
            r = self._lookup(site, tmp, tmp)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("libplan not found", r.stderr)
            self.assertIn("libplan-search.so.0 (system loader", r.stderr)
            self.assertIn("libplan-verify.so.0 (system loader", r.stderr)
            self.assertIn("libplan.so.0 (system loader", r.stderr)
            # an installed copy has no source tree's build/ to look in
            self.assertNotIn("the source tree's build/", r.stderr)


class TestCoreLibrary(unittest.TestCase):
    """libplan.so.N, the core alone: everything but verification."""

    def setUp(self):
        self.core = _core_library()
        if not os.path.exists(self.core):
            self.skipTest("no %s (make all builds it)" % self.core)

    def test_loads_validates_and_refuses_verify(self):
        code = (
            "import libplan\n"
            "from libplan import _decls, _lib\n"
            "print(libplan.library_path)\n"
            "print(_lib.verifies)\n"
            "with libplan.load(%r) as p:\n"
            "    assert p.validate().ok\n"
            "    print(p.hash())\n"
            "    assert p.cost('h100').step_seconds > 0\n"
            "    small, summary = p.reduce_shapes()\n"  # the core's
            "    assert summary.startswith('reduced'), summary\n"
            "    small.close()\n"
            "    for call in (p.verify, lambda: "
            "_lib.fn.ref_run_new(None, p.program._h, "
            "_decls.RefOptions(1, 0, -1))):\n"
            "        try:\n"
            "            call()\n"
            "        except libplan.UnsupportedError as e:\n"
            "            print(e.code, e)\n"
            "        else:\n"
            "            raise AssertionError('no UnsupportedError')\n"
            % MLP)
        r = python(code, env={"LIBPLAN_LIBRARY": self.core})
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(lines[0], self.core)
        self.assertEqual(lines[1], "False")
        with libplan.load(MLP) as p:
            self.assertEqual(lines[2], p.hash())
        self.assertEqual(len(lines), 5, r.stdout)
        for line, name in zip(lines[3:], ("plan_verify", "plan_ref_run_new")):
            self.assertTrue(line.startswith(
                "-10 verification needs libplan-verify: %s is the core "
                "library, without %s()" % (self.core, name)), line)
            self.assertIn("libplan-verify.so.0", line)

    def test_schedule_and_upgrade_work(self):
        code = ("import libplan\n"
                "with libplan.load(%r) as p:\n"
                "    found, res = p.schedule().simulate()\n"
                "    assert found.ok and res['simulated'], res\n"
                "print(libplan.upgrade_text(open(%r).read()).upgraded)\n"
                % (PIPELINE, MLP))
        r = python(code, env={"LIBPLAN_LIBRARY": self.core})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "False")


class TestNumpy(unittest.TestCase):
    def test_works_without_numpy(self):
        code = (
            "import sys; sys.modules['numpy'] = None\n"
            "import libplan\n"
            "with libplan.load(%r) as p:\n"
            "    assert p.validate().ok\n"
            "    assert p.verify().equal\n"
            "    assert p.cost().step_seconds > 0\n"
            "    assert p.mesh.device_array() == [[0, 1], [2, 3]]\n"
            "print('ok')\n" % MLP)
        r = python(code)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "ok")

    def test_no_numpy_import_by_default(self):
        r = python("import sys, libplan\n"
                   "p = libplan.load(%r); p.hash(); p.placements\n"
                   "print('numpy' in sys.modules)" % MLP)
        self.assertEqual(r.stdout.strip(), "False", r.stderr)

    @unittest.skipUnless(HAVE_NUMPY, "numpy is not installed")
    def test_numpy_device_array(self):
        with libplan.load(MLP) as p:
            a = p.mesh.device_array()
            self.assertEqual(a.shape, (2, 2))
            self.assertEqual(a.tolist(), [[0, 1], [2, 3]])


class TestWheel(unittest.TestCase):
    def test_wheel_carries_the_library_and_imports(self):
        # by the name of what it is: the binding looks for that one first
        carried = "libplan-%s.so.%d" % (
            "search" if libplan._lib.searches else "verify",
            libplan.ABI_VERSION)
        with tempfile.TemporaryDirectory() as tmp:
            name = build_backend.build(tmp, library=libplan.library_path,
                                       tool=libplan.find_tool())
            whl = os.path.join(tmp, name)
            self.assertRegex(name, r"^libplan-[\d.]+-py3-none-\w+\.whl$")
            with zipfile.ZipFile(whl) as z:
                names = z.namelist()
                self.assertIn("libplan/" + carried, names)
                self.assertNotIn("libplan/libplan.so.%d"
                                 % libplan.ABI_VERSION, names)
                self.assertIn("libplan/__init__.py", names)
                info = [n for n in names if n.endswith(".dist-info/RECORD")]
                self.assertEqual(len(info), 1)
                record = z.read(info[0]).decode().splitlines()
                self.assertEqual(len(record), len(names))
                wheel = z.read(info[0].replace("RECORD", "WHEEL")).decode()
                self.assertIn("Root-Is-Purelib: false", wheel)
                self.assertIn("libplan/bin/plan", names)
                site = os.path.join(tmp, "site")
                for zi in z.infolist():  # as an installer does: modes kept
                    z.extract(zi, site)
                    mode = (zi.external_attr >> 16) & 0o7777
                    if mode:
                        os.chmod(os.path.join(site, zi.filename), mode)
            run = os.path.join(tmp, "elsewhere")
            os.mkdir(run)
            r = python("import libplan\n"
                       "print(libplan.library_path)\n"
                       "print(libplan.load(%r).hash())\n"
                       "print(libplan.find_tool())" % MLP,
                       env={"LIBPLAN_LIBRARY": "", "LIBPLAN_TOOL": "",
                            "PATH": "/usr/bin:/bin"}, cwd=run, path=site)
            self.assertEqual(r.returncode, 0, r.stderr)
            lib, h, tool = r.stdout.split()
            self.assertEqual(tool, os.path.join(site, "libplan", "bin",
                                                "plan"))
            self.assertEqual(lib, os.path.join(site, "libplan", carried))
            with libplan.load(MLP) as p:
                self.assertEqual(h, p.hash())

    def _libraries(self, whl):
        with zipfile.ZipFile(whl) as z:
            return sorted(n for n in z.namelist() if ".so" in n)

    def test_wheel_of_the_core_library_carries_it_by_its_name(self):
        core = _core_library()
        if not os.path.exists(core):
            self.skipTest("no %s (make all builds it)" % core)
        with tempfile.TemporaryDirectory() as tmp:
            name = build_backend.build(tmp, library=core, tool="none")
            self.assertEqual(self._libraries(os.path.join(tmp, name)),
                             ["libplan/libplan.so.%d" % libplan.ABI_VERSION])

    def test_wheel_without_a_library_loads_the_installed_one(self):
        with tempfile.TemporaryDirectory() as tmp:
            name = build_backend.build(tmp, library="none")
            whl = os.path.join(tmp, name)
            self.assertEqual(self._libraries(whl), [])
            site = os.path.join(tmp, "site")
            with zipfile.ZipFile(whl) as z:
                self.assertNotIn("libplan/bin/plan", z.namelist())
                z.extractall(site)
            libdir = os.path.join(tmp, "lib")
            os.mkdir(libdir)
            lib = os.path.realpath(libplan.library_path)
            os.symlink(lib, os.path.join(libdir, "libplan-verify.so.%d"
                                         % libplan.ABI_VERSION))
            r = python("import libplan; print(libplan.library_path)",
                       env={"LIBPLAN_LIBRARY": "",
                            "LD_LIBRARY_PATH": libdir}, cwd=tmp, path=site)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.strip(), os.path.join(
                libdir, "libplan-verify.so.%d" % libplan.ABI_VERSION))

    def test_backend_without_a_build_makes_a_wheel_without_a_library(self):
        with tempfile.TemporaryDirectory() as tmp:
            saved = build_backend.ROOT
            build_backend.ROOT = tmp  # a tree without build/
            try:
                env = os.environ.pop("LIBPLAN_LIBRARY", None)
                try:
                    self.assertIsNone(build_backend.find_library())
                finally:
                    if env is not None:
                        os.environ["LIBPLAN_LIBRARY"] = env
            finally:
                build_backend.ROOT = saved
            self.assertIsNone(build_backend.find_library({"library": "none"}))
            with self.assertRaises(RuntimeError):
                build_backend.find_library({"library": "/no/such/lib.so"})

    def test_sdist_builds_a_wheel(self):
        with tempfile.TemporaryDirectory() as tmp:
            name = build_backend.build_sdist(tmp)
            with tarfile.open(os.path.join(tmp, name)) as tf:
                tf.extractall(tmp)
            src = os.path.join(tmp, name[:-len(".tar.gz")])
            self.assertTrue(os.path.exists(os.path.join(src, "PKG-INFO")))
            r = python("import build_backend as b\n"
                       "print(b.build_wheel(%r))" % tmp,
                       env={"LIBPLAN_LIBRARY": libplan.library_path},
                       cwd=src, path=src)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertTrue(r.stdout.strip().endswith(".whl"), r.stdout)
            self.assertIn(build_backend.version(), r.stdout)

    def test_pip_install(self):
        r = subprocess.run([sys.executable, "-m", "pip", "--version"],
                           capture_output=True)
        if r.returncode != 0:
            self.skipTest("pip is not installed")
        with tempfile.TemporaryDirectory() as tmp:
            target = os.path.join(tmp, "target")
            r = subprocess.run(
                [sys.executable, "-m", "pip", "install", "--no-index",
                 "--disable-pip-version-check", "--no-warn-script-location",
                 "--target", target, BINDING],
                capture_output=True, text=True, timeout=120,
                env=dict(os.environ, LIBPLAN_LIBRARY=libplan.library_path,
                         PIP_ROOT_USER_ACTION="ignore"))
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            r = python("import libplan; print(libplan.library_path)",
                       env={"LIBPLAN_LIBRARY": ""}, cwd=tmp, path=target)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertTrue(r.stdout.strip().startswith(target), r.stdout)
            tool = os.path.join(target, "libplan", "bin", "plan")
            self.assertTrue(os.access(tool, os.X_OK), tool)


class TestExample(unittest.TestCase):
    def test_check_and_apply(self):
        script = os.path.join(ROOT, "examples", "python", "check_and_apply.py")
        prog = os.path.join(ROOT, "examples", "mlp-program.yaml")
        r = subprocess.run([sys.executable, script, MLP, prog],
                           capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, PYTHONPATH=BINDING))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("matches", r.stdout)
        self.assertIn("w1", r.stdout)


if __name__ == "__main__":
    unittest.main()
