#!/bin/sh
# Tests of the `plan` tool: every verb, its options, its exit codes (0 ok,
# 1 negative verdict, 2 unreadable input or bad usage), --help, and what bad
# input gets (FILE:LINE:COL: error:, exit 2, nothing written or changed).
#
# usage: sh tests/cli/run.sh PATH/TO/plan
# Prints "cli: N passed, M failed" and exits non-zero when anything failed.

plan=${1:?usage: run.sh PATH/TO/plan}
case $plan in /*) ;; *) plan=$(pwd)/$plan ;; esac
root=$(cd "$(dirname "$0")/../.." && pwd)
ex=$root/examples
. "$root/tests/lib.sh"
lib_init cli

mlp=$ex/mlp-megatron.plan.yaml
bypath=$ex/mlp-by-path.plan.yaml
progfile=$ex/mlp-program.yaml
for f in "$mlp" "$bypath" "$progfile"; do
  [ -r "$f" ] || { echo "cli: missing $f"; exit 2; }
done

# ---- inputs made here ------------------------------------------------------

# A plan with a validation error (an op without a strategy).
cat >"$tmp/findings.yaml" <<'EOF'
libplan: "0.1"
program:
  tensors:
    x: {shape: [8, 16]}
  ops:
    - {name: a, op: relu, in: [x], out: y}
    - {name: b, op: tanh, in: [y], out: z}
mesh:
  axes: [dp=2]
strategies:
  a: {in: [S(0)], out: S(0)}
EOF

# Unreadable inputs, each with the position the error must name.
cat >"$tmp/bad-yaml.yaml" <<'EOF'
libplan: "0.1"
program: {ops: [
EOF
printf 'libplan: "0.1"\nprogram:\n  tensors:\n    x: {shape: [8], colour: red}\n  ops: []\n' >"$tmp/bad-schema.yaml"
printf 'libplan: "0.1"\nprogram:\n  tensors:\n    x: {shape: [8]}\n  ops:\n    - {name: a, op: nope, in: [x], out: y}\n' >"$tmp/bad-op.yaml"
printf 'libplan: "7.0"\nprogram: {ops: []}\n' >"$tmp/bad-version.yaml"

# ---- the tool itself -------------------------------------------------------

expect 2 "no arguments" # usage to stderr
has "$err" "usage:" "no arguments"
expect 0 "--help" --help
has "$out" "usage: plan VERB" "--help"
expect 0 "help VERB" help fmt
has "$out" "usage: plan fmt" "help VERB"
expect 0 "--version" --version
has "$out" "plan (libplan)" "--version"
expect 2 "unknown verb" frobnicate "$mlp"
has "$err" "unknown command 'frobnicate'" "unknown verb"
has "$err" "usage: plan VERB" "unknown verb: far from every verb, the usage"
# did-you-mean: a near miss gets the nearest names, not the whole usage
expect 2 "a misspelt verb" verfy "$mlp"
has "$err" "unknown command 'verfy'; did you mean 'verify'?" "a misspelt verb"
lacks "$err" "usage: plan VERB" "a misspelt verb: no usage dump"
expect 2 "a misspelt flag" search "$ex/mlp-program.yaml" --mesh dp=2 --stratgy dp
has "$err" "unknown option '--stratgy'; did you mean '--strategy'?" "a misspelt flag"
sed 's/shape:/shpae:/' "$ex/mlp-program.yaml" >"$tmp/shpae.yaml"
expect 2 "a misspelt key" validate "$tmp/shpae.yaml"
has "$err" "unknown field 'shpae' in a tensor declaration; did you mean 'shape'?" "a misspelt key"
sed 's/^strategies:/stratagies:/' "$ex/mlp-megatron.plan.yaml" >"$tmp/stratagies.yaml"
expect 2 "a misspelt section" validate "$tmp/stratagies.yaml"
has "$err" "unknown field 'stratagies' in the document; did you mean 'strategies'?" "a misspelt section"
sed 's/op: gelu/op: gleu/' "$ex/mlp-program.yaml" >"$tmp/gleu.yaml"
expect 2 "a misspelt op kind" validate "$tmp/gleu.yaml"
has "$err" "unknown op kind 'gleu'; did you mean 'gelu'?" "a misspelt op kind"
sed 's/^  mlp.act:/  mlp.actt:/' "$ex/mlp-megatron.plan.yaml" >"$tmp/actt.yaml"
expect 1 "a misspelt op name" validate "$tmp/actt.yaml"
has "$out" "the program has no op 'mlp.actt'; did you mean 'mlp.act'? [name.unknown]" "a misspelt op name"

for verb in validate fmt hash show diff upgrade; do
  expect 0 "$verb --help" $verb --help
  has "$out" "usage: plan $verb" "$verb --help"
  expect 0 "$verb -h" $verb -h "$mlp"
  has "$out" "usage:" "$verb -h"
  expect 2 "$verb unknown option" $verb --no-such-option "$mlp"
  has "$err" "unknown option '--no-such-option'" "$verb unknown option"
  # a missing file is unreadable input
  if [ $verb = diff ]; then
    expect 2 "$verb missing file" $verb "$tmp/none.yaml" "$mlp"
  else
    expect 2 "$verb missing file" $verb "$tmp/none.yaml"
  fi
  has "$err" "none.yaml" "$verb missing file"
  # every kind of bad input: FILE:LINE:COL: error:, exit 2
  for spec in bad-yaml.yaml:3:1 bad-schema.yaml:4:21 bad-op.yaml:6:21 bad-version.yaml:1:10; do
    f=${spec%%:*}
    pos=${spec#*:}
    if [ $verb = diff ]; then
      expect 2 "$verb $f" $verb "$mlp" "$tmp/$f"
    else
      expect 2 "$verb $f" $verb "$tmp/$f"
    fi
    has "$err" "$tmp/$f:$pos: error:" "$verb $f"
    if [ -s "$out" ] && [ $verb != validate ]; then bad "$verb $f: wrote to stdout"; else ok; fi
  done
done

# ---- validate -----------------------------------------------------------------

for f in "$ex"/*.yaml; do
  expect 0 "validate $(basename "$f")" validate "$f"
  has "$out" "valid (0 errors" "validate $(basename "$f")"
done
expect 1 "validate findings" validate "$tmp/findings.yaml"
has "$out" "$tmp/findings.yaml:7:7: error: op 'b' (tanh) has no strategy [strategy.missing]" "validate findings"
has "$out" "invalid (1 error" "validate findings"
# the worst outcome of several files decides
expect 1 "validate two files" validate "$mlp" "$tmp/findings.yaml"
expect 2 "validate bad and findings" validate "$tmp/findings.yaml" "$tmp/bad-op.yaml"
has "$out" "invalid" "validate bad and findings" # the readable one was still judged
expect 0 "validate --format json" validate --format json "$mlp"
has "$out" '"schema": "libplan-findings/1"' "validate --format json"
has "$out" '"verdict": "valid"' "validate --format json"
expect 1 "validate --format json findings" validate --format json "$tmp/findings.yaml"
has "$out" '"code": "strategy.missing"' "validate --format json findings"
has "$out" '"line": 7' "validate --format json findings"
expect 2 "validate --format xml" validate --format xml "$mlp"
expect 2 "validate no file" validate
# drift against an edited program
sed 's/op: gelu,   in: \[h\],     out: a}/op: gelu, in: [h], out: a, attrs: {approximate: tanh}}/' \
  "$progfile" >"$tmp/edited.yaml"
if cmp -s "$progfile" "$tmp/edited.yaml"; then bad "could not edit $progfile"; fi
expect 0 "validate --program same" validate --program "$progfile" "$mlp"
expect 1 "validate --program edited" validate --program "$tmp/edited.yaml" "$mlp"
has "$out" "[drift.changed]" "validate --program edited"
has "$out" "mlp.act" "validate --program edited"
has "$out" "op 'mlp.act' changed: attributes; the plan decides for it [drift.changed]" "validate --program edited: what changed"
# drift with old and new values: a kind and a shape
sed 's/op: gelu/op: relu/' "$progfile" >"$tmp/relu.yaml"
expect 1 "validate --program, a kind changed" validate --program "$tmp/relu.yaml" "$mlp"
has "$out" "op 'mlp.act' changed: kind gelu -> relu" "validate --program, a kind changed"
sed 's/\[16, 64\]/[16, 128]/; s/\[64, 16\]/[128, 16]/' "$progfile" >"$tmp/wider.yaml"
expect 1 "validate --program, a shape changed" validate --program "$tmp/wider.yaml" "$mlp"
has "$out" "tensor 'w1' changed: shape [16, 64] -> [16, 128]" "validate --program, a shape changed"
has "$out" "output 'h' shape [8, 64] -> [8, 128]" "validate --program, an op's output shape"
expect 2 "validate --program bad" validate --program "$tmp/bad-op.yaml" "$mlp"
# a by-path plan whose program changed: a warning and the drift report
mkdir "$tmp/repo"
cp "$bypath" "$tmp/repo/plan.yaml"
cp "$tmp/edited.yaml" "$tmp/repo/mlp-program.yaml"
expect 1 "validate changed program" validate "$tmp/repo/plan.yaml"
has "$out" "[program.changed]" "validate changed program"
has "$out" "[drift.changed]" "validate changed program"

# ---- fmt ------------------------------------------------------------------------

expect 0 "fmt" fmt "$mlp"
cp "$out" "$tmp/canon.yaml"
has "$tmp/canon.yaml" 'libplan: "1.0"' "fmt keeps the version"
lacks "$tmp/canon.yaml" "#" "fmt drops comments"
expect 0 "fmt --check canonical" fmt --check "$tmp/canon.yaml"
expect 1 "fmt --check not canonical" fmt --check "$mlp"
has "$out" "not in canonical layout" "fmt --check not canonical"
expect 0 "fmt of fmt" fmt "$tmp/canon.yaml"
same "$out" "$tmp/canon.yaml" "fmt is idempotent"
# -o writes what stdout gets
expect 0 "fmt -o" fmt -o "$tmp/o.yaml" "$mlp"
same "$tmp/o.yaml" "$tmp/canon.yaml" "fmt -o"
if [ -s "$out" ]; then bad "fmt -o wrote to stdout"; else ok; fi
# --in-place
cp "$mlp" "$tmp/inplace.yaml"
expect 0 "fmt --in-place" fmt --in-place "$tmp/inplace.yaml"
same "$tmp/inplace.yaml" "$tmp/canon.yaml" "fmt --in-place"
# the same hashes before and after
run hash --part all "$mlp"; cp "$out" "$tmp/h1"
run hash --part all "$tmp/canon.yaml"; cp "$out" "$tmp/h2"
same "$tmp/h1" "$tmp/h2" "fmt keeps hashes"
# every example: fmt output is canonical and keeps the hashes (written
# beside a copy of it, so that a program by path resolves)
mkdir "$tmp/ex"
cp "$ex"/*.yaml "$tmp/ex/"
for f in "$tmp"/ex/*.yaml; do
  b=$(basename "$f")
  expect 0 "fmt -o $b" fmt -o "$tmp/ex/fmt-$b" "$f"
  expect 0 "fmt --check of fmt $b" fmt --check "$tmp/ex/fmt-$b"
  run hash --part all "$f"; cp "$out" "$tmp/h1"
  run hash --part all "$tmp/ex/fmt-$b"; cp "$out" "$tmp/h2"
  same "$tmp/h1" "$tmp/h2" "fmt keeps the hashes of $b"
done
# --self-contained: the program inline, the same hashes, no other file needed
expect 0 "fmt --self-contained" fmt --self-contained "$bypath"
cp "$out" "$tmp/sc.yaml"
lacks "$tmp/sc.yaml" "path:" "fmt --self-contained"
has "$tmp/sc.yaml" "ops:" "fmt --self-contained"
run hash --part all "$bypath"; cp "$out" "$tmp/h1"
run hash --part all "$tmp/sc.yaml"; cp "$out" "$tmp/h2"
same "$tmp/h1" "$tmp/h2" "fmt --self-contained keeps hashes"
expect 0 "fmt of by-path" fmt "$bypath"
has "$out" "path: mlp-program.yaml" "fmt of by-path keeps the path"
has "$out" "signatures:" "fmt of by-path records signatures"
# usage errors
expect 2 "fmt -o and --check" fmt -o "$tmp/x.yaml" --check "$mlp"
absent "$tmp/x.yaml" "fmt -o and --check"
expect 2 "fmt -o and --in-place" fmt -o "$tmp/x.yaml" --in-place "$mlp"
expect 2 "fmt two files" fmt "$mlp" "$bypath"
expect 2 "fmt no file" fmt
# bad input: nothing written, nothing changed
for f in bad-yaml.yaml bad-schema.yaml bad-op.yaml bad-version.yaml; do
  expect 2 "fmt -o from $f" fmt -o "$tmp/never-$f" "$tmp/$f"
  absent "$tmp/never-$f" "fmt -o from $f"
  cp "$tmp/$f" "$tmp/keep-$f"
  expect 2 "fmt --in-place $f" fmt --in-place "$tmp/keep-$f"
  same "$tmp/keep-$f" "$tmp/$f" "fmt --in-place $f leaves it"
done
# a failed write leaves no file either
expect 2 "fmt -o into a missing folder" fmt -o "$tmp/no/such/dir/x.yaml" "$mlp"
has "$err" "error:" "fmt -o into a missing folder"
expect 0 "fmt -o over a file" fmt -o "$tmp/o.yaml" "$bypath"
has "$tmp/o.yaml" "path: mlp-program.yaml" "fmt -o over a file"
# no temporary files left behind
leftovers=$(find "$tmp" -name '*.tmp.*')
if [ -n "$leftovers" ]; then bad "temporary files left: $leftovers"; else ok; fi

# ---- upgrade --------------------------------------------------------------------

# hash_line FILE PART SIDE: from `plan upgrade`'s report in FILE, the PART
# hash before (SIDE 1) or after (SIDE 2) the arrow.
hash_line() {
  sed -n "s/^  $2 *\(xxh3:[0-9a-f]*\) -> \(xxh3:[0-9a-f]*\)\$/\\$3/p" "$1"
}
# same_content OLD NEW NAME: NEW is OLD with the version line set to 1.0 and
# the x-upgraded-from record added after it, and nothing else changed.
same_content() {
  sed 's/^libplan: "0\.1"/libplan: "1.0"/' "$1" >"$tmp/want-content"
  sed '/^x-upgraded-from:/,/^[^ ]/{/^x-upgraded-from:/d;/^  /d;}' "$2" >"$tmp/got-content"
  same "$tmp/want-content" "$tmp/got-content" "$3"
}
mkdir "$tmp/up"
# 0.1 sources: the example made 0.1 again (the version line set back and
# the record taken out), and the 0.1 conformance vectors of a by-path plan
mlp01=$tmp/up/mlp01.yaml
sed -e 's/^libplan: "1\.0"/libplan: "0.1"/' \
  -e '/^x-upgraded-from:/,/^[^ ]/{/^x-upgraded-from:/d;/^  /d;}' "$mlp" >"$mlp01"
vec=$root/spec/vectors/valid
bypath01=$vec/plan-bypath.yaml
prog01=$vec/program-mlp.yaml
cp "$mlp01" "$tmp/up/mlp.yaml"
run hash --part all "$mlp01"; cp "$out" "$tmp/up/old.hashes"
# the example records the hashes of its 0.1 form
for part in plan program mesh provenance; do
  has "$mlp" "  $part: \"$(sed -n "s/^$part *//p" "$tmp/up/old.hashes")\"" "the example records its 0.1 $part hash"
