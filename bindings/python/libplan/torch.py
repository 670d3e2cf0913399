"""The PyTorch bridge: libplan placements as DTensor placements, a libplan
mesh as a DeviceMesh, a torch.fx graph as a libplan program, and a plan
applied to a module's parameters.

This module imports without torch. The placement mappings then return
tuples, ("Shard", 0), ("Replicate",), ("Partial", "sum"), so a training
repo's planning code runs (and is testable) on a machine without torch;
everything that needs torch itself raises UnsupportedError there.
"""

from . import placements as _pl
from ._plan import Plan
from .builder import ProgramBuilder
from .errors import UnsupportedError, UsageError

try:  # pragma: no cover - depends on the environment
    import torch as _torch
except ImportError:
    _torch = None

__all__ = ["available", "to_dtensor_placements", "from_dtensor_placements",
           "device_mesh", "program_from_module", "apply", "layout_of",
           "parallelize", "capture", "CaptureReport", "plan_from_module",
           "program_from_export", "parallelize_program"]


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
    if ndim is not None:  # S(-1:1)S(0:0) of a 1-D tensor nests one dim
        pl = tuple(_pl.Shard(p.dim + ndim, p.level) if isinstance(
            p, _pl.Shard) and p.dim < 0 else p for p in pl)
    elif any(isinstance(p, _pl.Shard) and p.level is not None and p.dim < 0
             for p in pl):
        raise UsageError("%s nests a negative dim: pass ndim (the tensor's "
                         "rank) to resolve it" % _pl.format(pl))
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
    DTensor's local shard must equal. An empty block's offset along its
    empty dim is that dim's size, DTensor's convention (libplan's
    local_shape_and_offset gives the end of the parent piece there)."""
    m = plan.mesh
    shape = plan.program.shape(tensor)
    size, offset = _pl.local_shape_and_offset(shape, plan.placement(tensor),
                                              m.sizes, coords)
    # an empty block's offset is the dim's size, as DTensor gives it
    # (libplan's layout says the end of the parent piece)
    return size, tuple(shape[d] if n == 0 else o
                       for d, (n, o) in enumerate(zip(size, offset)))


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

# A bool tensor (a mask) becomes an i64 one of 0s and 1s: libplan's
# integer tensors carry masks (where's cond), inputs with range [0, 2].
_DTYPES = {"float32": "f32", "float64": "f64", "bfloat16": "bf16",
           "float16": "f16", "int64": "i64", "int32": "i32", "bool": "i64"}

_UNARY_MODULES = {"GELU": "gelu", "ReLU": "relu", "SiLU": "silu",
                  "Tanh": "tanh", "Sigmoid": "sigmoid"}
_UNARY_FUNCS = {"gelu": "gelu", "relu": "relu", "silu": "silu", "tanh": "tanh",
                "exp": "exp", "sigmoid": "sigmoid", "rsqrt": "rsqrt"}
_BINARY = {"add": "add", "iadd": "add", "sub": "sub", "isub": "sub",
           "mul": "mul", "imul": "mul", "truediv": "div", "itruediv": "div",
           "div": "div", "rsub": "rsub"}
_MATMUL = ("matmul", "bmm")
# Pure reshapes of a row-major tensor: libplan's reshape, to the traced shape.
_RESHAPES = ("reshape", "view", "flatten", "unflatten", "squeeze", "unsqueeze")
# No-ops on values.
_ALIASES = ("contiguous", "clone", "detach")
# Dtype conversions: no-ops when the dtype stays (x.float() on float32).
_CASTS = ("float", "to", "type_as", "type")
# Ops whose result may share storage with their input.
_VIEWS = _RESHAPES + _ALIASES + (
    "permute", "transpose", "t", "chunk", "split", "getitem", "getattr",
    "expand", "expand_as", "broadcast_to", "dropout")
_SCALAR_OPS = {"getitem", "add", "sub", "mul", "truediv", "floordiv", "pow",
               "neg", "mod"}


def _dtype(t, what="a tensor"):
    d = _DTYPES.get(str(t).replace("torch.", ""))
    if d is None:
        raise UnsupportedError("%s has dtype %s, which libplan has no "
                               "spelling for (f64 f32 bf16 f16 i64 i32)"
                               % (what, t))
    return d


class _Lazy:
    """A transpose not yet written: matmul folds one of its last two dims
    into transpose_a/transpose_b; any other consumer writes the op."""

    def __init__(self, node, src, dims, opname):
        self.node, self.src, self.dims, self.opname = node, src, dims, opname
        self.written = None


class _Const:
    """A const made by zeros_like / zeros / ones_like / ones, declared when
    an op reads it (a scatter into zeros reads none)."""

    def __init__(self, name, shape, dtype, init):
        self.name, self.shape, self.dtype, self.init = name, shape, dtype, init
        self.declared = False


class _Opaque:
    """A value the converter did not compute (a Python value only a shape
    argument uses): using it as anything else raises."""

    def __init__(self, node):
        self.node = node


def _rope_init(t):
    """rope_cos / rope_sin ([s, e]: cos or sin of s * theta^(-2i/e), i = j
    mod e/2, the rotate_half layout) when t holds them for a usual theta."""
    import torch
    if t.dim() != 2 or t.shape[1] % 2 or t.shape[1] == 0:
        return None
    s, e = t.shape
    pos = torch.arange(s, dtype=torch.float64)[:, None]
    i = torch.arange(e, dtype=torch.float64)[None, :] % (e // 2)
    for theta in (10000.0, 500000.0, 1000000.0):
        ang = pos * theta ** (-2.0 * i / e)
        for name, f in (("rope_cos", torch.cos), ("rope_sin", torch.sin)):
            if bool(((t.double() - f(ang)).abs() <= 1e-5).all()):
                return name if theta == 10000.0 else \
                    {"recipe": name, "theta": theta}
    return None


def _const_init(t):
    """The const recipe whose values equal tensor t, or None."""
    import torch
    if not t.is_floating_point():
        return None
    rope = _rope_init(t)
    if rope is not None and not bool((t == 0).all()) and \
            not bool((t == 1).all()):
        return rope
    if t.numel() and bool((t == 0).all()):
        return "zeros"
    if t.numel() and bool((t == 1).all()):
        return "ones"
    if t.dim() >= 2 and t.shape[-1] >= 2 and t.shape[-2] >= 1:
        s, n = t.shape[-2], t.shape[-1]
        fill = float(t.reshape(-1, s, n)[0, 0, 1])
        if fill != fill or fill in (float("inf"), float("-inf")):
            return None
        upper = torch.ones(s, n, dtype=torch.bool).triu(1)
        want = torch.zeros(s, n, dtype=t.dtype).masked_fill(upper, fill)
        if bool((t == want).all()):
            return "causal_mask" if fill == -1e9 else \
                {"recipe": "causal_mask", "fill": fill}
    return None


class _Converter:
    def __init__(self, gm, builder):
        self.gm, self.b = gm, builder
        self.mods = dict(gm.named_modules())
        self.params = dict(gm.named_parameters())
        self.buffers = dict(gm.named_buffers())
        self.vals = {}       # fx node name -> tensor name, _Lazy, value
        self.declared = {}   # qualified name -> tensor name (params, consts)
        self.opnames = set()
        self.produced = {}   # tensor name -> fx node (for the shape check)
        self.node = None
        self.unique_idx = set()  # topk indices: distinct along the last dim

    # -- errors and names --
    def path(self, node):
        if node.op == "call_module":
            return node.target
        stack = node.meta.get("nn_module_stack") or {}
        if not stack:
            return ""
        last = list(stack.items())[-1]
        v = last[1]
        return v[0] if isinstance(v, tuple) else last[0]

    def fail(self, why, node=None):
        node = node or self.node
        t = node.target
        tname = t if isinstance(t, str) else getattr(t, "__name__", str(t))
        raise UnsupportedError("fx node %s (%s %s) in module %s: %s"
                               % (node.name, node.op, tname,
                                  self.path(node) or "<root>", why))

    def opname(self, node):
        p = self.path(node)
        if node.op == "call_module":
            cands = [p, "%s.%s" % (p, node.name)]
        else:
            cands = ["%s.%s" % (p, node.name) if p else node.name]
        cands.append(node.name)
        for c in cands:
            if c not in self.opnames:
                self.opnames.add(c)
                return c
        i = 1
        while "%s_%d" % (node.name, i) in self.opnames:
            i += 1
        self.opnames.add("%s_%d" % (node.name, i))
        return "%s_%d" % (node.name, i)

    # -- shapes --
    def meta(self, node):
        tm = node.meta.get("tensor_meta")
        if tm is None or not hasattr(tm, "shape"):
            self.fail("the traced value is not a single tensor", node)
        return [int(d) for d in tm.shape], _dtype(tm.dtype,
                                                  "fx node %s" % node.name)

    # -- values --
    def value(self, a):
        """A Python argument with fx nodes replaced by their values."""
        import torch.fx
        if isinstance(a, torch.fx.Node):
            return self.vals[a.name]
        if isinstance(a, (list, tuple)):
            return type(a)(self.value(x) for x in a)
        if isinstance(a, dict):
            return {k: self.value(v) for k, v in a.items()}
        if isinstance(a, slice):
            return slice(self.value(a.start), self.value(a.stop),
                         self.value(a.step))
        return a

    def is_tensor(self, v):
        return isinstance(v, (str, _Lazy, _Const))

    def tensor(self, a, what="input"):
        v = self.value(a)
        if isinstance(v, _Lazy):
            if v.written is None:
                v.written = v.node.name
                self.b.op("transpose", [v.src], v.written, name=v.opname,
                          dims=list(v.dims))
                self.produced[v.written] = v.node
            return v.written
        if isinstance(v, str):
            return v
        if isinstance(v, _Const):
            if not v.declared:
                self.b.const(v.name, v.shape, v.dtype, init=v.init)
                self.declared[v.name] = v.name
                v.declared = True
            return v.name
        if isinstance(v, _Opaque):
            self.fail("its %s comes from fx node %s, which the converter "
                      "cannot evaluate" % (what, v.node.name))
        self.fail("its %s is %r, not a tensor of the graph" % (what, v))

    def number(self, a, what):
        v = self.value(a)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            self.fail("its %s must be a Python number, not %r" % (what, v))
        return v

    def arg(self, node, i, kw, default=None):
        if len(node.args) > i:
            return node.args[i]
        return node.kwargs.get(kw, default)

    def param(self, qname, node=None):
        if qname in self.declared:
            return self.declared[qname]
        if qname in self.params:
            t = self.params[qname]
            self.b.param(qname, list(t.shape), _dtype(t.dtype, qname))
        else:
            t = self.buffers.get(qname)
            if t is None:
                try:
                    obj = self.gm
                    for part in qname.split("."):
                        obj = getattr(obj, part)
                    t = obj
                except AttributeError:
                    t = None
            import torch
            if not isinstance(t, torch.Tensor):
                self.fail("attribute %s is not a parameter or tensor buffer"
                          % qname, node)
            init = _const_init(t.detach())
            if init is None:
                self.fail("buffer %s holds values no const recipe produces "
                          "(zeros, ones, causal_mask with a finite fill, "
                          "rope_cos / rope_sin); pass it as an input "
                          "instead" % qname, node)
            self.b.const(qname, list(t.shape), _dtype(t.dtype, qname),
                         init=init)
        self.declared[qname] = qname
        return qname

    def emit(self, kind, ins, attrs=None, node=None):
        node = node or self.node
        self.b.op(kind, ins, node.name, name=self.opname(node),
                  **(attrs or {}))
        self.produced[node.name] = node
        self.vals[node.name] = node.name

    # -- the graph --
    def run(self):
        outputs = []
        for node in self.gm.graph.nodes:
            self.node = node
            if node.op == "placeholder":
                shape, dt = self.meta(node)
                extra = {}
                if str(node.meta["tensor_meta"].dtype) == "torch.bool":
                    extra["range"] = [0, 2]
                self.b.input(node.name, shape, dt, **extra)
                self.vals[node.name] = node.name
            elif node.op == "get_attr":
                self.vals[node.name] = self.param(node.target, node)
            elif node.op == "call_module":
                self.module(node)
            elif node.op in ("call_function", "call_method"):
                self.function(node)
            elif node.op == "output":
                res = node.args[0]
                res = res if isinstance(res, (tuple, list)) else [res]
                outputs = [self.tensor(r, "output") for r in res]
                for o in outputs:
                    if o not in self.produced:
                        self.fail("output %s is a leaf of the graph (an "
                                  "input, param or buffer, passed through); "
                                  "a libplan output is produced by an op" % o)
        return outputs

    def module(self, node):
        m = self.mods[node.target]
        kind = type(m).__name__
        t = node.target
        if kind == "MultiheadAttention":
            self.multihead_attention(node, m)
            return
        if len(node.args) != 1 or node.kwargs:
            self.fail("a module called with other than one positional "
                      "argument")
        if kind in ("Identity", "Dropout") and (kind == "Identity" or
                                                 not m.training or m.p == 0):
            self.vals[node.name] = self.tensor(node.args[0])
            return
        if kind == "Dropout":
            self.fail("dropout (p=%g) while training has no libplan op: "
                      "trace the module in eval mode" % m.p)
        if getattr(m, "inplace", False):
            self.check_inplace(node)
        x = self.tensor(node.args[0])
        if kind == "Linear":
            ins = [x, self.param(t + ".weight")]
            if m.bias is not None:
                ins.append(self.param(t + ".bias"))
            self.emit("linear", ins)
        elif kind in ("LayerNorm", "RMSNorm"):
            if len(m.normalized_shape) != 1:
                self.fail("normalizes %d dims; libplan's %s normalizes the "
                          "last one" % (len(m.normalized_shape), kind.lower()))
            if getattr(m, "weight", None) is None:
                self.fail("has no weight (elementwise_affine=False)")
            ins = [x, self.param(t + ".weight")]
            if kind == "LayerNorm" and getattr(m, "bias", None) is not None:
                ins.append(self.param(t + ".bias"))
            eps = m.eps
            if eps is None:  # RMSNorm's default: the dtype's epsilon
                import torch
                eps = torch.finfo(self.gm.get_parameter(
                    t + ".weight").dtype).eps
            self.emit(kind.lower(), ins, {"eps": float(eps)})
        elif kind == "Embedding":
            if m.max_norm is not None:
                self.fail("max_norm renormalizes rows; libplan's embedding "
                          "does not")
            decl = self.b._tensors.get(x)
            if decl is not None and decl.get("role") == "input" and \
                    "range" not in decl:
                decl["range"] = [0, m.num_embeddings]
            self.emit("embedding", [self.param(t + ".weight"), x])
        elif kind in _UNARY_MODULES:
            attrs = {}
            approx = getattr(m, "approximate", "none")
            if kind == "GELU" and approx != "none":
                attrs["approximate"] = approx
            self.emit(_UNARY_MODULES[kind], [x], attrs)
        elif kind == "Softmax":
            if m.dim is None:
                self.fail("nn.Softmax without a dim (torch's implicit dim)")
            self.emit("softmax", [x], {"dim": m.dim})
        else:
            self.fail("module type %s has no libplan op" % kind)

    def function(self, node):
        t = node.target
        tname = t if isinstance(t, str) else getattr(t, "__name__", str(t))
        args = [self.value(a) for a in node.args]
        # Python arithmetic on shapes and numbers: computed here
        if tname in _SCALAR_OPS and not isinstance(t, str) and \
                getattr(t, "__module__", "") in ("_operator", "operator") \
                and not any(self.is_tensor(a) for a in args):
            if any(isinstance(a, _Opaque) for a in args):
                self.vals[node.name] = _Opaque(node)
            else:
                self.vals[node.name] = t(*args)
            return
        if tname == "getattr" and len(args) == 2 and self.is_tensor(args[0]):
            if args[1] == "shape":
                import torch
                self.vals[node.name] = torch.Size(self.meta(node.args[0])[0])
                return
            rank = len(self.meta(node.args[0])[0])
            if (args[1] == "T" and rank == 2) or (args[1] == "mT" and
                                                   rank >= 2):
                self.vals[node.name] = _Lazy(node, self.tensor(node.args[0]),
                                             [rank - 2, rank - 1],
                                             self.opname(node))
                return
            self.fail("tensor attribute %r has no libplan op" % (args[1],))
        if tname == "size" and node.op == "call_method":
            shape = self.meta(node.args[0])[0]
            d = self.arg(node, 1, "dim")
            import torch
            self.vals[node.name] = torch.Size(shape) if d is None \
                else shape[self.number(d, "dim")]
            return
        if tname == "dim" and node.op == "call_method":
            self.vals[node.name] = len(self.meta(node.args[0])[0])
            return
        if tname == "getitem":
            self.getitem(node, args)
            return
        handler = getattr(self, "f_" + tname, None)
        if tname in _BINARY:
            if tname.startswith("i"):
                self.check_inplace(node)
            self.binary(node, _BINARY[tname], args)
        elif tname in _MATMUL:
            self.matmul(node)
        elif tname in _UNARY_FUNCS:
            attrs = {}
            approx = node.kwargs.get("approximate", "none")
            if tname == "gelu" and approx != "none":
                attrs["approximate"] = approx
            if node.kwargs.get("inplace"):
                self.check_inplace(node)
            self.emit(_UNARY_FUNCS[tname], [self.tensor(node.args[0])], attrs)
        elif tname in _RESHAPES:
            self.emit("reshape", [self.tensor(node.args[0])],
                      {"shape": self.meta(node)[0]})
        elif tname in _ALIASES:
            self.vals[node.name] = self.tensor(node.args[0])
        elif tname in _CASTS and node.op == "call_method":
            if self.meta(node)[1] != self.meta(node.args[0])[1]:
                self.fail("a dtype conversion (%s to %s) has no libplan op"
                          % (self.meta(node.args[0])[1], self.meta(node)[1]))
            self.vals[node.name] = self.tensor(node.args[0])
        elif handler is not None:
            handler(node)
        else:
            self.fail("no libplan op for it")

    def check_inplace(self, node):
        """An in-place op writes its first input: the program's functional
        op equals it only when nothing else reads that input and it is not
        a view of another tensor (nor a leaf)."""
        import torch.fx
        src = node.args[0] if node.args else None
        if not isinstance(src, torch.fx.Node):
            return
        view = src.op in ("placeholder", "get_attr") or (
            src.op == "call_module" and type(self.mods[src.target]).__name__
            in ("Identity", "Dropout")) or (
            src.op in ("call_function", "call_method") and
            (src.target if isinstance(src.target, str) else
             getattr(src.target, "__name__", "")) in _VIEWS)
        if view or len(src.users) != 1:
            self.fail("it writes %s in place, which %s; the program would "
                      "differ from the module" % (
                          src.name, "is a view or a leaf" if view else
                          "other nodes read"))

    def getitem(self, node, args):
        seq, idx = args
        if isinstance(seq, (list, tuple)) and not self.is_tensor(seq):
            if isinstance(idx, (int, slice)):
                self.vals[node.name] = seq[idx]
                return
        elif self.is_tensor(seq):
            items = idx if isinstance(idx, tuple) else (idx,)
            whole = all(i is Ellipsis or (isinstance(i, slice) and
                                          i.step in (None, 1))
                        for i in items)
            if whole and self.meta(node)[0] == self.meta(node.args[0])[0]:
                self.vals[node.name] = self.tensor(node.args[0])
                return
            if whole:
                self.slice(node, items)
                return
            self.fail("indexing a tensor (other than slices with step 1) "
                      "has no libplan op")
        if isinstance(seq, _Opaque):
            self.fail("it indexes fx node %s, which the converter cannot "
                      "evaluate" % seq.node.name)
        self.vals[node.name] = _Opaque(node)

    def slice(self, node, items):
        """x[..., a:b] (one dim sliced, step 1): a split of that dim into
        the part before, the slice and the part after, keeping the
        slice."""
        shape = self.meta(node.args[0])[0]
        rank = len(shape)
        if sum(1 for i in items if i is Ellipsis) > 1 or \
                len([i for i in items if i is not Ellipsis]) > rank:
            self.fail("an index with more dims than the tensor")
        full = []
        for i in items:
            if i is Ellipsis:
                full.extend([slice(None)] * (rank - len(items) + 1))
            else:
                full.append(i)
        full.extend([slice(None)] * (rank - len(full)))
        cut = [(d, sl) for d, sl in enumerate(full)
               if sl.indices(shape[d]) != (0, shape[d], 1)]
        if len(cut) != 1:
            self.fail("slicing %d dims at once has no libplan op (slice one "
                      "dim at a time)" % len(cut))
        d, sl = cut[0]
        lo, hi, _ = sl.indices(shape[d])
        hi = max(lo, hi)
        sizes = [n for n in (lo, hi - lo, shape[d] - hi)]
        keep = 1 if lo > 0 else 0
        sizes = [n for n in sizes if n > 0]
        if hi == lo:
            self.fail("an empty slice has no libplan op")
        outs = ["%s.%d" % (node.name, i) for i in range(len(sizes))]
        self.b.op("split", [self.tensor(node.args[0])], outs,
                  name=self.opname(node), dim=d, sizes=sizes)
        for o in outs:
            self.produced[o] = None
        self.vals[node.name] = outs[keep]

    def binary(self, node, kind, args):
        if node.kwargs.get("alpha", 1) != 1 or \
                node.kwargs.get("rounding_mode"):
            self.fail("alpha / rounding_mode have no libplan op")
        a, b = args[0], args[1]
        node_args = node.args[:2]
        if kind == "rsub":  # torch.rsub(x, y) = y - x
            a, b = b, a
            kind = "sub"
            node_args = (node.args[1], node.args[0])
        if self.is_tensor(a) and self.is_tensor(b):
            self.emit(kind, [self.tensor(node_args[0]),
                             self.tensor(node_args[1])])
            return
        if kind in ("add", "sub") and (self.is_tensor(a) or self.is_tensor(b)):
            x = 0 if self.is_tensor(a) else 1
            c = float(self.number(node_args[1 - x], "number"))
            src = self.tensor(node_args[x])
            if kind == "sub" and x == 1:  # c - x: -x, then + c
                neg = "%s.neg" % node.name
                self.b.op("scale", [src], neg,
                          name=self.opname(node) + ".neg", factor=-1.0)
                self.produced[neg] = None
                src = neg
            self.emit("add_scalar", [src],
                      {"value": -c if kind == "sub" and x == 0 else c})
            return
        if kind == "mul" and (self.is_tensor(a) or self.is_tensor(b)):
            x = 0 if self.is_tensor(a) else 1
            factor = self.number(node.args[1 - x], "factor")
            self.emit("scale", [self.tensor(node.args[x])],
                      {"factor": float(factor)})
            return
        if kind == "div" and self.is_tensor(a):
            d = self.number(node.args[1], "divisor")
            if d == 0:
                self.fail("division by zero")
            self.emit("scale", [self.tensor(node.args[0])],
                      {"factor": 1.0 / float(d)})
            return
        self.fail("%s of a number by a tensor has no libplan op (tensor + - "
                  "* / number and number + - * tensor have)" % kind)

    def matmul(self, node):
        va, vb = self.value(node.args[0]), self.value(node.args[1])
        attrs, ins = {}, []
        for i, (v, flag) in enumerate([(va, "transpose_a"),
                                       (vb, "transpose_b")]):
            if isinstance(v, _Lazy) and v.written is None:
                rank = len(self.meta(v.node)[0])
                d = sorted(x % rank for x in v.dims)
                if rank >= 2 and d == [rank - 2, rank - 1]:
                    attrs[flag] = True
                    ins.append(v.src)
                    continue
            ins.append(self.tensor(node.args[i]))
        for a, i in zip(node.args[:2], range(2)):
            if len(self.meta(a)[0]) < 2:
                self.fail("matmul of a 1-D tensor has no libplan op "
                          "(input %d)" % i)
        self.emit("matmul", ins, attrs)

    # -- torch functions and tensor methods, by name --
    def f_softmax(self, node):
        if node.kwargs.get("dtype") is not None or (
                node.op == "call_method" and len(node.args) > 2):
            self.fail("softmax with a dtype has no libplan op")
        dim = self.arg(node, 1, "dim")
        if dim is None:
            self.fail("softmax without a dim (torch's implicit dim)")
        self.emit("softmax", [self.tensor(node.args[0])],
                  {"dim": self.number(dim, "dim")})

    def f_transpose(self, node):
        rank = len(self.meta(node)[0])
        dims = [self.number(self.arg(node, 1, "dim0"), "dim0"),
                self.number(self.arg(node, 2, "dim1"), "dim1")]
        self.vals[node.name] = _Lazy(node, self.tensor(node.args[0]),
                                     [d % rank for d in dims],
                                     self.opname(node))

    def f_t(self, node):
        if len(self.meta(node)[0]) != 2:
            self.fail(".t() of a tensor that is not 2-D")
        self.vals[node.name] = _Lazy(node, self.tensor(node.args[0]), [0, 1],
                                     self.opname(node))

    def f_permute(self, node):
        perm = node.args[1:] if len(node.args) > 2 else \
            self.arg(node, 1, "dims")
        perm = [self.number(p, "perm") for p in self.value(perm)]
        self.emit("permute", [self.tensor(node.args[0])], {"perm": perm})

    def f_expand(self, node):
        self.emit("expand", [self.tensor(node.args[0])],
                  {"shape": self.meta(node)[0]})

    f_expand_as = f_expand
    f_broadcast_to = f_expand

    def f_repeat_interleave(self, node):
        reps = self.value(self.arg(node, 1, "repeats"))
        dim = self.arg(node, 2, "dim")
        if self.is_tensor(reps) or isinstance(reps, bool) or \
                not isinstance(reps, int):
            self.fail("repeat_interleave with repeats other than one int "
                      "has no libplan op")
        if dim is None:
            self.fail("repeat_interleave without a dim (torch flattens "
                      "first) has no libplan op")
        self.emit("repeat_interleave", [self.tensor(node.args[0])],
                  {"repeats": reps, "dim": self.number(dim, "dim")})

    def f_where(self, node):
        if len(node.args) + len(node.kwargs) != 3:
            self.fail("where with other than (condition, input, other) has "
                      "no libplan op")
        ins = [self.arg(node, 0, "condition"), self.arg(node, 1, "input"),
               self.arg(node, 2, "other")]
        if not all(self.is_tensor(self.value(a)) for a in ins):
            self.fail("where of a Python number has no libplan op: pass "
                      "tensors")
        self.emit("where", [self.tensor(a) for a in ins])

    def _last_dim(self, node, i, kw, what, default=None):
        rank = len(self.meta(node.args[0])[0])
        dim = self.number(self.arg(node, i, kw, default), "dim")
        if rank < 1 or dim % rank != rank - 1:
            self.fail("%s along a dim other than the last has no libplan op "
                      "(permute first)" % what)

    def f_topk(self, node):
        k = self.number(self.arg(node, 1, "k"), "k")
        self._last_dim(node, 2, "dim", "topk", -1)
        if not self.arg(node, 3, "largest", True) or \
                not self.arg(node, 4, "sorted", True):
            self.fail("topk with largest=False or sorted=False has no "
                      "libplan op")
        outs = ["%s.values" % node.name, "%s.indices" % node.name]
        self.b.op("topk", [self.tensor(node.args[0])], outs,
                  name=self.opname(node), k=k)
        for o in outs:
            self.produced[o] = None
        self.unique_idx.add(outs[1])
        self.vals[node.name] = tuple(outs)

    def _same_lead(self, a, b, what):
        sa, sb = self.meta(a)[0], self.meta(b)[0]
        if len(sa) != len(sb) or list(sa[:-1]) != list(sb[:-1]):
            self.fail("%s with an index whose leading dims differ from the "
                      "input's has no libplan op" % what)

    def f_gather(self, node):
        self._last_dim(node, 1, "dim", "gather")
        idx = self.arg(node, 2, "index")
        self._same_lead(node.args[0], idx, "gather")
        self.emit("gather", [self.tensor(node.args[0]), self.tensor(idx)])

    def f_scatter_add(self, node):
        """input.scatter_add(dim, index, src): libplan's scatter_add of src
        into zeros of input's size, then added to input."""
        self._last_dim(node, 1, "dim", "scatter_add")
        idx, src = self.arg(node, 2, "index"), self.arg(node, 3, "src")
        self._same_lead(node.args[0], src, "scatter_add")
        if self.meta(idx)[0] != self.meta(src)[0]:
            self.fail("scatter_add with an index shaped unlike src has no "
                      "libplan op")
        part = "%s.scatter" % node.name
        self.b.op("scatter_add", [self.tensor(src), self.tensor(idx)], part,
                  name=self.opname(node) + ".scatter",
                  size=self.meta(node)[0][-1])
        self.produced[part] = None
        self.emit("add", [self.tensor(node.args[0]), part])

    def _split(self, node, default_dim):
        x = self.tensor(node.args[0])
        dim = self.number(self.arg(node, 2, "dim", default_dim), "dim")
        metas = node.meta.get("tensor_meta")
        if not isinstance(metas, (list, tuple)):
            self.fail("the traced value is not a list of tensors")
        rank = len(metas[0].shape)
        sizes = [int(m.shape[dim % rank]) for m in metas]
        outs = ["%s.%d" % (node.name, i) for i in range(len(sizes))]
        self.b.op("split", [x], outs, name=self.opname(node), dim=dim,
                  sizes=sizes)
        for o in outs:
            self.produced[o] = None
        self.vals[node.name] = tuple(outs)

    def f_chunk(self, node):
        self._split(node, 0)

    def f_split(self, node):
        self._split(node, 0)

    def f_cat(self, node):
        names = [self.tensor(a) for a in self.arg(node, 0, "tensors")]
        dim = self.arg(node, 1, "dim", 0)
        self.emit("concat", names, {"dim": self.number(dim, "dim")})

    f_concat = f_cat

    def _reduce(self, node, kind):
        if self.arg(node, 3, "dtype") is not None:
            self.fail("a reduction with a dtype has no libplan op")
        rank = len(self.meta(node.args[0])[0])
        dims = self.value(self.arg(node, 1, "dim"))
        if dims is None:
            dims = list(range(rank))
        elif isinstance(dims, int):
            dims = [dims]
        dims = [self.number(d, "dim") for d in dims]
        keep = bool(self.value(self.arg(node, 2, "keepdim", False)))
        self.emit(kind, [self.tensor(node.args[0])],
                  {"dims": dims, "keepdim": keep})

    def f_sum(self, node):
        self._reduce(node, "reduce_sum")

    def f_mean(self, node):
        self._reduce(node, "reduce_mean")

    def f_neg(self, node):
        self.emit("scale", [self.tensor(node.args[0])], {"factor": -1.0})

    def f_dropout(self, node):
        p = self.value(self.arg(node, 1, "p", 0.5))
        training = self.value(self.arg(node, 2, "training", True))
        if training and p:
            self.fail("dropout while training has no libplan op")
        self.vals[node.name] = self.tensor(node.args[0])

    def f_linear(self, node):
        ins = [self.tensor(node.args[0]), self.tensor(node.args[1], "weight")]
        bias = self.arg(node, 2, "bias")
        if bias is not None:
            ins.append(self.tensor(bias, "bias"))
        self.emit("linear", ins)

    def f_pow(self, node):
        """x ** 2 as x * x, x ** -0.5 as rsqrt, x ** 1 as x."""
        e = self.value(self.arg(node, 1, "exponent"))
        if not self.is_tensor(self.value(node.args[0])) or \
                isinstance(e, bool) or not isinstance(e, (int, float)):
            self.fail("pow other than tensor ** number has no libplan op")
        x = self.tensor(node.args[0])
        if e == 2:
            self.emit("mul", [x, x])
        elif e == -0.5:
            self.emit("rsqrt", [x])
        elif e == 1:
            self.vals[node.name] = x
        else:
            self.fail("pow with exponent %r has no libplan op (2, -0.5 and "
                      "1 have)" % (e,))

    def f_square(self, node):
        x = self.tensor(node.args[0])
        self.emit("mul", [x, x])

    def _new_const(self, node, init):
        shape, dt = self.meta(node)
        self.vals[node.name] = _Const(self.opname(node), shape, dt, init)

    def f_zeros_like(self, node):
        self._new_const(node, "zeros")

    def f_ones_like(self, node):
        self._new_const(node, "ones")

    def f_zeros(self, node):
        self._new_const(node, "zeros")

    def f_ones(self, node):
        self._new_const(node, "ones")

    def f_scatter(self, node):
        """zeros.scatter(-1, idx, src) with idx a topk's indices (distinct
        along the last dim, so writing equals adding): scatter_add."""
        if node.kwargs.get("reduce") is not None:
            self.fail("scatter with a reduce has no libplan op")
        base = self.value(node.args[0])
        idx = self.arg(node, 2, "index")
        src = self.arg(node, 3, "src")
        if not isinstance(base, _Const) or base.init != "zeros":
            self.fail("scatter into a tensor that is not zeros_like / zeros "
                      "has no libplan op (write scatter_add)")
        if self.value(idx) not in self.unique_idx:
            self.fail("scatter with indices that are not a topk's (possibly "
                      "repeated) has no libplan op (write scatter_add)")
        self._last_dim(node, 1, "dim", "scatter")
        if not self.is_tensor(self.value(src)) or \
                self.meta(idx)[0] != self.meta(src)[0]:
            self.fail("scatter of a number, or with an index shaped unlike "
                      "src, has no libplan op")
        self._same_lead(node.args[0], src, "scatter")
        self.emit("scatter_add", [self.tensor(src), self.tensor(idx)],
                  {"size": self.meta(node)[0][-1]})

    def f_stack(self, node):
        """torch.stack: each tensor given a size-1 dim there, then concat."""
        ts = self.arg(node, 0, "tensors")
        rank = len(self.meta(node)[0])
        dim = self.number(self.arg(node, 1, "dim", 0), "dim") % rank
        names = []
        for i, a in enumerate(ts):
            shape = list(self.meta(a)[0])
            shape.insert(dim, 1)
            part = "%s.%d" % (node.name, i)
            self.b.op("reshape", [self.tensor(a)], part,
                      name="%s.%d" % (self.opname(node), i), shape=shape)
            self.produced[part] = None
            names.append(part)
        self.emit("concat", names, {"dim": dim})

    def f_scaled_dot_product_attention(self, node):
        """F.scaled_dot_product_attention on [b, h, s, d] tensors: the fused
        attention op (a bool mask becomes an integer one, nonzero seen)."""
        q, k, v = (self.arg(node, i, n) for i, n in
                   enumerate(("query", "key", "value")))
        mask = self.arg(node, 3, "attn_mask")
        if self.value(self.arg(node, 4, "dropout_p", 0.0)):
            self.fail("attention dropout has no libplan op (dropout_p=0)")
        causal = bool(self.value(self.arg(node, 5, "is_causal", False)))
        scale = self.value(self.arg(node, 6, "scale"))
        gqa = bool(self.value(node.kwargs.get("enable_gqa", False)))
        for a, what in ((q, "query"), (k, "key"), (v, "value")):
            if len(self.meta(a)[0]) != 4:
                self.fail("attention of a %s that is not [b, heads, seq, dim] "
                          "has no libplan op" % what)
        if not gqa and self.meta(q)[0][1] != self.meta(k)[0][1]:
            self.fail("query and key heads differ without enable_gqa")
        ins = [self.tensor(q), self.tensor(k), self.tensor(v)]
        if mask is not None:
            ins.append(self.tensor(mask, "attn_mask"))
        attrs = {}
        if causal:
            attrs["causal"] = True
        if scale is not None:
            attrs["scale"] = float(self.number(scale, "scale"))
        self.emit("attention", ins, attrs)

    def multihead_attention(self, node, m):
        """nn.MultiheadAttention as self-attention (query, key and value one
        tensor): in_proj (a linear, split into q, k, v), heads out, the
        attention op, heads back, out_proj."""
        args = list(node.args) + [node.kwargs.get(k) for k in
                                  ("query", "key", "value")
                                  if k in node.kwargs]
        if len(args) != 3 or not (args[0] is args[1] is args[2]):
            self.fail("nn.MultiheadAttention other than self-attention "
                      "(query, key and value one tensor) has no libplan op")
        for kw in ("key_padding_mask", "attn_mask"):
            if node.kwargs.get(kw) is not None:
                self.fail("nn.MultiheadAttention's %s has no libplan op "
                          "(use F.scaled_dot_product_attention)" % kw)
        if node.kwargs.get("is_causal"):
            self.fail("nn.MultiheadAttention's is_causal needs an attn_mask; "
                      "use F.scaled_dot_product_attention")
        if not m._qkv_same_embed_dim or m.bias_k is not None or \
                m.add_zero_attn or (m.training and m.dropout):
            self.fail("nn.MultiheadAttention with kdim/vdim, add_bias_kv, "
                      "add_zero_attn or training dropout has no libplan op")
        t, p = node.target, self.opname(node)
        x = self.tensor(args[0])
        shape = self.meta(args[0])[0]
        if len(shape) != 3:
            self.fail("nn.MultiheadAttention of an unbatched input")
        e, h = m.embed_dim, m.num_heads
        hd = e // h

        def op(suffix, kind, ins, outs, **attrs):
            names = outs if isinstance(outs, list) else [outs]
            self.b.op(kind, ins, outs, name="%s.%s" % (p, suffix), **attrs)
            for o in names:
                self.produced[o] = None
            return outs

        n = node.name
        if not m.batch_first:
            x = op("batch_first", "permute", [x], n + ".x", perm=[1, 0, 2])
        b, s = (shape[0], shape[1]) if m.batch_first else (shape[1], shape[0])
        ins = [x, self.param(t + ".in_proj_weight")]
        if m.in_proj_bias is not None:
            ins.append(self.param(t + ".in_proj_bias"))
        qkv = op("in_proj", "linear", ins, n + ".qkv")
        parts = op("split", "split", [qkv], [n + ".q", n + ".k", n + ".v"],
                   dim=-1, sizes=[e, e, e])
        heads = []
        for part in parts:
            r = op(part.split(".")[-1] + ".heads", "reshape", [part],
                   part + ".heads", shape=[b, s, h, hd])
            heads.append(op(part.split(".")[-1] + ".perm", "permute", [r],
                            part + ".perm", perm=[0, 2, 1, 3]))
        y = op("attention", "attention", heads, n + ".attn")
        y = op("attn.perm", "permute", [y], n + ".attn.perm",
               perm=[0, 2, 1, 3])
        y = op("attn.merge", "reshape", [y], n + ".attn.merge",
               shape=[b, s, e])
        ins = [y, self.param(t + ".out_proj.weight")]
        if m.out_proj.bias is not None:
            ins.append(self.param(t + ".out_proj.bias"))
        y = op("out_proj", "linear", ins, n + ".out")
        if not m.batch_first:
            y = op("seq_first", "permute", [y], n + ".out.seq_first",
                   perm=[1, 0, 2])
        # (output, attention weights): the weights have no libplan value
        self.vals[node.name] = (y, _Opaque(node))

    def f_rms_norm(self, node):
        ns = self.value(self.arg(node, 1, "normalized_shape"))
        w = self.arg(node, 2, "weight")
        if len(ns) != 1 or w is None:
            self.fail("rms_norm over other than the last dim, or without a "
                      "weight, has no libplan op")
        eps = self.value(self.arg(node, 3, "eps"))
        if eps is None:
            import torch
            eps = torch.finfo(self.meta_dtype(node.args[0])).eps
        self.emit("rmsnorm", [self.tensor(node.args[0]), self.tensor(w,
                                                                     "weight")],
                  {"eps": float(eps)})

    def meta_dtype(self, node):
        return node.meta["tensor_meta"].dtype

    def f_layer_norm(self, node):
        ns = self.value(self.arg(node, 1, "normalized_shape"))
        if len(ns) != 1:
            self.fail("layer_norm over %d dims; libplan's normalizes the "
                      "last one" % len(ns))
        w, b = self.arg(node, 2, "weight"), self.arg(node, 3, "bias")
        if w is None:
            self.fail("layer_norm without a weight has no libplan op")
        ins = [self.tensor(node.args[0]), self.tensor(w, "weight")]
        if b is not None:
            ins.append(self.tensor(b, "bias"))
        eps = self.number(self.arg(node, 4, "eps", 1e-5), "eps")
        self.emit("layernorm", ins, {"eps": float(eps)})


