"""The PyTorch bridge: libplan placements as DTensor placements, a libplan
mesh as a DeviceMesh, a torch.fx graph as a libplan program, and a plan
applied to a module's parameters.

This module imports without torch. The placement mappings then return
tuples, ("Shard", 0), ("Replicate",), ("Partial", "sum"), so a training
repo's planning code runs (and is testable) on a machine without torch;
everything that needs torch itself raises UnsupportedError there.
"""

import operator

from . import placements as _pl
from ._core import Plan
from .builder import ProgramBuilder
from .errors import UnsupportedError, UsageError

try:  # pragma: no cover - depends on the environment
    import torch as _torch
except ImportError:
    _torch = None

__all__ = ["available", "to_dtensor_placements", "from_dtensor_placements",
           "device_mesh", "program_from_module", "apply", "layout_of"]


def available():
    """True when torch imports (and has torch.distributed.tensor)."""
    return _torch is not None and _dtensor() is not None


def _dtensor():
    if _torch is None:
        return None
    try:
        import torch.distributed.tensor as dt
        return dt
    except ImportError:
        try:
            import torch.distributed._tensor as dt
            return dt
        except ImportError:
            return None


def _require():
    dt = _dtensor()
    if dt is None:
        raise UnsupportedError("this needs torch with "
                               "torch.distributed.tensor (torch is not "
                               "installed here)")
    return dt


def to_dtensor_placements(placement, ndim=None, as_tuples=None):
    """A libplan placement ("S(0)P(sum)", or parsed) as DTensor placements,
    one per mesh axis: [Shard(0), Partial("sum")]. `ndim` (the tensor's
    rank) turns negative dims into DTensor's non-negative ones. Without
    torch (or as_tuples=True) the result is tuples: ("Shard", 0),
    ("Replicate",), ("Partial", "sum").

    A dim split by several axes nests in mesh order in both libplan and
    DTensor; another order (S(0:1)S(0:0)) has no public DTensor placement
    and raises UnsupportedError."""
    pl = _pl.parse(placement)
    levels = {}
    for axis, p in enumerate(pl):
        if isinstance(p, _pl.Shard) and p.level is not None:
            levels.setdefault(p.dim, []).append(p.level)
    for d, lv in levels.items():
        if lv != sorted(lv):
            raise UnsupportedError(
                "%s nests dim %d across axes out of mesh order; DTensor "
                "shards several axes of one dim in mesh order only"
                % (_pl.format(pl), d))
    tuples = as_tuples if as_tuples is not None else not available()
    dt = None if tuples else _require()
    out = []
    for p in pl:
        if isinstance(p, _pl.Shard):
            d = p.dim + ndim if p.dim < 0 and ndim is not None else p.dim
            out.append(("Shard", d) if tuples else dt.Shard(d))
        elif isinstance(p, _pl.Partial):
            out.append(("Partial", p.reduce_op) if tuples
                       else dt.Partial(p.reduce_op))
        else:
            out.append(("Replicate",) if tuples else dt.Replicate())
    return out


def from_dtensor_placements(placements):
    """DTensor placements (or the tuples above, or libplan placements) as a
    libplan compact placement: [Shard(0), Replicate()] -> "S(0)R"."""
    out = []
    for p in placements:
        if isinstance(p, tuple):
            kind = p[0]
            if kind == "Shard":
                out.append(_pl.Shard(p[1]))
            elif kind == "Partial":
                out.append(_pl.Partial(p[1] if len(p) > 1 else "sum"))
            elif kind == "Replicate":
                out.append(_pl.Replicate())
            else:
                raise UsageError("unknown placement %r" % (p,))
        elif isinstance(p, _pl.Placement):
            out.append(p)
        elif type(p).__name__ == "_StridedShard":
            raise UnsupportedError("_StridedShard has no libplan spelling yet")
        elif p.is_shard():
            out.append(_pl.Shard(p.dim))
        elif p.is_partial():
            op = getattr(p, "reduce_op", "sum")
            out.append(_pl.Partial(str(op).lower().replace("reduceop.", "")))
        elif p.is_replicate():
            out.append(_pl.Replicate())
        else:
            raise UsageError("unknown placement %r" % (p,))
    return _pl.format(out)


