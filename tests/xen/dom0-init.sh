#!/bin/sh
# /init of dom0 in the Xen test bed (docs/XEN-TESTBED.md). Runs on busybox inside Xen 4.17 under
# QEMU/TCG. Brings up the Xen toolstack by hand (no udev, no init system), then:
#   1. creates the HVM guest paused (xl create -p),
#   2. runs the Xen backend's typed tests against real libxen handles with GPUVM_XEN_TEST_DOMID set,
#   3. starts gpuvm-aggregator and gpuvm-dm (the guest's second IOREQ server, claiming a PCI slot,
#      authenticated with the VM's token from gpuvm-ctl vm-token),
#   4. unpauses the guest, which runs its programs and prints GPUVM-GUEST lines on its console,
#   5. the same for the fv guests, and for the pv guests through `gpuvm-xl create` (XL_PHASES),
# all with the gpuvm-host package's programs (/usr/bin; its postinst run at boot, the aggregator
# started as its unit and /etc/gpuvm/aggregator.conf say),
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
XL_PHASES=""                # vgpu phases (fv, pv) whose guests boot with gpuvm-xl create
# gpuvm-xl waits this long for a guest's gpuvm-dm to attach (its default, 120 s, is for real
# hardware; under TCG attaching maps the guest's memory, which takes minutes when loaded).
export GPUVM_XL_READY_TIMEOUT=400
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
# Where the guest of domain $1 is now: vCPU 0's instruction pointer with the kernel symbol (xenctx
# reads the registers through Xen; the guest's System.map names the address).
guest_where() {
  # (In real mode — the firmware, the option ROM loading the kernel — ecx and edi show a
  # `rep insb`'s progress.)
  timeout 30 xenctx -s /tmp/kernel.map "$1" 0 2>&1 | grep -E '^ *(rip|cs:eip|eax|esi):' |
    tr -s ' \t\n' '   '
}
# What the hypervisor knows about the guests (NAME:DOMID ...), for one that hung, crashed or vanished.
guest_diagnostics() {
  for g in "$@"; do
    gname=${g%%:*} gdom=${g#*:}
    echo "----- xenctx $gname (domain $gdom): vCPU 0 and its stack"
    timeout 60 xenctx -s /tmp/kernel.map -S "$gdom" 0 2>&1 | head -n 60
    echo "----- lsevtchn $gdom (the guest's event channels)"
    timeout 30 lsevtchn "$gdom" 2>&1 | head -n 40
    echo "----- $gname console (last 80 lines)"
    cat $(guest_logs "$gname") 2>/dev/null | tail -n 80
  done
  echo "----- xl list"
  timeout 30 xl list 2>&1
  echo "----- processes (are the guests' qemu-system-xen alive?)"
  ps 2>&1 | grep -v ' \[' | tail -n 40
  # Xen's domain dump ('q'): each vCPU's state — one blocked on an unanswered ioreq shows here —
  # and its event channel dump ('e'): which ports are pending or masked.
  timeout 30 xl debug-keys q 2>&1
  timeout 30 xl debug-keys e 2>&1
  sleep 2
  # gpuvm-dm prints its trap counters when stopped: which accesses it saw before the hang.
  stop_dms
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
# xenconsoled keeps each guest's PV console (hvc0) in /var/log/xen/console/guest-NAME.log.
mkdir -p /var/log/xen/console
xenconsoled --pid-file=/var/run/xenconsoled.pid --log=guest --log-dir=/var/log/xen/console ||
  fail "xenconsoled"
run xl-info 60 sh -c 'xl info | grep -E "^(xen_version|xen_caps|virt_caps|total_memory|free_memory|nr_cpus)"'

# The gpuvm-host package was unpacked into this image (mkimages.sh); its postinst runs here, as
# dpkg would run it: it adds the operator group gpuvm that /etc/gpuvm/aggregator.conf names.
if [ -f /var/lib/gpuvm/control/postinst ]; then
  run gpuvm-host-postinst 60 sh /var/lib/gpuvm/control/postinst configure
  grep -q '^gpuvm:' /etc/group || fail "gpuvm-host's postinst added no group gpuvm"
  say "gpuvm-host installed: $(for p in gpuvm-aggregator gpuvm-dm gpuvm-ctl gpuvm-xl; do
    command -v "$p"; done | tr '\n' ' ')group $(grep '^gpuvm:' /etc/group)"
fi

# Our programs load (libraries, CPU features) before anything depends on them.
for bin in /gpuvm/bin/* /usr/bin/gpuvm-aggregator /usr/bin/gpuvm-dm /usr/bin/gpuvm-ctl; do
  [ -x "$bin" ] || continue
  case "$bin" in *_test) "$bin" --gtest_list_tests >/dev/null 2>&1 ;; *) "$bin" --help >/dev/null 2>&1 ;; esac
  rc=$?
  [ $rc -ge 126 ] && fail "$bin does not start (status $rc)"
done

# ---- the software GPU's VRAM in device memory (BAR remap on Xen) ---------------------------------
# SIM_VRAM=ivshmem: the outer QEMU gave this machine an ivshmem-plain device (xen-test.sh). Its BAR2
# is memory at a machine address, which Xen can put into a guest's p2m (a dom0 memfd cannot be), so
# gpuvm-aggregator keeps the software GPU's VRAM there (--sim-vram-file .../resource2) and gpuvm-dm
# has Xen map a VM's VRAM pages into its BAR1/BAR3 (fv-bar-remap, fv-optimized).
if [ "${SIM_VRAM:-}" = ivshmem ]; then
  vram_dev=""
  for d in /sys/bus/pci/devices/*; do
    if [ "$(cat "$d/vendor")" = 0x1af4 ] && [ "$(cat "$d/device")" = 0x1110 ]; then
      vram_dev=$d
      break
    fi
  done
  if [ -n "$vram_dev" ]; then
    echo 1 >"$vram_dev/enable" 2>/dev/null
    say "software GPU VRAM in ivshmem ${vram_dev##*/} BAR2 (start end flags: $(sed -n 3p "$vram_dev/resource"))"
    AGGREGATOR_ARGS="$AGGREGATOR_ARGS --sim-vram-file $vram_dev/resource2"
  else
    say "no ivshmem device: the software GPU's VRAM is dom0 memory, BAR remap keeps trapping"
  fi
