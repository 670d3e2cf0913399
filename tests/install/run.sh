#!/bin/sh
# make install, tested from a clean shell. Installs into a fresh temporary
# prefix (make install PREFIX=...), then uses each piece the way a user of
# that prefix does, in a clean environment (env -i, PATH=/usr/bin:/bin,
# plus only the variables such a user sets: PKG_CONFIG_PATH,
# LD_LIBRARY_PATH, LUA_CPATH, PYTHONPATH):
#   - the files: libraries, links, SONAMEs, headers, pkg-config files, the
#     tool, the man page, the Lua module (and the CUDA plugin when built);
#   - pkg-config: libplan, libplan-verify and the Debian names they require;
#   - C programs built with pkg-config: hash.c on libplan.so.0 (same hash
#     as `plan hash`, no OpenBLAS), verify.c on libplan-verify.so.0 (EQUAL),
#     and both linked statically to libplan.a / libplan-verify.a;
#   - the installed tool (--version, validate, verify) and man page (every
#     verb of `plan --help` has an entry; rendered when man exists);
#   - the Lua module from a stock lua5.4 (LUA_CPATH);
#   - the rock: `luarocks make` of libplan-scm-1.rockspec against the
#     prefix (pkg-config), loaded by a stock lua5.4 from the rocks tree;
#   - the Python binding installed with pip (no index, no library of its
#     own), loading the installed library by SONAME (LD_LIBRARY_PATH);
#   - a DESTDIR install (PREFIX=/usr/local, staged), where a stock lua5.4's
#     default cpath would find the module;
#   - make uninstall: nothing of ours is left, a stranger's file is.
#
# usage: sh tests/install/run.sh [BUILD]   (BUILD as the Makefile's, build)
# Prints "install: N passed, M failed" and exits 1 when anything failed.
# shellcheck disable=SC2016 # the sh -c scripts expand in their own shell

build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
here=$root/tests/install
case $build in /*) absbuild=$build ;; *) absbuild=$root/$build ;; esac
if [ ! -x "$absbuild/plan" ]; then
  echo "install: no plan tool in $absbuild (run make first)" >&2
  exit 2
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/libplan-install.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
prefix=$tmp/prefix
lib=$prefix/lib
mkdir "$tmp/home" "$tmp/work"
example=$root/examples/mlp-megatron.plan.yaml
version=$(sed -n 's/.*PLAN_VERSION_STRING "\(.*\)"/\1/p' \
  "$root/libplan/include/libplan/common.h")
out=$tmp/out

passed=0
failed=0
pass() { passed=$((passed + 1)); }
fail() {
  failed=$((failed + 1))
  echo "FAIL: $1"
  if [ -s "$out" ]; then tail -n 12 "$out" | sed 's/^/    /'; fi
}
# note TEXT: printed before the summary (what was not or only partly checked).
note() { echo "install: note: $*" >>"$tmp/notes"; }
# check NAME CMD...: passes when CMD exits 0; its output is in $out.
check() {
  name=$1
  shift
  if "$@" >"$out" 2>&1; then pass; else fail "$name"; fi
}
# clean [VAR=VALUE...] CMD...: CMD in a user's clean environment, in
# $tmp/work (so nothing of the source tree is found by accident).
clean() {
  (cd "$tmp/work" && env -i PATH=/usr/bin:/bin HOME="$tmp/home" "$@")
}
# make without the caller's make flags (a jobserver this shell cannot
# pass on).
mk() {
  (cd "$root" && MAKEFLAGS='' MFLAGS='' MAKELEVEL='' make -s BUILD="$build" "$@")
}

# ---- make install ---------------------------------------------------------
# A stranger's file in the prefix: uninstall must leave it.
mkdir -p "$lib"
echo keep >"$lib/not-ours.txt"
if ! mk install PREFIX="$prefix" >"$out" 2>&1; then
  fail "make install PREFIX=$prefix"
  echo "install: $passed passed, $failed failed"
  exit 1
fi
pass

want="lib/libplan.a lib/libplan-verify.a lib/libplan.so.0 lib/libplan.so
lib/libplan-verify.so.0 lib/libplan-verify.so lib/libplan-search.so.0
lib/libplan-search.so lib/pkgconfig/libplan.pc lib/pkgconfig/libplan-verify.pc
lib/pkgconfig/libplan-search.pc bin/plan share/man/man1/plan.1
lib/lua/5.4/plan.so"
for h in "$root"/libplan/include/libplan/*.h; do
  want="$want include/libplan/${h##*/}"
