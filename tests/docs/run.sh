#!/bin/sh
# Tests of the documentation (README.md and docs/*.md), so that what they
# tell a reader to type keeps working:
#
# (a) Shell blocks. Every fenced block tagged sh, bash, shell or console
#     runs, unless the nearest non-blank line before its opening fence is
#       <!-- not run: REASON -->
#     (REASON required). The blocks of one document run in order, each in
#     its own shell with -e (bash for bash blocks, else sh), in one scratch
#     copy of the repository in a temporary folder, so a block may use the
#     files an earlier block of the same document wrote, and nothing in the
#     tree changes. `plan` is on PATH and build/plan exists there (both the
#     tool under test; build/ is otherwise an empty folder of the copy). A
#     block passes when it exits 0, or with the N of a marker line
#       <!-- expect exit N -->
#     before it (a block that shows a negative verdict). In a console block
#     only the lines that start with "$ " run (a trailing backslash
#     continues a command); the other lines are output and are not
#     compared. Each block has 30 seconds, or N (at most 300) after a line
#       <!-- seconds N: REASON -->
#     (a block that starts torch processes). A block that runs make (the
#     full build, or the test suite this test is part of) needs the marker.
#     The README's first block (make demo, make test) sits under the title,
#     which carries no marker: it is listed in FIRST_LINES below instead.
# (b) The CLI reference. docs/cli.md holds, after a line
#       <!-- usage: VERB -->    (or <!-- usage --> for `plan --help`)
#     a fenced text block equal to the usage lines of `plan VERB --help`
#     (from "usage:" to the first blank line). Every verb that `plan --help`
#     lists must have one, and no other verb may.
# (c) Links. Every relative link and image in README.md and docs/*.md
#     (outside code) points to an existing file or folder.
#
# usage: sh tests/docs/run.sh PATH/TO/plan
# Prints "docs: N passed, M failed" and exits 1 when anything failed.