done
# to standard output: the file, with the report on stderr
expect 0 "upgrade" upgrade "$tmp/up/mlp.yaml"
cp "$out" "$tmp/up/stdout.yaml"
cp "$err" "$tmp/up/report"
has "$tmp/up/stdout.yaml" 'libplan: "1.0"' "upgrade"
has "$tmp/up/stdout.yaml" 'x-upgraded-from:' "upgrade records the step"
has "$tmp/up/stdout.yaml" '  libplan: "0.1"' "upgrade records the old version"
has "$tmp/up/stdout.yaml" "# An MLP with Megatron" "upgrade keeps comments"
same_content "$mlp01" "$tmp/up/stdout.yaml" "upgrade changes only the version"
has "$tmp/up/report" "format 0.1 -> 1.0" "upgrade report"
same "$tmp/up/mlp.yaml" "$mlp01" "upgrade to stdout leaves the file"
# the hashes printed: before, those of the file; after, those of the result
run hash --part all "$tmp/up/stdout.yaml"; cp "$out" "$tmp/up/new.hashes"
for part in plan program mesh provenance; do
  old=$(sed -n "s/^$part *//p" "$tmp/up/old.hashes")
  new=$(sed -n "s/^$part *//p" "$tmp/up/new.hashes")
  if [ -n "$old" ] && [ "$(hash_line "$tmp/up/report" $part 1)" = "$old" ]; then ok; else bad "upgrade prints the old $part hash"; fi
  if [ -n "$new" ] && [ "$(hash_line "$tmp/up/report" $part 2)" = "$new" ]; then ok; else bad "upgrade prints the new $part hash (plan hash of the result)"; fi
  if [ "$old" != "$new" ]; then ok; else bad "upgrade: the $part hash did not change"; fi
  has "$tmp/up/stdout.yaml" "  $part: \"$old\"" "upgrade records the old $part hash"
