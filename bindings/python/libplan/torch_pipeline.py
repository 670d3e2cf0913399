"""libplan.torch.parallelize for a pipelined plan: the module's fx graph
cut into the plan's stages and run with torch.distributed.pipelining, in
the plan's own action order.

The graph is traced with torch.fx and each node is given the stage of the
plan op it runs (a node without an op of its own, a view or an element of
a tuple, takes its input's stage). Each pipeline rank builds a
PipelineStage for every stage the plan's schedule puts on it; a stage's
module runs that stage's nodes of the traced graph. Stage k's inputs are
the activations made by earlier stages that k or a later stage reads, its
outputs those that a later stage reads (a skip connection is passed on
through the stages between); the module's own inputs are the same on
every rank, so each stage reads its own microbatch of them instead of
receiving them. The schedule's compute actions (F, B, I, W of a stage and
microbatch) are loaded into torch's runtime schedule
(_PipelineScheduleRuntime, compute-only: torch places the sends and
receives), so the order each rank runs is the plan's.

On a mesh with other axes besides the pipeline axis (dp x pp, tp x pp,
...) each stage's nodes run in torch_parallel's interpreter on the
sub-mesh of those axes: parameters placed as the plan stores them, every
op's inputs and outputs redistributed to its strategy's placements (the
pipeline axis's entry, R, dropped). An activation crosses a stage
boundary as the local block of the DTensor the plan makes there, and the
receiving stage makes the same DTensor of it. Each microbatch's gradient
of a parameter is synchronised over those axes, as training.grad_sync
says, when it is computed (before it is accumulated), where the lowered
plan puts the sync: inside the stage, once per microbatch.

Limits: a module whose output is not its loss (UnsupportedError), a
value that is not a tensor crossing a stage boundary (UnsupportedError),
a gradient reduce-scattered (as parallelize).
"""

import re

from .errors import UnsupportedError, UsageError

__all__ = ["parallelize_pipeline", "pipeline_axis_of",
           "pipeline_collectives", "unstaged_collectives"]

_AXIS_LINE = re.compile(r"^  axis: (\S+)\s*$")


def pipeline_axis_of(plan):
    """The name of the plan's pipeline axis (its `pipeline.axis`), or None
    for a plan without a pipeline."""
    inside = False
    for line in plan.text().splitlines():
        if line.startswith("pipeline:"):
            inside = True
            continue
        if inside:
            if not line.startswith("  "):
                break
            m = _AXIS_LINE.match(line)
            if m:
                return m.group(1).strip('"')
    return None


def _compute_actions(schedule):
    """{pipeline rank: [(stage, kind, microbatch)]}: the schedule's compute
    actions in order."""
    return {r: [(a.stage, a.kind, a.microbatch) for a in schedule.actions(r)
                if a.kind in ("F", "B", "I", "W")]
            for r in range(schedule.ranks)}


def _stage_of_nodes(gm, plan, nstages):
    """{fx node name: stage}: a node that produces a plan op's output
    takes the op's stage; another one its first input's (a view, a tuple
    element); a node without inputs (a constant's get_attr) its first
    user's."""
    producer = {}
    for o in plan.ops:
        for t in o.outputs:
            producer[t] = o.name
    stage = {}
    nodes = [n for n in gm.graph.nodes if n.op not in ("placeholder",
                                                       "output")]
    for n in nodes:
        op = producer.get(n.name) or producer.get(n.name + ".0") or \
            producer.get(n.name + ".values")
        if op is not None:
            stage[n.name] = plan.stage(op)
            continue
        srcs = [a for a in n.all_input_nodes if a.name in stage]
        if srcs:
            stage[n.name] = max(stage[a.name] for a in srcs)
    for n in reversed(nodes):  # inputless nodes: their first user's stage
        if n.name not in stage:
            users = [u for u in n.users if u.name in stage]
            stage[n.name] = min(stage[u.name] for u in users) if users \
                else 0
    for n in nodes:
        later = [stage[a.name] for a in n.all_input_nodes if a.name in stage]
        if later and max(later) > stage[n.name]:
            raise UnsupportedError(
                "fx node %s (stage %d) reads a value of stage %d: the plan's "
                "stages do not follow the module's order"
                % (n.name, stage[n.name], max(later)))
        if not 0 <= stage[n.name] < nstages:
            raise UnsupportedError("fx node %s has no stage in the plan"
                                   % n.name)
    return stage


