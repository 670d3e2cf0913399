#!/bin/sh
# Installs the Python packages the tests use, when missing or at another
# version: pytest (the runner of tests/python; without it they run under
# unittest), PyTorch, for the libplan.torch bridge's tests (CPU, gloo), and
# Hugging Face transformers and torchtitan, whose models (built from small
# configs with random weights, nothing downloaded) the model-import tests
# trace. They are pinned: the tests were measured against these versions.
# pip installs them; when it cannot, the suite still runs and the tests that
# need them skip and say why.
#
# Measured on the 2-core machine: the torch 2.15.0 wheel (539 MB) downloads
# in about 9 s; transformers 5.24.0 installs in 20 s (with numpy,
# safetensors, tokenizers and huggingface_hub).
# ensure SPEC [PIP-FLAGS]: installs SPEC (NAME or NAME==VERSION) unless that
# version is there already.
ensure() {
  spec=$1
  shift
  name=${spec%%==*}
  want=${spec#"$name"}
  want=${want#==}
  have=$(python3 -c "
import importlib.metadata as m
try:
    print(m.version('$name').split('+')[0])
except m.PackageNotFoundError:
    pass" 2>/dev/null)
  if [ -n "$have" ] && { [ -z "$want" ] || [ "$have" = "$want" ]; }; then
    return 0
  fi
  echo "deps: installing $spec with pip (for the Python tests)"
  if ! python3 -m pip install --quiet --disable-pip-version-check "$@" \
      "$spec"; then
    echo "deps: $spec could not be installed; the Python tests go on without it" >&2
  fi
}

for spec in pytest torch==2.15.0 transformers==5.24.0; do
  ensure "$spec"
done
# torchtitan's Llama 3 (its model and its own tensor-parallel plan) for the
# bridge's import tests; its dependencies (torchdata, datasets, tensorboard,
# tyro and a few small ones) come with it. Measured on the 2-core machine:
# about 40 s.
ensure torchtitan==0.2.2
exit 0
