"""Plans: loading, identity and output, the mesh, placements and
strategies, and the checks; verify, cost and schedule are in their own
modules."""

import ctypes
import json
import re
import threading
from collections import namedtuple

from . import _cost, _decls, _schedule, _verify
from . import placements as _pl
from ._common import (_Handle, _findings, _hash_str, _path, _ranged,
                      _take_out, _text, enc, fn, s)
from ._program import Program
from .errors import (DriftError, Error, NotFoundError, UnsupportedError,
                     UsageError, check)

_PARTS = {"plan": 0, "program": 1, "mesh": 2, "provenance": 3}


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
        """The coordinates of logical rank `rank` on each axis (UsageError
        for a rank not on the mesh)."""
        rank = _ranged(rank, "rank", "int64")
        n = 1
        for size in self.sizes:
            n *= size
        if not 0 <= rank < n:
            raise UsageError("rank %d is not on the mesh of %d devices"
                             % (rank, n))
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
        # parsed(): tuples of placements, shown in compact form
        return "Strategy(in=[%s], out=[%s])" % (
            ", ".join(map(_pl.format, self.inputs)),
            ", ".join(map(_pl.format, self.outputs)))


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
_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1  # placement's fast path


def _leaf_flags(h):
    """One flag per tensor of the plan's program: 1 for a leaf."""
    prog = fn.get_program(h)
    role = fn.program_tensor_role
    return bytes(role(prog, i) in _LEAVES
                 for i in range(fn.program_tensor_count(prog)))


_FLOW_PAIR = re.compile(r'("(?:[^"\\]|\\.)*"|[^,{}\s:]+): '
                        r'("(?:[^"\\]|\\.)*"|[^,{}\s]+)')
_BUFFER = re.compile(r'^  ("(?:[^"\\]|\\.)*"|\S+): \{tensor: '
                     r'("(?:[^"\\]|\\.)*"|[^,]+), placement: "([^"]*)"')


def _unquote(v):
    if v.startswith('"'):
        return v[1:-1].replace('\\"', '"').replace("\\\\", "\\")
    return v


def _lowered_placements(plan):
    """{tensor: placement} of the produced tensors as the plan lowers
    (spec/lowered-format.md): each tensor's layout buffer, an output's
    delivered buffer; {} when the plan does not lower."""
    out = ctypes.c_void_p()
    if fn.lower(ctypes.byref(out), plan._h) < 0:
        fn.error_clear()
        return {}
    try:
        text = _take_out(fn.lowered_write, out)
    except Error:
        return {}
    finally:
        fn.lowered_free(out)
    buffers, layouts, outputs = {}, {}, {}
    for line in text.splitlines():
        m = _BUFFER.match(line)
        if m:
            buffers[_unquote(m.group(1))] = m.group(3)
        elif line.startswith("layouts: {") or line.startswith("outputs: {"):
            into = layouts if line[0] == "l" else outputs
            for k, v in _FLOW_PAIR.findall(line.split(": ", 1)[1]):
                into[_unquote(k)] = _unquote(v)
    got = {t: buffers[b] for t, b in layouts.items() if b in buffers}
    got.update((t, buffers[b]) for t, b in outputs.items() if b in buffers)
    return got


_ENTRY = re.compile(r'^  ("(?:[^"\\]|\\.)*"|[^:\s]+): (\S+)\s*$')


