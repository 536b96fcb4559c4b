#!/usr/bin/env bash
# gpuvm-xl (tools/gpuvm-xl/gpuvm-xl) against stand-ins for xl, gpuvm-ctl, gpuvm-dm and systemctl
# that record what they are asked, so its logic is checked on any host (the Xen test bed runs it
# for real: docs/XEN-TESTBED.md). Checked, with and without systemd:
#  - create: xl gets a copy of the config without the gpuvm_* lines, created paused; gpuvm-dm gets
#    the domain's id, the VM's name and typed options, the token through fd 3 (not its command
#    line), and a ready file; xl unpause comes only after gpuvm-dm attached;
#  - a gpuvm-dm that exits at start fails the create and the domain is destroyed again;
#  - destroy and shutdown: the domain first, then its gpuvm-dm (a domain already gone is fine);
#  - bad settings (mode, names, quotes) are refused before anything is created.
#   gpuvm_xl_test.sh <gpuvm-xl>
set -euo pipefail
xl_script=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
work=$(mktemp -d /tmp/gpuvm-xl-test-XXXXXX)
trap 'pkill -P $$ 2>/dev/null || true; for p in "$work"/run/vm/*.pid; do [[ -f $p ]] && kill "$(cat "$p")" 2>/dev/null; done; rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; echo "--- calls:"; cat "$work/calls" 2>/dev/null; exit 1; }

mkdir -p "$work/bin" "$work/run" "$work/log" "$work/etc/vm"
calls=$work/calls
: > "$calls"
# xl: create -p FILE (records the file), domid NAME (7 while created), unpause, destroy, shutdown.
cat > "$work/bin/xl" <<EOF
#!/bin/sh
echo "xl \$*" >> $calls
case "\$1" in
  create) cp "\$3" $work/xl-saw.cfg; touch $work/domain ;;
  domid) [ -f $work/domain ] && echo 7 || exit 1 ;;
  destroy|shutdown) rm -f $work/domain ;;
esac
exit 0
EOF
cat > "$work/bin/gpuvm-ctl" <<EOF
#!/bin/sh
echo "gpuvm-ctl \$* GPUVM_AGGREGATOR=\$GPUVM_AGGREGATOR" >> $calls
[ "\$1" = vm-token ] && echo 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
EOF
# gpuvm-dm: records its arguments and what fd 3 holds, attaches (the ready file), serves until
# SIGTERM. GPUVM_FAKE_DM_FAILS=1: exits at start.
cat > "$work/bin/gpuvm-dm" <<EOF
#!/bin/sh
echo "gpuvm-dm \$*" >> $calls
[ "\${GPUVM_FAKE_DM_FAILS:-0}" = 1 ] && { echo "cannot attach" >&2; exit 1; }
cat <&3 > $work/dm-token
while [ \$# -gt 0 ]; do [ "\$1" = --ready-file ] && touch "\$2"; shift; done
trap 'echo "gpuvm-dm stopped" >> $calls; exit 0' TERM
while :; do sleep 0.1; done
EOF
cat > "$work/bin/systemctl" <<EOF
#!/bin/sh
echo "systemctl \$*" >> $calls
unit=\${2#gpuvm-dm@}; name=\${unit%.service}
case "\$1" in
  start) GPUVM_XL_SYSTEMD=1 "$xl_script" dm "\$name" >> $work/log/unit.log 2>&1 & echo \$! > $work/unit.pid ;;
  stop) kill \$(cat $work/unit.pid); sleep 0.3 ;;
