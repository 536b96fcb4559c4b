#!/usr/bin/env bash
# Assembles the Xen test bed's two initramfs images (docs/XEN-TESTBED.md):
#
#   scripts/xen-testbed/mkimages.sh OUT BUILD
#
#   OUT/guest-initrd.cpio  (zstd-compressed) the HVM guest: busybox, tests/xen/guest-init.sh as /init, our guest programs
#                          and the runtime libraries with everything they link (tests/xen/guest-tests)
#   OUT/dom0-initrd.cpio   dom0: busybox, tests/xen/dom0-init.sh as /init, the Xen tools (xl,
#                          xenstored, xen-init-dom0, xenconsoled, hvmloader, qemu-system-xen + SeaBIOS),
#                          the xen-* kernel modules, the gpuvm-host package's files as dpkg installs
#                          them (gpuvm-aggregator, gpuvm-dm, gpuvm-ctl, gpuvm-xl in /usr/bin, its
#                          /etc/gpuvm, units) with its maintainer scripts in /var/lib/gpuvm/control
#                          (dom0 runs the postinst), the backend tests, and the guest's kernel and
#                          initramfs
#
# BUILD/packages/gpuvm-host_*.deb must exist (xen-test.sh runs cpack first): the programs that
# serve the guests are the package's, not the build tree's.
#
# dom0's is an uncompressed cpio archive, the guest's a zstd-compressed one (stage.sh says why).
# OUT/pkgroot must hold the unpacked packages (fetch.sh).
# Programs that are not in BUILD are left out and the plan (testbed.conf, guest-tests) says so.
set -euo pipefail

