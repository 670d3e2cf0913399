"""Finding libplan.so, declaring its functions, and the ABI check.

The library is looked for, in order:
  1. $LIBPLAN_LIBRARY (a path to libplan.so or libplan.so.N): an explicit
     choice wins, so a debug build can be tried under an installed wheel;
  2. beside this package (a wheel carries libplan.so.N in libplan/);
  3. build/ of the source tree this package sits in (bindings/python/libplan
     -> ../../../build), for use with PYTHONPATH=bindings/python;
  4. the system loader (ld.so.conf, LD_LIBRARY_PATH, `make install`).
"""

import ctypes
import ctypes.util
import os

# The ABI this binding was written against: PLAN_ABI_VERSION in common.h,
# also the SONAME suffix (libplan.so.0).
ABI_VERSION = 0

_SONAME = "libplan.so.%d" % ABI_VERSION
_HERE = os.path.dirname(os.path.abspath(__file__))


class LibraryError(ImportError):
    """libplan.so could not be found or loaded, or its ABI is not ours."""


def _candidates():
    env = os.environ.get("LIBPLAN_LIBRARY")
    if env:
        return [("$LIBPLAN_LIBRARY", env)], True
    out = []
    for name in (_SONAME, "libplan.so"):
        out.append(("beside the package", os.path.join(_HERE, name)))
    root = os.path.dirname(os.path.dirname(os.path.dirname(_HERE)))
    tree = os.path.join(root, "build")
    for name in (_SONAME, "libplan.so"):
        out.append(("the source tree's build/", os.path.join(tree, name)))
    return out, False


def check_abi(lib, path, expected=ABI_VERSION):
    """Raises LibraryError unless `lib` reports the ABI `expected`."""
    try:
        fn = lib.plan_abi_version
    except AttributeError:
        raise LibraryError("%s is not libplan: it has no plan_abi_version()"
                           % path) from None
    fn.restype = ctypes.c_int
    fn.argtypes = []
    got = fn()
    if got != expected:
        raise LibraryError(
            "%s has ABI version %d, but this libplan binding needs ABI %d "
            "(libplan.so.%d): install the binding that matches the library, "
            "or point LIBPLAN_LIBRARY at a matching libplan.so"
            % (path, got, expected, expected))


def load_library():
    """Finds and loads libplan.so; returns (CDLL, path)."""
    cands, explicit = _candidates()
    tried = []
    for where, path in cands:
        if not explicit and not os.path.exists(path):
            tried.append("%s (%s: not there)" % (path, where))
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            if explicit:
                raise LibraryError("LIBPLAN_LIBRARY=%s cannot be loaded: %s"
                                   % (path, e)) from None
            tried.append("%s (%s: %s)" % (path, where, e))
            continue
        check_abi(lib, path)
        return lib, path
    for name in (_SONAME, ctypes.util.find_library("plan")):
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name)
        except OSError as e:
            tried.append("%s (system loader: %s)" % (name, e))
            continue
        check_abi(lib, name)
        return lib, name
    raise LibraryError(
        "libplan.so not found; tried:\n  " + "\n  ".join(tried) +
        "\nBuild it with `make` in the source tree, install it with "
        "`make install`, or set LIBPLAN_LIBRARY to its path.")


lib, path = load_library()

# free() of the C library libplan allocates with, for buffers it hands over.
_libc = ctypes.CDLL(None)
free = _libc.free
free.restype = None
free.argtypes = [ctypes.c_void_p]

c_int, c_int64, c_uint64, c_double = (ctypes.c_int, ctypes.c_int64,
                                      ctypes.c_uint64, ctypes.c_double)
c_char_p, c_void_p = ctypes.c_char_p, ctypes.c_void_p
c_size_t = ctypes.c_size_t
P = ctypes.POINTER


class Error(ctypes.Structure):
    _fields_ = [("code", c_int), ("message", c_char_p), ("file", c_char_p),
                ("line", c_int), ("column", c_int)]


class Hash(ctypes.Structure):
    _fields_ = [("high", c_uint64), ("low", c_uint64)]


