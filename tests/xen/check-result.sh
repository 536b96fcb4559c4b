#!/usr/bin/env bash
# The host-side checker of the Xen test bed (docs/XEN-TESTBED.md): reads the console log of one run
# and decides. Passes only when dom0 printed "GPUVM-XEN-RESULT: PASS", every backend test that ran
# passed, and every guest program reported ok. Prints a short summary either way.
#
#   tests/xen/check-result.sh CONSOLE_LOG
#
# Exit status: 0 pass; 1 fail; 3 fail, but only because the machine or a guest went away before
# saying anything of its own (no result line, or a guest crashed, rebooted or vanished early).
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
# Whether something of gpuvm's own failed (as opposed to the run or a guest going away).
gpuvm_failed=$fail

result=$(grep -E '^GPUVM-XEN-RESULT: ' <<<"$text" | tail -n 1)
if [[ -z "$result" ]]; then
  echo "xen-test: FAIL: no result line (boot hung or crashed); last lines:"
  tail -n 40 <<<"$text" | sed 's/^/  | /'
  ((gpuvm_failed)) && exit 1
  exit 3
fi
if [[ "$result" != "GPUVM-XEN-RESULT: PASS"* ]]; then
  fail=1
  # CI keeps only the last lines of a run: end with what each guest the failure names printed last,
  # on its consoles ("GUEST NAME|") and through its firmware on Xen's ("(dDOMID)": hvmloader,
  # SeaBIOS), so a guest that rebooted or hung in its firmware says where.
  for guest in $(grep -oE 'gpuvm-[a-z]+[0-9]+' <<<"$result" | sort -u); do
    domid=$(grep -oE "guest $guest (created paused|booted with gpuvm-xl): domid [0-9]+" <<<"$text" |
      grep -oE '[0-9]+$' | tail -n 1)
    echo "xen-test: $guest (domain ${domid:-?}), last console lines:"
    grep -F "GUEST $guest| " <<<"$text" | tail -n 8 | sed "s/^/  | /"
    if [[ -n "$domid" ]]; then
      echo "xen-test: $guest's firmware and Xen's lines about d$domid, last:"
      grep -E "^\(d$domid\)|\(XEN\).*\bd$domid(v[0-9]+)?\b" <<<"$text" |
        grep -v "memory_map:" | tail -n 8 | sed "s/^/  | /"
    fi
    # Where its vCPU stood when it went away (dom0's xenctx of the preserved domain, the symbol
    # from the guest kernel's map). A code selector of 0xe008 is Xen's own: the emulator wrote the
    # hypervisor's state into the guest's (seen twice under TCG's SVM, 2026-11-28), not a place in
    # the guest's code.
    where=$(grep -A12 -F -- "----- xenctx $guest " <<<"$text" | grep -E '^ *(rip|rsp|cs):' |
      tr -s ' \t' ' ' | paste -sd ';' -)
    if [[ -n "$where" ]]; then
      echo "xen-test: $guest's vCPU 0 at the end: $where"
      if [[ "$where" =~ cs:\ e008 ]]; then
        echo "xen-test: $guest's vCPU holds Xen's own code selector (e008): the emulator's fault"
      fi
    fi
  done
fi
echo "xen-test: $result"
if ((fail)); then
  echo "xen-test: FAIL"
  # Status 3: nothing of gpuvm's failed — no guest program, no backend test — but a guest went away
  # under us before it could say (xen-test.sh may boot once more).
  if [[ "$result" =~ (crashed\ or\ shut\ down|vanished)\ before\ its\ result\ line ]] &&
    ! ((gpuvm_failed)); then
    exit 3
  fi
  exit 1
fi
echo "xen-test: PASS"