done
missing=
for f in $want; do
  [ -e "$prefix/$f" ] || missing="$missing $f"
done
if [ -z "$missing" ]; then pass; else : >"$out"; fail "not installed:$missing"; fi

files_ok() {
  [ "$(readlink "$lib/libplan.so")" = libplan.so.0 ] &&
    [ "$(readlink "$lib/libplan-verify.so")" = libplan-verify.so.0 ] &&
    [ "$(readlink "$lib/libplan-search.so")" = libplan-search.so.0 ] &&
    readelf -d "$lib/libplan-search.so.0" |
    grep -q 'SONAME.*\[libplan-search\.so\.0\]' &&
    [ ! -L "$lib/libplan.so.0" ] && [ ! -L "$lib/libplan-verify.so.0" ] &&
    readelf -d "$lib/libplan.so.0" | grep -q 'SONAME.*\[libplan\.so\.0\]' &&
    readelf -d "$lib/libplan-verify.so.0" |
    grep -q 'SONAME.*\[libplan-verify\.so\.0\]' &&
    cmp "$root/docs/plan.1" "$prefix/share/man/man1/plan.1" &&
    [ -x "$prefix/bin/plan" ] && [ -x "$lib/lua/5.4/plan.so" ]
}
check "links, SONAMEs, tool and man page as built" files_ok

if [ -f "$absbuild/libplan-cuda.so" ]; then
  check "the CUDA plugin is installed" cmp "$absbuild/libplan-cuda.so" \
    "$lib/libplan-cuda.so"
else
  check "no CUDA plugin installed (none built)" test ! -e "$lib/libplan-cuda.so"
fi

# ---- pkg-config -----------------------------------------------------------
pc() { clean PKG_CONFIG_PATH="$lib/pkgconfig" pkg-config "$@"; }
check "pkg-config finds yaml-0.1 libxxhash openblas (Debian names)" \
  pc --exists --print-errors yaml-0.1 libxxhash openblas
check "pkg-config finds libplan, libplan-verify and libplan-search" \
  pc --exists --print-errors libplan libplan-verify libplan-search
# pkg-config's words, one space apart (it ends its line with a space)
# shellcheck disable=SC2086
pcw() { w=$(pc "$@") && echo $w; }
pc_ok() {
  for a in "--modversion libplan" "--cflags libplan" "--libs libplan" \
    "--static --libs libplan" "--libs libplan-verify" \
    "--static --libs libplan-verify"; do
    # shellcheck disable=SC2086
    echo "pkg-config $a: $(pcw $a)"
  done
  [ "$(pcw --modversion libplan)" = "$version" ] &&
    [ "$(pcw --modversion libplan-verify)" = "$version" ] &&
    [ "$(pcw --cflags libplan)" = "-I$prefix/include" ] &&
    [ "$(pcw --libs libplan)" = "-L$lib -lplan" ] &&
    [ "$(pcw --libs libplan-verify)" = "-L$lib -lplan-verify" ] &&
    pc --static --libs libplan | grep -q -- '-lyaml.*-lxxhash' &&
    ! pc --static --libs libplan | grep -q openblas &&
    pc --static --libs libplan-verify |
    grep -q -- '-lplan-verify.*-lplan .*-lopenblas'
}
check "pkg-config flags: shared, static, versions" pc_ok

# ---- C programs through pkg-config ----------------------------------------
CFL="-std=c11 -Wall -Wextra -Werror"
build_c() { # OUT SRC PKG [--static]
  clean PKG_CONFIG_PATH="$lib/pkgconfig" sh -c \
    'cc '"$CFL"' -o "$1" "$2" $(pkg-config --cflags --libs $4 "$3")' \
    sh "$1" "$2" "$3" "$4"
}
run_lib() { clean LD_LIBRARY_PATH="$lib" "$@"; }
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }

plan_hash=$(clean "$prefix/bin/plan" hash "$example")
check "cc \$(pkg-config --cflags --libs libplan) hash.c" \
  build_c "$tmp/hash" "$here/hash.c" libplan
