"""Plan search, replay and lowering.

Over libplan-search (libplan/search.h) `search` and `replay` call the
library in-process: a Program, ProgramBuilder or Plan is written to text
and handed over as a buffer, so nothing touches the disk. Over another
library, or when a `tool` is named, they run `plan search` / `plan replay`
and load the result. The tool is looked for: the `tool` argument,
$LIBPLAN_TOOL, `plan` beside the library (build/plan next to
build/libplan.so.0; libplan/bin/plan in a wheel), then `plan` on PATH.
`lower` calls plan_lower (lowered.h, in every library) unless a `tool` is
named.
"""

import ctypes
import os
import re
import shutil
import subprocess
import tempfile

from . import _decls, _lib
from ._common import _hash_str, _ranged, _take_out, _text, enc, fn, s
from ._plan import Plan
from ._program import Program
from .builder import ProgramBuilder
from .errors import (Error, InvalidError, UnsupportedError, UsageError,
                     error_class)

__all__ = ["find_tool", "search", "replay", "lower"]


def find_tool(tool=None):
    """The path of the `plan` tool, or UnsupportedError saying where it was
    looked for."""
    cands = [tool, os.environ.get("LIBPLAN_TOOL")]
    here = os.path.dirname(os.path.realpath(_lib.path)) if os.path.sep in \
        _lib.path else None
    if here:
        cands += [os.path.join(here, "plan"),
                  os.path.join(here, "bin", "plan")]
    for c in cands:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    found = shutil.which("plan")
    if found:
        return found
    raise UnsupportedError(
        "the plan tool was not found (tried the tool argument, $LIBPLAN_TOOL, "
        "beside %s, and PATH); search and replay run it over a library "
        "without in-process search (libplan-search)" % _lib.path)


_POS = re.compile(r"^(?:plan:? ?\w*: )?(.+?):(\d+):(\d+): (?:error: )?(.*)$")


def _run(args):
    r = subprocess.run(args, capture_output=True, text=True)
    lines = [l for l in (r.stderr or r.stdout).splitlines() if l.strip()]
    msg = lines[0] if lines else "exit status %d" % r.returncode
    return r.returncode, r.stdout, msg


def _fail(cls, code, what, msg):
    """The tool's first error line as an exception, with its position when
    it names one (file:line:column: ...)."""
    if cls is UsageError and "no strategy '" in msg:
        cls, code = input_error(-9), -9  # as in-process: also NotFoundError
    m = _POS.match(msg)
    if m:
        return cls("%s: %s" % (what, m.group(4)), code, m.group(1),
                   int(m.group(2)), int(m.group(3)))
    msg = re.sub(r"^plan:? (?:search|replay)?:? ?", "", msg)
    return cls("%s: %s" % (what, msg), code)


def _mesh_arg(mesh):
    if isinstance(mesh, str):
        return mesh
    items = mesh.items() if isinstance(mesh, dict) else mesh
    return ",".join("%s=%d" % (a, n) for a, n in items)


def search(program, mesh=None, strategy="greedy", hardware=None, seed=None,
           width=None, limit=None, self_contained=None, tool=None,
           devices=None, hosts=None):
    """Searches a plan for `program` (a path, Program or ProgramBuilder) on
    `mesh` ({"dp": 2, "tp": 4} or "dp=2,tp=4") with a built-in strategy
    ("megatron", "greedy", "beam", "dp", "exhaustive") or a Lua file, priced
    on `hardware`; or, given a Plan or a plan path and no mesh, makes every
    decision of that plan again but its pinned regions. Returns the Plan,
    with the provenance `replay` needs. A program from memory makes a
    self-contained plan. InvalidError when the strategy fails or makes an
    invalid plan (with the file and line a Lua strategy raised at, and the
    whole story in `details`); UsageError for bad arguments or input, also
    of the status's own class (NotFoundError for an unknown strategy,
    ParseError for a strategy file that does not compile, ...). Runs
    in-process over libplan-search unless `tool` names a plan tool to run.
    With `devices` (and `hosts`, default 1), the joint search: the mesh
    over dp, fsdp, tp and pp, the pipeline and the recipe chosen together
    for that many devices (`plan search --devices N --hosts H`; the plan
    needs a training section; `mesh` is ignored)."""
    joint = (_opt_int(devices, "devices", 1), _opt_int(hosts, "hosts", 1))
    if hosts is not None and devices is None:
        raise UsageError("plan search: hosts goes with devices")
    if tool is None and _lib.searches:
        return _search_here(program, mesh, strategy, hardware, seed, width,
                            limit, self_contained, joint)
    return _tool_search(program, mesh, strategy, hardware, seed, width,
                        limit, self_contained, tool, joint)


