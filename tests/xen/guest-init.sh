#!/bin/sh
# /init of the HVM guest in the Xen test bed (docs/XEN-TESTBED.md). Runs on busybox; its console is
# ttyS0, which xl writes to /var/log/xen/guest-serial.log in dom0, where dom0's /init reads the
# GPUVM-GUEST lines. Every line the host checks starts with "GPUVM-GUEST".
/bin/busybox --install -s /bin
export PATH=/bin:/usr/bin:/sbin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
exec </dev/console >/dev/console 2>&1
mkdir -p /dev/pts /tmp
echo "GPUVM-GUEST: init reached uptime=$(cut -d' ' -f1 /proc/uptime)"

# The PCI bus as the guest sees it (our device is 10de:06d8 when gpuvm-dm claimed its slot).
for dev in /sys/bus/pci/devices/*; do
  [ -e "$dev/vendor" ] || continue
  bars=$(awk 'NR <= 6 && $1 != "0x0000000000000000" {printf " bar%d=%s-%s", NR - 1, $1, $2}' \
    "$dev/resource")
  echo "GPUVM-GUEST: pci ${dev##*/} $(cat "$dev/vendor"):$(cat "$dev/device")" \
    "class=$(cat "$dev/class")$bars"
done

# DMA memory (guest-pv-driver/sysfs_bus.h): the GPU reaches pinned buffers by the guest-physical
# frames /proc/self/pagemap reports, so those frames must not move while mapped. mlock keeps pages
# resident; these keep compaction and khugepaged from migrating them.
echo 0 >/proc/sys/vm/compact_unevictable_allowed 2>/dev/null
echo never >/sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null
export LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu

status=PASS
# gpuvm.pvdrm=1: no virtual GPU on the PCI bus but a vgpu-drm xenbus device; its frontend is the
# pvdrm kernel module (pvdrm-frontend/linux), which registers a DRM render node once its backend in
# dom0 connects. The runtime finds that node by itself (GPUVM_BUS unset).
# gpuvm.pvdrm_pool=BYTES: the module's GEM pool (pool_bytes) per DRM file.
pvdrm=0
pvdrm_pool=0
for arg in $(cat /proc/cmdline); do
  case "$arg" in
    gpuvm.pvdrm=1) pvdrm=1 ;;
    gpuvm.pvdrm_pool=*) pvdrm_pool=${arg#gpuvm.pvdrm_pool=} ;;
  esac
done
if [ "$pvdrm" = 1 ]; then
  start=$(cut -d' ' -f1 /proc/uptime)
  if insmod /lib/modules/drm.ko && insmod /lib/modules/pvdrm.ko "pool_bytes=$pvdrm_pool"; then
    waited=0
    until [ -e /dev/dri/renderD128 ] || [ $waited -ge 300 ]; do
      sleep 1
      waited=$((waited + 1))
    done
  fi
  dmesg | grep -i -e pvdrm -e vgpu-drm -e '\[drm\]' | sed 's/^/GPUVM-GUEST: dmesg| /'
  if [ -e /dev/dri/renderD128 ]; then
    echo "GPUVM-GUEST: pvdrm render node up: $(ls /dev/dri | tr '\n' ' ')(${start}s -> $(cut -d' ' -f1 /proc/uptime)s)"
  else
    echo "GPUVM-GUEST: FAIL pvdrm: no render node (${start}s -> $(cut -d' ' -f1 /proc/uptime)s)"
    status=FAIL
  fi
else
  export GPUVM_BUS=sysfs
fi
# Which of them this guest runs: gpuvm.tests=a,b on the kernel command line (dom0 sets it per
# guest), "all" or absent for every one.
wanted=all
for arg in $(cat /proc/cmdline); do
  case "$arg" in gpuvm.tests=*) wanted=${arg#gpuvm.tests=} ;; esac
done
# The guest programs of this run (a list written into the image by mkimages.sh; empty for a bare
# boot). Each line: a name, then the command.
if [ -f /gpuvm/guest-tests ]; then
  while read -r name command; do
    case "$name" in "" | \#*) continue ;; esac
    case ",$wanted," in ",all," | *",$name,"*) ;; *) continue ;; esac
    start=$(cut -d' ' -f1 /proc/uptime)
    echo "GPUVM-GUEST: run $name: $command"
    # Output goes to the console, each line prefixed, so dom0 and the host see it.
    echo 127 >/tmp/rc
    sh -c "$command; echo \$? >/tmp/rc" 2>&1 | sed "s/^/GPUVM-GUEST: $name| /"
    rc=$(cat /tmp/rc)
    end=$(cut -d' ' -f1 /proc/uptime)
    if [ "$rc" = 0 ]; then
      echo "GPUVM-GUEST: ok $name (${start}s -> ${end}s)"
    else
      echo "GPUVM-GUEST: FAIL $name exit=$rc (${start}s -> ${end}s)"
      status=FAIL
    fi
    rm -f /tmp/rc
  done </gpuvm/guest-tests
fi

echo "GPUVM-GUEST-RESULT: $status uptime=$(cut -d' ' -f1 /proc/uptime)"
sync
poweroff -f
