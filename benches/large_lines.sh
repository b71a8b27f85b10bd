#!/usr/bin/env bash
# Peak memory of `repair` removing one long line of control bytes (issue 14): 1, 60 and 500 MiB
# lines (the last over the 64 MiB --max-line-bytes, so removed as line_too_long), one file at a
# time and two at a time with --jobs 2, and the size of the rejects record against the line.
# Usage: benches/large_lines.sh [WORKDIR]   (needs ~3 GiB in WORKDIR; /usr/bin/time)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
work="${1:-/tmp/transcriptd-large-lines}"
mkdir -p "$work"
bin="$root/target/release/transcriptd"
(cd "$root" && cargo build --release --quiet)

make() { # make NAME MIB: a user line, MIB MiB of 0x01 bytes and a newline, another user line
  [ -s "$work/$1" ] && return
  python3 - "$work/$1" "$2" <<'PY'
import os, sys
path, mib = sys.argv[1], int(sys.argv[2])
head = b'{"type":"user","message":{"role":"user","content":"hi"},"uuid":"u1","parentUuid":null,"sessionId":"s"}\n'
with open(path, "wb") as f:
    f.write(head)
    chunk = b"\x01" * (1 << 20)
    for _ in range(mib):
        f.write(chunk)
    f.write(b"\n")
    f.write(head.replace(b"u1", b"u2").replace(b"null", b'"u1"'))
os.utime(path, (0, 0))
PY
}
echo "== machine"; nproc; grep -m1 'model name' /proc/cpuinfo || true
for mib in 1 60 500; do
  make "a$mib.jsonl" "$mib"
  mkdir -p "$work/pair$mib"
  make "pair$mib/a.jsonl" "$mib"; make "pair$mib/b.jsonl" "$mib"
  rm -rf "$work/out"
  /usr/bin/time -f "one ${mib} MiB line, --jobs 1: %M KiB max RSS, %e s" "$bin" repair --no-summary --jobs 1 --out "$work/out" "$work/a$mib.jsonl" >/dev/null
  echo "   rejects record: $(stat -c %s "$work/out/a$mib.rejects.jsonl") bytes for a $((mib << 20)) byte line"
  rm -rf "$work/out"
  /usr/bin/time -f "two ${mib} MiB lines, --jobs 2: %M KiB max RSS, %e s" "$bin" repair --no-summary --jobs 2 --out "$work/out" "$work/pair$mib" >/dev/null
done
rm -rf "$work/out"