def _tool_search(program, mesh, strategy, hardware, seed, width, limit,
                 self_contained, tool, joint=(None, None)):
    exe = find_tool(tool)
    with tempfile.TemporaryDirectory(prefix="libplan-search-") as tmp:
        if isinstance(program, (Program, ProgramBuilder, Plan)):
            src = os.path.join(tmp, "input.yaml")
            text = (program.text(self_contained=True)
                    if isinstance(program, Plan) else
                    program.yaml() if isinstance(program, ProgramBuilder)
                    else program.text())
            with open(src, "w") as f:
                f.write(text)
            if self_contained is None:
                self_contained = True
        else:
            src = os.fspath(program)
        out = os.path.join(tmp, "plan.yaml")
        args = [exe, "search", src]
        if mesh is not None:
            args += ["--mesh", _mesh_arg(mesh)]
        if strategy:
            args += ["--strategy", os.fspath(strategy)]
        for flag, v in (("--hardware", hardware), ("--seed", seed),
                        ("--width", width), ("--limit", limit),
                        ("--devices", joint[0] or None),
                        ("--hosts", joint[1] or None)):
            if v is not None:
                args += [flag, str(v)]
        if self_contained:
            args.append("--self-contained")
        args += ["-o", out]
        rc, _, msg = _run(args)
        if rc == 1:
            raise _fail(InvalidError, -6, "search failed", msg)
        if rc != 0:
            raise _fail(UsageError, -8, "plan search", msg)
        # read from memory so the result does not depend on the temp folder
        with open(out) as f:
            text = f.read()
        base = os.path.dirname(os.path.abspath(src))
        if not self_contained:
            # the tool wrote the program path relative to `out`: load from
            # the file itself while it exists (our own file in our own
            # temporary folder, naming the program the tool read: any root)
            p = Plan.load(out, program_root="/")
            text = p.text(self_contained=True)
            p.close()
        return Plan.parse(text, name="<search>", base_dir=base)


def replay(plan, tool=None, strategy=None, trust_embedded_script=False):
    """Makes a searched plan again from its provenance. Returns (same,
    message): same is True when the plan hashes agree (the message says
    the hash, or the recorded and replayed hashes and the differences, one
    per indented line); False too, with the failure's first line, when the
    strategy fails. Nothing in the plan is trusted: a built-in strategy
    runs by its name; a plan made with a strategy file needs `strategy`,
    the path of that file (its hash must be the recorded one), or
    `trust_embedded_script=True` to run the script its provenance carries,
    in the sandbox; else UsageError. Runs in-process over libplan-search
    unless `tool` names a plan tool to run."""
    if strategy is not None and trust_embedded_script:
        raise UsageError("plan replay: strategy or trust_embedded_script, "
                         "not both")
    if tool is None and _lib.searches:
        return _replay_here(plan, strategy, trust_embedded_script)
    return _tool_replay(plan, tool, strategy, trust_embedded_script)


def _tool_replay(plan, tool, strategy, trust_embedded_script):
    exe = find_tool(tool)
    with tempfile.TemporaryDirectory(prefix="libplan-replay-") as tmp:
        if isinstance(plan, Plan):
            path = os.path.join(tmp, "plan.yaml")
            with open(path, "w") as f:
                f.write(plan.text(self_contained=True))
        else:
            path = os.fspath(plan)
        args = [exe, "replay", path]
        if strategy is not None:
            args += ["--strategy", os.fspath(strategy)]
        if trust_embedded_script:
            args.append("--trust-embedded-script")
        rc, out, msg = _run(args)
        if rc not in (0, 1):
            raise _fail(UsageError, -8, "plan replay", msg)
        return rc == 0, out.strip() or msg


