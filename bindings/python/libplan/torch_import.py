"""libplan.torch.plan_from_module: the plan of a model parallelized by hand.

A module parallelized with torch's `parallelize_module` (ColwiseParallel,
RowwiseParallel, SequenceParallel, PrepareModuleInput) and FSDP2's
`fully_shard` keeps what it runs in three places: its parameters are
DTensors (placed on the mesh, or on a sub-mesh of it named by its axes),
the styles' hooks hold the layouts each styled module takes and gives, and
FSDP gathers the parameters of the modules it wraps before they are used.
`plan_from_module(module, mesh, example_inputs)` reads all three:

- each parameter's placement: its DTensor placements, each under the mesh
  axis its (sub-)mesh names, stitched into one placement over `mesh`
  (an axis the DTensor does not use is R; FSDP's _StridedShard of a dim
  another axis also splits becomes the nested S(d:1)S(d:0));
- the program: the module traced as program_from_module does, with the
  hooks off and each parameter at its global shape;
- every op's strategy, derived in program order as the ranks compute: a
  styled module takes its input at the style's desired layout (the other
  axes as the value arrived), a parameter FSDP gathers is read replicated
  on FSDP's axes, and each op's output placement follows from its inputs'
  by the op's own rule (a local op keeps a split dim, a contraction over a
  split dim is a partial sum); a style's output layout (RowwiseParallel's
  Replicate) is the placement its consumers read, so the plan
  redistributes there, as the hook does.

An input the style says is at one placement while the producer delivered
another (a local tensor read at the wrong layout: a bug in the hand-written
plan) raises UnsupportedError naming the module.
"""

import json
import re

from . import placements as _pl
from .errors import InvalidError, UnsupportedError, UsageError

__all__ = ["plan_from_module"]

_ELEMENTWISE = ("gelu", "relu", "silu", "tanh", "sigmoid", "exp", "rsqrt",
                "neg", "scale", "add_scalar", "mul_scalar", "dropout",
                "square", "cast")
_LINEAR_IN_FIRST = ("scale", "neg", "mul_scalar", "dropout", "cast")
_BINARY = ("add", "sub", "mul", "div", "where")
_NORMS = ("layernorm", "rmsnorm")


def _torch():
    import torch
    return torch


# ---- hooks: the styles parallelize_module installed ------------------------

def _closure_values(fn):
    out = []
    for c in getattr(fn, "__closure__", None) or ():
        try:
            out.append(c.cell_contents)
        except ValueError:  # an empty cell
            pass
    return out


def _style_of(module, path):
    """{"kind", "mesh", ...} of the style parallelize_module applied to
    `module` (read from its hooks), or None."""
    import functools
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor.parallel.style import ParallelStyle
    found, mesh = {}, None
    hooks = list(module._forward_pre_hooks.values()) + \
        list(module._forward_hooks.values())
    for h in hooks:
        for v in _closure_values(h):
            if isinstance(v, DeviceMesh):
                mesh = v
            elif isinstance(v, functools.partial):
                q = getattr(v.func, "__qualname__", "")
                owner, _, what = q.rpartition(".")
                if owner in ("ColwiseParallel", "RowwiseParallel",
                             "SequenceParallel"):
                    found["kind"] = owner
                    found[what] = v.args
            elif isinstance(v, ParallelStyle):
                kind = type(v).__name__
                if kind != "PrepareModuleInput":
                    raise UnsupportedError(
                        "%s: %s is not imported (ColwiseParallel, "
                        "RowwiseParallel, SequenceParallel and "
                        "PrepareModuleInput are)" % (path or "<root>", kind))
                if v.with_kwargs:
                    raise UnsupportedError(
                        "%s: PrepareModuleInput with keyword-argument "
                        "layouts is not imported" % (path or "<root>"))
                found["kind"] = kind
                found["style"] = v
    if not found:
        return None
    if mesh is None:
        raise UnsupportedError("%s: the %s hooks hold no device mesh"
                               % (path or "<root>", found["kind"]))
    found["mesh"] = mesh
    return found


