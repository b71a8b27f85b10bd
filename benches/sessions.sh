#!/usr/bin/env bash
# Whole-process benchmark of session lookup: `transcriptd show PREFIX` over 100,000 sessions in
# each layout (found, and not found: the whole walk), and `sessions list` for reference.
# Usage: benches/sessions.sh [WORKDIR]   (needs hyperfine, python3; ~2 GiB of small files)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
work="${1:-/tmp/transcriptd-sessions}"
bin="$root/target/release/transcriptd"
(cd "$root" && cargo build --release --quiet)

[ -d "$work/flat" ] || python3 "$here/../tests/gen/gen_sessions.py" --sessions 100000 --seed 1 -o "$work"
for t in claude codex dirs flat; do
  echo "== $t: $(find "$work/$t" -name '*.jsonl' -not -path '*/subagents/*' | wc -l) sessions"
done
# Warm the dentry cache the way a user's second lookup would find it.
for t in claude codex dirs flat; do "$bin" show feedface --root "$work/$t" > /dev/null; done

echo "== machine"; nproc; grep -m1 'model name' /proc/cpuinfo || true
hyperfine -N -w 3 -r 30 --export-json "$work/lookup.json" \
  "$bin show feedface --root $work/claude" \
  "$bin show feedface --root $work/codex" \
  "$bin show feedface --root $work/dirs" \
  "$bin show feedface --root $work/flat"
# Not found: every name is read and compared (exit 2, so failures are ignored).
hyperfine -N -i -w 3 -r 30 --export-json "$work/lookup-miss.json" \
  "$bin show 0000zzzz --root $work/claude" \
  "$bin show 0000zzzz --root $work/codex" \
  "$bin show 0000zzzz --root $work/dirs" \
  "$bin show 0000zzzz --root $work/flat"
echo "== listing (reads every transcript: lines, format, last timestamp)"
hyperfine -N -w 1 -r 3 --export-json "$work/list.json" \
  "$bin sessions list -o json $work/claude" \
  "$bin sessions list -o json $work/dirs"
