#!/bin/sh
# No tracked file cites a document outside the repository: every pointer a
# reader follows must lead to a file of the repository. The pattern is
# built from pieces so that this script does not match itself.
# Usage: citations.sh [REPO_ROOT]
set -u
root=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$root" || exit 2
d=DESIGN; o=OPS; s=STYLE
pat="$d §|shared/($d|$o|$s)|\\b$o\\.md|$d\\.md|$s\\.md"
hits=$(git grep -nE "$pat" -- . ':(exclude)tests/docs' 2>/dev/null)
if [ -n "$hits" ]; then
  echo "$hits"
  echo "citations: documents outside the repository are cited (above)"
  exit 1
fi
echo "citations: no citation of documents outside the repository"
