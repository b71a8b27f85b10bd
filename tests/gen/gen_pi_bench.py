#!/usr/bin/env python3
# BENCHMARKS.md, "Pi against Claude Code": two files of the same size (MiB given, run from the
# repository root), each a real session repeated with its ids renamed per copy.
# Two files of the same size, each a real session repeated with its ids renamed per copy:
# Claude Code (spotter slice, 0.9 MB) and Pi (pi-mono large-session, 0.95 MB, version 1).
import re, sys
target = int(sys.argv[1]) << 20
def make(src, out, keys, header):
    lines = open(src, 'rb').read().splitlines(keepends=True)
    head, body = (lines[:1], lines[1:]) if header else ([], lines)
    pat = re.compile(rb'"(' + b'|'.join(keys) + rb')":"([^"]+)"')
    with open(out, 'wb') as f:
        n = sum(map(len, head)); f.writelines(head); k = 0
        while n < target:
            for l in body:
                l2 = pat.sub(lambda m: b'"' + m.group(1) + b'":"' + m.group(2) + b'-' + str(k).encode() + b'"', l)
                f.write(l2); n += len(l2)
                if n >= target: break
            k += 1
    print(out, n)
make('tests/data/real/claude-code/spotter/258c7280-ae70-4798-800f-63464d01a85d.slice-L1168-L1863.jsonl', '/tmp/bench-claude.jsonl', [b'uuid', b'parentUuid', b'id', b'tool_use_id', b'sourceToolAssistantUUID'], False)
make('tests/data/real/pi/large-session.jsonl', '/tmp/bench-pi.jsonl', [b'id', b'toolCallId'], True)
