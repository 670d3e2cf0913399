"""Pipeline schedules: generated or a plan's own, simulated, written."""

import ctypes
from collections import namedtuple

from . import _decls
from ._common import _Handle, _findings, _ranged, _take_out, enc, fn, s
from .errors import NotFoundError, UsageError, check


Action = namedtuple("Action", "kind stage microbatch start end")


class Schedule(_Handle):
    """A pipeline schedule: per-rank action lists, simulated on demand."""

    _free = staticmethod(lambda p: fn.schedule_free(p))
    _kind = "schedule"

    @classmethod
    def generate(cls, kind, ranks, stages, microbatches):
        """A named schedule: "gpipe", "1f1b", "interleaved-1f1b", "zb-h1",
        "looped-bfs", "interleaved-zb", "zbv" or "dualpipev"
        (docs/training-and-pipelines.md, Schedules)."""
        k = fn.schedule_kind_from_name(enc(kind)) if isinstance(kind, str) \
            else -1
        if k < 0:
            raise UsageError("unknown schedule %r" % (kind,))
        out = ctypes.c_void_p()
        ranks, stages = _ranged(ranks, "ranks"), _ranged(stages, "stages")
        microbatches = _ranged(microbatches, "microbatches", "int64")
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
        opts = _decls.ScheduleOptions(1, (ctypes.c_int64 * 8)(1, 2, 1, 1, 0, 0,
                                                            0, 0),
                                    1 if blocking_sends else 0, 0)
        found = _findings(fn.schedule_simulate, self._h, ctypes.byref(opts))
        r = _decls.ScheduleResult()
        check(fn.schedule_result_get(ctypes.byref(r), self._h))
        return found, {k: getattr(r, k) for k, _ in r._fields_}

    def actions(self, rank):
        """The actions of rank `rank` in order (NotFoundError for a rank
        the schedule does not have)."""
        h = self._h
        rank = _ranged(rank, "rank")
        n = fn.schedule_length(h, rank)
        if n < 0:
            raise NotFoundError("no rank %d in a schedule on %d ranks"
                                % (rank, fn.schedule_ranks(h)))
        out = []
        a = _decls.ScheduleAction()
        for i in range(n):
            check(fn.schedule_get(ctypes.byref(a), h, rank, i))
            out.append(Action(s(fn.action_kind_name(a.kind)), a.stage,
                              a.microbatch, a.start, a.end))
        return out

    def write(self, fmt="text", name=None):
        """"text", "yaml", "json" or "svg"."""
        return _take_out(fn.schedule_write, self._h, enc(fmt, "format"),
                         None if name is None else enc(name, "name"))

    def __repr__(self):
        if self.closed:
            return "<libplan.Schedule closed>"
        return ("<libplan.Schedule %s: %d stages on %d ranks, %d "
                "microbatches>" % (self.kind, self.stages, self.ranks,
                                   self.microbatches))


def from_plan(plan):
    """Plan.schedule: the plan's pipeline schedule."""
    out = ctypes.c_void_p()
    check(fn.schedule_from_plan(ctypes.byref(out), plan._h))
    return Schedule(out.value)
