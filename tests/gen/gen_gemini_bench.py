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

# /tmp/gemini-bench/converted.jsonl: the spotter slice written as Gemini CLI 0.61.0 writes a
# session (its metadata line once; each user line a `user` record of text parts, each assistant
# line a `gemini` record with its text, thoughts and calls in `toolCalls[]`, appended again with
# the call's result once a tool_result line answers it and followed by the `user` record of the
# `functionResponse` parts 0.61.0 also writes; the other lines `info` records; a
# `{"$set":{"lastUpdated"}}` after each, as the agent writes): the same conversation in Gemini
# CLI's shape.
import json
def to_gemini(lines):
    out, calls = [], {}
    def put(r, ts):
        out.append(json.dumps(r, ensure_ascii=False, separators=(',', ':')).encode() + b'\n')
        out.append(json.dumps({'$set': {'lastUpdated': ts}}, separators=(',', ':')).encode() + b'\n')
    for line in lines:
        v = json.loads(line)
        t, msg, ts = v.get('type'), v.get('message') or {}, v.get('timestamp', '2026-01-01T00:00:00Z')
        uid = v.get('uuid') or v.get('id') or ('x%d' % len(out))
        content = msg.get('content')
        blocks = [{'type': 'text', 'text': content}] if isinstance(content, str) else content or []
        if t == 'assistant':
            text = ''.join(b.get('text', '') for b in blocks if b.get('type') == 'text')
            thoughts = [{'subject': '', 'description': b.get('thinking', ''), 'timestamp': ts} for b in blocks if b.get('type') == 'thinking']
            tcs = [{'id': b.get('id'), 'name': b.get('name'), 'args': b.get('input') or {}, 'status': 'executing', 'timestamp': ts} for b in blocks if b.get('type') == 'tool_use']
            u = msg.get('usage') or {}
            r = {'id': uid, 'timestamp': ts, 'type': 'gemini', 'content': text, 'thoughts': thoughts,
                 'tokens': {'input': u.get('input_tokens', 0) + u.get('cache_read_input_tokens', 0), 'output': u.get('output_tokens', 0), 'cached': u.get('cache_read_input_tokens', 0), 'thoughts': 0, 'tool': 0, 'total': 0},
                 'model': 'gemini-2.5-pro'}
            if tcs:
                r['toolCalls'] = tcs
                for tc in tcs:
                    calls[tc['id']] = r
            put(r, ts)
        elif t == 'user':
            results = [b for b in blocks if b.get('type') == 'tool_result']
            if not results:
                put({'id': uid, 'timestamp': ts, 'type': 'user', 'content': [{'text': b.get('text', '')} for b in blocks if b.get('type') == 'text']}, ts)
                continue
            parts = []
            for b in results:
                c = b.get('content')
                text = c if isinstance(c, str) else ''.join(x.get('text', '') for x in c or [] if isinstance(x, dict))
                part = {'functionResponse': {'id': b.get('tool_use_id'), 'name': 'tool', 'response': {'output': text}}}
                parts.append(part)
                r = calls.get(b.get('tool_use_id'))
                if r is not None:
                    for tc in r['toolCalls']:
                        if tc['id'] == b.get('tool_use_id'):
                            tc.update(result=[part], status='success')
                    put(r, ts)
            put({'id': uid, 'timestamp': ts, 'type': 'user', 'content': parts}, ts)
        else:
            put({'id': uid, 'timestamp': ts, 'type': 'info', 'content': json.dumps(v, ensure_ascii=False)[:2000]}, ts)
    return out
claude = 'tests/data/real/claude-code/spotter/258c7280-ae70-4798-800f-63464d01a85d.slice-L1168-L1863.jsonl'
meta = open('tests/data/agents/sessions/gemini-cli-0.61.0/resumed-after-kill-mid-tool.jsonl', 'rb').readline()
open('/tmp/gemini-bench/converted-src.jsonl', 'wb').write(meta + b''.join(to_gemini(open(claude, 'rb').read().splitlines())))
make('/tmp/gemini-bench/converted-src.jsonl', '/tmp/gemini-bench/converted.jsonl', [b'id'], head=1)