class _Cut:
    """Which fx nodes each stage runs and which values cross each stage
    boundary, from the traced graph and each node's stage: steps[k] are
    stage k's nodes in the graph's order, reads[k] the module's inputs
    (placeholders) they read, inputs[k] the values stage k receives (made
    by earlier stages, read by k or a later stage: a skip connection is
    handed on through the stages between), outputs[k] those it hands on
    (for the last stage, the loss)."""

    def __init__(self, gm, stage_of, nstages):
        nodes = list(gm.graph.nodes)
        self.placeholders = [n for n in nodes if n.op == "placeholder"]
        out = next(n for n in nodes if n.op == "output")
        loss = out.args[0]
        if not hasattr(loss, "name") or loss.op == "placeholder":
            raise UnsupportedError(
                "a pipelined module must return its loss alone")
        self.loss = loss
        self.steps = {k: [n for n in nodes if n.name in stage_of and
                          stage_of[n.name] == k] for k in range(nstages)}
        self.reads = {k: [p for p in self.placeholders
                          if any(stage_of.get(u.name) == k for u in p.users)]
                      for k in range(nstages)}
        self.inputs, self.outputs = {}, {}
        live = []
        for k in range(nstages):
            need = self._needs(k, nstages)
            self.inputs[k] = [v for v in live if v in need]
            if k == nstages - 1:
                self.outputs[k] = [loss]
            else:
                later = self._needs(k + 1, nstages)
                self.outputs[k] = [v for v in self.inputs[k] + self.steps[k]
                                   if v in later]
            live = self.outputs[k]

    def _needs(self, k, nstages):
        """The nodes of any stage that stages k.. read, and the loss."""
        need = {self.loss}
        for j in range(k, nstages):
            for n in self.steps[j]:
                need |= set(n.all_input_nodes)
        return need - set(self.placeholders)


def _check(plan, axis, mesh):
    if axis is None:
        raise UsageError("the plan has no pipeline axis")
    if "training:" not in plan.text():
        raise UnsupportedError("a pipelined plan without a training "
                               "section: parallelize runs training steps")
    axes = tuple(plan.mesh.axes)
    if len(axes) > 1 and tuple(getattr(mesh, "mesh_dim_names", None) or
                               ()) != axes:
        raise UsageError(
            "a pipelined plan on the axes %s runs on a mesh whose axes are "
            "named so (device_mesh(plan)), not %s"
            % (", ".join(axes), getattr(mesh, "mesh_dim_names", None)))


def pipeline_collectives(plan, stages):
    """{kind: count} of the four collectives (torch_parallel.COLLECTIVES)
    that a rank holding `stages` runs in one training step of the
    pipelined plan: each lowered step of those stages along a device
    axis, once per microbatch. The steps along the microbatch axis (the
    gradient accumulation, the loss's sum over microbatches: autograd's
    accumulation in the run) are not counted, nor the unstaged ones after
    them (unstaged_collectives lists those)."""
    from .torch_parallel import COLLECTIVES
    stages = set(stages)
    counts = {k: 0 for k in COLLECTIVES}
    sched = plan.schedule()
    try:
        per = sched.microbatches
    finally:
        sched.close()
    low = plan.lowered()
    try:
        for st in low.steps:
            if st.kind in counts and st.axis != "mb" and \
                    st.stage in stages:
                counts[st.kind] += per
    finally:
        low.close()
    return counts


def unstaged_collectives(plan):
    """The lowered collectives of a pipelined plan that run after the
    schedule along a device axis: [(kind, axis, tensor read)]; the run
    makes them per microbatch inside its stage, and
    pipeline_collectives does not count them."""
    from .torch_parallel import COLLECTIVES
    low = plan.lowered()
    try:
        return [(st.kind, st.axis, low.buffers[st.inputs[0]].tensor)
                for st in low.steps
                if st.stage is None and st.kind in COLLECTIVES and
                st.axis != "mb"]
    finally:
        low.close()


def _plain(torch, gm):
    """Interpreters of parts of the graph without placements (a mesh of
    the pipeline axis alone): the module's own values."""

    class Plain(torch.fx.Interpreter):
        def place_input(self, n, v):
            return v

        def run_part(self, env, part):
            self.env = env
            for n in part:
                self.env[n] = self.run_node(n)
            return self.env

        def delivered(self, a):
            return self.env[a]

    return lambda: Plain(gm)


