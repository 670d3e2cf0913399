"""Finding the library, and the checks that it is the one this binding
was written for, at import.

There are three libraries: libplan-search.so.N (everything: the core,
verification and the in-process search and replay of libplan/search.h),
libplan-verify.so.N (the core plus verification, the reference run and
shape reduction: libplan/verify.h) and libplan.so.N (the core alone). Each
carries its own copy of the core and its own last error, so one process
loads one of them, the first found of:
  1. $LIBPLAN_LIBRARY (a path): an explicit choice wins, so a debug build
     can be tried under an installed wheel;
  2. beside this package: libplan-search.so.N, libplan-verify.so.N (what a
     wheel carries), then libplan.so.N;
  3. when this package sits in the source tree (bindings/python/libplan),
     build/ of that tree, in the same order, for PYTHONPATH=bindings/python;
  4. the system's loader by SONAME, in the same order (its cache,
     LD_LIBRARY_PATH: a libplan of `make install`).

Then, before anything is called, each of these raises LibraryError (an
ImportError) naming the library: another ABI version; a function the
binding declares (_decls) that the library lacks (verify.h's only in a
library with plan_verify, search.h's only in one with plan_search: the
others legitimately lack them; calling a verify.h one then raises
UnsupportedError, and search runs the plan tool); a struct the binding
mirrors whose size differs from the library's (plan_abi_sizeof).
"""

import ctypes
import ctypes.util
import os

from . import _decls

# The ABI this binding was written against: PLAN_ABI_VERSION in common.h,
# also the SONAME suffix (libplan.so.0).
ABI_VERSION = 0

SEARCH_SONAME = "libplan-search.so.%d" % ABI_VERSION
VERIFY_SONAME = "libplan-verify.so.%d" % ABI_VERSION
CORE_SONAME = "libplan.so.%d" % ABI_VERSION
_SONAMES = (SEARCH_SONAME, VERIFY_SONAME, CORE_SONAME)
_HERE = os.path.dirname(os.path.abspath(__file__))


class LibraryError(ImportError):
    """libplan could not be found or loaded, or it is not the library this
    binding was written for (ABI, functions, struct layouts)."""


