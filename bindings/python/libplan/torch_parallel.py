"""libplan.torch.parallelize: a module that runs a plan.

`parallelize(module, plan, mesh)` places the module's parameters and
buffers as the plan does and replaces its forward by an interpreter of the
module's torch.fx graph that, around every node that is an op of the plan,
redistributes the op's inputs to the strategy's input placements and its
outputs to the strategy's output placements (DTensor.redistribute), then
delivers the program's outputs in the plan's output placements. Gradients
are synchronised, as the plan's `training.grad_sync` says, by a hook on
each parameter after its gradient is accumulated.

`lowered_collectives(plan)` and `comm_counts(mode)` give the lowered plan's
collectives per kind and those a CommDebugMode counted, in the same keys,
so a run can be checked against its plan.
"""

import ctypes
import re

from . import placements as _pl
from ._common import fn
from ._plan import Plan, _unquote
from .errors import InvalidError, UnsupportedError, UsageError, check

__all__ = ["parallelize", "lowered_collectives", "comm_counts",
           "comm_debug_mode", "grad_sync_of", "COLLECTIVES", "LOCAL_STEPS"]

# The lowered plan's collectives, as torch's functional collectives count.
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
# Lowered steps that move no data between ranks: DTensor runs each as a
# local op (a chunk, zeros, a relabel), so CommDebugMode counts none.
LOCAL_STEPS = ("slice", "zero_non_owner", "relabel")

# torch's names for the collectives (c10d functional ops)
_TORCH_KINDS = (("all_gather", "all_gather"), ("reduce_scatter",
                                               "reduce_scatter"),
                ("all_to_all", "all_to_all"), ("all_reduce", "all_reduce"))
# Nodes that pass a value through unchanged (no plan op of their own).
_ALIAS_CALLS = ("contiguous", "clone", "detach", "dropout")
_ALIAS_MODULES = ("Identity", "Dropout")
# Nodes that swap two dims without a plan op of their own (a transpose the
# converter folded into a matmul's transpose_a / transpose_b).
_SWAPS = ("transpose", "t", "T", "mT")


def _torch():
    import torch
    return torch


def lowered_collectives(plan):
    """{kind: count} of the plan's lowered steps, for the four collectives
    (COLLECTIVES) and the three local steps (LOCAL_STEPS). InvalidError for
    a plan that does not validate, UnsupportedError for what the library
    does not lower."""
    errors = plan.validate().errors
    if errors:
        f = errors[0]
        raise InvalidError("the plan does not validate: %s [%s]"
                           % (f.message, f.code), -6, f.file, f.line,
                           f.column)
    out = ctypes.c_void_p()
    check(fn.lower(ctypes.byref(out), plan._h))
    try:
        return {k: fn.lowered_collective_count(out, k.encode())
                for k in COLLECTIVES + LOCAL_STEPS}
    finally:
        fn.lowered_free(out)


