#!/usr/bin/env bash
# `make bench`: every benchmark program, one after another. Each prints its own table (medians and ratios
# measured side by side in one run) and writes machine-readable results under build/bench/.
#
# gpuvm-bench (the GPUvm suite, docs/BENCHMARKS.md) runs natively, in pass-through and in the fv modes by default;
# GPUVM_BENCH_ARGS replaces its arguments, e.g.
#   GPUVM_BENCH_ARGS="--bench madd,mmul --mode native,pt --runs 5" make bench
# BENCH_ONLY=gpuvm-bench runs just that program (and its scale run).
# The scale run (GPUvm's Fig 4.10: madd with 1, 2, 4 and 8 VMs at once) follows gpuvm-bench's table;
# GPUVM_SCALE_ARGS replaces its arguments (about a minute here).
set -euo pipefail
build=${1:-build}
mkdir -p "$build/bench"
# 3 runs after a warm-up in native, pt, fv-naive, fv-lazy, fv-optimized: roughly 10-15 minutes here.
suite_args=${GPUVM_BENCH_ARGS:---mode native,pt,fv-naive,fv-lazy,fv-optimized --runs 3 --warmup 1}
scale_args=${GPUVM_SCALE_ARGS:---bench madd --mode native,fv-optimized --scale 1,2,4,8 --runs 3 --warmup 1 --quiet}
for program in gpuvm-device-bench gpuvm-compute-bench gpuvm-trap-bench gpuvm-pt-bench gpuvm-bench; do
  if [[ -n "${BENCH_ONLY:-}" && "$program" != "$BENCH_ONLY" ]]; then
    continue
  fi
  if [[ -x "$build/bench/$program" ]]; then
    echo "=== $program"
    if [[ "$program" == gpuvm-bench ]]; then
      # shellcheck disable=SC2086  # the arguments are meant to split
      "$build/bench/$program" $suite_args --out "$build/bench"
      echo "=== gpuvm-bench scale run"
      # shellcheck disable=SC2086  # the arguments are meant to split
      "$build/bench/$program" $scale_args --out "$build/bench"
    else
      "$build/bench/$program" --out "$build/bench"
    fi
  fi
done
# GPUvm's fairness experiment (docs/SCHEDULER.md): FIFO/CREDIT/BAND on 2/4/8 VMs and unequal shares,
# CSVs and a PNG per case: on real fv VMs under $build/bench/fairness-fv (about 10 minutes), then on
# the synthetic timed engine under $build/bench/fairness (about 2 minutes).
if [[ ( -z "${BENCH_ONLY:-}" || "$BENCH_ONLY" == gpuvm-fairness-bench ) && -x "$build/bench/gpuvm-fairness-bench" ]]; then
  echo "=== gpuvm-fairness-bench --engine fv"
  "$build/bench/gpuvm-fairness-bench" --engine fv --duration-s 6 --out "$build/bench/fairness-fv"
  echo "=== gpuvm-fairness-bench (synthetic engine)"
  "$build/bench/gpuvm-fairness-bench" --out "$build/bench/fairness"
fi
