#!/usr/bin/env python3
# BENCHMARKS.md, "Qwen Code against Claude Code": files of the same size (MiB given, run from
# the repository root), written to /tmp, each a session repeated with its ids renamed per copy:
# - /tmp/qwen-bench-claude.jsonl: Claude Code's spotter slice (0.9 MB, real);
# - /tmp/qwen-bench-qwen.jsonl: the sessions the real Qwen Code 0.24.4 wrote in the agent oracle
#   (tests/data/agents/sessions/qwen-code-0.24.4: healthy, killed mid-tool, mid-stream,
#   compressed; 19 KB together, half of it Qwen Code's own ui_telemetry records);
# - /tmp/qwen-bench-converted.jsonl: the spotter slice written as Qwen Code writes a session
#   (each record a ChatRecord with the same uuid tree; text, thinking and tool_use blocks as
#   text, thought and functionCall parts; tool_result blocks as functionResponse parts of
#   tool_result records; the other records as system ui_telemetry records): the same
#   conversation in Qwen Code's shape.
import json, re, sys
target = int(sys.argv[1]) << 20
def make(body, out, keys):
    pat = re.compile(rb'"(' + b'|'.join(keys) + rb')":"([^"]+)"')
    with open(out, 'wb') as f:
        n = 0; k = 0
        while n < target:
            for l in body:
                l2 = pat.sub(lambda m: b'"' + m.group(1) + b'":"' + m.group(2) + b'-' + str(k).encode() + b'"', l)
                f.write(l2); n += len(l2)
                if n >= target: break
            k += 1
    print(out, n)
def lines(*srcs):
    return [l for src in srcs for l in open(src, 'rb').read().splitlines(keepends=True)]
def to_qwen(line):
    v = json.loads(line)
    base = {k: v[k] for k in ('uuid', 'parentUuid', 'sessionId', 'timestamp') if k in v}
    base.update({'cwd': v.get('cwd', '/w'), 'version': '0.24.4'})
    t, msg = v.get('type'), v.get('message') or {}
    if t not in ('user', 'assistant'):
        return dict(base, type='system', provenance='system', subtype='ui_telemetry', systemPayload={'uiEvent': v})
    content = msg.get('content')
    blocks = [{'type': 'text', 'text': content}] if isinstance(content, str) else content or []
    parts, results = [], []
    for b in blocks:
        bt = b.get('type')
        if bt == 'text':
            parts.append({'text': b.get('text', '')})
        elif bt == 'thinking':
            parts.append({'text': b.get('thinking', ''), 'thought': True})
        elif bt == 'tool_use':
            parts.append({'functionCall': {'id': b.get('id'), 'name': b.get('name'), 'args': b.get('input') or {}}})
        elif bt == 'tool_result':
            c = b.get('content')
            text = c if isinstance(c, str) else ''.join(x.get('text', '') for x in c or [] if isinstance(x, dict))
            results.append({'functionResponse': {'id': b.get('tool_use_id'), 'name': 'tool', 'response': {'output': text}}})
    if t == 'assistant':
        r = dict(base, type='assistant', provenance='assistant_output', model=msg.get('model', 'qwen3-coder-plus'), message={'role': 'model', 'parts': parts})
        u = msg.get('usage') or {}
        r['usageMetadata'] = {'promptTokenCount': u.get('input_tokens', 0) + u.get('cache_read_input_tokens', 0), 'candidatesTokenCount': u.get('output_tokens', 0),
                              'cachedContentTokenCount': u.get('cache_read_input_tokens', 0), 'totalTokenCount': 0}
        return r
    if results:
        return dict(base, type='tool_result', provenance='tool_result', message={'role': 'user', 'parts': results + parts})
    return dict(base, type='user', provenance='real_user', message={'role': 'user', 'parts': parts})
claude = 'tests/data/real/claude-code/spotter/258c7280-ae70-4798-800f-63464d01a85d.slice-L1168-L1863.jsonl'
make(lines(claude), '/tmp/qwen-bench-claude.jsonl', [b'uuid', b'parentUuid', b'id', b'tool_use_id', b'sourceToolAssistantUUID'])
d = 'tests/data/agents/sessions/qwen-code-0.24.4/'
make(lines(*[d + f for f in ['echo.jsonl', 'killed-mid-tool.jsonl', 'killed-mid-stream.jsonl', 'compressed.jsonl']]), '/tmp/qwen-bench-qwen.jsonl', [b'uuid', b'parentUuid', b'id', b'call_id'])
make([json.dumps(to_qwen(l), ensure_ascii=False, separators=(',', ':')).encode() + b'\n' for l in lines(claude)], '/tmp/qwen-bench-converted.jsonl', [b'uuid', b'parentUuid', b'id'])
