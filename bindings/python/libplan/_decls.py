"""The C side as ctypes sees it: the public structs mirrored by hand, and
the prototype of every function the binding calls.

Nothing here touches the library: _lib checks these declarations against
the library it loads (each struct's size with plan_abi_sizeof, each
function's presence) and binds them. Every ctypes.Structure of the package
is in STRUCTS, with its C name in `c_name`.
"""

import ctypes

c_int, c_int64, c_uint64, c_double = (ctypes.c_int, ctypes.c_int64,
                                      ctypes.c_uint64, ctypes.c_double)
c_uint, c_char_p, c_void_p = ctypes.c_uint, ctypes.c_char_p, ctypes.c_void_p
c_size_t = ctypes.c_size_t
P = ctypes.POINTER


# ---- structs (libplan/include/libplan/*.h) --------------------------------

class Error(ctypes.Structure):
    c_name = "plan_error"
    _fields_ = [("code", c_int), ("message", c_char_p), ("file", c_char_p),
                ("line", c_int), ("column", c_int)]


class Hash(ctypes.Structure):
    c_name = "plan_hash"
    _fields_ = [("high", c_uint64), ("low", c_uint64)]


class UpgradeInfo(ctypes.Structure):
    c_name = "plan_upgrade_info"
    _fields_ = [("from_major", c_int), ("from_minor", c_int),
                ("upgraded", c_int), ("layout_kept", c_int),
                ("program_by_path", c_int), ("program_rehashed", c_int),
                ("has", c_int * 4), ("before", Hash * 4), ("after", Hash * 4)]


class Diag(ctypes.Structure):
    c_name = "plan_diag"
    _fields_ = [("severity", c_int), ("code", c_char_p), ("message", c_char_p),
                ("object", c_char_p), ("file", c_char_p), ("line", c_int),
                ("column", c_int)]


class WriteOptions(ctypes.Structure):
    c_name = "plan_write_options"
    _fields_ = [("version", c_uint), ("self_contained", c_int)]


class LoadOptions(ctypes.Structure):
    c_name = "plan_load_options"
    _fields_ = [("version", c_uint), ("threads", c_int)]


class GradOptions(ctypes.Structure):
    c_name = "plan_grad_options"
    _fields_ = [("version", c_uint), ("inputs", c_int)]


class VerifyTolerance(ctypes.Structure):
    c_name = "plan_verify_tolerance"
    _fields_ = [("tensor", c_char_p), ("rtol", c_double), ("atol", c_double)]


class VerifyOptions(ctypes.Structure):
    c_name = "plan_verify_options"
    _fields_ = [("version", c_uint), ("mode", c_int),
                ("seed", c_uint64),
                ("rtol", c_double), ("atol", c_double), ("dtype", c_char_p),
                ("tolerances", P(VerifyTolerance)), ("ntolerances", c_int),
                ("runner", c_char_p),
                # version 5: distributed verification
                ("world", c_int), ("rank", c_int), ("rendezvous", c_char_p),
                ("timeout_s", c_double), ("comm", c_char_p),
                # version 6: the memory the run may use (0: what is here)
                ("memory_limit", c_uint64)]


class RefOptions(ctypes.Structure):
    c_name = "plan_ref_options"
    _fields_ = [("mode", c_int), ("seed", c_uint64), ("dtype", c_int)]


class CostOpInfo(ctypes.Structure):
    c_name = "plan_cost_op_info"
    _fields_ = [("name", c_char_p), ("kind", c_char_p), ("stage", c_int),
                ("flops", c_double), ("bytes", c_double),
                ("seconds", c_double),
                ("backward_seconds", c_double), ("bound", c_char_p)]


class CostCollectiveInfo(ctypes.Structure):
    c_name = "plan_cost_collective_info"
    _fields_ = [("phase", c_char_p), ("tensor", c_char_p), ("kind", c_char_p),
                ("axis", c_char_p), ("from_", c_char_p), ("to", c_char_p),
                ("group", c_int64), ("link", c_char_p),
                ("algorithm", c_char_p), ("bytes", c_double),
                ("calls", c_double), ("seconds", c_double)]


class CostMemoryInfo(ctypes.Structure):
    c_name = "plan_cost_memory_info"
    _fields_ = [("stage", c_int), ("parameters", c_double),
                ("gradients", c_double), ("optimizer", c_double),
                ("activations", c_double), ("workspace", c_double),
                ("total", c_double), ("inflight", c_double)]


class ScheduleOptions(ctypes.Structure):
    c_name = "plan_schedule_options"
    _fields_ = [("version", c_uint), ("duration", c_int64 * 8),
                ("blocking_sends", c_int), ("note_blocking", c_int)]


class ScheduleAction(ctypes.Structure):
    c_name = "plan_schedule_action"
    _fields_ = [("kind", c_int), ("stage", c_int), ("microbatch", c_int64),
                ("start", c_int64), ("end", c_int64), ("line", c_int),
                ("column", c_int)]


class ScheduleResult(ctypes.Structure):
    c_name = "plan_schedule_result"
    _fields_ = [("simulated", c_int), ("deadlock", c_int),
                ("makespan", c_int64), ("compute", c_int64),
                ("bubble", c_double), ("peak_activations", c_int)]