def device_mesh(plan_or_mesh, device_type="cpu"):
    """A DeviceMesh with the plan's axes (names and sizes) whose entries are
    the plan's physical devices (the global ranks of the process group).
    Needs torch and an initialised process group."""
    _require()
    from torch.distributed.device_mesh import DeviceMesh
    m = plan_or_mesh.mesh if isinstance(plan_or_mesh, Plan) else plan_or_mesh
    if m is None:
        raise UsageError("the plan has no mesh")
    ids = _torch.tensor(m.devices, dtype=_torch.int64).reshape(m.sizes)
    return DeviceMesh(device_type, ids, mesh_dim_names=tuple(m.axes))


def layout_of(plan, tensor, coords):
    """The (local shape, global offset) of `tensor`'s block at mesh
    coordinates `coords`, as libplan lays out the plan's placement: what a
    DTensor's local shard must equal."""
    m = plan.mesh
    return _pl.local_shape_and_offset(plan.program.shape(tensor),
                                      plan.placement(tensor), m.sizes, coords)


def apply(module, plan, mesh=None):
    """Distributes the module's parameters as the plan places them: each
    parameter whose qualified name ("fc1.weight") is a tensor of the plan
    becomes a DTensor on `mesh` (default: device_mesh(plan)). Returns the
    names of the parameters distributed. Needs torch."""
    dt = _require()
    mesh = mesh if mesh is not None else device_mesh(plan)
    names = {t.name for t in plan.program.tensors}
    done = []
    for qname, param in list(module.named_parameters()):
        if qname not in names:
            continue
        spec = to_dtensor_placements(plan.placement(qname), param.dim(),
                                     as_tuples=False)
        if any(p.is_partial() for p in spec):
            raise UsageError("parameter %s is placed as a partial value"
                             % qname)
        owner = module
        path = qname.split(".")
        for part in path[:-1]:
            owner = getattr(owner, part)
        new = _torch.nn.Parameter(dt.distribute_tensor(param.data, mesh, spec),
                                  requires_grad=param.requires_grad)
        setattr(owner, path[-1], new)
        done.append(qname)
    return done


# ---- torch.fx -> libplan program --------------------------------------------

_DTYPES = {"float32": "f32", "float64": "f64", "bfloat16": "bf16",
           "float16": "f16", "int64": "i64", "int32": "i32"}

_UNARY_MODULES = {"GELU": "gelu", "ReLU": "relu", "SiLU": "silu",
                  "Tanh": "tanh"}
_UNARY_FUNCS = {"gelu": "gelu", "relu": "relu", "silu": "silu", "tanh": "tanh",
                "exp": "exp"}
_BINARY = {operator.add: "add", operator.sub: "sub", operator.mul: "mul",
           operator.truediv: "div", operator.matmul: "matmul"}
_BINARY_NAMES = {"add": "add", "sub": "sub", "mul": "mul", "div": "div",
                 "matmul": "matmul"}


def _dtype(t):
    return _DTYPES.get(str(t).replace("torch.", ""), "f32")