class _Boundary:
    """Activations cross a stage boundary as plain tensors: a DTensor is
    sent as its local block (in the placement the plan gives it there)
    and made a DTensor again by the receiving stage with that placement,
    global shape and stride (recorded when the sender made it from
    microbatch 0; every microbatch has the same shapes)."""

    def __init__(self, dt, mesh):
        self.dt, self.mesh, self.specs = dt, mesh, {}
        self.local_shapes = {}

    def placed(self):
        """{fx node name: (placement on the stages' mesh, local shape)} of
        the DTensors handed on (known once prepared)."""
        from . import torch as lt
        return {n.name: (lt.from_dtensor_placements(spec[0]),
                         self.local_shapes[n.name])
                for n, spec in self.specs.items()}

    def send(self, node, v):
        import torch
        dt = self.dt
        if dt is not None and isinstance(v, dt.DTensor):
            self.specs[node] = (tuple(v.placements), v.shape, v.stride())
            # a copy, not to_local's view: torch's input-only backward
            # detaches the stage's outputs in place
            local = v.to_local().clone(memory_format=torch.contiguous_format)
            self.local_shapes[node.name] = tuple(local.shape)
            return local
        if not isinstance(v, torch.Tensor):
            raise UnsupportedError(
                "fx node %s crosses a stage boundary and is not a tensor "
                "(%s): stages pass tensors only" % (node.name,
                                                   type(v).__name__))
        return v.clone() if v._is_view() else v

    def receive(self, node, v):
        got = self.specs.get(node)
        if got is None:
            # not the received leaf itself (a module's forward hook may
            # hook its gradient: see forward_maybe_with_nosync)
            return v.view_as(v) if v.requires_grad else v
        placements, shape, stride = got
        return self.dt.DTensor.from_local(v, self.mesh, placements,
                                          run_check=False, shape=shape,
                                          stride=stride)


def _stage_module(torch, gm, module, cut, k, interp, boundary, inputs_of):
    """Stage k as a module: its received activations in, those later
    stages read out (local tensors); the module's own inputs from
    inputs_of(microbatch). Its nodes run in an interpreter of the traced
    graph (interp(): torch_parallel's, with the plan's placements at
    every op, or a plain one). It holds the parameters its nodes use, so
    that torch's stage scales, and splits the backward of, those."""

    class Stage(torch.nn.Module):
        def __init__(self):
            super().__init__()
            for n in cut.steps[k]:
                name = str(n.target).replace(".", "_")
                if n.op == "call_module" and name not in self._modules:
                    self.add_module(name, gm.get_submodule(n.target))
                elif n.op == "get_attr":
                    obj = module
                    for part in n.target.split("."):
                        obj = getattr(obj, part)
                    if isinstance(obj, torch.nn.Parameter) and \
                            name not in self._parameters:
                        self.register_parameter(name, obj)
            self.microbatch = 0

        def forward(self, *received):
            run = interp()
            given = inputs_of(self.microbatch)
            env = {p: run.place_input(p, given[p.name])
                   for p in cut.reads[k]}
            for node, v in zip(cut.inputs[k], received):
                env[node] = boundary.receive(node, v)
            run.run_part(env, cut.steps[k])
            last = k == len(cut.steps) - 1
            outs = tuple(boundary.send(v, run.delivered(v) if last
                                       else env[v])
                         for v in cut.outputs[k])
            return outs if len(outs) > 1 else outs[0]

    return Stage()


