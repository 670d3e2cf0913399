"""libplan.torch.parallelize for a pipelined plan: the module's fx graph
cut into the plan's stages and run with torch.distributed.pipelining, in
the plan's own action order.

The graph is traced with torch.fx and each node is given the stage of the
plan op it runs (a node without an op of its own, a view or an element of
a tuple, takes its input's stage); torch.fx's split_module makes one
submodule per stage. Each pipeline rank builds a PipelineStage for every
stage the plan's schedule puts on it. Stage k's inputs are the
activations made by earlier stages that k or a later stage reads, its
outputs those that a later stage reads (a skip connection is passed on
through the stages between); the module's own inputs are the same on
every rank, so each stage reads its own microbatch of them instead of
receiving them. The schedule's compute actions (F, B, I, W of a stage and
microbatch) are loaded into torch's runtime schedule
(_PipelineScheduleRuntime, compute-only: torch places the sends and
receives), so the order each rank runs is the plan's.

Limits (refused with UnsupportedError): a mesh with axes besides the
pipeline axis (DTensor placements inside a stage are not combined with the
pipeline yet), a module whose output is not its loss.
"""

import re

from .errors import UnsupportedError, UsageError

__all__ = ["parallelize_pipeline", "pipeline_axis_of"]

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
    """What each stage reads and hands on, from split_module's top graph:
    inputs[k] and outputs[k] name top-level values (the module's inputs,
    submod_j results and their elements); steps[k] computes stage k's
    values from them."""

    def __init__(self, parts, nstages):
        nodes = list(parts.graph.nodes)
        self.placeholders = [n.name for n in nodes if n.op == "placeholder"]
        out = next(n for n in nodes if n.op == "output")
        if not hasattr(out.args[0], "name"):
            raise UnsupportedError(
                "a pipelined module must return its loss alone")
        self.steps = {k: [] for k in range(nstages)}
        for n in nodes:
            if n.op == "call_module":
                k = int(n.target.rsplit("_", 1)[1])
                self.steps[k].append((n.name, n.target,
                                      [a.name for a in n.args]))
            elif n.op == "call_function":  # operator.getitem of a submod
                src = n.args[0]
                k = int(src.target.rsplit("_", 1)[1])
                self.steps[k].append((n.name, None, (src.name, n.args[1])))
        self.inputs, self.outputs = {}, {}
        live = []
        for k in range(nstages):
            reads = self._reads_from(k, nstages)
            self.inputs[k] = [v for v in live if v in reads]
            made = [s[0] for s in self.steps[k]]
            if k == nstages - 1:
                self.outputs[k] = [out.args[0].name]
            else:
                later = self._reads_from(k + 1, nstages)
                self.outputs[k] = [v for v in self.inputs[k] + made
                                   if v in later]
            live = self.outputs[k]

    def _reads_from(self, k, nstages):
        need = set()
        for j in range(k, nstages):
            for _, target, args in self.steps[j]:
                need |= set(args) if target is not None else {args[0]}
        return need - set(self.placeholders)


def _stage_module(torch, parts, cut, k, inputs_of):
    """Stage k as a module: its received activations in, those later
    stages read out; the module's own inputs from inputs_of(microbatch)."""

    class Stage(torch.nn.Module):
        def __init__(self):
            super().__init__()
            for _, target, _ in cut.steps[k]:
                if target is not None:
                    self.add_module(target, getattr(parts, target))
            self.microbatch = 0

        def forward(self, *received):
            env = dict(zip(cut.inputs[k], received))
            env.update(inputs_of(self.microbatch))
            for name, target, args in cut.steps[k]:
                if target is not None:
                    env[name] = getattr(self, target)(*[env[a] for a in args])
                else:
                    env[name] = env[args[0]][args[1]]
            outs = tuple(env[v] for v in cut.outputs[k])
            return outs if len(outs) > 1 else outs[0]

    return Stage()


def _check(plan, axis):
    if axis is None:
        raise UsageError("the plan has no pipeline axis")
    others = [a for a in plan.mesh.axes if a != axis]
    if others:
        raise UnsupportedError(
            "the plan's mesh has axes besides the pipeline axis %s (%s): "
            "parallelize runs a pipeline on a mesh of the pipeline axis "
            "alone; DTensor placements inside a stage are not combined "
            "with torch.distributed.pipelining yet" % (axis,
                                                      ", ".join(others)))
    if "training:" not in plan.text():
        raise UnsupportedError("a pipelined plan without a training "
                               "section: parallelize runs training steps")


def parallelize_pipeline(module, plan, mesh):
    """parallelize() of a pipelined plan (see the module's docstring).
    The returned module's step(*inputs) runs one training step: forward
    and backward of every microbatch in the plan's order, gradients
    accumulated (and divided by the microbatch count, as the loss is a
    mean) on the parameters of the stages this rank holds. It returns the
    loss (the mean over microbatches) on the rank that holds the last
    stage, None elsewhere. module.executed lists the compute actions this
    rank ran, (stage, kind, microbatch), in order."""
    import torch
    from torch.fx.passes.split_module import split_module
    from .torch_parallel import fx_trace
    from torch.distributed.pipelining import PipelineStage
    import torch.distributed.pipelining.schedules as ps

    axis = pipeline_axis_of(plan)
    _check(plan, axis)
    schedule = plan.schedule()
    try:
        nstages, nranks, m = (schedule.stages, schedule.ranks,
                              schedule.microbatches)
        actions = _compute_actions(schedule)
    finally:
        schedule.close()
    gm = fx_trace(module)
    stage_of = _stage_of_nodes(gm, plan, nstages)
    parts = split_module(gm, module, lambda n: stage_of[n.name],
                         keep_original_order=True)
    cut = _Cut(parts, nstages)
    # the mesh is the pipeline axis alone (_check)
    pp_rank, group = mesh.get_local_rank(), mesh.get_group()
    held = sorted({s for s, _, _ in actions[pp_rank]})
    chunks = {}
    executed = []

    def inputs_of(k):
        return chunks[k]

    mods = [_stage_module(torch, parts, cut, k, inputs_of)
            for k in range(nstages)]

    class Stage(PipelineStage):
        """Sets the microbatch its module reads its inputs for, and records
        the compute actions run."""

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

    def step(*inputs):
        if len(inputs) != len(cut.placeholders):
            raise UsageError("step takes the module's %d inputs, not %d"
                             % (len(cut.placeholders), len(inputs)))
        for x in inputs:
            if not isinstance(x, torch.Tensor) or x.dim() == 0 or \
                    x.shape[0] % m:
                raise UsageError(
                    "every input is split into %d microbatches along dim "
                    "0: a tensor whose dim 0 %d divides" % (m, m))
        split = [torch.tensor_split(x, m, dim=0) for x in inputs]
        for k in range(m):
            chunks[k] = {name: s[k] for name, s in zip(cut.placeholders,
                                                       split)}
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
    module.forward = forward
    module.executed = executed
    module.stages_held = tuple(held)
    module.pipeline_rank = pp_rank
    return module
