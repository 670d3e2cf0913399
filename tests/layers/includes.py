#!/usr/bin/env python3
"""The layers the build enforces: what each folder may include, and which
symbols its objects may reference.

1. Includes. Every `#include "..."` in libplan/include, libplan/src,
   runners, verifier, cli and lua is resolved as the compiler would (the
   including file's folder first, then the include paths) and the header
   it names is checked against the including folder's layers (MAY below).
   What a folder still includes beyond them is listed in CROSSINGS, each
   with the reason it remains; an entry no include uses any more fails
   too, so the list can only shrink.
2. Symbols. `nm` over the built objects: no core object references a
   symbol that only a verifier, runner, cli or lua object defines; no
   verifier object one that only the CPU runner's objects define; no
   runner object (runners/, runners/cpu) one that a verifier object
   defines; the few references across that remain are in
   SYMBOL_CROSSINGS. A function the runner interface declares (RUNNER_API)
   is that interface, whichever folder defines it: the embedded CPU
   runner's vtable (plan_cpu_runner, runner.h) is the entry point the CPU
   runner provides, as a plugin's entry symbol is the CUDA runner's, and
   the folders that may include the interface may call it.

Usage: includes.py [--build BUILD_DIR] [--self-test]
  --build      also run the symbol check on BUILD_DIR's objects
  --self-test  check that both checks fail on a forbidden include and a
               forbidden reference, injected into temporary copies
"""
import fnmatch
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

# The folders scanned, and the include paths a quoted include is looked up
# in after the including file's own folder (the widest set the build uses;
# header names are unique across them, so the order decides nothing).
SCANNED = ["libplan/include", "libplan/src", "runners", "verifier", "cli", "lua"]
INCLUDE_PATHS = ["libplan/include", "libplan/src", "verifier", "runners/cpu",
                 "runners", "runners/cuda", "lua", "cli"]
SOURCE_EXT = (".c", ".h", ".cu", ".cuh", ".cc")

# The runner interface: what the verifier and every runner share.
RUNNER_API = ["runners/runner.h", "runners/runner_op.h", "runners/comm.h",
              "runners/inputs.h"]


def layer_of(path):
    """The layer of a repository path (a source file or a header)."""
    if path.startswith("libplan/include/"):
        return "public"
    if path.startswith("libplan/src/base/"):
        return "base"
    if path.startswith("libplan/src/"):
        return "core"
    if path in RUNNER_API:
        return "runner-api"
    for pre, name in (("runners/cpu/", "cpu"), ("runners/cuda/", "cuda"),
                      ("runners/", "runners"), ("verifier/", "verifier"),
                      ("cli/", "cli"), ("lua/", "lua")):
        if path.startswith(pre):
            return name
    return None


def folder_of(path):
    """The folder a source file belongs to, for MAY: its layer, except that
    the core's base/ is core and the runner interface is the runners'."""
    lay = layer_of(path)
    return {"base": "core", "runner-api": "runners"}.get(lay, lay)


# What each folder may include without a listed crossing. base/ (the error
# setters, buffers and rounding every layer builds on) is open to all.
MAY = {
    "public": {"public"},
    "core": {"public", "base", "core"},
    "runners": {"public", "base", "runner-api", "runners"},
    "cpu": {"public", "base", "runner-api", "cpu"},
    "cuda": {"public", "base", "runner-api", "cuda"},
    "verifier": {"public", "base", "runner-api", "verifier"},
    "cli": {"public", "cli", "lua"},  # the tool embeds the Lua module
    "lua": {"public", "lua"},
}

# The crossings that remain: (folder, header pattern) -> why. Only shrink.
CROSSINGS = {}

# Symbol references across layers that remain: (folder, symbol) -> why.
SYMBOL_CROSSINGS = {}

# A function prototype at the start of a line: its name.
PROTO_RE = re.compile(r"(?m)^(?!typedef|static|#)[A-Za-z_][\w \t*]*?\b(plan_\w+)\s*\(")