def _fsdp_axes(module):
    """{qualified param name: FSDP's mesh axis names} of every parameter
    fully_shard manages."""
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:
        return {}
    out = {}
    qual = {}
    for mpath, m in module.named_modules():
        for pname, _ in m.named_parameters(recurse=False):
            qual[(id(m), pname)] = (mpath + "." if mpath else "") + pname
    for mpath, m in module.named_modules():
        if not isinstance(m, FSDPModule):
            continue
        state = m._get_fsdp_state()
        groups = getattr(state, "_fsdp_param_groups", None)
        if groups is None:
            g = getattr(state, "_fsdp_param_group", None)
            groups = [g] if g is not None else []
        for g in groups:
            for fp in g.fsdp_params:
                info = fp._module_info
                names = fp.mesh_info.mesh.mesh_dim_names
                if names is None:
                    raise UnsupportedError(
                        "%s: fully_shard's mesh has no axis names; give "
                        "the DeviceMesh mesh_dim_names" % (mpath or "<root>"))
                q = qual.get((id(info.module), info.param_name))
                if q is not None:
                    out[q] = tuple(names)
    return out


class _Bare:
    """Within: every hook off, FSDP's module classes undone, each DTensor
    parameter and buffer replaced by a plain tensor of its global shape
    (zeros: tracing reads shapes only; a DTensor buffer is gathered, its
    values may be a const's recipe). Restored on exit."""

    def __init__(self, module):
        self.module = module

    def __enter__(self):
        import collections
        torch = _torch()
        from torch.distributed.tensor import DTensor
        try:
            from torch.distributed.fsdp import FSDPModule
        except ImportError:
            FSDPModule = None
        self.saved = []
        for _, m in self.module.named_modules():
            hooks = {}
            for attr in ("_forward_pre_hooks", "_forward_hooks",
                         "_forward_pre_hooks_with_kwargs",
                         "_forward_hooks_with_kwargs",
                         "_forward_hooks_always_called"):
                if hasattr(m, attr):
                    hooks[attr] = getattr(m, attr)
                    setattr(m, attr, collections.OrderedDict())
            cls = type(m)
            if FSDPModule is not None and isinstance(m, FSDPModule):
                bases = [b for b in cls.__bases__
                         if not issubclass(b, FSDPModule)]
                if len(bases) == 1:
                    m.__class__ = bases[0]
            state = {}
            for name, p in list(m._parameters.items()):
                if isinstance(p, DTensor):
                    state[("p", name)] = p
                    m._parameters[name] = torch.nn.Parameter(
                        torch.zeros(p.shape, dtype=p.dtype),
                        requires_grad=p.requires_grad)
            for name, b in list(m._buffers.items()):
                if isinstance(b, DTensor):
                    state[("b", name)] = b
                    m._buffers[name] = b.full_tensor()
            self.saved.append((m, hooks, cls, state))
        return self

    def __exit__(self, *exc):
        for m, hooks, cls, state in self.saved:
            for attr, v in hooks.items():
                setattr(m, attr, v)
            m.__class__ = cls
            for (kind, name), v in state.items():
                (m._parameters if kind == "p" else m._buffers)[name] = v
        return False


# ---- placements: per-axis lists --------------------------------------------

def _norm(p, rank):
    if isinstance(p, _pl.Shard) and p.dim < 0:
        return _pl.Shard(p.dim + rank, p.level)
    return p


def _from_dtensor(p, rank, what):
    """One DTensor placement as a libplan one (a _StridedShard as a Shard
    of its dim, marked inner by the caller)."""
    if type(p).__name__ == "_StridedShard":
        return _pl.Shard(p.dim % rank)
    if p.is_shard():
        return _pl.Shard(p.dim % rank)
    if p.is_partial():
        op = str(getattr(p, "reduce_op", "sum")).lower()
        return _pl.Partial(op.replace("reduceop.", ""))
    if p.is_replicate():
        return _pl.Replicate()
    raise UnsupportedError("%s: placement %r has no libplan spelling"
                           % (what, p))


