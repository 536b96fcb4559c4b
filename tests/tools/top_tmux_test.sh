#!/usr/bin/env bash
# `gpuvm-ctl top` as an operator sees it: in a terminal (tmux, 160x30), beside a VM that keeps the
# GPU busy. The screen is captured (kept as <build>/tests/top-capture.txt) and must show the VM by
# name and mode, the live rates (GPU use this interval, traps/s) and the scheduler's windows.
#   top_tmux_test.sh <build dir> <guest program>
# Exits 77 (CTest: skipped) without tmux.
set -euo pipefail
build=$(cd "$1" && pwd)
guest=$2
command -v tmux > /dev/null || { echo "SKIP: tmux not found"; exit 77; }
work=$(mktemp -d /tmp/gpuvm-top-XXXXXX)
socket="@gpuvm-top-test-$$"
session="gpuvm-top-test-$$"
agg_pid="" vm_pid=""
cleanup() {
  tmux kill-session -t "$session" 2>/dev/null || true
  [[ -n $vm_pid ]] && { kill -TERM "$vm_pid" 2>/dev/null || true; wait "$vm_pid" 2>/dev/null || true; }
  [[ -n $agg_pid ]] && { kill -TERM "$agg_pid" 2>/dev/null || true; wait "$agg_pid" 2>/dev/null || true; }
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; [[ -f $work/capture ]] && cat "$work/capture"; exit 1; }

"$build/aggregator/gpuvm-aggregator" --socket "$socket" --vram-mib 256 2> "$work/aggregator.log" &
agg_pid=$!
for _ in $(seq 200); do grep -q serving "$work/aggregator.log" 2>/dev/null && break; sleep 0.05; done
"$build/tools/gpuvm-vm/gpuvm-vm" --aggregator "$socket" --mode fv-optimized --name busy -- \
  "$guest" hold "$work/ready" > "$work/vm.out" 2> "$work/vm.err" &
vm_pid=$!
for _ in $(seq 600); do [[ -f $work/ready ]] && break; sleep 0.05; done
[[ -f $work/ready ]] || { cat "$work/vm.err"; fail "the VM did not start"; }

tmux new-session -d -s "$session" -x 160 -y 30 \
  "$build/tools/gpuvm-ctl/gpuvm-ctl --socket $socket-control top --interval-ms 400"
# A few frames: the first has no rates, the later ones do.
sleep 2.5
tmux capture-pane -p -t "$session" > "$work/capture"
cp "$work/capture" "$build/tests/top-capture.txt" 2>/dev/null || true
grep -q "gpuvm-ctl top" "$work/capture" || fail "no top frame on the screen"
grep -q "rates over" "$work/capture" || fail "no frame with rates"
line=$(grep -E '^ *[0-9]+  busy@' "$work/capture" || true)
[[ -n $line ]] || fail "the VM 'busy' is not on the screen"
[[ $line == *" fv "* ]] || fail "the VM's mode is not shown: $line"
# Its trap rate: the hold guest submits kernels all the time, so its IB_PUT writes trap.
traps=$(awk '{print $(NF-1)}' <<< "$line")
[[ $traps =~ ^[0-9]+$ && $traps -gt 0 ]] || fail "no live trap rate for the VM: $line"
[[ $line =~ [0-9]+\.[0-9]%.*[0-9]+\.[0-9]% ]] || fail "no GPU figures for the VM: $line"
echo "PASS: gpuvm-ctl top under tmux shows the VM and its live figures:"
cat "$work/capture" | sed '/^$/d'
