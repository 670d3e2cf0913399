#!/bin/sh
# The schedules beyond format 1.0's (looped-bfs, interleaved-zb, zbv,
# dualpipev): `plan schedule --schedule NAME` runs each on a plan's stages;
# the grid it writes (--format yaml) pastes into the plan as an explicit
# schedule, which verifies EQUAL in both modes (looped-bfs and
# interleaved-zb: their stages sit s mod R, as a grid places them); the
# V-placed zbv and dualpipev are refused on one stage per rank. A format
# 1.1 plan names each (pipeline.schedule: NAME): it validates, verifies
# EQUAL in both modes (and reduced), `plan schedule` gives the grid that
# --schedule NAME gives, `plan cost` its bubble; the V kinds send nothing
# between the two stages of one rank. A 1.0 file naming one is a
# positioned version error (exit 2); a stage count that does not fit, a
# positioned pipeline.stages finding (exit 1; verify does not run it).
#
# usage: sh tests/cli/schedules.sh PATH/TO/plan
# Prints "cli-schedules: N passed, M failed"; exits non-zero on a failure.

plan=${1:?usage: schedules.sh PATH/TO/plan}
case $plan in /*) ;; *) plan=$(pwd)/$plan ;; esac
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/tests/lib.sh"
lib_init cli-schedules

base=$root/examples/transformer4-interleaved.plan.yaml # 4 stages on pp=2

for k in looped-bfs interleaved-zb zbv dualpipev; do
  expect 0 "schedule --schedule $k" schedule --schedule $k --microbatches 8 "$base"
  has "$out" "makespan" "schedule --schedule $k"
done

for k in looped-bfs interleaved-zb; do
  expect 0 "schedule --schedule $k --format yaml" schedule --schedule $k \
    --format yaml "$base"
  awk '/^grid:/ { g = 1; print "  grid:"; next }
       g && /^  - / { print "  " $0; next }
       g { g = 0 }' "$out" >"$tmp/$k.grid"
  check "$k: the grid has a row per rank" [ "$(wc -l <"$tmp/$k.grid")" -eq 3 ]
  sed 's/^  schedule: interleaved-1f1b$/  schedule: explicit/' "$base" |
    awk -v gf="$tmp/$k.grid" '{ print }
      /^  schedule: explicit$/ { while ((getline l < gf) > 0) print l }' \
      >"$tmp/$k.plan.yaml"
  expect 0 "validate the $k grid" validate "$tmp/$k.plan.yaml"
  for mode in exact float; do
    expect 0 "verify the $k grid ($mode)" verify --mode $mode "$tmp/$k.plan.yaml"
    has "$out" "EQUAL (" "verify the $k grid ($mode)"
    has "$out" "explicit" "verify the $k grid ($mode)"
  done
done

# one stage per rank: the V schedules need two
one=$root/examples/pipeline-1f1b.plan.yaml
for k in zbv dualpipev; do
  expect 2 "schedule --schedule $k, one stage per rank" schedule --schedule $k "$one"
  has "$err" "two stages per rank" "schedule --schedule $k, one stage per rank"
done

# named in a format 1.1 plan
for k in looped-bfs interleaved-zb zbv dualpipev; do
  sed -e "s/^  schedule: interleaved-1f1b$/  schedule: $k/" \
    -e 's/^libplan: "1.0"$/libplan: "1.1"/' "$base" >"$tmp/named-$k.plan.yaml"
  expect 0 "validate schedule: $k" validate "$tmp/named-$k.plan.yaml"
  for mode in exact float; do
    expect 0 "verify schedule: $k ($mode)" verify --mode $mode \
      "$tmp/named-$k.plan.yaml"
    has "$out" "EQUAL (" "verify schedule: $k ($mode)"
    has "$out" "microbatches, $k," "verify schedule: $k ($mode)"
  done
  expect 0 "schedule of schedule: $k" schedule --format yaml \
    "$tmp/named-$k.plan.yaml"
  grep -A3 '^grid:' "$out" >"$tmp/named-$k.grid"
  expect 0 "schedule --schedule $k (yaml)" schedule --schedule $k \
    --format yaml "$base"
  grep -A3 '^grid:' "$out" >"$tmp/forced-$k.grid"
  check "schedule: $k has a grid" [ -s "$tmp/named-$k.grid" ]
  same "$tmp/named-$k.grid" "$tmp/forced-$k.grid" \
    "schedule: $k = --schedule $k"
  expect 0 "cost of schedule: $k" cost "$tmp/named-$k.plan.yaml"
  has "$out" "4 stages, 4 microbatches, $k:" "cost of schedule: $k"
  has "$out" "bubble" "cost of schedule: $k"
  # written back as 1.1
  cp "$tmp/named-$k.plan.yaml" "$tmp/fmt-$k.plan.yaml"
  sed -i 's/^libplan: "1.1"$/libplan: "1.9"/' "$tmp/fmt-$k.plan.yaml"
  expect 0 "fmt keeps schedule: $k" fmt --in-place "$tmp/fmt-$k.plan.yaml"
  has "$tmp/fmt-$k.plan.yaml" 'libplan: "1.1"' "fmt keeps schedule: $k"
  has "$tmp/fmt-$k.plan.yaml" "schedule: $k" "fmt keeps schedule: $k"
  # in a 1.0 file: a version error at the name, nothing else
  sed "s/^  schedule: interleaved-1f1b$/  schedule: $k/" "$base" \
    >"$tmp/v10-$k.plan.yaml"
  line=$(grep -n "^  schedule: $k$" "$tmp/v10-$k.plan.yaml" | cut -d: -f1)
  expect 2 "schedule: $k in a 1.0 file" validate "$tmp/v10-$k.plan.yaml"
  has "$err" "v10-$k.plan.yaml:$line:13:" "schedule: $k in a 1.0 file"
  has "$err" "schedule: $k is a format 1.1 field" "schedule: $k in a 1.0 file"
done
expect 0 "verify --reduce schedule: zbv" verify --reduce "$tmp/named-zbv.plan.yaml"
has "$out" "EQUAL (" "verify --reduce schedule: zbv"

# the V: stages 1 and 2 share rank 1, so the pipeline sends only across
# ranks (layers.0 -> 1 and layers.2 -> 3), and the report counts 4
for k in zbv dualpipev; do
  ex=$root/examples/transformer4-$k.plan.yaml
  expect 0 "cost of the $k example" cost "$ex"
  has "$out" "layers.0.mlp.res.out" "cost of the $k example: a send"
  lacks "$out" "layers.1.mlp.res.out" "cost of the $k example: no send on rank 1"
  expect 0 "verify the $k example" verify "$ex"
  has "$out" "$k, 4 send/recv" "verify the $k example"
done

# stage counts that do not fit: the pipeline's position
zbh1=$root/examples/transformer4-zb-h1.plan.yaml # 2 stages on pp=2
pline=$(grep -n '^pipeline:$' "$zbh1" | cut -d: -f1)
for k in zbv dualpipev interleaved-zb; do
  sed -e "s/^  schedule: zb-h1$/  schedule: $k/" \
    -e 's/^libplan: "1.0"$/libplan: "1.1"/' "$zbh1" >"$tmp/two-$k.plan.yaml"
  expect 1 "schedule: $k on 2 stages" validate "$tmp/two-$k.plan.yaml"
  has "$out" "two-$k.plan.yaml:$((pline + 1)):3:" "schedule: $k on 2 stages"
  has "$out" "[pipeline.stages]" "schedule: $k on 2 stages"
  expect 1 "verify schedule: $k on 2 stages" verify "$tmp/two-$k.plan.yaml"
  has "$out" "not verified" "verify schedule: $k on 2 stages"
done
sed -e 's/^  microbatches: 4$/  microbatches: 2/' "$tmp/named-dualpipev.plan.yaml" \
  >"$tmp/dpv-m2.plan.yaml"
expect 1 "dualpipev with 2 microbatches" validate "$tmp/dpv-m2.plan.yaml"
has "$out" "at least as many microbatches as stages" "dualpipev with 2 microbatches"
has "$out" "[pipeline.microbatches]" "dualpipev with 2 microbatches"

lib_report
