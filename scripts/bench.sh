#!/usr/bin/env bash
# `make bench`: every benchmark program, one after another. Each prints its own table (medians and ratios
# measured side by side in one run) and writes machine-readable results under build/bench/.
set -euo pipefail
build=${1:-build}
mkdir -p "$build/bench"
for program in gpuvm-device-bench gpuvm-compute-bench gpuvm-trap-bench gpuvm-pt-bench gpuvm-bench; do
  if [[ -x "$build/bench/$program" ]]; then
    echo "=== $program"
    "$build/bench/$program" --out "$build/bench"
  fi
done
