#!/usr/bin/env bash
# `make ptx`: regenerates bench/kernels/*.ptx from the .cu sources with nvcc. The .ptx files are committed so
# the build never needs nvcc; run this where nvcc exists after changing a kernel, and commit the result.
# The target is pinned (sm_75, nvcc 13's default, PTX ISA 9.0) so a newer nvcc does not silently change it.
# It also refreshes the PTX parser's own fuzz seeds (ptx/fuzz/ptx_parser_fuzz/): one module built with
# -lineinfo and one with -G, whose debug directives and sections the parser skips. The corpus itself
# reaches the fuzz targets at build time (gpuvm_fuzz KERNEL_CORPUS_SEEDS), not as committed copies.
set -euo pipefail
nvcc=${1:-nvcc}
if ! command -v "$nvcc" >/dev/null 2>&1; then
  echo "make ptx: nvcc not found ($nvcc); the committed .ptx files stay as they are" >&2
  exit 1
fi
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root/bench/kernels"
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
seeds="$root/ptx/fuzz/ptx_parser_fuzz"
mkdir -p "$seeds"
"$nvcc" -ptx -arch=sm_75 -lineinfo -o "$seeds/calls_lineinfo.ptx" calls.cu
"$nvcc" -ptx -arch=sm_75 -G -o "$seeds/calls_debug.ptx" calls.cu
echo "ptx: fuzz seeds in ptx/fuzz/ptx_parser_fuzz"