done
# the result: valid, no version note, the same content, the same verdict
expect 0 "validate the upgraded plan" validate "$tmp/up/stdout.yaml"
has "$out" "valid (0 errors, 0 warnings)" "validate the upgraded plan"
lacks "$out" "version.old" "the upgraded plan is current"
expect 0 "validate a 0.1 plan" validate "$mlp01"
has "$out" "$mlp01:7:10: note:" "validate a 0.1 plan notes its version"
has "$out" "[version.old]" "validate a 0.1 plan notes its version"
expect 0 "diff old and upgraded" diff "$mlp01" "$tmp/up/stdout.yaml"
expect 0 "verify old" verify "$mlp01"
sed 's/^[^:]*: //' "$out" >"$tmp/up/verdict.old"
expect 0 "verify upgraded" verify "$tmp/up/stdout.yaml"
sed 's/^[^:]*: //' "$out" >"$tmp/up/verdict.new"
same "$tmp/up/verdict.old" "$tmp/up/verdict.new" "upgrade keeps the verify verdict"
# fmt keeps the version (layout only): a 0.1 file stays 0.1, with its hashes
expect 0 "fmt of a 0.1 file" fmt -o "$tmp/up/fmt01.yaml" "$mlp01"
has "$tmp/up/fmt01.yaml" 'libplan: "0.1"' "fmt keeps 0.1"
run hash --part all "$tmp/up/fmt01.yaml"
same "$out" "$tmp/up/old.hashes" "fmt of a 0.1 file keeps its hashes"
# fmt of an upgraded file keeps 1.0, and the record
expect 0 "fmt of upgraded" fmt "$tmp/up/stdout.yaml"
has "$out" 'libplan: "1.0"' "fmt keeps 1.0"
has "$out" 'x-upgraded-from:' "fmt keeps the record"
# -o: the same file; the report on stdout
expect 0 "upgrade -o" upgrade -o "$tmp/up/o.yaml" "$tmp/up/mlp.yaml"
same "$tmp/up/o.yaml" "$tmp/up/stdout.yaml" "upgrade -o"
has "$out" "written to $tmp/up/o.yaml" "upgrade -o report"
if [ -s "$err" ]; then bad "upgrade -o wrote to stderr"; else ok; fi
# --in-place, then again: already current, nothing written
expect 0 "upgrade --in-place" upgrade --in-place "$tmp/up/mlp.yaml"
same "$tmp/up/mlp.yaml" "$tmp/up/stdout.yaml" "upgrade --in-place"
cp "$tmp/up/mlp.yaml" "$tmp/up/before-again.yaml"
expect 0 "upgrade again" upgrade --in-place "$tmp/up/mlp.yaml"
has "$out" "already format 1.0" "upgrade again"
same "$tmp/up/mlp.yaml" "$tmp/up/before-again.yaml" "upgrade again leaves the file"
expect 0 "upgrade again -o" upgrade -o "$tmp/up/never.yaml" "$tmp/up/mlp.yaml"
absent "$tmp/up/never.yaml" "upgrade again -o writes nothing"
expect 0 "upgrade again to stdout" upgrade "$tmp/up/mlp.yaml"
if [ -s "$out" ]; then bad "upgrade of a current file wrote to stdout"; else ok; fi
has "$err" "already format 1.0" "upgrade again to stdout"
# a newer major: a positioned error, exit 2, nothing written or changed
sed 's/^libplan: "0\.1"/libplan: "2.0"/' "$mlp01" >"$tmp/up/newer.yaml"
cp "$tmp/up/newer.yaml" "$tmp/up/newer-keep.yaml"
expect 2 "upgrade a newer major" upgrade --in-place "$tmp/up/newer.yaml"
has "$err" "$tmp/up/newer.yaml:7:10: error: format version 2.0" "upgrade a newer major"
same "$tmp/up/newer.yaml" "$tmp/up/newer-keep.yaml" "upgrade a newer major leaves it"
expect 2 "upgrade -o a newer major" upgrade -o "$tmp/up/never.yaml" "$tmp/up/newer.yaml"
absent "$tmp/up/never.yaml" "upgrade -o a newer major"
if [ -s "$out" ]; then bad "upgrade of a newer major wrote to stdout"; else ok; fi
expect 2 "upgrade -o and --in-place" upgrade -o "$tmp/up/never.yaml" --in-place "$mlp01"
absent "$tmp/up/never.yaml" "upgrade -o and --in-place"
expect 2 "upgrade two files" upgrade "$mlp01" "$bypath01"
# a file already holding a record cannot take another
sed 's/^libplan: "0\.1"/libplan: "0.1"\nx-upgraded-from: {libplan: "0.0"}/' "$mlp01" >"$tmp/up/twice.yaml"
expect 2 "upgrade a file with a record" upgrade "$tmp/up/twice.yaml"
has "$err" "$tmp/up/twice.yaml:8:1: error:" "upgrade a file with a record"
# a file laid out otherwise (flow style) is written in canonical layout
printf '{libplan: "0.1", program: {tensors: {x: {shape: [4]}}, ops: [{name: a, op: relu, in: x, out: y}]}}\n' >"$tmp/up/flow.yaml"
expect 0 "upgrade a flow-style file" upgrade -o "$tmp/up/flow-up.yaml" "$tmp/up/flow.yaml"
has "$out" "canonical layout" "upgrade a flow-style file"
expect 0 "fmt --check the upgraded flow file" fmt --check "$tmp/up/flow-up.yaml"
expect 0 "diff flow and upgraded" diff "$tmp/up/flow.yaml" "$tmp/up/flow-up.yaml"
# a program file
expect 0 "upgrade a program file" upgrade -o "$tmp/up/prog.yaml" "$prog01"
has "$tmp/up/prog.yaml" 'libplan: "1.0"' "upgrade a program file"
same_content "$prog01" "$tmp/up/prog.yaml" "upgrade a program file changes only the version"
# a plan whose program is a path: the plan is upgraded, the program file is
# left as it is (its hash, which the plan records, stays)
mkdir "$tmp/up/repo" "$tmp/up/elsewhere"
cp "$bypath01" "$tmp/up/repo/plan.yaml"
cp "$prog01" "$tmp/up/repo/program-mlp.yaml"
expect 0 "upgrade a by-path plan" upgrade --in-place "$tmp/up/repo/plan.yaml"
has "$out" "left as it is" "upgrade a by-path plan"
same "$tmp/up/repo/program-mlp.yaml" "$prog01" "upgrade a by-path plan leaves the program"
if [ "$(hash_line "$out" program 1)" = "$(hash_line "$out" program 2)" ]; then ok; else bad "upgrade a by-path plan: the program hash changed"; fi
expect 0 "validate the upgraded by-path plan" validate "$tmp/up/repo/plan.yaml"
has "$out" "valid (0 errors, 0 warnings)" "validate the upgraded by-path plan"
expect 0 "diff by-path old and upgraded" diff "$bypath01" "$tmp/up/repo/plan.yaml"
expect 2 "upgrade a by-path plan into another folder" upgrade -o "$tmp/up/elsewhere/plan.yaml" "$bypath01"
has "$err" "relative to this file's folder" "upgrade a by-path plan into another folder"
absent "$tmp/up/elsewhere/plan.yaml" "upgrade a by-path plan into another folder"
# the program file upgraded first, then the plan: the plan's recorded
# program hash is brought along, the old hashes reported are those from
# before both upgrades, and the pair hashes as the upgraded inline plan
mkdir "$tmp/up/pair"
cp "$bypath01" "$tmp/up/pair/plan.yaml"
cp "$prog01" "$tmp/up/pair/program-mlp.yaml"
cp "$vec/plan-base.yaml" "$tmp/up/pair/inline.yaml"
run hash "$tmp/up/pair/plan.yaml"; cp "$out" "$tmp/up/pair.old"
expect 0 "upgrade the program of a pair" upgrade --in-place "$tmp/up/pair/program-mlp.yaml"
expect 0 "upgrade the plan of a pair" upgrade --in-place "$tmp/up/pair/plan.yaml"
has "$out" "now records its new hash" "upgrade the plan of a pair"
if [ "$(hash_line "$out" plan 1)" = "$(cat "$tmp/up/pair.old")" ]; then ok; else bad "upgrade the plan of a pair: old plan hash is not the archived one"; fi
run hash --part program "$tmp/up/pair/program-mlp.yaml"
has "$tmp/up/pair/plan.yaml" "hash: \"$(cat "$out")\"" "upgrade the plan of a pair re-records the program hash"
expect 0 "validate the upgraded pair" validate "$tmp/up/pair/plan.yaml"
has "$out" "valid (0 errors, 0 warnings)" "validate the upgraded pair"
run hash "$tmp/up/pair/plan.yaml"; cp "$out" "$tmp/up/pair.hash"
expect 0 "upgrade the inline plan of a pair" upgrade --in-place "$tmp/up/pair/inline.yaml"
run hash "$tmp/up/pair/inline.yaml"
same "$tmp/up/pair.hash" "$out" "an upgraded pair hashes as the upgraded inline plan"
# a lowered program is not upgraded here
expect 0 "lower for upgrade" lower -o "$tmp/up/low.yaml" "$mlp01"
expect 2 "upgrade a lowered program" upgrade "$tmp/up/low.yaml"
has "$err" "lowered program" "upgrade a lowered program"
# every 0.1 conformance vector: upgraded, it means the same (diff) and
# validates without the version note; the examples are already 1.0 or
# newer
mkdir "$tmp/up/vec"
cp "$vec"/*.yaml "$tmp/up/vec/"
n=0
for f in "$tmp/up/vec"/*.yaml; do
  b=$(basename "$f")
  grep -q -E '^libplan: "?0\.1"?$' "$f" || continue
  n=$((n + 1))
  expect 0 "upgrade vector $b" upgrade -o "$tmp/up/vec/up-$b" "$f"
  expect 0 "validate upgraded vector $b" validate "$tmp/up/vec/up-$b"
  lacks "$out" "[version.old]" "validate upgraded vector $b"
  expect 0 "diff upgraded vector $b" diff "$f" "$tmp/up/vec/up-$b"
done
if [ $n -ge 40 ]; then ok; else bad "only $n 0.1 vectors upgraded"; fi
for f in "$ex"/*.yaml; do
  v=$(sed -n 's/^libplan: "\(.*\)"$/\1/p' "$f" | head -n 1)
  expect 0 "upgrade $(basename "$f") (already $v)" upgrade "$f"
  has "$err" "already format $v" "upgrade $(basename "$f") (already $v)"
done
# format 1.1 is current too: nothing to do, the file left as it is
cp "$vec/v11-hetero-torus.yaml" "$tmp/up/v11.yaml"
cp "$tmp/up/v11.yaml" "$tmp/up/v11-keep.yaml"
expect 0 "upgrade a 1.1 file" upgrade --in-place "$tmp/up/v11.yaml"
has "$out" "already format 1.1" "upgrade a 1.1 file"
same "$tmp/up/v11.yaml" "$tmp/up/v11-keep.yaml" "upgrade a 1.1 file leaves it"
# fmt writes a 1.1 file of 1.0 content as 1.0, with the same hashes
expect 0 "fmt a 1.1 file of 1.0 content" fmt "$vec/v11-plain.yaml"
has "$out" 'libplan: "1.0"' "fmt a 1.1 file of 1.0 content"
cp "$out" "$tmp/up/v11-plain-fmt.yaml"
run hash --part all "$vec/v11-plain.yaml"; cp "$out" "$tmp/up/v11-plain.hashes"
run hash --part all "$tmp/up/v11-plain-fmt.yaml"
same "$out" "$tmp/up/v11-plain.hashes" "fmt of 1.0 content keeps its hashes"
leftovers=$(find "$tmp" -name '*.tmp.*')
if [ -n "$leftovers" ]; then bad "upgrade left temporary files: $leftovers"; else ok; fi

# ---- hash -----------------------------------------------------------------------

expect 0 "hash" hash "$mlp"
if grep -E -x 'xxh3:[0-9a-f]{32}' "$out" >/dev/null && [ "$(wc -l <"$out")" -eq 1 ]; then ok; else bad "hash prints one xxh3:<32 hex>"; fi
cp "$out" "$tmp/plan-hash"
expect 0 "hash --part plan" hash --part plan "$mlp"
same "$out" "$tmp/plan-hash" "hash defaults to the plan part"
expect 0 "hash by path" hash "$bypath"
same "$out" "$tmp/plan-hash" "a plan hashes alike inline and by path"
expect 0 "hash --part all" hash --part all "$mlp"
for part in plan program mesh provenance; do
  if grep -E "^$part +xxh3:[0-9a-f]{32}\$" "$out" >/dev/null; then ok; else bad "hash --part all: no $part line"; fi
done
expect 0 "hash --part program" hash --part program "$mlp"
cp "$out" "$tmp/prog-hash"
expect 0 "hash of a program file" hash "$progfile"
same "$out" "$tmp/prog-hash" "a program hashes alike standalone and inline"
expect 0 "hash --part all of a program file" hash --part all "$progfile"
has "$out" "program" "hash --part all of a program file"
lacks "$out" "mesh" "hash --part all of a program file"
expect 2 "hash --part mesh of a program file" hash --part mesh "$progfile"
has "$err" "error:" "hash --part mesh of a program file"
expect 2 "hash --part provenance without one" hash --part provenance "$tmp/findings.yaml"
expect 2 "hash --part bogus" hash --part bogus "$mlp"
expect 2 "hash two files" hash "$mlp" "$bypath"
expect 2 "hash no file" hash
expect 0 "hash --canonical" hash --canonical --part mesh "$mlp"
has "$out" '{"libplan":"1.0","mesh":{"axes":["dp=2","tp=2"]}}' "hash --canonical"
expect 0 "hash --canonical --part all" hash --canonical --part all "$mlp"
if [ "$(grep -c '^{"libplan":' "$out")" -eq 4 ]; then ok; else bad "hash --canonical --part all: 4 encodings"; fi
# the encoding printed is what is hashed: a changed placement changes it
sed 's/w1: RS(1)/w1: RR/' "$mlp" >"$tmp/changed.yaml"
run hash "$tmp/changed.yaml"
if cmp -s "$out" "$tmp/plan-hash"; then bad "a changed placement keeps the plan hash"; else ok; fi
run hash --part program "$tmp/changed.yaml"
same "$out" "$tmp/prog-hash" "a changed placement keeps the program hash"

# ---- show -----------------------------------------------------------------------

for f in "$ex"/*.yaml; do
  expect 0 "show $(basename "$f")" show "$f"
done
expect 0 "show mlp" show "$mlp"
for word in mlp.fc1 mlp.act mlp.fc2 "S(0)P(sum)" "dp=2" xxh3:; do
  has "$out" "$word" "show mlp"
done
expect 2 "show two files" show "$mlp" "$bypath"
expect 2 "show no file" show
expect 0 "show --cost" show --cost "$mlp"
has "$out" "modeled  collective (1)" "show --cost lists the collectives"
has "$out" "all_reduce     tp   y S(0)P(sum) -> S(0)R (output)" "show --cost: the output's all-reduce"
has "$out" "modeled on h100-sxm" "show --cost: the step and the profile"
expect 0 "show --hardware a100" show --hardware a100 "$mlp"
has "$out" "modeled on a100-80gb" "show --hardware"
expect 2 "show --cost without a mesh" show --cost "$ex/mlp-program.yaml"
has "$err" "needs a plan with a mesh" "show --cost without a mesh"
expect 2 "show --hardware unknown" show --hardware tpu9 "$mlp"
# the sharding picture: which rank holds which block, written atomically
expect 0 "show --svg" show --svg "$tmp/w1.svg" --tensor w1 "$mlp"
has "$tmp/w1.svg" 'data-rank="3" data-block="[0:16, 32:64]"' "show --svg: rank 3's block of w1"
has "$tmp/w1.svg" "w1 [16, 64] f32 placed RS(1) on [dp=2, tp=2]" "show --svg: the title"
expect 0 "show --svg an output" show --svg "$tmp/y.svg" --tensor y "$mlp"
has "$tmp/y.svg" "summed over 'tp'" "show --svg: a partial output is hatched"
expect 2 "show --svg unknown tensor" show --svg "$tmp/none.svg" --tensor W1 "$mlp"
has "$err" "did you mean 'w1'" "show --svg unknown tensor"
absent "$tmp/none.svg" "show --svg unknown tensor writes nothing"
expect 2 "show --svg without --tensor" show --svg "$tmp/none.svg" "$mlp"
expect 2 "show --svg with --cost" show --cost --svg "$tmp/none.svg" --tensor w1 "$mlp"
expect 2 "show --svg without a mesh" show --svg "$tmp/none.svg" --tensor x "$ex/mlp-program.yaml"
has "$err" "needs a plan with a mesh" "show --svg without a mesh"
absent "$tmp/none.svg" "show --svg on bad input writes nothing"

# ---- diff -----------------------------------------------------------------------

expect 0 "diff same" diff "$mlp" "$mlp"
has "$out" "no differences" "diff same"
expect 0 "diff inline vs by path" diff "$mlp" "$bypath"
expect 0 "diff vs canonical" diff "$mlp" "$tmp/canon.yaml"
expect 1 "diff changed placement" diff "$mlp" "$tmp/changed.yaml"
has "$out" "placement" "diff changed placement"
has "$out" "w1" "diff changed placement"
# a diff names the region
expect 1 "diff regions" diff "$mlp" "$ex/mlp-manual.plan.yaml"
has "$out" "region 'row-parallel-by-hand' added (manual)" "diff regions"
has "$out" "region 'act-by-hand' removed" "diff regions"
lacks "$out" "regions settings differ" "diff regions"
sed 's/ops: \[mlp.act\]}/ops: [mlp.act, mlp.fc1]}/' "$mlp" >"$tmp/region2.yaml"
expect 1 "diff a changed region" diff "$mlp" "$tmp/region2.yaml"
has "$out" "region 'act-by-hand' changed: ops [mlp.act] -> [mlp.act, mlp.fc1]" "diff a changed region"
expect 1 "diff --format json" diff --format json "$mlp" "$tmp/changed.yaml"
has "$out" '"code": "diff.placement"' "diff --format json"
has "$out" '"verdict": "different"' "diff --format json"
expect 0 "diff --format json same" diff --format json "$mlp" "$mlp"
has "$out" '"verdict": "same"' "diff --format json same"
expect 1 "diff changed program" diff "$mlp" "$tmp/findings.yaml"
expect 2 "diff one file" diff "$mlp"
expect 2 "diff three files" diff "$mlp" "$mlp" "$mlp"
expect 2 "diff --format xml" diff --format xml "$mlp" "$mlp"

# ---- verify -----------------------------------------------------------------
expect 0 "verify exact" verify "$mlp"
has "$out" "EQUAL (exact mode" "verify exact"
has "$out" "1 all_reduce" "verify exact"
expect 0 "verify float" verify --mode float --seed 7 "$mlp"
has "$out" "EQUAL (float mode, seed 7" "verify float"
# the vocab-parallel loss: the logits split over the classes into the loss
# and its gradient, their all-reduces counted in the verdict; reduced too
vp=$ex/lm-vocab-parallel.plan.yaml
expect 0 "verify vocab-parallel" verify "$vp"
has "$out" "EQUAL (exact mode, seed 0, 4 ranks; 9 all_reduce, 5 all_reduce inside the vocab-parallel loss)" "verify vocab-parallel"
expect 0 "verify vocab-parallel float" verify --mode float --seed 3 "$vp"
has "$out" "5 all_reduce inside the vocab-parallel loss" "verify vocab-parallel float"
expect 0 "verify vocab-parallel --reduce" verify --reduce "$vp"
has "$out" "EQUAL (" "verify vocab-parallel --reduce"
# the loss is whole along the class axis: a strategy that says P(sum)
# there breaks the rule, named at its line
sed 's/loss:    {in: \[S(0)S(2), S(0)R\], out: P(sum)R}/loss:    {in: [S(0)S(2), S(0)R], out: P(sum)P(sum)}/' "$vp" >"$tmp/vp-bad.yaml"
expect 1 "vocab-parallel loss partial over the classes" validate "$tmp/vp-bad.yaml"
has "$out" "vp-bad.yaml:54:3: error: strategy of op 'loss' (cross_entropy) breaks its sharding rule: cross_entropy: output 0 should be P(sum)R" "vocab-parallel loss partial over the classes: its line"
# a pipelined training step whose loss is a mean of squares: the seed's
# gradient, R over the microbatches, is sliced per microbatch inside the
# last stage (not after the schedule), and the step verifies
cat >"$tmp/pipe-mean.yaml" <<'PLAN'
libplan: "1.0"
program:
  name: mean-loss
  tensors:
    x: {shape: [16, 8]}
    y: {shape: [16, 4]}
    w0: {shape: [8, 8], role: param}
    w1: {shape: [8, 4], role: param}
  ops:
    - {name: fc0, op: matmul, in: [x, w0], out: h}
    - {name: act, op: relu, in: [h], out: a}
    - {name: fc1, op: matmul, in: [a, w1], out: o}
    - {name: sub, op: sub, in: [o, y], out: d}
    - {name: sq, op: mul, in: [d, d], out: s}
    - {name: mean, op: reduce_mean, in: [s], out: loss, attrs: {dims: [0, 1]}}
  outputs: [loss]
  loss: loss
mesh:
  axes: [pp=2]
strategies:
  "*": {in: [R, R], out: R}
  act: {in: [R], out: R}
  mean: {in: [R], out: R}
pipeline:
  axis: pp
  microbatches: 4
  schedule: 1f1b
  stages:
    - {ops: [fc0, act]}
    - {ops: [fc1, sub, sq, mean]}
training:
  optimizer: {kind: sgd, lr: 0.1}
PLAN
expect 0 "verify a pipelined mean-of-squares loss" verify "$tmp/pipe-mean.yaml"
has "$out" "EQUAL (exact mode, seed 0, 2 ranks, 2 stages, 4 microbatches, 1f1b" "verify a pipelined mean-of-squares loss"
expect 0 "verify a pipelined mean-of-squares loss, float" verify --mode float "$tmp/pipe-mean.yaml"
has "$out" "EQUAL (float mode" "verify a pipelined mean-of-squares loss, float"
expect 2 "verify --mode bogus" verify --mode bogus "$mlp"
expect 0 "verify --dtype bf16" verify --dtype bf16 "$mlp"
has "$out" "EQUAL (float mode" "verify --dtype implies float mode"
expect 2 "verify --dtype i64" verify --dtype i64 "$mlp"
has "$err" "f64, f32, bf16 or f16" "verify --dtype i64 names the choices"
expect 2 "verify --mode exact --dtype bf16" verify --mode exact --dtype bf16 "$mlp"
has "$err" "needs float mode" "verify exact with --dtype"
expect 0 "verify --tol" verify --mode float --tol 'h*=1e-3,1e-4' --rtol 1e-6 --atol 1e-5 "$mlp"
has "$out" "EQUAL (float mode" "verify --tol"
expect 2 "verify --tol without atol" verify --mode float --tol 'y=1e-3' "$mlp"
has "$err" "TENSOR=RTOL,ATOL" "verify --tol names its form"
expect 2 "verify --rtol -1" verify --mode float --rtol -1 "$mlp"
expect 2 "verify --tol in exact mode" verify --tol 'y=1,1' "$mlp"
has "$err" "need float mode" "verify --tol in exact mode"
# the CUDA runner is a plugin: found beside the tool or by PLAN_CUDA_PLUGIN
PLAN_CUDA_PLUGIN=$tmp/none/libplan-cuda.so
export PLAN_CUDA_PLUGIN
expect 3 "verify --runner cuda, no plugin" verify --runner cuda "$mlp"
has "$err" "runner 'cuda': plugin $tmp/none/libplan-cuda.so (from PLAN_CUDA_PLUGIN) not found" "verify --runner cuda, no plugin"
has "$err" "make cuda" "verify --runner cuda says how to build it"
unset PLAN_CUDA_PLUGIN
expect 3 "verify --runner cuda" verify --runner cuda "$mlp"
has "$err" "runner 'cuda'" "verify --runner cuda says why"
expect 2 "verify --runner tpu" verify --runner tpu "$mlp"
has "$err" "--runner is cpu or cuda" "verify --runner tpu"
expect 0 "verify --runner cpu --report json" verify --runner cpu --report json "$mlp"
has "$out" '"runner": "cpu"' "verify --report json names the runner"
lacks "$out" "runner: " "the cpu runner goes without a text line"
expect 0 "verify --report yaml names the runner" verify --report yaml "$mlp"
has "$out" 'runner: "cpu"' "verify --report yaml names the runner"
# stand-in plugins (tests/cli/fake_runner.c) against this build's library
build=$(dirname "$plan")
fake() { # VARIANT: builds $tmp/fake-VARIANT.so
  cc -std=c11 -shared -fPIC -D"FAKE_$1" -I"$root/libplan/include" \
    -I"$root/libplan/src" -I"$root/runners" \
    -o "$tmp/fake-$1.so" "$root/tests/cli/fake_runner.c" \
    -Wl,--exclude-libs,ALL "$build/libplan-verify.a" "$build/libplan.a" \
    $(pkg-config --libs yaml-0.1 libxxhash openblas 2>/dev/null || echo -lyaml -lxxhash -lopenblas) -lm
}
if command -v cc >/dev/null 2>&1 && [ -f "$build/libplan.a" ]; then
  for v in WORKS REFUSES OLD_API NO_ENTRY OTHER_ABI FAILS; do fake $v || bad "cannot build the $v stand-in"; done
  # a runner's own failure (a device out of memory) is "cannot run here",
  # never a wrong plan
  PLAN_CUDA_PLUGIN=$tmp/fake-FAILS.so expect 3 "a runner that runs out of device memory" verify --runner cuda "$mlp"
  has "$err" "on runner 'cuda': cudaMalloc: out of memory (2 GiB asked)" "a runner that runs out of device memory"
  PLAN_CUDA_PLUGIN=$tmp/fake-OTHER_ABI.so expect 3 "a plugin built for another libplan" verify --runner cuda "$mlp"
  has "$err" "was built for another libplan (its op kinds or layouts differ)" "a plugin built for another libplan"
  PLAN_CUDA_PLUGIN=$tmp/fake-REFUSES.so expect 3 "a plugin without a device" verify --runner cuda "$mlp"
  has "$err" "runner 'cuda' cannot run here: cudaGetDeviceCount: no CUDA-capable device is detected" "a plugin without a device"
  PLAN_CUDA_PLUGIN=$tmp/fake-OLD_API.so expect 3 "a plugin of another API version" verify --runner cuda "$mlp"
  has "$err" "speaks runner API version 1" "a plugin of another API version"
  PLAN_CUDA_PLUGIN=$tmp/fake-NO_ENTRY.so expect 3 "a library without the entry point" verify --runner cuda "$mlp"
  has "$err" "has no entry point plan_runner_plugin_entry" "a library without the entry point"
  echo "not a library" >"$tmp/junk.so"
  PLAN_CUDA_PLUGIN=$tmp/junk.so expect 3 "a plugin that does not load" verify --runner cuda "$mlp"
  has "$err" "does not load" "a plugin that does not load"
  # a working plugin: its all-reduce replaces the verifier's, same bits
  PLAN_CUDA_PLUGIN=$tmp/fake-WORKS.so expect 0 "verify on a plugin runner" verify --runner cuda "$mlp"
  has "$out" "EQUAL (exact mode, seed 0, 4 ranks; 1 all_reduce)" "verify on a plugin runner"
  has "$out" "runner: cuda: a stand-in on the CPU kernels" "verify on a plugin runner names it"
  PLAN_CUDA_PLUGIN=$tmp/fake-WORKS.so expect 0 "a plugin runner, float mode" verify --runner cuda --mode float --report json "$mlp"
  has "$out" '"runner": "cuda"' "a plugin runner, float mode"
  PLAN_CUDA_PLUGIN=$tmp/fake-WORKS.so expect 0 "a plugin runner, a training step" verify --runner cuda "$ex/mlp-train.plan.yaml"
  # found beside the executable (a copy of the tool with the stand-in as
  # libplan-cuda.so), and not found where it is absent, naming the folder
  mkdir -p "$tmp/bin" "$tmp/bin2"
  cp "$plan" "$tmp/bin/plan"
  cp "$plan" "$tmp/bin2/plan"
  cp "$tmp/fake-WORKS.so" "$tmp/bin/libplan-cuda.so"
  "$tmp/bin/plan" verify --runner cuda "$mlp" >"$out" 2>"$err"
  rc=$?
  if [ "$rc" -eq 0 ]; then ok; else bad "the plugin beside the tool: exit $rc"; fi
  has "$out" "runner: cuda: a stand-in on the CPU kernels" "the plugin beside the tool"
  "$tmp/bin2/plan" verify --runner cuda "$mlp" >"$out" 2>"$err"
  rc=$?
  if [ "$rc" -eq 3 ]; then ok; else bad "no plugin beside the tool: exit $rc"; fi
  has "$err" "(looked in: $tmp/bin2, " "no plugin beside the tool names the folder"
  # an installed layout: bin/plan finds lib/libplan-cuda.so
  mkdir -p "$tmp/pfx/bin" "$tmp/pfx/lib"
  cp "$plan" "$tmp/pfx/bin/plan"
  cp "$tmp/fake-WORKS.so" "$tmp/pfx/lib/libplan-cuda.so"
  "$tmp/pfx/bin/plan" verify --runner cuda "$mlp" >"$out" 2>"$err"
  rc=$?
  if [ "$rc" -eq 0 ]; then ok; else bad "the plugin in ../lib: exit $rc"; fi
  has "$out" "runner: cuda: a stand-in on the CPU kernels" "the plugin in ../lib"
  # a wrong all-reduce in the plugin is caught: the verdict depends on it
  sed 's/acc + b;/acc + b + 1;/' "$root/tests/cli/fake_runner.c" >"$tmp/fake_bad.c"
  cc -std=c11 -shared -fPIC -DFAKE_WORKS -I"$root/libplan/include" -I"$root/libplan/src" \
    -I"$root/runners" -o "$tmp/fake-bad.so" "$tmp/fake_bad.c" \
    -Wl,--exclude-libs,ALL "$build/libplan-verify.a" "$build/libplan.a" \
    $(pkg-config --libs yaml-0.1 libxxhash openblas 2>/dev/null || echo -lyaml -lxxhash -lopenblas) -lm
  PLAN_CUDA_PLUGIN=$tmp/fake-bad.so expect 1 "a plugin with a wrong all-reduce" verify --runner cuda "$mlp"
  has "$out" "NOT EQUAL" "a plugin with a wrong all-reduce"
  # reduce-scatters go through the runner's all-reduce too
  PLAN_CUDA_PLUGIN=$tmp/fake-WORKS.so expect 0 "reduce_scatter on a plugin runner" verify --runner cuda "$ex/transformer-block.plan.yaml"
  has "$out" "EQUAL (exact mode, seed 0, 4 ranks; 2 all_gather, 2 reduce_scatter)" "reduce_scatter on a plugin runner"
  PLAN_CUDA_PLUGIN=$tmp/fake-bad.so expect 1 "a plugin with a wrong reduce_scatter" verify --runner cuda "$ex/transformer-block.plan.yaml"
  has "$out" "first divergent op: block.res1" "a plugin with a wrong reduce_scatter"
  unset PLAN_CUDA_PLUGIN
else
  bad "no C compiler or no libplan.a beside the tool: the plugin stand-ins are not tested"
fi
expect 0 "verify a pipeline" verify "$ex/pipeline-1f1b.plan.yaml"
has "$out" "4 stages, 8 microbatches, 1f1b, 6 send/recv" "verify a pipeline"
# manual regions: the Lua body traced into lowered ops and collectives
expect 0 "verify a manual region" verify "$root/spec/vectors/valid/regions.yaml"
expect 0 "verify a manual region with its own all-reduce" verify "$ex/mlp-manual.plan.yaml"
has "$out" "1 all_reduce" "verify a manual region with its own all-reduce"
expect 0 "verify a manual region, float mode" verify --mode float "$ex/mlp-manual.plan.yaml"
sed 's/local a = gelu(h) /local a = relu(h) /' "$ex/mlp-manual.plan.yaml" >"$tmp/manual-relu.yaml"
expect 1 "verify a wrong manual region" verify "$tmp/manual-relu.yaml"
has "$out" "first divergent op: mlp.fc2 (tensor 'y')" "verify a wrong manual region"
# lowered to a file: the region's traced ops inline, verified from the file
expect 0 "lower -o a manual region" lower -o "$tmp/manual.lowered.yaml" "$ex/mlp-manual.plan.yaml"
has "$tmp/manual.lowered.yaml" "replaces: [\"mlp.act\", \"mlp.fc2\"]" "lower -o a manual region"
has "$tmp/manual.lowered.yaml" "{name: row-parallel-by-hand/1.gelu, op: gelu, in: [h]" "lower -o a manual region"
has "$tmp/manual.lowered.yaml" "{bind: \"y@0\", from: " "lower -o a manual region"
expect 0 "verify a lowered manual region" verify "$tmp/manual.lowered.yaml"
has "$out" "EQUAL" "verify a lowered manual region"
expect 0 "lower -o a wrong manual region" lower -o "$tmp/manual-relu.lowered.yaml" "$tmp/manual-relu.yaml"
expect 1 "verify a wrong lowered manual region" verify "$tmp/manual-relu.lowered.yaml"
has "$out" "first divergent op: mlp.fc2 (tensor 'y')" "verify a wrong lowered manual region"
expect 0 "hash a lowered manual region" hash "$tmp/manual.lowered.yaml"
cp "$out" "$tmp/manual.hash"
expect 0 "hash a wrong lowered manual region" hash "$tmp/manual-relu.lowered.yaml"
if cmp -s "$out" "$tmp/manual.hash"; then bad "a lowered manual region's hash covers its traced body"; else ok; fi
sed 's/return all_reduce(y, "tp")  -- summed by hand/return y/' "$ex/mlp-manual.plan.yaml" >"$tmp/manual-partial.yaml"
expect 2 "a manual region that leaves its output partial" verify "$tmp/manual-partial.yaml"
has "$err" "output 'y' comes out as" "a manual region that leaves its output partial"
has "$err" "where its boundary says S(0)R" "a manual region that leaves its output partial"
sed 's/local a = gelu(h) /local a = io.open("x") /' "$ex/mlp-manual.plan.yaml" >"$tmp/manual-io.yaml"
expect 2 "a manual region's sandbox has no io" verify "$tmp/manual-io.yaml"
has "$err" "manual-io.yaml:45: manual region 'row-parallel-by-hand': attempt to index a nil value (global 'io')" "a manual region's sandbox has no io"
sed 's/local a = gelu(h) /while true do end /' "$ex/mlp-manual.plan.yaml" >"$tmp/manual-loop.yaml"
expect 2 "a manual region that never ends" verify "$tmp/manual-loop.yaml"
has "$err" "manual-loop.yaml:45: manual region 'row-parallel-by-hand': the body ran past" "a manual region that never ends"
sed 's/all_reduce(y, "tp")/all_reduce(y, "pp")/' "$ex/mlp-manual.plan.yaml" >"$tmp/manual-axis.yaml"
expect 2 "a manual region's collective on no axis" verify "$tmp/manual-axis.yaml"
has "$err" "no mesh axis 'pp'" "a manual region's collective on no axis"
expect 1 "verify an invalid plan" verify "$tmp/findings.yaml"
has "$out" "not verified" "verify an invalid plan"
expect 0 "verify --report json" verify --report json "$mlp"
has "$out" '"schema": "libplan-verify/1"' "verify --report json"
has "$out" '"verdict": "equal"' "verify --report json"
expect 0 "verify --report json, a training plan" verify --report json "$ex/mlp-train.plan.yaml"
has "$out" '"step": 2' "verify --report json names the training step"
expect 0 "verify --report junit, a training plan" verify --report junit "$ex/mlp-train.plan.yaml"
has "$out" "(step 1)" "verify --report junit names the training step"
expect 0 "verify --report junit --out" verify --report junit --out "$tmp/r.xml" "$mlp"
has "$tmp/r.xml" '<testsuite name="plan verify' "verify --report junit --out"
has "$tmp/r.xml" 'failures="0"' "verify --report junit --out"
expect 2 "verify --report pdf" verify --report pdf "$mlp"
expect 0 "lower -o" lower -o "$tmp/mlp.lowered.yaml" "$mlp"
has "$tmp/mlp.lowered.yaml" 'libplan-lowered: "1.0"' "lower -o"
has "$tmp/mlp.lowered.yaml" "collective: all_reduce, axis: tp" "lower -o"
expect 0 "verify a lowered program" verify "$tmp/mlp.lowered.yaml"
has "$out" "EQUAL" "verify a lowered program"
has "$tmp/mlp.lowered.yaml" 'required: {"y": "S(0)R"}' "lower -o: the required placements"
# a program by path, lowered into another folder: the path is written from
# there, so the file verifies (its program outside its folder tree needs
# --program-root)
mkdir -p "$tmp/other/dir"
expect 0 "lower -o elsewhere, program by path" lower -o "$tmp/other/dir/bp.yaml" "$ex/mlp-by-path.plan.yaml"
lacks "$tmp/other/dir/bp.yaml" "path: mlp-program.yaml" "lower -o elsewhere, program by path"
has "$tmp/other/dir/bp.yaml" "/examples/mlp-program.yaml" "lower -o elsewhere, program by path"
expect 0 "verify a lowered program by path, elsewhere" --program-root "$root" verify "$tmp/other/dir/bp.yaml"
has "$out" "EQUAL" "verify a lowered program by path, elsewhere"
# --reduce: a smaller program with the same sharding structure
expect 0 "verify --reduce" verify --reduce "$ex/transformer-block.plan.yaml"
has "$out" "reduced: seq 8->4, hidden 16->2" "verify --reduce"
has "$out" "fewer elements" "verify --reduce"
has "$out" "q[3] 8->2" "verify --reduce: split's equal parts reduce"
has "$out" "kept: w_qkv[0]/1 3 (the number of split/concat parts)" "verify --reduce"
has "$out" "EQUAL (exact mode" "verify --reduce"
expect 0 "verify --reduce --mode float" verify --reduce --mode float "$mlp"
has "$out" "reduced: batch 8->4" "verify --reduce --mode float"
expect 0 "verify --reduce --report json" verify --reduce --report json "$mlp"
has "$out" '"verdict": "equal"' "verify --reduce --report json"
lacks "$out" "reduced:" "verify --reduce --report json keeps stdout one document"
has "$err" "reduced: batch 8->4" "verify --reduce --report json"
expect 0 "verify --reduce a lowered program" verify --reduce "$tmp/mlp.lowered.yaml"
has "$out" "reduced: batch 8->4" "verify --reduce a lowered program"
has "$out" "EQUAL" "verify --reduce a lowered program"
# the all-reduce dropped by hand: found at full size and reduced, alike
sed -e '/"y@1": {tensor/d' -e '/collective: all_reduce/d' \
  -e 's/placement: "S(0)P(sum)"/placement: "S(0)R"/' \
  -e 's/outputs: {"y": "y@1"}/outputs: {"y": "y@0"}/' \
  "$tmp/mlp.lowered.yaml" >"$tmp/dropped.lowered.yaml"
expect 1 "verify a dropped all-reduce" verify "$tmp/dropped.lowered.yaml"
grep -e '^first divergent op' -e '^diagnosis' "$out" >"$tmp/full.txt"
has "$tmp/full.txt" "partial sums" "verify a dropped all-reduce"
expect 1 "verify --reduce a dropped all-reduce" verify --reduce "$tmp/dropped.lowered.yaml"
grep -e '^first divergent op' -e '^diagnosis' "$out" >"$tmp/reduced.txt"
same "$tmp/full.txt" "$tmp/reduced.txt" "verify --reduce a dropped all-reduce"
expect 0 "verify --help names --reduce" verify --help
has "$out" "--reduce" "verify --help names --reduce"
expect 0 "verify --reduce a pipeline" verify --reduce "$ex/pipeline-1f1b.plan.yaml"
has "$out" "microbatches 8->4" "verify --reduce a pipeline"
has "$out" "mesh kept: pp 4 (the pipeline's stages)" "verify --reduce a pipeline"
has "$out" "4 stages, 4 microbatches" "verify --reduce a pipeline"
expect 0 "verify --reduce shapes a pipeline" verify --reduce shapes "$ex/pipeline-1f1b.plan.yaml"
has "$out" "8 microbatches" "verify --reduce shapes a pipeline"
lacks "$out" "microbatches 8->4" "verify --reduce shapes a pipeline"
expect 3 "verify --reduce a manual region" verify --reduce "$root/spec/vectors/valid/regions.yaml"
has "$err" "manual region" "verify --reduce a manual region"
expect 1 "verify --reduce an invalid plan" verify --reduce "$tmp/findings.yaml"
has "$out" "not verified" "verify --reduce an invalid plan"
expect 0 "hash a lowered program" hash "$tmp/mlp.lowered.yaml"
has "$out" "xxh3:" "hash a lowered program"
# a pipelined program's file form: written elsewhere, it verifies as the plan
mkdir -p "$tmp/pp-out"
expect 0 "lower a pipeline" lower -o "$tmp/pp-out/pp.lowered.yaml" "$ex/pipeline-1f1b.plan.yaml"
has "$tmp/pp-out/pp.lowered.yaml" "schedule: 1f1b" "lower a pipeline"
expect 0 "verify a lowered pipeline" verify "$tmp/pp-out/pp.lowered.yaml"
has "$out" "EQUAL (exact mode, seed 0, 8 ranks, 4 stages, 8 microbatches, 1f1b, 6 send/recv" "verify a lowered pipeline"
sed 's/ 0F1 / 0F9 /' "$tmp/pp-out/pp.lowered.yaml" >"$tmp/pp-out/bad.yaml"
expect 2 "a lowered pipeline's bad action" verify "$tmp/pp-out/bad.yaml"
has "$err" "bad.yaml:72:21: error: actions: rank 0, action 2: '0F9' is outside the pipeline" "a lowered pipeline's bad action"
expect 1 "lower an invalid plan" lower "$tmp/findings.yaml"
expect 0 "lower --help" lower --help
expect 0 "verify --help" verify --help
has "$out" "usage: plan verify" "verify --help"

# ---- plan schedule ------------------------------------------------------------

pp=$ex/pipeline-1f1b.plan.yaml
pg=$ex/pipeline-grid.plan.yaml
expect 0 "schedule 1f1b" schedule "$pp" --svg "$tmp/s.svg" --time units
has "$out" "1f1b, 4 stages on 4 ranks, 8 microbatches" "schedule 1f1b"
has "$out" "rank 0: 0F0 0SEND_F0 0F1" "schedule 1f1b"
has "$out" "peak activations per stage: 4 3 2 1" "schedule 1f1b"
has "$out" "makespan 33, bubble 27.27%" "schedule 1f1b"
has "$tmp/s.svg" "1f1b, 4 stages on 4 ranks, 8 microbatches, bubble 27.3%" "schedule --svg"
expect 0 "schedule --format json" schedule --format json "$pp"
cp "$out" "$tmp/s.json"
# the picture is well formed XML and holds one box per action of the rows
if command -v python3 >/dev/null 2>&1; then
  if python3 - "$tmp/s.svg" "$tmp/s.json" >"$tmp/py.txt" 2>&1 <<'PY'
import json, sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
drawn = [e.get("data-action") for e in root.iter() if e.get("data-action")]
doc = json.load(open(sys.argv[2]))
assert doc["schema"] == "libplan-schedule/1" and doc["verdict"] == "ok", doc
assert abs(doc["bubble"] - 9 / 33) < 1e-12, doc["bubble"]
rows = [a for row in doc["grid"] for a in row.split()]
assert sorted(drawn) == sorted(rows), (len(drawn), len(rows))
assert len(set(rows)) == len(rows)
PY
  then ok; else bad "schedule --svg: not well formed or actions missing: $(cat "$tmp/py.txt")"; fi
fi
# the default picture is in modeled milliseconds: its axis ends at the step
# 'plan cost' prices, it draws every F and B of the grid once, and each
# send has its arrow to the rank it feeds
expect 0 "schedule --svg in ms" schedule "$pp" --svg "$tmp/ms.svg" --hardware h200-sxm
has "$tmp/ms.svg" "modeled on h200-sxm" "schedule --svg in ms"
expect 0 "cost --format json" cost --format json --hardware h200-sxm "$pp"
cp "$out" "$tmp/c.json"
if command -v python3 >/dev/null 2>&1; then
  if python3 - "$tmp/ms.svg" "$tmp/c.json" "$tmp/s.json" >"$tmp/py.txt" 2>&1 <<'PY'
import json, sys, xml.etree.ElementTree as ET
ns = "{http://www.w3.org/2000/svg}"
root = ET.parse(sys.argv[1]).getroot()
cost = json.load(open(sys.argv[2]))
sched = json.load(open(sys.argv[3]))
step_ms = cost["time"]["step"] * 1e3
axis = [e for e in root.iter(ns + "line") if e.get("class") == "axis"][0]
assert abs(float(axis.get("data-end-ms")) - step_ms) < 1e-6 * step_ms, (axis.get("data-end-ms"), step_ms)
bars = [e for e in root.iter(ns + "rect") if e.get("class") in ("F", "B", "I", "W")]
got = sorted("%s%s%s" % (e.get("data-stage"), e.get("class"), e.get("data-microbatch")) for e in bars)
want = sorted(a for row in sched["grid"] for a in row.split() if "SEND" not in a and "RECV" not in a)
assert got == want, (len(got), len(want))
sends = [e for e in root.iter(ns + "rect") if (e.get("class") or "").startswith("send-")]
arrows = [e for e in root.iter(ns + "line") if e.get("class") == "arrow"]
nsend = sum(1 for row in sched["grid"] for a in row.split() if "SEND" in a)
assert len(sends) == len(arrows) == nsend, (len(sends), len(arrows), nsend)
PY
  then ok; else bad "schedule --svg in ms: $(cat "$tmp/py.txt")"; fi
fi
expect 2 "schedule --time ms with --durations" schedule "$pp" --svg "$tmp/x.svg" --time ms --durations F=2
absent "$tmp/x.svg" "schedule --time ms with --durations"
expect 2 "schedule --time s" schedule "$pp" --svg "$tmp/x.svg" --time s
expect 2 "schedule --hardware unknown" schedule "$pp" --svg "$tmp/x.svg" --hardware abacus
expect 0 "schedule --format yaml" schedule --format yaml "$pp"
has "$out" 'schema: "libplan-schedule/1"' "schedule --format yaml"
has "$out" '  - "0F0 0SEND_F0' "schedule --format yaml"
expect 0 "schedule --schedule zb-h1" schedule --schedule zb-h1 "$pp"
has "$out" "makespan 27, bubble 11.11%" "schedule --schedule zb-h1"
has "$out" "peak pending W per stage: 1 2 3 4" "schedule --schedule zb-h1"
expect 0 "schedule --schedule gpipe --microbatches 16" schedule --schedule gpipe --microbatches 16 "$pp"
has "$out" "peak activations per stage: 16 16 16 16" "schedule gpipe"
expect 0 "schedule --durations" schedule --durations F=1,B=1 "$pp"
has "$out" "makespan 22," "schedule --durations"
# the explicit grid runs, with blocking sends too (as its comment says)
expect 0 "schedule a grid" schedule "$pg"
has "$out" "explicit, 2 stages on 2 ranks, 4 microbatches" "schedule a grid"
expect 0 "schedule a grid, blocking sends" schedule --sends blocking "$pg"
# both ranks receive first: a deadlock, both ranks named, at the grid's line
sed 's/"0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0/"0RECV_B0 0F0 0SEND_F0 0F1 0SEND_F1 0B0/' \
  "$pg" >"$tmp/deadlock.plan.yaml"
row0=$(grep -n '"0RECV_B0 0F0' "$tmp/deadlock.plan.yaml" | cut -d: -f1)
expect 1 "schedule a deadlock" schedule "$tmp/deadlock.plan.yaml" --svg "$tmp/d.svg"
has "$out" "$tmp/deadlock.plan.yaml:$row0:8: error: ranks 0 and 1 wait on each other" "schedule a deadlock"
has "$out" "rank 0 waits at 0RECV_B0 for 1SEND_B0 on rank 1; rank 1 waits at 1RECV_F0 for 0SEND_F0 on rank 0" "schedule a deadlock"
has "$out" "[schedule.deadlock]" "schedule a deadlock"
has "$tmp/d.svg" "DEADLOCK" "schedule a deadlock --svg"
expect 1 "validate a deadlock" validate "$tmp/deadlock.plan.yaml"
has "$out" "[schedule.deadlock]" "validate a deadlock"
# a grid that runs only while sends are buffered
sed 's/"1RECV_F0 1F0 1RECV_F1 1B0 1SEND_B0 1F1/"1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1/' \
  "$pg" >"$tmp/buffered.plan.yaml"
expect 0 "schedule a grid that needs buffered sends" schedule "$tmp/buffered.plan.yaml"
has "$out" "note: with blocking sends" "schedule a grid that needs buffered sends"
has "$out" "[schedule.blocking]" "schedule a grid that needs buffered sends"
expect 1 "schedule --sends blocking deadlocks" schedule --sends blocking "$tmp/buffered.plan.yaml"
has "$out" "rank 0 waits at 0SEND_F1 for 1RECV_F1 on rank 1" "schedule --sends blocking deadlocks"
expect 0 "validate a grid that needs buffered sends" validate "$tmp/buffered.plan.yaml"
# invalid plans, wrong input, bad usage
expect 1 "schedule an invalid plan" schedule "$tmp/findings.yaml"
has "$out" "not scheduled" "schedule an invalid plan"
expect 2 "schedule a plan without pipeline" schedule "$mlp"
has "$err" "no pipeline" "schedule a plan without pipeline"
expect 2 "schedule a missing file" schedule "$tmp/nope.yaml"
expect 2 "schedule without a plan" schedule
expect 2 "schedule --format xml" schedule --format xml "$pp"
expect 2 "schedule --sends eager" schedule --sends eager "$pp"
expect 2 "schedule --durations X=1" schedule --durations X=1 "$pp"
expect 2 "schedule --durations F=-1" schedule --durations F=-1 "$pp"
expect 2 "schedule --schedule 2f2b" schedule --schedule 2f2b "$pp"
expect 2 "schedule --microbatches 0" schedule --microbatches 0 "$pp"
expect 2 "schedule --microbatches on a grid" schedule --microbatches 8 "$pg"
expect 2 "schedule --svg into a missing folder" schedule "$pp" --svg "$tmp/no/such/dir/x.svg"
absent "$tmp/no/such/dir/x.svg" "schedule --svg into a missing folder"
expect 0 "schedule --help" schedule --help
has "$out" "usage: plan schedule" "schedule --help"
expect 0 "help lists schedule" --help
has "$out" "schedule" "help lists schedule"

# ---- plan run -i, plan run FILE -- ARGS -------------------------------------------

# runi INPUT ARGS...: plan run -i ARGS with INPUT on standard input
runi() {
  input=$1
  shift
  printf '%s\n' "$input" | "$plan" run -i "$@" >"$out" 2>"$err"
  rc=$?
}
runi 'p = plan.load("'"$mlp"'")
p
#p:ops()
for i = 1, 2 do
print("line " .. i)
end
error("on purpose")
_ + 1'
if [ "$rc" -eq 0 ]; then ok; else bad "run -i: exit $rc"; fi
has "$out" "plan 'mlp' (3 ops; mesh dp=2 x tp=2)" "run -i: a plan printed"
has "$out" "mlp.act  gelu    in [S(0)S(1)] out [S(0)S(1)] (pinned)" "run -i: the plan as a table"
has "$out" "> 3" "run -i: an expression's value"
has "$out" "line 2" "run -i: a statement over lines"
has "$out" "stdin:1: on purpose" "run -i: an error, and the session goes on"
has "$out" "> 4" "run -i: the last value in _"
printf 'v = 42\n' >"$tmp/v.lua"
runi 'v' "$tmp/v.lua"
has "$out" "> 42" "run -i FILE: the script first"
# on a terminal (script(1) makes one): line editing through libedit when
# it is installed, each line kept in the history file
if command -v script >/dev/null 2>&1 &&
  { [ -e /usr/lib/x86_64-linux-gnu/libedit.so.2 ] ||
    /sbin/ldconfig -p 2>/dev/null | grep -q 'libedit.so.2 '; }; then
  printf 'y = 40 + 2\ny\n' | PLAN_HISTORY="$tmp/history" timeout 20 \
    script -qec "'$plan' run -i" /dev/null >"$out" 2>"$err"
  has "$out" "42" "run -i on a terminal: the session runs"
  has "$tmp/history" 'y\040=\04040\040+\0402' "run -i on a terminal: the history file"
  has "$tmp/history" "y" "run -i on a terminal: the history file"
else
  echo "cli: note: no script(1) or no libedit: run -i's line editing is not checked"
fi
printf 'print(select("#", ...), ...)\n' >"$tmp/args.lua"
expect 0 "run FILE -- ARGS" run "$tmp/args.lua" -- a b
has "$out" "2	a	b" "run FILE -- ARGS: the -- skipped"

# ---- plan cost ----------------------------------------------------------------

expect 0 "cost" cost "$mlp"
has "$out" "step" "cost"
has "$out" "memory per device" "cost"
has "$out" "all_reduce" "cost"
has "$out" "fits" "cost"
# one byte convention: binary units, scaled to the value
has "$out" "peak 5.00 KiB of 74.51 GiB: fits" "cost: bytes in KiB and GiB"
lacks "$out" " kB" "cost: no decimal kB"
lacks "$out" " GB" "cost: no decimal GB"
expect 0 "search: bytes scaled" search "$ex/mlp-program.yaml" --mesh dp=2,tp=2 -o "$tmp/units.plan.yaml"
has "$out" "peak memory 3.00 KiB per device" "search: bytes scaled"
lacks "$out" "0.00 GiB" "search: no 0.00 GiB"
# progress on stderr, not a terminal: a line per report with
# PLAN_PROGRESS_SECONDS=0; none with --quiet; stdout the same either way
layers=$root/tests/lua/data/layers-program.yaml
export PLAN_PROGRESS_SECONDS=0
expect 0 "search progress" search "$layers" --mesh dp=2,tp=2 --strategy dp -o "$tmp/prog.plan.yaml"
has "$err" "plan search: units " "search progress: lines on stderr"
sed 's/in [0-9.]* s ([0-9]*\/s)//' "$out" >"$tmp/prog.out"
expect 0 "search --quiet" search "$layers" --mesh dp=2,tp=2 --strategy dp --quiet -o "$tmp/quiet.plan.yaml"
lacks "$err" "plan search: units " "search --quiet: no progress"
sed 's/in [0-9.]* s ([0-9]*\/s)//; s/quiet.plan/prog.plan/' "$out" >"$tmp/quiet.out"
same "$tmp/prog.out" "$tmp/quiet.out" "search --quiet: stdout unchanged"
same "$tmp/prog.plan.yaml" "$tmp/quiet.plan.yaml" "search --quiet: the same plan"
unset PLAN_PROGRESS_SECONDS
expect 0 "show --cost: bytes scaled" show --cost "$mlp"
has "$out" "peak memory 5.00 KiB per device" "show --cost: bytes scaled"
expect 0 "cost --format json" cost --format json "$mlp"
if command -v python3 >/dev/null 2>&1; then
  if python3 -c 'import json,sys; d = json.load(sys.stdin); assert d["schema"] == "libplan-cost/1" and d["memory"]["fits"] and d["time"]["step"] > 0, d' <"$out"; then ok; else bad "cost --format json: does not parse"; fi
fi
expect 0 "cost --format yaml" cost --format yaml "$mlp"
has "$out" 'schema: "libplan-cost/1"' "cost --format yaml"
expect 0 "cost --hardware a100" cost --hardware a100 "$mlp"
has "$out" "hardware a100-80gb" "cost --hardware a100"
expect 0 "cost a pipeline" cost "$ex/pipeline-1f1b.plan.yaml"
has "$out" "bubble" "cost a pipeline"
has "$out" "grad_sync" "cost a pipeline"
expect 2 "cost --hardware unknown" cost --hardware tpu9 "$mlp"
has "$err" "unknown hardware" "cost --hardware unknown"
expect 2 "cost --hardware misspelt" cost --hardware h10 "$mlp"
has "$err" "--hardware: unknown hardware 'h10'; did you mean 'h100'?" "cost --hardware misspelt"
expect 2 "search --hardware misspelt" search "$ex/mlp-program.yaml" --mesh dp=2 --hardware a10 -o "$tmp/hw.plan.yaml"
has "$err" "--hardware: unknown hardware 'a10'; did you mean 'a100'?" "search --hardware misspelt"
absent "$tmp/hw.plan.yaml" "search --hardware misspelt: nothing written"
# --mesh: the flag's own terms, never the text made of it
for m in "dp=2,tp|'tp' has no size" "dp=2,tp=x|'tp=x': the size must be a whole number >= 1" \
         "dp=2,dp=2|axis 'dp' is named twice" "dp=2,,tp=2|an empty axis"; do
  expect 2 "--mesh ${m%%|*}" search "$ex/mlp-program.yaml" --mesh "${m%%|*}" -o "$tmp/mesh.plan.yaml"
  has "$err" "plan search: --mesh: ${m#*|}" "--mesh ${m%%|*}"
  lacks "$err" "<plan.new>" "--mesh ${m%%|*}: no generated text"
done
expect 2 "a misspelt strategy" search "$ex/mlp-program.yaml" --mesh dp=2 --strategy gredy -o "$tmp/st.plan.yaml"
has "$err" "no strategy 'gredy'; did you mean 'greedy'?" "a misspelt strategy"
expect 2 "cost --format xml" cost --format xml "$mlp"
expect 2 "cost without a plan" cost
expect 2 "cost an unknown option" cost --fast "$mlp"
expect 2 "cost a missing file" cost "$tmp/nope.yaml"
expect 2 "cost --set out of range" cost --set efficiency.matmul=2 "$mlp"
expect 1 "cost an invalid plan" cost "$tmp/findings.yaml"
has "$err" "not costed" "cost an invalid plan"
sed 's/^  devices: iota$/  devices: iota\n  hardware: {name: h100-sxm, memory: 1000}/' "$mlp" >"$tmp/small.yaml"
expect 1 "cost a plan that does not fit" cost "$tmp/small.yaml"
has "$err" "does not fit" "cost a plan that does not fit"
has "$out" "DOES NOT FIT" "cost a plan that does not fit"
expect 0 "cost --hardware replaces the plan's" cost --hardware h100 "$tmp/small.yaml"
sed 's/^  devices: iota$/  devices: iota\n  hardware: {name: my-box, memory: 1e9}/' "$mlp" >"$tmp/hw.yaml"
expect 2 "cost with missing hardware figures" cost "$tmp/hw.yaml"
has "$err" "hw.yaml:22:13: error: mesh.hardware lacks figures this plan needs: flops.f32, memory_bandwidth" "cost with missing hardware figures"
cat >"$tmp/cal.yaml" <<'CAL'
libplan-calibration: "0.1"
ops:
  matmul: {seconds: 0.25}
collectives:
  all_reduce: {bandwidth: 1e9}
CAL
expect 0 "cost --calibration" cost --calibration "$tmp/cal.yaml" "$mlp"
has "$out" "250.00 ms" "cost --calibration"
has "$out" "calibrated" "cost --calibration"
printf 'libplan-calibration: "0.1"\nops:\n  matmul: {seconds: -1}\n' >"$tmp/badcal.yaml"
expect 2 "cost --calibration with a bad figure" cost --calibration "$tmp/badcal.yaml" "$mlp"
has "$err" "badcal.yaml:3:21: error:" "cost --calibration with a bad figure"
expect 0 "cost --help" cost --help
has "$out" "usage: plan cost" "cost --help"
expect 0 "help lists cost" --help
has "$out" "cost" "help lists cost"

# ---- the placement search and the mesh shape search -----------------------
# A row-parallel matmul all-reduces its output over tp: on a wrapped 4x4
# torus the snake curve makes every ring edge one hop; tp's groups belong
# inside an NVLink island; tp=1 needs no collective at all.
rowmm=$root/tests/lua/data/rowmm-program.yaml
rowpar=$root/tests/lua/data/rowpar.lua
gain_of() { # FILE: the first "(N.NNx)" gain of a placement or shape note
  sed -n 's/^.*[(]\([0-9.]*\)x[)].*$/\1/p' "$1" | head -n 1
}
gt1() { awk -v g="$1" 'BEGIN { exit !(g + 0 > 1) }'; }
expect 0 "search --placement on a torus" search "$rowmm" --mesh tp=16 \
  --strategy "$rowpar" --hardware tpu-v5e --placement search \
  --topology torus:4x4 -o "$tmp/snake.plan.yaml"
has "$err" "placement: snake tp of 4 assignments" "the snake on the torus"
has "$tmp/snake.plan.yaml" "devices: [0, 1, 2, 3, 7, 6, 5, 4, 8, 9, 10, 11, 15, 14, 13, 12]" \
  "the snake's device order written"
g=$(gain_of "$err")
check "the snake's gain ($g) > 1" gt1 "$g"
expect 0 "replay a placement search" replay --program-root "$root" "$tmp/snake.plan.yaml" \
  --strategy "$rowpar"
expect 0 "search --placement on islands" search "$rowmm" --mesh tp=4,dp=2 \
  --strategy "$rowpar" --hardware h100 --placement search \
  --topology levels:nvlink=4,ib -o "$tmp/island.plan.yaml"
has "$err" "placement: host-major dp,tp" "tp inside the island"
has "$tmp/island.plan.yaml" "devices: [0, 4, 1, 5, 2, 6, 3, 7]" "tp groups are islands"
g=$(gain_of "$err")
check "the island's gain ($g) > 1" gt1 "$g"
expect 2 "--placement without a topology" search "$rowmm" --mesh tp=4 \
  --placement search -o "$tmp/none.plan.yaml"
has "$err" "needs a topology" "--placement without a topology"
absent "$tmp/none.plan.yaml" "--placement without a topology"
expect 2 "--topology of another size" search "$rowmm" --mesh tp=4 \
  --topology torus:3x3 --placement search -o "$tmp/none.plan.yaml"
has "$err" "the torus has 9 devices, the mesh 4" "--topology of another size"
expect 2 "--topology misspelt" search "$rowmm" --mesh tp=4 \
  --topology ring:4 -o "$tmp/none.plan.yaml"
expect 2 "--placement takes search" search "$rowmm" --mesh tp=4 \
  --placement yes -o "$tmp/none.plan.yaml"
expect 2 "--mesh-shape takes search" search "$rowmm" --mesh tp=4 \
  --mesh-shape all -o "$tmp/none.plan.yaml"
absent "$tmp/none.plan.yaml" "bad placement options"
cp "$rowmm" "$tmp/rowmm-program.yaml"
expect 0 "search --mesh-shape" search "$tmp/rowmm-program.yaml" --mesh dp=2,tp=4 \
  --strategy "$rowpar" --hardware h100 --mesh-shape search --placement search \
  --topology levels:nvlink=4,ib -o "$tmp/shape.plan.yaml"
has "$err" "mesh shape: dp=8,tp=1 of 4 shapes" "tp=1 needs no collective"
has "$out" "strategy $rowpar on dp=8,tp=1" "the shape chosen is printed"
has "$tmp/shape.plan.yaml" "axes: [dp=8, tp=1]" "the shape chosen is written"
g=$(gain_of "$err")
check "the shape's gain ($g) > 1" gt1 "$g"
expect 0 "replay a shape search" replay "$tmp/shape.plan.yaml" --strategy "$rowpar"
expect 2 "--mesh-shape with a pinned region" search --program-root "$root" "$root/tests/lua/data/mlp-pinned.plan.yaml" \
  --mesh-shape search -o "$tmp/none.plan.yaml"
has "$err" "pinned region" "--mesh-shape with a pinned region"

# the joint search: mesh, pipeline and recipe chosen for a device count
t4=$ex/transformer4-1f1b.plan.yaml
expect 0 "search --devices 8 --hosts 2" search "$t4" --devices 8 --hosts 2 \
  --quiet -o "$tmp/joint.plan.yaml"
has "$out" "strategy joint search on" "the joint search's summary"
has "$err" "joint: megatron's best" "each recipe's best is noted"
has "$err" "joint: fsdp's best" "each recipe's best is noted"
has "$err" "joint: the plan as given, dp=2,tp=2,pp=2" "the given plan is noted"
has "$err" "candidates of 8 devices on 2 hosts" "the joint search's count"
expect 0 "replay a joint search" replay "$tmp/joint.plan.yaml"
expect 0 "the joint search's plan verifies" verify --reduce "$tmp/joint.plan.yaml"
has "$out" ": EQUAL" "the joint search's plan verifies"
expect 2 "--devices 8 on 3 hosts" search "$t4" --devices 8 --hosts 3 \
  -o "$tmp/none.plan.yaml"
has "$err" "8 devices do not split over 3 hosts" "--devices 8 on 3 hosts"
expect 2 "--devices eight" search "$t4" --devices eight -o "$tmp/none.plan.yaml"
expect 2 "--devices 0" search "$t4" --devices 0 -o "$tmp/none.plan.yaml"
expect 2 "--hosts alone" search "$t4" --hosts 2 -o "$tmp/none.plan.yaml"
has "$err" "--hosts goes with --devices N" "--hosts alone"
expect 2 "a joint search without training" search "$progfile" --devices 4 \
  -o "$tmp/none.plan.yaml"
has "$err" "no training section" "a joint search without training"
absent "$tmp/none.plan.yaml" "bad joint search options"

# search -o -: the plan on standard output (no file named '-'), the
# summary on standard error
(cd "$tmp" && "$plan" search --mesh dp=2,tp=2 --self-contained -o - "$progfile" \
  >"$tmp/found.yaml" 2>"$err")
check "search -o -: exit 0" [ $? -eq 0 ]
absent "$tmp/-" "search -o -"
has "$err" "(standard output): strategy greedy" "search -o -"
expect 0 "search -o -: the plan validates" validate "$tmp/found.yaml"

# ---- shard ratios (format 1.1): the plan, its lowered file, diff -----------
rat=$ex/mlp-ratios.plan.yaml
ratt=$ex/mlp-ratios-train.plan.yaml
expect 0 "validate a ratio plan" validate "$rat"
has "$out" "valid (0 errors" "validate a ratio plan"
expect 0 "show a ratio plan" show "$rat"
has "$out" "S(0|3:1)R" "show a ratio plan"
has "$out" "S(0|3:1)P(sum)" "show a ratio plan"
lacks "$out" "|#" "show a ratio plan"
expect 0 "hash a ratio plan" hash "$rat"
cp "$out" "$tmp/rat.hash"
sed 's/^  x: S(0|3:1)R$/  x: {dp: "S(0|6:2)", tp: R}/' "$rat" >"$tmp/rat-map.yaml"
expect 0 "hash a ratio plan, map form" hash "$tmp/rat-map.yaml"
same "$out" "$tmp/rat.hash" "the weights reduced, the map form: the same hash"
expect 0 "cost a ratio plan" cost "$rat"
has "$out" "mlp.fc1" "cost a ratio plan"
for m in exact float; do
  expect 0 "verify a ratio plan ($m)" verify --mode $m "$rat"
  has "$out" "EQUAL ($m mode" "verify a ratio plan ($m)"
  has "$out" "1 all_gather, 1 reduce_scatter, 1 all_to_all" "verify a ratio plan ($m)"
  expect 0 "verify --reduce a ratio plan ($m)" verify --reduce --mode $m "$rat"
  has "$out" "EQUAL ($m mode" "verify --reduce a ratio plan ($m)"
  expect 0 "verify a ratio training step ($m)" verify --mode $m "$ratt"
  has "$out" "1 reduce_scatter" "verify a ratio training step ($m)"
done
# lowered with the weights, read back, the same hash, EQUAL in both modes
expect 0 "lower -o a ratio plan" lower -o "$tmp/rat.lowered.yaml" "$rat"
has "$tmp/rat.lowered.yaml" 'libplan-lowered: "1.1"' "lower -o a ratio plan"
has "$tmp/rat.lowered.yaml" '"x@0": {tensor: "x", placement: "S(0|3:1)R"}' "lower -o a ratio plan"
has "$tmp/rat.lowered.yaml" 'required: {"y": "S(1|3:1)S(0|1:3)", "a": "RS(1)"}' "lower -o a ratio plan"
lacks "$tmp/rat.lowered.yaml" "|#" "lower -o a ratio plan"
# each collective that moves unequal pieces is in the program
has "$tmp/rat.lowered.yaml" "{collective: all_to_all, axis: dp, dim: 0, to_dim: 1," "lower -o: an unequal all_to_all"
has "$tmp/rat.lowered.yaml" "{collective: reduce_scatter, axis: tp, reduce: sum, dim: 0," "lower -o: an unequal reduce_scatter"
has "$tmp/rat.lowered.yaml" "{collective: all_gather, axis: dp, dim: 0," "lower -o: an unequal all_gather"
for m in exact float; do
  expect 0 "verify a lowered ratio program ($m)" verify --mode $m "$tmp/rat.lowered.yaml"
  has "$out" "EQUAL ($m mode" "verify a lowered ratio program ($m)"
done
expect 0 "verify --reduce a lowered ratio program" verify --reduce "$tmp/rat.lowered.yaml"
has "$out" "EQUAL" "verify --reduce a lowered ratio program"
expect 0 "hash a lowered ratio program" hash "$tmp/rat.lowered.yaml"
cp "$out" "$tmp/ratlow.hash"
# the same program with its sets met in another order: the same hash
sed 's/^  "y@2": {tensor: "y", placement: "S(1|3:1)S(0|1:3)"}$/  "y@2": {tensor: "y", placement: {tp: "S(0|1:3)", dp: "S(1|3:1)"}}/' \
  "$tmp/rat.lowered.yaml" >"$tmp/rat2.lowered.yaml"
lacks "$tmp/rat2.lowered.yaml" '"y@2": {tensor: "y", placement: "S(1' "the map form written"
expect 0 "hash a lowered ratio program, map form" hash "$tmp/rat2.lowered.yaml"
same "$out" "$tmp/ratlow.hash" "a lowered ratio program's hash, sets in another order"
expect 0 "lower -o a ratio training step" lower -o "$tmp/ratt.lowered.yaml" "$ratt"
has "$tmp/ratt.lowered.yaml" 'placement: "S(0|1:3)S(1)"' "lower -o a ratio training step"
expect 0 "verify a lowered ratio training step" verify "$tmp/ratt.lowered.yaml"
has "$out" "EQUAL" "verify a lowered ratio training step"
# a 1.0 file with ratios: a version error at the placement, exit 2
sed 's/^libplan-lowered: "1.1"/libplan-lowered: "1.0"/' "$tmp/rat.lowered.yaml" >"$tmp/rat10.lowered.yaml"
expect 2 "a 1.0 lowered file with ratios" verify "$tmp/rat10.lowered.yaml"
has "$err" "rat10.lowered.yaml:" "a 1.0 lowered file with ratios"
has "$err" "format 1.1" "a 1.0 lowered file with ratios"
# diff: the weights, never the plans' set numbers
# (sets interned in another order: tests/unit/test_format11.c, test_diff_ratios)
expect 0 "diff: the map spelling of the same ratios" diff "$rat" "$tmp/rat-map.yaml"
sed 's/^  x: S(0|3:1)R$/  x: S(0|1:3)R/' "$rat" >"$tmp/rat-flip.yaml"
expect 1 "diff: 3:1 against 1:3" diff "$rat" "$tmp/rat-flip.yaml"
has "$out" "placement of 'x': S(0|3:1)R -> S(0|1:3)R; shard ratios of the placement over 'dp': 3:1 -> 1:3" "diff: 3:1 against 1:3"


# the overlap search (plan search --overlap): a four-layer FSDP stack, its
# layer's schedule in every copy, a modeled gain noted, a valid plan that
# verifies EQUAL and replays to the same hash; STRATEGY+overlap is the same
mlp4=$root/tests/lua/data/mlp4-program.yaml
expect 0 "search --overlap" search --program-root "$root" "$mlp4" --mesh dp=2,tp=2 \
  --strategy fsdp --overlap -o "$tmp/ovl.plan.yaml"
has "$err" "overlap: " "search --overlap notes the overlap"
has "$err" "applied to its 3 copies" "search --overlap: the layer's copies"
has "$tmp/ovl.plan.yaml" "overlap:" "search --overlap writes the section"
has "$tmp/ovl.plan.yaml" 'start: "after layers.1.fc2"' "search --overlap: a prefetch"
has "$tmp/ovl.plan.yaml" "overlap: true" "search --overlap: in the provenance"
g=$(sed -n 's/^overlap: .*(\([0-9.]*\)x).*/\1/p' "$err")
check "the overlap's gain ($g) > 1" gt1 "$g"
expect 0 "validate the overlap found" validate "$tmp/ovl.plan.yaml"
expect 0 "verify --reduce the overlap found" verify --reduce "$tmp/ovl.plan.yaml"
has "$out" "EQUAL" "verify --reduce the overlap found"
expect 0 "replay the overlap search" replay --program-root "$root" "$tmp/ovl.plan.yaml"
has "$out" "replayed" "replay the overlap search"
expect 0 "search fsdp+overlap" search --program-root "$root" "$mlp4" --mesh dp=2,tp=2 \
  --strategy fsdp+overlap -o "$tmp/ovl2.plan.yaml"
