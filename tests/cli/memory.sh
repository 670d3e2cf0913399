#!/bin/sh
# Tests of `plan verify`'s memory preflight (docs/verify.md, Memory):
# - a run estimated over --memory-limit is refused at once with exit 3,
#   the figures and the size of the --reduce'd run, and nothing run;
# - --reduce auto reduces under that limit (and runs EQUAL), and runs the
#   full program when it fits;
# - an allocation that fails mid-run (under `ulimit -v`, past a limit
#   that lets the run start) is exit 3 naming the file, not exit 2;
# - a size that is not one is a usage error.
# Every run is bounded by `timeout`.
#
# usage: sh tests/cli/memory.sh PATH/TO/plan   (from the repository root)
# Prints "cli-memory: N passed, M failed" and exits non-zero when anything
# failed.

plan=${1:?usage: memory.sh PATH/TO/plan}
case $plan in /*) ;; *) plan=$(pwd)/$plan ;; esac
. "$(dirname "$0")/../lib.sh"
lib_init cli-memory

big=examples/models/llama3-8b-layer.recipe.plan.yaml
small=examples/mlp-megatron.plan.yaml

# ---- the preflight ----------------------------------------------------------

expect_in 3 "over the limit" 10 verify --memory-limit 100MB "$big"
has "$err" "verifying $big needs about" "over the limit"
has "$err" "GiB, 95.37 MiB available (the limit given)" "over the limit"
has "$err" "; --reduce verifies the same sharding in about" "over the limit"
lacks "$out" "EQUAL" "over the limit: nothing run"
# the estimate is of the run: a binary unit reads as its bytes
expect_in 3 "over a binary limit" 10 verify --memory-limit 1GiB "$big"
has "$err" "1.00 GiB available" "over a binary limit"
# the same under the library's default, for a lowered file
"$plan" lower "$big" >"$tmp/big.lowered.yaml" 2>"$err"
expect_in 3 "a lowered file over the limit" 10 verify --memory-limit 1MB \
  "$tmp/big.lowered.yaml"
has "$err" "; --reduce verifies the same sharding in about" \
  "a lowered file over the limit"

# ---- --reduce auto ----------------------------------------------------------

expect_in 0 "reduce auto, over the limit" 60 verify --reduce auto \
  --memory-limit 1GB "$big"
has "$out" "reduced: " "reduce auto, over the limit"
has "$out" "EQUAL" "reduce auto, over the limit"
expect_in 0 "reduce auto, fits" 60 verify --reduce=auto "$small"
lacks "$out" "reduced: " "reduce auto, fits"
has "$out" "EQUAL" "reduce auto, fits"
expect_in 0 "reduce auto, fits the limit" 60 verify --reduce auto \
  --memory-limit 1GB "$small"
lacks "$out" "reduced: " "reduce auto, fits the limit"

# ---- out of memory mid-run --------------------------------------------------

# the limit lets the run start; the address space does not hold it
f=examples/models/gpt2-small-block.recipe.plan.yaml
(ulimit -v 1000000 && exec timeout 30 "$plan" verify --memory-limit 100TB \
  "$f") >"$out" 2>"$err"
rc=$?
if [ "$rc" -eq 3 ]; then ok; else bad "out of memory mid-run: exit $rc, wanted 3"; fi
has "$err" "out of memory verifying $f: needs about" "out of memory mid-run"

# ---- sizes ------------------------------------------------------------------

for s in 12XB 1.5GB GB 0 -1 1KiBB 99999999999999999999B 1iB; do
  expect_in 2 "--memory-limit $s" 10 verify --memory-limit "$s" "$small"
  has "$err" "--memory-limit is a size" "--memory-limit $s"
done
expect_in 2 "--reduce and --reduce auto" 10 verify --reduce --reduce auto "$small"

lib_report