def lower(plan, tool=None):
    """The SPMD program every rank runs (spec/lowered-format.md), as text:
    `plan lower`. InvalidError for an invalid plan, UnsupportedError for
    what is not lowered yet (as `plan lower`, a UsageError, also of the
    status's class, for what else fails). Calls the library unless `tool`
    names a plan tool to run."""
    if tool is None:
        return _lower_here(plan)
    return _tool_lower(plan, tool)


def _tool_lower(plan, tool):
    exe = find_tool(tool)
    with tempfile.TemporaryDirectory(prefix="libplan-lower-") as tmp:
        if isinstance(plan, Plan):
            path = os.path.join(tmp, "plan.yaml")
            with open(path, "w") as f:
                f.write(plan.text(self_contained=True))
        else:
            path = os.fspath(plan)
        out = os.path.join(tmp, "lowered.yaml")
        rc, _, msg = _run([exe, "lower", "-o", out, path])
        if rc == 1:
            raise _fail(InvalidError, -6, "plan lower", msg)
        if rc == 3:
            raise _fail(UnsupportedError, -10, "plan lower", msg)
        if rc != 0:
            raise _fail(UsageError, -8, "plan lower", msg)
        with open(out) as f:
            return f.read()


# ---- in-process (libplan-search, lowered.h) --------------------------------

_INPUT_ERRORS = {}


def input_error(code):
    """The class for a failure before the strategy ran: the status's own
    (NotFoundError, ParseError, ...), also a UsageError, as the tool's exit
    2 has always been."""
    base = error_class(code)
    if issubclass(base, UsageError) or base is Error:
        return UsageError if base is Error else base
    cls = _INPUT_ERRORS.get(code)
    if cls is None:
        cls = _INPUT_ERRORS[code] = type(base.__name__, (base, UsageError), {
            "__module__": base.__module__, "__doc__": base.__doc__})
    return cls


def _raise(cls, what, code, info):
    """The last error (read first, before any other call) as `cls` with
    "what: " before its message and info's details attached."""
    e = fn.error_last().contents
    msg = s(e.message) or s(fn.status_name(code))
    exc = cls("%s: %s" % (what, msg), code, s(e.file), e.line, e.column)
    exc.details = s(info.details) or None
    raise exc


def _fail_here(rc, info, verb):
    if info.strategy_ran:
        _raise(InvalidError, "%s failed" % verb, rc, info)
    _raise(input_error(rc), "plan " + verb, rc, info)


def _source(x):
    """(text, None) for a Program, ProgramBuilder or Plan (written with the
    program inline), else (None, path)."""
    if isinstance(x, Plan):
        return x.text(self_contained=True), None
    if isinstance(x, ProgramBuilder):
        return x.yaml(), None
    if isinstance(x, Program):
        return x.text(), None
    return None, os.fspath(x)


def _opt_int(v, what, low):
    if v is None:
        return 0
    v = _ranged(v, "plan search: " + what, "int64")
    if v < low:
        raise UsageError("plan search: %s must be %s" % (
            what, "a whole number" if low < 0 else "a whole number above 0"))
    return v


