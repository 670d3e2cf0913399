"""Programs, plans and their reports over the C handles."""

import ctypes
import json
import os
import threading
from collections import namedtuple

from . import _lib
from . import placements as _pl
from .errors import (DriftError, NotFoundError, UnsupportedError, UsageError,
                     check)

fn = _lib.fn
enc, s = _lib.enc, _lib.s

_SEVERITY = ("note", "warning", "error")
_PARTS = {"plan": 0, "program": 1, "mesh": 2, "provenance": 3}
_COLLECTIVES = ("all_gather", "all_reduce", "reduce_scatter", "all_to_all")


def _int(v, what):
    """An integer argument, or UsageError."""
    if isinstance(v, bool) or not isinstance(v, int):
        try:
            v = v.__index__()
        except (AttributeError, TypeError):
            raise UsageError("%s must be an integer, not %s"
                             % (what, type(v).__name__)) from None
    return v


def _distributed(folder, rank, world_size, timeout, comm):
    """verify's distributed options as VerifyOptions' version-5 fields
    (world, rank, rendezvous, timeout_s, comm), or None in one process."""
    if folder is None:
        if rank is not None or world_size is not None or timeout is not None \
                or comm is not None:
            raise UsageError("verify: rank, world_size, timeout and comm go "
                             "with distributed")
        return None
    env = os.environ  # an empty variable counts as unset, as in the CLI
    if world_size is None:
        world_size = env.get("WORLD_SIZE") or \
            env.get("OMPI_COMM_WORLD_SIZE") or None
    if rank is None:
        rank = env.get("RANK") or env.get("OMPI_COMM_WORLD_RANK") or None
    if world_size is None or rank is None:
        raise UsageError("verify: distributed needs rank and world_size, "
                         "or RANK and WORLD_SIZE from the launcher")
    try:  # the launcher's are text
        world_size = int(world_size) if isinstance(world_size, str) \
            else world_size
        rank = int(rank) if isinstance(rank, str) else rank
    except ValueError:
        raise UsageError("verify: RANK and WORLD_SIZE must be integers") \
            from None
    world_size, rank = _int(world_size, "world_size"), _int(rank, "rank")
    if not 0 <= rank < world_size:
        raise UsageError("verify: rank must lie in [0, world_size)")
    if comm not in (None, "tcp", "nccl"):
        raise UsageError("verify: comm is 'tcp' or 'nccl', not %r" % (comm,))
    t = 0.0 if timeout is None else float(timeout)
    if not 0 <= t < 1e9:
        raise UsageError("verify: timeout must be >= 0 seconds (and finite)")
    return (world_size, rank, enc(os.fspath(folder)), t,
            None if comm is None else enc(comm))


def _mapping(v, what):
    """A dict-like argument (None: empty), or UsageError."""
    if v is None:
        return {}
    if not hasattr(v, "items"):
        raise UsageError("%s must be a mapping, not %s"
                         % (what, type(v).__name__))
    return v


def _need(name):
    f = getattr(fn, name, None)
    if f is None:
        raise UnsupportedError("this libplan.so has no plan_%s()" % name)
    return f


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


# ---- programs --------------------------------------------------------------

Tensor = namedtuple("Tensor", "index name shape dtype role")
Tensor.__doc__ = "A tensor of a program: its shape (a tuple), dtype and role."


class Op(namedtuple("Op", "index name kind inputs outputs")):
    """An op of a program: inputs and outputs are tensor names."""
    __slots__ = ()


