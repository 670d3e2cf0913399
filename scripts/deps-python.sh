#!/bin/sh
# Installs the Python packages the tests use, when missing: PyTorch, for the
# libplan.torch bridge's tests (CPU, gloo). pip installs it; when it cannot,
# those tests skip and say why, and the rest of the suite still runs.
if python3 -c "import torch" >/dev/null 2>&1; then
  exit 0
fi
echo "deps: installing torch with pip (for the PyTorch bridge's tests)"
if ! python3 -m pip install --quiet --disable-pip-version-check torch; then
  echo "deps: torch could not be installed; the PyTorch bridge's tests will skip" >&2
fi
exit 0