fi

# ---- guests ---------------------------------------------------------------------------------------
# The guest runs dom0's kernel, at the same addresses (nokaslr; a PV dom0 is not randomized), so
# dom0's symbols name the guest's instruction pointer for xenctx (Debian's System.map is a stub).
grep -v '\[' /proc/kallsyms >/tmp/kernel.map
export LIBXL_DEVICE_MODEL_START_TIMEOUT=$XL_CREATE_TIMEOUT
# SeaBIOS's serial console off: an etc/sercon-port of 0 (two zero bytes). libxl starts QEMU with
# -nographic, for which SeaBIOS mirrors its screen to COM1 and polls COM1 for keys on every timer
# tick — each poll a port read emulated by qemu-system-xen in dom0. Under TCG that read takes longer
# than a tick, so the guest fell behind, Xen delivered the missed ticks back to back, and the guest
# spent its time in SeaBIOS's tick handler: "Booting from ROM" took 7 minutes to reach the serial
# console and the kernel never started within 10 (run of 2026-11-25 12:33, xenctx at f000:f3b1,
# `in al,dx` on 0x3fd). SeaBIOS's own log still reaches Xen's console through port 0xe9 ("(d1)").
printf '\000\000' >/tmp/sercon-off

# A guest's console output: its PV console (hvc0, through xenconsoled: a shared ring, no emulated
# device) and its serial port (what the kernel prints before hvc0 exists, and everything if hvc0
# never comes). The serial port is the slow one: every character is at least one port write
# emulated by qemu-system-xen in dom0, tens of milliseconds under TCG.
guest_logs() { echo "/var/log/xen/console/guest-$1.log /var/log/xen/$1-serial.log"; }
guest_done() { cat $(guest_logs "$1") 2>/dev/null | grep -q '^GPUVM-GUEST-RESULT'; }

