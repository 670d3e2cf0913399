"""Verification (libplan-verify): Plan.verify's options, the report, and
shape reduction. With the core library alone the calls raise
UnsupportedError (_lib)."""

import ctypes
import json
import os

from . import _decls, _lib
from ._common import (_Handle, _float, _mapping, _path, _ranged, _take_out,
                      enc, fn, s)
from .errors import Error, RangeError, UsageError, check

_COLLECTIVES = ("all_gather", "all_reduce", "reduce_scatter", "all_to_all")


_SIZES = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS", "WORLD_SIZE")
_RANKS = ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID", "RANK")


def _env_first(names):
    """The first of the launcher's variables that is set (an empty one
    counts as unset, as in the CLI), or None."""
    for n in names:
        v = os.environ.get(n)
        if v:
            return v
    return None


def _distributed(folder, rank, world_size, timeout, comm):
    """verify's distributed options as VerifyOptions' version-5 fields
    (world, rank, rendezvous, timeout_s, comm), or None in one process.
    folder: True (under mpirun or srun), or the shared folder for NCCL's
    id (a torchrun launch)."""
    if folder is None or folder is False:
        if rank is not None or world_size is not None or timeout is not None \
                or comm is not None:
            raise UsageError("verify: rank, world_size, timeout and comm go "
                             "with distributed")
        return None
    if world_size is None:
        world_size = _env_first(_SIZES)
    if rank is None:
        rank = _env_first(_RANKS)
    if world_size is None or rank is None:
        raise UsageError("verify: distributed runs under a launcher (mpirun, "
                         "srun, torchrun), or needs rank and world_size")
    try:  # the launcher's are text
        world_size = int(world_size) if isinstance(world_size, str) \
            else world_size
        rank = int(rank) if isinstance(rank, str) else rank
    except ValueError:
        raise UsageError("verify: the launcher's rank and world size must be "
                         "integers") from None
    # C takes both as an int: 2^40 would be 0, one process on its own
    world_size = _ranged(world_size, "verify: world_size")
    rank = _ranged(rank, "verify: rank")
    if world_size < 1:
        raise UsageError("verify: world_size must be at least 1, not %d"
                         % world_size)
    if not 0 <= rank < world_size:
        raise UsageError("verify: rank must lie in [0, world_size)")
    if comm not in (None, "mpi", "nccl"):
        raise UsageError("verify: comm is 'mpi' or 'nccl', not %r" % (comm,))
    t = 0.0 if timeout is None else float(timeout)
    if not 0 <= t < 1e9:
        raise UsageError("verify: timeout must be >= 0 seconds (and finite)")
    rv = None if folder is True else _path(folder, "verify: distributed")
    return (world_size, rank, rv, t, None if comm is None else enc(comm))


class VerifyReport(_Handle):
    """A verification's verdict: `equal` (also the truth value), the first
    divergent op and tensor, a diagnosis, collective counts, the text."""

    _free = staticmethod(lambda p: fn.verify_report_free(p))
    _kind = "verify report"

    def __init__(self, ptr):
        super().__init__(ptr)
        h = self._h
        self.equal = bool(fn.verify_report_equal(h))
        self.text = s(fn.verify_report_text(h))
        self.first_op = s(fn.verify_report_first_op(h)) or None
        self.first_tensor = s(fn.verify_report_first_tensor(h)) or None
        self.diagnosis = s(fn.verify_report_diagnosis(h))
        self.runner = s(fn.verify_report_runner(h))
        self.collectives = {k: fn.verify_report_collectives(h, k.encode())
                            for k in _COLLECTIVES}

    def write(self, fmt="json"):
        """The report as "text", "json", "yaml" or "junit"."""
        return _take_out(fn.verify_report_write, self._h, enc(fmt, "format"))

    def to_dict(self):
        return json.loads(self.write("json"))

    def __bool__(self):
        return self.equal

    def __str__(self):
        return self.text

    def __repr__(self):
        if self.equal:
            return "<libplan.VerifyReport equal>"
        return "<libplan.VerifyReport differs at %s (%s): %s>" % (
            self.first_op, self.first_tensor, self.diagnosis)


def _memory_limit(limit):
    """verify's memory_limit as the C field: None, the memory available
    here (0); False, no check (UINT64_MAX); else a positive byte count."""
    if limit is None:
        return 0
    if limit is False:
        return 2 ** 64 - 1
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise UsageError("verify: memory_limit is a byte count, None (what "
                         "is free here) or False (no check), not %r"
                         % (limit,))
    if not 0 < limit < 2 ** 64 - 1:
        raise RangeError("verify: memory_limit must be a positive byte "
                         "count below 2^64 - 1, not %d" % limit)
    return limit


def verify(plan, mode, seed, dtype, rtol, atol, tolerances, runner,
           distributed, rank, world_size, timeout, comm, memory_limit=None):
    """Plan.verify (its docstring has the arguments)."""
    if mode not in ("exact", "float"):
        raise UsageError("mode must be 'exact' or 'float', not %r"
                         % (mode,))
    seed = _ranged(seed, "seed", "uint64")
    limit = _memory_limit(memory_limit)
    tol = list(_mapping(tolerances, "tolerances").items())
    arr = (_decls.VerifyTolerance * max(1, len(tol)))()
    keep = []
    try:
        for i, (name, (rt, at)) in enumerate(tol):
            keep.append(enc(name, "tolerances: tensor"))
            arr[i] = _decls.VerifyTolerance(
                keep[-1], _float(rt, "tolerances: %s: rtol" % (name,), 0),
                _float(at, "tolerances: %s: atol" % (name,), 0))
        dist = _distributed(distributed, rank, world_size, timeout,
                            comm)
        # version 6: the memory preflight runs as in the tool
        opts = _decls.VerifyOptions(
            6, 0 if mode == "exact" else 1, seed,
            _float(rtol, "rtol", 0), _float(atol, "atol", 0),
            None if dtype is None else enc(dtype, "dtype"),
            arr if tol else None, len(tol),
            None if runner is None else enc(runner, "runner"),
            *(dist or (0, 0, None, 0.0, None)), limit)
    except Error:
        raise  # already says which argument
    except (TypeError, ValueError) as e:
        raise UsageError("verify: %s (tolerances are {tensor: (rtol, "
                         "atol)})" % e) from None
    out = ctypes.c_void_p()
    check(fn.verify(ctypes.byref(out), plan._h, ctypes.byref(opts)))
    return VerifyReport(out.value)


def estimate(plan, mode):
    """Plan.verify_estimate: the bytes verifying the plan would take."""
    if mode not in ("exact", "float"):
        raise UsageError("mode must be 'exact' or 'float', not %r"
                         % (mode,))
    opts = _decls.VerifyOptions(6, 0 if mode == "exact" else 1)
    out = ctypes.c_uint64()
    check(fn.verify_estimate(ctypes.byref(out), plan._h, None,
                             ctypes.byref(opts)))
    return out.value


REDUCE_MESH = 1  # PLAN_REDUCE_MESH


def reduce_shapes(plan, mesh=False):
    """Plan.reduce_shapes: (the smaller plan, the one-line summary); with
    mesh, every mesh axis shrinks too (plan_reduce_plan)."""
    out = ctypes.c_void_p()
    summ = ctypes.c_void_p()
    check(fn.reduce_plan(ctypes.byref(out), ctypes.byref(summ), plan._h,
                         REDUCE_MESH if mesh else 0))
    return type(plan)(out.value), _lib.take_string(summ.value)
