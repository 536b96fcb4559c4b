#!/bin/sh
# The pvdrm guest's multi-process checks (docs/XEN-TESTBED.md, pvdrm phase), run by guest-init.sh
# with the runtime on the pvdrm kernel frontend's render node (GPUVM_BUS unset: it finds the node).
#
#   pvdrm-guest.sh pair   madd and mmul from the kernel corpus in two processes at once (two DRM
#                         files of one device): both must pass
#   pvdrm-guest.sh kill   a process launching kernels is killed with SIGKILL while mmul runs in
#                         another: mmul must pass; the killed one's files are closed by the kernel
#                         (dom0 checks that the backend has no file and no object left at the end)
pt=/gpuvm/bin/gpuvm-pt-guest
# wait_file PATH SECONDS: until PATH exists; 1 when it does not in time.
wait_file() {
  waited=0
  while [ ! -e "$1" ]; do
    [ "$waited" -ge "$2" ] && return 1
    sleep 1
    waited=$((waited + 1))
  done
  return 0
}

case "$1" in
  pair)
    "$pt" case madd >/tmp/pair-madd.log 2>&1 &
    a=$!
    "$pt" case mmul >/tmp/pair-mmul.log 2>&1 &
    b=$!
    wait $a
    ra=$?
    wait $b
    rb=$?
    sed 's/^/madd: /' /tmp/pair-madd.log
    sed 's/^/mmul: /' /tmp/pair-mmul.log
    echo "madd exit $ra, mmul exit $rb"
    [ $ra = 0 ] && [ $rb = 0 ]
    ;;
  kill)
    rm -f /tmp/held
    # hold: empty kernels back to back until killed; /tmp/held once the first one completed.
    "$pt" hold /tmp/held >/tmp/kill-hold.log 2>&1 &
    victim=$!
    if ! wait_file /tmp/held 900; then
      echo "the process to kill launched nothing within 900 s"
      kill -9 $victim 2>/dev/null
      cat /tmp/kill-hold.log
      exit 1
    fi
    "$pt" case mmul >/tmp/kill-mmul.log 2>&1 &
    other=$!
    sleep 2
    kill -9 $victim
    wait $victim
    rv=$?
    echo "killed the kernel-launching process (pid $victim, exit $rv) while mmul ran"
    wait $other
    ro=$?
    sed 's/^/mmul: /' /tmp/kill-mmul.log
    echo "mmul exit $ro"
    [ $rv = 137 ] && [ $ro = 0 ]
    ;;
  *)
    echo "usage: pvdrm-guest.sh pair|kill" >&2
    exit 2
    ;;
esac