class Program(_Handle):
    """A program: the single-device computation a plan distributes.

    Program.load(path) / Program.parse(text) own the C object; Plan.program
    is a view borrowed from its plan (valid while the plan is open)."""

    _free = staticmethod(lambda p: fn.program_free(p))
    _kind = "program"

    @classmethod
    def load(cls, path):
        out = ctypes.c_void_p()
        check(fn.program_load(ctypes.byref(out), enc(path)))
        return cls(out.value)

    @classmethod
    def parse(cls, text, name="<string>"):
        data = enc(text)
        out = ctypes.c_void_p()
        check(fn.program_load_buffer(ctypes.byref(out), data, len(data),
                                     enc(name)))
        return cls(out.value)

    @property
    def name(self):
        return s(fn.program_name(self._h))

    def hash(self):
        h = _lib.Hash()
        check(fn.program_hash(ctypes.byref(h), self._h))
        return _hash_str(h)

    def __len__(self):
        return fn.program_op_count(self._h)

    def _slots(self, i, f):
        out = []
        while True:
            t = f(self._h, i, len(out))
            if t < 0:
                return tuple(out)
            out.append(s(fn.program_tensor_name(self._h, t)))

    def op(self, key):
        """An op by index or name (NotFoundError when there is none)."""
        h = self._h
        i = key if isinstance(key, int) else fn.program_op_find(h, enc(key))
        if not 0 <= i < fn.program_op_count(h):
            raise NotFoundError("no op %r in the program" % (key,))
        return Op(i, s(fn.program_op_name(h, i)), s(fn.program_op_kind(h, i)),
                  self._slots(i, fn.program_op_input),
                  self._slots(i, fn.program_op_output))

    def tensor(self, key):
        """A tensor by index or name (NotFoundError when there is none)."""
        h = self._h
        i = (key if isinstance(key, int)
             else fn.program_tensor_find(h, enc(key)))
        if not 0 <= i < fn.program_tensor_count(h):
            raise NotFoundError("no tensor %r in the program" % (key,))
        return Tensor(i, s(fn.program_tensor_name(h, i)), self.shape(i),
                      s(fn.program_tensor_dtype(h, i)),
                      s(fn.program_tensor_role(h, i)))

    def shape(self, key):
        h = self._h
        i = (key if isinstance(key, int)
             else fn.program_tensor_find(h, enc(key)))
        dims = (ctypes.c_int64 * 8)()
        r = fn.program_tensor_shape(h, i, dims, 8)
        if r < 0:
            raise NotFoundError("no tensor %r in the program" % (key,))
        return tuple(dims[:r])

    @property
    def ops(self):
        return [self.op(i) for i in range(fn.program_op_count(self._h))]

    @property
    def tensors(self):
        n = fn.program_tensor_count(self._h)
        return [self.tensor(i) for i in range(n)]

    def signatures(self):
        """{"ops": {name: int}, "tensors": {name: int}}: the 64-bit
        signatures plans record for drift reports."""
        h = self._h
        return {
            "ops": {s(fn.program_op_name(h, i)): fn.program_op_signature(h, i)
                    for i in range(fn.program_op_count(h))},
            "tensors": {s(fn.program_tensor_name(h, i)):
                        fn.program_tensor_signature(h, i)
                        for i in range(fn.program_tensor_count(h))},
        }

    def text(self):
        """The program as a standalone document in canonical layout."""
        return _take_out(fn.program_write_buffer, self._h)

    def grad(self, inputs=False):
        """The training program (forward, then backward ops; gradients named
        grad/<param>). InvalidError when the program has no loss."""
        opts = (ctypes.c_uint * 2)(1, 1 if inputs else 0)
        out = ctypes.c_void_p()
        check(fn.program_grad(ctypes.byref(out), self._h, opts))
        return Program(out.value)

    def __repr__(self):
        if self.closed:
            return "<libplan.Program closed>"
        return "<libplan.Program %r: %d ops, %d tensors>" % (
            self.name, fn.program_op_count(self._h),
            fn.program_tensor_count(self._h))


# ---- plans -----------------------------------------------------------------

class Mesh(namedtuple("Mesh", "axes sizes devices")):
    """A plan's mesh: axis names (major to minor), their sizes, and the
    physical device of each logical rank (row-major over the axes)."""
    __slots__ = ()

    @property
    def shape(self):
        return dict(zip(self.axes, self.sizes))

    @property
    def size(self):
        return len(self.devices)

    def coords(self, rank):
        """The coordinates of logical rank `rank` on each axis."""
        out = []
        for n in reversed(self.sizes):
            out.append(rank % n)
            rank //= n
        return tuple(reversed(out))

    def device_array(self):
        """The devices shaped like the mesh: a numpy array when numpy is
        installed, else nested lists."""
        try:
            import numpy
        except ImportError:
            numpy = None
        if numpy is not None:
            return numpy.array(self.devices, dtype=numpy.int64).reshape(
                self.sizes)
        out = list(self.devices)
        for n in reversed(self.sizes[1:]):
            out = [out[i:i + n] for i in range(0, len(out), n)]
        return out

    def __repr__(self):
        return "Mesh(%s)" % ", ".join("%s=%d" % a for a in zip(self.axes,
                                                                self.sizes))


