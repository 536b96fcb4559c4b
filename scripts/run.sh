#!/usr/bin/env bash
# `make run`: what an operator would try first. Starts gpuvm-aggregator on the software GPU, boots
# four local VMs with different VRAM sizes in full virtualization (fv-optimized by default), runs a
# benchmark of the suite in all of them at once, one benchmark after another, and prints per VM:
# correct or not, time, and what the aggregator did for it (traps per BAR, shadow scans, entries
# written/rejected); then each benchmark's native time (the same program on the software GPU in one
# process, GPUVM_BUS=native) and the overhead ratio. docs/FULL-VIRTUALIZATION.md explains the output.
#
# Then, one VM alone per mode (native, pt, each fv mode) on nop and madd: median of 3 runs each and
# the ratio to native, the Fig 4.8-style comparison for the modes.
#
#   scripts/run.sh [BUILD_DIR]     environment: GPUVM_RUN_BENCHES="nop madd ..."  GPUVM_RUN_MODE=fv-lazy
#                                  GPUVM_RUN_SIZE=test|bench  GPUVM_RUN_VRAM="96 128 192 256"
#                                  GPUVM_RUN_ALONE="nop madd" (empty: skip the per-mode part)
set -euo pipefail
build=${1:-build}
benches=${GPUVM_RUN_BENCHES:-nop madd fmadd mmul cpy}
mode=${GPUVM_RUN_MODE:-fv-optimized}
size=${GPUVM_RUN_SIZE:-bench}
vram=(${GPUVM_RUN_VRAM:-96 128 192 256})
alone_benches=${GPUVM_RUN_ALONE:-nop madd}
alone_modes="native pt fv-naive fv-lazy fv-bar-remap fv-optimized"

for bin in aggregator/gpuvm-aggregator tools/gpuvm-vm/gpuvm-vm qemu-device/gpuvm-dm; do
  [[ -x $build/$bin ]] || { echo "run.sh: $build/$bin is missing (make all)" >&2; exit 1; }
done
scratch=$(mktemp -d /tmp/gpuvm-run-XXXXXX)
socket="@gpuvm-run-$$"
agg_pid=""
cleanup() {
  if [[ -n $agg_pid ]]; then kill -TERM "$agg_pid" 2>/dev/null || true; wait "$agg_pid" 2>/dev/null || true; fi
}
trap cleanup EXIT

"$build/aggregator/gpuvm-aggregator" --socket "$socket" --vram-mib 1024 --fv-mode "${mode#fv-}" \
  2> "$scratch/aggregator.log" &
agg_pid=$!
for _ in $(seq 200); do
  grep -q "serving" "$scratch/aggregator.log" 2>/dev/null && break
  sleep 0.05
done

field() {  # field FILE KEY: a number or boolean from the GPUVM-BENCH json line
  sed -n 's/^GPUVM-BENCH //p' "$1" | grep -o "\"$2\":[^,}]*" | head -1 | cut -d: -f2
}

echo "gpuvm: software GF100 (1024 MiB VRAM), 4 local VMs in $mode with ${vram[*]} MiB VRAM, suite size $size"
printf '\n%-7s %-4s %6s %-7s %9s %8s %9s %9s %7s %8s %8s %6s\n' bench vm VRAM correct seconds \
  "xnative" "BAR0" "BAR1" "BAR3" scans written rejct
