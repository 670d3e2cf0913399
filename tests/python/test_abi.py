"""The checks at import: every declared function is in the library (verify.h's
only in libplan-verify), and every mirrored struct has the library's size."""

import ctypes
import importlib
import inspect
import os
import re
import shutil
import subprocess
import tempfile
import types
import unittest

from util import BINDING, ROOT, libplan, python

from libplan import _decls, _lib

HAVE_CC = shutil.which(os.environ.get("CC", "cc")) is not None
INCLUDE = os.path.join(ROOT, "libplan", "include", "libplan")


class FakeLib:
    """A library whose attribute lookup fails for the names in `lacks`, as
    ctypes.CDLL's does for a symbol it does not define."""

    def __init__(self, lacks=()):
        self.lacks = set(lacks)

    def __getattr__(self, name):
        if name in self.lacks:
            raise AttributeError(name)
        return types.SimpleNamespace()  # takes restype and argtypes


def declared(headers):
    """The PLAN_API function names the headers declare."""
    out = set()
    for h in headers:
        with open(os.path.join(INCLUDE, h)) as f:
            out |= set(re.findall(r"(?m)^PLAN_API [^(]*?[\s*](plan_\w+)\(",
                                  f.read()))
    return out


class TestFunctions(unittest.TestCase):
    def test_declarations_match_the_headers(self):
        core = [h for h in os.listdir(INCLUDE)
                if h.endswith(".h") and h not in ("verify.h", "search.h")]
        self.assertEqual(set(_decls.PROTOS) - declared(core), set())
        self.assertEqual(set(_decls.VERIFY_PROTOS) - declared(["verify.h"]),
                         set())
        self.assertEqual(set(_decls.SEARCH_PROTOS) - declared(["search.h"]),
                         set())

    def test_a_missing_function_fails_naming_it_and_the_library(self):
        with self.assertRaises(libplan.LibraryError) as cm:
            _lib.bind_functions(FakeLib({"plan_program_op_find"}),
                                "/x/libplan-verify.so.0")
        msg = str(cm.exception)
        self.assertIsInstance(cm.exception, ImportError)
        self.assertIn("/x/libplan-verify.so.0 lacks a function", msg)
        self.assertIn("plan_program_op_find", msg)

    def test_every_missing_function_is_named(self):
        with self.assertRaises(libplan.LibraryError) as cm:
            _lib.bind_functions(FakeLib({"plan_diff", "plan_cost_plan"}),
                                "lib.so")
        msg = str(cm.exception)
        self.assertIn("lacks 2 functions", msg)
        self.assertIn("plan_diff, plan_cost_plan", msg)  # header order

    def test_verify_functions_are_required_in_libplan_verify(self):
        with self.assertRaises(libplan.LibraryError) as cm:
            _lib.bind_functions(FakeLib({"plan_ref_run_exec"}), "v.so")
        self.assertIn("plan_ref_run_exec", str(cm.exception))

    def test_the_core_library_may_lack_verify_functions(self):
        lacks = set(_decls.VERIFY_PROTOS)
        self.assertFalse(_lib.has_verify(FakeLib(lacks)))
        fn = _lib.bind_functions(FakeLib(lacks), "/x/libplan.so.0")
        self.assertTrue(hasattr(fn, "program_op_find"))
        for name in _decls.VERIFY_PROTOS:
            with self.assertRaises(libplan.UnsupportedError) as cm:
                getattr(fn, name[len("plan_"):])()
            msg = str(cm.exception)
            self.assertIn("verification needs libplan-verify", msg)
            self.assertIn("/x/libplan.so.0", msg)
            self.assertIn(name, msg)
        # but not the core's
        with self.assertRaises(libplan.LibraryError) as cm:
            _lib.bind_functions(FakeLib(lacks | {"plan_validate"}), "c.so")
        self.assertIn("plan_validate", str(cm.exception))
        self.assertNotIn("plan_verify", str(cm.exception))

    def test_search_functions_are_required_in_libplan_search(self):
        with self.assertRaises(libplan.LibraryError) as cm:
            _lib.bind_functions(FakeLib({"plan_replay_buffer"}), "s.so")
        self.assertIn("plan_replay_buffer", str(cm.exception))

    def test_a_library_without_search_may_lack_its_functions(self):
        lacks = set(_decls.SEARCH_PROTOS)
        self.assertFalse(_lib.has_search(FakeLib(lacks)))
        self.assertTrue(_lib.has_verify(FakeLib(lacks)))
        fn = _lib.bind_functions(FakeLib(lacks), "/x/libplan-verify.so.0")
        for name in _decls.SEARCH_PROTOS:
            with self.assertRaises(libplan.UnsupportedError) as cm:
                getattr(fn, name[len("plan_"):])()
            self.assertIn("in-process search needs libplan-search: "
                          "/x/libplan-verify.so.0 has no %s()" % name,
                          str(cm.exception))
        # and the core lacks both
        lacks |= set(_decls.VERIFY_PROTOS)
        _lib.bind_functions(FakeLib(lacks), "/x/libplan.so.0")

    def test_the_loaded_library_has_every_function(self):
        self.assertTrue(_lib.verifies)  # make check-python: libplan-search
        self.assertTrue(_lib.searches)
        for name in list(_decls.PROTOS) + list(_decls.VERIFY_PROTOS) + \
                list(_decls.SEARCH_PROTOS):
            f = getattr(_lib.fn, name[len("plan_"):])
            self.assertIsInstance(f, ctypes._CFuncPtr, name)

    @unittest.skipUnless(HAVE_CC, "no C compiler to build a partial library")
    def test_import_refuses_a_verify_library_without_all_of_verify_h(self):
        # plan_verify alone over the core: "libplan-verify" by the test, but
        # without the rest of verify.h
        core = os.path.join(os.path.dirname(os.path.realpath(
            libplan.library_path)), "libplan.so.%d" % libplan.ABI_VERSION)
        if not os.path.exists(core):
            self.skipTest("no %s (make all builds it)" % core)
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "shim.c")
            so = os.path.join(tmp, "libplan-verify.so.0")
            with open(src, "w") as f:
                f.write("int plan_verify(void);\n"
                        "int plan_verify(void) { return -10; }\n")
            subprocess.run([os.environ.get("CC", "cc"), "-shared", "-fPIC",
                            "-o", so, src, "-Wl,--no-as-needed", core,
                            "-Wl,-rpath," + os.path.dirname(core)],
                           check=True)
            r = python("import libplan", env={"LIBPLAN_LIBRARY": so})
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("LibraryError: %s lacks" % so, r.stderr)
            self.assertIn("plan_verify_report_free", r.stderr)
            self.assertIn("plan_ref_run_new", r.stderr)
            self.assertNotIn("plan_validate", r.stderr)


