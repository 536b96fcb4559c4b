#!/usr/bin/env bash
# Two builds of gpuvm side by side: runs gpuvm-bench of OLD and of NEW alternately, one measured run
# of each per round (so machine noise hits both alike), then prints, per benchmark and mode, the
# median seconds of each and NEW/OLD; and per build the mode/native ratio. Used to check that a
# change slows no hot path (e.g. issue 13's "at most 2 %").
#
#   scripts/bench-compare.sh OLD_BUILD NEW_BUILD [ROUNDS] [gpuvm-bench flags...]
#   scripts/bench-compare.sh /work/baseline/build build 5 --mode native,fv-optimized
#
# Each build's gpuvm-bench runs its own programs; results (JSON lines, one per run) go to
# $OUT (default build/bench-compare/) as old.jsonl and new.jsonl, the table to summary.txt.
set -euo pipefail

if [[ $# -lt 2 ]]; then
  echo "usage: $0 OLD_BUILD NEW_BUILD [ROUNDS] [gpuvm-bench flags...]" >&2
  exit 2
fi
old=$1 new=$2
shift 2
rounds=5
if [[ $# -gt 0 && $1 =~ ^[0-9]+$ ]]; then
  rounds=$1
  shift
fi
for b in "$old" "$new"; do
  if [[ ! -x $b/bench/gpuvm-bench ]]; then
    echo "$0: no gpuvm-bench in $b/bench (build it first)" >&2
    exit 2
  fi
done
out=${OUT:-build/bench-compare}
mkdir -p "$out"
rm -f "$out/old.jsonl" "$out/new.jsonl" "$out"/old/results.jsonl "$out"/new/results.jsonl
mkdir -p "$out/old" "$out/new"

for ((r = 0; r < rounds; ++r)); do
  # Alternate which goes first, so neither always runs right after the other's warm caches.
  order=(old new)
  ((r % 2 == 1)) && order=(new old)
  for which in "${order[@]}"; do
    dir=$old
    [[ $which == new ]] && dir=$new
    warmup=0
    ((r == 0)) && warmup=1
    "$dir/bench/gpuvm-bench" --runs 1 --warmup "$warmup" --quiet --out "$out/$which" "$@" \
      >/dev/null || { echo "$0: gpuvm-bench of $which failed (round $r)" >&2; exit 1; }
  done
  echo "round $((r + 1))/$rounds done" >&2
done
cp "$out/old/results.jsonl" "$out/old.jsonl"
cp "$out/new/results.jsonl" "$out/new.jsonl"

python3 - "$out/old.jsonl" "$out/new.jsonl" <<'EOF' | tee "$out/summary.txt"
import json, statistics, sys
def load(path):
    runs = {}
    for line in open(path):
        r = json.loads(line)
        if not r.get("correct", False):
            sys.exit(f"a run in {path} was not correct: {r.get('bench')} {r.get('mode')}")
        runs.setdefault((r["bench"], r["mode"]), []).append(r["seconds"])
    return {k: statistics.median(v) for k, v in runs.items()}
old, new = load(sys.argv[1]), load(sys.argv[2])
benches = sorted({b for b, _ in old}, key=lambda b: [k[0] for k in old].index(b))
modes = sorted({m for _, m in old}, key=lambda m: (m != "native", m))
print(f"{'bench':<10}{'mode':<15}{'old s':>10}{'new s':>10}{'new/old':>9}"
      f"{'old/native':>12}{'new/native':>12}")
ratios = {}
for b in benches:
    for m in modes:
        if (b, m) not in old or (b, m) not in new:
            continue
        o, n = old[(b, m)], new[(b, m)]
        ratios.setdefault(m, []).append(n / o)
        on = o / old[(b, "native")] if (b, "native") in old else float("nan")
        nn = n / new[(b, "native")] if (b, "native") in new else float("nan")
        print(f"{b:<10}{m:<15}{o:>10.4f}{n:>10.4f}{n / o:>9.3f}{on:>12.3f}{nn:>12.3f}")
for m, rs in ratios.items():
    print(f"median new/old over benchmarks, {m}: {statistics.median(rs):.3f} "
          f"(geometric mean {statistics.geometric_mean(rs):.3f})")
EOF
