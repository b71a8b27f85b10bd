#!/usr/bin/env python3
# BENCHMARKS.md, "Copilot against Claude Code": two files of the same size (MiB given, run from
# the repository root), each a real session repeated with its ids renamed per copy: Claude Code
# (spotter slice, 0.9 MB) and Copilot CLI 1.0.102 (tests/data/agents/sessions/copilot-1.0.102/
# after-compaction.jsonl, 0.16 MB: a tool turn, a kill and a resume, a compaction, another turn).
# A Copilot id stays a UUID (its last group is shifted per copy): Copilot's loader, and check,
# refuse an event whose id is not one.
import os, re, sys
target = int(sys.argv[1]) << 20
os.makedirs("/tmp/copilot-bench", exist_ok=True)
UUID = re.compile(rb'^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$')
def rename(v, k):
    if UUID.match(v):
        return v[:24] + b'%012x' % ((int(v[24:], 16) + k) % (1 << 48))
    return v + b'-' + str(k).encode()
def make(src, out, keys, keep=lambda l: True):
    body = [l for l in open(src, 'rb').read().splitlines(keepends=True) if keep(l)]
    pat = re.compile(rb'"(' + b'|'.join(keys) + rb')":"([^"]+)"')
    with open(out, 'wb') as f:
        n = 0; k = 0
        while n < target:
            for l in body:
                l2 = pat.sub(lambda m: b'"' + m.group(1) + b'":"' + rename(m.group(2), k) + b'"', l)
                f.write(l2); n += len(l2)
                if n >= target: break
            k += 1
    print(out, n)
make('tests/data/real/claude-code/spotter/258c7280-ae70-4798-800f-63464d01a85d.slice-L1168-L1863.jsonl', '/tmp/copilot-bench/claude.jsonl', [b'uuid', b'parentUuid', b'id', b'tool_use_id', b'sourceToolAssistantUUID'])
make('tests/data/agents/sessions/copilot-1.0.102/after-compaction.jsonl', '/tmp/copilot-bench/copilot.jsonl', [b'id', b'parentId', b'toolCallId', b'messageId', b'sessionId'])
# The same without its large events (the system prompt, `model.*`, the session's start and
# shutdown accounting): the conversation events and their bookkeeping, lines of 0.2-2 KB.
big = (b'"type":"system.message"', b'"type":"model.', b'"type":"session.start"', b'"type":"session.shutdown"', b'"type":"session.resume"')
make('tests/data/agents/sessions/copilot-1.0.102/after-compaction.jsonl', '/tmp/copilot-bench/copilot-small-lines.jsonl', [b'id', b'parentId', b'toolCallId', b'messageId', b'sessionId'], lambda l: not any(b in l for b in big))
