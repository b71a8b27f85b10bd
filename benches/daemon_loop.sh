#!/usr/bin/env bash
# Runs the daemon's tests N times in a row (default 50) and stops at the first failure: a flaky
# test is a bug in the code or in the test, never something to retry. The test binary is built
# once; each run is the same binary with the same filters, tests in parallel as in `cargo test`.
#
#   benches/daemon_loop.sh [N] [FILTER...]
#   (default filters: daemon:: daemon_faults:: reliability:: deploy::a_live_daemon)
#
# Prints one line per run and a summary; on a failure, that run's output. The record goes in
# BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-50}
shift || true
filters=("$@")
((${#filters[@]})) || filters=(daemon:: daemon_faults:: reliability:: deploy::a_live_daemon)
bin=$(cargo test --locked --test integration --no-run --message-format=json 2>/dev/null |
  python3 -c 'import sys, json
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "integration":
        print(m["executable"])')
[[ -x $bin ]] || { echo "daemon_loop.sh: no test binary" >&2; exit 2; }
echo "$(date -u +%FT%TZ) $n runs of ${filters[*]} ($(nproc) CPUs, $(uname -r)), binary $bin"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$(date +%s)
for ((i = 1; i <= n; i++)); do
  t0=$(date +%s.%N)
  if ! "$bin" "${filters[@]}" >"$log" 2>&1; then
    echo "run $i: FAILED"
    cat "$log"
    echo "$((i - 1)) runs in a row passed before run $i failed"
    exit 1
  fi
  echo "run $i: $(grep -E '^test result' "$log" | sed 's/; finished.*//') ($(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s)"
done
echo "$n runs in a row passed in $(($(date +%s) - start)) s"
