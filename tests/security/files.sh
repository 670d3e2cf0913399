#!/bin/sh
# Untrusted files and hostile targets: what the `plan` tool reads (FIFOs,
# devices, oversized files, program paths that leave the plan's folder, a
# foreign file's content in errors), what it writes over (devices, FIFOs,
# symlinks, hard links, modes, the temporary file when a signal ends the
# run) and how strictly it takes numbers on the command line. Everything
# stays in a temporary folder; every run is bounded by `timeout`.
#
# usage: sh tests/security/files.sh PATH/TO/plan
# Prints "security-files: N passed, M failed"; exits non-zero on a failure.

plan=${1:?usage: files.sh PATH/TO/plan}
case $plan in /*) ;; *) plan=$(pwd)/$plan ;; esac
root=$(cd "$(dirname "$0")/../.." && pwd)
ex=$root/examples
RUN_SECONDS=${RUN_SECONDS:-20}
. "$root/tests/lib.sh"
lib_init security-files

mlp=$ex/mlp-megatron.plan.yaml
d=$tmp/plans
mkdir -p "$d/sub" "$tmp/outside"
cp "$ex/mlp-program.yaml" "$d/mlp-program.yaml"
cp "$ex/mlp-program.yaml" "$tmp/outside/mlp-program.yaml"
printf 'secret_password: hunter2\n' >"$tmp/outside/secret.yaml"
# with_path NAME PATH: a copy of the by-path example whose program is PATH
with_path() {
  sed "s#^  path: mlp-program.yaml#  path: $2#" "$ex/mlp-by-path.plan.yaml" >"$d/$1"
  grep -q "^  path: $2\$" "$d/$1" || echo "setup: no path in $1"
}

# ---- reading: only regular files, never blocking, capped -----------------

mkfifo "$tmp/fifo"
expect 2 "a FIFO as the plan" validate "$tmp/fifo"
has "$err" "FIFO, not a regular file" "a FIFO as the plan"
expect 2 "/dev/zero as the plan" validate /dev/zero
has "$err" "character device" "/dev/zero as the plan"
expect 2 "/dev/urandom as the plan" hash /dev/urandom
expect 2 "a folder as the plan" validate "$d"
expect 2 "fmt of a FIFO" fmt "$tmp/fifo"
expect 2 "upgrade of a FIFO" upgrade "$tmp/fifo"
expect 2 "lower of /dev/zero" lower /dev/zero
expect 2 "verify of a FIFO" verify "$tmp/fifo"
expect 2 "search over a FIFO" search "$tmp/fifo" --mesh dp=2 -o "$tmp/s.yaml"
check "search over a FIFO writes nothing" [ ! -e "$tmp/s.yaml" ]
expect 2 "run a FIFO script" run "$tmp/fifo"
has "$err" "FIFO, not a regular file" "run a FIFO script"
expect 2 "a FIFO calibration file" cost --calibration "$tmp/fifo" "$mlp"
expect 2 "a FIFO as the edited program" validate --program "$tmp/fifo" "$mlp"
printf '#!/usr/bin/env plan run\nprint(arg[1])\nerror("at line 3")\n' >"$tmp/script.lua"
expect 1 "a script with a shebang line keeps its line numbers" run "$tmp/script.lua" x
has "$err" "script.lua:3: at line 3" "a script with a shebang line keeps its line numbers"
# over the 256 MiB cap: refused from its size (sparse, nothing written)
truncate -s $((256 * 1024 * 1024 + 1)) "$tmp/huge.yaml"
expect 2 "a plan over the cap" validate "$tmp/huge.yaml"
has "$err" "256 MiB" "a plan over the cap"

# ---- format 1.1 lists: refused from their count, fast and positioned -----

v11() { # FILE: a 1.1 plan of 8 devices, its tail from stdin
  { printf 'libplan: "1.1"\nprogram:\n  tensors:\n    x: {shape: [8, 16]}\n'
    printf '    w: {shape: [16, 4], role: param}\n  ops:\n'
    printf '    - {name: fc, op: matmul, in: [x, w], out: y}\n'
    printf 'mesh:\n  axes: [dp=2, tp=4]\n'
    cat; } >"$1"
}
# 2^20 shard weights for an axis of 2: the map form (a list) ...
awk 'BEGIN { printf "placements:\n  x: {dp: {shard: 0, ratios: [1"
             for (i = 1; i < 1048576; i++) printf ", 1"; print "]}}" }' |
  v11 "$d/weights.plan.yaml"
expect_in 2 "2^20 shard weights" 10 validate "$d/weights.plan.yaml"
has "$err" "weights.plan.yaml:11:30: error: 1048576 shard weights for mesh axis dp of size 2" "2^20 shard weights"
# ... and the compact form (one 2 MiB scalar, over the scalar cap)
awk 'BEGIN { printf "placements:\n  x: \"S(0|1"
             for (i = 1; i < 1048576; i++) printf ":1"; print ")R\"" }' |
  v11 "$d/weights-compact.plan.yaml"
expect_in 2 "2^20 compact shard weights" 10 validate "$d/weights-compact.plan.yaml"
has "$err" "weights-compact.plan.yaml:11:" "2^20 compact shard weights: positioned"
# 10^6 device labels for a mesh of 8 devices
awk 'BEGIN { printf "  hardware:\n    profiles: {a: h100-sxm}\n    devices: [a"
             for (i = 1; i < 1000000; i++) printf ", a"; print "]" }' |
  v11 "$d/labels.plan.yaml"
expect_in 2 "10^6 device labels" 10 validate "$d/labels.plan.yaml"
has "$err" "labels.plan.yaml:12:14: error: hardware devices lists 1000000 labels but the mesh has 8 devices" "10^6 device labels"
absent "$d/labels.plan.yaml.tmp" "10^6 device labels: nothing written"

mkfifo "$d/prog.fifo"
with_path fifo.plan.yaml prog.fifo
expect 2 "a FIFO as the program" validate "$d/fifo.plan.yaml"
has "$err" "fifo.plan.yaml:14:" "a FIFO as the program: the plan's position"
truncate -s $((256 * 1024 * 1024 + 1)) "$d/huge-program.yaml"
with_path huge.plan.yaml huge-program.yaml
expect 2 "a program over the cap" validate "$d/huge.plan.yaml"
has "$err" "256 MiB" "a program over the cap"

# ---- program paths stay in the plan's folder tree ------------------------

with_path ok.plan.yaml mlp-program.yaml
expect 0 "a program beside the plan" validate "$d/ok.plan.yaml"
cp "$d/ok.plan.yaml" "$d/sub/down.plan.yaml"
with_path down.plan.yaml sub/../mlp-program.yaml
expect 0 "a path that stays inside" validate "$d/down.plan.yaml"
with_path up.plan.yaml ../outside/secret.yaml
expect 2 "a ../ program path" validate "$d/up.plan.yaml"
has "$err" "leads outside the folder" "a ../ program path"
lacks "$err" "secret_password" "a ../ program path"
with_path abs.plan.yaml "$tmp/outside/mlp-program.yaml"
expect 2 "an absolute program path" validate "$d/abs.plan.yaml"
has "$err" "leads outside the folder" "an absolute program path"
with_path dev.plan.yaml /dev/zero
expect 2 "/dev/zero as the program" validate "$d/dev.plan.yaml"
ln -s "$tmp/outside/mlp-program.yaml" "$d/escape.yaml"
with_path link.plan.yaml escape.yaml
expect 2 "a symlink out of the folder" validate "$d/link.plan.yaml"
has "$err" "leads outside the folder" "a symlink out of the folder"
# allowed with a root that holds them
expect 0 "an absolute path under --program-root" validate --program-root "$tmp" "$d/abs.plan.yaml"
expect 0 "--program-root before the verb" --program-root "$tmp" validate "$d/link.plan.yaml"
expect 0 "a root elsewhere keeps the plan's own folder" validate --program-root "$tmp/outside" "$d/ok.plan.yaml"
expect 2 "a root elsewhere allows only itself" validate --program-root "$tmp/outside/x" "$d/abs.plan.yaml"
PLAN_PROGRAM_ROOT=$tmp timeout 20 "$plan" hash "$d/abs.plan.yaml" >"$out" 2>"$err"
check "PLAN_PROGRAM_ROOT allows it too" [ $? -eq 0 ]
expect 2 "--program-root without a folder" validate "$d/abs.plan.yaml" --program-root
expect 2 "/dev/zero under --program-root /" validate --program-root / "$d/dev.plan.yaml"
has "$err" "character device" "/dev/zero under --program-root /"
# a program named on the command line may be anywhere
(cd "$tmp/outside" && timeout 20 "$plan" search "$d/mlp-program.yaml" --mesh dp=2 \
   -o "$d/found.plan.yaml" >"$out" 2>"$err")
check "search of a program outside the working folder" [ $? -eq 0 ]
expect 0 "its plan, beside the program, loads" validate "$d/found.plan.yaml"
# a foreign file is not quoted, even when a root lets the path through
expect 2 "a foreign file as the program" validate --program-root "$tmp" "$d/up.plan.yaml"
lacks "$err" "secret_password" "a foreign file as the program"
lacks "$err" "hunter2" "a foreign file as the program"
has "$err" "not a libplan file" "a foreign file as the program"
printf 'secret_password: hunter2\nlibplan: "1.0"\n' >"$tmp/late.yaml"
expect 2 "a foreign key before the version" validate "$tmp/late.yaml"
lacks "$err" "secret_password" "a foreign key before the version"
printf 'mesh: {axes: [dp=2]}\nlibplan: "1.0"\nzzz: 1\n' >"$tmp/late-plan.yaml"
expect 2 "a plan's key before the version still reads as a plan" validate "$tmp/late-plan.yaml"
has "$err" "unknown field 'zzz'" "a plan's key before the version still reads as a plan"
# a program path that is the plan itself, or a plan by path
with_path self.plan.yaml self.plan.yaml
expect 2 "a program path that is the plan itself" validate "$d/self.plan.yaml"
has "$err" "names this plan file itself" "a program path that is the plan itself"
with_path chain.plan.yaml ok.plan.yaml
expect 2 "a program path to a plan by path" validate "$d/chain.plan.yaml"
has "$err" "must hold its program inline" "a program path to a plan by path"

# ---- writing: regular files and new names only ---------------------------

w=$tmp/w
mkdir -p "$w"
"$plan" fmt "$mlp" >"$tmp/canonical.yaml"
ln -s /dev/null "$w/null.yaml"
expect 2 "-o a symlink to /dev/null" fmt -o "$w/null.yaml" "$mlp"
has "$err" "character device" "-o a symlink to /dev/null"
check "/dev/null is still a character device" [ -c /dev/null ]
check "the symlink is still a symlink" [ -L "$w/null.yaml" ]
mkfifo "$w/fifo"
expect 2 "-o a FIFO" fmt -o "$w/fifo" "$mlp"
check "the FIFO is still a FIFO" [ -p "$w/fifo" ]
expect 2 "--svg a FIFO" schedule --svg "$w/fifo" "$ex/pipeline-1f1b.plan.yaml"
expect 2 "--out a FIFO" verify --report json --out "$w/fifo" "$mlp"
expect 2 "lower -o a FIFO" lower -o "$w/fifo" "$mlp"
check "the FIFO is still a FIFO after them" [ -p "$w/fifo" ]
if mknod "$w/cdev" c 1 3 2>/dev/null; then
  expect 2 "-o a character device" fmt -o "$w/cdev" "$mlp"
  check "the device is still a device" [ -c "$w/cdev" ]
fi
expect 2 "-o a folder" fmt -o "$w" "$mlp"
# a symlink to standard output that is a pipe
ln -s /proc/self/fd/1 "$w/stdout.yaml"
( timeout 20 "$plan" fmt -o "$w/stdout.yaml" "$mlp" 2>"$err"; echo $? >"$tmp/rc" ) | cat >/dev/null
check "-o a symlink to a pipe is refused" [ "$(cat "$tmp/rc")" -eq 2 ]
check "the symlink to standard output stays" [ -L "$w/stdout.yaml" ]
# -o -: standard output, no file named '-'
(cd "$w" && timeout 20 "$plan" fmt -o - "$mlp" >"$out" 2>"$err")
check "fmt -o - writes standard output" cmp -s "$out" "$tmp/canonical.yaml"
check "fmt -o - makes no file '-'" [ ! -e "$w/-" ]
# a symlink to a regular file: the target is written, the link stays
cp "$mlp" "$w/real.yaml"
ln -s real.yaml "$w/link.yaml"
expect 0 "fmt --in-place through a symlink" fmt --in-place "$w/link.yaml"
check "the link is still a link" [ -L "$w/link.yaml" ]
check "its target got the canonical text" cmp -s "$w/real.yaml" "$tmp/canonical.yaml"
# modes kept; a new file gets the umask's
cp "$mlp" "$w/private.yaml"
chmod 600 "$w/private.yaml"
expect 0 "fmt --in-place of a 0600 file" fmt --in-place "$w/private.yaml"
check "0600 stays 0600" [ "$(stat -c %a "$w/private.yaml")" = 600 ]
cp "$mlp" "$w/group.yaml"
chmod 640 "$w/group.yaml"
expect 0 "fmt -o over a 0640 file" fmt -o "$w/group.yaml" "$mlp"
check "0640 stays 0640" [ "$(stat -c %a "$w/group.yaml")" = 640 ]
(umask 027 && timeout 20 "$plan" fmt -o "$w/new.yaml" "$mlp" >/dev/null 2>&1)
check "a new file is 0666 less the umask" [ "$(stat -c %a "$w/new.yaml")" = 640 ]
# hard links: refused, both names keep the old text
cp "$mlp" "$w/hard1.yaml"
ln "$w/hard1.yaml" "$w/hard2.yaml"
expect 2 "fmt --in-place of a hard-linked file" fmt --in-place "$w/hard1.yaml"
has "$err" "hard links" "fmt --in-place of a hard-linked file"
check "the hard link is kept" [ "$(stat -c %h "$w/hard1.yaml")" = 2 ]
check "its text is unchanged" cmp -s "$w/hard2.yaml" "$mlp"
# no temporary file left by any of the above
left=$(find "$tmp" -name '.*.tmp.*')
check "no temporary files left: $left" [ -z "$left" ]

# ---- signals: SIGTERM or SIGINT mid-run leaves no temporary file ---------

python3 "$root/bench/gen_plan.py" --ops 4000 -o "$tmp/big.yaml" >/dev/null 2>&1
"$plan" fmt "$tmp/big.yaml" >"$tmp/big.canonical"
for delay in 0.05 0.1 0.15 0.2 0.25 0.3; do
  for sig in TERM INT; do
    cp "$mlp" "$w/target.yaml"
    "$plan" fmt -o "$w/target.yaml" "$tmp/big.yaml" >/dev/null 2>&1 &
    pid=$!
    sleep "$delay"
    kill -s "$sig" "$pid" 2>/dev/null
    { wait "$pid"; } 2>/dev/null
    left=$(find "$w" -name '.target.yaml.tmp.*')
    check "SIG$sig after ${delay}s leaves no temporary file: $left" [ -z "$left" ]
    # the target is the old text or the new one, never half of either
    if cmp -s "$w/target.yaml" "$mlp" || cmp -s "$w/target.yaml" "$tmp/big.canonical"; then
      ok
    else
      bad "SIG$sig after ${delay}s: the target is neither old nor new"
    fi
  done
done

# ---- numbers on the command line: strict, exit 2, the flag named ---------

prog=$ex/mlp-program.yaml
num() { # FLAG NAME CMD...: exit 2, the message names FLAG
  flag=$1 name=$2
  shift 2
  expect 2 "$name" "$@"
  has "$err" "$flag" "$name"
}
for v in abc "" 12x " 5" 1e3 0x10 "5 " 99999999999999999999; do
  num --seed "search --seed '$v'" search "$prog" --mesh dp=2 --seed "$v" -o "$tmp/n.yaml"
done
for v in -5 0 abc +5 1.5; do
  num --limit "search --limit '$v'" search "$prog" --mesh dp=2 --strategy dp --limit "$v" -o "$tmp/n.yaml"
done
for v in 0 2147483648 -1 x; do
  num --width "search --width '$v'" search "$prog" --mesh dp=2 --strategy beam --width "$v" -o "$tmp/n.yaml"
done
for v in 0 -1 nan inf 1e400 "" abc " 1"; do
  num --seconds "search --seconds '$v'" search "$prog" --mesh dp=2 --strategy ilp --seconds "$v" -o "$tmp/n.yaml"
done
check "no plan written by a bad number" [ ! -e "$tmp/n.yaml" ]
for v in -1 abc "" 1x +3 18446744073709551616; do
  num --seed "verify --seed '$v'" verify --seed "$v" "$mlp"
done
for v in 0 -1 abc nan inf ""; do
  num --timeout "verify --timeout '$v'" verify --distributed "$tmp/rdv" --timeout "$v" "$mlp"
done
for v in " 1" inf nan -1 abc 0x1; do
  num --rtol "verify --rtol '$v'" verify --mode float --rtol "$v" --atol 0 "$mlp"
done
for v in 0 -1 1x +3 1000001 ""; do
  num --microbatches "schedule --microbatches '$v'" schedule --microbatches "$v" "$ex/pipeline-1f1b.plan.yaml"
done
for v in F=-1 F=+1 F=1x F= F=4294967297; do
  num --durations "schedule --durations '$v'" schedule --durations "$v" "$ex/pipeline-1f1b.plan.yaml"
done
for v in abc " 0.5" 0x10 inf nan 1e400 ""; do
  num --set "cost --set 'efficiency.matmul=$v'" cost --set "efficiency.matmul=$v" "$mlp"
done
RANK=abc WORLD_SIZE=2 timeout 20 "$plan" verify --distributed "$tmp/rdv2" "$mlp" >"$out" 2>"$err"
check "RANK=abc is a usage error" [ $? -eq 2 ]
RANK=0 WORLD_SIZE=" 2" timeout 20 "$plan" verify --distributed "$tmp/rdv3" "$mlp" >"$out" 2>"$err"
check "WORLD_SIZE=' 2' is a usage error" [ $? -eq 2 ]
# the good spellings still work
expect 0 "search --seed -3 --limit 8" search "$prog" --mesh dp=2 --strategy dp --seed -3 --limit 8 -o "$tmp/good.yaml"
expect 0 "verify --seed 7" verify --seed 7 "$mlp"
expect 0 "verify --mode float --rtol 1e-3 --atol .5" verify --mode float --rtol 1e-3 --atol .5 "$mlp"
expect 0 "cost --set efficiency.matmul=0.5" cost --set efficiency.matmul=0.5 "$mlp"

# ---- a run the machine cannot hold names its file -------------------------
# (refused before it runs, exit 3: cannot run here; running out of memory
# mid-run is tests/cli/memory.sh's)

sed 's/batch=8, hidden=16/batch=1099511627776, hidden=16/' "$mlp" >"$tmp/huge-shape.yaml"
expect 3 "verify of a huge shape" verify "$tmp/huge-shape.yaml"
has "$err" "huge-shape.yaml: error: verifying" "verify of a huge shape"
has "$err" "--reduce verifies the same sharding" "verify of a huge shape"

lib_report
