#!/usr/bin/env bash
# Whole-process benchmark of `transcriptd check` against baselines run in the same session
# (wc -l, jq). Usage: benches/check.sh [WORKDIR]   (needs hyperfine, jq, python3; ~3 GiB disk)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
work="${1:-/tmp/transcriptd-bench}"
mkdir -p "$work"
bin="$root/target/release/transcriptd"
[ -n "${TRANSCRIPTD_NO_BUILD:-}" ] || (cd "$root" && cargo build --release --quiet)

gen() { [ -s "$work/$1" ] || python3 "$here/../tests/gen/gen_transcripts.py" "${@:2}" -o "$work/$1"; }
gen big1g.jsonl --bytes 1GiB --seed 1 --split-assistant
gen s100m.jsonl --bytes 100MiB --seed 2
cat "$work/big1g.jsonl" "$work/s100m.jsonl" > /dev/null   # warm the page cache

echo "== machine"; nproc; grep -m1 'model name' /proc/cpuinfo || true
echo "== 1 GiB (seed 1, --split-assistant): $(stat -c %s "$work/big1g.jsonl") bytes"
hyperfine -N -w 1 -r 7 --export-json "$work/check-1g.json" \
  "wc -l $work/big1g.jsonl" \
  "$bin check --no-summary --jobs 1 $work/big1g.jsonl" \
  "$bin check --no-summary --jobs 2 $work/big1g.jsonl"
echo "== 1 GiB, ten interleaved rounds (each ratio taken within one round)"
python3 "$here/ratios.py" --rounds 10 -- \
  "wc -l $work/big1g.jsonl" \
  "$bin check --no-summary --jobs 1 $work/big1g.jsonl" \
  "$bin check --no-summary --jobs 2 $work/big1g.jsonl"
echo "== 100 MiB (seed 2): $(stat -c %s "$work/s100m.jsonl") bytes"
hyperfine -w 1 -r 5 --export-json "$work/check-100m.json" \
  "jq -c 'select(.type==\"assistant\")|.uuid' $work/s100m.jsonl > /dev/null" \
  "$bin check --no-summary --jobs 1 $work/s100m.jsonl" \
  "$bin check --no-summary --jobs 2 $work/s100m.jsonl"
echo "== peak RSS"
for f in s100m.jsonl big1g.jsonl; do
  for j in 1 2; do
    /usr/bin/time -f "$f jobs=$j: %M KiB max RSS, %e s" "$bin" check --no-summary --jobs $j "$work/$f"
  done
done
