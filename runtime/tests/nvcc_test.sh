#!/usr/bin/env bash
# End-to-end: a tutorial-style CUDA program built by stock nvcc (default flags, -cudart shared) runs
# unmodified on gpuvm's libcudart.so.13 / libcuda.so.1, and it is provably ours that ran.
#   nvcc_test.sh <source .cu> <our library dir> <work dir> <have translator: 0|1>
# Exits 77 (CTest: skipped) with a message when nvcc is absent.
set -euo pipefail
src=$1 lib=$2 work=$3 have_translator=$4
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
if [[ ! -x "$NVCC" ]]; then
  echo "SKIP: nvcc not found at $NVCC (set NVCC=...); the stock-nvcc runtime test needs CUDA 13"
  exit 77
fi
mkdir -p "$work"
exe="$work/$(basename "$src" .cu)"
"$NVCC" -cudart shared -o "$exe" "$src"

# The binary imports the runtime with CUDA 13's symbol versions; ours must define them.
nm -D "$exe" | grep -q '__cudaRegisterFatBinary@libcudart.so.13' ||
  { echo "FAIL: $exe does not import __cudaRegisterFatBinary@libcudart.so.13"; exit 1; }

# Under `make asan` our libraries are instrumented but nvcc's binary is not: the sanitizer runtimes must be
# loaded first.
preload=""
if [[ "${GPUVM_SANITIZED:-0}" == 1 ]]; then
  for rt in libasan.so libubsan.so; do
    path=$(${CXX:-c++} -print-file-name=$rt)
    [[ -f "$path" ]] && preload="$preload $path"
  done
fi
set +e
LD_PRELOAD="$preload" LD_LIBRARY_PATH="$lib" LD_DEBUG=libs "$exe" >"$work/out.txt" 2>"$work/ld.txt"
rc=$?
set -e
cat "$work/out.txt"
# Proof that our libraries ran, not NVIDIA's (/usr/local/cuda-13.0/lib): the dynamic loader's own record.
grep -q "calling init: $lib/libcudart.so.13" "$work/ld.txt" ||
  { echo "FAIL: the loader did not run $lib/libcudart.so.13"; grep -i cudart "$work/ld.txt" | head; exit 1; }
grep -q "calling init: $lib/libcuda.so.1" "$work/ld.txt" ||
  { echo "FAIL: the loader did not run $lib/libcuda.so.1"; exit 1; }
if grep -q "/usr/local/cuda" "$work/ld.txt"; then
  echo "FAIL: a library from /usr/local/cuda was loaded"; grep "/usr/local/cuda" "$work/ld.txt" | head; exit 1
fi
grep -q "device: .*gpuvm" "$work/out.txt" || { echo "FAIL: the device is not gpuvm's"; exit 1; }

if [[ "$have_translator" != 1 ]]; then
  # Without the JIT the launch must fail with CUDA's error for it, reported through our runtime.
  grep -q "cudaErrorJitCompilerNotFound" "$work/ld.txt" "$work/out.txt" ||
    { echo "FAIL: expected cudaErrorJitCompilerNotFound without the translator"; exit 1; }
  echo "OK (no translator in this build: the program ran on gpuvm up to the JIT)"
  exit 0
fi
[[ $rc -eq 0 ]] || { echo "FAIL: exit code $rc"; grep -v "^ *[0-9]*:" "$work/ld.txt" | tail -5; exit 1; }
grep -q "^PASSED$" "$work/out.txt" || { echo "FAIL: no PASSED"; exit 1; }
echo "OK: stock nvcc binary ran on gpuvm's runtime"