def _stitch(value, axes, sizes, what):
    """A DTensor's (or plain tensor's) placement over the whole mesh, one
    entry per axis."""
    from torch.distributed.tensor import DTensor
    out = [_pl.Replicate() for _ in axes]
    if not isinstance(value, DTensor):
        return out
    names = value.device_mesh.mesh_dim_names
    if names is None:
        raise UnsupportedError("%s: its DeviceMesh has no axis names; give "
                               "the mesh mesh_dim_names" % what)
    rank = value.dim()
    strided = []
    for name, p in zip(names, value.placements):
        if name not in axes:
            raise UnsupportedError("%s is placed on mesh axis %r, which the "
                                   "mesh %s does not have"
                                   % (what, name, list(axes)))
        a = axes.index(name)
        out[a] = _from_dtensor(p, rank, what)
        if type(p).__name__ == "_StridedShard":
            strided.append((a, p))
    for a, p in strided:
        d = out[a].dim
        later = [b for b in range(len(axes)) if b != a and
                 isinstance(out[b], _pl.Shard) and out[b].dim == d]
        prod = 1
        for b in later:
            prod *= sizes[b]
        if len(later) != 1 or getattr(p, "split_factor", None) != prod:
            raise UnsupportedError("%s: %r nests dim %d in a way libplan's "
                                   "import does not read" % (what, p, d))
        out[a] = _pl.Shard(d, 1)
        out[later[0]] = _pl.Shard(d, 0)
    return out


def _layouts(layouts, style_axes, base, rank):
    """`base` (a per-axis list) with the style's layouts (one per style
    axis, DTensor placements) written on their axes."""
    out = list(base)
    for a, p in zip(style_axes, layouts):
        out[a] = _norm(_from_dtensor(p, rank, "a style layout"), rank)
    return out


def _fmt(entries):
    return _pl.format(entries)


# ---- each op's output placement from its inputs' ---------------------------

def _attrs_of(prog_text):
    """{op name: attrs dict} from a program's text."""
    out = {}
    line = re.compile(r'^\s*- \{name: ("(?:[^"\\]|\\.)*"|[^,]+), .*?'
                      r'attrs: (\{.*\})\}\s*$')
    for ln in prog_text.splitlines():
        m = line.match(ln)
        if not m:
            continue
        name = m.group(1)
        if name.startswith('"'):
            name = json.loads(name)
        text = re.sub(r'([{,]\s*)([A-Za-z_][A-Za-z0-9_]*):', r'\1"\2":',
                      m.group(2))
        try:
            out[name] = json.loads(text)
        except ValueError:
            out[name] = {}
    return out


class _Refuse(Exception):
    pass


def _same(entries):
    """The one non-replicated entry among `entries` (all the non-R ones
    must agree), or R."""
    got = [e for e in entries if not isinstance(e, _pl.Replicate)]
    if not got:
        return _pl.Replicate()
    first = got[0]
    for e in got[1:]:
        if _pl.format([e]) != _pl.format([first]):
            raise _Refuse("its inputs are placed %s and %s on one axis"
                          % (_pl.format([first]), _pl.format([e])))
    return first


def _reshape_dim(d, src, dst):
    """The dim of `dst` a split of dim d of `src` lands on (row-major:
    the dim where d's block starts, of a size the split can cut)."""
    before = 1
    for n in src[:d]:
        before *= n
    acc = 1
    for e, n in enumerate(dst):
        if acc == before and n > 1:
            if n % src[d] == 0 or src[d] % n == 0 or n == src[d]:
                return e
            break
        acc *= n
    raise _Refuse("a reshape from %s to %s moves split dim %d"
                  % (list(src), list(dst), d))