class SearchOptions(ctypes.Structure):
    c_name = "plan_search_options"
    _fields_ = [("version", c_uint), ("strategy", c_char_p),
                ("mesh", c_char_p), ("hardware", c_char_p),
                ("seed", c_int64), ("width", c_int), ("limit", c_int64),
                ("seconds", c_double), ("devices", c_int),
                ("self_contained", c_int),
                # version 2 (the binding asks for version 1: unread)
                ("placement", c_int), ("topology", c_char_p),
                ("mesh_shape", c_int),
                # version 3 (unread too): no_share, progress and its ctx
                ("no_share", c_int), ("progress", c_void_p),
                ("progress_ctx", c_void_p),
                # version 4 (asked for with devices=): the joint search
                ("joint_devices", c_int), ("joint_hosts", c_int)]


class SearchInfo(ctypes.Structure):
    c_name = "plan_search_info"
    # notes and details are the library's (plan_search_info_clear frees
    # them): c_char_p reads them without taking them
    _fields_ = [("version", c_uint), ("strategy_ran", c_int),
                ("step_seconds", c_double), ("memory_bytes", c_double),
                ("fits", c_int), ("cost_evaluations", c_int64),
                ("seconds", c_double), ("notes", c_char_p),
                ("details", c_char_p)]


class ReplayResult(ctypes.Structure):
    c_name = "plan_replay_result"
    _fields_ = [("same", c_int), ("recorded", Hash), ("replayed", Hash),
                ("strategy", c_char_p), ("diff", c_char_p),
                ("note", c_char_p), ("plan", c_void_p)]


class ReplayOptions(ctypes.Structure):
    c_name = "plan_replay_options"
    _fields_ = [("version", c_uint), ("strategy", c_char_p),
                ("trust_embedded_script", c_int)]


class AxisPl(ctypes.Structure):
    c_name = "plan_axis_pl"
    _fields_ = [("kind", ctypes.c_uint8), ("reduce", ctypes.c_uint8),
                ("dim", ctypes.c_int8), ("level", ctypes.c_int8),
                ("ratio", ctypes.c_uint8)]


class Placement(ctypes.Structure):
    c_name = "plan_placement"
    _fields_ = [("naxes", ctypes.c_uint8), ("ax", AxisPl * 8)]


PLACEMENT_STRLEN = 8 * 12 + 1  # PLAN_PLACEMENT_STRLEN


class Pos(ctypes.Structure):
    c_name = "plan_pos"
    _fields_ = [("line", c_int), ("col", c_int)]


class AttrVal(ctypes.Structure):
    c_name = "plan_attr_val"
    _fields_ = [("i", c_int64), ("f", c_double), ("b", ctypes.c_bool),
                ("s", c_char_p), ("ints", P(c_int64)), ("nints", c_int),
                ("present", ctypes.c_bool), ("pos", Pos)]


class AttrSpec(ctypes.Structure):
    c_name = "plan_attr_spec"
    # type: PLAN_ATTR_INT, _INTS, _FLOAT, _BOOL, _STRING
    _fields_ = [("name", c_char_p), ("type", c_int),
                ("required", ctypes.c_bool), ("def_i", c_int64),
                ("def_f", c_double), ("def_b", ctypes.c_bool),
                ("def_s", c_char_p), ("is_dim", ctypes.c_bool)]


class LoweredStepInfo(ctypes.Structure):
    c_name = "plan_lowered_step_info"
    _fields_ = [("kind", c_char_p), ("op", c_int), ("op_kind", c_int),
                ("attrs", P(AttrVal)), ("axis", c_int), ("dim", c_int),
                ("to_dim", c_int), ("reduce", c_int), ("nin", c_int),
                ("nout", c_int), ("in_", P(c_int)), ("out", P(c_int)),
                ("stage", c_int)]


class LoweredBufferInfo(ctypes.Structure):
    c_name = "plan_lowered_buffer_info"
    _fields_ = [("tensor", c_int), ("tensor_name", c_char_p),
                ("ordinal", c_int), ("dtype", c_int), ("rank", c_int),
                ("dims", c_int64 * 8), ("placement", Placement),
                ("placement_text", ctypes.c_char * PLACEMENT_STRLEN)]


class LoweredOutputInfo(ctypes.Structure):
    c_name = "plan_lowered_output_info"
    _fields_ = [("tensor", c_int), ("buffer", c_int), ("has_required", c_int),
                ("required", Placement),
                ("required_text", ctypes.c_char * PLACEMENT_STRLEN),
                ("gradient_of", c_int)]


# What the load-time check compares with plan_abi_sizeof.
STRUCTS = (Error, Hash, UpgradeInfo, Diag, WriteOptions, LoadOptions,
           GradOptions, VerifyTolerance, VerifyOptions, RefOptions,
           CostOpInfo, CostCollectiveInfo, CostMemoryInfo, ScheduleOptions,
           ScheduleAction, ScheduleResult, SearchOptions, SearchInfo,
           ReplayResult, ReplayOptions, AxisPl, Placement, Pos, AttrVal,
           AttrSpec, LoweredStepInfo, LoweredBufferInfo, LoweredOutputInfo)


