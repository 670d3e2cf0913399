"""Pricing a plan on a hardware model: the cost report and its rows."""

import ctypes
import json
from collections import namedtuple

from . import _decls
from ._common import (_Handle, _mapping, _path, _take_out, enc, fn,
                      format_bytes, s)
from .errors import UsageError, check


CostOp = namedtuple("CostOp", "name kind stage flops bytes seconds "
                              "backward_seconds bound")
CostCollective = namedtuple("CostCollective",
                            "phase tensor kind axis from_ to group link "
                            "algorithm bytes calls seconds")
CostMemory = namedtuple("CostMemory", "stage parameters gradients optimizer "
                        "activations workspace total inflight")


def _row(struct, cls):
    vals = []
    for name, _ in struct._fields_:
        v = getattr(struct, name)
        vals.append(s(v) if isinstance(v, bytes) or v is None else v)
    return cls(*vals)


class CostReport(_Handle):
    """A plan's modeled step: seconds (and parts), memory peak per device
    against capacity, fit, and rows per op, collective and memory group."""

    _free = staticmethod(lambda p: fn.cost_report_free(p))
    _kind = "cost report"

    def __init__(self, ptr, hardware=""):
        super().__init__(ptr)
        h = self._h
        self.hardware = hardware
        self.step_seconds = fn.cost_report_step_seconds(h)
        self.compute_seconds = fn.cost_report_compute_seconds(h)
        self.comm_seconds = fn.cost_report_comm_seconds(h)
        self.bubble_seconds = fn.cost_report_bubble_seconds(h)
        self.memory_peak = fn.cost_report_memory_peak(h)
        self.memory_capacity = fn.cost_report_memory_capacity(h)
        self.fits = bool(fn.cost_report_fits(h))
        self.reason = s(fn.cost_report_reason(h))

    def _rows(self, count, get, struct, cls):
        h = self._h
        out = []
        for i in range(count(h)):
            x = struct()
            check(get(ctypes.byref(x), h, i))
            out.append(_row(x, cls))
        return out

    @property
    def ops(self):
        return self._rows(fn.cost_report_op_count, fn.cost_report_op,
                          _decls.CostOpInfo, CostOp)

    @property
    def collectives(self):
        return self._rows(fn.cost_report_collective_count,
                          fn.cost_report_collective, _decls.CostCollectiveInfo,
                          CostCollective)

    @property
    def memory(self):
        return self._rows(fn.cost_report_memory_count, fn.cost_report_memory,
                          _decls.CostMemoryInfo, CostMemory)

    def write(self, fmt="text"):
        """The report as "text", "json" or "yaml" (libplan-cost/1)."""
        return _take_out(fn.cost_report_write, self._h, enc(fmt, "format"))

    @property
    def text(self):
        return self.write("text")

    @property
    def json(self):
        return self.write("json")

    def to_dict(self):
        return json.loads(self.write("json"))

    def __str__(self):
        return self.text

    def __repr__(self):
        return "<libplan.CostReport %s: step %.3g s, peak %s%s>" % (
            self.hardware, self.step_seconds, format_bytes(self.memory_peak),
            "" if self.fits else ", does not fit")


def cost(plan, hardware, parameters, calibration):
    """Plan.cost: the plan priced on a hardware model (a CostReport)."""
    m = ctypes.c_void_p()
    hw = None if hardware is None else enc(hardware, "hardware")
    check(fn.cost_model_new(ctypes.byref(m), plan._h, hw))
    try:
        for k, v in _mapping(parameters, "parameters").items():
            try:
                v = float(v)
            except (TypeError, ValueError):
                raise UsageError("cost parameter %s: %r is not a number"
                                 % (k, v)) from None
            check(fn.cost_model_set(m, enc(k, "cost parameter"), v))
        if calibration is not None:
            check(fn.cost_model_load_calibration(
                m, _path(calibration, "calibration")))
        out = ctypes.c_void_p()
        check(fn.cost_plan(ctypes.byref(out), m, plan._h))
        return CostReport(out.value, s(fn.cost_model_hardware(m)))
    finally:
        fn.cost_model_free(m)


def cost_profiles():
    """The built-in hardware profiles' canonical names."""
    return [s(fn.cost_profile_name(i)) for i in range(fn.cost_profile_count())]