def program_from_module(module, example_inputs, name=None):
    """Traces `module` with torch.fx (symbolic_trace, then ShapeProp on
    `example_inputs`) and returns the libplan Program of its forward.

    Names: a module's op is named by its path ("attn.qkv"); a function or
    method call by its module's path and the fx node's name
    ("attn.softmax"); params keep their qualified names ("attn.qkv.weight"),
    buffers become consts of that name, inputs keep their argument names,
    and produced tensors are named by their fx nodes.

    Supported (see docs/python.md): nn.Linear, nn.LayerNorm, nn.RMSNorm,
    nn.Embedding, nn.GELU/ReLU/SiLU/Tanh/Softmax, nn.Dropout (p=0 or eval)
    and nn.Identity; + - * / between tensors (broadcasting), tensor * number
    and tensor / number (scale), @ / matmul / bmm (a transpose of the last
    two dims folds into transpose_a/transpose_b), softmax, gelu/relu/silu/
    tanh/exp, transpose/t/.T/.mT, permute, reshape/view/flatten/unflatten/
    squeeze/unsqueeze, expand, chunk/split, cat, sum/mean, neg,
    repeat_interleave (an int repeats, a dim), where (of three tensors; a
    bool input becomes an i64 input with range [0, 2]), topk (largest,
    sorted, the last dim; index the result), gather and scatter_add along
    the last dim,
    F.linear, F.layer_norm, contiguous/clone/detach, in-place forms when
    nothing else reads the value written; Python arithmetic on
    shapes (x.shape, x.size()). A buffer becomes a const when a recipe
    gives its values (zeros, ones, causal_mask with a finite fill).
    Anything else raises UnsupportedError naming the fx node, its target
    and its module path. Needs torch."""
    _require()
    import torch.fx
    from torch.fx.passes.shape_prop import ShapeProp

    what = type(module).__name__
    try:
        gm = torch.fx.symbolic_trace(module)
    except Exception as e:
        raise UnsupportedError("torch.fx cannot trace %s: %s"
                               % (what, str(e).splitlines()[0] if str(e)
                                  else type(e).__name__)) from e
    try:
        ShapeProp(gm).propagate(*example_inputs)
    except Exception as e:
        raise UsageError("%s does not run on the example inputs: %s"
                         % (what, str(e).splitlines()[0] if str(e)
                            else type(e).__name__)) from e
    b = ProgramBuilder(name or type(module).__name__)
    conv = _Converter(gm, b)
    outputs = conv.run()
    if outputs:
        b.outputs(outputs)
    prog = b.build(name="<fx:%s>" % (name or type(module).__name__))
    # every traced shape and dtype must be the one libplan infers
    for tname, node in conv.produced.items():
        if node is None:
            continue
        want = conv.meta(node)
        t = prog.tensor(tname)
        got = ([int(d) for d in t.shape], t.dtype)
        if want != got:
            prog.close()
            conv.fail("libplan infers %s %s for it, torch traced %s %s"
                      % (got[1], got[0], want[1], want[0]), node)
    return prog


from .torch_parallel import parallelize  # noqa: E402,F401  (needs the above)
from .torch_capture import CaptureReport, capture  # noqa: E402,F401
from .torch_import import plan_from_module  # noqa: E402,F401
from .torch_export import (parallelize_program,  # noqa: E402,F401
                           program_from_export)