class Strategy(namedtuple("Strategy", "inputs outputs")):
    """How an op consumes its inputs and produces its outputs: one compact
    placement string per slot."""
    __slots__ = ()

    def parsed(self):
        return Strategy(tuple(_pl.parse(p) for p in self.inputs),
                        tuple(_pl.parse(p) for p in self.outputs))

    def __repr__(self):
        return "Strategy(in=[%s], out=[%s])" % (", ".join(self.inputs),
                                                ", ".join(self.outputs))


class PlanOp(namedtuple("PlanOp", "index name kind inputs outputs strategy "
                                  "stage")):
    """An op of a plan: the program's op, its strategy (None when the plan
    gives none) and its pipeline stage (-1 without a pipeline)."""
    __slots__ = ()


class PlanTensor(namedtuple("PlanTensor", "index name shape dtype role "
                                          "placement")):
    """A tensor of a plan with its stored placement (compact form; leaves
    only: inputs, params and consts; None for produced tensors)."""
    __slots__ = ()


_LEAVES = (b"input", b"param", b"const")
_tensor_placement = fn.tensor_placement
_tls = threading.local()


def _buffer():
    """A per-thread 128-byte buffer for placements (ctypes lets other
    threads run during a call, so one buffer per plan would race)."""
    b = getattr(_tls, "buf", None)
    if b is None:
        b = _tls.buf = ctypes.create_string_buffer(128)
    return b


