# Helpers to assemble an initramfs tree ("staging") from the unpacked packages and the host (sourced by
# mkimages.sh; docs/XEN-TESTBED.md). The tree uses Debian 12's merged-/usr layout: /bin, /sbin, /lib
# and /lib64 are symlinks into /usr, so a path from either spelling lands in one place.
#
# Needs: $STAGE (the tree), $PKGROOT (unpacked packages). Shared libraries are found with ldd, looking
# first in the unpacked packages, then on the host.

stage_init() {
  rm -rf "$STAGE"
  mkdir -p "$STAGE"/usr/{bin,sbin,lib,lib64} "$STAGE"/{dev,proc,sys,tmp,run,etc,root,var/log,var/run}
  ln -s usr/bin "$STAGE/bin"
  ln -s usr/sbin "$STAGE/sbin"
  ln -s usr/lib "$STAGE/lib"
  ln -s usr/lib64 "$STAGE/lib64"
  chmod 1777 "$STAGE/tmp"
  # The kernel opens /dev/console for /init before anything is mounted: without the node /init
  # would run with no stdout at all.
  mknod -m 600 "$STAGE/dev/console" c 5 1
  mknod -m 666 "$STAGE/dev/null" c 1 3
}

# The path a file has inside the tree: /lib/... and /lib64/... become /usr/lib/..., /usr/lib64/....
stage_target() {
  local path=$1
  case "$path" in
    /lib/* | /lib64/* | /bin/* | /sbin/*) echo "/usr$path" ;;
    *) echo "$path" ;;
  esac
}

# stage_file SRC DEST: copies SRC to DEST inside the tree (parents created, symlinks followed).
stage_file() {
  local src=$1 dest
  dest=$(stage_target "$2")
  mkdir -p "$STAGE$(dirname "$dest")"
  cp -L "$src" "$STAGE$dest"
}

# stage_binary SRC DEST: as stage_file, debug info stripped, then every shared library it needs.
stage_binary() {
  local src=$1 dest=$2
  stage_file "$src" "$dest"
  local staged
  staged="$STAGE$(stage_target "$dest")"
  if file -b "$staged" | grep -q '^ELF'; then
    strip --strip-debug "$staged" 2>/dev/null || true
    stage_libraries "$src"
  fi
}

STAGE_LD_PATH=""
stage_ld_path() {
  STAGE_LD_PATH="$PKGROOT/usr/lib/x86_64-linux-gnu:$PKGROOT/lib/x86_64-linux-gnu"
  STAGE_LD_PATH+=":$PKGROOT/usr/lib/xen-4.17/lib"
  if [[ -n "${STAGE_EXTRA_LD_PATH:-}" ]]; then STAGE_LD_PATH+=":$STAGE_EXTRA_LD_PATH"; fi
}

# Copies the shared libraries an ELF file needs (ldd), each to the path the loader will look at.
stage_libraries() {
  local elf=$1 line name path missing=()
  [[ -n "$STAGE_LD_PATH" ]] || stage_ld_path
  while IFS= read -r line; do
    if [[ "$line" == *"=> not found"* ]]; then
      missing+=("$(awk '{print $1}' <<<"$line")")
      continue
    fi
    if [[ "$line" =~ ^[[:space:]]*([^[:space:]]+)[[:space:]]=\>[[:space:]](/[^[:space:]]+) ]]; then
      name=${BASH_REMATCH[1]}
      path=${BASH_REMATCH[2]}
    elif [[ "$line" =~ ^[[:space:]]*(/[^[:space:]]+)[[:space:]]\( ]]; then
      path=${BASH_REMATCH[1]}  # the loader itself
      name=$(basename "$path")
      stage_file "$path" "$path"
      continue
    else
      continue
    fi
    local dest
    case "$path" in
      "$PKGROOT"/*) dest=${path#"$PKGROOT"} ;;
      "${STAGE_EXTRA_LD_PATH:-/nonexistent}"/*) dest=/usr/lib/x86_64-linux-gnu/$name ;;
      *) dest=$path ;;
    esac
    # Install under the soname the binary asks for (ldd may show the real file's name).
    dest=$(dirname "$dest")/$name
    [[ -e "$STAGE$(stage_target "$dest")" ]] || stage_file "$path" "$dest"
  done < <(LD_LIBRARY_PATH="$STAGE_LD_PATH" ldd "$elf" 2>/dev/null)
  if ((${#missing[@]})); then
    echo "xen-testbed: $elf needs libraries found neither in the packages nor on the host:" \
      "${missing[*]}" >&2
    return 1
  fi
}

# stage_pack OUT [zstd]: packs the tree as a newc cpio, uncompressed unless asked. Uncompressed
# suits dom0: the outer QEMU loads it at memory speed and the kernel unpacks it without inflating
# anything, which is slow under TCG. The HVM guest's image is compressed: qemu-system-xen hands it
# over through fw_cfg's data port, one byte per emulated `rep insb` element, which under TCG costs
# far more per byte than zstd's decompression in the guest.
stage_pack() {
  local out=$1 compress=${2:-}
  (cd "$STAGE" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) >"$out.tmp"
  if [[ "$compress" == zstd ]]; then
    zstd -q -10 -T0 --check -f "$out.tmp" -o "$out.tmp.zst"
    mv "$out.tmp.zst" "$out.tmp"
  fi
  mv "$out.tmp" "$out"
}