esac
EOF
chmod +x "$work"/bin/*
export PATH="$work/bin:$PATH" GPUVM_XL_RUN=$work/run GPUVM_XL_LOG=$work/log GPUVM_XL_ETC=$work/etc \
  GPUVM_XL_READY_TIMEOUT=10
unset GPUVM_AGGREGATOR

cat > "$work/guest.cfg" <<'EOF'
type = "hvm"
name = "guest1"
memory = 384
# gpuvm's settings: xl never sees them
gpuvm_mode = "pv"
gpuvm_variant = "multicall"
gpuvm_vram_mib = 96
gpuvm_channels = 4
gpuvm_share = 25
gpuvm_name = "pv1"
gpuvm_dm_options = "--reply-timeout-ms 120000"
EOF

for systemd in 0 1; do
  export GPUVM_XL_SYSTEMD=$systemd
  : > "$calls"
  out=$("$xl_script" create "$work/guest.cfg" 2>&1) || fail "create (systemd=$systemd): $out"
  grep -q '^type = "hvm"' "$work/xl-saw.cfg" || fail "xl did not get the config's xl lines"
  grep -q gpuvm_ "$work/xl-saw.cfg" && fail "xl saw gpuvm's lines: $(cat "$work/xl-saw.cfg")"
  grep -q '^xl create -p ' "$calls" || fail "the domain was not created paused"
  dm=$(grep '^gpuvm-dm ' "$calls") || fail "no gpuvm-dm started"
  for want in "--backend xen" "--domid 7" "--name pv1" "--mode pv" "--variant multicall" \
              "--vram-mib 96" "--channels 4" "--share 25" "--reply-timeout-ms 120000" \
              "--token-fd 3" "--ready-file $work/run/vm/guest1.ready"; do
    [[ $dm == *"$want"* ]] || fail "gpuvm-dm lacks '$want': $dm"
  done
  [[ $dm == *0123456789abcdef* ]] && fail "the token is on gpuvm-dm's command line"
  [[ $(cat "$work/dm-token") == 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef ]] ||
    fail "gpuvm-dm's fd 3 did not hold the token: '$(cat "$work/dm-token")'"
  grep -q "gpuvm-ctl vm-token 7 GPUVM_AGGREGATOR=/run/gpuvm/aggregator" "$calls" ||
    fail "the token was not asked of the service's aggregator for domain 7"
  # Unpaused last, after gpuvm-dm attached.
  [[ $(tail -n 1 "$calls") == "xl unpause 7" ]] || fail "xl unpause is not the last step"
  if [[ $systemd == 1 ]]; then
    grep -qx "systemctl start gpuvm-dm@guest1.service" "$calls" || fail "the unit was not started"
  else
    [[ -f $work/run/vm/guest1.pid ]] || fail "no pid file"
  fi
  out=$("$xl_script" destroy guest1 2>&1) || fail "destroy: $out"
  sed -n '/^xl destroy/,$p' "$calls" | grep -q "gpuvm-dm stopped" ||
    fail "gpuvm-dm was not stopped after the domain"
  [[ -e $work/run/vm/guest1.pid || -e $work/run/vm/guest1.conf ]] && fail "destroy left state behind"
done
export GPUVM_XL_SYSTEMD=0

# shutdown of a domain that already went (the guest powered off): only its gpuvm-dm is stopped.
"$xl_script" create "$work/guest.cfg" > /dev/null 2>&1 || fail "second create"
rm -f "$work/domain"
: > "$calls"
"$xl_script" shutdown guest1 > /dev/null 2>&1 || fail "shutdown of a gone domain"
grep -q '^xl shutdown' "$calls" && fail "xl shutdown was asked for a domain that is gone"
grep -q "gpuvm-dm stopped" "$calls" || fail "shutdown did not stop gpuvm-dm"

# A device model that cannot attach: the create fails and takes the domain down again.
: > "$calls"
if GPUVM_FAKE_DM_FAILS=1 "$xl_script" create "$work/guest.cfg" > "$work/out" 2>&1; then
  fail "create succeeded without a device model"
fi
grep -q "exited at start" "$work/out" || fail "no reason given: $(cat "$work/out")"
grep -q "^xl destroy 7" "$calls" || fail "the domain was left behind"
grep -q "^xl unpause" "$calls" && fail "a guest without its device model was unpaused"

# Bad settings: refused before anything is created.
for bad in 'gpuvm_mode = "xx"' 'gpuvm_name = "a b"' 'gpuvm_variant = "a$(id)"' \
           "gpuvm_share = \"1'\"" 'gpuvm_vram_mib = "9 9"'; do
  : > "$calls"
  { grep -v gpuvm_ "$work/guest.cfg"; echo "$bad"; } > "$work/bad.cfg"
  if "$xl_script" create "$work/bad.cfg" > "$work/out" 2>&1; then fail "'$bad' was accepted"; fi
  grep -q '^xl create' "$calls" && fail "'$bad': a domain was created"
  grep -q '^gpuvm-dm' "$calls" && fail "'$bad': gpuvm-dm ran"
done
sed 's/^name = .*/name = "bad name"/' "$work/guest.cfg" > "$work/bad.cfg"
"$xl_script" create "$work/bad.cfg" > "$work/out" 2>&1 && fail "a domain name with a space was accepted"
grep -q "not a name gpuvm takes" "$work/out" || fail "no reason for the bad name: $(cat "$work/out")"
echo "PASS: gpuvm-xl create/destroy/shutdown with and without systemd, failures and bad settings"
