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


class Launch:
    """A finished torchrun launch: returncode, stdout (the ranks' stdout
    and the launcher's), stderr (the launcher's), ranks ({local rank: that
    rank's stderr}), timed_out; detail() is what a failure should show."""

    def __init__(self, returncode, stdout, stderr, ranks, timed_out):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr
        self.ranks, self.timed_out = ranks, timed_out

    def detail(self, lines=40):
        out = ["launcher (exit %s%s):" % (self.returncode, ", timed out"
                                          if self.timed_out else "")]
        out += self.stderr.splitlines()[-lines:]
        for r in sorted(self.ranks):
            out.append("rank %d stderr:" % r)
            out += ["  " + ln for ln in self.ranks[r].splitlines()[-lines:]]
        return "\n".join(out)


def rank_logs(folder):
    """{local rank: text} of the stderr.log files torchrun's --log-dir
    keeps under FOLDER (RUN_ID/attempt_N/RANK/stderr.log)."""
    got = {}
    for dirpath, _, files in os.walk(folder):
        if "stderr.log" in files and os.path.basename(dirpath).isdigit():
            with open(os.path.join(dirpath, "stderr.log"), errors="replace") \
                    as f:
                got[int(os.path.basename(dirpath))] = f.read()
    return got


def torchrun(nproc, script, args=(), env=None, timeout=300, cwd=None):
    """Launches `script` under torchrun with `nproc` processes and returns
    a Launch. Each rank's stderr is kept in its own file (--log-dir,
    --redirects 2) and read back, so a failure shows every rank's, not
    only the launcher's summary. --standalone: the launcher's store
    listens on a port the kernel picks free when it binds (localhost:0),
    so two launches at once never share a rendezvous port. A launch past
    `timeout` seconds is killed with all its processes (its own session)."""
    import shutil
    import signal
    import tempfile
    logs = tempfile.mkdtemp(prefix="libplan-torchrun-")
    e = dict(os.environ)
    e["PYTHONPATH"] = BINDING
    e.setdefault("OMP_NUM_THREADS", "1")
    e.update(env or {})
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           "--nproc_per_node", str(nproc), "--log-dir", logs,
           "--redirects", "2", script] + list(args)
    p = subprocess.Popen(cmd, env=e, cwd=cwd, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    timed_out = False
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
    try:
        return Launch(p.returncode, out, err, rank_logs(logs), timed_out)
    finally:
        shutil.rmtree(logs, ignore_errors=True)