same "$tmp/ovl.plan.yaml" "$tmp/ovl2.plan.yaml" "fsdp+overlap is --overlap"
# a training step: the gradients' syncs overlapped too, verified EQUAL
expect 0 "search --overlap of a training step" search "$ex/fsdp-tp-overlap.plan.yaml" \
  --strategy fsdp --overlap -o "$tmp/ovlt.plan.yaml"
has "$tmp/ovlt.plan.yaml" "{grad_sync: " "search --overlap: a gradient's sync"
expect 0 "verify --reduce the training overlap" verify --reduce "$tmp/ovlt.plan.yaml"
has "$out" "EQUAL" "verify --reduce the training overlap"
lacks "$out" "NOT EQUAL" "verify --reduce the training overlap"
# a pipeline is not searched: noted, the strategy's plan written
expect 0 "search --overlap of a pipeline" search "$ex/pipeline-1f1b.plan.yaml" \
  --strategy greedy --overlap -o "$tmp/ovlp.plan.yaml"
has "$err" "overlap: not searched" "search --overlap of a pipeline"
lacks "$tmp/ovlp.plan.yaml" "overlap:" "search --overlap of a pipeline"
# cost: with and without overlap, and the exposed communication
expect 0 "cost of the overlap found" cost "$tmp/ovl.plan.yaml"
has "$out" "overlap       step without overlap" "cost: the step without overlap"
has "$out" "exposed communication" "cost: the exposed communication"
expect 0 "cost of a plan without overlap" cost "$ex/mlp-megatron.plan.yaml"
lacks "$out" "without overlap" "cost: no overlap line without overlap"
expect 0 "cost --format json of the overlap found" cost --format json "$tmp/ovl.plan.yaml"
has "$out" '"step_no_overlap"' "cost json: step_no_overlap"
has "$out" '"exposed_collectives"' "cost json: exposed_collectives"
# the streams' picture: a lane per stream and link, well formed
expect 0 "schedule --svg of streams" schedule "$ex/fsdp-tp-overlap.plan.yaml" --svg "$tmp/streams.svg"
has "$out" "streams of" "schedule --svg of streams"
if command -v python3 >/dev/null 2>&1; then
  if python3 - "$tmp/streams.svg" >"$tmp/py.txt" 2>&1 <<'PY'
import sys, xml.etree.ElementTree as ET
ns = "{http://www.w3.org/2000/svg}"
root = ET.parse(sys.argv[1]).getroot()
labels = [e.text for e in root.iter(ns + "text") if e.get("class") == "lane-label"]
assert labels[0] == "compute (stream 0)", labels
assert "stream 1: intra_host" in labels and "stream 2: intra_host" in labels, labels
colls = [e for e in root.iter(ns + "rect") if e.get("class") == "collective"]
streams = {e.get("data-stream") for e in colls}
assert {"0", "1", "2"} <= streams, streams
assert any("chunk 1 of 2" in e.find(ns + "title").text for e in colls)
ops = [e for e in root.iter(ns + "rect") if e.get("class") == "op"]
assert len(ops) >= 8, len(ops)
windows = [e for e in root.iter(ns + "rect") if e.get("class") == "window"]
assert windows, "the bands from start to wait"
PY
  then ok; else bad "schedule --svg of streams: $(cat "$tmp/py.txt")"; fi
fi

lib_report
