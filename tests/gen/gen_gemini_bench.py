#!/usr/bin/env python3
# BENCHMARKS.md, "Gemini CLI against Claude Code": two files of the same size (MiB given, run
# from the repository root), each a real session repeated with its ids renamed per copy: Claude
# Code (the spotter slice, as gen_copilot_bench.py) and the session Gemini CLI 0.61.0 wrote in
# the oracle, resumed after a kill (tests/data/agents/sessions/gemini-cli-0.61.0/
# resumed-after-kill-mid-tool.jsonl, 4.6 KB: its metadata line first, once; then its records,
# the `$set` of messages among them, a tool call with its result, the resume's turn).
import os, re, sys
target = int(sys.argv[1]) << 20
os.makedirs("/tmp/gemini-bench", exist_ok=True)
def make(src, out, keys, head=0):
    lines = open(src, 'rb').read().splitlines(keepends=True)
    first, body = lines[:head], lines[head:]
    pat = re.compile(rb'"(' + b'|'.join(keys) + rb')":"([^"]+)"')
    with open(out, 'wb') as f:
        n = 0; k = 0
        for l in first:
            f.write(l); n += len(l)
        while n < target:
            for l in body:
                l2 = pat.sub(lambda m: b'"' + m.group(1) + b'":"' + m.group(2) + b'-' + str(k).encode() + b'"', l)
                f.write(l2); n += len(l2)
                if n >= target: break
            k += 1
    print(out, n)
make('tests/data/real/claude-code/spotter/258c7280-ae70-4798-800f-63464d01a85d.slice-L1168-L1863.jsonl', '/tmp/gemini-bench/claude.jsonl', [b'uuid', b'parentUuid', b'id', b'tool_use_id', b'sourceToolAssistantUUID'])
make('tests/data/agents/sessions/gemini-cli-0.61.0/resumed-after-kill-mid-tool.jsonl', '/tmp/gemini-bench/gemini.jsonl', [b'id', b'\\$rewindTo'], head=1)
