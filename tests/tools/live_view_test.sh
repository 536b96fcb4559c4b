#!/usr/bin/env bash
# What an operator watches, beside a VM that keeps the GPU busy (an fv-optimized VM launching empty
# kernels all the time):
#   top      `gpuvm-ctl top` in a terminal (tmux, 160x30). The screen is captured (kept as
#            <build>/tests/top-capture.txt) and must show the VM by name and mode, the live rates
#            (GPU use this interval, traps/s) and the scheduler's windows.
#   metrics  `gpuvm-ctl metrics` parsed by Prometheus' own parser (Debian's python3-prometheus-client):
#            every family typed, the VM's series labelled, and its figures agreeing with `stats`.
#   http     the same figures scraped over HTTP (`--metrics-listen 127.0.0.1:0`, the port from the
#            log line "metrics on http://...") with urllib, while hostile clients (garbage, an
#            oversize head, silent and half-sent connections, more than the connection cap) each
#            lose only their own connection; HEAD, 404 and 405; and a second aggregator on the same
#            port fails to start with exit code 2.
#   live_view_test.sh top|metrics|http <build dir> <guest program>
# Exits 77 (CTest: skipped) without tmux or the parser.
set -euo pipefail
what=$1
build=$(cd "$2" && pwd)
guest=$3
python=/usr/bin/python3  # Debian's, where python3-prometheus-client installs
case $what in
  top) command -v tmux > /dev/null || { echo "SKIP: tmux not found"; exit 77; } ;;
  metrics|http)
    "$python" -c 'import prometheus_client.parser' 2> /dev/null ||
      { echo "SKIP: $python cannot import prometheus_client (python3-prometheus-client)"; exit 77; } ;;
  *) echo "usage: live_view_test.sh top|metrics|http BUILD GUEST"; exit 2 ;;
esac
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

aggregator=$build/aggregator/gpuvm-aggregator
listen=()
[[ $what == http ]] && listen=(--metrics-listen 127.0.0.1:0)
"$aggregator" --socket "$socket" --vram-mib 256 "${listen[@]}" 2> "$work/aggregator.log" &
agg_pid=$!
for _ in $(seq 200); do grep -q serving "$work/aggregator.log" 2>/dev/null && break; sleep 0.05; done
"$build/tools/gpuvm-vm/gpuvm-vm" --aggregator "$socket" --mode fv-optimized --name busy -- \
  "$guest" hold "$work/ready" > "$work/vm.out" 2> "$work/vm.err" &
vm_pid=$!
for _ in $(seq 600); do [[ -f $work/ready ]] && break; sleep 0.05; done
[[ -f $work/ready ]] || { cat "$work/vm.err"; fail "the VM did not start"; }