def _source_tree():
    """The source tree this package sits in, or None (an installed copy)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(_HERE)))
    if os.path.isfile(os.path.join(root, "libplan", "include", "libplan",
                                   "common.h")):
        return root
    return None


def _candidates():
    env = os.environ.get("LIBPLAN_LIBRARY")
    if env:
        return [("$LIBPLAN_LIBRARY", env)], True
    out = [("beside the package", os.path.join(_HERE, n)) for n in _SONAMES]
    root = _source_tree()
    if root:
        out += [("the source tree's build/", os.path.join(root, "build", n))
                for n in _SONAMES]
    return out, False


def _loaded_path(lib, name):
    """The file the loader opened for `name` (glibc's dlinfo), else name."""
    try:
        dlinfo = ctypes.CDLL(None).dlinfo
        dlinfo.restype = ctypes.c_int
        dlinfo.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
        lm = ctypes.c_void_p()
        if dlinfo(lib._handle, 2, ctypes.byref(lm)) != 0 or not lm.value:
            return name  # 2: RTLD_DI_LINKMAP; l_name follows l_addr
        full = ctypes.cast(lm, ctypes.POINTER(ctypes.c_char_p))[1]
        return os.fsdecode(full) if full else name
    except (AttributeError, OSError, ValueError):
        return name


def check_abi(lib, path, expected=ABI_VERSION):
    """Raises LibraryError unless `lib` reports the ABI `expected`."""
    try:
        fn = lib.plan_abi_version
    except AttributeError:
        raise LibraryError("%s is not libplan: it has no plan_abi_version()"
                           % path) from None
    fn.restype = ctypes.c_int
    fn.argtypes = []
    got = fn()
    if got != expected:
        raise LibraryError(
            "%s has ABI version %d, but this libplan binding needs ABI %d "
            "(libplan.so.%d): install the binding that matches the library, "
            "or point LIBPLAN_LIBRARY at a matching libplan.so"
            % (path, got, expected, expected))


def load_library():
    """Finds and loads libplan; returns (CDLL, path) after check_abi."""
    cands, explicit = _candidates()
    tried = []
    for where, path in cands:
        if not explicit and not os.path.exists(path):
            tried.append("%s (%s: not there)" % (path, where))
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            if explicit:
                raise LibraryError("LIBPLAN_LIBRARY=%s cannot be loaded: %s"
                                   % (path, e)) from None
            tried.append("%s (%s: %s)" % (path, where, e))
            continue
        check_abi(lib, path)
        return lib, path
    # By SONAME, then whatever libplan the loader's cache knows (another
    # ABI's, as it cannot be ours: check_abi then says which it is).
    names = list(_SONAMES) + [n for n in (ctypes.util.find_library(x) for x
                                          in ("plan-search", "plan-verify",
                                              "plan"))
                              if n and n not in _SONAMES]
    for name in names:
        try:
            lib = ctypes.CDLL(name)
        except OSError as e:
            tried.append("%s (system loader: %s)" % (name, e))
            continue
        path = _loaded_path(lib, name)
        check_abi(lib, path)
        return lib, path
    raise LibraryError(
        "libplan not found; tried:\n  " + "\n  ".join(tried) +
        "\nBuild it with `make` in the source tree, install it with "
        "`make install`, or set LIBPLAN_LIBRARY to its path.")


class _Funcs:
    """The library's functions by name without the plan_ prefix."""


def has_verify(lib):
    """Whether `lib` is libplan-verify (it has plan_verify)."""
    try:
        getattr(lib, "plan_verify")
    except AttributeError:
        return False
    return True


def has_search(lib):
    """Whether `lib` is libplan-search (it has plan_search)."""
    try:
        getattr(lib, "plan_search")
    except AttributeError:
        return False
    return True


def _needs_search(name, path):
    """A stand-in for search.h's `name` in a library without it (_search
    runs the plan tool instead, so only a direct call meets this)."""
    def call(*args):
        from .errors import UnsupportedError
        raise UnsupportedError(
            "in-process search needs libplan-search: %s has no %s(); point "
            "LIBPLAN_LIBRARY at %s, or let search and replay run the plan "
            "tool" % (path, name, SEARCH_SONAME), -10)
    call.__name__ = name
    return call


def _needs_verify(name, path):
    """A stand-in for verify.h's `name` in the core library."""
    def call(*args):
        from .errors import UnsupportedError
        raise UnsupportedError(
            "verification needs libplan-verify: %s is the core library, "
            "without %s(); point LIBPLAN_LIBRARY at %s, or install "
            "libplan-verify where the loader finds it"
            % (path, name, VERIFY_SONAME), -10)
    call.__name__ = name
    return call


def bind_functions(lib, path, verify=None, search=None):
    """Declares every function of _decls on `lib`; returns the _Funcs.
    Raises LibraryError naming every declared function `lib` lacks (verify.h's
    count only when `lib` has plan_verify, search.h's only when it has
    plan_search; verify or search None: ask the library)."""
    if verify is None:
        verify = has_verify(lib)
    if search is None:
        search = has_search(lib)
    out = _Funcs()
    missing = []
    tables = [(_decls.PROTOS, True, None),
              (_decls.VERIFY_PROTOS, verify, _needs_verify),
              (_decls.SEARCH_PROTOS, search, _needs_search)]
    for table, required, stand_in in tables:
        for name, (res, args) in table.items():
            short = name[len("plan_"):]
            if not required:
                setattr(out, short, stand_in(name, path))
                continue
            try:
                f = getattr(lib, name)
            except AttributeError:
                missing.append(name)
                continue
            f.restype = res
            f.argtypes = args
            setattr(out, short, f)
    if missing:
        raise LibraryError(
            "%s lacks %s that this libplan binding calls: %s. The library "
            "and the binding come from different builds of libplan: install "
            "the binding of the library's source tree, or point "
            "LIBPLAN_LIBRARY at a matching library"
            % (path, "a function" if len(missing) == 1 else
               "%d functions" % len(missing), ", ".join(missing)))
    return out


def check_structs(sizeof, path, structs=_decls.STRUCTS):
    """Compares ctypes.sizeof of each mirrored struct with `sizeof(c_name)`
    (the library's plan_abi_sizeof); raises LibraryError naming each struct
    that differs, both sizes and the library."""
    bad = []
    for st in structs:
        want = sizeof(st.c_name.encode())
        have = ctypes.sizeof(st)
        if want == 0:
            bad.append("%s: the library does not know it (plan_abi_sizeof "
                       "says 0), the binding's %s has %d bytes"
                       % (st.c_name, st.__name__, have))
        elif want != have:
            bad.append("%s: %d bytes in the library, %d in the binding's %s"
                       % (st.c_name, want, have, st.__name__))
    if bad:
        raise LibraryError(
            "%s and this libplan binding disagree on the layout of %s:\n  %s"
            "\nThey come from different builds of libplan: install the "
            "binding of the library's source tree, or point LIBPLAN_LIBRARY "
            "at a matching library"
            % (path, "a struct" if len(bad) == 1 else "%d structs" % len(bad),
               "\n  ".join(bad)))


lib, path = load_library()
verifies = has_verify(lib)  # libplan-search or libplan-verify, not the core
searches = has_search(lib)  # libplan-search: search in-process
fn = bind_functions(lib, path, verifies, searches)
check_structs(fn.abi_sizeof, path)

# Buffers the library hands over are freed by the library itself.
free = fn.buffer_free


def take_string(ptr, length=None):
    """Decodes a malloc'd char* handed over by libplan and frees it."""
    if not ptr:
        return ""
    try:
        if length is not None:
            return ctypes.string_at(ptr, length).decode("utf-8", "replace")
        return ctypes.string_at(ptr).decode("utf-8", "replace")
    finally:
        free(ptr)


def s(b):
    """A borrowed C string as str ("" for NULL)."""
    # "replace": a message may quote a path or input that is not UTF-8
    return b.decode("utf-8", "replace") if b else ""


def enc(text):
    """str (or path-like) to bytes for a const char* argument."""
    if isinstance(text, bytes):
        return text
    if isinstance(text, str):
        return text.encode("utf-8")
    if isinstance(text, os.PathLike):
        return os.fsencode(text)
    from .errors import UsageError
    raise UsageError("expected a str, bytes or path, not %s"
                     % type(text).__name__)