out=$(cd "${1:?usage: mkimages.sh OUT BUILD}" && pwd)
build=$(cd "${2:?usage: mkimages.sh OUT BUILD}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
PKGROOT="$out/pkgroot"
# shellcheck source=stage.sh
source "$here/stage.sh"

log() { echo "xen-testbed: $*" >&2; }

# A fresh stage in $out/stage-NAME (now $STAGE) with busybox as sh and INIT (under tests/xen/) as /init.
stage_busybox_root() {
  STAGE="$out/stage-$1"
  stage_init
  stage_file "$PKGROOT/bin/busybox" /usr/bin/busybox
  ln -s busybox "$STAGE/usr/bin/sh"
  stage_file "$repo/tests/xen/$2" /init
  chmod 755 "$STAGE/init"
}

kernel_version=$(ls "$PKGROOT/lib/modules" | head -n1)
vmlinuz="$PKGROOT/boot/vmlinuz-$kernel_version"
[[ -f "$vmlinuz" ]] || { log "no kernel in $PKGROOT/boot"; exit 1; }

# ---- guest --------------------------------------------------------------------------------------
stage_busybox_root guest guest-init.sh
mkdir -p "$STAGE/gpuvm/bin" "$STAGE/gpuvm/lib"
: >"$STAGE/gpuvm/guest-tests"
guest_programs=()
if [[ -f "$repo/tests/xen/guest-tests" ]]; then
  # Lines: name, then a command whose first word is a program under BUILD (path relative to it).
  while read -r name program rest; do
    [[ -z "$name" || "$name" == \#* ]] && continue
    if [[ "$program" == tests/xen/*.sh ]]; then
      # A guest script of the repository (it runs the build's programs staged beside it).
      stage_file "$repo/$program" "/gpuvm/bin/$(basename "$program")"
      chmod 755 "$STAGE/gpuvm/bin/$(basename "$program")"
      echo "$name /gpuvm/bin/$(basename "$program") $rest" >>"$STAGE/gpuvm/guest-tests"
      continue
    fi
    if [[ ! -x "$build/$program" ]]; then
      # Build layouts move; a program of that name elsewhere in the build is the same program.
      found=$(find "$build" -path "$out" -prune -o -type f -name "$(basename "$program")" -perm -u+x \
        -print 2>/dev/null | head -n1)
      if [[ -z "$found" ]]; then
        log "guest test $name left out: $build/$program is not built"
        continue
      fi
      program=${found#"$build"/}
    fi
    guest_programs+=("$program")
    echo "$name /gpuvm/bin/$(basename "$program") $rest" >>"$STAGE/gpuvm/guest-tests"
  done <"$repo/tests/xen/guest-tests"
fi
if ((${#guest_programs[@]})); then
  # The runtime's libraries come first on the guest's library path (libcuda.so.1 of this build).
  STAGE_EXTRA_LD_PATH="$build/runtime/lib"
  STAGE_LD_PATH=""
  for program in "${guest_programs[@]}"; do
    stage_binary "$build/$program" "/gpuvm/bin/$(basename "$program")"
  done
  for lib in "$build"/runtime/lib/*.so.*; do
    [[ -e "$lib" ]] && stage_binary "$lib" "/usr/lib/x86_64-linux-gnu/$(basename "$lib")"
  done
  unset STAGE_EXTRA_LD_PATH
  STAGE_LD_PATH=""
fi
# The pvdrm kernel frontend (pvdrm-frontend/linux) for the pvdrm guests, built against Debian's
# headers of this very kernel (fetch-kernel-headers.sh: apt-get download + dpkg -x), with drm.ko,
# the one module it needs, from the kernel's package. Left out with a note when it cannot be built.
if kdir=$(timeout 900 "$here/fetch-kernel-headers.sh" "$out"); then
  rm -rf "$out/pvdrm-module"
  cp -r "$repo/pvdrm-frontend/linux" "$out/pvdrm-module"
  if make -s -C "$out/pvdrm-module" KDIR="$kdir" W=1 >"$out/pvdrm-module.log" 2>&1 &&
    [[ "$(modinfo -F vermagic "$out/pvdrm-module/pvdrm.ko" | cut -d' ' -f1)" == "$kernel_version" ]]; then
    mkdir -p "$STAGE/lib/modules"
    stage_file "$out/pvdrm-module/pvdrm.ko" /lib/modules/pvdrm.ko
    stage_file "$PKGROOT/lib/modules/$kernel_version/kernel/drivers/gpu/drm/drm.ko" /lib/modules/drm.ko
    log "pvdrm.ko built for $kernel_version ($(grep -c -i warning "$out/pvdrm-module.log") warnings)"
  else
    log "pvdrm.ko left out: build failed or not for $kernel_version ($out/pvdrm-module.log)"
  fi
else
  log "pvdrm.ko left out: no kernel headers"
fi
stage_pack "$out/guest-initrd.cpio" zstd
log "guest initramfs: $(du -h "$out/guest-initrd.cpio" | cut -f1), tests: $(wc -l <"$STAGE/gpuvm/guest-tests")"

# ---- dom0 ---------------------------------------------------------------------------------------
stage_busybox_root dom0 dom0-init.sh

xenbin=/usr/lib/xen-4.17/bin
# xenctx and lsevtchn are diagnostics: where a stuck guest's vCPU is, which event channels are pending.
for tool in xl xenstored xen-init-dom0 xenconsoled xenconsole xenctx lsevtchn; do
  stage_binary "$PKGROOT$xenbin/$tool" "$xenbin/$tool"
done
stage_binary "$PKGROOT/usr/bin/xenstore" /usr/bin/xenstore
for t in read write list ls rm exists chmod watch; do ln -sf xenstore "$STAGE/usr/bin/xenstore-$t"; done
stage_file "$PKGROOT/usr/lib/xen-4.17/boot/hvmloader" /usr/lib/xen-4.17/boot/hvmloader
stage_binary "$PKGROOT/usr/libexec/xen-qemu-system-i386" /usr/libexec/xen-qemu-system-i386
stage_file "$PKGROOT/usr/share/seabios/bios-256k.bin" /usr/share/seabios/bios-256k.bin
# qemu-system-xen's option ROMs for the guest's direct kernel boot (from the host's qemu-system-data,
# installed with qemu-system-x86).
for rom in linuxboot.bin linuxboot_dma.bin kvmvapic.bin; do
  stage_file "/usr/share/qemu/$rom" "/usr/share/qemu/$rom"
  mkdir -p "$STAGE/usr/share/qemu-xen"
  ln -sf "../qemu/$rom" "$STAGE/usr/share/qemu-xen/$rom"
done
# libxl always passes "-vnc none", for which QEMU loads the en-us keymap.
stage_file /usr/share/qemu/keymaps/en-us /usr/share/qemu/keymaps/en-us
mkdir -p "$STAGE/etc/xen" "$STAGE/var/lib/xen" "$STAGE/var/log/xen"
cat >"$STAGE/etc/xen/xl.conf" <<'EOF'
# Xen test bed: no automatic ballooning (dom0 has a fixed dom0_mem), no lock file dance.
autoballoon="off"
EOF

moddir="/usr/lib/modules/$kernel_version/kernel/drivers/xen"
for m in xen-privcmd xen-evtchn xen-gntdev xen-gntalloc xenfs/xenfs; do
  stage_file "$PKGROOT/lib/modules/$kernel_version/kernel/drivers/xen/$m.ko" "$moddir/$m.ko"
done

# The gpuvm-host package, unpacked as dpkg -i would (busybox's dpkg cannot take CPack's archives):
# its files where the package puts them, the libraries its programs need, and its control files
# for dom0 to run the postinst (the gpuvm group). dpkg-deb -x, then each file staged: ELF files
# with their libraries.
host_deb=$(ls -t "$build"/packages/gpuvm-host_*.deb 2>/dev/null | head -n1)
if [[ -n "$host_deb" ]]; then
  unpacked="$out/host-deb"
  rm -rf "$unpacked"
  dpkg-deb -x "$host_deb" "$unpacked"
  while IFS= read -r f; do
    case "$f" in
      usr/share/doc/*) continue ;;  # docs: not needed in dom0, megabytes of cpio
    esac
    if file -b "$unpacked/$f" | grep -q '^ELF'; then
      stage_binary "$unpacked/$f" "/$f"
    else
      stage_file "$unpacked/$f" "/$f"
    fi
  done < <(cd "$unpacked" && find . -type f | sed 's|^\./||' | sort)
  mkdir -p "$STAGE/var/lib/gpuvm"
  dpkg-deb -e "$host_deb" "$STAGE/var/lib/gpuvm/control"
  # Accounts for the postinst and the aggregator's group lookup, and the tool the postinst adds
  # the group with: a Debian dom0 has shadow's groupadd (package passwd), this busybox has no
  # addgroup, so the host's is staged.
  echo 'root:x:0:0:root:/root:/bin/sh' >"$STAGE/etc/passwd"
  echo 'root:x:0:' >"$STAGE/etc/group"
  stage_binary /usr/sbin/groupadd /usr/sbin/groupadd
  [[ -f /etc/login.defs ]] && stage_file /etc/login.defs /etc/login.defs
  log "dom0: $(basename "$host_deb") unpacked ($(cd "$unpacked" && find usr/bin -type f | tr '\n' ' '))"
else
  log "no $build/packages/gpuvm-host_*.deb: dom0 gets no gpuvm programs (run cpack)"
fi

# The backend tests (left out when not built).
mkdir -p "$STAGE/gpuvm/bin"
dom0_programs=(hypervisor/hv_backend_test qemu-device/dm_device_model_test)
for program in "${dom0_programs[@]}"; do
  if [[ -x "$build/$program" ]]; then
    stage_binary "$build/$program" "/gpuvm/bin/$(basename "$program")"
  else
    log "dom0 program left out: $build/$program is not built"
  fi
done

# The plan: which steps dom0 runs (dom0-init.sh reads it).
{
  echo "# written by scripts/xen-testbed/mkimages.sh"
  [[ -f "$repo/tests/xen/testbed.conf" ]] && cat "$repo/tests/xen/testbed.conf"
  tests=""
  [[ -x "$STAGE/gpuvm/bin/hv_backend_test" ]] && tests+=" hv_backend_test:*/xen.*"
  [[ -x "$STAGE/gpuvm/bin/dm_device_model_test" ]] && tests+=" dm_device_model_test:*/xen.*"
  echo "BACKEND_TESTS=\"$tests\""
  if [[ ! -x "$STAGE/usr/bin/gpuvm-dm" || ! -x "$STAGE/usr/bin/gpuvm-aggregator" ||
        ! -x "$STAGE/usr/bin/gpuvm-ctl" || ! -x "$STAGE/usr/bin/gpuvm-xl" ]]; then
    echo 'DM_MODE=""  # the gpuvm-host package (gpuvm-dm, gpuvm-aggregator, gpuvm-ctl, gpuvm-xl) is missing'
  fi
  # Overrides for one run, e.g. XEN_TEST_SET="PT_GUEST=0 FV_TESTS=nop" (docs/XEN-TESTBED.md).
  for setting in ${XEN_TEST_SET:-}; do echo "$setting"; done
} >"$STAGE/gpuvm/testbed.conf"

mkdir -p "$STAGE/guest"
cp "$vmlinuz" "$STAGE/guest/vmlinuz"
cp "$out/guest-initrd.cpio" "$STAGE/guest/initrd.cpio"
stage_pack "$out/dom0-initrd.cpio"
cp "$vmlinuz" "$out/vmlinuz"
log "dom0 initramfs: $(du -h "$out/dom0-initrd.cpio" | cut -f1)"
