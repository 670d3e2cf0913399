"""A plan's lowered SPMD program, read-only (lowered.h's views): its steps,
buffers, layouts and outputs as Python values, the collective counts, and
the block of a buffer each rank holds. Plan.lowered() makes one; the text
form stays Plan.lower()'s."""

import ctypes
from collections import namedtuple

from . import _decls
from ._common import _Handle, fn, s
from ._program import Program
from .errors import InvalidError, UsageError, check

# The collective and local redistribution kinds (plan_lowered_collective_count).
COLLECTIVES = ("all_gather", "all_reduce", "reduce_scatter", "all_to_all",
               "slice", "zero_non_owner", "relabel")
_REDUCES = ("sum", "avg", "max", "min")
# plan_attr_type: INT, INTS, FLOAT, BOOL, STRING
_ATTR_INT, _ATTR_INTS, _ATTR_FLOAT, _ATTR_BOOL, _ATTR_STRING = range(5)

LoweredStep = namedtuple(
    "LoweredStep", "kind op op_kind attrs axis dim to_dim reduce inputs "
                   "outputs stage")
LoweredStep.__doc__ = """One step. kind: "input", "op", "transfer" or a
collective ("all_gather", ...); op, op_kind and attrs (a dict by schema
name) for an op step; axis (the mesh axis name), dim, to_dim and reduce
("sum", ...) for a collective where its kind has them, else None; inputs
and outputs: buffer indices; stage: a pipelined step's stage, else None."""

LoweredBuffer = namedtuple("LoweredBuffer",
                           "name tensor dtype shape placement")
LoweredBuffer.__doc__ = """One buffer: its name in the file form
("x@0"), the tensor it holds, the dtype, the global shape and the
placement (compact form)."""

LoweredLayout = namedtuple("LoweredLayout", "buffer placement")
LoweredOutput = namedtuple("LoweredOutput",
                           "tensor buffer required gradient_of")
LoweredOutput.__doc__ = """One program output: its tensor, the buffer that
delivers it, the placement the plan requires (None when a lowered file
states none) and the param whose gradient it is (else None)."""


def _attr(spec, val):
    t = spec.type
    if t == _ATTR_INT:
        return val.i
    if t == _ATTR_INTS:
        return tuple(val.ints[k] for k in range(val.nints)) if val.ints else ()
    if t == _ATTR_FLOAT:
        return val.f
    if t == _ATTR_BOOL:
        return bool(val.b)
    return s(val.s if val.s is not None else spec.def_s)


def _attrs(kind, vals):
    n = ctypes.c_int()
    specs = fn.op_attrs(kind, ctypes.byref(n))
    if not vals or n.value <= 0:
        return {}
    return {s(specs[k].name): _attr(specs[k], vals[k]) for k in range(n.value)}


class Lowered(_Handle):
    """The SPMD program every rank runs (spec/lowered-format.md). steps,
    buffers (indexed as the steps name them), layouts ({tensor name:
    LoweredLayout}) and outputs are read once; program, block() and
    collective_counts() ask the library. Keeps its plan open; closing
    the plan closes it too."""

    _free = staticmethod(lambda p: fn.lowered_free(p))
    _kind = "lowered program"

    def __init__(self, ptr, plan):
        super().__init__(ptr)
        self._plan = plan
        try:
            self._read()
        except BaseException:
            self.close()
            raise

    def _read(self):
        h = self._h
        p = fn.lowered_plan(h)
        self._prog = fn.get_program(p)
        self._axes = [s(fn.mesh_axis_name(p, a))
                      for a in range(fn.mesh_axis_count(p))]
        self.ranks = fn.mesh_device_count(p)
        self.buffers = [self._buffer(b)
                        for b in range(fn.lowered_buffer_count(h))]
        self.steps = [self._step(i) for i in range(fn.lowered_step_count(h))]
        self.layouts = {}
        buf = ctypes.c_int()
        for t in range(fn.program_tensor_count(self._prog)):
            check(fn.lowered_layout(ctypes.byref(buf), h, t))
            if buf.value >= 0:
                self.layouts[self._tensor(t)] = LoweredLayout(
                    buf.value, self.buffers[buf.value].placement)
        self.outputs = [self._output(k)
                        for k in range(fn.lowered_output_count(h))]

    @property
    def _h(self):
        self._plan._h  # raises "plan is closed": the program borrows it
        return super()._h

    @property
    def program(self):
        """The Program the steps run (a training plan's training program),
        a view that lives as long as this object."""
        return Program(fn.lowered_plan(self._h) and self._prog, owner=self)

    def _tensor(self, t):
        return s(fn.program_tensor_name(self._prog, t))

    def _buffer(self, b):
        info = _decls.LoweredBufferInfo()
        check(fn.lowered_buffer(ctypes.byref(info), self._h, b))
        return LoweredBuffer("%s@%d" % (s(info.tensor_name), info.ordinal),
                             s(info.tensor_name), s(fn.dtype_name(info.dtype)),
                             tuple(info.dims[:info.rank]),
                             s(info.placement_text))

    def _step(self, i):
        st = _decls.LoweredStepInfo()
        check(fn.lowered_step(ctypes.byref(st), self._h, i))

        def opt(v):
            return None if v < 0 else v
        op = op_kind = None
        attrs = {}
        if st.op >= 0:
            op = s(fn.program_op_name(self._prog, st.op))
            op_kind = s(fn.op_kind_name(st.op_kind))
            attrs = _attrs(st.op_kind, st.attrs)
        return LoweredStep(
            s(st.kind), op, op_kind, attrs,
            self._axes[st.axis] if st.axis >= 0 else None,
            opt(st.dim), opt(st.to_dim),
            _REDUCES[st.reduce] if 0 <= st.reduce < len(_REDUCES) else None,
            tuple(st.in_[j] for j in range(st.nin)),
            tuple(st.out[j] for j in range(st.nout)), opt(st.stage))

    def _output(self, k):
        o = _decls.LoweredOutputInfo()
        check(fn.lowered_output(ctypes.byref(o), self._h, k))
        return LoweredOutput(
            self._tensor(o.tensor), o.buffer,
            s(o.required_text) if o.has_required else None,
            self._tensor(o.gradient_of) if o.gradient_of >= 0 else None)

    def collective_counts(self):
        """{kind: steps of that kind} for every collective kind."""
        h = self._h
        return {k: fn.lowered_collective_count(h, k.encode())
                for k in COLLECTIVES}

    def block(self, buffer, rank):
        """(shape, offset): the block of buffer `buffer` (an index into
        buffers) that mesh rank `rank` holds. UsageError out of range."""
        dims = (ctypes.c_int64 * 8)()
        off = (ctypes.c_int64 * 8)()
        if not isinstance(buffer, int) or not isinstance(rank, int):
            raise UsageError("block: buffer and rank are ints")
        n = check(fn.lowered_buffer_block(dims, off, self._h, buffer, rank))
        return tuple(dims[:n]), tuple(off[:n])


def lowered(plan):
    """plan.lowered(): InvalidError (with .findings) for a plan that does
    not validate, UnsupportedError for what is not lowered here."""
    errors = plan.validate().errors
    if errors:
        f = errors[0]
        exc = InvalidError("lower: %s [%s]" % (f.message, f.code), -6,
                           f.file, f.line, f.column)
        exc.findings = errors
        raise exc
    out = ctypes.c_void_p()
    check(fn.lower(ctypes.byref(out), plan._h))
    return Lowered(out.value, plan)
