"""libplan.torch.capture: what each rank of a distributed PyTorch run
executed, as a lowered program checked against the single-device program.

`capture(module, inputs, program, mesh)` runs the module's forward once on
every rank (under torchrun, the process group initialised) and records,
through torch's dispatch, every aten op on a tensor that derives from the
program's leaves and every collective (c10d and functional collectives, and
DTensor's redistributions), with the module path each ran in. Placements
are known at the leaves (a DTensor's own; a plain tensor's as `placements`
gives it) and follow through each recorded op by the sharding rule of the
libplan op it is (a matmul of S(1) x S(0) gives P(sum)) and through each
collective by its semantics. The record becomes a lowered program
(spec/lowered-format.md) against the single-device program: the recorded
ops as the traced ops of one region that replaces the program's ops, the
collectives as collective steps, and a `bind` of each module's output to
the program tensor of the op named by that module's path, so `plan verify`
compares the run with the single-device program op by op. Ranks must have
run the same sequence; capture reports where they diverge, and where the
run calls a tensor by a placement it does not hold (a DTensor built with
from_local on a block of another layout). See docs/python.md.
"""

import json
import os
import subprocess
import tempfile

from . import placements as _pl
from .errors import UnsupportedError, UsageError

__all__ = ["capture", "CaptureReport"]

_RED = {0: "sum", 1: "avg", 3: "min", 4: "max"}  # c10d RedOpType


class CaptureReport:
    """What capture found: `equal` (also the truth value), `first_op` (the
    first divergent op in PyTorch terms: module path and aten op, None when
    equal), `op` (the program op there, or None), `diagnosis`, `lowered`
    (the lowered program's text, or None when the run could not be written
    as one), `path` (where it was written), `verify` (the `plan verify`
    JSON report as a dict, or None), `collectives` ({kind: steps})."""

    def __init__(self, equal, first_op=None, op=None, diagnosis=None,
                 lowered=None, path=None, verify=None, collectives=None):
        self.equal, self.first_op, self.op = equal, first_op, op
        self.diagnosis, self.lowered, self.path = diagnosis, lowered, path
        self.verify, self.collectives = verify, collectives or {}

    def __bool__(self):
        return bool(self.equal)

    def to_dict(self):
        return {"equal": self.equal, "first_op": self.first_op,
                "op": self.op, "diagnosis": self.diagnosis,
                "path": self.path, "collectives": self.collectives}

    def __repr__(self):
        if self.equal:
            return "CaptureReport(EQUAL, %s)" % self.collectives
        return "CaptureReport(NOT EQUAL at %s: %s)" % (self.first_op,
                                                      self.diagnosis)


class _Diverged(Exception):
    def __init__(self, where, why):
        super().__init__("%s: %s" % (where, why))
        self.where, self.why = where, why


def _entries(placement, naxes):
    pl = list(_pl.parse(placement)) if isinstance(placement, str) else \
        list(placement)
    if len(pl) != naxes:
        raise UsageError("placement %s has %d entries, the mesh %d axes"
                         % (_pl.format(pl), len(pl), naxes))
    return pl


def _norm(pl, rank):
    out = []
    for p in pl:
        if isinstance(p, _pl.Shard):
            p = _pl.Shard(p.dim % rank if rank else p.dim)
        out.append(p)
    return tuple(out)


def _key(p):
    if isinstance(p, _pl.Shard):
        return ("S", p.dim)
    if isinstance(p, _pl.Partial):
        return ("P", p.reduce_op)
    return ("R",)


def _same(a, b):
    return [_key(p) for p in a] == [_key(p) for p in b]


class _Buf:
    __slots__ = ("index", "tensor", "pl", "rank")

    def __init__(self, index, tensor, pl, rank):
        self.index, self.tensor, self.pl, self.rank = index, tensor, pl, rank


