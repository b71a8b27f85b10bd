#!/usr/bin/env python3
"""Seeds the fuzz corpora from the real fixtures and the data-driven cases (stdlib only).

    fuzz/seed.py            # writes fuzz/corpus/<target>/ (ignored by git), then:
    cargo +nightly fuzz run repair -- -max_total_time=600

Windows of a few lines for the transcript-level targets (repair, validator, lines), single
lines of each format for the adapters, lines for the scanner. Deterministic."""
import hashlib
import random
from pathlib import Path

here = Path(__file__).resolve().parent
data = here.parent / "tests" / "data"
rng = random.Random(13)


def files(*dirs):
    out = []
    for d in dirs:
        out += sorted((data / d).rglob("*.jsonl"))
    return out


def put(target, blob):
    d = here / "corpus" / target
    d.mkdir(parents=True, exist_ok=True)
    (d / hashlib.sha1(blob).hexdigest()).write_bytes(blob)


def lines_of(path):
    return [l for l in path.read_bytes().split(b"\n") if l.strip()]


transcripts = files("real", "check", "repair", "orphans", "context")
for f in transcripts:
    raw = f.read_bytes()
    lines = raw.split(b"\n")
    # small cases whole, windows of bigger ones
    if len(raw) < 8 << 10:
        for t in ("repair", "validator", "lines"):
            put(t, raw)
    for _ in range(min(12, max(1, len(lines) // 8))):
        n = rng.randint(2, 24)
        start = rng.randrange(max(1, len(lines) - n))
        blob = b"\n".join(lines[start:start + n]) + b"\n"
        if len(blob) > 12 << 10:
            continue
        for t in ("repair", "validator", "lines"):
            put(t, blob)
        if rng.random() < 0.2:
            put("lines", blob.replace(b"\n", b"\r\n"))
            put("repair", b"\xef\xbb\xbf" + blob)

by_format = {
    "adapter_claude_code": files("real/claude-code", "real/derived/claude-code", "real/synthetic-third-party", "check/claude-code"),
    "adapter_codex": files("real/codex", "real/derived/codex", "check/codex"),
    "adapter_chat": files("check/openai-chat", "check/anthropic", "orphans/openai-chat", "orphans/anthropic"),
}
for target, fs in by_format.items():
    pool = [l for f in fs for l in lines_of(f) if len(l) < 8 << 10]
    rng.shuffle(pool)
    for l in pool[:400]:
        put(target, l)
        put("scan", l)

for target in ("repair", "validator", "lines", "scan", "adapter_claude_code", "adapter_codex", "adapter_chat"):
    print(target, len(list((here / "corpus" / target).iterdir())))
