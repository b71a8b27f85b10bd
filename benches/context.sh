#!/usr/bin/env bash
# Whole-process benchmark of `transcriptd context` against `check` on the same file, in the same
# hyperfine run: a ~1 GiB Claude Code transcript whose last compact_boundary lies in its final 1%.
# Usage: benches/context.sh [WORKDIR]   (needs hyperfine, python3; ~2.1 GiB disk under WORKDIR)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
work="${1:-/tmp/transcriptd-bench}"
mkdir -p "$work"
bin="$root/target/release/transcriptd"
(cd "$root" && cargo build --release --quiet)

gen() { [ -s "$work/$1" ] || python3 "$here/../tests/gen/gen_transcripts.py" "${@:2}" -o "$work/$1"; }
gen big1g.jsonl --bytes 1GiB --seed 1 --split-assistant
gen tail8m.jsonl --bytes 8MiB --seed 2 --split-assistant
file="$work/compacted1g.jsonl"
if [ ! -s "$file" ]; then
  {
    cat "$work/big1g.jsonl"
    printf '%s\n' '{"parentUuid":null,"logicalParentUuid":"bench-last-uuid","isSidechain":false,"userType":"external","cwd":"/bench","sessionId":"bench","version":"2.1.39","type":"system","subtype":"compact_boundary","content":"Conversation compacted","isMeta":false,"timestamp":"2026-01-01T00:00:00.000Z","uuid":"bench-boundary","level":"info","compactMetadata":{"trigger":"auto","preTokens":167094}}'
    printf '%s\n' '{"parentUuid":"bench-boundary","isSidechain":false,"userType":"external","cwd":"/bench","sessionId":"bench","version":"2.1.39","type":"user","message":{"role":"user","content":"This session is being continued from a previous conversation that ran out of context. Summary: the benchmark."},"isVisibleInTranscriptOnly":true,"isCompactSummary":true,"uuid":"bench-summary","timestamp":"2026-01-01T00:00:01.000Z"}'
    cat "$work/tail8m.jsonl"
  } > "$file"
fi
size=$(stat -c %s "$file")
boundary=$(( size - $(stat -c %s "$work/tail8m.jsonl") ))
cat "$file" > /dev/null   # warm the page cache

echo "== machine"; nproc; grep -m1 'model name' /proc/cpuinfo || true; uname -r
echo "== $file: $size bytes; last boundary at about byte $boundary ($(python3 -c "print(f'{100*($size-$boundary)/$size:.2f}')")% from the end)"
"$bin" context "$file" > /dev/null
hyperfine -N -w 2 -r 10 --export-json "$work/context-1g.json" \
  "$bin check --no-summary $file" \
  "$bin context --no-summary $file" \
  "$bin context --no-summary --raw $file"
python3 - "$work/context-1g.json" <<'PY'
import json, sys
r = {x["command"].split()[1] + (" --raw" if "--raw" in x["command"] else ""): x for x in json.load(open(sys.argv[1]))["results"]}
check = r["check"]["mean"]
for k in ("context", "context --raw"):
    print(f"{k}: {r[k]['mean']*1000:.1f} ms mean = {100*r[k]['mean']/check:.2f}% of check ({check*1000:.0f} ms)")
PY