class Plan(_Handle):
    """A loaded plan. Use `libplan.load(path)` or `libplan.parse(text)`;
    free it with close() or a `with` block (or let it be collected)."""

    _free = staticmethod(lambda p: fn.free(p))
    _kind = "plan"
    _names = None  # tensor name -> index, built on the first lookup

    @classmethod
    def load(cls, path, threads=0):
        out = ctypes.c_void_p()
        opts = _lib.LoadOptions(1, threads)
        check(fn.load_ext(ctypes.byref(out), enc(path), ctypes.byref(opts)))
        return cls(out.value)

    @classmethod
    def parse(cls, text, name="<string>", base_dir=None):
        data = enc(text)
        out = ctypes.c_void_p()
        check(fn.load_buffer(ctypes.byref(out), data, len(data), enc(name),
                             None if base_dir is None else enc(base_dir)))
        return cls(out.value)

    # -- identity and output --

    @property
    def file(self):
        return s(fn.file(self._h))

    @property
    def has_mesh(self):
        return bool(fn.has_mesh(self._h))

    def hash(self, part="plan"):
        """Content hash of a part ("plan", "program", "mesh", "provenance")
        as "xxh3:<32 hex>"."""
        if not isinstance(part, str) or part not in _PARTS:
            raise UsageError("unknown part %r (plan, program, mesh, "
                             "provenance)" % (part,))
        h = _lib.Hash()
        check(fn.hash_part(ctypes.byref(h), self._h, _PARTS[part]))
        return _hash_str(h)

    def canonical(self, part="plan"):
        """The canonical JSON encoding a part's hash is taken of."""
        if not isinstance(part, str) or part not in _PARTS:
            raise UsageError("unknown part %r" % (part,))
        return _take_out(fn.canonical, self._h, _PARTS[part])

    def text(self, self_contained=False):
        """The plan in canonical layout (what `plan fmt` writes)."""
        opts = _lib.WriteOptions(1, 1 if self_contained else 0)
        return _take_out(fn.write_buffer, self._h, ctypes.byref(opts))

    def save(self, path, self_contained=False):
        """Writes the plan to `path` atomically (nothing changes on failure).
        A program given by path is written relative to the new file."""
        opts = _lib.WriteOptions(1, 1 if self_contained else 0)
        check(fn.save(self._h, enc(path), ctypes.byref(opts)))

    # -- views --

    @property
    def program(self):
        """The plan's program (a view, valid while the plan is open)."""
        return Program(fn.get_program(self._h), owner=self)

    @property
    def mesh(self):
        h = self._h
        if not fn.has_mesh(h):
            return None
        n = fn.mesh_axis_count(h)
        return Mesh(tuple(s(fn.mesh_axis_name(h, a)) for a in range(n)),
                    tuple(fn.mesh_axis_size(h, a) for a in range(n)),
                    tuple(fn.mesh_device(h, r)
                          for r in range(fn.mesh_device_count(h))))

    def _tensor_index(self, key):
        if isinstance(key, int):
            return key
        names = self._names
        if names is None:
            # one pass over the names, then dict lookups: cheaper than a C
            # lookup per call once a caller asks for more than a few
            prog = fn.get_program(self._h)
            name = fn.program_tensor_name
            names = self._names = {
                name(prog, i).decode("utf-8"): i
                for i in range(fn.program_tensor_count(prog))}
        try:
            return names[key]
        except (KeyError, TypeError):
            raise NotFoundError("no tensor %r in the plan" % (key,)) from None

    def _op_index(self, key):
        if isinstance(key, int):
            return key
        i = fn.program_op_find(fn.get_program(self._h), enc(key))
        if i < 0:
            raise NotFoundError("no op %r in the plan" % (key,))
        return i

    def placement(self, tensor):
        """The stored placement of an input, param or const (compact form;
        all R when the plan says nothing)."""
        h = self._ptr or self._h  # (self._h raises when closed)
        i = tensor if type(tensor) is int else self._tensor_index(tensor)
        try:
            buf = _tls.buf
        except AttributeError:
            buf = _buffer()
        if _tensor_placement(buf, 128, h, i) < 0:
            check(-9)
        return buf.value.decode()

    def placement_spec(self, tensor):
        """placement() as a tuple of Shard/Replicate/Partial, one per axis."""
        return _pl.parse(self.placement(tensor))

    def strategy(self, op):
        """The strategy of an op, or None when the plan gives it none."""
        h = self._h
        i = self._op_index(op)
        prog = fn.get_program(h)
        if not 0 <= i < fn.program_op_count(prog):
            raise NotFoundError("no op %r in the plan" % (op,))
        buf = ctypes.create_string_buffer(256)
        sides = []
        for output, f in ((0, fn.program_op_input), (1, fn.program_op_output)):
            side = []
            while f(prog, i, len(side)) >= 0:
                if fn.op_placement(buf, 256, h, i, output, len(side)) < 0:
                    fn.error_clear()
                    return None
                side.append(buf.value.decode())
            sides.append(tuple(side))
        return Strategy(*sides)

    def stage(self, op):
        """Pipeline stage of an op (-1 without a pipeline)."""
        return fn.op_stage(self._h, self._op_index(op))

    @property
    def stage_count(self):
        return fn.stage_count(self._h)

    @property
    def ops(self):
        prog = self.program
        has_mesh = self.has_mesh
        return [PlanOp(o.index, o.name, o.kind, o.inputs, o.outputs,
                       self.strategy(o.index) if has_mesh else None,
                       fn.op_stage(self._h, o.index))
                for o in prog.ops]

    @property
    def tensors(self):
        has_mesh = self.has_mesh
        out = []
        for t in self.program.tensors:
            pl = (self.placement(t.index) if has_mesh and
                  t.role in ("input", "param", "const") else None)
            out.append(PlanTensor(*t, placement=pl))
        return out

    @property
    def placements(self):
        """{tensor name: compact placement} for every input, param and
        const."""
        h = self._h
        if not fn.has_mesh(h):
            return {}
        prog = fn.get_program(h)
        buf = _buffer()
        role, name, get = (fn.program_tensor_role, fn.program_tensor_name,
                           fn.tensor_placement)
        out = {}
        for i in range(fn.program_tensor_count(prog)):
            if role(prog, i) in _LEAVES:
                check(get(buf, 128, h, i))
                out[name(prog, i).decode("utf-8")] = buf.value.decode()
        return out

    @property
    def strategies(self):
        """{op name: Strategy} for every op with a strategy."""
        return {o.name: o.strategy for o in self.ops if o.strategy is not None}

    def show(self):
        """A table of ops with their strategies (and stages), then the
        stored placements: a plain-text summary like `plan show`'s."""
        ops = self.ops
        pipe = self.stage_count > 0
        rows = [("op", "kind", "in", "out") + (("stage",) if pipe else ())]
        for o in ops:
            st = o.strategy
            rows.append((o.name, o.kind,
                         " ".join(st.inputs) if st else "-",
                         " ".join(st.outputs) if st else "-") +
                        ((str(o.stage),) if pipe else ()))
        width = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines = ["%s: %s" % (self.file or "<memory>", repr(self.mesh))]
        for r in rows:
            lines.append("  " + "  ".join(c.ljust(w) for c, w in
                                          zip(r, width)).rstrip())
        pl = self.placements
        if pl:
            lines.append("placements:")
            n = max(len(k) for k in pl)
            for k, v in pl.items():
                lines.append("  %s  %s" % (k.ljust(n), v))
        return "\n".join(lines) + "\n"

    # -- checks --

    def validate(self):
        """Static validation: a Findings list (`.ok` when no errors)."""
        return _findings(fn.validate, self._h)

    def drift(self, program):
        """The drift report against an edited program (a Program or a path):
        every op and tensor that changed, appeared or vanished."""
        if not isinstance(program, Program):
            with Program.load(program) as p:
                return _findings(fn.drift, self._h, p._h)
        return _findings(fn.drift, self._h, program._h)

    def check_program(self, program, strict=False):
        """Checks that the plan still matches a model's program (a Program or
        a path) and returns a Match: `ok`, the drift findings, and the
        placements and strategies to apply, keyed by the names both share.
        strict=True raises DriftError when it does not match."""
        own = not isinstance(program, Program)
        prog = Program.load(program) if own else program
        try:
            found = _findings(fn.drift, self._h, prog._h)
            names = {t.name for t in prog.tensors}
            opnames = {o.name for o in prog.ops}
        finally:
            if own:
                prog.close()
        m = Match(found.ok, found,
                  {k: v for k, v in self.placements.items() if k in names},
                  {k: v for k, v in self.strategies.items() if k in opnames})
        if strict and not m.ok:
            e = m.findings.errors[0]
            err = DriftError("the plan does not match the program: %s (%d "
                             "errors)" % (e.message, len(m.findings.errors)),
                             -6, e.file, e.line, e.column)
            err.findings = m.findings
            raise err
        return m

    def diff(self, other):
        """Semantic diff: no findings means equal content."""
        if not isinstance(other, Plan):
            with Plan.load(other) as o:
                return _findings(fn.diff, self._h, o._h)
        return _findings(fn.diff, self._h, other._h)

    def verify(self, mode="exact", seed=0, dtype=None, rtol=0.0, atol=0.0,
               tolerances=None, runner=None, distributed=None, rank=None,
               world_size=None, timeout=None, comm=None):
        """Runs the plan on simulated ranks against its program and returns
        a VerifyReport. mode "exact" or "float"; tolerances: {tensor name or
        glob: (rtol, atol)} (float mode); runner "cpu" (None: the default)
        or "cuda" (UnsupportedError, with the reason, where it cannot run).

        distributed: a folder every process sees, to run as one process of
        a verification with one process per mesh rank (docs/gpu.md); rank
        and world_size default to the launcher's RANK and WORLD_SIZE;
        timeout (seconds, default 300) bounds the wait for the others;
        comm "tcp" or "nccl" (None: the runner's own, else tcp). Every
        process gets the same verdict."""
        if mode not in ("exact", "float"):
            raise UsageError("mode must be 'exact' or 'float', not %r"
                             % (mode,))
        seed = _int(seed, "seed")
        if not 0 <= seed < 1 << 64:
            raise UsageError("seed must lie in [0, 2^64)")
        tol = list(_mapping(tolerances, "tolerances").items())
        arr = (_lib.VerifyTolerance * max(1, len(tol)))()
        keep = []
        try:
            for i, (name, (rt, at)) in enumerate(tol):
                keep.append(enc(name))
                arr[i] = _lib.VerifyTolerance(keep[-1], float(rt), float(at))
            dist = _distributed(distributed, rank, world_size, timeout,
                                comm)
            # the oldest version that says it all: a library before it
            # still takes what does not need the newer fields
            version = 5 if dist else 3 if runner is None else 4
            opts = _lib.VerifyOptions(version,
                                      0 if mode == "exact" else 1, seed,
                                      float(rtol), float(atol),
                                      None if dtype is None else enc(dtype),
                                      arr if tol else None, len(tol),
                                      None if runner is None else enc(runner),
                                      *(dist or (0, 0, None, 0.0, None)))
        except (TypeError, ValueError) as e:
            raise UsageError("verify: %s (tolerances are {tensor: (rtol, "
                             "atol)})" % e) from None
        out = ctypes.c_void_p()
        check(_need("verify")(ctypes.byref(out), self._h, ctypes.byref(opts)))
        return VerifyReport(out.value)

    def reduce_shapes(self):
        """A smaller plan with the same sharding structure, and a summary."""
        out = ctypes.c_void_p()
        summ = ctypes.c_void_p()
        check(_need("reduce_shapes")(ctypes.byref(out), ctypes.byref(summ),
                                     self._h))
        return Plan(out.value), _lib.take_string(summ.value)

    def cost(self, hardware=None, parameters=None, calibration=None):
        """Prices the plan's step on a hardware model (a built-in profile
        such as "h100", or None: the plan's own hardware, else H100);
        parameters: {name: value} (docs/cost.md); calibration: a file."""
        m = ctypes.c_void_p()
        hw = None if hardware is None else enc(hardware)
        check(_need("cost_model_new")(ctypes.byref(m), self._h, hw))
        try:
            for k, v in _mapping(parameters, "parameters").items():
                try:
                    v = float(v)
                except (TypeError, ValueError):
                    raise UsageError("cost parameter %s: %r is not a number"
                                     % (k, v)) from None
                check(fn.cost_model_set(m, enc(k), v))
            if calibration is not None:
                check(fn.cost_model_load_calibration(m, enc(calibration)))
            out = ctypes.c_void_p()
            check(fn.cost_plan(ctypes.byref(out), m, self._h))
            return CostReport(out.value, s(fn.cost_model_hardware(m)))
        finally:
            fn.cost_model_free(m)

    def replay(self, tool=None):
        """Makes the plan again from its provenance with the `plan` tool:
        (same hash, message). See libplan.search."""
        from ._search import replay
        return replay(self, tool)

    def lower(self, tool=None):
        """The lowered SPMD program as text (runs `plan lower`; see
        libplan.search for how the tool is found)."""
        from ._search import lower
        return lower(self, tool)

    def schedule(self):
        """The pipeline schedule (NotFoundError without a pipeline)."""
        out = ctypes.c_void_p()
        check(_need("schedule_from_plan")(ctypes.byref(out), self._h))
        return Schedule(out.value)

    def __repr__(self):
        if self.closed:
            return "<libplan.Plan closed>"
        h = self._h
        prog = fn.get_program(h)
        mesh = self.mesh
        return "<libplan.Plan %s: %d ops, %s>" % (
            self.file or "<memory>", fn.program_op_count(prog),
            repr(mesh) if mesh else "no mesh")