class UpgradeInfo(ctypes.Structure):
    _fields_ = [("from_major", c_int), ("from_minor", c_int),
                ("upgraded", c_int), ("layout_kept", c_int),
                ("program_by_path", c_int), ("program_rehashed", c_int),
                ("has", c_int * 4), ("before", Hash * 4), ("after", Hash * 4)]


class Diag(ctypes.Structure):
    _fields_ = [("severity", c_int), ("code", c_char_p), ("message", c_char_p),
                ("object", c_char_p), ("file", c_char_p), ("line", c_int),
                ("column", c_int)]


class WriteOptions(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint), ("self_contained", c_int)]


class LoadOptions(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint), ("threads", c_int)]


class VerifyTolerance(ctypes.Structure):
    _fields_ = [("tensor", c_char_p), ("rtol", c_double), ("atol", c_double)]


class VerifyOptions(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint), ("mode", c_int),
                ("seed", c_uint64),
                ("rtol", c_double), ("atol", c_double), ("dtype", c_char_p),
                ("tolerances", P(VerifyTolerance)), ("ntolerances", c_int),
                ("runner", c_char_p),
                # version 5: distributed verification
                ("world", c_int), ("rank", c_int), ("rendezvous", c_char_p),
                ("timeout_s", c_double), ("comm", c_char_p)]


class CostOpInfo(ctypes.Structure):
    _fields_ = [("name", c_char_p), ("kind", c_char_p), ("stage", c_int),
                ("flops", c_double), ("bytes", c_double),
                ("seconds", c_double),
                ("backward_seconds", c_double), ("bound", c_char_p)]


class CostCollectiveInfo(ctypes.Structure):
    _fields_ = [("phase", c_char_p), ("tensor", c_char_p), ("kind", c_char_p),
                ("axis", c_char_p), ("from_", c_char_p), ("to", c_char_p),
                ("group", c_int64), ("link", c_char_p),
                ("algorithm", c_char_p), ("bytes", c_double),
                ("calls", c_double), ("seconds", c_double)]


class CostMemoryInfo(ctypes.Structure):
    _fields_ = [("stage", c_int), ("parameters", c_double),
                ("gradients", c_double), ("optimizer", c_double),
                ("activations", c_double), ("workspace", c_double),
                ("total", c_double), ("inflight", c_double)]


class ScheduleOptions(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint), ("duration", c_int64 * 8),
                ("blocking_sends", c_int), ("note_blocking", c_int)]


class ScheduleAction(ctypes.Structure):
    _fields_ = [("kind", c_int), ("stage", c_int), ("microbatch", c_int64),
                ("start", c_int64), ("end", c_int64), ("line", c_int),
                ("column", c_int)]


class ScheduleResult(ctypes.Structure):
    _fields_ = [("simulated", c_int), ("deadlock", c_int),
                ("makespan", c_int64), ("compute", c_int64),
                ("bubble", c_double), ("peak_activations", c_int)]


vp = c_void_p
pp = P(c_void_p)
ps = P(c_void_p)  # char ** out (freed with free())