class _Recorder:
    """One rank's record: buffers (tensor name, placement), events in
    order, and the map from live tensors to the buffer each holds."""

    def __init__(self, axes, sizes):
        self.axes, self.sizes = axes, sizes
        self.bufs = []
        self.events = []          # dicts, in the order they ran
        self.of = {}              # id(tensor) -> (_Buf, swapped dims)
        self.keep = []            # the tensors of `of`, kept alive
        self.path = []            # module path stack
        self.seq = 0
        self.quiet = 0            # inside a redistribution: recorded there
        self.signature = []       # (kind, name, module path) per event

    # ---- buffers ---------------------------------------------------------
    def new(self, tensor, pl, rank):
        b = _Buf(len(self.bufs), tensor, tuple(pl), rank)
        self.bufs.append(b)
        return b

    def bind(self, t, buf, swap=None):
        self.of[id(t)] = (buf, swap)
        self.keep.append(t)

    def lookup(self, t):
        got = self.of.get(id(t))
        if got is None:
            for attr in ("_local_tensor", "elem"):
                inner = getattr(t, attr, None)
                if inner is not None and id(inner) in self.of:
                    return self.of[id(inner)]
        return got

    def where(self, aten=None):
        path = ".".join(p for p in self.path if p) or "(top)"
        return "module %s%s" % (path, ", %s" % aten if aten else "")

    # ---- group of a collective --------------------------------------------
    def axis_of(self, ranks, what):
        """The mesh axis whose groups are `ranks` (global ranks, mesh rank
        order row-major)."""
        ranks = list(ranks)
        n = len(ranks)
        strides, s = [], 1
        for size in reversed(self.sizes):
            strides.insert(0, s)
            s *= size
        for a, size in enumerate(self.sizes):
            if size != n:
                continue
            base = ranks[0] - ((ranks[0] // strides[a]) % size) * strides[a]
            if sorted(ranks) == [base + i * strides[a] for i in range(n)]:
                if ranks != sorted(ranks):
                    raise UnsupportedError(
                        "%s: the group %s is not in coordinate order; "
                        "capture writes groups in axis order only"
                        % (what, ranks))
                return a
        raise UnsupportedError("%s: the group %s is not the group of one "
                               "mesh axis of %s" % (what, ranks, dict(
                                   zip(self.axes, self.sizes))))

    # ---- events ------------------------------------------------------------
    def op(self, kind, ins, out_pl, rank, aten, attrs=None):
        self.seq += 1
        path = ".".join(p for p in self.path if p) or "top"
        parts = aten.split(".")
        name = "%s/%d.%s" % (path, self.seq,
                             parts[1] if len(parts) > 1 else parts[0])
        b = self.new(name, out_pl, rank)
        self.events.append({"kind": "op", "op": kind, "name": name,
                            "ins": [i.index for i in ins], "out": b.index,
                            "attrs": attrs or {}, "aten": aten,
                            "where": self.where(aten)})
        self.signature.append(("op", aten, self.where()))
        return b

    def collective(self, kind, buf, axis, out_pl, what, **fields):
        b = self.new(buf.tensor, out_pl, buf.rank)
        self.events.append(dict({"kind": "collective", "coll": kind,
                                 "in": buf.index, "out": b.index,
                                 "axis": self.axes[axis], "where": what},
                                **fields))
        self.signature.append(("collective", kind, self.axes[axis],
                               self.where()))
        return b


# ---- sharding rules of the recorded ops (libplan's factor rules) -----------

def _rule_matmul(a, b, where, ta, tb):
    """Output entries of [.., m, k] x [k, n] per axis (ta / tb: the operand
    is a transposed view, so its two dims swap)."""
    out = []
    ra, rb = a.rank, b.rank
    for ea, eb in zip(a.pl, b.pl):
        da = ea.dim if isinstance(ea, _pl.Shard) else None
        db = eb.dim if isinstance(eb, _pl.Shard) else None
        if da is not None and ta and da >= ra - 2:
            da = (ra - 2) + (ra - 1 - da)
        if db is not None and tb:
            db = 1 - db
        pa, pb = isinstance(ea, _pl.Partial), isinstance(eb, _pl.Partial)
        if pa and pb:
            raise _Diverged(where, "both operands are partial on one axis")
        if pa or pb:
            if (pa and db is None) or (pb and da is None):
                out.append(_pl.Partial((ea if pa else eb).reduce_op))
                continue
            raise _Diverged(where, "a partial operand meets a sharded one")
        if da == ra - 1 and db == 0:
            out.append(_pl.Partial("sum"))
        elif da is not None and da < ra - 1 and db is None:
            out.append(_pl.Shard(da))
        elif da is None and db == 1:
            out.append(_pl.Shard(ra - 1))
        elif da is None and db is None:
            out.append(_pl.Replicate())
        else:
            raise _Diverged(where, "operand blocks that are no block of a "
                            "product (dims %s x %s on one axis)" % (da, db))
    return out


def _rule_elementwise(outs_rank, ops, where):
    """Broadcasting elementwise (add, mul, ...): a shard of an operand dim
    is that dim of the output; a partial operand makes the output partial
    (the verifier then judges the values: a partial times a partial, or a
    partial plus a replicated value, is no partial of the result)."""
    out = []
    for entries in zip(*[o.pl for o in ops]):
        got = _pl.Replicate()
        for o, e in zip(ops, entries):
            if isinstance(e, _pl.Shard):
                d = e.dim + (outs_rank - o.rank)
                if isinstance(got, _pl.Shard) and got.dim != d:
                    raise _Diverged(where, "operands sharded on different "
                                    "dims along one axis")
                if isinstance(got, _pl.Partial):
                    raise _Diverged(where, "a partial operand meets a "
                                    "sharded one")
                got = _pl.Shard(d)
            elif isinstance(e, _pl.Partial):
                if isinstance(got, _pl.Shard):
                    raise _Diverged(where, "a partial operand meets a "
                                    "sharded one")
                got = _pl.Partial(e.reduce_op)
        out.append(got)
    return out


def _swap_pl(pl, d0, d1):
    out = []
    for p in pl:
        if isinstance(p, _pl.Shard):
            p = _pl.Shard(d1 if p.dim == d0 else d0 if p.dim == d1 else p.dim)
        out.append(p)
    return out


_UNARY = {"gelu": "gelu", "relu": "relu", "silu": "silu", "tanh": "tanh",
          "exp": "exp", "sigmoid": "sigmoid"}
_BINARY = {"add": "add", "sub": "sub", "mul": "mul", "div": "div"}
_ALIAS = ("alias", "detach", "clone", "contiguous", "_to_copy", "lift_fresh",
          "wait_tensor", "_wrap_tensor_autograd")
_VIEWS = ("view", "_unsafe_view", "reshape")


def _make_mode(rec):
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.distributed.tensor import DTensor
    from . import torch as lt

    def placements_of(dt):
        return tuple(_pl.parse(lt.from_dtensor_placements(dt.placements)))

    def tensors(x):
        return [a for a in (x if isinstance(x, (list, tuple)) else [x])
                if isinstance(a, torch.Tensor)]

    class Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if any(issubclass(t, DTensor) for t in types):
                self.check_claims(func, args)
                return NotImplemented  # DTensor runs it: its local ops
            out = func(*args, **kwargs)
            if rec.quiet:
                return out
            self.record(func, args, kwargs, out)
            return out

        def check_claims(self, func, args):
            """A DTensor's placement must be the one its block holds."""
            if rec.quiet:
                return
            for i, a in enumerate(args):
                if not isinstance(a, DTensor):
                    continue
                got = rec.lookup(a._local_tensor)
                if got is None:
                    continue
                buf, swap = got
                held = buf.pl if swap is None else _swap_pl(buf.pl, *swap)
                said = _norm(placements_of(a), a.dim())
                if not _same(held, said):
                    raise _Diverged(
                        rec.where(str(func)),
                        "its input %d is the block of %s held as %s, but "
                        "the run calls it %s (a DTensor made from a local "
                        "block of another layout, e.g. by from_local or a "
                        "parallel style's input_layouts)"
                        % (i, buf.tensor, _pl.format(held),
                           _pl.format(said)))

        def record(self, func, args, kwargs, out):
            name = func.__name__ if hasattr(func, "__name__") else str(func)
            base = name.split(".")[0]
            aten = str(func)
            flat = [a for a in args for a in tensors(a)]
            known = [rec.lookup(a) for a in flat]
            if func is torch.ops.c10d.allreduce_.default:
                return self.c10d_allreduce(args)
            if not any(k is not None for k in known):
                return  # a creation op, or DTensor's fake propagation
            where = rec.where(aten)
            if any(k is None for k in known):
                raise UnsupportedError(
                    "%s: an operand that derives from no leaf of the program "
                    "(a tensor made inside the run); capture follows the "
                    "program's inputs, parameters and buffers only" % where)
            if base in _ALIAS or (base in _VIEWS and isinstance(
                    out, torch.Tensor) and tuple(out.shape) ==
                    tuple(flat[0].shape)):
                rec.bind(out, *known[0])
                return
            if base in ("t", "transpose", "permute", "numpy_T"):
                self.transpose(func, base, args, out, known[0], where)
                return
            if aten.startswith("_c10d_functional."):
                return self.funcol(base, args, out, known[0], where)
            if base in ("mm", "addmm", "matmul", "bmm"):
                return self.matmul(base, args, out, known, where, aten)
            if base in _UNARY and len(flat) == 1:
                buf = self.plain(known[0], where)
                attrs = {}
                if base == "gelu":
                    attrs["approximate"] = kwargs.get("approximate", "none")
                b = rec.op(_UNARY[base], [buf], buf.pl, buf.rank, aten,
                           attrs)
                rec.bind(out, b)
                return
            if base in _BINARY:
                scalar = [a for a in args[1:2] if not isinstance(
                    a, torch.Tensor)]
                if scalar and len(flat) == 1:
                    v = float(scalar[0])
                    if base in ("mul", "div"):
                        buf = self.plain(known[0], where)
                        f = v if base == "mul" else 1.0 / v
                        b = rec.op("scale", [buf], buf.pl, buf.rank, aten,
                                   {"factor": f})
                        rec.bind(out, b)
                        return
                if len(flat) == 2 and kwargs.get("alpha", 1) == 1:
                    bufs = [self.plain(k, where) for k in known]
                    pl = _rule_elementwise(out.dim(), bufs, where)
                    b = rec.op(_BINARY[base], bufs, pl, out.dim(), aten)
                    rec.bind(out, b)
                    return
            raise UnsupportedError(
                "%s: capture does not map this op onto a libplan op yet"
                % where)

        def plain(self, got, where):
            buf, swap = got
            if swap is None:
                return buf
            d0, d1 = swap
            perm = list(range(buf.rank))
            perm[d0], perm[d1] = perm[d1], perm[d0]
            return rec.op("permute", [buf], _swap_pl(buf.pl, d0, d1),
                          buf.rank, "aten.permute", {"perm": perm})

        def transpose(self, func, base, args, out, got, where):
            buf, swap = got
            rank = out.dim()
            if base in ("t", "numpy_T"):
                dims = (0, 1) if rank == 2 else None
            elif base == "transpose":
                dims = tuple(sorted(int(d) % rank for d in args[1:3]))
            else:
                perm = [int(d) % rank for d in args[1]]
                moved = [i for i, p in enumerate(perm) if p != i]
                dims = tuple(moved) if len(moved) == 2 else None
            if dims is None:
                raise UnsupportedError("%s: a permutation of more than two "
                                       "dims" % where)
            if swap is not None:
                if tuple(swap) == dims:
                    rec.bind(out, buf)
                    return
                buf, swap = self.plain(got, where), None
            rec.bind(out, buf, dims)

        def matmul(self, base, args, out, known, where, aten):
            if base == "addmm":
                bias, a, b = known[0], known[1], known[2]
            else:
                bias, (a, b) = None, known[:2]
            abuf, aswap = a
            bbuf, bswap = b
            if aswap is not None:
                abuf, aswap = self.plain(a, where), None
            rank = out.dim()
            if bswap is not None and bbuf.rank == 2:
                # x @ W.t() (+ b): libplan's linear, W as the program holds it
                pl = _rule_matmul(abuf, bbuf, where, False, True)
                ins = [abuf, bbuf]
                if bias is not None:
                    bb = self.plain(bias, where)
                    pl = _rule_elementwise(rank, [_Buf(0, "", pl, rank), bb],
                                           where)
                    ins.append(bb)
                o = rec.op("linear", ins, pl, rank, aten)
                rec.bind(out, o)
                return
            bbuf = self.plain(b, where)
            pl = _rule_matmul(abuf, bbuf, where, False, False)
            o = rec.op("matmul", [abuf, bbuf], pl, rank, aten)
            if bias is not None:
                bb = self.plain(bias, where)
                pl2 = _rule_elementwise(rank, [o, bb], where)
                o = rec.op("add", [o, bb], pl2, rank, aten)
            rec.bind(out, o)

        # ---- collectives ----------------------------------------------------
        def reduce_to(self, buf, axis, reduce, where, kind):
            e = buf.pl[axis]
            if not isinstance(e, _pl.Partial):
                raise _Diverged(where, "%s over %s of %s, which is %s there, "
                                "not partial" % (kind, rec.axes[axis],
                                                 buf.tensor,
                                                 _pl.format([e])))
            if e.reduce_op != reduce:
                raise _Diverged(where, "%s(%s) of a P(%s) value"
                                % (kind, reduce, e.reduce_op))

        def c10d_allreduce(self, args):
            import torch.distributed as dist
            from torch._C._distributed_c10d import ProcessGroup
            ts = args[0]
            pg = ProcessGroup.unbox(args[1])
            red = _RED.get(int(args[2].op()), None)
            where = rec.where("c10d.allreduce_")
            known = [rec.lookup(t) for t in ts]
            if not any(known):
                return
            if red is None:
                raise UnsupportedError("%s: a reduction libplan has no "
                                       "placement for" % where)
            axis = rec.axis_of(dist.get_process_group_ranks(pg), where)
            for t, got in zip(ts, known):
                buf = self.plain(got, where)
                self.reduce_to(buf, axis, red, where, "all_reduce")
                pl = list(buf.pl)
                pl[axis] = _pl.Replicate()
                rec.bind(t, rec.collective("all_reduce", buf, axis, pl,
                                           where, reduce=red))

        def funcol(self, base, args, out, got, where):
            import torch.distributed as dist
            from torch.distributed.distributed_c10d import \
                _resolve_process_group
            buf = self.plain(got, where)
            group = _resolve_process_group(args[-1])
            axis = rec.axis_of(dist.get_process_group_ranks(group), where)
            pl = list(buf.pl)
            if base == "all_reduce":
                red = args[1]
                self.reduce_to(buf, axis, red, where, "all_reduce")
                pl[axis] = _pl.Replicate()
                b = rec.collective("all_reduce", buf, axis, pl, where,
                                   reduce=red)
            elif base == "all_gather_into_tensor":
                e = pl[axis]
                if not (isinstance(e, _pl.Shard) and e.dim == 0):
                    raise _Diverged(where, "all_gather along dim 0 over %s "
                                    "of %s, which is %s there"
                                    % (rec.axes[axis], buf.tensor,
                                       _pl.format([e])))
                pl[axis] = _pl.Replicate()
                b = rec.collective("all_gather", buf, axis, pl, where, dim=0)
            elif base == "reduce_scatter_tensor":
                red = args[1]
                self.reduce_to(buf, axis, red, where, "reduce_scatter")
                pl[axis] = _pl.Shard(0)
                b = rec.collective("reduce_scatter", buf, axis, pl, where,
                                   dim=0, reduce=red)
            else:
                raise UnsupportedError("%s: capture does not map this "
                                       "collective yet" % where)
            rec.bind(out, b)

    return Mode()


def _redistribute_hook(rec, orig):
    """Wraps DTensor's redistribute_local_tensor: a redistribution is
    recorded as the libplan steps of its placement change, mesh dim by mesh
    dim (the ops DTensor runs for it are not recorded one by one)."""
    from . import torch as lt

    def hooked(local, current, target, *args, **kwargs):
        if rec.quiet:
            return orig(local, current, target, *args, **kwargs)
        got = rec.lookup(local)
        rec.quiet += 1
        try:
            res = orig(local, current, target, *args, **kwargs)
        finally:
            rec.quiet -= 1
        if got is None:
            return res
        where = rec.where("redistribute %s -> %s" % (
            lt.from_dtensor_placements(current.placements),
            lt.from_dtensor_placements(target.placements)))
        buf, swap = got
        if swap is not None:
            raise UnsupportedError("%s: a redistribution of a transposed "
                                   "view" % where)
        rank = len(current.shape) if hasattr(current, "shape") else buf.rank
        cur = _norm(_pl.parse(lt.from_dtensor_placements(current.placements)),
                    rank)
        tgt = _norm(_pl.parse(lt.from_dtensor_placements(target.placements)),
                    rank)
        if not _same(buf.pl, cur):
            raise _Diverged(where, "the block of %s held as %s is "
                            "redistributed as if it were %s"
                            % (buf.tensor, _pl.format(buf.pl),
                               _pl.format(cur)))
        for axis in range(len(cur) - 1, -1, -1):
            c, t = buf.pl[axis], tgt[axis]
            if _key(c) == _key(t):
                continue
            pl = list(buf.pl)
            pl[axis] = t
            if isinstance(c, _pl.Shard) and isinstance(t, _pl.Replicate):
                buf = rec.collective("all_gather", buf, axis, pl, where,
                                     dim=c.dim)
            elif isinstance(c, _pl.Partial) and isinstance(t, _pl.Replicate):
                buf = rec.collective("all_reduce", buf, axis, pl, where,
                                     reduce=c.reduce_op)
            elif isinstance(c, _pl.Partial) and isinstance(t, _pl.Shard):
                buf = rec.collective("reduce_scatter", buf, axis, pl, where,
                                     dim=t.dim, reduce=c.reduce_op)
            elif isinstance(c, _pl.Replicate) and isinstance(t, _pl.Shard):
                buf = rec.collective("slice", buf, axis, pl, where,
                                     dim=t.dim)
            elif isinstance(c, _pl.Replicate) and isinstance(t, _pl.Partial):
                kind = "zero_non_owner" if t.reduce_op == "sum" else \
                    "relabel"
                fields = {} if kind == "zero_non_owner" else \
                    {"reduce": t.reduce_op}
                buf = rec.collective(kind, buf, axis, pl, where, **fields)
            elif isinstance(c, _pl.Shard) and isinstance(t, _pl.Shard):
                buf = rec.collective("all_to_all", buf, axis, pl, where,
                                     dim=c.dim, to_dim=t.dim)
            else:
                raise UnsupportedError("%s: a change libplan has no step "
                                       "for" % where)
        rec.bind(res, buf)
        return res

    return hooked


# ---- the lowered program ----------------------------------------------------

def _q(s):
    return json.dumps(s)


def _lowered_text(program, axes, sizes, rec, leaves, binds, outputs,
                  required):
    out = ['libplan-lowered: "1.0"', "program:"]
    # the program's own text, its body (indented under `program:`) only
    body = [ln for ln in program.text().splitlines()
            if ln.startswith("  ") and ln.strip()]
    out += body
    out.append("mesh:")
    out.append("  axes: [%s]" % ", ".join("%s=%d" % (a, s)
                                          for a, s in zip(axes, sizes)))
    ops = [e for e in rec.events if e["kind"] == "op"]
    bufname = {}
    counts = {}
    names = []
    for b in rec.bufs:
        k = counts.get(b.tensor, 0)
        counts[b.tensor] = k + 1
        bufname[b.index] = "%s@%d" % (b.tensor, k)
        names.append((bufname[b.index], b.tensor, _pl.format(b.pl)))
    bound = {}
    for t, bidx in binds.items():
        k = counts.get(t, 0)
        counts[t] = k + 1
        bound[t] = "%s@%d" % (t, k)
        names.append((bound[t], t, _pl.format(rec.bufs[bidx].pl)))
    replaced = [o.name for o in program.ops]
    out.append("regions:")
    out.append('  - name: "captured"')
    out.append('    body_hash: "xxh3:00000000000000000000000000000000"')
    out.append("    replaces: [%s]" % ", ".join(_q(n) for n in replaced))
    out.append("    ops:")
    for e in ops:
        ins = ", ".join(_q(rec.bufs[i].tensor) for i in e["ins"])
        attrs = ", attrs: {%s}" % ", ".join(
            "%s: %s" % (k, json.dumps(v)) for k, v in e["attrs"].items()) \
            if e["attrs"] else ""
        out.append("      - {name: %s, op: %s, in: [%s], out: %s%s}"
                   % (_q(e["name"]), e["op"], ins, _q(e["name"]), attrs))
    out.append("buffers:")
    for n, t, p in names:
        out.append("  %s: {tensor: %s, placement: %s}" % (_q(n), _q(t),
                                                          _q(p)))
    out.append("steps:")
    for t, bidx in leaves:
        out.append("  - {input: %s}" % _q(bufname[bidx]))
    bind_after = {}
    for t, bidx in binds.items():
        bind_after.setdefault(bidx, []).append(t)
    for e in rec.events:
        if e["kind"] == "op":
            out.append("  - {op: %s, in: [%s], out: [%s]}" % (
                _q(e["name"]), ", ".join(_q(bufname[i]) for i in e["ins"]),
                _q(bufname[e["out"]])))
            last = e["out"]
        else:
            extra = "".join(", %s: %s" % (k, e[k]) for k in
                            ("dim", "to_dim", "reduce") if k in e)
            out.append("  - {collective: %s, axis: %s%s, in: %s, out: %s}"
                       % (e["coll"], e["axis"], extra, _q(bufname[e["in"]]),
                          _q(bufname[e["out"]])))
            last = e["out"]
        for t in bind_after.pop(last, []):
            out.append("  - {bind: %s, from: %s}" % (_q(bound[t]),
                                                     _q(bufname[last])))
    layouts = [(t, bufname[b]) for t, b in leaves] + \
        [(t, bound[t]) for t in binds]
    out.append("layouts: {%s}" % ", ".join("%s: %s" % (_q(t), _q(b))
                                           for t, b in layouts))
    out.append("outputs: {%s}" % ", ".join(
        "%s: %s" % (_q(t), _q(bound[t])) for t in outputs))
    out.append("required: {%s}" % ", ".join(
        "%s: %s" % (_q(t), _q(required[t])) for t in outputs))
    return "\n".join(out) + "\n"


def _verify(text, path, tool):
    from ._search import find_tool
    exe = find_tool(tool)
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)
    r = subprocess.run([exe, "verify", "--report", "json", path],
                       capture_output=True, text=True)
    if r.returncode not in (0, 1):
        raise UsageError("plan verify of the captured program failed (exit "
                         "%d): %s" % (r.returncode, (r.stderr or r.stdout)
                                      .strip().splitlines()[:1]))
    return json.loads(r.stdout)


def capture(module, inputs, program, mesh=None, placements=None,
            outputs=None, path=None, tool=None):
    """Runs module(*inputs) once on this rank (every rank of the process
    group calls it) and checks what ran against `program`, the
    single-device program (program_from_module's, or a Plan: its program,
    mesh and output placements). `mesh`: {axis: size} (row-major over the
    global ranks), a libplan Mesh, or None with a Plan. `placements`:
    {leaf: placement} for the leaves the run holds as plain tensors
    (inputs by the program's input names, parameters and buffers by their
    qualified names); a DTensor leaf gives its own, a leaf given neither is
    replicated. `outputs`: {program output: placement required} (default:
    the Plan's, else replicated). Writes the lowered program to `path`
    (default: a temporary file on rank 0) and verifies it there with the
    `plan` tool; every rank gets the same CaptureReport. Returns
    (module's result, CaptureReport)."""
    from . import torch as lt
    lt._require()
    import torch
    import torch.distributed as dist
    import torch.distributed.tensor._redistribute as _red
    import torch.distributed.tensor._dispatch as _disp
    from ._plan import Plan
    if not dist.is_initialized():
        raise UsageError("capture needs an initialised process group (one "
                         "process per mesh rank)")
    plan = program if isinstance(program, Plan) else None
    prog = plan.program if plan is not None else program
    if mesh is None:
        if plan is None:
            raise UsageError("capture needs a mesh: {axis: size}")
        mesh = plan.mesh
    if hasattr(mesh, "axes"):
        axes, sizes = list(mesh.axes), list(mesh.sizes)
    else:
        axes, sizes = list(mesh), [int(mesh[a]) for a in mesh]
    world = dist.get_world_size()
    n = 1
    for s in sizes:
        n *= s
    if n != world:
        raise UsageError("the mesh has %d ranks, the process group %d"
                         % (n, world))
    rec = _Recorder(axes, sizes)
    roles = {t.name: t.role for t in prog.tensors}
    shapes = {t.name: len(t.shape) for t in prog.tensors}
    given = dict(placements or {})
    for k in given:
        if k not in roles:
            raise UsageError("placements names %s, which is no tensor of "
                             "the program" % k)
    leaves = []

    def leaf(name, t):
        dt_pl = None
        if type(t).__name__ in ("DTensor",) or hasattr(t, "_local_tensor"):
            dt_pl = _pl.parse(lt.from_dtensor_placements(t.placements))
        pl = dt_pl if dt_pl is not None else given.get(
            name, "R" * len(axes))
        pl = _norm(_entries(pl, len(axes)), shapes[name])
        b = rec.new(name, pl, shapes[name])
        rec.bind(t, b)
        local = getattr(t, "_local_tensor", None)
        if local is not None:
            rec.bind(local, b)
        leaves.append((name, b.index))

    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else \
        (inputs,)
    prog_inputs = [t.name for t in prog.tensors if t.role == "input"]
    tensors_in = [x for x in inputs if isinstance(x, torch.Tensor)]
    if len(tensors_in) != len(prog_inputs):
        raise UsageError("the program has %d inputs, capture was given %d "
                         "tensors" % (len(prog_inputs), len(tensors_in)))
    for name, x in zip(prog_inputs, tensors_in):
        leaf(name, x)
    for qname, p in list(module.named_parameters()) + \
            list(module.named_buffers()):
        if qname in roles:
            leaf(qname, p)
    op_names = {o.name: o for o in prog.ops}
    binds = {}
    hooks = []

    def pre(name):
        def hook(mod, args):
            rec.path.append(name)
        return hook

    def post(name):
        def hook(mod, args, result):
            rec.path.pop()
            o = op_names.get(name)
            if o is not None and len(o.outputs) == 1 and \
                    isinstance(result, torch.Tensor):
                got = rec.lookup(result)
                if got is not None and got[1] is None:
                    binds[o.outputs[0]] = got[0].index
        return hook

    for name, sub in module.named_modules():
        if name:
            # first, so a parallel style's input hook runs inside the path
            hooks.append(sub.register_forward_pre_hook(pre(name),
                                                       prepend=True))
            hooks.append(sub.register_forward_hook(post(name)))
    orig = _red.redistribute_local_tensor
    hooked = _redistribute_hook(rec, orig)
    failure = None
    result = None
    _red.redistribute_local_tensor = hooked
    _disp.redistribute_local_tensor = hooked
    try:
        with _make_mode(rec):
            result = module(*inputs)
    except _Diverged as d:
        failure = (d.where, d.why)
    finally:
        _red.redistribute_local_tensor = orig
        _disp.redistribute_local_tensor = orig
        for h in hooks:
            h.remove()
    prog_outputs = [t.name for t in prog.tensors if t.role == "output"] or \
        list(getattr(prog, "outputs", []) or [])
    if not prog_outputs:
        prog_outputs = [o.outputs[-1] for o in prog.ops[-1:]]
    if failure is None:
        res = result if isinstance(result, (tuple, list)) else [result]
        for t, r in zip(prog_outputs, res):
            got = rec.lookup(r) if isinstance(r, torch.Tensor) else None
            if got is None or got[1] is not None:
                failure = ("the module's result",
                           "output %s is no value capture followed" % t)
                break
            binds[t] = got[0].index
    # every rank must have run the same sequence
    sigs = [None] * world
    dist.all_gather_object(sigs, (rec.signature, failure))
    for r, (sig, fail) in enumerate(sigs):
        if fail is not None and failure is None:
            failure = ("rank %d: %s" % (r, fail[0]), fail[1])
    if failure is None:
        base = sigs[0][0]
        for r, (sig, _) in enumerate(sigs[1:], 1):
            if sig != base:
                k = next((i for i, (a, b) in enumerate(zip(base, sig))
                          if a != b), min(len(base), len(sig)))
                a = base[k] if k < len(base) else ("nothing",)
                b = sig[k] if k < len(sig) else ("nothing",)
                failure = ("rank %d, event %d (%s)" % (r, k, b[-1] if len(
                    b) > 1 else "end"),
                    "rank 0 ran %s, rank %d ran %s" % (
                        " ".join(map(str, a[:-1] or a)), r,
                        " ".join(map(str, b[:-1] or b))))
                break
    counts = {}
    for e in rec.events:
        if e["kind"] == "collective":
            counts[e["coll"]] = counts.get(e["coll"], 0) + 1
    if failure is not None:
        return result, CaptureReport(False, failure[0], None, failure[1],
                                     collectives=counts)
    req = {}
    for t in prog_outputs:
        want = (outputs or {}).get(t)
        if want is None and plan is not None:
            want = plan.placement(t)
        req[t] = _pl.format(_norm(_entries(want or "R" * len(axes),
                                           len(axes)), shapes[t]))
    text = _lowered_text(prog, axes, sizes, rec, leaves, binds,
                         prog_outputs, req)
    report = None
    if dist.get_rank() == 0:
        where = path
        tmp = None
        if where is None:
            tmp = tempfile.mkdtemp(prefix="libplan-capture-")
            where = os.path.join(tmp, "captured.lowered.yaml")
        try:
            report = _verify(text, where, tool)
            report = (report, where if path else None)
        except Exception as e:  # every rank must hear of it
            report = ("error", "%s: %s" % (type(e).__name__, e))
        finally:
            if tmp:
                import shutil
                shutil.rmtree(tmp, ignore_errors=True)
    box = [report]
    dist.broadcast_object_list(box, src=0)
    report = box[0]
    if report[0] == "error":
        raise UsageError(report[1])
    verdict, written = report
    equal = verdict.get("verdict") == "equal"
    first, op, diag = None, None, None
    if not equal:
        div = verdict.get("first_divergent") or {}
        op, tensor = div.get("op"), div.get("tensor")
        diag = div.get("diagnosis")
        first = _pytorch_terms(rec, binds, op, tensor, op_names)
        # the first program tensor that differs, in the module's terms
        for row in verdict.get("tensors", []):
            if row.get("kind") == "tensor" and row.get("mismatches") and \
                    row.get("tensor") in binds:
                diag = "%s; program tensor '%s' (%s) differs from the " \
                    "single-device program in %d of %d elements" % (
                        diag, row["tensor"], _pytorch_terms(
                            rec, binds, None, row["tensor"], op_names),
                        row["mismatches"], row["compared"])
                break
    return result, CaptureReport(equal, first, op, diag, text, written,
                                 verdict, counts)


def _pytorch_terms(rec, binds, op, tensor, op_names):
    """The recorded op that made the divergent tensor: its module path and
    aten op (the verifier names the program op and tensor)."""
    for e in rec.events:
        if e.get("name") is not None and e["name"] == op:
            return e["where"]
    t = tensor
    if t is None and op in op_names and op_names[op].outputs:
        t = op_names[op].outputs[0]
    b = binds.get(t)
    if b is None:
        return "program op %s" % op if op else None
    for e in rec.events:
        if e.get("out") == b:
            return e["where"]
    return "program tensor %s" % t