def _axis_rule(kind, attrs, ins, shapes, outs):
    """One mesh axis: (input entries, output entries) of an op whose
    inputs arrive as `ins`."""
    R = _pl.Replicate()
    ro = len(outs[0]) if outs else 0
    ins = list(ins)

    def partial_ok(e):
        return not isinstance(e, _pl.Partial)

    if kind in _ELEMENTWISE or kind in ("softmax",) + _NORMS:
        x = ins[0]
        if isinstance(x, _pl.Partial) and kind not in _LINEAR_IN_FIRST:
            raise _Refuse("a partial value into %s" % kind)
        if kind == "softmax" and isinstance(x, _pl.Shard) and \
                x.dim == attrs.get("dim", -1) % ro:
            raise _Refuse("softmax over its split dim")
        if kind in _NORMS and isinstance(x, _pl.Shard) and \
                x.dim == ro - 1:
            raise _Refuse("%s over its split dim" % kind)
        return ins, [x]
    if kind in _BINARY:
        aligned = []
        for e, s in zip(ins, shapes):
            if isinstance(e, _pl.Shard):
                e = _pl.Shard(e.dim + ro - len(s), e.level)
            aligned.append(e)
        parts = [e for e in aligned if isinstance(e, _pl.Partial)]
        if parts and (kind not in ("add", "sub", "mul", "div") or
                      (kind in ("add", "sub") and len(parts) != len(ins))
                      or (kind in ("mul", "div") and len(parts) > 1)
                      or (kind == "div" and not isinstance(aligned[0],
                                                           _pl.Partial))):
            raise _Refuse("a partial value into %s" % kind)
        return ins, [_same(aligned)]
    if kind == "reshape":
        x = ins[0]
        if isinstance(x, _pl.Shard):
            x = _pl.Shard(_reshape_dim(x.dim, shapes[0], outs[0]), x.level)
        return ins, [x]
    if kind == "permute":
        x = ins[0]
        if isinstance(x, _pl.Shard):
            x = _pl.Shard(list(attrs["perm"]).index(x.dim), x.level)
        return ins, [x]
    if kind == "expand":
        return ins, [ins[0]]
    if kind == "split":
        x = ins[0]
        if isinstance(x, _pl.Shard) and x.dim == attrs.get("dim", 0) % ro:
            raise _Refuse("a split along its split dim")
        return ins, [x] * len(outs)
    if kind == "concat":
        x = _same(ins)
        if isinstance(x, _pl.Shard) and x.dim == attrs.get("dim", 0) % ro:
            raise _Refuse("a concat along its split dim")
        return ins, [x]
    if kind in ("matmul", "linear"):
        a, b = ins[0], ins[1]
        ra, rb = len(shapes[0]), len(shapes[1])
        if kind == "linear":
            ta, tb = False, True
        else:
            ta, tb = attrs.get("transpose_a", False), \
                attrs.get("transpose_b", False)
        am = ra - 1 if ta else ra - 2   # a's row dim
        ak = ra - 2 if ta else ra - 1
        bk = rb - 1 if tb else rb - 2
        bn = rb - 2 if tb else rb - 1
        if kind == "linear":
            am = None  # every dim of x but the last is a row dim
        out = R
        if isinstance(a, _pl.Partial) and isinstance(b, _pl.Partial):
            raise _Refuse("two partial operands of %s" % kind)
        if isinstance(a, _pl.Shard) and isinstance(b, _pl.Shard) and \
                a.dim == ak and b.dim == bk:
            out = _pl.Partial("sum")
        elif isinstance(a, _pl.Shard) and a.dim == ak:
            raise _Refuse("%s's contracted dim split on one operand only"
                          % kind)
        elif isinstance(b, _pl.Shard) and b.dim == bk:
            raise _Refuse("%s's contracted dim split on one operand only"
                          % kind)
        elif isinstance(a, _pl.Shard) and isinstance(b, _pl.Shard) and \
                a.dim < ra - 2 and b.dim < rb - 2 and kind == "matmul":
            out = _pl.Shard(a.dim + ro - ra, a.level)
        elif isinstance(a, _pl.Shard) and isinstance(b, _pl.Shard):
            raise _Refuse("both operands of %s split on one axis" % kind)
        elif isinstance(a, _pl.Shard):
            if kind == "linear" or a.dim == am:
                out = _pl.Shard(ro - 2 if a.dim == am else a.dim + ro - ra,
                                a.level)
            else:
                out = _pl.Shard(a.dim + ro - ra, a.level)
        elif isinstance(b, _pl.Shard):
            if b.dim == bn:
                out = _pl.Shard(ro - 1, b.level)
            elif kind == "linear":
                raise _Refuse("linear's weight split on dim %d" % b.dim)
            else:
                out = _pl.Shard(b.dim + ro - rb, b.level)
        elif isinstance(a, _pl.Partial):
            out = a
        elif isinstance(b, _pl.Partial):
            out = b
        ins_out = [a, b]
        if kind == "linear" and len(ins) > 2:
            bias = ins[2]
            if isinstance(out, _pl.Partial):
                bias = _pl.Partial("sum")  # added once to the partial sums
            elif isinstance(out, _pl.Shard) and out.dim == ro - 1:
                bias = _pl.Shard(0, out.level)
            ins_out.append(bias)
        return ins_out, [out]
    if kind == "embedding":
        w, ids = ins[0], ins[1]  # libplan's embedding: [table, ids]
        if isinstance(w, _pl.Shard) and w.dim == 1 and \
                isinstance(ids, _pl.Replicate):
            return ins, [_pl.Shard(ro - 1, w.level)]
        if isinstance(w, _pl.Shard) and w.dim == 0 and \
                isinstance(ids, _pl.Replicate):
            # a vocab-parallel table (RowwiseParallel on nn.Embedding):
            # each rank looks up the rows it holds, a partial sum
            return ins, [_pl.Partial("sum")]
        if isinstance(w, _pl.Replicate):
            return ins, [ids]
        raise _Refuse("an embedding table split on dim %d" % w.dim)
    if kind == "attention":
        x = _same(ins[:3])
        if isinstance(x, _pl.Shard) and x.dim >= len(shapes[0]) - 2:
            raise _Refuse("attention with its sequence or head dim split")
        return ins, [x]
    if kind in ("reduce_sum", "reduce_mean"):
        x = ins[0]
        rank = len(shapes[0])
        dims = sorted(d % rank for d in attrs.get("dims", []))
        if isinstance(x, _pl.Shard) and x.dim in dims:
            # each rank reduces its block: a partial sum (or average)
            return ins, [_pl.Partial("sum" if kind == "reduce_sum"
                                     else "avg")]
        if isinstance(x, _pl.Shard) and not attrs.get("keepdim", False):
            x = _pl.Shard(x.dim - sum(1 for d in dims if d < x.dim),
                          x.level)
        if isinstance(x, _pl.Partial) and kind == "reduce_mean":
            raise _Refuse("a partial value into reduce_mean")
        return ins, [x]
    if all(isinstance(e, _pl.Replicate) for e in ins):
        return ins, [R] * len(outs)
    raise _Refuse("the import has no rule for %s on a split or partial "
                  "value" % kind)