def program_from_module(module, example_inputs, name=None):
    """Traces `module` with torch.fx and returns the libplan Program of its
    forward: op names are module paths (call_function nodes: the fx node's
    name), params keep their qualified names, inputs their argument names.
    Supported: nn.Linear, nn.LayerNorm, nn.Embedding, GELU/ReLU/SiLU/Tanh
    (modules and functions), + - * / @, torch.matmul, softmax, transpose,
    permute, reshape/view. Other nodes raise UnsupportedError naming the
    node. Needs torch."""
    _require()
    import torch.fx
    from torch.fx.passes.shape_prop import ShapeProp

    gm = torch.fx.symbolic_trace(module)
    ShapeProp(gm).propagate(*example_inputs)
    b = ProgramBuilder(name or type(module).__name__)
    names = {}
    mods = dict(gm.named_modules())

    def meta(node):
        tm = node.meta.get("tensor_meta")
        if tm is None:
            raise UnsupportedError("fx node %s has no tensor shape"
                                   % node.name)
        return list(tm.shape), _dtype(tm.dtype)

    def param(qname):
        if qname not in names:
            t = gm.get_parameter(qname) if hasattr(gm, "get_parameter") else \
                dict(gm.named_parameters())[qname]
            b.param(qname, list(t.shape), _dtype(t.dtype))
            names[qname] = qname
        return qname

    def arg(a):
        if not hasattr(a, "name") or a.name not in names:
            raise UnsupportedError("fx argument %r is not a tensor of the "
                                   "graph" % (a,))
        return names[a.name]

    outputs = []
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            shape, dt = meta(node)
            b.input(node.name, shape, dt)
            names[node.name] = node.name
        elif node.op == "get_attr":
            names[node.name] = param(node.target)
        elif node.op == "call_module":
            m = mods[node.target]
            kind = type(m).__name__
            x = arg(node.args[0])
            if kind == "Linear":
                ins = [x, param(node.target + ".weight")]
                if m.bias is not None:
                    ins.append(param(node.target + ".bias"))
                b.op("linear", ins, node.name, name=node.target)
            elif kind == "LayerNorm":
                ins = [x, param(node.target + ".weight")]
                if getattr(m, "bias", None) is not None:
                    ins.append(param(node.target + ".bias"))
                b.op("layernorm", ins, node.name, name=node.target, eps=m.eps)
            elif kind == "Embedding":
                b.op("embedding", [param(node.target + ".weight"), x],
                     node.name, name=node.target)
            elif kind in _UNARY_MODULES:
                attrs = {}
                approx = getattr(m, "approximate", "none")
                if kind == "GELU" and approx != "none":
                    attrs["approximate"] = approx
                b.op(_UNARY_MODULES[kind], [x], node.name, name=node.target,
                     **attrs)
            else:
                raise UnsupportedError("module %s (%s) has no libplan op"
                                       % (node.target, kind))
            names[node.name] = node.name
        elif node.op in ("call_function", "call_method"):
            t = node.target
            tname = t if isinstance(t, str) else getattr(t, "__name__", str(t))
            if t in _BINARY or tname in _BINARY_NAMES:
                kind = _BINARY.get(t) or _BINARY_NAMES[tname]
                b.op(kind, [arg(node.args[0]), arg(node.args[1])], node.name,
                     name=node.name)
            elif tname in _UNARY_FUNCS:
                b.op(_UNARY_FUNCS[tname], [arg(node.args[0])], node.name,
                     name=node.name)
            elif tname == "softmax":
                dim = node.kwargs.get("dim", node.args[1] if len(node.args) > 1
                                      else -1)
                b.op("softmax", [arg(node.args[0])], node.name, name=node.name,
                     dim=dim)
            elif tname == "transpose":
                b.op("transpose", [arg(node.args[0])], node.name,
                     name=node.name, dims=[node.args[1], node.args[2]])
            elif tname == "permute":
                perm = node.args[1:] if len(node.args) > 2 else node.args[1]
                b.op("permute", [arg(node.args[0])], node.name, name=node.name,
                     perm=list(perm))
            elif tname in ("reshape", "view"):
                shape, _ = meta(node)
                b.op("reshape", [arg(node.args[0])], node.name, name=node.name,
                     shape=shape)
            else:
                raise UnsupportedError("fx node %s (%s) has no libplan op"
                                       % (node.name, tname))
            names[node.name] = node.name
        elif node.op == "output":
            res = node.args[0]
            res = res if isinstance(res, (tuple, list)) else [res]
            outputs = [arg(r) for r in res]
    if outputs:
        b.outputs(outputs)
    return b.build(name="<fx:%s>" % (name or type(module).__name__))