plan=${1:?usage: run.sh PATH/TO/plan}
case $plan in /*) ;; *) plan=$(pwd)/$plan ;; esac
root=$(cd "$(dirname "$0")/../.." && pwd)
if [ ! -x "$plan" ]; then
  echo "docs: no plan tool at '$plan'" >&2
  exit 2
fi
exec python3 - "$plan" "$root" <<'PYEOF'
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

PLAN, ROOT = sys.argv[1], sys.argv[2]
BLOCK_SECONDS = 30
SHELL_TAGS = {"sh", "bash", "shell", "console"}
# Blocks that cannot carry a marker line, by file and first line, with the
# reason they do not run.
FIRST_LINES = {
    ("README.md", "make demo"): "make demo and make test build and run "
    "everything; make test runs this very test",
}

passed = 0
failed = 0
not_run = 0


def ok():
    global passed
    passed += 1


def bad(msg, detail="", ranks=""):
    global failed
    failed += 1
    print("FAIL: " + msg)
    for line in detail.splitlines()[-12:]:
        print("    " + line)
    for line in ranks.splitlines():
        print("    " + line)


def rank_logs(folder, lines=30):
    """The end of each torchrun rank's stderr a block left under FOLDER
    (--log-dir's RUN_ID/attempt_N/RANK/stderr.log), for a failure."""
    out = []
    for dirpath, _, files in sorted(os.walk(folder)):
        if "stderr.log" not in files:
            continue
        with open(os.path.join(dirpath, "stderr.log"), errors="replace") as f:
            text = f.read().splitlines()
        rel = os.path.relpath(dirpath, folder)
        out.append("torchrun rank %s stderr (%s):"
                   % (os.path.basename(dirpath), rel))
        out += ["  " + t for t in text[-lines:]] or ["  (empty)"]
    return "\n".join(out)


def docs():
    files = ["README.md"]
    d = os.path.join(ROOT, "docs")
    files += sorted("docs/" + f for f in os.listdir(d) if f.endswith(".md"))
    return files


FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([A-Za-z0-9_+-]*)")


def parse(path):
    """Blocks of a Markdown file: (tag, first line no, lines, marker line)
    and the text outside code, line by line (None inside code)."""
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        lines = f.read().split("\n")
    blocks, prose = [], []
    i = 0
    last_text = ""
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            prose.append((i + 1, lines[i]))
            if lines[i].strip():
                last_text = lines[i].strip()
            i += 1
            continue
        fence, tag = m.group(1), m.group(2).lower()
        start = i + 1
        body = []
        i += 1
        while i < len(lines) and not (
                lines[i].strip().startswith(fence[0] * len(fence))
                and lines[i].strip().strip(fence[0]) == ""):
            body.append(lines[i])
            i += 1
        blocks.append((tag, start, body, last_text))
        last_text = ""
        i += 1
    return blocks, prose


NOT_RUN = re.compile(r"^<!--\s*not run:\s*(\S.*?)\s*-->$")
EXPECT = re.compile(r"^<!--\s*expect exit (\d+)\s*-->$")
SECONDS = re.compile(r"^<!--\s*seconds (\d+):\s*(\S.*?)\s*-->$")


def scratch_copy():
    tmp = tempfile.mkdtemp(prefix="libplan-docs.")
    tree = os.path.join(tmp, "repo")
    skip = {".git", "build", "build-asan", "build-fuzz"}
    shutil.copytree(
        ROOT, tree, symlinks=True,
        ignore=lambda d, names: [
            n for n in names
            if (d == ROOT and n in skip) or n == "__pycache__"])
    build = os.path.join(tree, "build")
    os.mkdir(build)
    real = os.path.dirname(PLAN)
    for n in ("plan", "plan.so", "libplan.so", "libplan.so.0", "libplan.a"):
        if os.path.exists(os.path.join(real, n)):
            os.symlink(os.path.join(real, n), os.path.join(build, n))
    bindir = os.path.join(tmp, "bin")
    os.mkdir(bindir)
    os.symlink(PLAN, os.path.join(bindir, "plan"))
    return tmp, tree, bindir


def console_script(body):
    cmds, cont = [], False
    for line in body:
        if cont:
            cmds[-1] += "\n" + line
        elif line.startswith("$ "):
            cmds.append(line[2:])
        else:
            continue
        cont = line.endswith("\\")
    return "\n".join(cmds) + "\n"


def run_blocks(path, blocks):
    global not_run
    shell_blocks = [b for b in blocks if b[0] in SHELL_TAGS]
    if not shell_blocks:
        return
    used = set()
    todo = []
    for tag, line, body, before in shell_blocks:
        where = "%s:%d" % (path, line)
        first = next((b.strip() for b in body if b.strip()), "")
        key = next((k for k in FIRST_LINES
                    if k[0] == path and first.startswith(k[1])), None)
        if key and line <= 5:
            used.add(key)
            not_run += 1
            continue
        m = NOT_RUN.match(before)
        if m:
            not_run += 1
            continue
        if before.startswith("<!--") and "not run" in before:
            bad(where + ": a not-run marker needs a reason", before)
            continue
        want, seconds = 0, BLOCK_SECONDS
        m = EXPECT.match(before)
        if m:
            want = int(m.group(1))
        m = SECONDS.match(before)
        if m:
            seconds = min(int(m.group(1)), 300)
        script = console_script(body) if tag == "console" else \
            "\n".join(body) + "\n"
        if re.search(r"(^|[;&|]\s*)make(\s|$)", script, re.M):
            bad(where + ": a block that runs make needs a not-run marker")
            continue
        todo.append((where, tag, script, want, seconds))
    for k in FIRST_LINES:
        if k[0] == path and k not in used:
            bad("%s: no first block starting '%s' (FIRST_LINES is stale)"
                % k)
    if not todo:
        return
    tmp, tree, bindir = scratch_copy()
    env = dict(os.environ)
    # mpirun in a block: on this machine's cores only, shared memory, as
    # root too (Open MPI refuses root without these)
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1", OMPI_MCA_btl="self,vader")
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    env["TMPDIR"] = tmp
    env["DEMO_OUT"] = os.path.join(tmp, "demo")
    try:
        for k, (where, tag, script, want, seconds) in enumerate(todo):
            shell = ["bash", "-e"] if tag == "bash" else ["sh", "-e"]
            # torchrun in a block (its options from PET_* variables): each
            # rank's stderr in its own file, shown when the block fails
            logs = os.path.join(tmp, "torchrun-logs", str(k))
            env.update(PET_LOG_DIR=logs, PET_REDIRECTS="2")
            # its own session: a block past its time is killed with every
            # process it started (torchrun's ranks too)
            r = subprocess.Popen(
                shell + ["-c", script], cwd=tree, env=env,
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, start_new_session=True)
            try:
                out = r.communicate(timeout=seconds)[0]
            except subprocess.TimeoutExpired:
                os.killpg(r.pid, signal.SIGKILL)
                r.communicate()
                bad("%s: still running after %d s" % (where, seconds),
                    rank_logs(logs))
                continue
            out = out.decode("utf-8", "replace")
            if r.returncode == want:
                ok()
            else:
                bad("%s: exit %d, expected %d" % (where, r.returncode, want),
                    "script:\n" + script + "output:\n" + out,
                    rank_logs(logs))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def usage_lines(args):
    r = subprocess.run([PLAN] + args, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT)
    text = r.stdout.decode("utf-8", "replace").split("\n")
    start = next((i for i, l in enumerate(text) if l.startswith("usage:")),
                 None)
    if r.returncode != 0 or start is None:
        return None, r.stdout.decode("utf-8", "replace")
    end = start
    while end < len(text) and text[end].strip():
        end += 1
    return text[start:end], ""


def verbs():
    r = subprocess.run([PLAN, "--help"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT)
    out = r.stdout.decode("utf-8", "replace")
    part = out.split("Verbs:", 1)[1] if "Verbs:" in out else ""
    return re.findall(r"^  ([a-z][a-z-]*)\s{2,}", part, re.M)


def check_cli():
    path = "docs/cli.md"
    if not os.path.exists(os.path.join(ROOT, path)):
        bad(path + ": missing")
        return
    blocks, _ = parse(path)
    documented = {}
    marker = re.compile(r"^<!--\s*usage(?::\s*([a-z][a-z-]*))?\s*-->$")
    for tag, line, body, before in blocks:
        m = marker.match(before)
        if m:
            verb = m.group(1) or ""
            if verb in documented:
                bad("%s:%d: a second usage block for '%s'"
                    % (path, line, verb))
            documented[verb] = (line, body)
    names = verbs()
    if not names:
        bad("plan --help lists no verbs")
    for verb in [""] + names:
        shown = "plan " + (verb + " " if verb else "") + "--help"
        want, err = usage_lines([verb, "--help"] if verb else ["--help"])
        if want is None:
            bad(shown + ": no usage line (or a non-zero exit)", err)
            continue
        if verb not in documented:
            bad("%s: no usage block for '%s' (<!-- usage%s -->)"
                % (path, shown, ": " + verb if verb else ""))
            continue
        line, body = documented[verb]
        if body == want:
            ok()
        else:
            bad("%s:%d: the usage of '%s' differs from its --help"
                % (path, line, shown),
                "docs:\n" + "\n".join(body) + "\n--help:\n" + "\n".join(want))
    for verb in documented:
        if verb and verb not in names:
            line = documented[verb][0]
            bad("%s:%d: usage block for '%s', which plan --help does not "
                "list" % (path, line, verb))


LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFDEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def check_links(path, prose):
    n_bad = 0
    n = 0
    base = os.path.dirname(os.path.join(ROOT, path))
    for lineno, text in prose:
        text = re.sub(r"(`+)(.+?)\1", "", text)
        targets = LINK.findall(text)
        m = REFDEF.match(text)
        if m:
            targets.append(m.group(1))
        for t in targets:
            if SCHEME.match(t) or t.startswith("#"):
                continue
            target = t.split("#", 1)[0].split("?", 1)[0]
            if not target:
                continue
            full = os.path.join(ROOT, target.lstrip("/")) \
                if target.startswith("/") else os.path.join(base, target)
            n += 1
            if not os.path.exists(full):
                n_bad += 1
                bad("%s:%d: link to '%s', which does not exist"
                    % (path, lineno, t))
    if n and not n_bad:
        ok()


for path in docs():
    blocks, prose = parse(path)
    run_blocks(path, blocks)
    check_links(path, prose)
check_cli()

print("docs: %d shell blocks not run (marked)" % not_run)
print("docs: %d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
PYEOF