# ---- the whole import ------------------------------------------------------

def _mesh_of(mesh):
    from torch.distributed.device_mesh import DeviceMesh
    if not isinstance(mesh, DeviceMesh):
        raise UsageError("plan_from_module needs a DeviceMesh, not %s"
                         % type(mesh).__name__)
    names = mesh.mesh_dim_names
    if names is None:
        raise UsageError("the DeviceMesh has no axis names (mesh_dim_names)")
    return list(names), list(mesh.shape), \
        [int(d) for d in mesh.mesh.reshape(-1).tolist()]


def plan_from_module(module, mesh, example_inputs, inputs=None, name=None,
                     tracer="fx", kwargs=None):
    """The plan of `module` as it was parallelized by hand (see the module's
    docstring) on `mesh`, a DeviceMesh with axis names (the mesh the
    styles' and FSDP's meshes are sub-meshes of). `example_inputs` are the
    module's full (global) inputs, for the trace; `inputs` ({input name:
    placement}) says how each input is split; by default dim 0 is split
    over the axes no parameter is placed on by a style (data parallel, and
    FSDP's) and replicated on the rest. Every rank must call it (a DTensor
    buffer is gathered). Returns a Plan that validates; raises
    UnsupportedError for what it does not read. `tracer`: "fx"
    (program_from_module) or "export" (program_from_export, with
    `kwargs`: a transformers model, {"use_cache": False}); with export an
    op is named by its module path and node, and a styled module's op is
    the one linear or embedding op inside it."""
    from . import torch as lt
    from .builder import make_plan
    lt._require()
    axes, sizes, devices = _mesh_of(mesh)
    fsdp = _fsdp_axes(module)
    params = {}
    for qname, p in module.named_parameters():
        params[qname] = _stitch(p, axes, sizes, qname)
    buffers = {q: _stitch(b, axes, sizes, q)
               for q, b in module.named_buffers()}
    styles = {}
    for path, m in module.named_modules():
        st = _style_of(m, path)
        if st is not None:
            names = st["mesh"].mesh_dim_names
            if names is None or any(n not in axes for n in names):
                raise UnsupportedError(
                    "%s: the style's mesh axes %s are not the mesh's %s"
                    % (path or "<root>", names, axes))
            st["axes"] = [axes.index(n) for n in names]
            styles[path] = st
    if tracer not in ("fx", "export"):
        raise UsageError("tracer must be 'fx' or 'export', not %r"
                         % (tracer,))
    with _Bare(module):
        if tracer == "fx":
            prog = lt.program_from_module(module, example_inputs, name=name)
        else:
            prog = lt.program_from_export(module, example_inputs, kwargs,
                                          name=name)
    try:
        return _build(prog, module, axes, sizes, devices, params, buffers,
                      fsdp, styles, inputs, make_plan)
    finally:
        prog.close()


