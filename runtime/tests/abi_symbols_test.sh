#!/usr/bin/env bash
# Our libcuda.so.1 and libcudart.so.13 export every function NVIDIA's CUDA 13 libraries export,
# with the same symbol versions (none in libcuda, "libcudart.so.13" in libcudart): what the
# implemented functions and the not-supported tables (runtime/abi/*.def) cover together.
#   abi_symbols_test.sh <our library dir>
# NVIDIA's lists are read from the CUDA toolkit (CUDA_HOME, default /usr/local/cuda): its stub
# libcuda.so and its libcudart.so.13. Exits 77 (CTest: skipped) with a message without them.
set -euo pipefail
ours=$1
cuda=${CUDA_HOME:-/usr/local/cuda}
nv_cuda=$cuda/lib64/stubs/libcuda.so
nv_cudart=$cuda/lib64/libcudart.so.13
for f in "$nv_cuda" "$nv_cudart"; do
  if [[ ! -f "$f" ]]; then
    echo "SKIP: $f not found (set CUDA_HOME=...); the ABI comparison needs the CUDA 13 toolkit"
    exit 77
  fi
done

# name@version (version empty when there is none), functions and other defined symbols alike,
# leaving out the version node's own symbol.
exports() {
  nm -D --defined-only "$1" | awk '{print $3}' | grep -v '^libcudart\.so\.13$' |
    sed -E 's/@@?/@/; /@/!s/$/@/' | sort -u
}

status=0
compare() {
  local name=$1 theirs=$2 mine=$3
  local missing extra
  missing=$(comm -23 <(exports "$theirs") <(exports "$mine"))
  extra=$(comm -13 <(exports "$theirs") <(exports "$mine"))
  echo "$name: NVIDIA exports $(exports "$theirs" | wc -l), gpuvm $(exports "$mine" | wc -l)"
  if [[ -n "$missing" ]]; then
    echo "FAIL: $name lacks $(echo "$missing" | wc -l) of NVIDIA's exports (name@version):"
    echo "$missing" | head -50
    status=1
  fi
  if [[ -n "$extra" ]]; then
    echo "note: $name exports what NVIDIA's does not:"
    echo "$extra" | head -20
  fi
}
compare libcuda.so.1 "$nv_cuda" "$ours/libcuda.so.1"
compare libcudart.so.13 "$nv_cudart" "$ours/libcudart.so.13"
[[ $status == 0 ]] && echo "PASS: every NVIDIA export is there, with its version"
exit $status
