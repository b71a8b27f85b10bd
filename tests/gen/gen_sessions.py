#!/usr/bin/env python3
"""Builds session trees for the lookup benchmark: N sessions in each layout transcriptd reads.

    gen_sessions.py -o DIR [--sessions 100000] [--seed 1]

Writes DIR/claude (Claude Code projects, 1,000 sessions a project, one in ten with a
`<id>/subagents/` directory), DIR/codex (Codex `YYYY/MM/DD/rollout-*.jsonl` over a year),
DIR/dirs (session directories `<timestamp>-<id>/` with transcript.jsonl and .meta.json, 10
workspaces) and DIR/flat (one directory of `<id>.jsonl` + `<id>.meta.json`). Each tree holds
one session whose id starts with `feedface` (no other id does), the target of the lookup; the
others have random UUIDs. Transcripts are small: lookup reads names, not contents.
Stdlib only; deterministic for a seed.
"""

import argparse
import os
import random
import uuid

TARGET = "feedface-0000-4000-8000-00000000cafe"


def ids(rng, n):
    out = []
    for _ in range(n - 1):
        u = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        if u.startswith("feedface"):
            continue
        out.append(u)
    # The target goes somewhere in the middle, not first or last in any listing order.
    out.insert(len(out) // 2, TARGET)
    return out


def claude_lines(sid, day):
    ts = f"2025-{1 + day % 12:02d}-{1 + day % 28:02d}T12:00:00.000Z"
    return (
        f'{{"type":"user","uuid":"u1-{sid}","parentUuid":null,"sessionId":"{sid}","timestamp":"{ts}",'
        f'"message":{{"role":"user","content":"hello"}}}}\n'
        f'{{"type":"assistant","uuid":"u2-{sid}","parentUuid":"u1-{sid}","sessionId":"{sid}","timestamp":"{ts}",'
        f'"message":{{"id":"m-{sid}","role":"assistant","content":[{{"type":"text","text":"hi"}}]}}}}\n'
    )


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--sessions", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    n = a.sessions

    root = os.path.join(a.out, "claude")
    for i, sid in enumerate(ids(rng, n)):
        proj = os.path.join(root, f"-home-me-proj{i // 1000:03d}")
        if i % 1000 == 0:
            os.makedirs(proj, exist_ok=True)
        write(os.path.join(proj, f"{sid}.jsonl"), claude_lines(sid, i))
        if i % 10 == 0:
            sub = os.path.join(proj, sid, "subagents")
            os.makedirs(sub)
            write(os.path.join(sub, "agent-a1.jsonl"), claude_lines(sid, i))

    root = os.path.join(a.out, "codex")
    for i, sid in enumerate(ids(rng, n)):
        day = i * 365 // n
        m, d = 1 + day // 31 % 12, 1 + day % 28
        dd = os.path.join(root, "2025", f"{m:02d}", f"{d:02d}")
        os.makedirs(dd, exist_ok=True)
        ts = f"2025-{m:02d}-{d:02d}T{i % 24:02d}-{i % 60:02d}-{i // 60 % 60:02d}"
        write(os.path.join(dd, f"rollout-{ts}-{sid}.jsonl"),
              f'{{"timestamp":"2025-{m:02d}-{d:02d}T00:00:00.000Z","type":"session_meta","payload":{{"id":"{sid}"}}}}\n')

    root = os.path.join(a.out, "dirs")
    for i, sid in enumerate(ids(rng, n)):
        ws = os.path.join(root, f"ws{i % 10}")
        d = os.path.join(ws, f"20250101T{i // 3600 % 24:02d}{i // 60 % 60:02d}{i % 60:02d}Z-{sid}")
        os.makedirs(d)
        write(os.path.join(d, "transcript.jsonl"), '{"role":"user","content":"hi"}\n')
        write(os.path.join(d, ".meta.json"),
              f'{{"schema_version":1,"session_id":"{sid}","updated_at":"2025-01-01T00:00:00Z"}}')

    root = os.path.join(a.out, "flat")
    os.makedirs(root)
    for sid in ids(rng, n):
        write(os.path.join(root, f"{sid}.jsonl"), '{"role":"user","content":"hi"}\n')
        write(os.path.join(root, f"{sid}.meta.json"), f'{{"agent_id":"{sid}"}}')


if __name__ == "__main__":
    main()
