"""Builds the libplan wheel: a PEP 517 backend, and a command for `make wheel`.

No build package is needed: a wheel is a zip archive holding the package,
a .dist-info folder (METADATA, WHEEL, RECORD) and, here, the library beside
the package's modules, where the binding looks first, under the name of
what it is: libplan-search.so.N (verification and in-process search; it
links Lua 5.4 and CBC), libplan-verify.so.N (the core and verification) or
libplan.so.N (the core). The wheel is tagged py3-none-<platform>: the
binding is pure
Python over ctypes, the library is native. The library links libyaml,
xxHash (and, libplan-verify, OpenBLAS) dynamically; those come from the
system.

The library to carry is, in order: the `library` config setting
(pip --config-settings library=PATH), $LIBPLAN_LIBRARY, or build/ of the
source tree these files sit in (libplan-search.so.N, else
libplan-verify.so.N, else libplan.so.N).
With none of these (no build), or `library=none`, the wheel carries no
library and the binding loads the one the system's loader finds (a
libplan of `make install`). The `plan` tool beside the carried library goes
in too, as libplan/bin/plan (libplan.search runs it); `tool=none`
(--tool none) leaves it out.

    python3 bindings/python/build_backend.py [--library PATH|none]
                                             [--tool PATH|none] [--out DIR]
"""

import base64
import hashlib
import io
import os
import re
import stat
import sys
import sysconfig
import tarfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
NAME = "libplan"
ABI = 0  # libplan/_lib.py ABI_VERSION, the SONAME suffix
SUMMARY = ("Distributed-training parallelization plans: load, validate, hash, "
           "verify and price them (ctypes binding of libplan)")


def version():
    """PLAN_VERSION_STRING of the source tree's common.h, or, in an
    unpacked sdist, the version its PKG-INFO records."""
    for path, pattern in (
            (os.path.join(ROOT, "libplan", "include", "libplan", "common.h"),
             r'PLAN_VERSION_STRING "([^"]+)"'),
            (os.path.join(HERE, "PKG-INFO"), r"(?m)^Version: (\S+)$")):
        try:
            with open(path) as f:
                m = re.search(pattern, f.read())
        except OSError:
            continue
        if m:
            return m.group(1)
    raise RuntimeError("no version: neither %s nor PKG-INFO is there"
                       % os.path.join(ROOT, "libplan", "include"))


def find_library(config_settings=None):
    """The library to carry (a real path), or None for a wheel without
    one: `library=none`, or nothing named and no build in the tree."""
    lib = (config_settings or {}).get("library") or os.environ.get(
        "LIBPLAN_LIBRARY")
    if lib == "none":
        return None
    if not lib:
        for n in ("libplan-search.so.%d" % ABI, "libplan-verify.so.%d" % ABI,
                  "libplan.so.%d" % ABI):
            c = os.path.join(ROOT, "build", n)
            if os.path.exists(c):
                return os.path.realpath(c)
        sys.stderr.write(
            "libplan: no library in %s (run `make` there first, or name one "
            "with LIBPLAN_LIBRARY=PATH or --config-settings library=PATH): "
            "the wheel carries none, and the binding loads the libplan the "
            "system's loader finds\n" % os.path.join(ROOT, "build"))
        return None
    if not os.path.exists(lib):
        raise RuntimeError(
            "libplan library %s not found: run `make` in the source tree, or "
            "name it with LIBPLAN_LIBRARY=PATH or --config-settings "
            "library=PATH" % lib)
    return os.path.realpath(lib)


def carried_name(data):
    """The name a library's bytes go under in the wheel: libplan-search.so.N
    when it defines plan_search (its dynamic symbol names are NUL-separated
    strings in the file), libplan-verify.so.N when it defines plan_verify,
    else libplan.so.N, the core."""
    if b"\0plan_search\0" in data:
        return "libplan-search.so.%d" % ABI
    if b"\0plan_verify\0" in data:
        return "libplan-verify.so.%d" % ABI
    return "libplan.so.%d" % ABI


def tag():
    plat = re.sub(r"[-.]", "_", sysconfig.get_platform())
    return "py3-none-" + plat


def metadata():
    return ("Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: %s\n"
            "Requires-Python: >=3.8\nLicense: see the source distribution\n"
            "Provides-Extra: numpy\nRequires-Dist: numpy; extra == \"numpy\"\n"
            % (NAME, version(), SUMMARY))


def wheel_info(tagname, pure=False):
    return ("Wheel-Version: 1.0\nGenerator: libplan build_backend\n"
            "Root-Is-Purelib: %s\nTag: %s\n" % ("true" if pure else "false",
                                                 tagname))


def _record_line(name, data):
    d = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "%s,sha256=%s,%d" % (name, d.decode(), len(data))


def _package_files():
    pkg = os.path.join(HERE, NAME)
    for dirpath, dirnames, files in os.walk(pkg):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for f in sorted(files):
            if f.endswith(".py"):
                full = os.path.join(dirpath, f)
                yield os.path.relpath(full, HERE).replace(os.sep, "/"), full


