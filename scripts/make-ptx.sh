#!/usr/bin/env bash
# `make ptx`: regenerates bench/kernels/*.ptx from the .cu sources with nvcc. The .ptx files are committed so
# the build never needs nvcc; run this where nvcc exists after changing a kernel, and commit the result.
# The target is pinned (sm_75, nvcc 13's default, PTX ISA 9.0) so a newer nvcc does not silently change it.
set -euo pipefail
nvcc=${1:-nvcc}
if ! command -v "$nvcc" >/dev/null 2>&1; then
  echo "make ptx: nvcc not found ($nvcc); the committed .ptx files stay as they are" >&2
  exit 1
fi
cd "$(dirname "$0")/../bench/kernels"
shopt -s nullglob
sources=(*.cu)
if ((${#sources[@]} == 0)); then
  echo "make ptx: no .cu files in bench/kernels" >&2
  exit 1
fi
for cu in "${sources[@]}"; do
  "$nvcc" -ptx -arch=sm_75 -o "${cu%.cu}.ptx" "$cu"
  echo "ptx: ${cu%.cu}.ptx"
done