hash_ok() {
  got=$(run_lib "$tmp/hash" "$example") &&
    echo "hash.c: $got, plan hash: $plan_hash" &&
    [ -n "$plan_hash" ] && [ "$got" = "$plan_hash" ]
}
check "hash.c prints what plan hash prints" hash_ok
core_links() {
  needed "$tmp/hash" && needed "$tmp/hash" | grep -qx libplan.so.0 &&
    ! needed "$tmp/hash" | grep -q 'libplan-verify\|openblas' &&
    run_lib ldd "$tmp/hash" &&
    run_lib ldd "$tmp/hash" | grep -q "libplan\.so\.0 => $lib/libplan\.so\.0" &&
    ! run_lib ldd "$tmp/hash" | grep -q openblas
}
check "hash.c links libplan.so.0 from the prefix and no OpenBLAS" core_links

check "cc \$(pkg-config --cflags --libs libplan-verify) verify.c" \
  build_c "$tmp/verify" "$here/verify.c" libplan-verify
verify_ok() {
  [ "$(run_lib "$tmp/verify" "$example")" = EQUAL ] &&
    needed "$tmp/verify" | grep -qx libplan-verify.so.0 &&
    ! needed "$tmp/verify" | grep -qx libplan.so.0 &&
    run_lib ldd "$tmp/verify" |
    grep -q "libplan-verify\.so\.0 => $lib/libplan-verify\.so\.0"
}
check "verify.c: EQUAL, on libplan-verify.so.0 alone" verify_ok

check "cc \$(pkg-config --cflags --libs libplan-search) search.c" \
  build_c "$tmp/search" "$here/search.c" libplan-search
search_ok() {
  want=$(clean "$prefix/bin/plan" search "$root/examples/mlp-program.yaml" \
    --mesh dp=2,tp=2 --strategy megatron -o "$tmp/searched.plan.yaml" >/dev/null &&
    clean "$prefix/bin/plan" hash --program-root "$root" "$tmp/searched.plan.yaml") &&
    got=$(run_lib "$tmp/search" "$root/examples/mlp-program.yaml") &&
    echo "search.c: $got, plan search: $want" &&
    [ -n "$want" ] && [ "$got" = "$want" ] &&
    needed "$tmp/search" | grep -qx libplan-search.so.0
}
check "search.c: in-process search, the tool's plan hash, on libplan-search.so.0" search_ok

# Statically: the archives, with what pkg-config --static adds; -l:NAME.a
# picks the archive where the shared library sits beside it.
build_static() { # OUT SRC PKG
  clean PKG_CONFIG_PATH="$lib/pkgconfig" sh -c \
    'cc '"$CFL"' -o "$1" "$2" $(pkg-config --cflags "$3") $(pkg-config --static --libs "$3" |
       sed -e "s/-lplan-verify\\( \\|\$\\)/-l:libplan-verify.a /" -e "s/-lplan\\( \\|\$\\)/-l:libplan.a /")' \
    sh "$1" "$2" "$3"
}
check "cc hash.c with libplan.a and pkg-config --static --libs libplan" \
  build_static "$tmp/hash-static" "$here/hash.c" libplan
static_ok() {
  [ "$(clean "$tmp/hash-static" "$example")" = "$plan_hash" ] &&
    ! needed "$tmp/hash-static" | grep -q libplan
}
check "static hash.c: the same hash, no libplan.so" static_ok
check "cc verify.c with libplan-verify.a, libplan.a (--static)" \
  build_static "$tmp/verify-static" "$here/verify.c" libplan-verify
check "static verify.c: EQUAL, no libplan.so" sh -c \
  '[ "$("$1" "$2")" = EQUAL ] && ! readelf -d "$1" | grep -q "NEEDED.*libplan"' \
  sh "$tmp/verify-static" "$example"

# ---- the tool and its man page --------------------------------------------
tool() { clean PATH="$prefix/bin:/usr/bin:/bin" "$@"; }
version_ok() {
  v=$(tool plan --version) && echo "$v" &&
    echo "$v" | grep -qx "plan (libplan) $version, plan format .*"
}
check "plan --version (installed)" version_ok
check "plan validate (installed)" tool plan validate "$example"
tool_verify() { v=$(tool plan verify "$example") && echo "$v" && echo "$v" | grep -q ": EQUAL"; }
check "plan verify (installed): EQUAL" tool_verify
which_plan() { [ "$(tool sh -c 'command -v plan')" = "$prefix/bin/plan" ]; }
check "plan on PATH is the installed one" which_plan