def package_structures():
    """Every ctypes.Structure class defined in the package's modules, and
    the modules other than _decls whose source subclasses one."""
    found, elsewhere = set(), []
    pkg = os.path.join(BINDING, "libplan")
    for f in sorted(os.listdir(pkg)):
        if not f.endswith(".py"):
            continue
        with open(os.path.join(pkg, f)) as fh:
            if f != "_decls.py" and re.search(r"Structure\s*\)", fh.read()):
                elsewhere.append(f)
        name = "libplan" if f == "__init__.py" else "libplan." + f[:-3]
        mod = importlib.import_module(name)
        for _, v in inspect.getmembers(mod, inspect.isclass):
            if issubclass(v, ctypes.Structure) and v.__module__ == name:
                found.add(v)
    return found, elsewhere


class TestStructs(unittest.TestCase):
    def test_every_structure_is_checked(self):
        found, elsewhere = package_structures()
        self.assertEqual(elsewhere, [])
        self.assertGreaterEqual(len(found), 16)
        self.assertEqual(found - set(_decls.STRUCTS), set())
        names = [s.c_name for s in _decls.STRUCTS]
        self.assertEqual(len(names), len(set(names)))

    def test_sizes_match_the_library(self):
        _lib.check_structs(_lib.fn.abi_sizeof, _lib.path)
        for st in _decls.STRUCTS:
            self.assertEqual(_lib.fn.abi_sizeof(st.c_name.encode()),
                             ctypes.sizeof(st), st.c_name)
        self.assertEqual(_lib.fn.abi_sizeof(b"plan_plan"), 0)
        self.assertEqual(_lib.fn.abi_sizeof(None), 0)

    def test_an_extra_field_fails_naming_struct_sizes_and_library(self):
        class Hash(ctypes.Structure):  # plan_hash with a field too many
            c_name = "plan_hash"
            _fields_ = _decls.Hash._fields_ + [("extra", ctypes.c_uint64)]

        with self.assertRaises(libplan.LibraryError) as cm:
            _lib.check_structs(_lib.fn.abi_sizeof, "/x/libplan.so.0",
                               [_decls.Error, Hash])
        msg = str(cm.exception)
        self.assertIsInstance(cm.exception, ImportError)
        self.assertIn("/x/libplan.so.0", msg)
        self.assertIn("plan_hash: 16 bytes in the library, 24 in the "
                      "binding's Hash", msg)
        self.assertNotIn("plan_error", msg)

    def test_a_struct_the_library_does_not_know(self):
        with self.assertRaises(libplan.LibraryError) as cm:
            _lib.check_structs(lambda name: 0, "old.so", [_decls.RefOptions])
        msg = str(cm.exception)
        self.assertIn("old.so", msg)
        self.assertIn("plan_ref_options: the library does not know it "
                      "(plan_abi_sizeof says 0), the binding's RefOptions "
                      "has %d bytes" % ctypes.sizeof(_decls.RefOptions), msg)

    def test_import_fails_on_a_mismatch(self):
        # _decls as the package would have it with a grown plan_load_options,
        # in place before `import libplan` loads the library
        code = (
            "import ctypes, importlib.util, sys\n"
            "spec = importlib.util.spec_from_file_location(\n"
            "    'libplan._decls', %r)\n"
            "d = importlib.util.module_from_spec(spec)\n"
            "spec.loader.exec_module(d)\n"
            "class LoadOptions(ctypes.Structure):\n"
            "    c_name = 'plan_load_options'\n"
            "    _fields_ = d.LoadOptions._fields_ + [('more', ctypes.c_int)]"
            "\n"
            "d.STRUCTS = tuple(LoadOptions if s is d.LoadOptions else s\n"
            "                  for s in d.STRUCTS)\n"
            "sys.modules['libplan._decls'] = d\n"
            "import libplan\n"
            % os.path.join(BINDING, "libplan", "_decls.py"))
        r = python(code, env={"LIBPLAN_LIBRARY": libplan.library_path})
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("LibraryError: %s and this libplan binding disagree"
                      % libplan.library_path, r.stderr)
        self.assertIn("plan_load_options: 8 bytes in the library, 12 in the "
                      "binding's LoadOptions", r.stderr)


if __name__ == "__main__":
    unittest.main()
