#!/bin/sh
# /init of dom0 in the Xen test bed (docs/XEN-TESTBED.md). Runs on busybox inside Xen 4.17 under
# QEMU/TCG. Brings up the Xen toolstack by hand (no udev, no init system), then:
#   1. creates the HVM guest paused (xl create -p),
#   2. runs the Xen backend's typed tests against real libxen handles with GPUVM_XEN_TEST_DOMID set,
#   3. starts gpuvm-aggregator and gpuvm-dm (the guest's second IOREQ server, claiming a PCI slot),
#   4. unpauses the guest, which runs its programs and prints GPUVM-GUEST lines on its serial port,
# and prints the result line the host script checks:
#   GPUVM-XEN-RESULT: PASS|FAIL <reason>
# Every step is time-bound. What runs is set by /gpuvm/testbed.conf (written by mkimages.sh).
export PATH=/usr/sbin:/usr/bin:/sbin:/bin:/usr/lib/xen-4.17/bin:/gpuvm/bin
export LD_LIBRARY_PATH=/usr/lib/xen-4.17/lib
/bin/busybox --install -s /bin 2>/dev/null

# Defaults, overridden by testbed.conf.
GUEST_MEMORY_MB=256
GUEST_BOOT_TIMEOUT=900      # xl unpause -> GPUVM-GUEST-RESULT
XL_CREATE_TIMEOUT=600
BACKEND_TESTS=""            # test binaries (with their gtest filter) run against the paused guest
DM_MODE=""                  # pt|fv: start gpuvm-aggregator + gpuvm-dm for the guest
DM_SBDF=0000:00:05.0
AGGREGATOR_ARGS=""
[ -f /gpuvm/testbed.conf ] && . /gpuvm/testbed.conf