def _stored_outputs(text):
    """The plan's own `outputs` placements, from its canonical text."""
    out, inside = {}, False
    for line in text.splitlines():
        if line == "outputs:":
            inside = True
        elif inside:
            m = _ENTRY.match(line)
            if not m:
                break
            out[_unquote(m.group(1))] = m.group(2)
    return out


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
    _leaf = None  # per tensor index: 1 for a leaf (input, param, const)
    _produced = None  # produced tensor -> placement, from the lowering

    @classmethod
    def load(cls, path, threads=0, program_root=None):
        out = ctypes.c_void_p()
        opts = _decls.LoadOptions(1, _ranged(threads, "threads"))
        root = None if program_root is None else _path(program_root)
        check(fn.load_root(ctypes.byref(out), _path(path), root,
                           ctypes.byref(opts)))
        return cls(out.value)

    @classmethod
    def parse(cls, text, name="<string>", base_dir=None):
        data = _text(text)
        out = ctypes.c_void_p()
        check(fn.load_buffer(ctypes.byref(out), data, len(data),
                             enc(name, "name"), None if base_dir is None
                             else _path(base_dir, "base_dir")))
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
        h = _decls.Hash()
        check(fn.hash_part(ctypes.byref(h), self._h, _PARTS[part]))
        return _hash_str(h)

    def canonical(self, part="plan"):
        """The canonical JSON encoding a part's hash is taken of."""
        if not isinstance(part, str) or part not in _PARTS:
            raise UsageError("unknown part %r" % (part,))
        return _take_out(fn.canonical, self._h, _PARTS[part])

    @property
    def overlap(self):
        """The communication overlap entries (format 1.1,
        spec/plan-format.md 4.8), in file order: a list of dicts with the
        canonical encoding's keys (the selector, `input`, `param` or
        `grad_sync`; `operand`, `chunks`, `dim`, `stream`, `start`,
        `wait` when off their defaults); [] without the section."""
        return json.loads(self.canonical("plan")).get("overlap", [])

    def text(self, self_contained=False):
        """The plan in canonical layout (what `plan fmt` writes)."""
        opts = _decls.WriteOptions(1, 1 if self_contained else 0)
        return _take_out(fn.write_buffer, self._h, ctypes.byref(opts))

    def sharding_svg(self, tensor):
        """An SVG picture (text) of how the plan lays out `tensor` (its
        name) over the mesh: a cell per rank with the block it holds
        (what `plan show --svg` writes). NotFoundError for an unknown
        tensor; a plan without a mesh, or of over 1024 ranks, is refused."""
        return _take_out(fn.sharding_svg, self._h, enc(tensor, "tensor name"))

    def save(self, path, self_contained=False):
        """Writes the plan to `path` atomically (nothing changes on failure).
        A program given by path is written relative to the new file."""
        opts = _decls.WriteOptions(1, 1 if self_contained else 0)
        check(fn.save(self._h, _path(path), ctypes.byref(opts)))

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
        if not isinstance(key, (str, bytes)):
            return _ranged(key, "tensor index")
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
        """The index of an op named or numbered `key` (NotFoundError when
        the plan has none)."""
        prog = fn.get_program(self._h)
        if isinstance(key, (str, bytes)):
            i = fn.program_op_find(prog, enc(key, "op name"))
        else:
            i = _ranged(key, "op index")
        if not 0 <= i < fn.program_op_count(prog):
            raise NotFoundError("no op %r in the plan" % (key,))
        return i

    def placement(self, tensor):
        """The placement of a tensor (compact form): an input's, param's or
        const's as stored (all R when the plan says nothing); a produced
        tensor's as its op's strategy makes it (as lowering lays it out);
        a program output's as the plan delivers it (its `outputs`
        placement)."""
        h = self._ptr or self._h  # (self._h raises when closed)
        i = (tensor if type(tensor) is int and _INT_MIN <= tensor <= _INT_MAX
             else self._tensor_index(tensor))
        try:
            buf = _tls.buf
        except AttributeError:
            buf = _buffer()
        if _tensor_placement(buf, 128, h, i) < 0:
            check(-9)
        leaf = self._leaf
        if leaf is None:
            leaf = self._leaf = _leaf_flags(h)
        if i < len(leaf) and not leaf[i] and fn.has_mesh(h):
            return self._produced_placement(i)
        return buf.value.decode()

    def _produced_placement(self, i):
        """A produced tensor's placement: the lowered program's (outputs
        as delivered), else its producer's strategy output."""
        got = self._produced
        if got is None:
            got = _lowered_placements(self)
            got.update(_stored_outputs(self.text()))
            self._produced = got
        prog = fn.get_program(self._h)
        name = fn.program_tensor_name(prog, i).decode("utf-8")
        if name in got:
            return got[name]
        for o in self.program.ops:
            if name in o.outputs:
                st = self.strategy(o.index)
                if st is not None:
                    return st.outputs[o.outputs.index(name)]
                break
        raise UnsupportedError(
            "the plan gives no placement for %r: its op has no strategy and "
            "the plan does not lower" % name)

    def placement_spec(self, tensor):
        """placement() as a tuple of Shard/Replicate/Partial, one per axis."""
        return _pl.parse(self.placement(tensor))

    def strategy(self, op):
        """The strategy of an op, or None when the plan gives it none."""
        h = self._h
        i = self._op_index(op)
        prog = fn.get_program(h)
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
               world_size=None, timeout=None, comm=None, memory_limit=None):
        """Runs the plan on simulated ranks against its program and returns
        a VerifyReport. mode "exact" or "float"; tolerances: {tensor name or
        glob: (rtol, atol)} (float mode); runner "cpu" (None: the default)
        or "cuda" (UnsupportedError, with the reason, where it cannot run).

        distributed: True to run as one process of a verification with
        one process per mesh rank, under mpirun or srun (docs/gpu.md), or
        a folder every process sees where rank 0 leaves NCCL's id (a
        torchrun launch, comm "nccl"); rank and world_size default to the
        launcher's (OMPI_COMM_WORLD_*, PMI_*, SLURM_*, RANK/WORLD_SIZE);
        timeout (seconds, default 300) bounds the wait for the others;
        comm "mpi" or "nccl" (None: the runner's own, else mpi). Every
        process gets the same verdict.

        memory_limit: the bytes the run may use (None: what is free here;
        False: no check). A run estimated over it raises UnsupportedError
        with the figures and the size of the reduce_shapes() run, before
        anything runs (docs/verify.md, Memory)."""
        return _verify.verify(self, mode, seed, dtype, rtol, atol,
                              tolerances, runner, distributed, rank,
                              world_size, timeout, comm, memory_limit)

    def verify_estimate(self, mode="exact"):
        """The peak bytes verify(mode=mode) would allocate (an upper bound,
        docs/verify.md, Memory); verify refuses a run over what is free
        here with UnsupportedError."""
        return _verify.estimate(self, mode)

    def reduce_shapes(self, mesh=False):
        """A smaller plan with the same sharding structure, and a summary;
        mesh=True shrinks every mesh axis too, as `plan verify --reduce`
        does (docs/verify.md, Mesh reduction)."""
        return _verify.reduce_shapes(self, mesh)

    def cost(self, hardware=None, parameters=None, calibration=None):
        """Prices the plan's step on a hardware model (a built-in profile
        such as "h100", or None: the plan's own hardware, else H100);
        parameters: {name: value} (docs/cost.md); calibration: a file."""
        return _cost.cost(self, hardware, parameters, calibration)

    def replay(self, tool=None, strategy=None, trust_embedded_script=False):
        """Makes the plan again from its provenance: (same hash, message).
        In-process over libplan-search, else (or given `tool`) with the
        `plan` tool. `strategy` and `trust_embedded_script` as for
        libplan.replay."""
        from ._search import replay
        return replay(self, tool, strategy, trust_embedded_script)

    def lowered(self):
        """The lowered SPMD program as values (a Lowered: steps, buffers,
        layouts, outputs, collective_counts()); lower() gives its text."""
        from ._lowered import lowered
        return lowered(self)

    def lower(self, tool=None):
        """The lowered SPMD program as text (what `plan lower` writes; the
        library lowers it, or the `tool` named runs)."""
        from ._search import lower
        return lower(self, tool)

    def schedule(self):
        """The pipeline schedule (NotFoundError without a pipeline)."""
        return _schedule.from_plan(self)

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


def load(path, threads=0, program_root=None):
    """Loads a plan file: `with libplan.load(path) as plan: ...`. A program
    by path must lie in the plan's folder tree, or under `program_root`
    when given (else $PLAN_PROGRAM_ROOT)."""
    return Plan.load(path, threads, program_root)


def parse(text, name="<string>", base_dir=None):
    """Loads a plan from a string; `name` appears in error positions."""
    return Plan.parse(text, name, base_dir)