def comm_debug_mode():
    """A new torch CommDebugMode. torch.distributed.tensor.debug imports
    numpy (for its sharding visualiser); without numpy the counter's own
    file, which does not need it, is loaded alone."""
    try:
        from torch.distributed.tensor.debug import CommDebugMode
    except ImportError:
        import importlib.util
        import os
        import torch.distributed.tensor as t
        path = os.path.join(os.path.dirname(t.__file__), "debug",
                            "_comm_mode.py")
        spec = importlib.util.spec_from_file_location(
            "libplan._torch_comm_mode", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        CommDebugMode = mod.CommDebugMode
    return CommDebugMode()


def comm_counts(mode):
    """A CommDebugMode's counts as {kind: count} with lowered_collectives'
    collective kinds (all four present); another collective torch ran (a
    broadcast) keeps torch's name, so a comparison sees it."""
    out = {k: 0 for k in COLLECTIVES}
    for op, n in mode.get_comm_counts().items():
        name = str(op).split(".")[-1] if "." in str(op) else str(op)
        for pat, kind in _TORCH_KINDS:
            if pat in name:
                out[kind] += n
                break
        else:
            out[name] = out.get(name, 0) + n
    return out


_SYNC_LINE = re.compile(r'^ {4}("(?:[^"\\]|\\.)*"|[^:]+): (\S+)\s*$')


def grad_sync_of(plan):
    """{param: sync} from the plan's training section (the canonical form
    names every param: auto, all_reduce, reduce_scatter or none); {} for a
    plan without one."""
    out, inside = {}, False
    for line in plan.text().splitlines():
        if line.startswith("  grad_sync:"):
            inside = True
            continue
        if inside:
            m = _SYNC_LINE.match(line)
            if not m:
                break
            out[_unquote(m.group(1))] = m.group(2)
    return out


class _Info:
    """What the interpreter needs of the plan, looked up once: each produced
    tensor's op and slot, each op's strategy and inputs, the leaves'
    placements."""

    def __init__(self, plan, dt, drop=None):
        self.dt = dt
        # `drop`: the index of a mesh axis the run's mesh leaves out (a
        # pipeline's axis, R in every placement: each stage runs on the
        # sub-mesh of the other axes); every placement loses that entry
        self.drop = drop
        self.sizes = tuple(n for a, n in enumerate(plan.mesh.sizes)
                           if a != drop)
        self._local = {}
        prog = plan.program
        self.roles = {t.name: t.role for t in prog.tensors}
        self.shapes = {t.name: tuple(t.shape) for t in prog.tensors}
        self.producer = {}   # tensor -> (op name, output slot)
        self.ops = {}        # op name -> (inputs, Strategy)
        self.kinds = {}      # op name -> kind
        for o in plan.ops:
            if o.strategy is None:
                raise UnsupportedError(
                    "op %s has no strategy in the plan; parallelize runs "
                    "the strategies the plan gives (search or write one)"
                    % o.name)
            self.ops[o.name] = (tuple(o.inputs), o.strategy)
            self.kinds[o.name] = o.kind
            for slot, t in enumerate(o.outputs):
                self.producer[t] = (o.name, slot)
        self.leaves = {t: plan.placement(t) for t, r in self.roles.items()
                       if r in ("input", "param", "const")}
        # every tensor's placement as the plan delivers it: a module runs
        # after its plan is closed
        self.placements = {t: plan.placement(t) for t in self.roles}
        self.plan = plan

        self._specs = {}

    def local(self, placement):
        """A plan placement on the run's mesh: without the dropped axis's
        entry (the placement itself when no axis is dropped)."""
        if self.drop is None:
            return placement
        got = self._local.get(placement)
        if got is None:
            pl = list(_pl.parse(placement))
            del pl[self.drop]
            # the nesting levels of a dim's shards, renumbered without
            # the dropped axis's (none left for a dim split once)
            for d in {p.dim for p in pl if isinstance(p, _pl.Shard)}:
                at = [a for a, p in enumerate(pl)
                      if isinstance(p, _pl.Shard) and p.dim == d]
                order = sorted(at, key=lambda a: (pl[a].level is None,
                                                  pl[a].level, a))
                for level, a in enumerate(order):
                    pl[a] = _pl.Shard(d, level if len(at) > 1 else None,
                                      pl[a].ratios)
            got = self._local[placement] = _pl.format(pl)
        return got

    def spec(self, placement, ndim):
        """DTensor placements of a compact placement on the run's mesh
        (cached: every op boundary asks)."""
        key = (placement, ndim)
        got = self._specs.get(key)
        if got is None:
            from . import torch as lt
            got = self._specs[key] = tuple(lt.to_dtensor_placements(
                self.local(placement), ndim, as_tuples=False))
        return got


def _local_block(full, placement, mesh, sizes):
    """The block of a full tensor (the same on every rank) that this rank
    holds under `placement` (one entry per axis of `mesh`, whose sizes
    are `sizes`), as libplan lays it out; a P(sum) entry keeps the value
    on coordinate 0 of its axis and zeros elsewhere (other reductions
    keep it everywhere)."""
    coords = tuple(mesh.get_coordinate())
    pl = _pl.parse(placement)
    shape, offset = _pl.local_shape_and_offset(tuple(full.shape), pl,
                                               sizes, coords)
    block = full[tuple(slice(o, o + n) for o, n in zip(offset, shape))]
    block = block.contiguous()
    for axis, p in enumerate(pl):
        if isinstance(p, _pl.Partial) and p.reduce_op == "sum" and \
                coords[axis] != 0:
            block = _torch().zeros_like(block)
    return block


def _distribute(full, placement, mesh, plan, info, what):
    """A DTensor of `full` placed as `placement`, made from this rank's
    block without communication."""
    dt = info.dt
    if isinstance(full, dt.DTensor):
        return _redistribute(full, mesh, info.spec(placement, full.dim()),
                             dt)
    spec = info.spec(placement, full.dim())
    block = _local_block(full.detach() if full.requires_grad else full,
                         info.local(placement), mesh, info.sizes)
    return dt.DTensor.from_local(block, mesh, spec, run_check=False,
                                 shape=full.shape, stride=full.stride())


def _avg_to_sum(c, t):
    return c.is_partial() and t.is_partial() and \
        getattr(c, "reduce_op", "sum") == "avg" and \
        getattr(t, "reduce_op", "sum") == "sum"


def _redistribute(v, mesh, spec, dt):
    """v redistributed to `spec` (v itself when it is placed so). DTensor
    does not turn a replicated axis into a partial one; libplan's
    zero_non_owner does (coordinate 0 keeps
    the value, the others zeros; a max, min or avg keeps it everywhere):
    that local step is done here, differentiably (the gradient comes back
    partial on that axis, as the value was). Nor does DTensor turn a
    partial average into a partial sum (a mean over a split batch, which
    DTensor makes P(avg) and a plan may say P(sum)): each rank's value
    divided by the axis's size is, locally too (the same global value:
    its gradient passes unchanged, replicated on that axis)."""
    cur, spec = tuple(v.placements), tuple(spec)
    if cur == spec:
        return v
    step = tuple(c if _avg_to_sum(c, t) else
                 dt.Replicate() if t.is_partial() and not c.is_partial()
                 else t for c, t in zip(cur, spec))
    if step != cur:
        v = v.redistribute(mesh, step)
    if step == spec:
        return v
    coords = mesh.get_coordinate()
    owner, scale = True, 1
    grad = list(spec)
    for a, (s, t) in enumerate(zip(step, spec)):
        if s == t:
            continue
        if s.is_partial():  # an average made a sum
            scale *= mesh.size(a)
            grad[a] = dt.Replicate()
        elif getattr(t, "reduce_op", "sum") == "sum" and coords[a] != 0:
            owner = False
    local = v.to_local(grad_placements=tuple(grad))
    if not owner:
        local = local * 0
    elif scale != 1:  # the value divided, the gradient as it is
        fixed = local.detach()
        local = local + (fixed / scale - fixed)
    return dt.DTensor.from_local(local, mesh, spec, run_check=False,
                                 shape=v.shape, stride=v.stride())


def rows_split(table):
    """True when a DTensor embedding table has its rows (the vocabulary)
    split over some mesh axis: a vocab-parallel embedding."""
    return any(p.is_shard() and p.dim == 0 for p in table.placements)


def row_split_embedding(table, ids, mesh, out_spec, dt):
    """The lookup of a vocab-parallel embedding as libplan lowers it: each
    rank looks up the ids its rows hold (the others give zero rows), so
    the lookup is the sum over the axes that split the rows, and the
    result is placed `out_spec` (the plan's output placement of the op,
    partial on those axes). DTensor's own answer is a masked partial,
    which cannot be redistributed to a plan's P(sum); this one can, and
    its gradient reaches the table's rows this rank holds."""
    from .torch import from_dtensor_placements
    torch = _torch()
    coords = tuple(mesh.get_coordinate())
    _, off = _pl.local_shape_and_offset(
        tuple(table.shape), from_dtensor_placements(table.placements),
        list(mesh.shape), coords)
    shape = list(ids.shape) + [table.shape[1]]
    grad = list(table.placements)
    if isinstance(ids, dt.DTensor):
        if any(p.is_partial() for p in ids.placements):
            raise UnsupportedError("an embedding's ids placed %s (partial): "
                                   "ids are looked up whole"
                                   % from_dtensor_placements(ids.placements))
        # where the ids are split (a batch over dp) and the table is not,
        # each rank's gradient of the table is a partial sum
        for a, p in enumerate(ids.placements):
            if p.is_shard() and grad[a].is_replicate():
                grad[a] = dt.Partial()
        ids = ids.to_local()
    local = table.to_local(grad_placements=tuple(grad))
    first, count = off[0], local.shape[0]
    mine = (ids >= first) & (ids < first + count)
    rows = torch.where(mine, ids - first, torch.zeros_like(ids))
    y = torch.nn.functional.embedding(rows, local) * \
        mine.unsqueeze(-1).to(local.dtype)
    return dt.DTensor.from_local(y, mesh, tuple(out_spec), run_check=False,
                                 shape=tuple(shape),
                                 stride=contiguous_strides(shape))


def contiguous_strides(shape):
    """The strides of a contiguous tensor of `shape`."""
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= n
    return tuple(reversed(out))


def fx_trace(module):
    """torch.fx's graph of `module`; UnsupportedError naming the module
    and fx's reason when it cannot trace it."""
    import torch.fx
    try:
        return torch.fx.symbolic_trace(module)
    except Exception as e:
        raise UnsupportedError("torch.fx cannot trace %s: %s"
                               % (type(module).__name__,
                                  str(e).splitlines()[0] if str(e) else
                                  type(e).__name__)) from e


def _check_plan(plan):
    if not isinstance(plan, Plan):
        raise UsageError("parallelize needs a libplan Plan, not %s"
                         % type(plan).__name__)
    if not plan.has_mesh:
        raise UsageError("the plan has no mesh")
    for name, nest in plan.placements.items():
        levels = [p.level for p in _pl.parse(nest)
                  if isinstance(p, _pl.Shard) and p.level is not None]
        if levels != sorted(levels):
            raise UnsupportedError(
                "%s is placed %s, a nesting order DTensor has no placement "
                "for" % (name, nest))


def _place_state(module, plan, mesh, info):
    """Replaces every parameter and buffer the plan names by a DTensor
    placed as the plan says; returns {qualified name: parameter}."""
    torch = _torch()
    placed = {}
    for kind, items in (("param", list(module.named_parameters())),
                        ("buffer", list(module.named_buffers()))):
        for qname, t in items:
            if qname not in info.leaves:
                continue
            owner = module
            path = qname.split(".")
            for part in path[:-1]:
                owner = getattr(owner, part)
            d = _distribute(t.data, info.leaves[qname], mesh, plan, info,
                            qname)
            if kind == "param":
                new = torch.nn.Parameter(d, requires_grad=t.requires_grad)
                setattr(owner, path[-1], new)
                placed[qname] = new
            else:
                owner.register_buffer(path[-1], d,
                                      persistent=path[-1] not in
                                      owner._non_persistent_buffers_set)
    return placed


def _grad_syncs(params, plan, mesh, info):
    """{qualified name: (parameter, sync)} for every parameter that takes
    a gradient: sync(grad) is the gradient synchronised as the plan's
    training.grad_sync says (no training section: auto). auto and
    all_reduce redistribute it to its parameter's placement (the
    all-reduce of a partial sum); none keeps each rank's local gradient,
    relabelled as the parameter's placement, unsynchronised."""
    sync = grad_sync_of(plan)
    dt = info.dt
    out = {}
    for qname, p in params.items():
        how = sync.get(qname, "auto")
        if how == "reduce_scatter":
            raise UnsupportedError(
                "%s's gradient is reduce-scattered (training.grad_sync); "
                "parallelize syncs auto, all_reduce and none only" % qname)
        if not p.requires_grad:
            continue
        spec = tuple(info.spec(info.leaves[qname], p.dim()))

        def synced(g, spec=spec, how=how):
            if g is None or not isinstance(g, dt.DTensor):
                return g
            if how == "none":
                return dt.DTensor.from_local(
                    g.to_local(), mesh, spec, run_check=False,
                    shape=g.shape, stride=g.stride())
            if tuple(g.placements) != spec:
                with _torch().no_grad():
                    return _redistribute(g, mesh, spec, dt)
            return g
        out[qname] = (p, synced)
    return out


def _install_sync(params, plan, mesh, info):
    """Synchronises each gradient after it is accumulated (_grad_syncs);
    returns the hooks' handles."""
    handles = []
    for p, synced in _grad_syncs(params, plan, mesh, info).values():
        def hook(param, synced=synced):
            if param.grad is not None:
                param.grad = synced(param.grad)
        handles.append(p.register_post_accumulate_grad_hook(hook))
    return handles


def _make_interpreter(gm, module, plan, mesh, info):
    import torch.fx
    torch = _torch()
    dt = info.dt
    nodes = {}  # fx node name -> (op, its tensors, input placements, st)

    class Runner(torch.fx.Interpreter):
        """Runs the traced graph on DTensors with the plan's placements at
        every op boundary."""

        def __init__(self, alias=None):
            super().__init__(gm)
            # fx node -> (plan tensor, swapped dims); `alias`: a map
            # shared by runners of parts of the graph (a pipeline's
            # stages), each reading what earlier parts found
            self.alias = {} if alias is None else alias
            # (fx node, placement) -> the value redistributed there: made
            # once and reused by every op that reads it so, as lowering
            # reuses a buffer
            self.moved = {}

        def to(self, value, placement):
            if not isinstance(value, dt.DTensor):
                return value
            spec = info.spec(placement, value.dim())
            return _redistribute(value, mesh, spec, dt)

        def tensor_of(self, node):
            """The plan tensor an fx node's value is (with the dims a
            folded transpose swapped), or None."""
            return self.alias.get(node.name)

        def placed_arg(self, node, want):
            """The argument node's value at the placement `want` gives its
            plan tensor ({tensor: placement})."""
            v = self.env[node]
            a = self.tensor_of(node)
            if a is None or a[0] not in want:
                return v
            placement = want[a[0]]
            if a[1] is not None and isinstance(v, dt.DTensor):
                d0, d1 = a[1]
                rank = v.dim()
                pl = []
                for p in _pl.parse(placement):
                    if isinstance(p, _pl.Shard):
                        d = p.dim % rank
                        d = d1 if d == d0 else d0 if d == d1 else d
                        p = _pl.Shard(d)
                    pl.append(p)
                placement = _pl.format(pl)
            key = (node.name, placement)
            got = self.moved.get(key)
            if got is None:
                got = self.moved[key] = self.to(v, placement)
            return got

        def op_of(self, n):
            """The plan op a node runs and the plan tensors it produces."""
            if n.name in info.producer:
                return info.producer[n.name][0], [n.name]
            for suffix in (".0", ".values"):
                t = n.name + suffix
                if t in info.producer:
                    op = info.producer[t][0]
                    outs = [o for o in info.producer
                            if info.producer[o][0] == op]
                    return op, sorted(outs, key=lambda o:
                                      info.producer[o][1])
            return None, []

        def run_node(self, n):
            if n.op == "placeholder":
                return self.place_input(n, super().run_node(n))
            if n.op == "get_attr":
                obj = module
                for part in n.target.split("."):
                    obj = getattr(obj, part)
                if n.target in info.roles:
                    self.alias[n.name] = (n.target, None)
                return obj
            if n.op == "output":
                return self.deliver(n)
            got = nodes.get(n.name)
            if got is None:  # each node's op, looked up on the first run
                opname, outs = self.op_of(n)
                want, st = {}, None
                if opname is not None:
                    ins, st = info.ops[opname]
                    for t, p in zip(ins, st.inputs):
                        want.setdefault(t, p)
                got = nodes[n.name] = (opname, outs, want, st)
            opname, outs, want, st = got
            if opname is None:
                return self.passthrough(n)
            args = torch.fx.node.map_arg(
                n.args, lambda a: self.placed_arg(a, want))
            kwargs = torch.fx.node.map_arg(
                n.kwargs, lambda a: self.placed_arg(a, want))
            out = self.embedding_split(n, args, want, st) if \
                info.kinds[opname] == "embedding" else None
            if out is not None:
                pass
            elif n.op == "call_module":
                sub = self.fetch_attr(n.target)
                local = {}
                for t, p in want.items():
                    if t.startswith(n.target + ".") and \
                            "." not in t[len(n.target) + 1:]:
                        own = getattr(sub, t[len(n.target) + 1:])
                        moved = self.to(own, p)
                        if moved is not own:
                            local[t[len(n.target) + 1:]] = moved
                # the module's own parameters at another placement than
                # stored: passed in (their gradients flow back through
                # the redistribution)
                out = torch.func.functional_call(
                    sub, local, tuple(args), dict(kwargs)) if local else \
                    sub(*args, **kwargs)
            else:
                out = getattr(self, n.op)(n.target, args, kwargs)
            if len(outs) == 1 and not isinstance(out, (tuple, list)):
                self.alias[n.name] = (outs[0], None)
                return self.to(out, st.outputs[info.producer[outs[0]][1]])
            placed = []
            for i, o in enumerate(out):
                name = outs[i] if i < len(outs) else None
                placed.append(self.to(o, st.outputs[info.producer[name][1]])
                              if name else o)
            return type(out)(placed) if isinstance(out, tuple) else placed

        def embedding_split(self, n, args, want, st):
            """A vocab-parallel embedding's lookup (the table's rows split:
            row_split_embedding), or None for any other embedding."""
            if n.op == "call_module":
                table = self.fetch_attr(n.target).weight
                p = want.get(n.target + ".weight")
                table = self.to(table, p) if p else table
                ids = args[0]
            else:
                ids, table = args[0], args[1]
            if not isinstance(table, dt.DTensor) or not rows_split(table):
                return None
            return row_split_embedding(
                table, ids, mesh, info.spec(st.outputs[0], ids.dim() + 1),
                dt)

        def place_input(self, n, v):
            """The module's input v of placeholder n, placed as the plan
            places that input."""
            if n.name in info.leaves and isinstance(v, torch.Tensor):
                v = _distribute(v, info.leaves[n.name], mesh, plan, info,
                                n.name)
                self.alias[n.name] = (n.name, None)
            return v

        def run_part(self, env, part):
            """Runs the nodes `part` (in the graph's order) from `env`
            ({fx node: value}, what they read of other nodes); returns
            env with their values added."""
            self.env = env
            for n in part:
                self.env[n] = self.run_node(n)
            return self.env

        def passthrough(self, n):
            """A node without a plan op: a view or alias of a plan tensor,
            an element of a multi-output op, or shape arithmetic."""
            out = super().run_node(n)
            src = n.args[0] if n.args and isinstance(
                n.args[0], torch.fx.Node) else None
            if src is None:
                return out
            target = n.target if isinstance(n.target, str) else \
                getattr(n.target, "__name__", "")
            if n.op == "call_module":
                target = type(self.fetch_attr(n.target)).__name__
                alias = target in _ALIAS_MODULES
            else:
                alias = target in _ALIAS_CALLS
            if target == "getitem" and isinstance(self.env[src], (tuple,
                                                                  list)):
                _, outs = self.op_of(src)
                idx = n.args[1]
                if isinstance(idx, int) and idx < len(outs):
                    self.alias[n.name] = (outs[idx], None)
                return out
            if target == "getitem" and src.name in self.alias and \
                    isinstance(out, torch.Tensor) and \
                    isinstance(self.env[src], torch.Tensor) and \
                    tuple(out.shape) == tuple(self.env[src].shape):
                alias = True
            if src.name not in self.alias or not isinstance(
                    out, torch.Tensor):
                return out
            base, swap = self.alias[src.name]
            if alias:
                self.alias[n.name] = (base, swap)
            elif target in _SWAPS and swap is None:
                rank = out.dim()
                if target in ("t", "T"):
                    dims = (0, 1)
                elif target == "mT":
                    dims = (rank - 2, rank - 1)
                else:
                    dims = tuple(int(d) % rank for d in n.args[1:3])
                self.alias[n.name] = (base, dims)
            return out

        def delivered(self, a):
            """The value of node a as the program's output: in the plan's
            output placement when a is a program tensor."""
            v = self.env[a]
            t = self.tensor_of(a)
            if t is not None and t[1] is None and t[0] in info.roles:
                return self.to(v, info.placements[t[0]])
            return v

        def deliver(self, n):
            return torch.fx.node.map_arg(n.args[0], self.delivered)

    return Runner


def parallelize(module, plan, mesh=None):
    """Makes `module` run `plan` (see the module's docstring): its
    parameters and buffers become DTensors placed as the plan says, its
    forward redistributes every op's inputs and outputs to the plan's
    strategy, takes full inputs (the same on every rank) or DTensors and
    returns DTensors in the plan's output placements, and each gradient is
    synchronised as the plan's training section says. Returns the module.
    A pipelined plan runs with torch.distributed.pipelining in the plan's
    action order (torch_pipeline.py): the module then has step(*inputs).
    Needs torch and an initialised process group."""
    from . import torch as lt
    dt = lt._require()
    _check_plan(plan)
    mesh = mesh if mesh is not None else lt.device_mesh(plan)
    if tuple(mesh.shape) != tuple(plan.mesh.sizes):
        raise UsageError("the mesh %s is not the plan's %r"
                         % (tuple(mesh.shape), plan.mesh))
    if plan.stage_count > 0:
        from .torch_pipeline import parallelize_pipeline
        return parallelize_pipeline(module, plan, mesh)
    info = _Info(plan, dt)
    gm = fx_trace(module)
    params = _place_state(module, plan, mesh, info)
    module._libplan_sync = _install_sync(params, plan, mesh, info)
    runner = _make_interpreter(gm, module, plan, mesh, info)

    def forward(*args):
        return runner().run(*args)

    module.forward = forward
    return module