class Match(namedtuple("Match", "ok findings placements strategies")):
    """check_program's answer: whether the plan still applies, the drift
    findings, and {tensor: placement} / {op: Strategy} for the shared
    names."""
    __slots__ = ()

    def __bool__(self):
        return self.ok


# ---- reports ---------------------------------------------------------------

class VerifyReport(_Handle):
    """A verification's verdict: `equal` (also the truth value), the first
    divergent op and tensor, a diagnosis, collective counts, the text."""

    _free = staticmethod(lambda p: fn.verify_report_free(p))
    _kind = "verify report"

    def __init__(self, ptr):
        super().__init__(ptr)
        h = self._h
        self.equal = bool(fn.verify_report_equal(h))
        self.text = s(fn.verify_report_text(h))
        self.first_op = s(fn.verify_report_first_op(h)) or None
        self.first_tensor = s(fn.verify_report_first_tensor(h)) or None
        self.diagnosis = s(fn.verify_report_diagnosis(h))
        runner = getattr(fn, "verify_report_runner", None)  # newer libs
        self.runner = s(runner(h)) if runner else "cpu"
        self.collectives = {k: fn.verify_report_collectives(h, k.encode())
                            for k in _COLLECTIVES}

    def write(self, fmt="json"):
        """The report as "text", "json", "yaml" or "junit"."""
        return _take_out(fn.verify_report_write, self._h, enc(fmt))

    def to_dict(self):
        return json.loads(self.write("json"))

    def __bool__(self):
        return self.equal

    def __str__(self):
        return self.text

    def __repr__(self):
        if self.equal:
            return "<libplan.VerifyReport equal>"
        return "<libplan.VerifyReport differs at %s (%s): %s>" % (
            self.first_op, self.first_tensor, self.diagnosis)