def _default_input(shape, axes, sizes, styles, params, fsdp):
    used = set()
    for st in styles.values():
        used.update(st["axes"])
    for q, pl in params.items():
        for a, e in enumerate(pl):
            if not isinstance(e, _pl.Replicate) and \
                    axes[a] not in fsdp.get(q, ()):
                used.add(a)
    out = []
    for a in range(len(axes)):
        if a in used or not shape:
            out.append(_pl.Replicate())
        else:
            out.append(_pl.Shard(0))
    return out


def _build(prog, module, axes, sizes, devices, params, buffers, fsdp,
           styles, inputs, make_plan):
    shapes = {t.name: tuple(t.shape) for t in prog.tensors}
    roles = {t.name: t.role for t in prog.tensors}
    attrs = _attrs_of(prog.text())
    cur, local = {}, {}   # tensor -> per-axis entries; a local tensor?
    placements = {}
    given = dict(inputs or {})
    for t in prog.tensors:
        if t.role == "input":
            if t.name in given:
                pl = list(_pl.parse(given.pop(t.name)))
                if len(pl) != len(axes):
                    raise UsageError("input %s: %s has %d entries, the mesh "
                                     "%d axes" % (t.name, _fmt(pl), len(pl),
                                                  len(axes)))
                pl = [_norm(e, len(t.shape)) for e in pl]
            else:
                pl = _default_input(t.shape, axes, sizes, styles, params,
                                    fsdp)
            cur[t.name], local[t.name] = pl, True
        elif t.role == "param":
            if t.name not in params:
                raise UnsupportedError("param %s of the trace is no "
                                       "parameter of the module" % t.name)
            cur[t.name], local[t.name] = params[t.name], False
        elif t.role == "const":
            cur[t.name] = buffers.get(t.name, [_pl.Replicate()] * len(axes))
            local[t.name] = False
        if t.role in ("input", "param", "const"):
            placements[t.name] = _fmt(cur[t.name])
    if given:
        raise UsageError("inputs: %s is no input of the traced program"
                         % sorted(given)[0])

    # PrepareModuleInput: the activations entering its module, in order
    # of first use, read at the desired layouts inside it
    inside = {}
    for path, st in styles.items():
        if st["kind"] != "PrepareModuleInput" or st["style"].input_layouts \
                is None:
            continue
        pre = path + "." if path else ""
        seen = []
        for o in prog.ops:
            if not (o.name == path or o.name.startswith(pre)):
                continue
            for t in o.inputs:
                if roles.get(t) in ("param", "const") or t in seen:
                    continue
                prod = next((p for p in prog.ops if t in p.outputs), None)
                if prod is None or not (prod.name == path or
                                        prod.name.startswith(pre)):
                    seen.append(t)
        sty = st["style"]
        pairs = list(zip(sty.input_layouts, sty.desired_input_layouts))
        if len(seen) != len(pairs):
            # an input both of whose layouts are None is left as it is
            # (torchtitan's freqs_cis, masks, positions): a buffer the
            # trace folds or a value that is no tensor
            pairs = [(a, b) for a, b in pairs
                     if a is not None or b is not None]
        if len(seen) != len(pairs):
            raise UnsupportedError(
                "%s: PrepareModuleInput names %d inputs (%d with a layout), "
                "the trace reads %d values from outside the module"
                % (path or "<root>", len(sty.input_layouts), len(pairs),
                   len(seen)))
        inside[path] = [(t, a, b) for t, (a, b) in zip(seen, pairs)]

    # an input given no placement arrives as the style that reads it first
    # says it is (SequenceParallel: split on the sequence)
    for t in [t.name for t in prog.tensors if t.role == "input"]:
        if t in (inputs or {}):
            continue
        claim = _first_claim(prog, t, styles, inside, len(shapes[t]),
                             cur[t])
        if claim is not None:
            cur[t] = claim
            placements[t] = _fmt(claim)
    strategies, views = {}, {}  # views: (module path, tensor) -> entries
    for o in prog.ops:
        for path in [p for p in inside if o.name == p or
                     o.name.startswith(p + ".")]:
            # the module's first op: its pre-hook runs now
            st = styles[path]
            for t, claim, want in inside.pop(path):
                if claim is None:
                    continue
                rank = len(shapes[t])
                _check_claim(path, t, cur[t], local.get(t, True),
                             _layouts([claim], st["axes"], cur[t], rank), st)
                if want is not None:
                    views[(path, t)] = _layouts([want], st["axes"], cur[t],
                                                rank)
        ins = []
        for t in o.inputs:
            e = cur[t]
            for (path, vt), ve in views.items():
                if vt == t and (o.name == path or
                                o.name.startswith(path + ".")):
                    e = ve
            ins.append(list(e))
        st = _style_for(o, styles)
        if st is not None and st["kind"] != "PrepareModuleInput":
            x = 1 if o.kind == "embedding" else 0  # the activation: ids
            ins[x] = _style_input(o, st, ins[x], local.get(o.inputs[x], True),
                                  len(shapes[o.inputs[x]]))
        # a parameter FSDP gathers is read replicated on FSDP's axes
        for i, t in enumerate(o.inputs):
            if roles.get(t) == "param" and t in fsdp:
                ins[i] = [_pl.Replicate() if axes[a] in fsdp[t] else e
                          for a, e in enumerate(ins[i])]
        in_shapes = [shapes[t] for t in o.inputs]
        out_shapes = [shapes[t] for t in o.outputs]
        new_ins = [list(e) for e in ins]
        outs = [[None] * len(axes) for _ in o.outputs]
        for a in range(len(axes)):
            try:
                got_in, got_out = _axis_rule(o.kind, attrs.get(o.name, {}),
                                             [e[a] for e in ins], in_shapes,
                                             out_shapes)
            except _Refuse as why:
                raise UnsupportedError(
                    "op %s (%s): %s on mesh axis %s; the module's "
                    "parallelization is not one the import reads"
                    % (o.name, o.kind, why, axes[a])) from None
            for i, e in enumerate(got_in):
                new_ins[i][a] = e
            for j, e in enumerate(got_out):
                outs[j][a] = e
        strategies[o.name] = ([_fmt(e) for e in new_ins],
                              [_fmt(e) for e in outs] if len(outs) != 1
                              else _fmt(outs[0]))
        for t, e in zip(o.outputs, outs):
            cur[t], local[t] = e, True
        if st is not None and st["kind"] in ("ColwiseParallel",
                                             "RowwiseParallel"):
            # the output hook: redistributed to output_layouts
            layouts, use_local = st["_prepare_output_fn"]
            t = o.outputs[0]
            cur[t] = _layouts(layouts, st["axes"], cur[t], len(shapes[t]))
            local[t] = bool(use_local)
        elif st is not None and st["kind"] == "SequenceParallel":
            local[o.outputs[0]] = bool(st["_prepare_output_fn"][0])
    outputs = {t: _fmt(cur[t]) for t in _outputs(prog)}
    mesh = list(zip(axes, sizes))
    plan = make_plan(prog, mesh, placements=placements,
                     strategies=strategies, outputs=outputs,
                     devices=devices if devices != sorted(devices) or
                     devices[0] != 0 else None,
                     name="<import:%s>" % type(module).__name__)
    errors = plan.validate().errors
    if errors:
        f = errors[0]
        plan.close()
        raise InvalidError("the imported plan does not validate: %s [%s]"
                           % (f.message, f.code), -6, f.file, f.line,
                           f.column)
    return plan