ctl=$build/tools/gpuvm-ctl/gpuvm-ctl
if [[ $what == http ]]; then
  # The line's url field (docs/OPERATOR.md "Logs").
  url=$(sed -n 's|.* component=gpuvm-aggregator url=\(http://[^ ]*\) msg="metrics on .*|\1|p' "$work/aggregator.log")
  [[ $url == http://127.0.0.1:*/metrics ]] || fail "no 'metrics on http://...' line: $(cat "$work/aggregator.log")"
  # Hostile clients first, then two scrapes with all of them still connected.
  "$python" - "$url" "$work/metrics1" "$work/metrics2" <<'PY' || fail "scraping $url"
import socket, sys, time, urllib.error, urllib.parse, urllib.request
url, out1, out2 = sys.argv[1:]
where = urllib.parse.urlsplit(url)
address = (where.hostname, where.port)

def exchange(data):
    with socket.create_connection(address, timeout=10) as s:
        s.sendall(data)
        got = b""
        while chunk := s.recv(65536):
            got += chunk
        return got

assert exchange(b"\x16\x03\x01\x02\x00garbage\r\n").startswith(b"HTTP/1.1 400 "), "garbage"
assert exchange(b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 20000).startswith(b"HTTP/1.1 431 "), \
    "oversize head"
half = socket.create_connection(address)
half.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # never finished
# More silent connections than the endpoint holds (16): the oldest are closed for the newest.
silent = [socket.create_connection(address) for _ in range(40)]

def scrape(path):
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.status == 200, r.status
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4"), r.headers
        assert r.headers["Connection"] == "close", r.headers
        body = r.read()
        assert int(r.headers["Content-Length"]) == len(body)
        open(path, "wb").write(body)

scrape(out1)
head = urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=10)
assert head.status == 200 and head.read() == b"" and int(head.headers["Content-Length"]) > 0
for request, code in ((urllib.request.Request(url, data=b"x"), 405),
                      (url.replace("/metrics", "/"), 404)):
    try:
        urllib.request.urlopen(request, timeout=10)
        raise AssertionError("no %d" % code)
    except urllib.error.HTTPError as e:
        assert e.code == code, (e.code, code)
time.sleep(0.5)
scrape(out2)
# The oldest silent connections were closed by the endpoint; the newest are still held.
silent[0].settimeout(10)
assert silent[0].recv(1) == b"", "the oldest silent connection was not closed"
print("scraped %s twice beside hostile clients" % url)
PY
  kill -0 "$agg_pid" 2>/dev/null || fail "the aggregator died"
  "$ctl" --socket "$socket-control" stats --json > "$work/stats.json"
  # The same port again: the second aggregator refuses to start, exit code 2, and says why.
  port=${url##*:}; port=${port%%/*}
  rc=0
  "$aggregator" --socket "$socket-2" --metrics-listen "127.0.0.1:$port" 2> "$work/second.log" || rc=$?
  [[ $rc == 2 ]] || fail "a second aggregator on port $port exited $rc: $(cat "$work/second.log")"
  grep -q -- "--metrics-listen: .*127.0.0.1:$port" "$work/second.log" ||
    fail "no clear message: $(cat "$work/second.log")"
  rc=0
  "$aggregator" --socket "$socket-2" --metrics-listen localhost:9464 2> "$work/second.log" || rc=$?
  [[ $rc == 2 ]] || fail "--metrics-listen localhost:9464 exited $rc"
elif [[ $what == metrics ]]; then
  # Two scrapes a moment apart, as Prometheus would: counters only grow.
  "$ctl" --socket "$socket-control" metrics > "$work/metrics1" || fail "gpuvm-ctl metrics"
  sleep 0.5
  "$ctl" --socket "$socket-control" metrics > "$work/metrics2" || fail "gpuvm-ctl metrics"
  "$ctl" --socket "$socket-control" stats --json > "$work/stats.json"
fi
if [[ $what == metrics || $what == http ]]; then
  "$python" - "$work/metrics1" "$work/metrics2" "$work/stats.json" <<'PY' || fail "the scrape"
import json, sys
from prometheus_client.parser import text_string_to_metric_families

def scrape(path):
    families = {f.name: f for f in text_string_to_metric_families(open(path).read())}
    samples = {}
    for f in families.values():
        for s in f.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return families, samples

fam1, first = scrape(sys.argv[1])
fam2, second = scrape(sys.argv[2])
stats = json.load(open(sys.argv[3]))
vm = next(v for v in stats["vms"] if v["name"] == "busy")
labels = (("id", str(vm["id"])), ("mode", "fv-optimized"), ("vm", vm["name"]))

def value(samples, name, extra=()):
    return samples[(name, tuple(sorted(labels + extra)))]

# Families and their types (the parser strips _total from counter family names).
assert fam2["gpuvm_vm_traps"].type == "counter", fam2["gpuvm_vm_traps"].type
assert fam2["gpuvm_vm_vram_used_bytes"].type == "gauge"
assert fam2["gpuvm_scheduler_policy"].samples[0].labels["policy"] == stats["policy"]
# The VM's figures agree with stats, and counters grow between scrapes.
assert value(second, "gpuvm_vm_vram_bytes") == vm["vram_bytes"]
assert value(second, "gpuvm_vm_channels") == vm["channels"]
assert value(second, "gpuvm_vm_traps_total") > 0
assert value(second, "gpuvm_vm_traps_total") >= value(first, "gpuvm_vm_traps_total")
# stats came after the second scrape: its counters are at least the scrape's.
assert value(second, "gpuvm_vm_traps_total") <= vm["traps"], (vm["traps"],)
assert value(second, "gpuvm_vm_submissions_total") <= vm["completed"], (vm["completed"],)
assert value(second, "gpuvm_vm_submissions_total") > value(first, "gpuvm_vm_submissions_total"), \
    "a busy VM completed nothing between two scrapes"
assert value(second, "gpuvm_vm_gpu_seconds_total") > 0
for window in ("100ms", "500ms", "10s"):
    u = value(second, "gpuvm_vm_gpu_usage_ratio", (("window", window),))
    assert 0 <= u <= 1, (window, u)
kinds = {dict(k[1])["kind"] for k in second if k[0] == "gpuvm_vm_refused_total"}
assert set(vm["refused"]) <= kinds, (vm["refused"], kinds)
print("scraped %d families, %d samples; VM %s: %d traps, %.3f GPU s" % (
    len(fam2), len(second), vm["name"], value(second, "gpuvm_vm_traps_total"),
    value(second, "gpuvm_vm_gpu_seconds_total")))
PY
  echo "PASS: the $what scrape parses as Prometheus text and agrees with stats"
  exit 0
fi

tmux new-session -d -s "$session" -x 160 -y 30 \
  "$ctl --socket $socket-control top --interval-ms 400"
# A few frames: the first has no rates, the later ones do.
sleep 2.5
tmux capture-pane -p -t "$session" > "$work/capture"
cp "$work/capture" "$build/tests/top-capture.txt" 2>/dev/null || true
grep -q "gpuvm-ctl top" "$work/capture" || fail "no top frame on the screen"
grep -q "rates over" "$work/capture" || fail "no frame with rates"
line=$(grep -E '^ *[0-9]+  busy ' "$work/capture" || true)
[[ -n $line ]] || fail "the VM 'busy' is not on the screen"
[[ $line == *" fv-optimized "* ]] || fail "the VM's mode is not shown: $line"
# Its trap rate: the hold guest submits kernels all the time, so its IB_PUT writes trap.
traps=$(awk '{print $(NF-1)}' <<< "$line")
[[ $traps =~ ^[0-9]+$ && $traps -gt 0 ]] || fail "no live trap rate for the VM: $line"
[[ $line =~ [0-9]+\.[0-9]%.*[0-9]+\.[0-9]% ]] || fail "no GPU figures for the VM: $line"
echo "PASS: gpuvm-ctl top under tmux shows the VM and its live figures:"
cat "$work/capture" | sed '/^$/d'