CostOp = namedtuple("CostOp", "name kind stage flops bytes seconds "
                              "backward_seconds bound")
CostCollective = namedtuple("CostCollective",
                            "phase tensor kind axis from_ to group link "
                            "algorithm bytes calls seconds")
CostMemory = namedtuple("CostMemory", "stage parameters gradients optimizer "
                        "activations workspace total inflight")


def _row(struct, cls):
    vals = []
    for name, _ in struct._fields_:
        v = getattr(struct, name)
        vals.append(s(v) if isinstance(v, bytes) or v is None else v)
    return cls(*vals)


class CostReport(_Handle):
    """A plan's modeled step: seconds (and parts), memory peak per device
    against capacity, fit, and rows per op, collective and memory group."""

    _free = staticmethod(lambda p: fn.cost_report_free(p))
    _kind = "cost report"

    def __init__(self, ptr, hardware=""):
        super().__init__(ptr)
        h = self._h
        self.hardware = hardware
        self.step_seconds = fn.cost_report_step_seconds(h)
        self.compute_seconds = fn.cost_report_compute_seconds(h)
        self.comm_seconds = fn.cost_report_comm_seconds(h)
        self.bubble_seconds = fn.cost_report_bubble_seconds(h)
        self.memory_peak = fn.cost_report_memory_peak(h)
        self.memory_capacity = fn.cost_report_memory_capacity(h)
        self.fits = bool(fn.cost_report_fits(h))
        self.reason = s(fn.cost_report_reason(h))

    def _rows(self, count, get, struct, cls):
        h = self._h
        out = []
        for i in range(count(h)):
            x = struct()
            check(get(ctypes.byref(x), h, i))
            out.append(_row(x, cls))
        return out

    @property
    def ops(self):
        return self._rows(fn.cost_report_op_count, fn.cost_report_op,
                          _lib.CostOpInfo, CostOp)

    @property
    def collectives(self):
        return self._rows(fn.cost_report_collective_count,
                          fn.cost_report_collective, _lib.CostCollectiveInfo,
                          CostCollective)

    @property
    def memory(self):
        return self._rows(fn.cost_report_memory_count, fn.cost_report_memory,
                          _lib.CostMemoryInfo, CostMemory)

    def write(self, fmt="text"):
        """The report as "text", "json" or "yaml" (libplan-cost/1)."""
        return _take_out(fn.cost_report_write, self._h, enc(fmt))

    @property
    def text(self):
        return self.write("text")

    @property
    def json(self):
        return self.write("json")

    def to_dict(self):
        return json.loads(self.write("json"))

    def __str__(self):
        return self.text

    def __repr__(self):
        return "<libplan.CostReport %s: step %.3g s, peak %.3g GB%s>" % (
            self.hardware, self.step_seconds, self.memory_peak / 1e9,
            "" if self.fits else ", does not fit")


