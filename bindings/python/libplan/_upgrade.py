"""Upgrading plan and program files of an older format."""

import ctypes
import os
from collections import namedtuple

from . import _decls, _lib
from ._common import _hash_str, _path, _text, enc, fn
from .errors import UsageError, check

_UPGRADE_PARTS = ("plan", "program", "mesh", "provenance")  # plan_part order


class Upgrade(namedtuple("Upgrade", "upgraded from_version text before after "
                         "layout_kept program_by_path")):
    """What upgrade_text / upgrade did: `upgraded` False when the file is of
    the current format already (`text` None, nothing written); else `text`
    is the file in the current format, with an `x-upgraded-from` record.
    `before` and `after` map each part the file has ("plan", "program",
    "mesh", "provenance") to its hash in the old file and in the new one.
    `layout_kept`: only the version line changed and the record was added;
    `program_by_path`: the program is another file, left as it is."""


def upgrade_text(text, name="<string>", base_dir=None):
    """Rewrites plan or program text of an older format (0.1) in the current
    one (docs/archiving.md), checked by reading it back: every part hashes
    as before with the version set back. Raises the library's errors (a
    newer major: VersionError, with file, line and column)."""
    f = fn.upgrade_buffer
    data = _text(text)
    out = ctypes.c_void_p()
    n = ctypes.c_size_t()
    info = _decls.UpgradeInfo()
    check(f(ctypes.byref(out), ctypes.byref(n), ctypes.byref(info), data,
            len(data), enc(name, "name"),
            None if base_dir is None else _path(base_dir, "base_dir")))
    new = _lib.take_string(out.value, n.value) if out.value else None
    parts = [(i, p) for i, p in enumerate(_UPGRADE_PARTS) if info.has[i]]
    return Upgrade(bool(info.upgraded),
                   "%d.%d" % (info.from_major, info.from_minor), new,
                   {p: _hash_str(info.before[i]) for i, p in parts},
                   {p: _hash_str(info.after[i]) for i, p in parts}
                   if info.upgraded else {},
                   bool(info.layout_kept), bool(info.program_by_path))


def upgrade(path, out=None, in_place=False):
    """Upgrades the file at `path` (as `plan upgrade`): writes the result to
    `out`, or over `path` with in_place=True, atomically (the library's
    plan_write_file_atomic: nothing changes on failure), or
    nowhere; returns the Upgrade. A file of the current format is written
    nowhere. A plan whose program is another file must stay in its folder
    (out elsewhere raises UsageError)."""
    if in_place and out is not None:
        raise UsageError("upgrade: give out or in_place, not both")
    _path(path)
    if out is not None:
        _path(out, "out")
    with open(path, "rb") as fh:
        text = fh.read().decode("utf-8", "surrogateescape")
    base = os.path.dirname(os.path.abspath(path))
    r = upgrade_text(text, path, base)
    dest = path if in_place else out
    if not r.upgraded or dest is None:
        return r
    if r.program_by_path and \
            os.path.dirname(os.path.abspath(dest)) != base:
        raise UsageError("upgrade: %s refers to its program by a path "
                         "relative to its folder; write the result in that "
                         "folder" % path)
    data = r.text.encode("utf-8", "surrogateescape")
    check(fn.write_file_atomic(_path(dest), data, len(data)))
    return r