def parallelize_pipeline(module, plan, mesh):
    """parallelize() of a pipelined plan (see the module's docstring).
    The returned module's step(*inputs) runs one training step: forward
    and backward of every microbatch in the plan's order, gradients
    accumulated (and divided by the microbatch count, as the loss is a
    mean) on the parameters of the stages this rank holds. It returns the
    loss (the mean over microbatches) on the ranks that hold the last
    stage, None elsewhere. prepare(*inputs) builds the stages from the
    first inputs (step does it the first time): it runs every stage's
    forward of microbatch 0 once, with the collectives of those forwards.
    module.executed lists the compute actions this rank ran, (stage,
    kind, microbatch), in order; module.boundaries() the DTensors the
    stages hand on as local tensors (the last stage's loss too), {fx
    node: (placement on the stages' mesh, local shape)}, once prepared."""
    import torch
    from . import torch_parallel as tp
    from torch.distributed.pipelining import PipelineStage
    import torch.distributed.pipelining.schedules as ps

    axis = pipeline_axis_of(plan)
    _check(plan, axis, mesh)
    schedule = plan.schedule()
    try:
        nstages, nranks, m = (schedule.stages, schedule.ranks,
                              schedule.microbatches)
        actions = _compute_actions(schedule)
    finally:
        schedule.close()
    gm = tp.fx_trace(module)
    stage_of = _stage_of_nodes(gm, plan, nstages)
    cut = _Cut(gm, stage_of, nstages)
    names = list(plan.mesh.axes)
    at = names.index(axis)
    others = tuple(a for a in names if a != axis)
    pp_rank, group = mesh.get_local_rank(at), mesh.get_group(at)
    if others:
        # every stage runs the plan's placements on the sub-mesh of the
        # other axes; each microbatch's gradient is synchronised there
        # before it is accumulated, as the lowered plan does
        from . import torch as lt
        dt = lt._require()
        sub = mesh[others if len(others) > 1 else others[0]]
        info = tp._Info(plan, dt, drop=at)
        params = tp._place_state(module, plan, sub, info)
        runner = tp._make_interpreter(gm, module, plan, sub, info)
        alias = {}

        def interp():
            return runner(alias)
        module._libplan_sync = [
            p.register_hook(synced)
            for p, synced in tp._grad_syncs(params, plan, sub,
                                            info).values()]
        boundary = _Boundary(dt, sub)
    else:
        interp = _plain(torch, gm)
        boundary = _Boundary(None, None)
    held = sorted({s for s, _, _ in actions[pp_rank]})
    chunks = {}
    executed = []

    def inputs_of(k):
        return chunks[k]

    mods = [_stage_module(torch, gm, module, cut, k, interp, boundary,
                          inputs_of) for k in range(nstages)]

    class Stage(PipelineStage):
        """Sets the microbatch its module reads its inputs for, and records
        the compute actions run."""

        def forward_maybe_with_nosync(self, *args, **kwargs):
            # the stage's forward without module hooks: a global forward
            # hook (CommDebugMode's module tracker) hooks the gradients of
            # the received activations, leaves, which the input-only
            # backward (an I action, autograd.grad) does not allow
            return self.submod.forward(*args, **kwargs)

        def forward_one_chunk(self, fwd_chunk_id, *args, **kwargs):
            self.submod.microbatch = fwd_chunk_id
            executed.append((self.stage_index, "F", fwd_chunk_id))
            return super().forward_one_chunk(fwd_chunk_id, *args, **kwargs)

        def backward_one_chunk(self, bwd_chunk_id, *args, **kwargs):
            full = kwargs.get("full_backward", args[1] if len(args) > 1
                              else True)
            executed.append((self.stage_index, "B" if full else "I",
                             bwd_chunk_id))
            return super().backward_one_chunk(bwd_chunk_id, *args, **kwargs)

        def backward_weight_one_chunk(self, bwd_chunk_id, *args, **kwargs):
            executed.append((self.stage_index, "W", bwd_chunk_id))
            return super().backward_weight_one_chunk(bwd_chunk_id, *args,
                                                     **kwargs)

    kinds = {"F": ps._ComputationType.FORWARD,
             "B": ps._ComputationType.FULL_BACKWARD,
             "I": ps._ComputationType.BACKWARD_INPUT,
             "W": ps._ComputationType.BACKWARD_WEIGHT}
    order = {r: [ps._Action(s, kinds[k], mb) for s, k, mb in acts]
             for r, acts in actions.items()}
    state = {"runtime": None}

    def build():
        """The stages and the runtime, once the first step's inputs give
        the shapes: every stage's example inputs and outputs, from a run
        of microbatch 0 through all of them (the same on every rank)."""
        ex, vals = [], ()
        for k in range(nstages):
            mods[k].microbatch = 0
            out = mods[k](*vals)
            out = out if isinstance(out, tuple) else (out,)
            out = tuple(t.detach().requires_grad_(t.requires_grad)
                        for t in out)
            ex.append((vals, out))
            vals = out
        for p in module.parameters():
            p.grad = None
        stages = [Stage(mods[k], k, nstages, torch.device("cpu"),
                        input_args=ex[k][0] if k else (),
                        output_args=ex[k][1], group=group)
                  for k in held]
        rt = ps._PipelineScheduleRuntime(stages, n_microbatches=m,
                                         loss_fn=lambda out, target: out,
                                         scale_grads=True)
        rt._prepare_schedule_with_comms(order, format="compute_only")
        state["runtime"] = rt

    def split(inputs):
        if len(inputs) != len(cut.placeholders):
            raise UsageError("step takes the module's %d inputs, not %d"
                             % (len(cut.placeholders), len(inputs)))
        for x in inputs:
            if not isinstance(x, torch.Tensor) or x.dim() == 0 or \
                    x.shape[0] % m:
                raise UsageError(
                    "every input is split into %d microbatches along dim "
                    "0: a tensor whose dim 0 %d divides" % (m, m))
        parts = [torch.tensor_split(x, m, dim=0) for x in inputs]
        for k in range(m):
            chunks[k] = {p.name: s[k] for p, s in zip(cut.placeholders,
                                                      parts)}

    def prepare(*inputs):
        if state["runtime"] is None:
            split(inputs)
            build()

    def step(*inputs):
        split(inputs)
        if state["runtime"] is None:
            build()
        del executed[:]
        losses = []
        last = nstages - 1 in held
        first = 0 in held
        state["runtime"].step(arg_mbs=[()] * m if first else None,
                              target_mbs=[None] * m if last else None,
                              losses=losses if last else None,
                              return_outputs=False)
        if not last:
            return None
        return torch.stack([loss.detach() for loss in losses]).mean()

    def forward(*args):
        raise UnsupportedError(
            "a pipelined module runs whole training steps: call "
            "module.step(*inputs)")

    module.step = step
    module.prepare = prepare
    module.forward = forward
    module.executed = executed
    module.boundaries = boundary.placed
    module.stages_held = tuple(held)
    module.pipeline_rank = pp_rank
    return module
