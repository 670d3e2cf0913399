#!/bin/sh
# Tests of the GPU bundle (make gpu-bundle) on this machine, GPU or not:
# a copy of the folder elsewhere, run with a clean environment, must
#  - run the tool (--help, plan verify on the cpu runner: EQUAL);
#  - say why --runner cuda cannot run (exit 3, the reason) where there is
#    no GPU, or verify on it where there is one;
#  - run tests/gpu/run.sh: without a GPU every GPU check skipped (none
#    passed), exit 0;
#  - with a stand-in plugin on the CPU kernels (tests/cli/fake_runner.c)
#    in place of the real one, run the checks that need only a runner
#    (probe, agreement, sweep, corpus) and pass them: the script's own
#    logic, tested without a GPU.
#
# usage: sh tests/gpu/test_bundle.sh BUNDLE BUILD
# Prints "gpu bundle: N passed, M failed"; exits 1 when anything failed.
bundle=${1:?usage: test_bundle.sh BUNDLE BUILD}
build=${2:?usage: test_bundle.sh BUNDLE BUILD}
root=$(cd "$(dirname "$0")/../.." && pwd)
case $build in /*) ;; *) build=$root/$build ;; esac
tmp=$(mktemp -d "${TMPDIR:-/tmp}/libplan-bundle.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT INT TERM
passed=0
failed=0
ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*"; }
clean() { env -i PATH=/usr/bin:/bin HOME="$tmp" "$@"; }

cp -R "$bundle" "$tmp/b" || exit 2
cd "$tmp" || exit 2
size=$(du -sb "$tmp/b" | cut -f1)
if [ "$size" -lt $((60 * 1024 * 1024)) ]; then ok; else bad "bundle is $size bytes, not under 60 MiB"; fi

clean "$tmp/b/run-plan" --help >"$tmp/out" 2>&1
if [ $? -eq 0 ] && grep -q "usage: plan VERB" "$tmp/out"; then ok; else bad "run-plan --help"; cat "$tmp/out"; fi
# the bundle's own C++ runtime, as on a system with an older one
clean PLAN_BUNDLE_CXX=bundled "$tmp/b/run-plan" --version >"$tmp/out" 2>&1
if [ $? -eq 0 ]; then ok; else bad "run-plan with the bundle's C++ runtime"; cat "$tmp/out"; fi
clean sh -c 'PLAN_BUNDLE=$0; PLAN_BUNDLE_CXX=bundled; . "$0/env.sh"; ldd "$0/libplan-cuda.so"' "$tmp/b" >"$tmp/out" 2>&1
if grep -q "libstdc++.so.6 => $tmp/b/fallback/" "$tmp/out"; then ok; else bad "PLAN_BUNDLE_CXX=bundled does not use fallback/"; cat "$tmp/out"; fi
# the tool alone finds the bundle's libraries through its run path, once
# env.sh has unpacked the gzipped ones (run-plan did)
clean "$tmp/b/plan" --version >"$tmp/out" 2>&1
if [ $? -eq 0 ]; then ok; else bad "plan --version without the launcher"; cat "$tmp/out"; fi
(cd "$tmp/b" && clean ./run-plan verify --runner cpu examples/mlp-megatron.plan.yaml) >"$tmp/out" 2>&1
if [ $? -eq 0 ] && grep -q "EQUAL (exact mode" "$tmp/out"; then ok; else bad "verify on the cpu runner"; cat "$tmp/out"; fi
(cd "$tmp/b" && clean ./run-plan verify --runner cuda examples/mlp-megatron.plan.yaml) >"$tmp/out" 2>&1
rc=$?
gpu=no
if [ $rc -eq 0 ]; then
  gpu=yes
  if grep -q "^runner: cuda" "$tmp/out"; then ok; else bad "verify on the cuda runner names it"; fi
elif [ $rc -eq 3 ] && grep -q "runner 'cuda'" "$tmp/out"; then
  ok
else
  bad "verify --runner cuda: exit $rc, wanted 3 with the reason"
  cat "$tmp/out"
fi

clean sh "$tmp/b/tests/gpu/run.sh" "$tmp/out1" >"$tmp/out" 2>&1
rc=$?
if [ $gpu = no ]; then
  if [ $rc -eq 0 ] && grep -q "^no GPU run: " "$tmp/out1/results.txt" &&
     ! grep -q "^pass " "$tmp/out1/results.txt" &&
     [ "$(grep -c "^skipped " "$tmp/out1/results.txt")" -ge 10 ]; then
    ok
  else
    bad "run.sh without a GPU: exit $rc, wanted 0 with every check skipped"
    cat "$tmp/out1/results.txt"
  fi
else
  if [ -s "$tmp/out1/results.txt" ]; then ok; else bad "run.sh wrote no results"; fi
fi

# nccl_check's one-process-per-rank start, up to the device: the
# launcher's environment, the id file's wait, its size, rank 0's file
# removed when its device fails
bundled() { clean sh -c 'PLAN_BUNDLE=$0; . "$0/env.sh"; exec "$@"' "$tmp/b" "$@"; }
nc=$tmp/b/tests/gpu/nccl_check
expect3() { # NAME TEXT CMD...: exit 3 and TEXT on stdout
  name=$1 text=$2
  shift 2
  bundled "$@" >"$tmp/out" 2>&1
  rc=$?
  if [ $rc -eq 3 ] && grep -qF -e "$text" "$tmp/out"; then ok; else bad "$name: exit $rc"; cat "$tmp/out"; fi
}
if [ $gpu = no ]; then
  expect3 "nccl_check without RANK" "RANK, WORLD_SIZE and LOCAL_RANK must be set" "$nc" --id-file "$tmp/id"
  expect3 "nccl_check, rank 1 waits for the id file" "NCCL id file $tmp/id did not appear within 0.3 s" \
    env RANK=1 WORLD_SIZE=2 LOCAL_RANK=0 "$nc" --id-file "$tmp/id" --timeout 0.3
  echo short >"$tmp/id-short"
  expect3 "nccl_check, a short id file" "shorter than an ncclUniqueId" \
    env RANK=1 WORLD_SIZE=2 LOCAL_RANK=0 "$nc" --id-file "$tmp/id-short" --timeout 1
  head -c 128 /dev/zero >"$tmp/id-ok"
  expect3 "nccl_check, rank 1 reads the id, then its device" "cudaSetDevice(LOCAL_RANK)" \
    env RANK=1 WORLD_SIZE=2 LOCAL_RANK=0 "$nc" --id-file "$tmp/id-ok" --timeout 1
  expect3 "nccl_check, rank 0 without a device" "cannot run here" \
    env RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 "$nc" --id-file "$tmp/id0"
  if ls "$tmp"/id0* >/dev/null 2>&1; then bad "rank 0 left its id file behind"; else ok; fi
  expect3 "nccl_check --virtual without a GPU" "cannot run here: cudaGetDeviceCount" "$nc" --virtual 4
fi

# the script's logic on a stand-in runner
cc -std=c11 -shared -fPIC -DFAKE_WORKS -I"$root/libplan/include" \
  -I"$root/libplan/src" -I"$root/runners" \
  -o "$tmp/fake.so" "$root/tests/cli/fake_runner.c" \
  -Wl,--exclude-libs,ALL "$build/libplan-verify.a" "$build/libplan.a" \
  $(pkg-config --libs yaml-0.1 libxxhash openblas 2>/dev/null || echo -lyaml -lxxhash -lopenblas) -lm ||
  bad "cannot build the stand-in plugin"
clean PLAN_CUDA_PLUGIN="$tmp/fake.so" sh "$tmp/b/tests/gpu/run.sh" "$tmp/out2" >"$tmp/out" 2>&1
for c in probe agreement sweep corpus; do
  if grep -q "^pass $c: " "$tmp/out2/results.txt"; then ok; else bad "run.sh on a stand-in runner: $c did not pass"; fi
done
if grep -q "^summary: " "$tmp/out2/results.txt"; then ok; else bad "run.sh on a stand-in runner: no summary"; cat "$tmp/out2/results.txt"; fi

echo "gpu bundle: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
