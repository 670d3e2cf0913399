"""Shared by the Python tests: the source tree, the in-tree binding on
sys.path, and example paths."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
BINDING = os.path.join(ROOT, "bindings", "python")
if BINDING not in sys.path:
    sys.path.insert(0, BINDING)

import libplan  # noqa: E402  (after the path is set)

EXAMPLES = os.path.join(ROOT, "examples")
MLP = os.path.join(EXAMPLES, "mlp-megatron.plan.yaml")
BLOCK = os.path.join(EXAMPLES, "transformer-block.plan.yaml")
PIPELINE = os.path.join(EXAMPLES, "pipeline-1f1b.plan.yaml")
MLP_PROGRAM = os.path.join(EXAMPLES, "mlp-program.yaml")
TOOL = os.environ.get("LIBPLAN_TOOL", os.path.join(ROOT, "build", "plan"))


def python(code, env=None, cwd=None, path=BINDING):
    """Runs `code` in a fresh interpreter with `path` first on PYTHONPATH;
    returns the CompletedProcess (text)."""
    e = dict(os.environ)
    e.pop("PYTHONPATH", None)
    if path:
        e["PYTHONPATH"] = path
    e.update(env or {})
    return subprocess.run([sys.executable, "-c", code], env=e, cwd=cwd,
                          capture_output=True, text=True, timeout=60)
