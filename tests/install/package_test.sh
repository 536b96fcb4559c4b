#!/usr/bin/env bash
# make package: CPack builds the two Debian packages from a built tree, each holding its component's
# files, stripped, with dependencies worked out by dpkg-shlibdeps (the host package needs Xen's
# libraries) and ldconfig run for the guest's libraries.
#   package_test.sh <build dir>
set -euo pipefail
build=$(cd "$1" && pwd)
out=$(mktemp -d /tmp/gpuvm-package-XXXXXX)
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
command -v dpkg-deb >/dev/null || { echo "SKIP: dpkg-deb not found"; exit 77; }
(cd "$build" && cpack -G DEB -B "$out" > "$out/cpack.log" 2>&1) || { cat "$out/cpack.log"; fail "cpack"; }
host=$(ls "$out"/gpuvm-host_*.deb) || fail "no gpuvm-host package"
guest=$(ls "$out"/gpuvm-guest_*.deb) || fail "no gpuvm-guest package"
contains() {  # contains DEB PATH...
  local deb=$1; shift
  local list; list=$(dpkg-deb -c "$deb" | awk '{print $6}')
  for p in "$@"; do grep -qx "./$p" <<< "$list" || fail "$(basename "$deb") lacks /$p"; done
}
contains "$host" usr/bin/gpuvm-aggregator usr/bin/gpuvm-dm usr/bin/gpuvm-vm usr/bin/gpuvm-ctl \
  usr/bin/gpuvm-xl usr/share/doc/gpuvm/ARCHITECTURE.md usr/lib/systemd/system/gpuvm-aggregator.service \
  usr/lib/systemd/system/gpuvm-dm@.service \
  etc/gpuvm/aggregator.conf
# The settings an operator edits survive upgrades: dpkg treats them as configuration files.
dpkg-deb --ctrl-tarfile "$host" | tar -xO ./conffiles | grep -qx /etc/gpuvm/aggregator.conf ||
  fail "gpuvm-host does not mark /etc/gpuvm/aggregator.conf as a conffile"
contains "$guest" usr/lib/gpuvm/libcuda.so.1 usr/lib/gpuvm/libcudart.so.13 \
  usr/include/gpuvm/cuda.h etc/ld.so.conf.d/gpuvm.conf
dpkg-deb -c "$guest" | grep -q 'usr/bin/' && fail "the guest package carries dom0 programs"
dpkg-deb -f "$host" Depends | grep -q libxenforeignmemory || fail "gpuvm-host does not depend on Xen's libraries"
dpkg-deb -f "$guest" Depends | grep -q libstdc++ || fail "gpuvm-guest has no library dependencies"
dpkg-deb --ctrl-tarfile "$guest" | tar -xO ./postinst | grep -q ldconfig || fail "gpuvm-guest does not run ldconfig"
# The host package's postinst makes the gpuvm group when it is missing (run here with stand-ins
# for getent and addgroup that record what it asks: the test changes no group of this host).
dpkg-deb --ctrl-tarfile "$host" | tar -tvf - ./postinst | grep -q '^-rwxr-xr-x' ||
  fail "gpuvm-host has no executable postinst"
dpkg-deb --ctrl-tarfile "$host" | tar -xO ./postinst > "$out/postinst"
mkdir "$out/fake"
printf '#!/bin/sh\nexit 2\n' > "$out/fake/getent"
printf '#!/bin/sh\necho "$*" >> %s\n' "$out/addgroup.args" > "$out/fake/addgroup"
chmod +x "$out/fake/getent" "$out/fake/addgroup"
PATH="$out/fake:$PATH" sh -e "$out/postinst" configure || fail "gpuvm-host's postinst failed"
[[ $(cat "$out/addgroup.args" 2>/dev/null) == "--system gpuvm" ]] ||
  fail "gpuvm-host's postinst did not add the system group gpuvm"
printf '#!/bin/sh\nexit 0\n' > "$out/fake/getent"  # the group exists: nothing more is added
PATH="$out/fake:$PATH" sh -e "$out/postinst" configure || fail "gpuvm-host's postinst failed"
[[ $(wc -l < "$out/addgroup.args") == 1 ]] || fail "gpuvm-host's postinst added gpuvm again"
dpkg-deb -x "$host" "$out/root"
if readelf -S "$out/root/usr/bin/gpuvm-aggregator" | grep -q debug_info; then fail "binaries are not stripped"; fi
echo "PASS: $(basename "$host") ($(du -k "$host" | cut -f1) KiB), $(basename "$guest") ($(du -k "$guest" | cut -f1) KiB)"