def interface_symbols(root):
    """The functions the runner interface's headers declare."""
    out = set()
    for h in RUNNER_API:
        with open(os.path.join(root, h), encoding="utf-8") as f:
            out.update(PROTO_RE.findall(f.read()))
    return out

INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def sources(root):
    for top in SCANNED:
        for d, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if f.endswith(SOURCE_EXT):
                    yield os.path.relpath(os.path.join(d, f), root)


def resolve(root, src, name):
    for base in [os.path.dirname(src)] + INCLUDE_PATHS:
        p = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(os.path.join(root, p)):
            return p
    return None


def check_includes(root):
    """The forbidden includes and the unused crossings, as messages."""
    bad, used = [], set()
    for src in sources(root):
        folder = folder_of(src)
        with open(os.path.join(root, src), encoding="utf-8", errors="replace") as f:
            lines = f.readlines()
        for no, line in enumerate(lines, 1):
            m = INCLUDE_RE.match(line)
            if not m:
                continue
            hdr = resolve(root, src, m.group(1))
            if hdr is None:
                bad.append(f"{src}:{no}: \"{m.group(1)}\" is not found in the tree")
                continue
            if layer_of(hdr) in MAY[folder]:
                continue
            keys = [k for k in CROSSINGS if k[0] == folder and fnmatch.fnmatch(hdr, k[1])]
            if keys:
                used.update(keys)
                continue
            bad.append(f"{src}:{no}: {folder} may not include {hdr} ({layer_of(hdr)})")
    for k in sorted(set(CROSSINGS) - used):
        bad.append(f"crossing {k[0]} -> {k[1]} is no longer used: remove it "
                   "from tests/layers/includes.py")
    return bad


def objects(root, build):
    """(object path, folder) of every C source of the layers' folders; the
    missing ones are reported by the caller."""
    for top in ["libplan/src", "runners", "verifier", "cli", "lua"]:
        for d, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if f.endswith(".c"):
                    src = os.path.relpath(os.path.join(d, f), root)
                    yield os.path.join(build, src[:-2] + ".o"), folder_of(src), src


# Which folders' definitions a folder may not reference (when no folder it
# may reference defines the symbol too).
NO_REF = {
    "core": {"runners", "cpu", "verifier", "cli", "lua"},
    "verifier": {"cpu", "cli", "lua"},
    "runners": {"verifier", "cpu", "cli", "lua"},
    "cpu": {"verifier", "cli", "lua"},
}


def check_symbols(root, build):
    bad = []
    objs = list(objects(root, build))
    missing = [src for o, _, src in objs if not os.path.isfile(o)]
    if missing:
        return [f"{build}: not built: {', '.join(missing)}"]
    defined, undefined = {}, []
    iface = interface_symbols(root)
    out = subprocess.run(["nm", "-A", "-g"] + [o for o, _, _ in objs],
                         check=True, capture_output=True, text=True).stdout
    folder = {o: fo for o, fo, _ in objs}
    for line in out.splitlines():
        path, _, rest = line.partition(":")
        f = rest.split()
        if len(f) == 2 and f[0] == "U":
            undefined.append((path, f[1]))
        elif len(f) == 3:
            defined.setdefault(f[2], set()).add(folder[path])
    for path, sym in undefined:
        fo = folder[path]
        where = defined.get(sym, set())
        if fo not in NO_REF or not where or not where <= NO_REF[fo]:
            continue
        if (fo, sym) in SYMBOL_CROSSINGS:
            continue
        if sym in iface and "runner-api" in MAY[fo]:
            continue
        bad.append(f"{os.path.relpath(path, build)}: {fo} references {sym}, "
                   f"defined only in {', '.join(sorted(where))}")
    used = {(folder[p], s) for p, s in undefined}
    for k in sorted(set(SYMBOL_CROSSINGS) - used):
        bad.append(f"symbol crossing {k[0]} -> {k[1]} is no longer used: "
                   "remove it from tests/layers/includes.py")
    return bad