# create_guest NAME TESTS: an HVM guest created paused — so gpuvm-dm can claim its PCI slot before
# the guest's firmware scans the bus. Its /init runs the guest programs named in TESTS (a comma
# list, or "all"). Sets guest_domid.
write_guest_cfg() {
  cat >"/tmp/$1.cfg" <<EOF
type = "hvm"
name = "$1"
memory = $GUEST_MEMORY_MB
vcpus = 1
device_model_version = "qemu-xen"
device_model_override = "/usr/libexec/xen-qemu-system-i386"
kernel = "/guest/vmlinuz"
ramdisk = "/guest/initrd.cpio"
cmdline = "console=ttyS0,115200 console=hvc0 loglevel=4 nokaslr pci=noearly gpuvm.tests=$2${3:+ $3}"
serial = "file:/var/log/xen/$1-serial.log"
vga = "none"
vnc = 0
sdl = 0
nographic = 1
on_poweroff = "destroy"
# A crash or a reboot (a triple fault is one) keeps the domain, so dom0 can say what happened.
on_reboot = "preserve"
on_crash = "preserve"
# cmdline: /dev/console is the last console= (hvc0; ttyS0 when hvc0 does not come up). nokaslr:
# the kernel at the addresses dom0's symbols give, for xenctx. pci=noearly: no early PCI scans —
# TCG's CPU is an AMD family 15h, for which the kernel searches for a GART aperture by reading the
# class of every slot of all 256 buses, twice (early_gart_iommu_check, gart_iommu_hole_init):
# 32,768 port accesses emulated by qemu-system-xen, many minutes under TCG (runs of 12:47 and 13:00,
# xenctx: read_pci_config+0x2f with 0x80351008 = bus 0x35, slot 2, offset 8 in eax; iommu=noaperture
# does not stop the first of the two).
# Required under TCG: otherwise Xen traps RDTSCP, which TCG's SVM reports as RDTSC, and the guest
# gets #GP early in boot (docs/XEN-TESTBED.md).
tsc_mode = "native"
device_model_args_hvm = [ "-fw_cfg", "name=etc/sercon-port,file=/tmp/sercon-off" ]
EOF
}
create_guest() {
  write_guest_cfg "$1" "$2"
  create_start=$(uptime_s)
  run "xl-create-$1" "$XL_CREATE_TIMEOUT" xl create -p "/tmp/$1.cfg"
  guest_domid=$(xl domid "$1") || fail "xl domid $1"
  say "guest $1 created paused: domid $guest_domid ($create_start s -> $(uptime_s) s)"
  follow_consoles "$1"
}
# Streams guest NAME's consoles to ours as they come (the host log keeps everything).
follow_consoles() {
  for log in $(guest_logs "$1"); do
    : >>"$log"
    (tail -n +1 -f "$log" 2>/dev/null | while IFS= read -r line; do echo "GUEST $1| $line"; done) &
  done
}

# xl_create_guest NAME TESTS VMNAME MODE VARIANT VRAM_MIB [DM_OPTIONS [CMDLINE]]: the guest booted as an operator boots one
# (docs/OPERATOR.md "Xen guests"): its xl config carries gpuvm's settings, and the installed
# `gpuvm-xl create` creates it paused, starts its gpuvm-dm (no systemd here: in the background,
# log in /var/log/gpuvm/dm-NAME.log) and unpauses it once gpuvm-dm attached. Sets guest_domid.
xl_guests=""
xl_create_guest() {
  write_guest_cfg "$1" "$2" "${8:-}"
  cat >>"/tmp/$1.cfg" <<EOF
# gpuvm's virtual GPU (gpuvm-xl takes these lines out before xl reads the file)
gpuvm_mode = "$4"
gpuvm_variant = "$5"
gpuvm_vram_mib = $6
gpuvm_name = "$3"
gpuvm_sbdf = "$DM_SBDF"
gpuvm_dm_options = "${7:---guest-ram-mib $GUEST_MEMORY_MB --reply-timeout-ms 120000}"
EOF
  create_start=$(uptime_s)
  run "gpuvm-xl-create-$1" "$XL_CREATE_TIMEOUT" gpuvm-xl create "/tmp/$1.cfg"
  guest_domid=$(xl domid "$1") || fail "xl domid $1"
  xl_guests="$xl_guests $1"
  say "guest $1 booted with gpuvm-xl: domid $guest_domid ($create_start s -> $(uptime_s) s):" \
    "$(grep -e 'serving the virtual GPU' -e 'device 0 serving' "/var/log/gpuvm/dm-$1.log")"
  follow_consoles "$1"
}
is_xl_guest() {
  case " $xl_guests " in *" $1 "*) return 0 ;; esac
  return 1
}
# Where gpuvm-dm of guest NAME logs.
dm_log() { if is_xl_guest "$1"; then echo "/var/log/gpuvm/dm-$1.log"; else echo "/tmp/dm-$1.log"; fi; }

