#!/usr/bin/env bash
# Installs every Debian package gpuvm needs, and only the missing ones. Idempotent: a machine that already
# has everything costs one dpkg-query and no network. `make test`, `make run` and `make deps` call it.
set -euo pipefail

PACKAGES=(
  # build
  cmake ninja-build g++ pkg-config make git
  # tests, benchmarks, fuzzing (clang's libFuzzer runtime), formatting
  libgtest-dev libgmock-dev libbenchmark-dev clang libclang-rt-14-dev clang-format
  # hardware and hypervisor edges
  libxen-dev libdrm-dev libpciaccess-dev
  # runtime/: compressed entries in nvcc fat binaries (ZSTD since CUDA 13, LZ4 before)
  libzstd-dev liblz4-dev
  # plots for the benchmark reports
  gnuplot-nox
  # make package (CPack's DEB generator: dpkg-shlibdeps, fakeroot), the unit's check, the terminal
  # `gpuvm-ctl top` is tested in
  dpkg-dev fakeroot systemd tmux
  # Prometheus' own parser for the metrics test
  python3-prometheus-client
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done

if ((${#missing[@]} == 0)); then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
# A fresh machine has empty package lists; refresh them once and retry the install if it fails.
if ! $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"; then
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