# ---- functions: name -> (restype, argtypes) --------------------------------

vp = c_void_p
pp = P(c_void_p)
ps = P(c_void_p)  # char ** out (freed with plan_buffer_free())

# The core (libplan.so and libplan-verify.so alike): every one is required.
PROTOS = {
    "plan_status_name": (c_char_p, [c_int]),
    "plan_error_last": (P(Error), []),
    "plan_error_clear": (None, []),
    "plan_version_string": (c_char_p, []),
    "plan_version_number": (c_int, []),
    "plan_abi_version": (c_int, []),
    "plan_abi_sizeof": (c_size_t, [c_char_p]),
    "plan_buffer_free": (None, [c_void_p]),
    "plan_hash_format": (c_char_p, [Hash, c_char_p]),
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
    "plan_program_grad": (c_int, [pp, vp, P(GradOptions)]),
    # plan.h
    "plan_load_ext": (c_int, [pp, c_char_p, P(LoadOptions)]),
    "plan_load_root": (c_int, [pp, c_char_p, c_char_p, P(LoadOptions)]),
    "plan_load_buffer": (c_int, [pp, c_char_p, c_size_t, c_char_p, c_char_p]),
    "plan_free": (None, [vp]),
    "plan_write_buffer": (c_int, [ps, P(c_size_t), vp, P(WriteOptions)]),
    "plan_sharding_svg": (c_int, [ps, P(c_size_t), vp, c_char_p]),
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
    # lowered.h
    "plan_lower": (c_int, [pp, vp]),
    "plan_lowered_free": (None, [vp]),
    "plan_lowered_write": (c_int, [ps, P(c_size_t), vp]),
    "plan_lowered_plan": (vp, [vp]),
    "plan_lowered_step_count": (c_int, [vp]),
    "plan_lowered_collective_count": (c_int, [vp, c_char_p]),
    "plan_lowered_step": (c_int, [P(LoweredStepInfo), vp, c_int]),
    "plan_lowered_buffer_count": (c_int, [vp]),
    "plan_lowered_buffer": (c_int, [P(LoweredBufferInfo), vp, c_int]),
    "plan_lowered_buffer_block": (c_int, [P(c_int64), P(c_int64), vp, c_int,
                                          c_int64]),
    "plan_lowered_layout": (c_int, [P(c_int), vp, c_int]),
    "plan_lowered_output_count": (c_int, [vp]),
    "plan_lowered_output": (c_int, [P(LoweredOutputInfo), vp, c_int]),
    # ops.h
    "plan_dtype_name": (c_char_p, [c_int]),
    "plan_op_kind_name": (c_char_p, [c_int]),
    "plan_op_attrs": (P(AttrSpec), [c_int, P(c_int)]),
    # reduce.h
    "plan_reduce_shapes": (c_int, [pp, ps, vp]),
    "plan_reduce_plan": (c_int, [pp, ps, vp, c_uint]),
}

# verify.h: only libplan-verify has these (required there); with the core
# library each raises UnsupportedError when called.
VERIFY_PROTOS = {
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
    "plan_verify_estimate": (c_int, [P(c_uint64), vp, vp, P(VerifyOptions)]),
    # the single-device reference run
    "plan_ref_run_new": (c_int, [pp, vp, P(RefOptions)]),
    "plan_ref_run_free": (None, [vp]),
    "plan_ref_run_values": (P(c_double), [vp, c_int]),
    "plan_ref_run_count": (c_int64, [vp, c_int]),
    "plan_ref_run_exec": (c_int, [vp]),
}

# search.h: only libplan-search has these (required there); with another
# library search and replay run the plan tool instead (_search).
SEARCH_PROTOS = {
    "plan_search_options_init": (c_int, [P(SearchOptions), c_uint]),
    "plan_search_info_init": (c_int, [P(SearchInfo), c_uint]),
    "plan_search_info_clear": (None, [P(SearchInfo)]),
    "plan_search": (c_int, [pp, P(SearchInfo), c_char_p, P(SearchOptions)]),
    "plan_search_buffer": (c_int, [pp, P(SearchInfo), c_char_p, c_size_t,
                                   c_char_p, c_char_p, P(SearchOptions)]),
    "plan_replay": (c_int, [P(P(ReplayResult)), P(SearchInfo), c_char_p]),
    "plan_replay_buffer": (c_int, [P(P(ReplayResult)), P(SearchInfo),
                                   c_char_p, c_size_t, c_char_p, c_char_p]),
    "plan_replay_result_free": (None, [P(ReplayResult)]),
    "plan_replay_options_init": (c_int, [P(ReplayOptions), c_uint]),
    "plan_replay_ext": (c_int, [P(P(ReplayResult)), P(SearchInfo), c_char_p,
                                P(ReplayOptions)]),
    "plan_replay_buffer_ext": (c_int, [P(P(ReplayResult)), P(SearchInfo),
                                       c_char_p, c_size_t, c_char_p, c_char_p,
                                       P(ReplayOptions)]),
}
