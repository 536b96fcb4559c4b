#!/usr/bin/env bash
# Fetches and unpacks the Debian packages the Xen test bed is made of (docs/XEN-TESTBED.md).
#
#   scripts/xen-testbed/fetch.sh OUT
#
# The outer machine's QEMU (qemu-system-x86) and the archivers are installed on the host with apt-get;
# everything that runs *inside* the test bed (Xen, the dom0/guest kernel, the Xen tools, the guest's
# device model, busybox and their libraries) is only downloaded (`apt-get download`) and unpacked with
# `dpkg -x` into OUT/pkgroot, so the host's own system is not touched by Xen's packages.
#
# Cached: a stamp records the package list and versions; a second run with the same list does no
# network access. Every download is time-bound.
set -euo pipefail

out=${1:?usage: fetch.sh OUT}
mkdir -p "$out"
out=$(cd "$out" && pwd)
debs="$out/debs"
root="$out/pkgroot"
stamp="$out/pkgroot.stamp"

log() { echo "xen-testbed: $*" >&2; }

as_root() {
  if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi
}

# ---- host tools -----------------------------------------------------------------------------------
host_packages=(qemu-system-x86 cpio gzip xz-utils zstd kmod file)
missing=()
for pkg in "${host_packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done
if ((${#missing[@]})); then
  log "installing host packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if ! as_root timeout 900 apt-get install -y -qq --no-install-recommends "${missing[@]}"; then
    as_root timeout 300 apt-get update -qq
    as_root timeout 900 apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
fi

# ---- packages unpacked for the test bed -----------------------------------------------------------
# The Debian kernel flavour: linux-image-amd64 is a metapackage naming the current ABI's image.
kernel_image_package() {
  apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}'
}
kernel_pkg=$(kernel_image_package)
if [[ -z "$kernel_pkg" ]]; then
  as_root timeout 300 apt-get update -qq
  kernel_pkg=$(kernel_image_package)
fi
[[ -n "$kernel_pkg" ]] || { log "cannot resolve linux-image-amd64 (apt-cache depends)"; exit 1; }

packages=(
  # the hypervisor and its tools (xl, xen-init-dom0, xenconsoled, hvmloader), the C xenstored
  xen-hypervisor-4.17-amd64 xen-utils-4.17 xen-utils-common xenstore-utils
  # the guest's device model (/usr/libexec/xen-qemu-system-i386) and its firmware
  qemu-system-xen seabios
  # the generic kernel (dom0 needs CONFIG_XEN_DOM0; the guest uses the same image)
  "$kernel_pkg"
  # dom0's and the guest's shell
  busybox-static
  # libraries of the Xen tools and qemu-system-xen a plain Debian 12 host lacks (docs/XEN-TESTBED.md)
  libyajl2 libfdt1 libspice-server1 libusb-1.0-0 libjpeg62-turbo libpixman-1-0
  libxenmisc4.17 libxenhypfs1 libxencall1 libxendevicemodel1 libxenevtchn1 libxenforeignmemory1
  libxengnttab1 libxenstore4 libxentoolcore1 libxentoollog1
)

# The exact versions the archive offers now: part of the cache key.
versions=$(apt-cache policy "${packages[@]}" 2>/dev/null |
  awk '/^[^ ]/ {name=$1} /Candidate:/ {print name, $2}')
if [[ -z "$versions" ]] || grep -q '(none)' <<<"$versions"; then
  as_root timeout 300 apt-get update -qq
  versions=$(apt-cache policy "${packages[@]}" | awk '/^[^ ]/ {name=$1} /Candidate:/ {print name, $2}')
fi
if grep -q '(none)' <<<"$versions"; then
  log "packages without a candidate: $(grep '(none)' <<<"$versions" | tr '\n' ' ')"
  exit 1
fi

if [[ -f "$stamp" && "$(cat "$stamp")" == "$versions" && -d "$root" ]]; then
  log "packages cached ($(wc -l <<<"$versions") in $root)"
  exit 0
fi

log "downloading ${#packages[@]} packages into $debs"
mkdir -p "$debs"
(cd "$debs" && timeout 900 apt-get download -q "${packages[@]}")

rm -rf "$root.tmp"
mkdir -p "$root.tmp"
for pkg in "${packages[@]}"; do
  version=$(awk -v p="$pkg" '$1 == p":" {print $2}' <<<"$versions")
  # apt-get download names files name_version_arch.deb with ':' in the version escaped as %3a.
  file=$(ls "$debs/${pkg}_${version//:/%3a}_"*.deb 2>/dev/null | head -n1)
  [[ -n "$file" ]] || { log "downloaded file for $pkg $version not found in $debs"; exit 1; }
  dpkg -x "$file" "$root.tmp"
done
rm -rf "$root"
mv "$root.tmp" "$root"
echo "$versions" >"$stamp"
log "unpacked into $root"