# start_dm NAME DOMID MODE VMNAME [OPTION...]: gpuvm-dm as the second IOREQ server of guest NAME,
# claiming DM_SBDF, registered with the aggregator as VMNAME with the typed VM options that follow
# (--variant, --vram-mib; docs/IPC.md VM_CONFIG). Its
# VM's one-time token (docs/SECURITY.md) comes from the aggregator's control socket into a file
# only root reads — never a command line — and the file goes once gpuvm-dm has read it.
dm_pids=""
start_dm() {
  dm_guest=$1 dm_domid=$2 dm_mode=$3 dm_name=$4
  shift 4
  token="/run/gpuvm/dm-$dm_domid.token"
  mkdir -p -m 0755 /run/gpuvm
  (umask 077 && gpuvm-ctl vm-token "$dm_domid" >"$token") ||
    fail "no VM token for $dm_guest (domain $dm_domid)"
  gpuvm-dm --backend xen --domid "$dm_domid" --mode "$dm_mode" --sbdf "$DM_SBDF" \
    --name "$dm_name" "$@" --token-file "$token" \
    --guest-ram-mib "$GUEST_MEMORY_MB" --reply-timeout-ms 120000 >"/tmp/dm-$dm_guest.log" 2>&1 &
  dm_pid=$!
  dm_pids="$dm_pids $dm_pid"
  # The slot is claimed before the guest runs: hvmloader must find the device when it scans.
  tries=0
  until grep -q 'msg="serving the virtual GPU at ' "/tmp/dm-$dm_guest.log" 2>/dev/null; do
    if ! kill -0 $dm_pid 2>/dev/null; then
      wait $dm_pid
      fail "gpuvm-dm for $dm_guest exited at start (status $?)"
    fi
    tries=$((tries + 1))
    [ $tries -gt 120 ] && fail "gpuvm-dm for $dm_guest did not report ready"
    sleep 1
  done
  rm -f "$token"
  say "gpuvm-dm attached for $dm_guest (pid $dm_pid): $(tail -n 1 "/tmp/dm-$dm_guest.log")"
}
# Stops every gpuvm-dm; each prints its trap counters as it goes.
stop_dms() {
  for pid in $dm_pids; do kill "$pid" 2>/dev/null; done
  [ -n "$dm_pids" ] && sleep 3
  dm_pids=""
}