uptime_s() { cut -d' ' -f1 /proc/uptime; }
say() { echo "GPUVM-XEN: $* (dom0 uptime $(uptime_s)s)"; }
result() {
  echo "GPUVM-XEN-RESULT: $*"
  sync
  # Give the console a moment, then power the machine off (Xen turns dom0's poweroff into an ACPI
  # power-off; the host script also stops QEMU when it sees the result line).
  sleep 2
  poweroff -f
  sleep 30
  exit 0
}
fail() { say "FAIL: $*"; dump_logs; result "FAIL $*"; }
# run NAME SECONDS COMMAND...: a time-bound step; fails the run when it fails.
run() {
  name=$1 seconds=$2
  shift 2
  say "step $name: $*"
  timeout "$seconds" "$@" || fail "$name (exit $?)"
}
# What the hypervisor knows about the guest, for a guest that hung, crashed or vanished.
guest_diagnostics() {
  echo "----- xl list"
  timeout 30 xl list 2>&1
  echo "----- guest serial (last 80 lines)"
  tail -n 80 /var/log/xen/guest-serial.log 2>/dev/null
  echo "----- processes (is the guest's qemu-system-xen alive?)"
  ps 2>&1 | grep -v ' \[' | tail -n 40
  # Xen's domain dump ('q'): each vCPU's state — one blocked on an unanswered ioreq shows here.
  timeout 30 xl debug-keys q 2>&1
  sleep 2
  # gpuvm-dm prints its trap counters when stopped: which accesses it saw before the hang.
  [ -n "${dm_pid:-}" ] && kill "$dm_pid" 2>/dev/null && sleep 3
}
dump_logs() {
  for f in /var/log/xen/*.log /tmp/*.log; do
    [ -f "$f" ] || continue
    echo "----- $f (last 60 lines)"
    tail -n 60 "$f"
  done
  echo "-----"
}

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
exec </dev/console >/dev/console 2>&1
mkdir -p /dev/pts /dev/shm /run/xen /var/run/xen /var/log/xen /var/lib/xen /var/lib/xenstored \
  /var/xen/dump /tmp
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
say "dom0 userspace reached, kernel $(uname -r)"

# ---- the Xen toolstack ---------------------------------------------------------------------------
kmods=/lib/modules/$(uname -r)/kernel/drivers/xen
for m in xen-privcmd xen-evtchn xen-gntdev xen-gntalloc xenfs/xenfs; do
  insmod "$kmods/$m.ko" || fail "insmod $m"
done
mount -t xenfs xenfs /proc/xen || fail "mount xenfs"
say "xen modules loaded: $(ls /dev/xen | tr '\n' ' ')"

# The C xenstored; --internal-db keeps its database in memory (no tdb file needed).
run xenstored 60 xenstored --pid-file /var/run/xenstored.pid
tries=0
until xenstore-read /local/domain/0/name >/dev/null 2>&1 || xenstore-write /tool/probe 1 2>/dev/null; do
  tries=$((tries + 1))
  [ $tries -gt 30 ] && fail "xenstored did not answer"
  sleep 1
done
run xen-init-dom0 120 xen-init-dom0
xenconsoled --pid-file=/var/run/xenconsoled.pid --log=none || fail "xenconsoled"
run xl-info 60 sh -c 'xl info | grep -E "^(xen_version|xen_caps|virt_caps|total_memory|free_memory|nr_cpus)"'

# Our programs load (libraries, CPU features) before anything depends on them.
for bin in /gpuvm/bin/*; do
  [ -x "$bin" ] || continue
  case "$bin" in *_test) "$bin" --gtest_list_tests >/dev/null 2>&1 ;; *) "$bin" --help >/dev/null 2>&1 ;; esac
  rc=$?
  [ $rc -ge 126 ] && fail "$bin does not start (status $rc)"
done

# ---- the guest, created paused -------------------------------------------------------------------
cat >/tmp/guest.cfg <<EOF
type = "hvm"
name = "gpuvm-guest"
memory = $GUEST_MEMORY_MB
vcpus = 1
device_model_version = "qemu-xen"
device_model_override = "/usr/libexec/xen-qemu-system-i386"
kernel = "/guest/vmlinuz"
ramdisk = "/guest/initrd.cpio"
cmdline = "console=ttyS0,115200 loglevel=4"
serial = "file:/var/log/xen/guest-serial.log"
vga = "none"
vnc = 0
sdl = 0
nographic = 1
on_poweroff = "destroy"
# A crash or a reboot (a triple fault is one) keeps the domain, so dom0 can say what happened.
on_reboot = "preserve"
on_crash = "preserve"
# Required under TCG: otherwise Xen traps RDTSCP, which TCG's SVM reports as RDTSC, and the guest
# gets #GP early in boot (PLATFORM-NOTES.md).
tsc_mode = "native"
EOF
export LIBXL_DEVICE_MODEL_START_TIMEOUT=$XL_CREATE_TIMEOUT
create_start=$(uptime_s)
run xl-create $XL_CREATE_TIMEOUT xl create -p /tmp/guest.cfg
domid=$(xl domid gpuvm-guest) || fail "xl domid"
say "guest created paused: domid $domid ($create_start s -> $(uptime_s) s)"
# Stream the guest's serial console to ours as it comes (the host log keeps both).
(tail -n +1 -f /var/log/xen/guest-serial.log 2>/dev/null | while IFS= read -r line; do echo "GUEST| $line"; done) &

# ---- the Xen backend's typed tests against real handles ------------------------------------------
# Each entry: binary[:gtest filter]. The guest is paused: the IOREQ-server and guest-memory suites
# use its domain, nothing needs it to run.
for entry in $BACKEND_TESTS; do
  bin=${entry%%:*}
  filter='*'
  case "$entry" in *:*) filter=${entry#*:} ;; esac
  say "step backend-test $bin --gtest_filter=$filter (GPUVM_XEN_TEST_DOMID=$domid)"
  GPUVM_XEN_TEST_DOMID=$domid timeout 600 "/gpuvm/bin/$bin" --gtest_filter="$filter" \
    --gtest_color=no >/tmp/$bin.out 2>&1
  rc=$?
  # The whole test output goes to the console (the host keeps it), prefixed for the checker.
  sed "s/^/GPUVM-XEN-TEST $bin| /" /tmp/$bin.out
  [ $rc = 0 ] || fail "backend test $bin (exit $rc)"
  # (counting the per-test lines, which end with the time taken)
  say "backend test $bin passed: $(grep -c '^\[       OK \].*ms)' /tmp/$bin.out) ok," \
    "$(grep -c '^\[  SKIPPED \].*ms)' /tmp/$bin.out) skipped"
done

# ---- the device model ----------------------------------------------------------------------------
if [ -n "$DM_MODE" ]; then
  export GPUVM_AGGREGATOR=@gpuvm-aggregator-testbed
  gpuvm-aggregator $AGGREGATOR_ARGS >/tmp/aggregator.log 2>&1 &
  agg_pid=$!
  sleep 2
  if ! kill -0 $agg_pid 2>/dev/null; then
    wait $agg_pid
    fail "gpuvm-aggregator exited at start (status $?)"
  fi
  # The RAM announced to the aggregator is what the guest was given (the domain's frames run on up
  # to its special pages below 4 GiB); replies may be slow under TCG.
  gpuvm-dm --backend xen --domid "$domid" --mode "$DM_MODE" --sbdf "$DM_SBDF" \
    --name gpuvm-guest --guest-ram-mib "$GUEST_MEMORY_MB" --reply-timeout-ms 120000 \
    >/tmp/gpuvm-dm.log 2>&1 &
  dm_pid=$!
  # gpuvm-dm claims the slot before the guest runs: hvmloader must find the device when it scans.
  tries=0
  until grep -q ', xen at ' /tmp/gpuvm-dm.log 2>/dev/null; do
    if ! kill -0 $dm_pid 2>/dev/null; then
      wait $dm_pid
      fail "gpuvm-dm exited at start (status $?)"
    fi
    tries=$((tries + 1))
    [ $tries -gt 120 ] && fail "gpuvm-dm did not report ready"
    sleep 1
  done
  say "gpuvm-dm attached (pid $dm_pid): $(tail -n 1 /tmp/gpuvm-dm.log)"
fi

# ---- run the guest -------------------------------------------------------------------------------
unpause_at=$(uptime_s)
run xl-unpause 60 xl unpause "$domid"
say "guest unpaused"
missing=0
while ! grep -q '^GPUVM-GUEST-RESULT' /var/log/xen/guest-serial.log 2>/dev/null; do
  # `xl list` columns: name id mem vcpus state time; state letters r b p s c d.
  listing=$(xl list gpuvm-guest 2>&1)
  state=$(echo "$listing" | awk '$1 == "gpuvm-guest" {print $5}')
  case "$state" in
    "")
      # Gone (or xl failed): a domain that powered off after its result line is fine; one failed
      # `xl list` under a loaded TCG host is not proof, three in a row are.
      grep -q '^GPUVM-GUEST-RESULT' /var/log/xen/guest-serial.log 2>/dev/null && break
      missing=$((missing + 1))
      if [ $missing -ge 3 ]; then
        say "xl list gpuvm-guest: $listing"
        guest_diagnostics
        fail "guest domain vanished before its result line"
      fi
      ;;
    *c* | *s*)
      sleep 2
      grep -q '^GPUVM-GUEST-RESULT' /var/log/xen/guest-serial.log 2>/dev/null && break
      say "guest domain state $state: $listing"
      guest_diagnostics
      case "$state" in
        *c*) fail "guest crashed before its result line (xl state $state)" ;;
        *) fail "guest shut down before its result line (xl state $state)" ;;
      esac
      ;;
    *) missing=0 ;;
  esac
  # Measured on the clock: one `xl list` alone can take seconds under TCG.
  waited=$(awk -v a="$unpause_at" '{printf "%d", $1 - a}' /proc/uptime)
  if [ "$waited" -ge "$GUEST_BOOT_TIMEOUT" ]; then
    guest_diagnostics
    fail "guest gave no result within ${GUEST_BOOT_TIMEOUT}s"
  fi
  sleep 5
done
done_at=$(uptime_s)
say "guest finished: unpause at ${unpause_at}s, result at ${done_at}s"
sleep 1
guest_result=$(grep '^GPUVM-GUEST-RESULT' /var/log/xen/guest-serial.log | head -n 1)

if [ -n "$DM_MODE" ]; then
  # Let the guest's poweroff tear things down, then stop our processes and show what they saw.
  sleep 3
  xl destroy "$domid" 2>/dev/null
  kill $dm_pid 2>/dev/null
  sleep 2
  kill $agg_pid 2>/dev/null
  sleep 1
  echo "----- gpuvm-dm"
  sed 's/^/DM| /' /tmp/gpuvm-dm.log
  echo "----- gpuvm-aggregator"
  sed 's/^/AGG| /' /tmp/aggregator.log
  echo "-----"
fi

case "$guest_result" in
  *PASS*) result "PASS guest=[$guest_result] unpause=${unpause_at}s done=${done_at}s" ;;
  *) result "FAIL guest=[$guest_result]" ;;
esac
