#!/usr/bin/env bash
# `make ptx`: regenerates bench/kernels/*.ptx from the .cu sources with nvcc. The .ptx files are committed so
# the build never needs nvcc; run this where nvcc exists after changing a kernel.
set -euo pipefail
nvcc=${1:-nvcc}
if ! command -v "$nvcc" >/dev/null 2>&1; then
  echo "make ptx: nvcc not found ($nvcc); the committed .ptx files stay as they are" >&2
  exit 1
fi
cd "$(dirname "$0")/../bench/kernels"
for cu in *.cu; do
  "$nvcc" -ptx -o "${cu%.cu}.ptx" "$cu"
  echo "ptx: ${cu%.cu}.ptx"
done