def _search_here(program, mesh, strategy, hardware, seed, width, limit,
                 self_contained, joint=(None, None)):
    text, path = _source(program)
    if self_contained is None:
        self_contained = text is not None
    opts = _decls.SearchOptions()
    fn.search_options_init(ctypes.byref(opts), 4 if joint[0] else 1)
    if joint[0]:
        opts.joint_devices = _ranged(joint[0], "plan search: devices")
        opts.joint_hosts = _ranged(joint[1] or 0, "plan search: hosts")
        mesh = None
    keep = [enc(os.fspath(strategy)) if strategy else None,
            enc(_mesh_arg(mesh)) if mesh is not None else None,
            enc(hardware) if hardware is not None else None]
    opts.strategy, opts.mesh, opts.hardware = keep
    opts.seed = _opt_int(seed, "seed", -(1 << 63))
    # width is a C int: checked before the field would cut it short
    opts.width = _ranged(_opt_int(width, "width", 1), "plan search: width")
    opts.limit = _opt_int(limit, "limit", 1)
    opts.self_contained = 1 if self_contained else 0
    info = _decls.SearchInfo()
    fn.search_info_init(ctypes.byref(info), 1)
    out = ctypes.c_void_p()
    try:
        if text is None:
            rc = fn.search(ctypes.byref(out), ctypes.byref(info), enc(path),
                           ctypes.byref(opts))
            base = os.path.dirname(os.path.abspath(path))
        else:
            data = _text(text)
            rc = fn.search_buffer(ctypes.byref(out), ctypes.byref(info), data,
                                  len(data), b"<search>", None,
                                  ctypes.byref(opts))
            base = None
        if rc < 0:
            _fail_here(rc, info, "search")
    finally:
        fn.search_info_clear(ctypes.byref(info))
    # as the tool's file read back: the program inline, named "<search>"
    with Plan(out.value) as found:
        text = found.text(self_contained=True)
    return Plan.parse(text, name="<search>", base_dir=base)


def _replay_here(plan, strategy, trust_embedded_script):
    text, path = _source(plan) if isinstance(plan, Plan) else \
        (None, os.fspath(plan))
    opts = _decls.ReplayOptions()
    fn.replay_options_init(ctypes.byref(opts), 1)
    keep = enc(os.fspath(strategy)) if strategy is not None else None
    opts.strategy = keep
    opts.trust_embedded_script = 1 if trust_embedded_script else 0
    info = _decls.SearchInfo()
    fn.search_info_init(ctypes.byref(info), 1)
    out = ctypes.POINTER(_decls.ReplayResult)()
    try:
        if text is None:
            name = path
            rc = fn.replay_ext(ctypes.byref(out), ctypes.byref(info),
                               enc(path), ctypes.byref(opts))
        else:
            name = plan.file or "<plan>"
            data = _text(text)
            rc = fn.replay_buffer_ext(ctypes.byref(out), ctypes.byref(info),
                                      data, len(data), enc(name), None,
                                      ctypes.byref(opts))
        if rc < 0 and info.strategy_ran:  # the tool's exit 1: not the same
            e = fn.error_last().contents
            where = s(e.file)
            if where and e.line:
                where += ":%d:%d: " % (e.line, e.column) if e.column else \
                    ":%d: " % e.line
            elif where:
                where += ": "
            return False, "plan: %s%s" % (where, s(e.message))
        if rc < 0:
            _fail_here(rc, info, "replay")
    finally:
        fn.search_info_clear(ctypes.byref(info))
    try:
        r = out.contents
        if r.same:
            return True, "%s: replayed: %s (strategy %s)" % (
                name, _hash_str(r.replayed), s(r.strategy))
        lines = ["%s: replay differs: recorded %s, replayed %s" % (
            name, _hash_str(r.recorded), _hash_str(r.replayed))]
        lines += ["  " + l for l in s(r.diff).splitlines()]
        return False, "\n".join(lines)
    finally:
        fn.replay_result_free(out)


def _lower_here(plan):
    if isinstance(plan, Plan):
        return _lower_plan(plan)
    try:
        p = Plan.load(os.fspath(plan))
    except Error as e:  # as `plan lower` says it: exit 2, a usage error
        exc = input_error(e.code)("plan lower: " + e.message, e.code, e.file,
                                  e.line, e.column)
        raise exc from None
    with p:
        return _lower_plan(p)


def _lower_plan(plan):
    errors = plan.validate().errors
    if errors:  # `plan lower` prints them; its first line is the first's
        f = errors[0]
        exc = InvalidError("plan lower: %s [%s]" % (f.message, f.code), -6,
                           f.file, f.line, f.column)
        exc.findings = errors
        raise exc
    out = ctypes.c_void_p()
    rc = fn.lower(ctypes.byref(out), plan._h)
    if rc < 0:
        _raise(UnsupportedError if rc == -10 else input_error(rc),
               "plan lower", rc, _decls.SearchInfo())
    try:
        return _take_out(fn.lowered_write, out)
    finally:
        fn.lowered_free(out)
