"""libplan: distributed-training parallelization plans, from Python.

A ctypes binding of libplan (no compiler, no required third-party
package): of libplan-verify.so, or of the core libplan.so, where all but
verification works. Load a plan, check it, price it, verify it, and read the placement
of every tensor and the strategy of every op:

    import libplan
    with libplan.load("examples/mlp-megatron.plan.yaml") as plan:
        assert plan.validate().ok
        print(plan.hash(), plan.mesh, plan.placements)
        print(plan.verify().equal, plan.cost("h100").step_seconds)

Failures raise libplan.Error subclasses carrying the library's message and
the file, line and column of the input they are about. docs/python.md has
the whole API.
"""

from ._lib import ABI_VERSION, LibraryError, check_abi, path as library_path
from .errors import (Error, PlanError, NoMemoryError, FileError, ParseError,
                     SchemaError, VersionError, InvalidError, DriftError,
                     LimitError, UsageError, RangeError, NotFoundError,
                     UnsupportedError)
from ._common import Finding, Findings, version, abi_version
from ._program import Program, Op, Tensor, load_program
from ._plan import (Plan, Mesh, Strategy, Match, PlanOp, PlanTensor, load,
                    parse)
from ._verify import VerifyReport
from ._cost import CostReport, cost_profiles
from ._schedule import Schedule
from ._upgrade import Upgrade, upgrade, upgrade_text
from .placements import Shard, Replicate, Partial
from .placements import parse as parse_placement
from .placements import format as format_placement
from .builder import ProgramBuilder, make_plan
from ._search import find_tool, search, replay, lower
from ._lowered import (Lowered, LoweredStep, LoweredBuffer, LoweredLayout,
                       LoweredOutput)

__version__ = version()

__all__ = [
    "ABI_VERSION", "LibraryError", "library_path", "Error", "PlanError",
    "NoMemoryError", "FileError", "ParseError", "SchemaError", "VersionError",
    "InvalidError", "DriftError", "LimitError", "UsageError", "RangeError",
    "NotFoundError",
    "UnsupportedError", "Plan", "Program", "Mesh", "Strategy", "Finding",
    "Findings", "Match", "Op", "Tensor", "PlanOp", "PlanTensor",
    "VerifyReport", "CostReport", "Schedule", "load", "parse", "load_program",
    "cost_profiles", "version", "abi_version", "Shard", "Replicate",
    "Partial", "parse_placement", "format_placement", "ProgramBuilder",
    "make_plan", "find_tool", "search", "replay", "lower", "Upgrade",
    "upgrade", "upgrade_text", "Lowered", "LoweredStep", "LoweredBuffer",
    "LoweredLayout", "LoweredOutput",
]