failures=0
summary=()
for bench in $benches; do
  prog="$build/bench/gpuvm-suite-$bench"
  [[ -x $prog ]] || { echo "run.sh: $prog is missing" >&2; exit 1; }
  GPUVM_BUS=native "$prog" --size "$size" > "$scratch/$bench-native.out" 2>&1 || true
  native=$(field "$scratch/$bench-native.out" seconds)
  pids=()
  for i in 0 1 2 3; do
    "$build/tools/gpuvm-vm/gpuvm-vm" --aggregator "$socket" --dm "$build/qemu-device/gpuvm-dm" \
      --mode "$mode" --vram-mib "${vram[$i]}" --ram-mib 512 --name "$bench$i" -- \
      "$prog" --size "$size" > "$scratch/$bench-$i.out" 2> "$scratch/$bench-$i.err" &
    pids+=($!)
  done
  for i in 0 1 2 3; do wait "${pids[$i]}" || true; done
  sleep 0.2  # the aggregator logs each VM's counters as its session ends
  worst=0
  for i in 0 1 2 3; do
    out="$scratch/$bench-$i.out"
    correct=$(field "$out" correct); correct=${correct:-false}
    secs=$(field "$out" seconds); secs=${secs:-nan}
    [[ $correct == true ]] || failures=$((failures + 1))
    line=$(grep "'$bench$i@" "$scratch/aggregator.log" | grep "traps BAR0/1/3" | tail -1 || true)
    traps=$(sed -n 's|.*traps BAR0/1/3 \([0-9]*\)/\([0-9]*\)/\([0-9]*\).*|\1 \2 \3|p' <<< "$line")
    scans=$(sed -n 's|.*scans \([0-9]*\).*|\1|p' <<< "$line")
    written=$(sed -n 's|.*shadow entries written \([0-9]*\).*|\1|p' <<< "$line")
    rejected=$(sed -n 's|.*, rejected \([0-9]*\).*|\1|p' <<< "$line")
    ratio=$(awk -v a="$secs" -v b="${native:-0}" 'BEGIN { if (b > 0 && a == a + 0) printf "%.2f", a / b; else printf "-" }')
    read -r t0 t1 t3 <<< "${traps:-- - -}"
    printf '%-7s %-4s %6s %-7s %9s %8s %9s %9s %7s %8s %8s %6s\n' "$bench" "vm$i" "${vram[$i]}" \
      "$correct" "$secs" "$ratio" "$t0" "$t1" "$t3" "${scans:--}" "${written:--}" "${rejected:--}"
    worst=$(awk -v a="$secs" -v w="$worst" 'BEGIN { print (a == a + 0 && a > w) ? a : w }')
  done
  summary+=("$(printf '%-7s native %8ss   %s slowest of 4 VMs %8ss   ratio %s' "$bench" "${native:-?}" \
    "$mode" "$worst" "$(awk -v a="$worst" -v b="${native:-0}" 'BEGIN { if (b > 0) printf "%.2f", a / b; else printf "-" }')")")
done
echo
echo "overhead (4 VMs sharing the GPU at once vs one native process alone):"
printf '  %s\n' "${summary[@]}"

# One VM alone per mode.
median3() { sort -g | sed -n 2p; }
if [[ -n $alone_benches ]]; then
  echo
  echo "one VM alone, median of 3 runs (seconds, and x native):"
  printf '  %-7s' bench
  for m in $alone_modes; do printf ' %19s' "$m"; done
  echo
  for bench in $alone_benches; do
    prog="$build/bench/gpuvm-suite-$bench"
    printf '  %-7s' "$bench"
    native=""
    for m in $alone_modes; do
      times=()
      for r in 1 2 3; do
        out="$scratch/alone-$bench-$m-$r.out"
        if [[ $m == native ]]; then
          GPUVM_BUS=native "$prog" --size "$size" > "$out" 2>&1 || true
        else
          "$build/tools/gpuvm-vm/gpuvm-vm" --aggregator "$socket" --dm "$build/qemu-device/gpuvm-dm" \
            --mode "$m" --ram-mib 512 --name "a$bench$r" -- "$prog" --size "$size" > "$out" 2>&1 || true
        fi
        [[ $(field "$out" correct) == true ]] || failures=$((failures + 1))
        times+=("$(field "$out" seconds)")
      done
      med=$(printf '%s\n' "${times[@]}" | median3)
      [[ $m == native ]] && native=$med
      printf ' %9.4f (%6.2fx)' "${med:-0}" "$(awk -v a="${med:-0}" -v b="$native" 'BEGIN { print (b > 0) ? a / b : 0 }')"
    done
    echo
  done
  echo "  (fv-bar-remap and fv-optimized: fv-naive and fv-lazy plus BAR remap, aperture pages of the VM's VRAM without a trap)"
fi
cleanup
agg_pid=""
# The operator's view (docs/CONTROL.md, docs/SCHEDULER.md): four real fv VMs (gpuvm-vm, shares
# 10/20/30/40 in their configuration, madd / long-madd looping) under BAND, two shares swapped live
# halfway through over the control socket (what gpuvm-ctl set-share sends), target and achieved share
# per 500 ms window, and the plot (~12 s). GPUVM_RUN_OPERATOR_ENGINE=synthetic: the dispatcher on the
# synthetic timed engine instead (no VMs). If the VMs fail, the synthetic view runs.
if [[ -x $build/bench/gpuvm-fairness-bench && -z ${GPUVM_RUN_NO_OPERATOR:-} ]]; then
  echo
  engine=${GPUVM_RUN_OPERATOR_ENGINE:-fv}
  if ! "$build/bench/gpuvm-fairness-bench" --control-demo --engine "$engine" --duration-s 6 \
      --out "$build/bench/operator-view"; then
    echo "run.sh: the operator's view on real VMs failed (logs in $build/bench/operator-view); synthetic engine:"
    "$build/bench/gpuvm-fairness-bench" --control-demo --duration-s 6 --out "$build/bench/operator-view"
  fi
fi
if ((failures > 0)); then
  echo "run.sh: $failures VM run(s) failed or computed a wrong result; logs in $scratch" >&2
  exit 1
fi
rm -rf "$scratch"
