/* plan_abi_sizeof: the size of each public struct of fixed layout, by its C
 * name, so a binding that mirrors the structs by hand (the Python binding's
 * ctypes.Structure classes) can check its copies against this build. */
#include <string.h>

#include "libplan/common.h"
#include "libplan/cost.h"
#include "libplan/diag.h"
#include "libplan/lowered.h"
#include "libplan/ops.h"
#include "libplan/plan.h"
#include "libplan/program.h"
#include "libplan/schedule.h"
#include "libplan/space.h"
/* search.h's structs too: only libplan-search has its functions, but the
 * structs are plain data, so every library answers for them. */
#include "libplan/search.h"
/* verify.h's option structs are plain data: the core answers for them too,
 * so a binding checks one table whichever library it loaded. */
#include "libplan/verify.h"

typedef struct abi_size {
  const char *name;
  size_t size;
} abi_size;

#define ABI_SIZE(t)                                                            \
  { #t, sizeof(t) }

static const abi_size abi_sizes[] = {
    /* common.h */
    ABI_SIZE(plan_error),
    ABI_SIZE(plan_hash),
    /* diag.h */
    ABI_SIZE(plan_diag),
    /* plan.h */
    ABI_SIZE(plan_load_options),
    ABI_SIZE(plan_write_options),
    ABI_SIZE(plan_upgrade_info),
    ABI_SIZE(plan_provenance_value),
    ABI_SIZE(plan_mesh_ratio_info),
    ABI_SIZE(plan_training_info),
    /* program.h */
    ABI_SIZE(plan_grad_options),
    /* cost.h */
    ABI_SIZE(plan_cost_op_info),
    ABI_SIZE(plan_cost_collective_info),
    ABI_SIZE(plan_cost_memory_info),
    ABI_SIZE(plan_cost_sim_step_info),
    /* schedule.h */
    ABI_SIZE(plan_schedule_options),
    ABI_SIZE(plan_schedule_action),
    ABI_SIZE(plan_schedule_result),
    ABI_SIZE(plan_schedule_rank_stats),
    ABI_SIZE(plan_schedule_stage_stats),
    /* ops.h */
    ABI_SIZE(plan_pos),
    ABI_SIZE(plan_attr_val),
    ABI_SIZE(plan_attr_spec),
    ABI_SIZE(plan_shape),
    /* lowered.h */
    ABI_SIZE(plan_lowered_step_info),
    ABI_SIZE(plan_lowered_buffer_info),
    ABI_SIZE(plan_lowered_output_info),
    ABI_SIZE(plan_lowered_pipeline_info),
    ABI_SIZE(plan_lowered_step_pipe_info),
    ABI_SIZE(plan_lowered_sched_info),
    ABI_SIZE(plan_lowered_order_info),
    ABI_SIZE(plan_lowered_training_info),
    ABI_SIZE(plan_lowered_param_info),
    ABI_SIZE(plan_lowered_regions_info),
    ABI_SIZE(plan_lowered_region_info),
    /* space.h */
    ABI_SIZE(plan_axis_pl),
    ABI_SIZE(plan_placement),
    ABI_SIZE(plan_op_strategy),
    /* search.h */
    ABI_SIZE(plan_search_options),
    ABI_SIZE(plan_search_info),
    ABI_SIZE(plan_replay_result),
    ABI_SIZE(plan_replay_options),
    /* verify.h */
    ABI_SIZE(plan_verify_options),
    ABI_SIZE(plan_verify_tolerance),
    ABI_SIZE(plan_ref_options),
};

size_t plan_abi_sizeof(const char *type_name) {
  if (type_name == NULL)
    return 0;
  for (size_t i = 0; i < sizeof abi_sizes / sizeof abi_sizes[0]; i++)
    if (strcmp(abi_sizes[i].name, type_name) == 0)
      return abi_sizes[i].size;
  return 0;
}