def _write_wheel(path, entries, distinfo):
    """entries: [(name in the archive, bytes, mode)]."""
    record = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data, mode in entries:
            zi = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            # a regular file's full st_mode: installers keep the x bits
            # only of entries marked S_IFREG
            zi.external_attr = (stat.S_IFREG | mode) << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
            record.append(_record_line(name, data))
        record.append("%s/RECORD,," % distinfo)
        zi = zipfile.ZipInfo("%s/RECORD" % distinfo,
                             date_time=(2020, 1, 1, 0, 0, 0))
        zi.external_attr = (stat.S_IFREG | 0o644) << 16
        z.writestr(zi, "\n".join(record) + "\n")


def _distinfo_name():
    return "%s-%s.dist-info" % (NAME, version())


def find_tool(lib, config_settings=None):
    """The `plan` tool to carry (libplan.search runs it): the `tool` config
    setting, else `plan` beside the library `lib` (None: no library); None
    when there is none or the setting is "none"."""
    tool = (config_settings or {}).get("tool")
    if tool == "none" or not (tool or lib):
        return None
    tool = tool or os.path.join(os.path.dirname(lib), "plan")
    return tool if os.path.isfile(tool) and os.access(tool, os.X_OK) else None


def build(out_dir, library=None, config_settings=None, tool=None):
    """Writes the wheel into out_dir; returns its file name."""
    lib = library if library is not None else find_library(config_settings)
    if lib == "none":
        lib = None
    if tool is None:
        tool = find_tool(lib, config_settings)
    t = tag()
    distinfo = _distinfo_name()
    entries = []
    for name, full in _package_files():
        with open(full, "rb") as f:
            entries.append((name, f.read(), 0o644))
    if lib:
        with open(lib, "rb") as f:
            data = f.read()
        entries.append(("%s/%s" % (NAME, carried_name(data)), data, 0o755))
    if tool and tool != "none":
        with open(tool, "rb") as f:
            entries.append(("%s/bin/plan" % NAME, f.read(), 0o755))
    entries.append(("%s/METADATA" % distinfo, metadata().encode(), 0o644))
    entries.append(("%s/WHEEL" % distinfo, wheel_info(t).encode(), 0o644))
    entries.append(("%s/top_level.txt" % distinfo, b"libplan\n", 0o644))
    name = "%s-%s-%s.whl" % (NAME, version(), t)
    os.makedirs(out_dir, exist_ok=True)
    _write_wheel(os.path.join(out_dir, name), entries, distinfo)
    return name


# ---- PEP 517 / PEP 660 hooks ----------------------------------------------

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    d = os.path.join(metadata_directory, _distinfo_name())
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "METADATA"), "w") as f:
        f.write(metadata())
    with open(os.path.join(d, "WHEEL"), "w") as f:
        f.write(wheel_info(tag()))
    return _distinfo_name()


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None,
                metadata_directory=None):
    return build(wheel_directory, config_settings=config_settings)


def build_editable(wheel_directory, config_settings=None,
                   metadata_directory=None):
    """An editable install: a .pth file that puts bindings/python on the
    path; the library is then found in the source tree's build/."""
    t = "py3-none-any"
    distinfo = _distinfo_name()
    entries = [("__editable__.libplan.pth", (HERE + "\n").encode(), 0o644),
               ("%s/METADATA" % distinfo, metadata().encode(), 0o644),
               ("%s/WHEEL" % distinfo, wheel_info(t, pure=True).encode(),
                0o644)]
    name = "%s-%s-%s.whl" % (NAME, version(), t)
    _write_wheel(os.path.join(wheel_directory, name), entries, distinfo)
    return name


def build_sdist(sdist_directory, config_settings=None):
    base = "%s-%s" % (NAME, version())
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as tf:
        files = [("pyproject.toml", os.path.join(HERE, "pyproject.toml")),
                 ("build_backend.py", os.path.join(HERE, "build_backend.py"))]
        files += list(_package_files())
        for arc, full in files:
            tf.add(full, arcname="%s/%s" % (base, arc))
        pkg = metadata().encode()
        ti = tarfile.TarInfo("%s/PKG-INFO" % base)
        ti.size = len(pkg)
        tf.addfile(ti, io.BytesIO(pkg))
    return name


def main(argv):
    import argparse
    ap = argparse.ArgumentParser(description="build the libplan wheel")
    ap.add_argument("--library", help="the library to carry (default: "
                    "$LIBPLAN_LIBRARY, else build/ of the source tree; "
                    "'none' carries none)")
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "wheel"))
    ap.add_argument("--tool", help="the plan tool to carry (default: plan "
                    "beside the library; 'none' leaves it out)")
    a = ap.parse_args(argv)
    lib = a.library
    if lib and lib != "none":
        if not os.path.exists(lib):
            ap.error("--library %s: no such file" % lib)
        lib = os.path.realpath(lib)
    name = build(a.out, library=lib, tool=a.tool)
    print(os.path.join(a.out, name))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