# run_guests TIMEOUT NAME:DOMID...: unpauses the guests and waits (bounded) for each one's
# GPUVM-GUEST-RESULT line. A guest that crashes, shuts down early or vanishes fails the run.
run_guests() {
  limit=$1
  shift
  started=$(uptime_s)
  for g in "$@"; do
    is_xl_guest "${g%%:*}" && continue  # gpuvm-xl unpaused it
    run "xl-unpause-${g%%:*}" 60 xl unpause "${g#*:}"
  done
  say "guests unpaused: $*"
  next_sample=60
  for g in "$@"; do eval "missing_${g#*:}=0"; done
  while :; do
    pending=""
    for g in "$@"; do
      gname=${g%%:*} gdom=${g#*:}
      guest_done "$gname" && continue
      pending="$pending $g"
      # `xl list` columns: name id mem vcpus state time; state letters r b p s c d.
      listing=$(xl list "$gname" 2>&1)
      state=$(echo "$listing" | awk -v n="$gname" '$1 == n {print $5}')
      case "$state" in
        "")
          # Gone (or xl failed): one failed `xl list` under a loaded TCG host is not proof, three
          # in a row are.
          guest_done "$gname" && continue
          eval "missing_$gdom=\$((missing_$gdom + 1))"
          if [ "$(eval echo "\$missing_$gdom")" -ge 3 ]; then
            say "xl list $gname: $listing"
            guest_diagnostics "$@"
            fail "guest $gname vanished before its result line"
          fi
          ;;
        *c* | *s*)
          sleep 2
          guest_done "$gname" && continue
          say "guest $gname state $state: $listing"
          guest_diagnostics "$@"
          fail "guest $gname crashed or shut down before its result line (xl state $state)"
          ;;
        *) eval "missing_$gdom=0" ;;
      esac
    done
    [ -z "$pending" ] && break
    # Measured on the clock: one `xl list` alone can take seconds under TCG.
    waited=$(awk -v a="$started" '{printf "%d", $1 - a}' /proc/uptime)
    # A sample of where each guest is, once a minute: one that stopped making progress shows it.
    if [ "$waited" -ge "$next_sample" ]; then
      for g in $pending; do say "guest ${g%%:*} after ${waited}s: $(guest_where "${g#*:}")"; done
      next_sample=$((waited + 60))
    fi
    if [ "$waited" -ge "$limit" ]; then
      guest_diagnostics $pending
      fail "no result within ${limit}s from:$pending"
    fi
    # Not faster: every `xl list` is a toolstack start-up, seconds of dom0 CPU under TCG.
    sleep 10
  done
  say "guests finished: $* (unpaused at ${started}s, done at $(uptime_s)s)"
}

# The device models' logs of guests NAME... (their trap counters end them).
show_dm_logs() {
  for name in "$@"; do
    echo "----- gpuvm-dm of $name"
    sed "s/^/DM $name| /" "$(dm_log "$name")" 2>/dev/null
  done
}

# The result line of guest NAME (empty when it printed none).
guest_result() { cat $(guest_logs "$1") 2>/dev/null | grep -m1 '^GPUVM-GUEST-RESULT'; }

# Until gpuvm-aggregator says it serves (it listens from then on): its start-up takes seconds under
# TCG — clearing a VRAM that lives in the ivshmem BAR is 256 MiB of stores — so a fixed sleep raced
# it (a clean-clone run at 8399162: "gpuvm-dm: Unavailable: nothing listens").
wait_for_aggregator() {
  local waited=0
  until grep -q 'component=gpuvm-aggregator msg="serving ' /tmp/aggregator.log 2>/dev/null; do
    if ! kill -0 "$agg_pid" 2>/dev/null; then
      wait "$agg_pid"
      fail "gpuvm-aggregator exited at start (status $?)"
    fi
    [ "$waited" -ge 120 ] && fail "gpuvm-aggregator did not start serving within 120 s"
    sleep 1
    waited=$((waited + 1))
  done
}

# The aggregator as gpuvm-aggregator.service starts it (ExecStart: --socket /run/gpuvm/aggregator
# and /etc/gpuvm/aggregator.conf's options, --socket-group gpuvm among them), then the test bed's
# own (the software GPU's size and VRAM file, patience under TCG), which come later and so win.
start_aggregator() {
  mkdir -p -m 0755 /run/gpuvm
  GPUVM_AGGREGATOR_OPTIONS=""
  # shellcheck disable=SC1091
  [ -f /etc/gpuvm/aggregator.conf ] && . /etc/gpuvm/aggregator.conf
  export GPUVM_AGGREGATOR=/run/gpuvm/aggregator
  say "gpuvm-aggregator --socket $GPUVM_AGGREGATOR $GPUVM_AGGREGATOR_OPTIONS $AGGREGATOR_ARGS"
  gpuvm-aggregator --socket "$GPUVM_AGGREGATOR" $GPUVM_AGGREGATOR_OPTIONS $AGGREGATOR_ARGS \
    >/tmp/aggregator.log 2>&1 &
  agg_pid=$!
  wait_for_aggregator
  say "aggregator sockets: $(ls -l /run/gpuvm | awk '/^s/ {print $1, $3, $4, $NF}' | tr '\n' ';')"
}

# ---- the pass-through guest, and the backend's typed tests against it ----------------------------
summary=""
if [ "${PT_GUEST:-1}" = 1 ]; then
create_guest gpuvm-guest "${PT_TESTS:-all}"
domid=$guest_domid

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