def report(name, bad):
    for b in bad:
        print(f"FAIL: {b}")
    return not bad


def self_test(build):
    """Both checks fail on what they must catch, in temporary copies."""
    ok = True
    tmp = tempfile.mkdtemp()
    try:
        for top in SCANNED:
            shutil.copytree(os.path.join(ROOT, top), os.path.join(tmp, top),
                            ignore=shutil.ignore_patterns("*.lua", "*.mk"))
        if check_includes(tmp):
            print("FAIL: self-test: the clean copy does not pass")
            ok = False
        cases = [("runners/cpu/kernels.c", '#include "verify_int.h"\n',
                  "cpu may not include verifier/verify_int.h"),
                 ("verifier/report.c", '#include "kernels.h"\n',
                  "verifier may not include runners/cpu/kernels.h"),
                 ("libplan/src/base/util.c", '#include "runner.h"\n',
                  "core may not include runners/runner.h")]
        for path, line, want in cases:
            p = os.path.join(tmp, path)
            with open(p) as f:
                text = f.read()
            with open(p, "w") as f:
                f.write(line + text)
            got = check_includes(tmp)
            with open(p, "w") as f:
                f.write(text)
            if not any(want in b for b in got):
                print(f"FAIL: self-test: {line.strip()} in {path} is not caught")
                ok = False
        if build:
            # a verifier object that calls the CPU runner's kernel directly
            bt = os.path.join(tmp, "build")
            for o, _, src in objects(ROOT, build):
                d = os.path.join(bt, os.path.dirname(src))
                os.makedirs(d, exist_ok=True)
                if os.path.isfile(o):
                    os.symlink(os.path.abspath(o), os.path.join(bt, src[:-2] + ".o"))
            c = os.path.join(tmp, "verifier", "zz_forbidden.c")
            with open(c, "w") as f:
                f.write("int plan_cpu_supports(int, int);\n"
                        "int plan_zz_forbidden(void);\n"
                        "int plan_zz_forbidden(void) { return plan_cpu_supports(0, 0); }\n")
            subprocess.run(["cc", "-c", c, "-o", os.path.join(bt, "verifier", "zz_forbidden.o")],
                           check=True)
            # and a runners object that does (the interface's entry point,
            # plan_cpu_runner, is the one way in)
            c2 = os.path.join(tmp, "runners", "zz_forbidden.c")
            with open(c2, "w") as f:
                f.write("int plan_cpu_supports(int, int);\n"
                        "int plan_zz_forbidden2(void);\n"
                        "int plan_zz_forbidden2(void) { return plan_cpu_supports(0, 0); }\n")
            subprocess.run(["cc", "-c", c2, "-o", os.path.join(bt, "runners", "zz_forbidden.o")],
                           check=True)
            got = check_symbols(tmp, bt)
            for fo in ("verifier", "runners"):
                if not any(f"{fo} references plan_cpu_supports" in b for b in got):
                    print(f"FAIL: self-test: a {fo} reference to plan_cpu_supports is not caught")
                    ok = False
    finally:
        shutil.rmtree(tmp)
    print(f"layers: self-test {'passed' if ok else 'FAILED'}")
    return ok


def main(argv):
    build = None
    selftest = False
    args = list(argv)
    while args:
        a = args.pop(0)
        if a == "--build" and args:
            build = args.pop(0)
        elif a == "--self-test":
            selftest = True
        else:
            print(__doc__.strip().splitlines()[-5], file=sys.stderr)
            return 2
    if selftest:
        return 0 if self_test(build) else 1
    ok = report("includes", check_includes(ROOT))
    n = sum(1 for _ in sources(ROOT))
    print(f"layers: includes of {n} files {'as allowed' if ok else 'FAILED'}"
          f" ({len(CROSSINGS)} crossings left)")
    if build:
        sok = report("symbols", check_symbols(ROOT, build))
        print(f"layers: symbol references {'as allowed' if sok else 'FAILED'}")
        ok = ok and sok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
