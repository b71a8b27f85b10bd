#!/usr/bin/env bash
# Whole-process benchmark of `transcriptd report` against `check` on the same archive of 10,000
# sessions (hyperfine, then interleaved same-round ratios), peak RSS at 1,000 and 10,000
# sessions, `--plan`, and how long the page takes to open in headless Chromium.
# Usage: benches/report.sh [WORKDIR]   (needs hyperfine, python3, chromium; ~570 MB of files)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
work="${1:-/tmp/transcriptd-report}"
bin="$root/target/release/transcriptd"
(cd "$root" && cargo build --release --quiet)
mkdir -p "$work"
gen() { python3 "$here/../tests/gen/gen_transcripts.py" --sessions "$1" --bytes "$2" --seed 18 --faults 0.002 --truncate-last 0.02 --compact-boundary 0.02 --split-assistant --out-dir "$3"; }
[ -d "$work/a10k" ] || gen 10000 300M "$work/a10k"
[ -d "$work/a1k" ] || gen 1000 30M "$work/a1k"
echo "== archive: $(find -L "$work/a10k" -name "*.jsonl" | wc -l) files, $(du -shL "$work/a10k" | cut -f1)"
echo "== machine"; nproc; grep -m1 'model name' /proc/cpuinfo || true; uptime

for j in 1 2; do
  hyperfine -N -i -w 2 -r 10 --output=null --export-json "$work/report-j$j.json" \
    "$bin check --no-summary -j $j $work/a10k" \
    "$bin report --no-summary -j $j --html $work/r.html $work/a10k" \
    "$bin report --no-summary -j $j -o json $work/a10k"
  python3 "$here/ratios.py" --rounds 10 -- \
    "$bin check --no-summary -j $j $work/a10k" \
    "$bin report --no-summary -j $j --html $work/r.html $work/a10k" \
    "$bin report --no-summary -j $j -o json $work/a10k"
done
echo "== --plan (repairs each file with findings into a scratch directory)"
hyperfine -N -i -w 1 -r 5 --output=null "$bin report --no-summary --plan -o json $work/a10k"

echo "== peak RSS (KiB) and wall time"
for a in a1k a10k; do
  for c in "check --no-summary" "report --no-summary --html $work/r-$a.html"; do
    /usr/bin/time -f "$a $c: %M KiB %e s" "$bin" $c "$work/$a" > /dev/null || true
  done
done

echo "== the page of 10,000 sessions in headless Chromium"
ls -l "$work/r.html"
"$bin" report --no-summary --html "$work/r.html" "$work/a10k" > /dev/null
(cd "$root" && REPORT_PAGE="$work/r.html" cargo test --locked --test integration report_page_load -- --ignored --nocapture 2>&1 | grep -E '^round')