if [ -n "$DM_MODE" ]; then
  start_aggregator
  start_dm gpuvm-guest "$domid" "$DM_MODE" gpuvm-guest
fi
run_guests "$GUEST_BOOT_TIMEOUT" "gpuvm-guest:$domid"
[ -n "$DM_MODE" ] && sessions_expected=1
summary="pt=[$(guest_result gpuvm-guest)]"
# Let the guest's poweroff tear things down, then end its device model: the aggregator admits fv
# VMs only once no pt VM is left.
sleep 3
xl destroy "$domid" 2>/dev/null
stop_dms
[ -n "$DM_MODE" ] && show_dm_logs gpuvm-guest
fi

# ---- fv and pv guests -----------------------------------------------------------------------
# vgpu_phase PREFIX COUNT DM_MODE VARIANT VRAM_MIB TESTS TIMEOUT: COUNT HVM guests PREFIX1.. at
# once, each with gpuvm-dm in DM_MODE (fv or pv) registered as PREFIXi with that variant and VRAM
# slice (VM_CONFIG's typed fields), each running TESTS.
vgpu_phase() {
  prefix=$1 count=$2 dm_mode=$3 variant=$4 vram_mib=$5 tests=$6 timeout=$7
  if [ -z "${agg_pid:-}" ]; then
    start_aggregator
  fi
  list=""
  i=1
  while [ $i -le "$count" ]; do
    case " $XL_PHASES " in
      *" $prefix "*)
        xl_create_guest "gpuvm-$prefix$i" "$tests" "$prefix$i" "$dm_mode" "$variant" "$vram_mib"
        ;;
      *)
        create_guest "gpuvm-$prefix$i" "$tests"
        start_dm "gpuvm-$prefix$i" "$guest_domid" "$dm_mode" "$prefix$i" \
          --variant "$variant" --vram-mib "$vram_mib"
        ;;
    esac
    list="$list gpuvm-$prefix$i:$guest_domid"
    i=$((i + 1))
  done
  run_guests "$timeout" $list
  sessions_expected=$((${sessions_expected:-0} + count))
  for g in $list; do
    summary="$summary ${g%%:*}=[$(guest_result "${g%%:*}")]"
    if is_xl_guest "${g%%:*}"; then
      # The operator's way down: the domain (gone already if the guest powered off), then its
      # gpuvm-dm, which prints its counters.
      run "gpuvm-xl-destroy-${g%%:*}" 120 gpuvm-xl destroy "${g%%:*}"
    else
      xl destroy "${g#*:}" 2>/dev/null
    fi
  done
  stop_dms
  for g in $list; do show_dm_logs "${g%%:*}"; done
  # Each device model's trap counters and remapped ranges (pv: its calls and doorbells), for the
  # summary.
  for g in $list; do
    say "gpuvm-dm of ${g%%:*}: $(grep -h -e 'BAR0 r=' -e 'BAR remap:' -e 'gpuvm-counters: pv_' \
      "$(dm_log "${g%%:*}")" | sed 's/^.* msg="//; s/"$//' | tr '\n' ' ')"
  done
}

# FV_GUESTS guests in full virtualization (FV_MODE), each with its own VRAM slice of FV_VRAM_MIB,
# running FV_TESTS at the same time; then PV_GUESTS para-virtual ones (PV_MODE: the page tables
# written by validated calls, docs/PARAVIRT.md) running PV_TESTS.
if [ -n "$DM_MODE" ] && [ "${FV_GUESTS:-0}" -gt 0 ]; then
  vgpu_phase fv "$FV_GUESTS" fv "$FV_MODE" "$FV_VRAM_MIB" "$FV_TESTS" "$FV_BOOT_TIMEOUT"
fi
if [ -n "$DM_MODE" ] && [ "${PV_GUESTS:-0}" -gt 0 ]; then
  vgpu_phase pv "$PV_GUESTS" pv "$PV_MODE" "$PV_VRAM_MIB" "$PV_TESTS" "$FV_BOOT_TIMEOUT"
fi

