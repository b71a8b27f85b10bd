#!/usr/bin/env bash
# Whole-process benchmarks of `transcriptd repair`, with baselines in the same session.
# Usage: benches/repair.sh [WORKDIR] [OUTDIR]   (needs hyperfine, python3; ~2 GiB in WORKDIR and
# as much in OUTDIR). OUTDIR defaults to /dev/shm (tmpfs: measures the tool, not the disk; pass a
# directory on disk to include fsync and writeback).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
work="${1:-/tmp/transcriptd-bench}"
outdir="${2:-/dev/shm/transcriptd-repair-bench}"
mkdir -p "$work" "$outdir"
bin="$root/target/release/transcriptd"
(cd "$root" && cargo build --release --quiet)

gen() { [ -s "$work/$1" ] || python3 "$here/../tests/gen/gen_transcripts.py" "${@:2}" -o "$work/$1"; }
gen f1g.jsonl --bytes 1GiB --seed 3 --faults 0.01
if [ ! -d "$work/archive" ]; then
  python3 "$here/../tests/gen/gen_transcripts.py" --bytes 1GiB --sessions 10000 --seed 4 --faults 0.01 --out-dir "$work/archive"
fi
# Older than --min-idle: an archive, not live files.
touch -d '2 hours ago' "$work/f1g.jsonl"
find "$work/archive" -name '*.jsonl' -exec touch -d '2 hours ago' {} +
cat "$work/f1g.jsonl" > /dev/null

echo "== machine"; nproc; grep -m1 'model name' /proc/cpuinfo || true
echo "== one 1 GiB file, --faults 0.01: $(stat -c %s "$work/f1g.jsonl") bytes; output in $outdir"
hyperfine -N -i -w 1 -r 5 --prepare "rm -rf $outdir/one" \
  "wc -l $work/f1g.jsonl" \
  "$bin check --no-summary --jobs 1 $work/f1g.jsonl" \
  "$bin repair --no-summary --jobs 1 --out $outdir/one $work/f1g.jsonl"
echo "== the same, ten interleaved rounds (each ratio taken within one round)"
python3 "$here/ratios.py" --rounds 10 --prepare "rm -rf $outdir/one" -- \
  "wc -l $work/f1g.jsonl" \
  "$bin check --no-summary --jobs 1 $work/f1g.jsonl" \
  "$bin repair --no-summary --jobs 1 --out $outdir/one $work/f1g.jsonl"
echo "== archive of 10,000 sessions: $(du -sb "$work/archive" | cut -f1) bytes"
hyperfine -N -i -w 1 -r 3 --prepare "rm -rf $outdir/arch" \
  "$bin repair --no-summary --jobs 1 --out $outdir/arch $work/archive" \
  "$bin repair --no-summary --jobs 2 --out $outdir/arch $work/archive"
echo "== peak RSS"
rm -rf "$outdir/one"
/usr/bin/time -f "repair 1 GiB jobs=1: %M KiB max RSS, %e s" "$bin" repair --no-summary --jobs 1 --out "$outdir/one" "$work/f1g.jsonl"
rm -rf "$outdir/one" "$outdir/arch"
