"""What the object modules share: argument checks, owned C handles,
findings, hashes, and the library's versions.

Every argument that crosses into C goes through one check here: an
integer must fit its C type (RangeError, an OverflowError: ctypes would
cut it short), a float be finite (and not negative for a tolerance),
a string or path hold no NUL byte (C would end it there), and
a handle's parent be open (UsageError "plan is closed")."""

import ctypes
import math
import os
from collections import namedtuple

from . import _lib
from .errors import RangeError, UsageError, check

fn = _lib.fn
s = _lib.s
_text = _lib.enc  # text handed over with its length: a NUL is the reader's

_SEVERITY = ("note", "warning", "error")

# [low, high) of the C types integers are passed as
_C_RANGE = {"int": (-(1 << 31), 1 << 31), "int64": (-(1 << 63), 1 << 63),
            "uint64": (0, 1 << 64)}
_BOUND = {0: "0", 1 << 31: "2^31", -(1 << 31): "-2^31", 1 << 63: "2^63",
          -(1 << 63): "-2^63", 1 << 64: "2^64"}


def _int(v, what):
    """An integer argument (a bool is not one), or UsageError."""
    if not isinstance(v, bool):
        if isinstance(v, int):
            return int(v)
        index = getattr(type(v), "__index__", None)
        if index is not None:
            try:
                return int(index(v))
            except TypeError:
                pass
    raise UsageError("%s must be an integer, not %s"
                     % (what, type(v).__name__))


def _ranged(v, what, ctype="int"):
    """An integer argument that fits C's `ctype` ("int", "int64",
    "uint64"): RangeError (an OverflowError and a UsageError) outside it."""
    v = _int(v, what)
    low, high = _C_RANGE[ctype]
    if not low <= v < high:
        raise RangeError("%s must lie in [%s, %s), not %d" % (
            what, _BOUND[low], _BOUND[high], v))
    return v


def _float(v, what, low=None):
    """A finite float argument (>= low when low is given), or UsageError:
    a NaN compares false with everything, so C would take it for a pass."""
    try:  # what float() takes, "1e-3" too, as before these checks
        f = float(v)
    except (TypeError, ValueError, OverflowError):
        raise UsageError("%s must be a number, not %s"
                         % (what, type(v).__name__)) from None
    if not math.isfinite(f):
        raise UsageError("%s must be finite, not %r" % (what, f))
    if low is not None and f < low:
        raise UsageError("%s must be >= %g, not %r" % (what, low, f))
    return f


def _cstr(v, what="a string argument"):
    """bytes for a NUL-terminated const char * (from a str, bytes or
    path-like); UsageError for another type or a NUL byte inside, where C
    would end the string."""
    if isinstance(v, os.PathLike):
        v = os.fspath(v)
    if isinstance(v, str):
        try:  # as os.fsencode: a path read from the disk round-trips
            b = v.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError as e:
            raise UsageError("%s %r cannot be encoded: %s"
                             % (what, v, e.reason)) from None
    elif isinstance(v, bytes):
        b = v
    else:
        raise UsageError("%s must be a str, bytes or path, not %s"
                         % (what, type(v).__name__))
    if b"\0" in b:
        raise UsageError("%s %r contains a NUL byte" % (what, v))
    return b


def _path(v, what="path"):
    """A path (str, bytes or os.PathLike) as bytes for C; UsageError for
    another type or a NUL byte inside ("a\\0b" would open "a")."""
    return _cstr(v, what)


enc = _cstr  # the modules' spelling for any other const char * argument


def _mapping(v, what):
    """A dict-like argument (None: empty), or UsageError."""
    if v is None:
        return {}
    if not hasattr(v, "items"):
        raise UsageError("%s must be a mapping, not %s"
                         % (what, type(v).__name__))
    return v


def _take_out(call, *args):
    """Calls f(char **out, size_t *len, args...) and returns the text."""
    out = ctypes.c_void_p()
    n = ctypes.c_size_t()
    check(call(ctypes.byref(out), ctypes.byref(n), *args))
    return _lib.take_string(out.value, n.value)


class _Handle:
    """An owned C handle, freed by close(), by `with`, or when collected."""

    _free = None
    _kind = "handle"

    def __init__(self, ptr, owner=None):
        self._ptr = ptr
        # A borrowed handle keeps its owner alive and never frees.
        self._owner = owner

    @property
    def _h(self):
        # A view's pointer lies inside its owner: once the owner is closed
        # it is freed memory, whatever the view's own state.
        if self._owner is not None:
            self._owner._h  # raises "<owner> is closed"
        if not self._ptr:
            raise UsageError("%s is closed" % self._kind)
        return self._ptr

    @property
    def closed(self):
        return not self._ptr or (self._owner is not None and
                                 self._owner.closed)

    def close(self):
        """Frees the C object now (idempotent). A borrowed view closes
        without freeing anything."""
        p, self._ptr = self._ptr, None
        if p and self._owner is None:
            type(self)._free(p)

    def __enter__(self):
        self._h
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


# ---- findings --------------------------------------------------------------

Finding = namedtuple("Finding",
                     "severity code message file line column object")
Finding.__doc__ = ("One finding of validation, drift or diff: severity "
                   "('note', 'warning', 'error'), a stable dotted code, the "
                   "message, the position (1-based; 0 unknown) and the op or "
                   "tensor it is about.")


def _finding_str(f):
    """The one text form of a finding, as the tool and the Lua module print
    it (plan_diag_format): FILE:LINE:COL: SEVERITY: MESSAGE [CODE], the
    position as far as there is one."""
    where = ""
    if f.file and f.line:
        where = "%s:%d:%d: " % (f.file, f.line, f.column)
    elif f.file:
        where = "%s: " % f.file
    return "%s%s: %s [%s]" % (where, f.severity, f.message, f.code)


Finding.__str__ = _finding_str


class Findings(list):
    """A list of Finding; `ok` is true when none is an error."""

    @property
    def errors(self):
        return [f for f in self if f.severity == "error"]

    @property
    def warnings(self):
        return [f for f in self if f.severity == "warning"]

    @property
    def ok(self):
        return not self.errors

    def __repr__(self):
        return "<Findings %d (%d errors)>" % (len(self), len(self.errors))


def _findings(call, *args):
    d = ctypes.c_void_p()
    check(call(ctypes.byref(d), *args))
    try:
        out = Findings()
        for i in range(fn.diags_count(d)):
            x = fn.diags_get(d, i).contents
            sev = (_SEVERITY[x.severity] if 0 <= x.severity < 3
                   else str(x.severity))
            out.append(Finding(sev, s(x.code), s(x.message), s(x.file), x.line,
                               x.column, s(x.object)))
        return out
    finally:
        fn.diags_free(d)


def format_bytes(n):
    """A byte count as the library prints one (plan_format_bytes): binary
    units scaled to the value, "512 B", "5.00 KiB", "30.66 GiB"."""
    units = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")
    v, i = float(n), 0
    while abs(v) >= 1024 and i < len(units) - 1:
        v /= 1024
        i += 1
    return "%.0f B" % v if i == 0 else "%.2f %s" % (v, units[i])


def _hash_str(h):
    buf = ctypes.create_string_buffer(38)
    fn.hash_format(h, buf)
    return buf.value.decode()


def version():
    return s(fn.version_string())


def abi_version():
    return fn.abi_version()
