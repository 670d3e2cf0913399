"""What the object modules share: argument checks, owned C handles,
findings, hashes, and the library's versions."""

import ctypes
from collections import namedtuple

from . import _lib
from .errors import UsageError, check

fn = _lib.fn
enc, s = _lib.enc, _lib.s

_SEVERITY = ("note", "warning", "error")


def _int(v, what):
    """An integer argument, or UsageError."""
    if isinstance(v, bool) or not isinstance(v, int):
        try:
            v = v.__index__()
        except (AttributeError, TypeError):
            raise UsageError("%s must be an integer, not %s"
                             % (what, type(v).__name__)) from None
    return v


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
        if not self._ptr:
            raise UsageError("%s is closed" % self._kind)
        return self._ptr

    @property
    def closed(self):
        return not self._ptr

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
Finding.__str__ = lambda f: "%s%s: %s: %s [%s]" % (
    f.file, ":%d:%d" % (f.line, f.column) if f.line else "", f.severity,
    f.message, f.code)


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


def _hash_str(h):
    buf = ctypes.create_string_buffer(38)
    fn.hash_format(h, buf)
    return buf.value.decode()


def version():
    return s(fn.version_string())


def abi_version():
    return fn.abi_version()
