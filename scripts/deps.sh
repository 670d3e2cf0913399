#!/bin/sh
# Installs the Debian packages libplan builds and tests with, when missing.
# As root it runs apt-get; otherwise it prints the exact command to run.
set -e
PKGS="gcc g++ make pkg-config libyaml-dev libxxhash-dev libcmocka-dev liblua5.4-dev lua5.4 libopenblas-dev coinor-libcbc-dev python3 clang-format cppcheck lua-check clang libclang-rt-14-dev libopenmpi-dev openmpi-bin luarocks libedit2"
missing=""
for p in $PKGS; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing="$missing $p"
  fi
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = "0" ]; then
  echo "deps: installing$missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends $missing >/dev/null
else
  echo "deps: missing Debian packages:$missing" >&2
  echo "deps: run as root: apt-get install -y$missing" >&2
  exit 2
fi
