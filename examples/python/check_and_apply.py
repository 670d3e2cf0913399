"""A training repo's use of a plan: load it, check that it still matches
the model, print where each parameter lives, and apply it.

    PYTHONPATH=bindings/python python3 examples/python/check_and_apply.py \
        examples/mlp-megatron.plan.yaml examples/mlp-program.yaml

The second argument is the model's program as it is today (a program file;
with torch installed, libplan.torch.program_from_module traces one from the
nn.Module instead). Exit status 1 when the plan no longer fits the model.
"""

import sys

import libplan
import libplan.torch as lt


def main(plan_path, program_path):
    with libplan.load(plan_path) as plan:
        found = plan.validate()
        for f in found:
            print(f)
        if not found.ok:
            return 1

        match = plan.check_program(program_path)
        for f in match.findings:
            print(f)
        if not match.ok:
            print("the plan does not match the model: search or edit it again")
            return 1
        print("plan %s matches %s" % (plan.hash(), program_path))
        print("mesh %r, devices %s" % (plan.mesh, plan.mesh.device_array()))

        stage = {}
        for op in plan.ops:
            for t in op.inputs:
                stage.setdefault(t, op.stage)
        for t in plan.tensors:
            if t.role != "param" or t.name not in match.placements:
                continue
            spec = lt.to_dtensor_placements(t.placement, ndim=len(t.shape))
            print("  %-8s %-12s %-10s stage %2d  %s" % (
                t.name, "x".join(map(str, t.shape)), t.placement,
                stage.get(t.name, -1), spec))

        if lt.available():
            print("torch is installed: libplan.torch.apply(module, plan) "
                  "distributes a module's parameters this way")
        return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
