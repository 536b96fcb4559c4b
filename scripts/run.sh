#!/usr/bin/env bash
# `make run`: the main job on the embedded default. Today that is the software GPU's device benchmark;
# it grows into the multi-VM scenario as the aggregator lands (see README).
set -euo pipefail
build=${1:-build}
exec "$build/bench/gpuvm-device-bench"