def _style_for(o, styles):
    """The Colwise/Rowwise/SequenceParallel style of the module op o is
    (fx: the op is named by the module's path; export: the path and the
    node's name, the module's one linear, embedding or norm op)."""
    st = styles.get(o.name)
    if st is None and "." in o.name and o.kind in (
            "linear", "embedding", "layernorm", "rmsnorm"):
        st = styles.get(o.name.rsplit(".", 1)[0])
    if st is not None and st["kind"] == "PrepareModuleInput":
        return st if o.name in styles else None
    return st


def _outputs(prog):
    text = prog.text()
    m = re.search(r'^  outputs: \[(.*)\]\s*$', text, re.M)
    if not m:
        return []
    return [json.loads(x) if x.startswith('"') else x
            for x in (s.strip() for s in m.group(1).split(",")) if x]


def _claim_of(st):
    """A Colwise/Rowwise/SequenceParallel style's (claimed, desired) input
    layouts."""
    if st["kind"] == "SequenceParallel":
        (seq,) = st["_prepare_input_fn"]
        return seq, seq
    claim, want = st["_prepare_input_fn"]
    return (claim if claim is not None else want), want


def _first_claim(prog, t, styles, inside, rank, base):
    """The layout the first styled reader of input t says it has, or
    None."""
    for o in prog.ops:
        for path, items in inside.items():
            if o.name == path or o.name.startswith(path + "."):
                for u, claim, _ in items:
                    if u == t and claim is not None:
                        return _layouts([claim], styles[path]["axes"], base,
                                        rank)
        if t not in o.inputs:
            continue
        st = styles.get(o.name)
        if st is not None and st["kind"] != "PrepareModuleInput" and \
                o.inputs[0] == t:
            return _layouts(_claim_of(st)[0], st["axes"], base, rank)
        return None
    return None


def _check_claim(path, t, have, is_local, claim, st):
    """A local tensor's style layout must be the placement it has."""
    if is_local and _fmt(have) != _fmt(claim):
        raise UnsupportedError(
            "%s: %s reads its input %s as %s, but it is %s there (a local "
            "tensor read at another layout than the one it has)"
            % (path or "<root>", st["kind"], t, _fmt(claim), _fmt(have)))


def _style_input(o, st, have, is_local, rank):
    """A Colwise/Rowwise/SequenceParallel module's input entries: as the
    style's desired layout on its axes (checked against what arrived)."""
    claim, want = _claim_of(st)
    _check_claim(o.name, o.inputs[0], have, is_local,
                 _layouts(claim, st["axes"], have, rank), st)
    return _layouts(want, st["axes"], have, rank)
