#!/bin/sh
# Runs every cmocka unit test binary given; fails if any fails.
fail=0; n=0
for t in "$@"; do
  n=$((n+1))
  if ! "$t"; then echo "FAILED: $t"; fail=$((fail+1)); fi
done
echo "unit: $((n-fail)) passed, $fail failed"
[ "$fail" -eq 0 ]
