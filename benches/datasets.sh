#!/usr/bin/env bash
# Whole-process benchmarks of the dataset paths against baselines run in the same session:
# `check` on a 1 GiB dataset vs `wc -l` and vs `check` on a 1 GiB transcript corpus, peak RSS,
# `stats` with and without token counting, and `repair --dataset-policy answer`.
# Usage: benches/datasets.sh [WORKDIR]   (needs hyperfine, python3; ~3 GiB disk, /dev/shm)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
work="${1:-/tmp/transcriptd-bench}"
mkdir -p "$work"
bin="$root/target/release/transcriptd"
(cd "$root" && cargo build --release --quiet)

[ -s "$work/ds1g.jsonl" ] || python3 "$here/../tests/gen/gen_datasets.py" --format openai-dataset --bytes 1GiB --seed 1 --faults 0.01 -o "$work/ds1g.jsonl"
[ -s "$work/big1g.jsonl" ] || python3 "$here/../tests/gen/gen_transcripts.py" --bytes 1GiB --seed 1 --split-assistant -o "$work/big1g.jsonl"
[ -s "$work/ds100m.jsonl" ] || python3 "$here/../tests/gen/gen_datasets.py" --format openai-dataset --bytes 100MiB --seed 2 -o "$work/ds100m.jsonl"
touch -d '2 hours ago' "$work/ds1g.jsonl"
cat "$work/ds1g.jsonl" "$work/big1g.jsonl" "$work/ds100m.jsonl" > /dev/null   # warm the page cache

echo "== machine"; nproc; grep -m1 'model name' /proc/cpuinfo || true
echo "== check, 1 GiB dataset ($(wc -l < "$work/ds1g.jsonl") lines) and 1 GiB transcripts"
hyperfine -N -w 1 -r 5 --export-json "$work/datasets-check.json" \
  "wc -l $work/ds1g.jsonl" \
  "$bin check --no-summary --jobs 1 $work/ds1g.jsonl" \
  "$bin check --no-summary --jobs 2 $work/ds1g.jsonl" \
  "$bin check --no-summary --jobs 1 $work/big1g.jsonl"
echo "== ten interleaved rounds (each ratio taken within one round)"
python3 "$here/ratios.py" --rounds 10 -- \
  "wc -l $work/ds1g.jsonl" \
  "$bin check --no-summary --jobs 1 $work/ds1g.jsonl" \
  "$bin check --no-summary --jobs 1 $work/big1g.jsonl" \
  "$bin check --no-summary --jobs 2 $work/ds1g.jsonl"
echo "== peak RSS"
for j in 1 2; do
  /usr/bin/time -f "check dataset 1 GiB jobs=$j: %M KiB max RSS, %e s" "$bin" check --no-summary --jobs $j "$work/ds1g.jsonl" || true
  /usr/bin/time -f "check dataset 100 MiB jobs=$j: %M KiB max RSS, %e s" "$bin" check --no-summary --jobs $j "$work/ds100m.jsonl" || true
done
echo "== stats, 100 MiB ($(wc -l < "$work/ds100m.jsonl") conversations)"
hyperfine -N -w 1 -r 3 \
  "wc -l $work/ds100m.jsonl" \
  "$bin check --no-summary --jobs 2 $work/ds100m.jsonl" \
  "$bin stats --no-tokens --jobs 2 $work/ds100m.jsonl" \
  "$bin stats --jobs 1 $work/ds100m.jsonl" \
  "$bin stats --jobs 2 $work/ds100m.jsonl"
/usr/bin/time -f "stats (tokens) 100 MiB jobs=2: %M KiB max RSS, %e s" "$bin" stats --jobs 2 "$work/ds100m.jsonl" > /dev/null
echo "== repair --dataset-policy answer, 1 GiB, output on /dev/shm"
hyperfine -N -w 1 -r 3 --prepare "rm -rf /dev/shm/ds-out" \
  "wc -l $work/ds1g.jsonl" \
  "$bin repair --no-summary --jobs 1 --dataset-policy answer --out /dev/shm/ds-out $work/ds1g.jsonl"
rm -rf /dev/shm/ds-out
/usr/bin/time -f "repair 1 GiB: %M KiB max RSS, %e s" "$bin" repair --no-summary --jobs 1 --dataset-policy answer --out /dev/shm/ds-out "$work/ds1g.jsonl"
rm -rf /dev/shm/ds-out
