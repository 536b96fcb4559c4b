#!/usr/bin/env bash
# Unpacks Debian's headers for the test bed's guest kernel, to build pvdrm-frontend/linux against
# (docs/PVDRM.md, "The Linux kernel frontend"); prints the KDIR to give make.
#
#   scripts/xen-testbed/fetch-kernel-headers.sh OUT     # -> OUT/kheaders/usr/src/linux-headers-<abi>
#
# The kernel is the one fetch.sh unpacks (linux-image-amd64's current ABI); its headers come the
# same way: `apt-get download` of linux-headers-<abi>, linux-headers-<abi>-common and
# linux-kbuild-<major.minor>, `dpkg -x` into OUT/kheaders. Nothing is installed on the host and
# nothing comes from anywhere but the archive. Cached by the exact versions; the headers' Makefile
# includes the common tree by absolute path, which is rewritten to the unpacked one.
set -euo pipefail

out=${1:?usage: fetch-kernel-headers.sh OUT}
mkdir -p "$out"
out=$(cd "$out" && pwd)
root="$out/kheaders"
debs="$out/kheaders-debs"
stamp="$out/kheaders.stamp"

log() { echo "kernel-headers: $*" >&2; }
as_root() {
  if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi
}

image_pkg() {
  apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}'
}
image=$(image_pkg)
if [[ -z "$image" ]]; then
  as_root timeout 300 apt-get update -qq
  image=$(image_pkg)
fi
[[ -n "$image" ]] || { log "cannot resolve linux-image-amd64 (apt-cache depends)"; exit 1; }
abi=${image#linux-image-}           # 6.1.0-56-amd64
flavour=${abi##*-}                  # amd64
base=${abi%-"$flavour"}             # 6.1.0-56
kbuild="linux-kbuild-$(cut -d. -f1,2 <<<"$base")"
packages=("linux-headers-$abi" "linux-headers-$base-common" "$kbuild")

versions=$(apt-cache policy "${packages[@]}" 2>/dev/null |
  awk '/^[^ ]/ {name=$1} /Candidate:/ {print name, $2}')
if grep -q '(none)' <<<"$versions" || [[ $(wc -l <<<"$versions") -ne ${#packages[@]} ]]; then
  log "no candidate for all of: ${packages[*]}"
  exit 1
fi
kdir="$root/usr/src/linux-headers-$abi"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$versions" && -f "$kdir/Makefile" ]]; then
  echo "$kdir"
  exit 0
fi

log "downloading ${packages[*]}"
rm -rf "$debs" "$root.tmp"
mkdir -p "$debs" "$root.tmp"
(cd "$debs" && timeout 900 apt-get download -q "${packages[@]}" >&2)
for deb in "$debs"/*.deb; do dpkg -x "$deb" "$root.tmp"; done
# "include /usr/src/linux-headers-<base>-common/Makefile": make it the unpacked tree's.
sed -i "s|^include /usr/src/|include $root/usr/src/|" "$root.tmp/usr/src/linux-headers-$abi/Makefile"
rm -rf "$root"
mv "$root.tmp" "$root"
rm -rf "$debs"
echo "$versions" >"$stamp"
log "unpacked into $root"
echo "$kdir"