# The man page: its sections, and an entry (.SS VERB) for every verb that
# plan --help lists, and for no other.
man1=$prefix/share/man/man1/plan.1
man_sections() {
  for s in NAME SYNOPSIS DESCRIPTION VERBS "EXIT STATUS" ENVIRONMENT FILES \
    "SEE ALSO"; do
    grep -Eqx "\.SH \"?$s\"?" "$man1" || { echo "no .SH $s"; return 1; }
  done
  for code in 0 1 2 3; do
    sed -n '/^\.SH "\{0,1\}EXIT STATUS/,/^\.SH /p' "$man1" |
      grep -qx "\.B $code" || { echo "EXIT STATUS: no $code"; return 1; }
  done
}
check "man page: every section, exit codes 0-3" man_sections
man_verbs() {
  verbs=$(tool plan --help | sed -n '/Verbs:/,$p' |
    sed -n 's/^  \([a-z][a-z-]*\)  .*/\1/p')
  [ -n "$verbs" ] || { echo "plan --help lists no verbs"; return 1; }
  entries=$(sed -n 's/^\.SS \([a-z][a-z-]*\)$/\1/p' "$man1")
  rc=0
  for v in $verbs; do
    echo "$entries" | grep -qx "$v" || { echo "no .SS $v"; rc=1; }
  done
  for e in $entries; do
    echo "$verbs" | grep -qx "$e" || { echo ".SS $e: not a verb"; rc=1; }
  done
  return $rc
}
check "man page: an entry for every verb of plan --help" man_verbs
if command -v man >/dev/null 2>&1; then
  man_l() { clean MANWIDTH=80 man -P cat -l "$man1" | grep -q '^EXIT STATUS'; }
  check "man -l renders the installed page" man_l
  # man finds PREFIX/share/man from PREFIX/bin on PATH
  man_plan() { tool MANWIDTH=80 man -P cat plan | grep -q '^EXIT STATUS'; }
  check "man plan finds it from PATH" man_plan
else
  note "no man: the page is checked as troff source only"
fi

# ---- Lua ------------------------------------------------------------------
if command -v lua5.4 >/dev/null 2>&1; then
  lua_ok() {
    r=$(clean LUA_CPATH="$lib/lua/5.4/?.so;;" lua5.4 "$here/hash.lua" \
      "$example") && echo "$r" &&
      [ "$(echo "$r" | sed -n 1p)" = "$lib/lua/5.4/plan.so" ] &&
      [ "$(echo "$r" | sed -n 2p)" = "$plan_hash" ]
  }
  check "lua5.4: require \"plan\" from the prefix, the same hash" lua_ok
else
  note "no lua5.4: the Lua module is not checked"
fi

# ---- the rock ---------------------------------------------------------------
# `luarocks make` of libplan-scm-1.rockspec against the installed prefix
# (found by pkg-config), into a tree of its own; then the same hash from a
# stock lua5.4 with the tree's cpath. Its build goes to $tmp, not the tree.
if command -v luarocks >/dev/null 2>&1 && command -v lua5.4 >/dev/null 2>&1; then
  rock_ok() {
    (cd "$root" && env -i PATH=/usr/bin:/bin HOME="$tmp/home" \
      PKG_CONFIG_PATH="$lib/pkgconfig" ROCK_BUILD="$tmp/rock-build" \
      MAKEFLAGS='' luarocks --lua-version 5.4 make --tree "$tmp/rocks" \
      libplan-scm-1.rockspec) &&
      r=$(clean LD_LIBRARY_PATH="$lib" LUA_CPATH="$tmp/rocks/lib/lua/5.4/?.so" \
        lua5.4 "$here/hash.lua" "$example") && echo "$r" &&
      [ "$(echo "$r" | sed -n 1p)" = "$tmp/rocks/lib/lua/5.4/plan.so" ] &&
      [ "$(echo "$r" | sed -n 2p)" = "$plan_hash" ] &&
      [ ! -e "$root/build-rock" ]
  }
  check "luarocks make: the rock against the installed libplan, the same hash" rock_ok
