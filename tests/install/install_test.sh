#!/usr/bin/env bash
# make install as an operator would use it: `cmake --install` into a scratch root (DESTDIR) with
# prefix /usr, then the installed programs serve a VM whose guest program loads the installed
# libcuda.so.1 — nothing from the build tree on the path.
#   install_test.sh <build dir> <guest program>
# Checks: the files land in their FHS places (cmake/install.cmake), no installed file carries the
# build tree in its RUNPATH, the installed gpuvm-vm finds the installed gpuvm-dm beside it, and the
# dynamic loader's log shows the guest bound the installed libcuda.so.1.
set -euo pipefail
build=$(cd "$1" && pwd)
guest=$2
root=$(mktemp -d /tmp/gpuvm-install-XXXXXX)
agg_pid=""
cleanup() {
  if [[ -n $agg_pid ]]; then kill -TERM "$agg_pid" 2>/dev/null || true; wait "$agg_pid" 2>/dev/null || true; fi
  rm -rf "$root"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

DESTDIR=$root cmake --install "$build" --prefix /usr > "$root.log" 2>&1 || { cat "$root.log"; fail "cmake --install"; }
rm -f "$root.log"
for f in usr/bin/gpuvm-aggregator usr/bin/gpuvm-dm usr/bin/gpuvm-vm usr/bin/gpuvm-ctl \
         usr/bin/gpuvm-local-hvd usr/bin/gpuvm-pvdrm-backend usr/bin/gpuvm-xl usr/lib/gpuvm/libcuda.so.1 usr/lib/gpuvm/libcudart.so.13 \
         usr/include/gpuvm/cuda.h usr/include/gpuvm/cuda_runtime_api.h \
         usr/share/doc/gpuvm/ARCHITECTURE.md etc/ld.so.conf.d/gpuvm.conf; do
  [[ -e $root/$f ]] || fail "/$f was not installed"
done
grep -qx /usr/lib/gpuvm "$root/etc/ld.so.conf.d/gpuvm.conf" || fail "gpuvm.conf does not name /usr/lib/gpuvm"
for f in "$root"/usr/bin/* "$root"/usr/lib/gpuvm/*; do
  [[ $(head -c 4 "$f") == $'\x7fELF' ]] || continue  # gpuvm-xl: a shell script
  if readelf -d "$f" | grep -E 'R(UN)?PATH' | grep -q "$build"; then
    fail "$f still points into the build tree: $(readelf -d "$f" | grep -E 'R(UN)?PATH')"
  fi
done
echo "installed: $(cd "$root" && find . -type f | grep -v share/doc | sort | tr '\n' ' ')"

# The units — the aggregator's service and the device model's template (verified as the template
# and as an instance) — : systemd-analyze verify says nothing about them (it exits 0 even for
# unknown keys, so any output fails), with the installed binaries' paths (verify wants the
# executables to exist).
unit=$root/usr/lib/systemd/system/gpuvm-aggregator.service
if command -v systemd-analyze > /dev/null; then
  for u in gpuvm-aggregator.service gpuvm-dm@.service; do
    sed "s|/usr/bin/|$root/usr/bin/|" "$root/usr/lib/systemd/system/$u" > "$root/$u"
  done
  cp "$root/gpuvm-dm@.service" "$root/gpuvm-dm@guest1.service"
  said=$(systemd-analyze verify "$root/gpuvm-aggregator.service" "$root/gpuvm-dm@.service" \
    "$root/gpuvm-dm@guest1.service" 2>&1) || fail "systemd-analyze verify: $said"
  [[ -z $said ]] || fail "systemd-analyze verify: $said"
else
  echo "note: no systemd-analyze; the unit is not verified"
fi

# The installed stack serves a VM. The aggregator starts as the unit starts it: its ExecStart with
# the installed /etc/gpuvm/aggregator.conf (EnvironmentFile; the unquoted variable splits on spaces,
# as systemd splits it), sockets in a scratch directory instead of /run/gpuvm. The guest loads the
# installed libraries (LD_LIBRARY_PATH beats the guest program's own RUNPATH, the build tree).
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
[[ -n $exec_start ]] || fail "the unit has no ExecStart"
mkdir -p "$root/run"
exec_start=${exec_start//\/usr\/bin\//$root/usr/bin/}
exec_start=${exec_start//\/run\/gpuvm\//$root/run/}
# shellcheck disable=SC1091
GPUVM_AGGREGATOR_OPTIONS=$(. "$root/etc/gpuvm/aggregator.conf" && echo "$GPUVM_AGGREGATOR_OPTIONS")
[[ $GPUVM_AGGREGATOR_OPTIONS == *--scheduler* ]] || fail "aggregator.conf sets no options"
# The conf's operator group is the package's (its postinst adds it; the Xen test bed runs exactly
# that). A host without the group (no package installed) uses ours instead, which we are in.
[[ $GPUVM_AGGREGATOR_OPTIONS == *"--socket-group gpuvm"* ]] || fail "aggregator.conf sets no socket group"
group=gpuvm
if ! getent group gpuvm > /dev/null; then
  group=$(id -gn)
  GPUVM_AGGREGATOR_OPTIONS=${GPUVM_AGGREGATOR_OPTIONS//--socket-group gpuvm/--socket-group $group}
fi
socket=$root/run/aggregator
# shellcheck disable=SC2086
eval "set -- ${exec_start//\$GPUVM_AGGREGATOR_OPTIONS/}"
"$@" $GPUVM_AGGREGATOR_OPTIONS 2> "$root/aggregator.log" &
agg_pid=$!
for _ in $(seq 200); do
  grep -q "serving" "$root/aggregator.log" 2>/dev/null && break
  sleep 0.05
done
grep -q "serving" "$root/aggregator.log" || { cat "$root/aggregator.log"; fail "the installed aggregator did not start"; }
grep -q "scheduler band" "$root/aggregator.log" || fail "aggregator.conf's options were not applied"
for s in "$socket" "$socket-control"; do
  [[ $(stat -c '%a %G' "$s") == "660 $group" ]] || fail "$s is $(stat -c '%a %G' "$s"), not 660 $group"
done
set +e
env -u GPUVM_DM LD_LIBRARY_PATH="$root/usr/lib/gpuvm" LD_DEBUG=libs LD_DEBUG_OUTPUT="$root/ld" \
  "$root/usr/bin/gpuvm-vm" --aggregator "$socket" --mode fv-optimized --verbose --name installed -- \
  "$guest" case madd > "$root/vm.out" 2> "$root/vm.err"
rc=$?
set -e
[[ $rc == 0 ]] || { cat "$root/vm.out" "$root/vm.err"; fail "the VM exited with $rc"; }
grep -q "PASSED madd" "$root/vm.out" || { cat "$root/vm.out"; fail "the guest did not pass"; }
# The loader logged every process of the VM: the device model among them must be the installed one.
grep -hq "transferring control: $root/usr/bin/gpuvm-dm" "$root"/ld.* ||
  fail "the installed gpuvm-dm did not run (gpuvm-vm: $(grep -h 'gpuvm-dm' "$root/vm.err" | head -2))"
grep -hq "calling init: $root/usr/lib/gpuvm/libcuda.so.1" "$root"/ld.* ||
  fail "the guest did not load the installed libcuda.so.1"
if grep -hq "calling init: $build/runtime/lib/libcuda.so.1" "$root"/ld.*; then
  fail "the build tree's libcuda.so.1 was loaded"
fi
# The operator reaches it the way docs/OPERATOR.md says: GPUVM_AGGREGATOR names the socket.
GPUVM_AGGREGATOR=$socket "$root/usr/bin/gpuvm-ctl" stats --json > "$root/stats.json" ||
  fail "the installed gpuvm-ctl could not reach the aggregator"
grep -q '"policy":"band"' "$root/stats.json" || fail "gpuvm-ctl stats: $(cat "$root/stats.json")"
echo "PASS: the installed aggregator (as its unit starts it), gpuvm-vm and gpuvm-dm served a VM; the guest ran on the installed libcuda.so.1; the installed gpuvm-ctl reached it"
