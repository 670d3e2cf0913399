# The GPU bundle's environment (docs/gpu.md): source it from a POSIX shell,
#   . BUNDLE/env.sh
# with PLAN_BUNDLE set to the bundle's folder when the shell cannot tell
# (run-plan and tests/gpu/run.sh set it). It
#  - unpacks the gzipped libraries (OpenBLAS, LAPACK) once, beside the
#    others, or under ${TMPDIR:-/tmp} when the bundle is read-only;
#  - finds the CUDA libraries the plugin needs (libcublas.so.13,
#    libcublasLt.so.13, libnccl.so.2) in $CUDA_HOME, /usr/local/cuda*, and
#    Python packages' nvidia/*/lib folders (pip's cuBLAS and NCCL), and
#    puts their folders on LD_LIBRARY_PATH after the bundle's own;
#  - uses the bundle's C++ runtime (fallback/) only where the system's
#    libstdc++ lacks GLIBCXX_3.4.29 (PLAN_BUNDLE_CXX=bundled or system
#    decides instead); it needs glibc 2.36, the rest of the bundle 2.34;
#  - sets PLAN_CUDA_PLUGIN to the bundle's plugin (unless it is set);
#  - sets PLAN_BUNDLE_CUDA_LIBS to the folders found, and
#    PLAN_BUNDLE_MISSING to the CUDA libraries not found ("" when none).
: "${PLAN_BUNDLE:?set PLAN_BUNDLE to the bundle folder before sourcing env.sh}"

plan_libdir=$PLAN_BUNDLE
for plan_gz in "$PLAN_BUNDLE"/*.so*.gz; do
  [ -f "$plan_gz" ] || continue
  plan_lib=$(basename "$plan_gz" .gz)
  if [ ! -f "$PLAN_BUNDLE/$plan_lib" ] && [ ! -w "$PLAN_BUNDLE" ]; then
    plan_libdir=${TMPDIR:-/tmp}/libplan-bundle-$(id -u)
    mkdir -p "$plan_libdir"
  fi
  if [ ! -f "$plan_libdir/$plan_lib" ]; then
    gzip -dc "$plan_gz" >"$plan_libdir/$plan_lib.tmp.$$" &&
      mv "$plan_libdir/$plan_lib.tmp.$$" "$plan_libdir/$plan_lib"
  fi
done

# candidate folders, most specific first
plan_cands=""
for plan_d in ${CUDA_HOME:+"$CUDA_HOME/lib64" "$CUDA_HOME/lib"} \
              ${CUDA_PATH:+"$CUDA_PATH/lib64"} \
              /usr/local/cuda/lib64 $(ls -d /usr/local/cuda-*/lib64 2>/dev/null | sort -r) \
              /usr/lib/x86_64-linux-gnu /usr/lib64; do
  plan_cands="$plan_cands $plan_d"
done
if command -v python3 >/dev/null 2>&1; then
  for plan_sp in $(python3 -c 'import site, sys
dirs = list(getattr(site, "getsitepackages", lambda: [])())
dirs.append(site.getusersitepackages())
dirs += [p for p in sys.path if p.endswith("-packages")]
print("\n".join(dict.fromkeys(dirs)))' 2>/dev/null); do
    for plan_d in "$plan_sp"/nvidia/*/lib; do
      [ -d "$plan_d" ] && plan_cands="$plan_cands $plan_d"
    done
  done
fi

PLAN_BUNDLE_CUDA_LIBS=""
PLAN_BUNDLE_MISSING=""
for plan_need in libcublas.so.13 libcublasLt.so.13 libnccl.so.2; do
  plan_found=""
  for plan_d in $plan_cands; do
    if [ -e "$plan_d/$plan_need" ]; then
      plan_found=$plan_d
      break
    fi
  done
  if [ -z "$plan_found" ]; then
    PLAN_BUNDLE_MISSING="$PLAN_BUNDLE_MISSING${PLAN_BUNDLE_MISSING:+ }$plan_need"
    continue
  fi
  case ":$PLAN_BUNDLE_CUDA_LIBS:" in
    *":$plan_found:"*) ;;
    *) PLAN_BUNDLE_CUDA_LIBS=$PLAN_BUNDLE_CUDA_LIBS${PLAN_BUNDLE_CUDA_LIBS:+:}$plan_found ;;
  esac
done

# the system's libstdc++, when it knows what the bundle's code asks for
plan_cxx=${PLAN_BUNDLE_CXX:-}
if [ -z "$plan_cxx" ]; then
  plan_cxx=bundled
  for plan_d in $( (/sbin/ldconfig -p || ldconfig -p) 2>/dev/null |
                   awk '/libstdc\+\+\.so\.6 .*x86-64/ {print $NF}') \
                /lib/x86_64-linux-gnu/libstdc++.so.6 /usr/lib/x86_64-linux-gnu/libstdc++.so.6 \
                /usr/lib64/libstdc++.so.6 /lib64/libstdc++.so.6; do
    if [ -f "$plan_d" ] && grep -q GLIBCXX_3.4.29 "$plan_d" 2>/dev/null; then
      plan_cxx=system
      break
    fi
  done
fi
plan_ld=$PLAN_BUNDLE
[ "$plan_libdir" != "$PLAN_BUNDLE" ] && plan_ld=$plan_ld:$plan_libdir
[ "$plan_cxx" = bundled ] && plan_ld=$plan_ld:$PLAN_BUNDLE/fallback
PLAN_BUNDLE_CXX_USED=$plan_cxx
LD_LIBRARY_PATH=$plan_ld${PLAN_BUNDLE_CUDA_LIBS:+:$PLAN_BUNDLE_CUDA_LIBS}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
PLAN_CUDA_PLUGIN=${PLAN_CUDA_PLUGIN:-$PLAN_BUNDLE/libplan-cuda.so}
export LD_LIBRARY_PATH PLAN_CUDA_PLUGIN PLAN_BUNDLE PLAN_BUNDLE_CUDA_LIBS PLAN_BUNDLE_MISSING PLAN_BUNDLE_CXX_USED
unset plan_libdir plan_gz plan_lib plan_cands plan_d plan_sp plan_need plan_found plan_ld plan_cxx
