#!/usr/bin/env bash
# The host-side checker of the Xen test bed (docs/XEN-TESTBED.md): reads the console log of one run
# and decides. Passes only when dom0 printed "GPUVM-XEN-RESULT: PASS", every backend test that ran
# passed, and every guest program reported ok. Prints a short summary either way.
#
#   tests/xen/check-result.sh CONSOLE_LOG
set -uo pipefail

console=${1:?usage: check-result.sh CONSOLE_LOG}
[[ -f "$console" ]] || { echo "xen-test: no console log $console" >&2; exit 1; }
# The console mixes \r\n and \n line ends.
text=$(tr -d '\r' <"$console")

fail=0
echo "xen-test: summary of $console"
# (Xen's lines may carry a "[seconds]" stamp: console_timestamps.)
grep -E '^(\(XEN\) (\[[^]]*\] )?(Xen version|HVM: )|GPUVM-XEN: (step|guest|backend|gpuvm-dm|aggregator|software GPU|no ivshmem|FAIL))' <<<"$text" |
  sed 's/^/  /'
grep -E 'GPUVM-GUEST: (pci|ok|FAIL|init)' <<<"$text" | sed 's/^.*GPUVM-GUEST/  GPUVM-GUEST/'

# gtest summaries of the backend tests that ran inside dom0.
while read -r line; do
  echo "  $line"
done < <(grep -E '^GPUVM-XEN-TEST [^|]+\| \[  (PASSED|FAILED|SKIPPED) +\]' <<<"$text")
if grep -qE '^GPUVM-XEN-TEST [^|]+\| \[  FAILED  \]' <<<"$text"; then
  echo "xen-test: a backend test failed inside dom0"
  fail=1
fi
if grep -qE 'GPUVM-GUEST: FAIL' <<<"$text"; then
  echo "xen-test: a guest program failed"
  fail=1
fi

result=$(grep -E '^GPUVM-XEN-RESULT: ' <<<"$text" | tail -n 1)
if [[ -z "$result" ]]; then
  echo "xen-test: FAIL: no result line (boot hung or crashed); last lines:"
  tail -n 40 <<<"$text" | sed 's/^/  | /'
  exit 1
fi
echo "xen-test: $result"
if [[ "$result" != "GPUVM-XEN-RESULT: PASS"* ]]; then
  fail=1
fi
if ((fail)); then
  echo "xen-test: FAIL"
  exit 1
fi
echo "xen-test: PASS"