# PVDRM_GUESTS guests with the pvdrm kernel frontend (docs/PVDRM.md "The Linux kernel frontend"),
# booted by `gpuvm-xl create` with gpuvm_mode = "pvdrm": gpuvm-pvdrm-backend serves each one's
# vgpu-drm device; the guest loads drm.ko and pvdrm.ko (gpuvm.pvdrm=1), its render node appears and
# it runs PVDRM_TESTS with the runtime on that node. The backend's DMA pool: 16 MiB of the guest's
# RAM 32 MiB below its top, which mem= keeps from the guest's kernel. Its log says, for every
# DRM file closed, how many files and objects the guest still has: the last line must be "0 files
# and 0 objects left" (a killed process's objects were freed too).
pvdrm_phase() {
  [ -z "${agg_pid:-}" ] && start_aggregator
  pool_first=$(( (GUEST_MEMORY_MB - 32) * 256 ))
  pool_options="--pool $pool_first:4096 --guest-ram-mib $GUEST_MEMORY_MB"
  pool_cmdline="gpuvm.pvdrm=1 gpuvm.pvdrm_pool=${PVDRM_POOL_BYTES:-0} mem=$((GUEST_MEMORY_MB - 32))M"
  list=""
  i=1
  while [ $i -le "$PVDRM_GUESTS" ]; do
    xl_create_guest "gpuvm-pvdrm$i" "$PVDRM_TESTS" "pvdrm$i" pvdrm - "$PVDRM_VRAM_MIB" \
      "$pool_options" "$pool_cmdline"
    list="$list gpuvm-pvdrm$i:$guest_domid"
    i=$((i + 1))
  done
  run_guests "$FV_BOOT_TIMEOUT" $list
  sessions_expected=$((${sessions_expected:-0} + PVDRM_GUESTS))
  for g in $list; do
    gname=${g%%:*}
    left=$(grep -o 'closed (status [-0-9]*): [0-9]* files and [0-9]* objects left' \
      "$(dm_log "$gname")" | tail -n 1)
    result_line=$(guest_result "$gname")
    case "$left" in
      *": 0 files and 0 objects left") ;;
      *) result_line="FAIL backend: after the guest's last file: '${left:-no file closed}'" ;;
    esac
    summary="$summary $gname=[$result_line]"
    run "gpuvm-xl-destroy-$gname" 120 gpuvm-xl destroy "$gname"
    show_dm_logs "$gname"
    say "gpuvm-pvdrm-backend of $gname: $(grep -c ' closed (status' "$(dm_log "$gname")") files" \
      "closed, last: $left; $(grep -h 'gpuvm-counters: pvdrm' "$(dm_log "$gname")")"
  done
}
if [ -n "$DM_MODE" ] && [ "${PVDRM_GUESTS:-0}" -gt 0 ]; then
  pvdrm_phase
fi

if [ -n "$DM_MODE" ]; then
  # Every session's end line (and the GPU reset after the last VM, which zeroes VRAM) before the
  # aggregator goes: bounded, the lines are only for the log.
  sessions=$(grep -c 'session ended' /tmp/aggregator.log)
  tries=0
  while [ "$sessions" -lt "${sessions_expected:-0}" ] && [ $tries -lt 60 ]; do
    sleep 1
    tries=$((tries + 1))
    sessions=$(grep -c 'session ended' /tmp/aggregator.log)
  done
  sleep 2
  kill $agg_pid 2>/dev/null
  sleep 1
  echo "----- gpuvm-aggregator"
  sed 's/^/AGG| /' /tmp/aggregator.log
  echo "-----"
  # Each fv VM's traps and BAR remap, for the summary.
  sed -n "s/^.* vm=\([0-9]*\) name=\([^ ]*\) msg=\"\(fv-[a-z-]*\),.*traps BAR0\/1\/3 \([0-9\/]*\).*\(remap syncs .*\)\"$/VM \1 '\2' \3: traps BAR0\/1\/3 \4, \5/p" \
    /tmp/aggregator.log | while IFS= read -r line; do say "aggregator $line"; done
fi

case "$summary" in
  *FAIL* | *"[]"*) result "FAIL $summary" ;;
  *) result "PASS $summary" ;;
esac
