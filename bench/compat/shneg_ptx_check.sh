#!/usr/bin/env bash
# Proves that nvcc -O3 really emits, for compat-shneg's kernels (shneg.cu), the shared-memory
# address shapes the program is about: shared loads at a negative immediate from a 32-bit register
# (`ld.shared.u32 %r, [%rN+-64]`), and a base formed by `sub.s32` that shared loads then use with an
# immediate (`[%rN+imm]`). If a future nvcc stops doing so, this fails and the corpus needs another
# kernel.
#   shneg_ptx_check.sh <nvcc> <shneg.cu> <source root> <work dir>
set -euo pipefail
nvcc=$1 src=$2 root=$3 work=$4
mkdir -p "$work"
ptx="$work/shneg.ptx"
"$nvcc" -O3 -ptx -std=c++20 -I"$root" -o "$ptx" "$src"
negative=$(grep -cE 'ld\.shared\.u32[[:space:]]+%r[0-9]+, \[%r[0-9]+\+-[0-9]+\]' "$ptx" || true)
if [[ "$negative" -lt 8 ]]; then
  echo "FAIL: $negative shared loads at a negative immediate (want at least 8) in $ptx"
  exit 1
fi
# A register made by sub.s32 feeds (through the shift and the add of the array's base) loads at
# immediates: find the sub.s32, then a later ld.shared with a positive immediate in the same kernel.
if ! awk '
  /^\.visible \.entry/ { sub_seen = 0 }
  /sub\.s32/ { sub_seen = 1 }
  sub_seen && /ld\.shared\.u32[ \t]+%r[0-9]+, \[%r[0-9]+\+[0-9]+\]/ { found = 1 }
  END { exit found ? 0 : 1 }' "$ptx"; then
  echo "FAIL: no sub.s32-formed base with [%r+imm] shared loads in $ptx"
  exit 1
fi
echo "OK: $negative shared loads at negative immediates; a sub.s32 base with [%r+imm] loads"