else
  note "no luarocks: the rockspec is not checked"
fi

# ---- Python ---------------------------------------------------------------
# The binding installed with pip into $tmp/py, without an index and without
# a library of its own: it must load the installed libplan by SONAME.
# library=none asks the build backend for a wheel without the library.
py=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null)
pip_binding() {
  "$py" -m pip install --no-deps --no-build-isolation --no-index \
    --no-cache-dir --disable-pip-version-check --root-user-action=ignore \
    --quiet --target "$tmp/py" -C library=none -C tool=none "$root/bindings/python"
}
if [ -n "$py" ] && "$py" -m pip --version >/dev/null 2>&1; then
  check "pip install --target (no index) bindings/python" pip_binding
  py_ok() {
    r=$(clean PYTHONPATH="$tmp/py" LD_LIBRARY_PATH="$lib" "$py" \
      "$here/binding.py" "$example") || return 1
    echo "$r"
    carried=$(find "$tmp/py/libplan" -name 'libplan*.so*')
    [ -z "$carried" ] || { echo "the binding carries $carried"; return 1; }
    [ "$(echo "$r" | sed -n 's/^hash //p')" = "$plan_hash" ] || return 1
    libs=$(echo "$r" | sed -n 's/^library //p')
    [ -n "$libs" ] || return 1
    for l in $libs; do
      case $l in "$lib"/libplan*.so.0) ;; *) echo "not the prefix's: $l"; return 1 ;; esac
    done
    # the fullest library comes first by SONAME, so verification works
    echo "$libs" | grep -q '/libplan-search\.so\.0$' || { echo "not libplan-search: $libs"; return 1; }
    echo "$r" | grep -qx 'verify EQUAL'
  }
  check "python3 -c 'import libplan': installed library by SONAME" py_ok
else
  note "no pip for python3: the Python binding is not checked"
fi

# ---- DESTDIR ----------------------------------------------------------------
stage=$tmp/stage
check "make install DESTDIR=... PREFIX=/usr/local" \
  mk install DESTDIR="$stage" PREFIX=/usr/local
staged_ok() {
  [ -x "$stage/usr/local/bin/plan" ] &&
    [ -f "$stage/usr/local/lib/libplan.so.0" ] &&
    grep -qx 'prefix=/usr/local' "$stage/usr/local/lib/pkgconfig/libplan.pc" &&
    [ -f "$stage/usr/local/lib/lua/5.4/plan.so" ] &&
    [ -f "$stage/usr/local/share/man/man1/plan.1" ]
}
check "staged under DESTDIR, pkg-config prefix /usr/local" staged_ok
if command -v lua5.4 >/dev/null 2>&1; then
  # /usr/local/lib/lua/5.4 is on a stock lua5.4's cpath: seen through the
  # stage, the default path finds the module.
  default_cpath() {
    cpath=$(clean lua5.4 -e 'io.write(package.cpath)') &&
      echo "$cpath" | tr ';' '\n' | grep -qx '/usr/local/lib/lua/5.4/?.so' &&
      staged=$(echo "$cpath" | sed "s|/usr/local/|$stage/usr/local/|g") &&
      r=$(clean LUA_CPATH="$staged" lua5.4 "$here/hash.lua" "$example") &&
      echo "$r" &&
      [ "$(echo "$r" | sed -n 1p)" = "$stage/usr/local/lib/lua/5.4/plan.so" ]
  }
  check "the default lua5.4 cpath finds PREFIX=/usr/local's module" default_cpath
fi
check "make uninstall DESTDIR=... PREFIX=/usr/local" \
  mk uninstall DESTDIR="$stage" PREFIX=/usr/local
check "nothing left under DESTDIR" sh -c \
  '[ -z "$(find "$1" ! -type d)" ]' sh "$stage"

# ---- make uninstall ---------------------------------------------------------
check "make uninstall PREFIX=$prefix" mk uninstall PREFIX="$prefix"
uninstalled() {
  left=$(find "$prefix" ! -type d) &&
    echo "left: $left" &&
    [ "$left" = "$lib/not-ours.txt" ] &&
    [ ! -e "$prefix/include/libplan" ]
}
check "uninstall removed what install put there, and only that" uninstalled

[ -f "$tmp/notes" ] && sort -u "$tmp/notes"
echo "install: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
