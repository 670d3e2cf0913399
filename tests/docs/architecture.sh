#!/bin/sh
# docs/architecture.md names every source file of the library, the
# verifier, the runners, the frontends and the build scripts, so a file
# added without its line in the module map fails here. A file counts as
# named when its path, or its name within its folder's table, appears in
# backquotes: `lower/redist.c` or `redist.c`.
# Usage: architecture.sh [REPO_ROOT]
set -u
root=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
doc=$root/docs/architecture.md
cd "$root" || exit 2
[ -f "$doc" ] || { echo "architecture: $doc is missing"; exit 1; }
n=0; fail=0
for f in $(git ls-files 'libplan/src/*' 'libplan/include/*' 'verifier/*' 'runners/*' \
             'cli/*' 'lua/*' 'bindings/python/*.py' 'bindings/python/libplan/*.py' \
             'scripts/*' | grep -E '\.(c|h|cu|cuh|lua|py|sh|mk)$'); do
  n=$((n+1))
  base=${f##*/}
  # the path below its top folder (lower/redist.c, cpu/kernels.c, libplan/_core.py)
  rel=${f#*/}; rel2=${rel#*/}
  if grep -qF "\`$base\`" "$doc" || grep -qF "\`$f\`" "$doc" || grep -qF "\`$rel\`" "$doc" \
     || grep -qF "\`$rel2\`" "$doc"; then
    :
  else
    fail=$((fail+1)); echo "architecture: docs/architecture.md does not name $f"
  fi
done
echo "architecture: $((n-fail)) passed, $fail failed"
[ "$fail" -eq 0 ]
