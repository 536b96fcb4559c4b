#!/usr/bin/env bash
# Runs every libFuzzer target of the fuzz build (executables named *_fuzz) for the given number of seconds.
# Seeds come from <component>/fuzz/<target>/ when that folder exists, and from <build>/fuzz-seeds/<target>/
# (the kernel corpus's PTX, for targets declared with KERNEL_CORPUS_SEEDS); new inputs go to
# <build>/corpus/.
# Exits non-zero as soon as one target finds a crash, leak or UB report.
set -euo pipefail
build=${1:-build-fuzz}
seconds=${2:-60}
mapfile -t targets < <(find "$build" -type f -executable -name '*_fuzz' | sort)
if ((${#targets[@]} == 0)); then
  echo "fuzz: no targets in $build" >&2
  exit 1
fi
for target in "${targets[@]}"; do
  name=$(basename "$target")
  corpus="$build/corpus/$name"
  mkdir -p "$corpus"
  seeds=()
  while IFS= read -r dir; do seeds+=("$dir"); done < <(find . -path ./build\* -prune -o -type d -path "*/fuzz/$name" -print)
  if [[ -d "$build/fuzz-seeds/$name" ]]; then seeds+=("$build/fuzz-seeds/$name"); fi
  echo "== $name for ${seconds}s"
  UBSAN_OPTIONS=halt_on_error=1 "$target" -max_total_time="$seconds" -print_final_stats=1 \
    -artifact_prefix="$build/" "$corpus" "${seeds[@]}" 2>&1 | tail -n 12
  echo "== $name: clean"
done