# name: (restype, argtypes)
_PROTOS = {
    "plan_status_name": (c_char_p, [c_int]),
    "plan_error_last": (P(Error), []),
    "plan_error_clear": (None, []),
    "plan_version_string": (c_char_p, []),
    "plan_version_number": (c_int, []),
    "plan_abi_version": (c_int, []),
    "plan_hash_format": (c_char_p, [Hash, ctypes.c_char_p]),
    # diag.h
    "plan_diags_free": (None, [vp]),
    "plan_diags_count": (c_size_t, [vp]),
    "plan_diags_get": (P(Diag), [vp, c_size_t]),
    # program.h
    "plan_program_load": (c_int, [pp, c_char_p]),
    "plan_program_load_buffer": (c_int, [pp, c_char_p, c_size_t, c_char_p]),
    "plan_program_free": (None, [vp]),
    "plan_program_hash": (c_int, [P(Hash), vp]),
    "plan_program_name": (c_char_p, [vp]),
    "plan_program_op_count": (c_int, [vp]),
    "plan_program_tensor_count": (c_int, [vp]),
    "plan_program_op_name": (c_char_p, [vp, c_int]),
    "plan_program_op_kind": (c_char_p, [vp, c_int]),
    "plan_program_op_input": (c_int, [vp, c_int, c_int]),
    "plan_program_op_output": (c_int, [vp, c_int, c_int]),
    "plan_program_op_find": (c_int, [vp, c_char_p]),
    "plan_program_tensor_name": (c_char_p, [vp, c_int]),
    "plan_program_tensor_find": (c_int, [vp, c_char_p]),
    "plan_program_tensor_shape": (c_int, [vp, c_int, P(c_int64), c_int]),
    "plan_program_tensor_dtype": (c_char_p, [vp, c_int]),
    "plan_program_tensor_role": (c_char_p, [vp, c_int]),
    "plan_program_op_signature": (c_uint64, [vp, c_int]),
    "plan_program_tensor_signature": (c_uint64, [vp, c_int]),
    "plan_program_write_buffer": (c_int, [ps, P(c_size_t), vp]),
    "plan_program_grad": (c_int, [pp, vp, vp]),
    # plan.h
    "plan_load_ext": (c_int, [pp, c_char_p, P(LoadOptions)]),
    "plan_load_buffer": (c_int, [pp, c_char_p, c_size_t, c_char_p, c_char_p]),
    "plan_free": (None, [vp]),
    "plan_write_buffer": (c_int, [ps, P(c_size_t), vp, P(WriteOptions)]),
    "plan_save": (c_int, [vp, c_char_p, P(WriteOptions)]),
    "plan_hash_part": (c_int, [P(Hash), vp, c_int]),
    "plan_canonical": (c_int, [ps, P(c_size_t), vp, c_int]),
    "plan_write_file_atomic": (c_int, [c_char_p, c_char_p, c_size_t]),
    "plan_upgrade_buffer": (c_int, [ps, P(c_size_t), P(UpgradeInfo),
                                    c_char_p, c_size_t, c_char_p, c_char_p]),
    "plan_get_program": (vp, [vp]),
    "plan_has_mesh": (c_int, [vp]),
    "plan_file": (c_char_p, [vp]),
    "plan_mesh_axis_count": (c_int, [vp]),
    "plan_mesh_axis_name": (c_char_p, [vp, c_int]),
    "plan_mesh_axis_size": (c_int64, [vp, c_int]),
    "plan_mesh_device_count": (c_int64, [vp]),
    "plan_mesh_device": (c_int64, [vp, c_int64]),
    "plan_tensor_placement": (c_int, [c_char_p, c_size_t, vp, c_int]),
    "plan_op_placement": (c_int, [c_char_p, c_size_t, vp, c_int, c_int,
                                  c_int]),
    "plan_op_stage": (c_int, [vp, c_int]),
    "plan_stage_count": (c_int, [vp]),
    "plan_validate": (c_int, [pp, vp]),
    "plan_drift": (c_int, [pp, vp, vp]),
    "plan_diff": (c_int, [pp, vp, vp]),
    # verify.h
    "plan_verify": (c_int, [pp, vp, P(VerifyOptions)]),
    "plan_verify_report_free": (None, [vp]),
    "plan_verify_report_equal": (c_int, [vp]),
    "plan_verify_report_text": (c_char_p, [vp]),
    "plan_verify_report_first_op": (c_char_p, [vp]),
    "plan_verify_report_first_tensor": (c_char_p, [vp]),
    "plan_verify_report_diagnosis": (c_char_p, [vp]),
    "plan_verify_report_runner": (c_char_p, [vp]),
    "plan_verify_report_collectives": (c_int, [vp, c_char_p]),
    "plan_verify_report_write": (c_int, [ps, P(c_size_t), vp, c_char_p]),
    "plan_reduce_shapes": (c_int, [pp, ps, vp]),
    # cost.h
    "plan_cost_profile_count": (c_int, []),
    "plan_cost_profile_name": (c_char_p, [c_int]),
    "plan_cost_profile_resolve": (c_char_p, [c_char_p]),
    "plan_cost_model_new": (c_int, [pp, vp, c_char_p]),
    "plan_cost_model_free": (None, [vp]),
    "plan_cost_model_hardware": (c_char_p, [vp]),
    "plan_cost_model_set": (c_int, [vp, c_char_p, c_double]),
    "plan_cost_model_load_calibration": (c_int, [vp, c_char_p]),
    "plan_cost_plan": (c_int, [pp, vp, vp]),
    "plan_cost_report_free": (None, [vp]),
    "plan_cost_report_step_seconds": (c_double, [vp]),
    "plan_cost_report_compute_seconds": (c_double, [vp]),
    "plan_cost_report_comm_seconds": (c_double, [vp]),
    "plan_cost_report_bubble_seconds": (c_double, [vp]),
    "plan_cost_report_memory_peak": (c_double, [vp]),
    "plan_cost_report_memory_capacity": (c_double, [vp]),
    "plan_cost_report_fits": (c_int, [vp]),
    "plan_cost_report_reason": (c_char_p, [vp]),
    "plan_cost_report_op_count": (c_size_t, [vp]),
    "plan_cost_report_op": (c_int, [P(CostOpInfo), vp, c_size_t]),
    "plan_cost_report_collective_count": (c_size_t, [vp]),
    "plan_cost_report_collective": (c_int, [P(CostCollectiveInfo), vp,
                                            c_size_t]),
    "plan_cost_report_memory_count": (c_size_t, [vp]),
    "plan_cost_report_memory": (c_int, [P(CostMemoryInfo), vp, c_size_t]),
    "plan_cost_report_write": (c_int, [ps, P(c_size_t), vp, c_char_p]),
    # schedule.h
    "plan_schedule_kind_name": (c_char_p, [c_int]),
    "plan_schedule_kind_from_name": (c_int, [c_char_p]),
    "plan_action_kind_name": (c_char_p, [c_int]),
    "plan_schedule_from_plan": (c_int, [pp, vp]),
    "plan_schedule_generate": (c_int, [pp, c_int, c_int, c_int, c_int64]),
    "plan_schedule_free": (None, [vp]),
    "plan_schedule_simulate": (c_int, [pp, vp, P(ScheduleOptions)]),
    "plan_schedule_kind_of": (c_int, [vp]),
    "plan_schedule_ranks": (c_int, [vp]),
    "plan_schedule_stages": (c_int, [vp]),
    "plan_schedule_microbatches": (c_int64, [vp]),
    "plan_schedule_stage_rank": (c_int, [vp, c_int]),
    "plan_schedule_length": (c_int64, [vp, c_int]),
    "plan_schedule_get": (c_int, [P(ScheduleAction), vp, c_int, c_int64]),
    "plan_schedule_result_get": (c_int, [P(ScheduleResult), vp]),
    "plan_schedule_write": (c_int, [ps, P(c_size_t), vp, c_char_p, c_char_p]),
}


class _Funcs:
    pass


fn = _Funcs()
for _name, (_res, _args) in _PROTOS.items():
    try:
        _f = getattr(lib, _name)
    except AttributeError:
        # An older library without this function: calls raise UnsupportedError.
        continue
    _f.restype = _res
    _f.argtypes = _args
    setattr(fn, _name[len("plan_"):], _f)


def take_string(ptr, length=None):
    """Decodes a malloc'd char* handed over by libplan and frees it."""
    if not ptr:
        return ""
    try:
        if length is not None:
            return ctypes.string_at(ptr, length).decode("utf-8", "replace")
        return ctypes.string_at(ptr).decode("utf-8", "replace")
    finally:
        free(ptr)


def s(b):
    """A borrowed C string as str ("" for NULL)."""
    # "replace": a message may quote a path or input that is not UTF-8
    return b.decode("utf-8", "replace") if b else ""


def enc(text):
    """str (or path-like) to bytes for a const char* argument."""
    if isinstance(text, bytes):
        return text
    if isinstance(text, str):
        return text.encode("utf-8")
    if isinstance(text, os.PathLike):
        return os.fsencode(text)
    from .errors import UsageError
    raise UsageError("expected a str, bytes or path, not %s"
                     % type(text).__name__)
