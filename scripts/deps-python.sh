#!/bin/sh
# Installs the Python packages the tests use, when missing: pytest (the
# runner of tests/python; without it they run under unittest) and PyTorch,
# for the libplan.torch bridge's tests (CPU, gloo). pip installs them; when
# it cannot, the suite still runs and the torch tests skip and say why.
for mod in pytest torch; do
  if python3 -c "import $mod" >/dev/null 2>&1; then
    continue
  fi
  echo "deps: installing $mod with pip (for the Python tests)"
  if ! python3 -m pip install --quiet --disable-pip-version-check "$mod"; then
    echo "deps: $mod could not be installed; the Python tests go on without it" >&2
  fi
done
exit 0
