#!/bin/sh
# Makes the GPU bundle (docs/gpu.md): a folder that runs on a GPU machine
# where the driver, CUDA, cuBLAS and NCCL are present but nothing can be
# installed.
#
#   BUNDLE/plan, libplan.so.0, libplan-cuda.so   the tool, the library, the
#                                                plugin (run path $ORIGIN)
#   BUNDLE/libplan-comm-mpi.so                   the MPI communicator's
#                                                plugin (the machine's MPI)
#   BUNDLE/lib*.so*                              the non-CUDA libraries they
#                                                link (ldd), beside them; the
#                                                largest gzipped (env.sh
#                                                unpacks them)
#   BUNDLE/fallback/                             the C++ runtime, used only
#                                                where the system's is too
#                                                old
#   BUNDLE/env.sh, BUNDLE/run-plan               finds the CUDA libraries,
#                                                sets LD_LIBRARY_PATH; runs
#                                                the tool
#   BUNDLE/tests/gpu/                            run.sh, nccl_check,
#                                                test_sweep, test_comm_nccl,
#                                                the plan lists
#   BUNDLE/bench/bench_cuda
#   BUNDLE/examples, spec/vectors/valid, tests/corpus/lowered,
#   BUNDLE/tests/dist/run.sh
#
# usage: sh tests/gpu/make_bundle.sh BUILD BUNDLE [KERNEL_TEST]
# BUILD holds the bundle builds (make gpu-bundle links them); KERNEL_TEST,
# the op kernels' agreement test built for the device, goes in as
# tests/gpu/test_cuda_gpu. Fails when the bundle would reach 60 MiB.
set -eu
build=${1:?usage: make_bundle.sh BUILD BUNDLE}
out=${2:?usage: make_bundle.sh BUILD BUNDLE}
root=$(cd "$(dirname "$0")/../.." && pwd)
limit=$((60 * 1024 * 1024))

rm -rf "$out.tmp"
mkdir -p "$out.tmp/tests/gpu" "$out.tmp/bench"
b=$out.tmp

# executables and libraries of ours, without their debug information
put() { # FILE DEST
  strip --strip-debug -o "$2" "$1" 2>/dev/null || cp "$1" "$2"
  chmod 755 "$2"
}
put "$build/gpu-bundle-bin/plan" "$b/plan"
put "$build/libplan.so.0" "$b/libplan.so.0"
put "$build/libplan-cuda.so" "$b/libplan-cuda.so"
# the MPI communicator's plugin: it loads the GPU machine's own Open MPI
# (libmpi.so.40, with its components and mpirun), so none is bundled
put "$build/libplan-comm-mpi.so" "$b/libplan-comm-mpi.so"
put "$build/tests/gpu/nccl_check" "$b/tests/gpu/nccl_check"
put "$build/gpu-bundle-bin/test_sweep" "$b/tests/gpu/test_sweep"
put "$build/bench/bench_cuda" "$b/bench/bench_cuda"
kernel_test=${3:-}
if [ -n "$kernel_test" ] && [ -f "$kernel_test" ]; then
  put "$kernel_test" "$b/tests/gpu/test_cuda_gpu"
fi
# the NCCL communicator's test (tests/cuda/test_comm_nccl.c, --device)
if [ -f "$build/tests/cuda/test_comm_nccl" ]; then
  put "$build/tests/cuda/test_comm_nccl" "$b/tests/gpu/test_comm_nccl"
fi

# the libraries they link, but the C library's own, the GPU machine's
# (CUDA, cuBLAS, NCCL, the driver) and ours
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libpthread\.so|libdl\.so|librt\.so|libresolv\.so|libutil\.so|libcuda\.so|libcudart|libcublas|libnccl|libplan)'
for f in "$b/plan" "$b/libplan.so.0" "$b/libplan-cuda.so" "$b/tests/gpu/"* \
         "$b/bench/bench_cuda"; do
  ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  if printf '%s\n' "$name" | grep -Eq "$skip"; then continue; fi
  cp -L "$path" "$b/$name"
done
# The C++ runtime needs a newer C library than the rest (libstdc++ here
# asks for glibc 2.36, libgcc_s for 2.35; everything else for 2.34): it
# goes to fallback/, off the run path, and env.sh uses it only where the
# system's libstdc++ is older than the bundle needs (GLIBCXX_3.4.29)
mkdir -p "$b/fallback"
for cxx in libstdc++.so.6 libgcc_s.so.1; do
  if [ -f "$b/$cxx" ]; then mv "$b/$cxx" "$b/fallback/"; fi
done
# OpenBLAS and its LAPACK are most of the size: stored gzipped, unpacked
# by env.sh on first use
for big in libopenblas.so.0 liblapack.so.3; do
  if [ -f "$b/$big" ]; then gzip -9 "$b/$big"; fi
done

cp "$root/tests/gpu/env.sh" "$root/tests/gpu/run-plan" "$b/"
chmod 755 "$b/run-plan"
cp "$root/tests/gpu/run.sh" "$b/tests/gpu/"
mkdir -p "$b/spec/vectors" "$b/tests/corpus"
cp -R "$root/examples" "$b/examples"
cp -R "$root/spec/vectors/valid" "$b/spec/vectors/valid"
cp -R "$root/tests/corpus/lowered" "$b/tests/corpus/lowered"
mkdir -p "$b/tests/dist"
cp "$root/tests/dist/run.sh" "$b/tests/dist/"

size=$(du -sb "$b" | cut -f1)
if [ "$size" -ge "$limit" ]; then
  echo "gpu-bundle: $size bytes, over the 60 MiB limit" >&2
  rm -rf "$b"
  exit 1
fi
rm -rf "$out"
mv "$b" "$out"
echo "gpu-bundle: $out ($((size / 1024 / 1024)) MiB; copy it to the GPU machine, run sh $out/tests/gpu/run.sh OUTDIR)"
