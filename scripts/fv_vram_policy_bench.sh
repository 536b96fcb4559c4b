#!/usr/bin/env bash
# Static slices vs dynamic VRAM (docs/FULL-VIRTUALIZATION.md "Partitioning"), side by side in one run:
# for each round, for each policy (the order alternating), a fresh gpuvm-aggregator with
# --fv-vram-policy POLICY, then VMS fv-optimized VMs (96-...MiB) running the same suite case at once;
# the wall time until the last VM exits is one sample. Prints the median per policy and the ratio.
#
#   scripts/fv_vram_policy_bench.sh [BUILD] [ROUNDS] [VMS] [CASE]      (defaults: build 5 4 madd)
set -euo pipefail
build=${1:-build}
rounds=${2:-5}
vms=${3:-4}
case_name=${4:-madd}
scratch=$(mktemp -d /tmp/gpuvm-vram-policy-XXXXXX)
trap 'rm -rf "$scratch"' EXIT
declare -A samples=([static]="" [dynamic]="")
for ((round = 0; round < rounds; round++)); do
  if ((round % 2 == 0)); then order="static dynamic"; else order="dynamic static"; fi
  for policy in $order; do
    socket="@gpuvm-vram-policy-$$-$round-$policy"
    "$build/aggregator/gpuvm-aggregator" --socket "$socket" --vram-mib 1024 \
      --fv-vram-policy "$policy" 2>"$scratch/aggregator.log" &
    aggregator=$!
    sleep 0.5  # up and listening (it starts in milliseconds)
    start=$(date +%s.%N)
    pids=()
    for ((i = 0; i < vms; i++)); do
      "$build/tools/gpuvm-vm/gpuvm-vm" --aggregator "$socket" --dm "$build/qemu-device/gpuvm-dm" \
        --mode fv-optimized --vram-mib $((96 + 32 * i)) --name "p$i" -- \
        "$build/bench/gpuvm-pt-guest" case "$case_name" bench >"$scratch/vm$i.out" 2>&1 &
      pids+=($!)
    done
    ok=1
    for pid in "${pids[@]}"; do wait "$pid" || ok=0; done
    end=$(date +%s.%N)
    kill "$aggregator"; wait "$aggregator" || true
    if ((ok == 0)) || ! grep -q "PASSED" "$scratch"/vm*.out; then
      echo "round $round $policy: a VM failed"; cat "$scratch"/vm*.out; exit 1
    fi
    s=$(echo "$end - $start" | bc)
    samples[$policy]+="$s "
    echo "round $round $policy: $s s"
  done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
ms=$(echo "${samples[static]}" | median)
md=$(echo "${samples[dynamic]}" | median)
echo "median of $rounds: static $ms s, dynamic $md s (dynamic/static $(echo "scale=3; $md / $ms" | bc)); $vms fv-optimized VMs, $case_name bench size, load $(cut -d' ' -f1 /proc/loadavg)"