Action = namedtuple("Action", "kind stage microbatch start end")


class Schedule(_Handle):
    """A pipeline schedule: per-rank action lists, simulated on demand."""

    _free = staticmethod(lambda p: fn.schedule_free(p))
    _kind = "schedule"

    @classmethod
    def generate(cls, kind, ranks, stages, microbatches):
        """A named schedule ("gpipe", "1f1b", "interleaved-1f1b", "zb-h1")."""
        k = fn.schedule_kind_from_name(enc(kind)) if isinstance(kind, str) \
            else -1
        if k < 0:
            raise UsageError("unknown schedule %r" % (kind,))
        out = ctypes.c_void_p()
        ranks, stages = _int(ranks, "ranks"), _int(stages, "stages")
        microbatches = _int(microbatches, "microbatches")
        if not all(-2**31 <= v < 2**31 for v in (ranks, stages)) or \
                not -2**63 <= microbatches < 2**63:
            raise UsageError("ranks, stages or microbatches out of range")
        check(fn.schedule_generate(ctypes.byref(out), k, ranks, stages,
                                   microbatches))
        return cls(out.value)

    @property
    def kind(self):
        return s(fn.schedule_kind_name(fn.schedule_kind_of(self._h)))

    @property
    def ranks(self):
        return fn.schedule_ranks(self._h)

    @property
    def stages(self):
        return fn.schedule_stages(self._h)

    @property
    def microbatches(self):
        return fn.schedule_microbatches(self._h)

    def simulate(self, blocking_sends=False):
        """Checks and runs the schedule; returns (findings, result dict)."""
        opts = _lib.ScheduleOptions(1, (ctypes.c_int64 * 8)(1, 2, 1, 1, 0, 0,
                                                            0, 0),
                                    1 if blocking_sends else 0, 0)
        found = _findings(fn.schedule_simulate, self._h, ctypes.byref(opts))
        r = _lib.ScheduleResult()
        check(fn.schedule_result_get(ctypes.byref(r), self._h))
        return found, {k: getattr(r, k) for k, _ in r._fields_}

    def actions(self, rank):
        h = self._h
        out = []
        a = _lib.ScheduleAction()
        for i in range(max(0, fn.schedule_length(h, rank))):
            check(fn.schedule_get(ctypes.byref(a), h, rank, i))
            out.append(Action(s(fn.action_kind_name(a.kind)), a.stage,
                              a.microbatch, a.start, a.end))
        return out

    def write(self, fmt="text", name=None):
        """"text", "yaml", "json" or "svg"."""
        return _take_out(fn.schedule_write, self._h, enc(fmt),
                         None if name is None else enc(name))

    def __repr__(self):
        if self.closed:
            return "<libplan.Schedule closed>"
        return ("<libplan.Schedule %s: %d stages on %d ranks, %d "
                "microbatches>" % (self.kind, self.stages, self.ranks,
                                   self.microbatches))


def load(path, threads=0):
    """Loads a plan file: `with libplan.load(path) as plan: ...`."""
    return Plan.load(path, threads)


def parse(text, name="<string>", base_dir=None):
    """Loads a plan from a string; `name` appears in error positions."""
    return Plan.parse(text, name, base_dir)


# ---- upgrade ---------------------------------------------------------------

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
    f = _need("upgrade_buffer")
    data = enc(text)
    out = ctypes.c_void_p()
    n = ctypes.c_size_t()
    info = _lib.UpgradeInfo()
    check(f(ctypes.byref(out), ctypes.byref(n), ctypes.byref(info), data,
            len(data), enc(name), None if base_dir is None else enc(base_dir)))
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
    check(_need("write_file_atomic")(enc(dest), data, len(data)))
    return r


def load_program(path):
    return Program.load(path)


def cost_profiles():
    """The built-in hardware profiles' canonical names."""
    return [s(fn.cost_profile_name(i)) for i in range(fn.cost_profile_count())]


def version():
    return s(fn.version_string())


def abi_version():
    return fn.abi_version()
