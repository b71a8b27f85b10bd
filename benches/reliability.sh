#!/usr/bin/env bash
# The daemon's reliability suite at full size (CI runs the same tests bounded, in `cargo test`):
#
#   - the kill -9 harness: writers append generated transcripts in pieces cut at random bytes
#     while the daemon is killed with SIGKILL at random moments and restarted; the stdout file
#     and the rotating file sink must hold every finding and compaction exactly once;
#   - the rotation model: random appends, rename-rotations, copytruncates, truncations, in-place
#     rewrites, deletions, recreations, renames and inode reuse while the daemon looks away,
#     with kill -9 restarts; after every round its records equal `check` on the files;
#   - the hostile-tree and fault cases of issue 15 (tests/integration/daemon_faults.rs).
#
#   benches/reliability.sh                 # 200 kills, 500 rounds
#   KILLS=1000 ROUNDS=2000 SEED=42 benches/reliability.sh
#
# Prints each test's figures (kills, records, lost / duplicated / spurious; rounds, operations,
# restarts, differences) and the machine. Figures go in BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
export TRANSCRIPTD_KILLS=${KILLS:-200} TRANSCRIPTD_ROUNDS=${ROUNDS:-500}
[[ -n ${SEED:-} ]] && export TRANSCRIPTD_SEED=$SEED
cargo test --locked --test integration --no-run 2>/dev/null
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(uname -sr), $(df -T "${TMPDIR:-/tmp}" | awk 'NR==2 {print $2}') temp dir"
start=$(date +%s)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
status=0
cargo test --locked --test integration -- reliability:: daemon_faults:: --nocapture --test-threads=2 >"$out" 2>&1 || status=$?
grep -E '^(kill -9 harness|rotation model|inode really reused)|^test .* (ok|FAILED)$|^test result' "$out"
echo "wall time: $(($(date +%s) - start)) s"
if ((status != 0)); then
  echo "FAILED; full output:" >&2
  cat "$out" >&2
fi
exit $status
