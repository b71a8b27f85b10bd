#!/usr/bin/env python3
"""The real agents as the oracle: Claude Code, Codex, Pi and Gemini CLI run against a local fake
provider.

Every agent runs in its own network namespace (`unshare --net`, loopback only: nothing can leave
the machine), with a throwaway HOME, against a server in this process that speaks the provider's
API: Anthropic Messages (streamed, SSE) for Claude Code and Pi, OpenAI Responses (streamed, SSE)
for Codex, through a model provider with a local `base_url`, and the Gemini API
(`streamGenerateContent`, SSE; `generateContent`) for Gemini CLI (`GOOGLE_GEMINI_BASE_URL`, a
dummy `GEMINI_API_KEY`; a call is a `functionCall` part, and Gemini CLI gives it its id). The server records every request body
as JSON, and answers from a script.

Commands:

  resume TRANSCRIPT --agent claude|codex [--bin PATH] --out REQ.json
      Lays the transcript where the agent looks for it in a throwaway HOME (Claude Code:
      `~/.claude/projects/<encoded cwd>/<session-id>.jsonl`; Codex:
      `~/.codex/sessions/YYYY/MM/DD/rollout-....jsonl`), runs `claude -p --resume <id> continue`
      / `codex exec resume <id> continue`, and writes the first model request the agent sends
      (the one that carries the prompt "continue") to REQ.json. The agent is killed once it is
      recorded. Exit 0 when a request was captured, 3 when the agent sent none (its stderr is
      printed). REQ.json also has "api_errors": what the Anthropic Messages API's own rules
      (api_errors below) say of that request, empty when it would be taken. With
      --enforce-api-rules such a request is answered with the API's error; with --until-exit the
      agent is not killed but left to end, and REQ.json's "agent" holds its exit and output.

  record --agent claude|codex [--bin PATH] --script S.json [--kill-at MOMENT] --out DIR
      Makes the agent write a real session in a scratch directory: the prompt is the script's
      "prompt", and each model request is answered by the next step of its "steps" (see below).
      With --kill-at, the agent is killed (SIGKILL, its process group) at that moment:
        mid-tool    once the scripted tool call is running (its command must create the file
                    `started` in its working directory; the harness waits for that file)
        mid-stream  when the server reaches a step {"stall": true}: it has sent part of the
                    answer and waits; the agent is killed 1 s later
        compaction  when the request that asks for a compaction summary arrives (the server
                    stalls on it); the script's prompt should be `/compact`
      The session file is copied to DIR/session.jsonl; the requests to DIR/requests/NNN.json;
      DIR/result.json says how the agent ended.

  record --before CMD runs the shell command CMD with the agent's environment (its throwaway
  HOME) before the agent starts: `transcriptd hooks install claude-code --store DIR`, say.

  A script step: {"text": "..."} answers with text; {"tool": NAME, "input": {...}} answers with a
  call of that tool (Claude: a tool_use block; Codex: a function_call, input as its arguments),
  optionally after {"text": ...} in the same step; {"stall": true, "text": "..."} sends the
  start of the answer and part of the text, then waits forever. Requests that offer no tools
  (side requests: titles, summaries) are answered with text and do not take a step.

Environment: the agent binaries come from --bin, else $TRANSCRIPTD_CLAUDE / $TRANSCRIPTD_CODEX.
Python 3.11, standard library only. Needs `unshare` (util-linux) and `ip` (iproute2), and root
or unprivileged user namespaces.
"""

import argparse
import http.server
import json
import os
import re
import shutil
import signal
import socketserver
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

NETNS_MARK = "TRANSCRIPTD_ORACLE_IN_NETNS"


# ---------------------------------------------------------------------------------------------
# The fake provider.


class Provider:
    """What the server knows: where to record, the script, and what happened."""

    def __init__(self, record_dir, steps=None, stall_on_compaction=False, fail_compaction=False, enforce_api_rules=False):
        self.enforce_api_rules = enforce_api_rules
        # The API rules' verdict on each Messages request, by request number (see api_errors).
        self.api_errors = {}
        self.record_dir = Path(record_dir)
        self.record_dir.mkdir(parents=True, exist_ok=True)
        self.steps = list(steps or [])
        self.stall_on_compaction = stall_on_compaction
        # A compaction's summary request answered with an API error (HTTP 500), as when the
        # provider fails mid-compaction.
        self.fail_compaction = fail_compaction
        self.lock = threading.Lock()
        self.count = 0
        self.events = []  # ("request", n, path) / ("stalled", n)
        self.cond = threading.Condition(self.lock)
        self.stop = threading.Event()
        # Ids unique across runs: a session resumed after a kill must not see its open call's id
        # again on a new call.
        self.run = uuid.uuid4().hex[:8]

    def record(self, path, body):
        with self.lock:
            self.count += 1
            n = self.count
            doc = {"path": path, "body": body}
            (self.record_dir / f"{n:03}.json").write_text(json.dumps(doc, indent=1))
            self.events.append(("request", n, path, body))
            self.cond.notify_all()
            return n

    def note(self, *event):
        with self.lock:
            self.events.append(event)
            self.cond.notify_all()

    def next_step(self):
        with self.lock:
            if self.steps:
                return self.steps.pop(0)
            return {"text": "Done."}

    def wait_for(self, pred, timeout):
        deadline = time.monotonic() + timeout
        with self.lock:
            while True:
                for e in self.events:
                    if pred(e):
                        return e
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.cond.wait(min(left, 0.2))


# -- The Anthropic Messages API's own rules --------------------------------------------------
#
# What the real API rejects in a request, with the error text it gives (TRUTH.md, "The API's
# rules", says where each text was seen; "unconfirmed" there is marked here too). The fake
# provider judges every Messages request by them: the verdict is recorded (`resume` writes it
# as "api_error"), and with --enforce-api-rules the request is answered as the API would
# answer it (400 invalid_request_error, 413 request_too_large).

IMAGE_MAX_BASE64 = 5 * 1024 * 1024   # of the base64 data (Claude Code's own check measures it so)
IMAGE_MAX_PX = 8000
MANY_IMAGES = 20
MANY_IMAGE_MAX_PX = 2000
REQUEST_MAX_BYTES = 32 * 1024 * 1024


def image_dims(data):
    """(width, height) of a base64 PNG, GIF, WebP or JPEG, from its header; None if unknown."""
    import base64
    import struct
    try:
        b = base64.b64decode(data[:1 << 20] + "=" * (-len(data[:1 << 20]) % 4), validate=False)
    except ValueError:
        return None
    if b[:8] == b"\x89PNG\r\n\x1a\n" and len(b) >= 24:
        return struct.unpack(">II", b[16:24])
    if b[:6] in (b"GIF87a", b"GIF89a") and len(b) >= 10:
        return struct.unpack("<HH", b[6:10])
    if b[:4] == b"RIFF" and b[8:12] == b"WEBP" and len(b) >= 30:
        kind = b[12:16]
        if kind == b"VP8X":
            return (int.from_bytes(b[24:27], "little") + 1, int.from_bytes(b[27:30], "little") + 1)
        if kind == b"VP8L":
            v = int.from_bytes(b[21:25], "little")
            return ((v & 0x3FFF) + 1, ((v >> 14) & 0x3FFF) + 1)
        if kind == b"VP8 ":
            w, h = struct.unpack("<HH", b[26:30])
            return (w & 0x3FFF, h & 0x3FFF)
    if b[:2] == b"\xff\xd8":
        i = 2
        while i + 9 < len(b):
            if b[i] != 0xFF:
                i += 1
                continue
            m = b[i + 1]
            if 0xC0 <= m <= 0xCF and m not in (0xC4, 0xC8, 0xCC):
                h, w = struct.unpack(">HH", b[i + 5:i + 9])
                return (w, h)
            i += 2 + struct.unpack(">H", b[i + 2:i + 4])[0]
    return None


def api_errors(body, size):
    """What the Messages API says of a request body of `size` bytes: a list of (HTTP status,
    error type, message), empty when it takes the request."""
    if size > REQUEST_MAX_BYTES:
        return [(413, "request_too_large", "Request exceeds the maximum size")]
    msgs = [m for m in (body.get("messages") or []) if isinstance(m, dict)]
    errors = []
    bad = lambda text: errors.append((400, "invalid_request_error", text))
    images = []  # (where, data)
    thinking_on = isinstance(body.get("thinking"), dict) and body["thinking"].get("type") in ("enabled", "adaptive")
    for n, m in enumerate(msgs):
        content = m.get("content")
        if not isinstance(content, list):
            continue
        seen_other = False
        for k, b in enumerate(content):
            if not isinstance(b, dict):
                continue
            t = b.get("type")
            if t == "text":
                text = b.get("text")
                if not isinstance(text, str) or text == "":
                    bad("messages: text content blocks must be non-empty")
                elif text.strip() == "":
                    bad("messages: text content blocks must contain non-whitespace text")
            if t == "thinking":
                if "signature" not in b:
                    bad(f"messages.{n}.content.{k}.thinking.signature: Field required")
                elif not b.get("signature"):
                    bad(f"messages.{n}.content.{k}: Invalid `signature` in `thinking` block")
            if t in ("thinking", "redacted_thinking"):
                # Confirmed for the final assistant message with thinking enabled; for earlier
                # ones unconfirmed (transcriptd's check applies it to every one).
                if seen_other and m.get("role") == "assistant" and thinking_on:
                    bad(f"messages.{n}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `text`. "
                        "When `thinking` is enabled, a final `assistant` message must start with a thinking block")
            elif not (t == "text" and isinstance(b.get("text"), str) and b["text"].strip() == ""):
                seen_other = True
            if t == "image":
                images.append((f"messages.{n}.content.{k}", b))
            if t == "tool_result" and isinstance(b.get("content"), list):
                for j, c in enumerate(b["content"]):
                    if isinstance(c, dict) and c.get("type") == "image":
                        images.append((f"messages.{n}.content.{k}.content.{j}", c))
    for where, b in images:
        src = b.get("source") or {}
        if src.get("type") != "base64":
            continue
        data = src.get("data") or ""
        if data == "":
            bad(f"{where}.image.source.base64.data: image data is empty (text unconfirmed)")
            continue
        if len(data) > IMAGE_MAX_BASE64:
            bad(f"{where}.image.source.base64: image exceeds 5 MB maximum: {len(data)} bytes > {IMAGE_MAX_BASE64} bytes")
            continue
        wh = image_dims(data)
        if wh and max(wh) > IMAGE_MAX_PX:
            bad(f"{where}.image.source.base64.data: At least one of the image dimensions exceed max allowed size: {IMAGE_MAX_PX} pixels")
        elif wh and len(images) > MANY_IMAGES and max(wh) > MANY_IMAGE_MAX_PX:
            bad(f"{where}.image.source.base64.data: At least one of the image dimensions exceed max allowed size for many-image requests: {MANY_IMAGE_MAX_PX} pixels")
    # Pairing, on the messages as the API reads them: consecutive messages of one role combined.
    merged = []
    for m in msgs:
        if m.get("role") not in ("user", "assistant"):
            continue
        c = m.get("content")
        c = [{"type": "text", "text": c}] if isinstance(c, str) else [b for b in (c or []) if isinstance(b, dict)]
        if merged and merged[-1][0] == m["role"]:
            merged[-1][1].extend(c)
        else:
            merged.append((m["role"], list(c)))
    for i, (role, c) in enumerate(merged):
        if role != "assistant":
            continue
        calls = [b.get("id") for b in c if b.get("type") == "tool_use"]
        if not calls:
            continue
        nxt = merged[i + 1][1] if i + 1 < len(merged) else []
        results = [b.get("tool_use_id") for b in nxt if b.get("type") == "tool_result"]
        missing = [u for u in calls if u not in results]
        if missing:
            bad(f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {', '.join(missing)}. "
                "Each `tool_use` block must have a corresponding `tool_result` block in the next message.")
            continue
        lead = 0
        while lead < len(nxt) and nxt[lead].get("type") == "tool_result":
            lead += 1
        if lead < len(calls):
            bad(f"messages.{i + 1}: Did not find {len(calls) - lead} `tool_result` block(s) at the beginning of this message. "
                "Messages following `tool_use` blocks must begin with a matching number of `tool_result` blocks.")
    for i, (role, c) in enumerate(merged):
        if role != "user":
            continue
        prev = [b.get("id") for b in merged[i - 1][1] if b.get("type") == "tool_use"] if i > 0 else []
        for k, b in enumerate(c):
            if b.get("type") == "tool_result" and b.get("tool_use_id") not in prev:
                bad(f"messages.{i}.content.{k}: unexpected `tool_use_id` found in `tool_result` blocks: {b.get('tool_use_id')}. "
                    "Each `tool_result` block must have a corresponding `tool_use` block in the previous message.")
    return errors


def is_compaction_request(body):
    """A Claude Code compaction: the last user message asks for a summary of the conversation."""
    msgs = body.get("messages") or []
    if not msgs:
        return False
    last = msgs[-1]
    content = last.get("content")
    texts = [content] if isinstance(content, str) else [b.get("text", "") for b in content or [] if isinstance(b, dict)]
    return any("create a detailed summary of the conversation" in t for t in texts)


def is_qwen_compression_request(body):
    """A Qwen Code compression: the last user message asks for the `<state_snapshot>` XML
    (`buildCompressionSystemPrompt` and its side query)."""
    msgs = body.get("messages") or []
    if not msgs or msgs[-1].get("role") != "user":
        return False
    return any("produce the <state_snapshot> XML" in t for t in texts_of(msgs[-1].get("content")))


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "oracle/1"

    def log_message(self, fmt, *args):
        if os.environ.get("ORACLE_DEBUG"):
            sys.stderr.write("oracle: " + (fmt % args) + "\n")

    @property
    def provider(self):
        return self.server.provider

    def _body(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        self.body_size = len(raw)
        if self.headers.get("Content-Encoding") == "zstd":
            raise ValueError("zstd request bodies are not supported")
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return {"_raw": raw.decode("utf-8", "replace")}

    def _json(self, code, doc):
        data = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _sse_start(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def _event(self, name, doc):
        self.wfile.write(f"event: {name}\ndata: {json.dumps(doc)}\n\n".encode())
        self.wfile.flush()

    def _stall(self, n):
        self.provider.note("stalled", n)
        while not self.provider.stop.is_set():
            time.sleep(0.1)

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        path = self.path.split("?")[0]
        self.provider.record("GET " + self.path, None)
        if path.endswith("/models"):
            return self._json(200, {"data": [], "models": []})
        return self._json(404, {"error": {"type": "not_found_error", "message": "not here"}})

    def do_POST(self):
        path = self.path.split("?")[0]
        body = self._body()
        n = self.provider.record(self.path, body)
        if path.endswith("/v1/messages/count_tokens"):
            return self._json(200, {"input_tokens": 100})
        if path.endswith("/v1/messages"):
            return self.anthropic(n, body or {})
        if path.endswith("/responses"):
            return self.openai_responses(n, body or {})
        if path.endswith("/chat/completions"):
            return self.openai_chat(n, body or {})
        if ":countTokens" in path:
            return self._json(200, {"totalTokens": 100})
        if ":streamGenerateContent" in path or ":generateContent" in path:
            return self.gemini(n, path, body or {})
        return self._json(404, {"error": {"type": "not_found_error", "message": "not here"}})

    # -- Anthropic Messages ------------------------------------------------------------------

    def anthropic(self, n, body):
        errors = api_errors(body, getattr(self, "body_size", 0))
        with self.provider.lock:
            self.provider.api_errors[n] = [e[2] for e in errors]
        if errors and self.provider.enforce_api_rules:
            status, kind, message = errors[0]
            return self._json(status, {"type": "error", "error": {"type": kind, "message": message}})
        # 2.0.x warms its subagents up with a "Warmup" prompt, tools and all.
        side = not body.get("tools") or carries_prompt(body, "Warmup")
        compaction = is_compaction_request(body)
        if compaction and self.provider.fail_compaction:
            self.provider.note("compaction-failed", n)
            return self._json(500, {"type": "error", "error": {"type": "api_error", "message": "Internal server error"}})
        if compaction and self.provider.stall_on_compaction:
            self.provider.note("compaction", n)
            step = {"stall": True, "text": "<analysis>"}
        elif compaction:
            step = {"text": "<summary>The user asked for a scripted session.</summary>"}
        elif side:
            step = {"text": "Scripted session"}
        else:
            step = self.provider.next_step()
        model = body.get("model", "claude-test")
        msg_id = f"msg_oracle{self.provider.run}{n:04}"
        blocks = []
        if step.get("text"):
            blocks.append({"type": "text", "text": step["text"]})
        if step.get("tool"):
            blocks.append({"type": "tool_use", "id": f"toolu_oracle{self.provider.run}{n:04}", "name": step["tool"], "input": step.get("input", {})})
        stop = "tool_use" if step.get("tool") else "end_turn"
        usage = {"input_tokens": 100, "output_tokens": 10, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        if not body.get("stream"):
            return self._json(200, {"id": msg_id, "type": "message", "role": "assistant", "model": model, "content": blocks,
                                    "stop_reason": stop, "stop_sequence": None, "usage": usage})
        self._sse_start()
        self._event("message_start", {"type": "message_start", "message": {
            "id": msg_id, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": dict(usage, output_tokens=1)}})
        for i, b in enumerate(blocks):
            if b["type"] == "text":
                self._event("content_block_start", {"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}})
                text = b["text"]
                half = len(text) // 2
                pieces = [text[:half], text[half:]] if half else [text]
                for k, piece in enumerate(pieces):
                    self._event("content_block_delta", {"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": piece}})
                    if step.get("stall") and k == 0:
                        return self._stall(n)
                self._event("content_block_stop", {"type": "content_block_stop", "index": i})
            else:
                self._event("content_block_start", {"type": "content_block_start", "index": i, "content_block": {
                    "type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}})
                self._event("content_block_delta", {"type": "content_block_delta", "index": i, "delta": {
                    "type": "input_json_delta", "partial_json": json.dumps(b["input"])}})
                self._event("content_block_stop", {"type": "content_block_stop", "index": i})
        if step.get("stall"):
            return self._stall(n)
        self._event("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                      "usage": {"output_tokens": 10}})
        self._event("message_stop", {"type": "message_stop"})

    # -- Gemini API (generateContent / streamGenerateContent) ---------------------------------

    def gemini(self, n, path, body):
        """The Gemini API as Gemini CLI calls it (`models/<model>:streamGenerateContent?alt=sse`,
        SSE `data:` lines, each a GenerateContentResponse; `:generateContent` for the side
        requests: next-speaker checks, titles). A request that offers tools takes a step; a
        side request asking for JSON gets a JSON text."""
        side = not body.get("tools") or not any(t.get("functionDeclarations") for t in body.get("tools") or [] if isinstance(t, dict))
        gen = body.get("generationConfig") or body.get("config") or {}
        if side:
            wants_json = gen.get("responseMimeType") == "application/json" or gen.get("responseJsonSchema") or gen.get("responseSchema")
            step = {"text": json.dumps({"next_speaker": "user", "reasoning": "scripted"}) if wants_json else "Scripted session"}
        else:
            step = self.provider.next_step()
        parts = []
        if step.get("text"):
            parts.append({"text": step["text"]})
        if step.get("tool"):
            parts.append({"functionCall": {"name": step["tool"], "args": step.get("input", {})}})
        usage = {"promptTokenCount": 100, "candidatesTokenCount": 10, "totalTokenCount": 110}
        model = path.split("/models/")[-1].split(":")[0]
        if ":streamGenerateContent" not in path:
            return self._json(200, {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
                                    "usageMetadata": usage, "modelVersion": model, "responseId": f"oracle{self.provider.run}{n:04}"})
        self._sse_start()

        def chunk(ps, finish=None, with_usage=False):
            c = {"content": {"role": "model", "parts": ps}, "index": 0}
            if finish:
                c["finishReason"] = finish
            doc = {"candidates": [c], "modelVersion": model, "responseId": f"oracle{self.provider.run}{n:04}"}
            if with_usage:
                doc["usageMetadata"] = usage
            self.wfile.write(f"data: {json.dumps(doc)}\r\n\r\n".encode())
            self.wfile.flush()

        text = step.get("text") or ""
        half = len(text) // 2
        if half:
            chunk([{"text": text[:half]}])
            if step.get("stall"):
                return self._stall(n)
            rest = [{"text": text[half:]}]
        else:
            rest = [{"text": text}] if text else []
        rest += [p for p in parts if "functionCall" in p]
        if step.get("stall"):
            return self._stall(n)
        chunk(rest, "STOP", True)

    # -- OpenAI Responses --------------------------------------------------------------------

    def openai_responses(self, n, body):
        side = not body.get("tools")
        step = {"text": "Scripted session"} if side else self.provider.next_step()
        resp_id = f"resp_oracle{self.provider.run}{n:04}"
        self._sse_start()
        self._event("response.created", {"type": "response.created", "response": {"id": resp_id}})
        items = []
        if step.get("text"):
            items.append({"type": "message", "role": "assistant", "id": f"msg_oracle{self.provider.run}{n:04}",
                          "content": [{"type": "output_text", "text": step["text"]}]})
        if step.get("tool"):
            items.append({"type": "function_call", "id": f"fc_oracle{self.provider.run}{n:04}", "call_id": f"call_oracle{self.provider.run}{n:04}",
                          "name": step["tool"], "arguments": json.dumps(step.get("input", {}))})
        for i, item in enumerate(items):
            self._event("response.output_item.added", {"type": "response.output_item.added", "output_index": i, "item": item})
            if item["type"] == "message":
                text = item["content"][0]["text"]
                half = len(text) // 2
                self._event("response.output_text.delta", {"type": "response.output_text.delta", "item_id": item["id"],
                                                           "output_index": i, "content_index": 0, "delta": text[:half]})
                if step.get("stall"):
                    return self._stall(n)
                self._event("response.output_text.delta", {"type": "response.output_text.delta", "item_id": item["id"],
                                                           "output_index": i, "content_index": 0, "delta": text[half:]})
            self._event("response.output_item.done", {"type": "response.output_item.done", "output_index": i, "item": item})
        if step.get("stall"):
            return self._stall(n)
        self._event("response.completed", {"type": "response.completed", "response": {
            "id": resp_id, "usage": {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0},
                                     "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0},
                                     "total_tokens": 110}}})


    # -- OpenAI Chat Completions (Qwen Code) ---------------------------------------------------

    def openai_chat(self, n, body):
        side = not body.get("tools")
        compaction = is_qwen_compression_request(body)
        if compaction and self.provider.fail_compaction:
            self.provider.note("compaction-failed", n)
            return self._json(500, {"type": "error", "error": {"type": "api_error", "message": "Internal server error"}})
        if compaction and self.provider.stall_on_compaction:
            self.provider.note("compaction", n)
            step = {"stall": True, "text": "<analysis>The user"}
        elif compaction:
            step = {"text": "<analysis>A scripted session.</analysis>\n<state_snapshot>\n<overall_goal>Run the scripted command.</overall_goal>\n"
                            "<current_state>It ran.</current_state>\n</state_snapshot>"}
        elif side:
            step = {"text": "Scripted session"}
        else:
            step = self.provider.next_step()
        cid = f"chatcmpl-oracle{self.provider.run}{n:04}"
        model = body.get("model", "oracle")
        call = None
        if step.get("tool"):
            call = {"id": f"call_oracle{self.provider.run}{n:04}", "type": "function",
                    "function": {"name": step["tool"], "arguments": json.dumps(step.get("input", {}))}}
        finish = "tool_calls" if call else "stop"
        usage = {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110, "prompt_tokens_details": {"cached_tokens": 0}}
        if compaction:
            # Qwen Code keeps a compression only when the history it summarised (the summary
            # request's prompt tokens, less 1000) outweighs the summary.
            usage = {"prompt_tokens": 50000, "completion_tokens": 40, "total_tokens": 50040, "prompt_tokens_details": {"cached_tokens": 0}}
        if not body.get("stream"):
            msg = {"role": "assistant", "content": step.get("text") or None}
            if call:
                msg["tool_calls"] = [call]
            return self._json(200, {"id": cid, "object": "chat.completion", "created": 0, "model": model,
                                    "choices": [{"index": 0, "message": msg, "finish_reason": finish}], "usage": usage})
        self._sse_start()

        def chunk(delta, finish_reason=None, **more):
            doc = {"id": cid, "object": "chat.completion.chunk", "created": 0, "model": model,
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}] if delta is not None else [], **more}
            self.wfile.write(f"data: {json.dumps(doc)}\n\n".encode())
            self.wfile.flush()

        chunk({"role": "assistant", "content": ""})
        text = step.get("text") or ""
        if text:
            half = len(text) // 2
            chunk({"content": text[:half]})
            if step.get("stall"):
                return self._stall(n)
            chunk({"content": text[half:]})
        if call:
            chunk({"tool_calls": [{"index": 0, "id": call["id"], "type": "function", "function": {"name": call["function"]["name"], "arguments": ""}}]})
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": call["function"]["arguments"]}}]})
        if step.get("stall"):
            return self._stall(n)
        chunk({}, finish)
        chunk(None, usage=usage)
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        # An agent killed (or done) mid-connection resets it: not an error of the oracle.
        if not isinstance(sys.exc_info()[1], (ConnectionError, BrokenPipeError)):
            super().handle_error(request, client_address)


def serve(provider):
    srv = Server(("127.0.0.1", 0), Handler)
    srv.provider = provider
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, srv.server_address[1]


# ---------------------------------------------------------------------------------------------
# The agents.


def encode_cwd(cwd):
    """Claude Code's project directory name for a working directory: every character that is not
    an ASCII letter or digit becomes '-'."""
    return re.sub(r"[^A-Za-z0-9]", "-", str(cwd))


def agent_bin(agent, given):
    if given:
        return given
    env = {"claude": "TRANSCRIPTD_CLAUDE", "codex": "TRANSCRIPTD_CODEX", "pi": "TRANSCRIPTD_PI", "qwen": "TRANSCRIPTD_QWEN", "gemini": "TRANSCRIPTD_GEMINI", "copilot": "TRANSCRIPTD_COPILOT"}[agent]
    b = os.environ.get(env)
    if not b:
        sys.exit(f"agent_oracle: no {agent} binary: give --bin or ${env}")
    return b


def base_env(home):
    env = {
        "HOME": str(home),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "TMPDIR": str(Path(home) / "tmp"),
        "USER": "oracle",
    }
    (Path(home) / "tmp").mkdir(parents=True, exist_ok=True)
    return env


def claude_home(home, port):
    home = Path(home)
    (home / ".claude").mkdir(parents=True, exist_ok=True)
    key = "sk-ant-oracle-test-key-000000000000"
    # The onboarding and the "use this custom API key?" question are answered in advance:
    # customApiKeyResponses holds the key's last 20 characters.
    (home / ".claude.json").write_text(json.dumps({
        "hasCompletedOnboarding": True,
        "lastOnboardingVersion": "9.9.9",
        "customApiKeyResponses": {"approved": [key[-20:]], "rejected": []},
        "bypassPermissionsModeAccepted": True,
        "autoUpdates": False,
    }))
    (home / ".claude" / "settings.json").write_text(json.dumps({"autoUpdates": False}))
    env = base_env(home)
    env.update({
        "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}",
        "ANTHROPIC_API_KEY": key,
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_BUG_COMMAND": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "CLAUDE_CODE_ENABLE_TELEMETRY": "0",
        "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1",
        "IS_SANDBOX": "1",
        "API_TIMEOUT_MS": "600000",
        "CLAUDE_CODE_MAX_RETRIES": "0",
    })
    return env


# The model Codex resumes with unless --model says otherwise: not one of the models Codex 0.171.0
# ships metadata for, so it gets the fallback metadata (tool outputs cut to 10,000 bytes, where
# the bundled models cut to 10,000 tokens). `transcriptd context --model` is told the same.
CODEX_MODEL = "gpt-5-codex"


def codex_home(home, port, provider_id="oracle", model=None):
    """A Codex home whose model provider is the local server. A rollout is resumed with the
    provider it was made with (Codex refuses to change it on resume); the built-in `openai`
    provider is pointed at the server with `openai_base_url`."""
    home = Path(home)
    (home / ".codex").mkdir(parents=True, exist_ok=True)
    base = f"http://127.0.0.1:{port}/v1"
    if provider_id == "openai":
        provider = f'openai_base_url = "{base}"\n'
    else:
        provider = f"""
[model_providers.{provider_id}]
name = "{provider_id}"
base_url = "{base}"
wire_api = "responses"
env_key = "ORACLE_API_KEY"
request_max_retries = 0
stream_max_retries = 0
"""
    (home / ".codex" / "config.toml").write_text(f"""model = "{model or CODEX_MODEL}"
model_provider = "{provider_id}"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false
{provider if provider_id == "openai" else ""}
[analytics]
enabled = false
{provider if provider_id != "openai" else ""}""")
    env = base_env(home)
    env.update({"ORACLE_API_KEY": "sk-oracle-test", "OPENAI_API_KEY": "sk-oracle-test", "CODEX_API_KEY": "sk-oracle-test",
                "CODEX_HOME": str(home / ".codex"), "RUST_LOG": "error"})
    return env


def pi_dir(cwd):
    """Pi's session directory name for a working directory (`getDefaultSessionDir`): the leading
    separator dropped, every `/`, `\\` and `:` a `-`, between `--` and `--`."""
    return "--" + re.sub(r"[/\\:]", "-", re.sub(r"^[/\\]", "", str(cwd))) + "--"


PI_MODEL = "claude-oracle"


def pi_home(home, port):
    """A Pi agent directory whose one provider is the local server, spoken to with the Anthropic
    Messages API (`~/.pi/agent/models.json`, docs/models.md), and whose startup network calls
    (version check, telemetry) are off."""
    home = Path(home)
    agent = home / ".pi" / "agent"
    agent.mkdir(parents=True, exist_ok=True)
    (agent / "models.json").write_text(json.dumps({"providers": {"oracle": {
        "baseUrl": f"http://127.0.0.1:{port}", "api": "anthropic-messages", "apiKey": "sk-ant-oracle-test",
        "models": [{"id": PI_MODEL, "name": "Oracle", "reasoning": False, "input": ["text", "image"],
                    "contextWindow": 200000, "maxTokens": 8192, "cost": {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75}}]},
        # The built-in Anthropic provider through the server too: a session made with one of its
        # models resumes with that model (so pi-ai sends it as the same model's history).
        "anthropic": {"baseUrl": f"http://127.0.0.1:{port}"}}}))
    (agent / "settings.json").write_text(json.dumps({"defaultProvider": "oracle", "defaultModel": PI_MODEL}))
    env = base_env(home)
    env.update({"PI_OFFLINE": "1", "PI_SKIP_VERSION_CHECK": "1", "PI_TELEMETRY": "0", "ANTHROPIC_API_KEY": "sk-ant-oracle-test"})
    return env


def pi_cmd(binary, model=True):
    """Pi under Node; a new session with the server's model (a resumed one keeps its own)."""
    node = os.environ.get("TRANSCRIPTD_NODE") or shutil.which("node") or "node"
    return [node, binary] + (["--provider", "oracle", "--model", PI_MODEL] if model else [])


COPILOT_MODEL = "claude-sonnet-4.5"


def copilot_home(home, port):
    """A Copilot CLI home whose model provider is the local server (BYOK, `copilot help
    environment`): COPILOT_OFFLINE skips GitHub authentication, telemetry and updates, and
    COPILOT_PROVIDER_TYPE=anthropic makes it speak the Anthropic Messages API to
    COPILOT_PROVIDER_BASE_URL."""
    home = Path(home)
    (home / ".copilot").mkdir(parents=True, exist_ok=True)
    env = base_env(home)
    env.update({"COPILOT_HOME": str(home / ".copilot"), "COPILOT_OFFLINE": "true", "COPILOT_PROVIDER_TYPE": "anthropic",
                "COPILOT_PROVIDER_BASE_URL": f"http://127.0.0.1:{port}", "COPILOT_PROVIDER_API_KEY": "sk-ant-oracle-test",
                "COPILOT_MODEL": COPILOT_MODEL, "COPILOT_AUTO_UPDATE": "false", "NO_COLOR": "1",
                "COPILOT_PKG_CACHE_HOME": str(home / ".cache" / "copilot")})
    return env


def copilot_cmd(binary):
    return [binary, "--no-auto-update", "--allow-all", "--no-ask-user", "--no-custom-instructions"]


def copilot_session_id(transcript):
    """The session id: `session.start`'s `data.sessionId`, else the directory's name."""
    with open(transcript, "rb") as f:
        for line in f:
            try:
                d = json.loads(line)
            except ValueError:
                continue
            if isinstance(d, dict) and d.get("type") == "session.start" and isinstance(d.get("data"), dict):
                return d["data"].get("sessionId")
    return Path(transcript).parent.name


def copilot_sessions(home):
    return list((Path(home) / ".copilot" / "session-state").glob("*/events.jsonl"))


QWEN_MODEL = "qwen-oracle"


def qwen_project_dir(home, cwd):
    """Qwen Code's project directory for a working directory (`Storage.getProjectDir`: every
    character that is not an ASCII letter or digit a `-`, `sanitizeCwd`)."""
    return Path(home) / ".qwen" / "projects" / re.sub(r"[^A-Za-z0-9]", "-", str(cwd))


def qwen_home(home, port):
    """A Qwen Code home whose provider is the local server, spoken to with OpenAI Chat
    Completions (`--auth-type openai`, OPENAI_BASE_URL), with its usage statistics and update
    checks off."""
    home = Path(home)
    (home / ".qwen").mkdir(parents=True, exist_ok=True)
    (home / ".qwen" / "settings.json").write_text(json.dumps({
        "security": {"auth": {"selectedType": "openai"}},
        "model": {"name": QWEN_MODEL},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True}}))
    env = base_env(home)
    env.update({"OPENAI_API_KEY": "sk-oracle-test", "OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1", "OPENAI_MODEL": QWEN_MODEL,
                "QWEN_CODE_DISABLE_TELEMETRY": "1"})
    return env


def qwen_cmd(binary, port):
    """Qwen Code under Node, headless, every tool approved."""
    node = os.environ.get("TRANSCRIPTD_NODE") or shutil.which("node") or "node"
    return [node, binary, "--auth-type", "openai", "--openai-base-url", f"http://127.0.0.1:{port}/v1",
            "--openai-api-key", "sk-oracle-test", "-m", QWEN_MODEL, "--approval-mode", "yolo"]


def qwen_session_id(transcript):
    """The one `sessionId` the records carry (Qwen Code refuses a file with several), else the
    file name."""
    with open(transcript, "rb") as f:
        for line in f:
            try:
                d = json.loads(line)
            except ValueError:
                continue
            if isinstance(d, dict) and isinstance(d.get("sessionId"), str) and d["sessionId"]:
                return d["sessionId"]
    return Path(transcript).stem


GEMINI_MODEL = "gemini-2.5-flash"


def gemini_home(home, port):
    """A Gemini CLI home that talks to the local server with an API key
    (`GOOGLE_GEMINI_BASE_URL`, `GEMINI_API_KEY`, `security.auth.selectedType` `gemini-api-key`),
    with its update check, telemetry, usage statistics and folder-trust prompt off."""
    home = Path(home)
    g = home / ".gemini"
    g.mkdir(parents=True, exist_ok=True)
    (g / "settings.json").write_text(json.dumps({
        "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True, "enableAutoUpdate": False, "enableAutoUpdateNotification": False},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "model": {"name": GEMINI_MODEL},
    }))
    env = base_env(home)
    env.update({"GEMINI_API_KEY": "oracle-test-key", "GOOGLE_GEMINI_BASE_URL": f"http://127.0.0.1:{port}",
                "GEMINI_CLI_NO_RELAUNCH": "true", "NO_BROWSER": "true", "CI": "1"})
    return env


def gemini_cmd(binary):
    node = os.environ.get("TRANSCRIPTD_NODE") or shutil.which("node") or "node"
    return [node, binary, "--approval-mode", "yolo", "-m", GEMINI_MODEL]


def in_netns():
    """Re-runs this program inside a new network namespace with only loopback up, unless it is
    already there."""
    if os.environ.get(NETNS_MARK) == str(os.getpid()):
        return
    if os.environ.get(NETNS_MARK) is None:
        cmd = ["unshare", "--net"]
        if os.geteuid() != 0:
            cmd.append("--map-root-user")
        script = 'ip link set lo up && export %s=$$ && exec "$@"' % NETNS_MARK
        os.execvp(cmd[0], cmd + ["sh", "-c", script, "sh", sys.executable, *sys.argv])
    # The marker is set but not for this pid: a child of the namespaced process: fine.


def check_isolated():
    out = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    links = [l.split(":")[1].strip() for l in out.splitlines() if l.strip()]
    if links != ["lo"]:
        sys.exit(f"agent_oracle: refusing to run: the network namespace has links {links}, not only lo")


def run_agent(cmd, env, cwd, provider, kill_when=None, timeout=120):
    """Runs the agent in its own process group; kills it (SIGKILL) when kill_when() says so.
    Returns (returncode, stdout, stderr, killed)."""
    out = open(Path(env["HOME"]) / "agent.stdout", "w+")
    err = open(Path(env["HOME"]) / "agent.stderr", "w+")
    p = subprocess.Popen(cmd, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True)
    killed = None
    deadline = time.monotonic() + timeout
    while p.poll() is None:
        if kill_when:
            why = kill_when()
            if why:
                os.killpg(p.pid, signal.SIGKILL)
                killed = why
                p.wait()
                break
        if time.monotonic() > deadline:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            killed = "timeout"
            break
        time.sleep(0.05)
    provider.stop.set()
    out.seek(0)
    err.seek(0)
    return p.returncode, out.read(), err.read(), killed


def claude_cmd(binary):
    # A JavaScript release (2.0.x, cli.js) runs under node; a native binary runs as is.
    if binary.endswith(".js"):
        node = os.environ.get("TRANSCRIPTD_NODE") or shutil.which("node") or "node"
        return [node, binary]
    return [binary]


def first_line(path):
    with open(path, "rb") as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    return json.loads(line)
                except ValueError:
                    continue
    return {}


def claude_session_id(transcript):
    """The session id: the one the lines carry (the file is named by it), else the file name."""
    with open(transcript, "rb") as f:
        for line in f:
            try:
                d = json.loads(line)
            except ValueError:
                continue
            if isinstance(d, dict) and d.get("sessionId") and not d.get("isSidechain"):
                return d["sessionId"]
    stem = Path(transcript).stem
    return stem if re.fullmatch(r"[0-9a-f-]{36}", stem) else None


def last_claude_model(transcript):
    """The model of the transcript's last assistant message: the session goes on with it (an
    agent drops the thinking blocks another model signed)."""
    model = None
    with open(transcript, "rb") as f:
        for line in f:
            try:
                d = json.loads(line)
            except ValueError:
                continue
            m = d.get("message") if isinstance(d, dict) else None
            if isinstance(m, dict) and m.get("role") == "assistant" and isinstance(m.get("model"), str) \
                    and m["model"].startswith("claude"):
                model = m["model"]
    return model


def codex_session(transcript):
    d = first_line(transcript)
    if d.get("type") == "session_meta":
        p = d.get("payload", {})
        return p.get("id"), p.get("timestamp") or d.get("timestamp")
    m = re.search(r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.jsonl$", str(transcript))
    return (m.group(1) if m else None), None


def texts_of(content):
    if isinstance(content, str):
        return [content]
    out = []
    for b in content or []:
        if isinstance(b, dict) and isinstance(b.get("text"), str):
            out.append(b["text"])
    return out


def carries_prompt(body, prompt):
    """Whether a model request carries the new prompt in its last user message (Anthropic
    `messages`, or Responses `input`). Warmups and side requests do not."""
    if not isinstance(body, dict):
        return False
    items = body.get("messages") or body.get("input") or body.get("contents") or []
    if not isinstance(items, list):
        return False
    users = [m for m in items if isinstance(m, dict) and m.get("role") == "user"]
    # Gemini `contents`: a user Content's `parts`. Copilot sends the prompt after the time:
    # "<current_datetime>...</current_datetime>\n\ncontinue".
    return bool(users) and any(t.strip() == prompt or (t.startswith("<current_datetime>") and t.endswith("\n\n" + prompt))
                               for t in texts_of(users[-1].get("content", users[-1].get("parts"))))


def is_main_request(event, prompt="continue"):
    return event[0] == "request" and carries_prompt(event[3], prompt)


def lay_down(agent, binary, transcript, home, cwd, port, model, prompt, extra=()):
    """Puts the transcript where the agent looks for it in the throwaway HOME; returns the
    environment and the command that resumes it with `prompt`."""
    if agent == "claude":
        sid = claude_session_id(transcript)
        env = claude_home(home, port)
        proj = Path(home) / ".claude" / "projects" / encode_cwd(cwd)
        proj.mkdir(parents=True, exist_ok=True)
        if re.fullmatch(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}", sid or ""):
            shutil.copyfile(transcript, proj / f"{sid}.jsonl")
        elif sid:
            # `claude --resume` takes a UUID (or a session title) only. A made case (`s1`) is
            # given a UUID of its own in the copy the agent resumes, as for Codex below: every
            # line that names the old id re-encoded with the new one, every other line (an
            # unreadable one too) byte for byte.
            old, sid = sid, str(uuid.uuid5(uuid.NAMESPACE_URL, str(Path(transcript).resolve())))
            with open(transcript, "rb") as src, open(proj / f"{sid}.jsonl", "wb") as dst:
                for line in src:
                    try:
                        d = json.loads(line)
                    except ValueError:
                        d = None
                    if isinstance(d, dict) and d.get("sessionId") == old:
                        d["sessionId"] = sid
                        line = json.dumps(d, ensure_ascii=False).encode() + (b"\n" if line.endswith(b"\n") else b"")
                    dst.write(line)
        else:
            sys.stderr.write("agent_oracle: not resumable: no line names a session id (Claude Code resumes by UUID)\n")
            sys.exit(4)
        cmd = claude_cmd(binary) + ["-p", "--resume", sid, "--output-format", "json", *extra]
        model = model or last_claude_model(transcript)
        if model and model != "none":
            cmd += ["--model", model]
        return env, cmd + [prompt]
    if agent == "qwen":
        env = qwen_home(home, port)
        sid = qwen_session_id(transcript)
        chats = qwen_project_dir(home, cwd) / "chats"
        chats.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(transcript, chats / f"{sid}.jsonl")
        # The records name the directory they were written in; Qwen Code also takes a session
        # whose runtime status names this one (`sessionBelongsToCurrentProject`), so the file
        # is resumed as it is.
        (chats / f"{sid}.runtime.json").write_text(json.dumps({
            "schema_version": 1, "pid": 1, "session_id": sid, "work_dir": str(cwd), "hostname": "oracle",
            "started_at": 0, "qwen_version": None}))
        return env, qwen_cmd(binary, port) + ["--resume", sid, *extra, prompt]
    elif agent == "gemini":
        # Gemini CLI keeps a project's chats under ~/.gemini/tmp/<slug>/chats, the slug from its
        # projects.json; a directory named by the SHA-256 of the project root (the layout before
        # slugs) is migrated to the slug on start, so the file is laid there.
        import hashlib
        env = gemini_home(home, port)
        d = Path(home) / ".gemini" / "tmp" / hashlib.sha256(str(cwd).encode()).hexdigest() / "chats"
        d.mkdir(parents=True, exist_ok=True)
        name = transcript.name if re.fullmatch(r"session-.*\.jsonl", transcript.name) else "session-2026-01-01T00-00-oracle00.jsonl"
        shutil.copyfile(transcript, d / name)
        return env, gemini_cmd(binary) + ["--resume", "latest", *extra, "-p", prompt]
    if agent == "copilot":
        sid = copilot_session_id(transcript)
        if not re.fullmatch(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}", sid or ""):
            sys.stderr.write(f"agent_oracle: not resumable: the session id {sid!r} is not a UUID\n")
            sys.exit(4)
        env = copilot_home(home, port)
        d = Path(home) / ".copilot" / "session-state" / sid
        d.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(transcript, d / "events.jsonl")
        return env, copilot_cmd(binary) + [f"--resume={sid}", *extra, "-p", prompt]
    if agent == "pi":
        env = pi_home(home, port)
        d = Path(home) / ".pi" / "agent" / "sessions" / pi_dir(cwd)
        d.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(transcript, d / transcript.name)
        return env, pi_cmd(binary, model=False) + ["--continue", *extra, "-p", prompt]
    sid, ts = codex_session(transcript)
    head = None
    if not re.fullmatch(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}", sid or ""):
        # Codex takes anything else for a thread name, finds none, and starts a new thread. A
        # made case (`0199-case`) is given a UUID of its own in the copy the agent resumes: its
        # session_meta line re-encoded with that id, every other line as it is.
        first = first_line(transcript)
        if first.get("type") != "session_meta" or not isinstance(first.get("payload"), dict):
            sys.stderr.write(f"agent_oracle: not resumable: the session id {sid!r} is not a UUID (Codex resumes by UUID)\n")
            sys.exit(4)
        sid = str(uuid.uuid5(uuid.NAMESPACE_URL, str(Path(transcript).resolve())))
        first["payload"]["id"] = sid
        head = json.dumps(first, ensure_ascii=False).encode() + b"\n"
    meta = first_line(transcript).get("payload", {})
    env = codex_home(home, port, meta.get("model_provider") or "openai", model)
    day = (ts or "2026-01-01")[:10].split("-")
    d = Path(home) / ".codex" / "sessions" / day[0] / day[1] / day[2]
    d.mkdir(parents=True, exist_ok=True)
    name = transcript.name if transcript.name.startswith("rollout-") and transcript.name.endswith(f"{sid}.jsonl") \
        else f"rollout-{day[0]}-{day[1]}-{day[2]}T00-00-00-{sid}.jsonl"
    if head is None:
        shutil.copyfile(transcript, d / name)
    else:
        data = Path(transcript).read_bytes()
        (d / name).write_bytes(head + data[data.index(b"\n") + 1:] if b"\n" in data else head)
    return env, [binary, "exec", "--skip-git-repo-check", *extra, "resume", sid, prompt]


def cmd_resume(args):
    in_netns()
    check_isolated()
    binary = agent_bin(args.agent, args.bin)
    transcript = Path(args.transcript).resolve()
    work = Path(tempfile.mkdtemp(prefix="oracle-resume-"))
    try:
        home = work / "home"
        cwd = work / "project"
        cwd.mkdir(parents=True)
        provider = Provider(work / "requests", enforce_api_rules=args.enforce_api_rules)
        srv, port = serve(provider)
        env, cmd = lay_down(args.agent, binary, transcript, home, cwd, port, args.model, "continue")

        def captured():
            return "captured" if provider.wait_for(is_main_request, 0) else None

        # --until-exit: the agent is left to take the provider's answer and end on its own.
        kill = None if args.until_exit else captured
        rc, out, err, killed = run_agent(cmd, env, cwd, provider, kill_when=kill, timeout=args.timeout)
        ev = provider.wait_for(is_main_request, 0)
        if not ev:
            sys.stderr.write(f"agent_oracle: {args.agent} sent no model request (exit {rc}, {killed or 'not killed'})\n")
            sys.stderr.write("stdout: " + out[-2000:] + "\nstderr: " + err[-4000:] + "\n")
            others = [e[2] for e in provider.events if e[0] == "request"]
            sys.stderr.write(f"other requests: {others}\n")
            return 3
        doc = {"path": ev[2], "body": ev[3], "api_errors": provider.api_errors.get(ev[1], [])}
        if args.until_exit:
            # Every request that carried the prompt, with what the API rules said of it: an
            # agent that takes an error and tries again sends more than one.
            mains = [e for e in provider.events if is_main_request(e)]
            doc["agent"] = {"exit": rc, "killed": killed, "stdout": out[-4000:], "stderr": err[-2000:],
                            "main_requests": [provider.api_errors.get(e[1], []) for e in mains]}
        Path(args.out).write_text(json.dumps(doc, indent=1))
        srv.shutdown()
        return 0
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            sys.stderr.write(f"kept {work}\n")


def cmd_record(args):
    in_netns()
    check_isolated()
    binary = agent_bin(args.agent, args.bin)
    script = json.loads(Path(args.script).read_text())
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="oracle-record-"))
    try:
        # --home: a HOME the caller keeps (a second run sees the first one's sessions, and a
        # daemon outside the namespace can watch it); else a throwaway one.
        home = Path(args.home).resolve() if args.home else work / "home"
        cwd = work / "scratch"
        cwd.mkdir(parents=True)
        provider = Provider(out_dir / "requests", script.get("steps"), stall_on_compaction=args.kill_at == "compaction",
                            fail_compaction=args.fail_compaction)
        srv, port = serve(provider)
        prompt = args.prompt or script.get("prompt", "Run the scripted command.")
        if args.resume:
            # A further turn on a session given (one a killed agent left, say): the agent resumes
            # it and writes on in the same file.
            extra = ["--permission-mode", "bypassPermissions"] if args.agent == "claude" else []
            env, cmd = lay_down(args.agent, binary, Path(args.resume).resolve(), home, cwd, port, None, prompt, extra)
        elif args.agent == "pi":
            env = pi_home(home, port)
            cmd = pi_cmd(binary) + ["-p", prompt]
        elif args.agent == "qwen":
            env = qwen_home(home, port)
            cmd = qwen_cmd(binary, port) + ["--session-id", str(uuid.uuid4()), prompt]
        elif args.agent == "copilot":
            env = copilot_home(home, port)
            cmd = copilot_cmd(binary) + ["-p", prompt]
        elif args.agent == "gemini":
            env = gemini_home(home, port)
            cmd = gemini_cmd(binary) + ["-p", prompt]
        elif args.agent == "claude":
            env = claude_home(home, port)
            sid = str(uuid.uuid4())
            cmd = claude_cmd(binary) + ["-p", "--session-id", sid, "--permission-mode", "bypassPermissions", "--output-format", "json", prompt]
        else:
            env = codex_home(home, port)
            cmd = [binary, "exec", "--skip-git-repo-check", prompt]

        if args.before:
            # A command run in the agent's HOME before it starts (`transcriptd hooks install`).
            subprocess.run(["sh", "-c", args.before], env=env, cwd=cwd, check=True)

        stalled_at = {}

        def kill_when():
            if args.kill_at == "mid-tool":
                if (cwd / "started").exists():
                    stalled_at.setdefault("t", time.monotonic())
                    if time.monotonic() - stalled_at["t"] > 1.0:
                        return "mid-tool"
            elif args.kill_at in ("mid-stream", "compaction"):
                if provider.wait_for(lambda e: e[0] == "stalled", 0):
                    stalled_at.setdefault("t", time.monotonic())
                    if time.monotonic() - stalled_at["t"] > 1.0:
                        return args.kill_at
            return None

        rc, out, err, killed = run_agent(cmd, env, cwd, provider, kill_when=kill_when if args.kill_at else None, timeout=args.timeout)
        srv.shutdown()
        if args.agent == "pi":
            found = list((home / ".pi" / "agent" / "sessions").glob("*/*.jsonl"))
        elif args.agent == "qwen":
            found = list((home / ".qwen" / "projects").glob("*/chats/*.jsonl"))
        elif args.agent == "copilot":
            found = copilot_sessions(home)
        elif args.agent == "gemini":
            found = list((home / ".gemini" / "tmp").glob("*/chats/session-*.jsonl"))
        elif args.agent == "claude":
            found = [p for p in (home / ".claude" / "projects").glob("*/*.jsonl") if not p.name.startswith("agent-")]
        else:
            found = list((home / ".codex" / "sessions").glob("*/*/*/rollout-*.jsonl"))
        # The session written last: a resumed 2.0.x session goes on in a new file (a copy of the
        # history under a new session id).
        found.sort(key=lambda p: p.stat().st_mtime_ns, reverse=True)
        result = {"agent": args.agent, "exit": rc, "killed": killed, "sessions": [str(p.relative_to(home)) for p in found],
                  "stdout": out[-4000:], "stderr": err[-4000:], "requests": provider.count,
                  "scratch": sorted(p.name for p in cwd.iterdir())}
        if found:
            shutil.copyfile(found[0], out_dir / "session.jsonl")
            result["session_name"] = found[0].name
        (out_dir / "result.json").write_text(json.dumps(result, indent=1))
        if not found:
            sys.stderr.write(f"agent_oracle: {args.agent} wrote no session (exit {rc}, {killed})\n{err[-3000:]}\n")
            return 3
        return 0
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            sys.stderr.write(f"kept {work}\n")


# ---------------------------------------------------------------------------------------------
# The comparison: the request the agent sent against what `transcriptd context -o json` printed.
#
# The equivalence (API semantics), written down:
#
# Claude Code (Anthropic Messages):
#   * context side: each record {role, content}; a string content is one text block.
#   * both sides: `cache_control` is removed from every block (the agent marks cache points);
#     then consecutive messages of the same role are merged into one (the Messages API combines
#     consecutive same-role turns).
#   * both sides, anywhere in the request (first): `role: system` messages and text blocks
#     wrapped in `<system-reminder>…</system-reminder>` are removed: what the agent injects
#     itself (its environment, `# Environment update`, its reminders, and those of the turns it
#     rebuilds from its `api-request-blob` lines). Nothing else it adds is left out.
#   * both sides: a message with no content blocks is removed (2.1.332 sends an empty
#     `{"role":"system","content":[]}` after the first user message).
#   * agent side: the new turn is removed: the trailing system messages (the environment, which
#     2.1.332 sends as a system message after the prompt); then from the last user message, the text blocks that are
#     the prompt ("continue") or begin with "<system-reminder>" (environment, model, deferred
#     tools, ... that the agent injects); the message goes if nothing is left. The system
#     prompt, tools, metadata and the other top-level fields are not compared.
#   * nothing else is ignored: block order, whitespace-only text blocks, thinking blocks and
#     their signatures, a tool_result's content as a string or as blocks, `is_error`, `caller`.
#
# Codex (OpenAI Responses `input`):
#   * context side: the payload of each `response_item` record; a `compacted` record with a
#     `replacement_history` replaces the items before it by that history; other records
#     (session_meta, turn_context, event_msg) are not items.
#   * both sides: the keys `id` (Codex numbers the items it sends) and
#     `internal_chat_message_metadata_passthrough` (client metadata) are removed, and so is a
#     key whose value is null, at any depth of an item (the Responses API reads `"content":
#     null` as no `content`: Codex sends a missing optional field as null).
#   * agent side: a leading developer message that is not the context's first item is removed:
#     the agent's instructions (rebuilt from session_meta's `base_instructions`, which 0.171.0
#     does not send verbatim, or its own when there are none), and so are the trailing developer/user messages after the last item that matches
#     the context, when the very last is the prompt ("continue"): those are the new turn's
#     context (permissions, AGENTS.md, environment, model switch, skills) and the prompt.


# Gemini CLI (Gemini API `contents`):
#   * context side: the records as printed ({role, parts}, after what the agent does on resume:
#     src/transcript/context/agent.rs).
#   * both sides: consecutive contents of one role are joined (the API joins them), and a
#     content with no parts is removed.
#   * agent side: the text parts beginning with "<session_context>" are removed (the
#     environment the agent makes anew on every start and puts first; the file's own is not
#     sent), and the prompt ("continue") at the end. systemInstruction, tools and
#     generationConfig are not compared; nothing else is ignored (ids, args, responses,
#     thought signatures, part order).


def _strip_cache_control(block):
    if isinstance(block, dict):
        block = {k: v for k, v in block.items() if k != "cache_control"}
        if isinstance(block.get("content"), list):
            block["content"] = [_strip_cache_control(b) for b in block["content"]]
    return block


def _claude_messages(msgs):
    out = []
    for m in msgs:
        content = m.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
        blocks = [_strip_cache_control(b) for b in blocks]
        if out and out[-1]["role"] == m.get("role"):
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": m.get("role"), "content": blocks})
    # A message with no content says nothing (the agent sends an empty system message).
    return [m for m in out if m["content"]]


def _is_reminder(b):
    return isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str) and \
        b["text"].startswith("<system-reminder>") and b["text"].rstrip().endswith("</system-reminder>")


def _drop_injections_claude(msgs):
    """What Claude Code injects itself, anywhere in the request, left out on both sides:
    `role: system` messages (its environment, `# Environment update`) and text blocks wrapped in
    `<system-reminder>` (its reminders, and those of the turns it rebuilds from its
    `api-request-blob` lines). Nothing else."""
    out = []
    for m in msgs:
        if m.get("role") == "system":
            continue
        content = m.get("content")
        if isinstance(content, list):
            m = {**m, "content": [b for b in content if not _is_reminder(b)]}
        elif isinstance(content, str) and _is_reminder({"type": "text", "text": content}):
            m = {**m, "content": []}
        out.append(m)
    return out


def _drop_new_turn_claude(msgs, prompt):
    msgs = [dict(m) for m in msgs]
    # The environment the agent adds after the prompt, as a system message.
    while msgs and msgs[-1]["role"] == "system":
        msgs.pop()
    if msgs and msgs[-1]["role"] == "user":
        kept = [b for b in msgs[-1]["content"] if not (isinstance(b, dict) and b.get("type") == "text" and
                (b.get("text", "").strip() == prompt or b.get("text", "").startswith("<system-reminder>")))]
        if kept:
            msgs[-1] = {"role": "user", "content": kept}
        else:
            msgs.pop()
    return msgs


_CODEX_DROP = {"id", "internal_chat_message_metadata_passthrough"}


def _no_nulls(v):
    if isinstance(v, dict):
        return {k: _no_nulls(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [_no_nulls(x) for x in v]
    return v


def _codex_item(item):
    return _no_nulls({k: v for k, v in item.items() if k not in _CODEX_DROP}) if isinstance(item, dict) else item


def _codex_context_items(records):
    items, meta = [], {}
    for r in records:
        t = r.get("type")
        if t == "session_meta":
            meta = r.get("payload") or {}
        elif t == "response_item":
            items.append(r.get("payload"))
        elif t == "compacted" and isinstance((r.get("payload") or {}).get("replacement_history"), list):
            items = list(r["payload"]["replacement_history"])
    return [_codex_item(i) for i in items], meta


def _preview(x, n=240):
    s = json.dumps(x, ensure_ascii=False)
    return s if len(s) <= n else s[: n - 20] + " ... " + s[-15:]


def _describe(a, t):
    """The differences between two lists of messages/items, as aligned regions."""
    import difflib
    ka = [json.dumps(x, sort_keys=True) for x in a]
    kt = [json.dumps(x, sort_keys=True) for x in t]
    diffs = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, ka, kt, autojunk=False).get_opcodes():
        if op == "equal":
            continue
        d = {"op": op, "agent": [i1, i2], "context": [j1, j2]}
        if op == "replace" and i2 - i1 == j2 - j1:
            d["detail"] = [_detail(x, y) for x, y in zip(a[i1:i2], t[j1:j2])]
        diffs.append(d)
        d.update({
                      "agent_sent": [_preview(x) for x in a[i1:i2][:3]],
                      "context_printed": [_preview(x) for x in t[j1:j2][:3]]})
    return diffs


def _detail(x, y, where=""):
    """Where two JSON values first differ, in words."""
    if type(x) is not type(y):
        return f"{where or 'value'}: agent has {type(x).__name__} {_preview(x, 120)}, context has {type(y).__name__} {_preview(y, 120)}"
    if isinstance(x, dict):
        for k in sorted(set(x) | set(y)):
            if k not in y:
                return f"{where}.{k}: only the agent sends it: {_preview(x[k], 120)}"
            if k not in x:
                return f"{where}.{k}: only context prints it: {_preview(y[k], 120)}"
            if x[k] != y[k]:
                return _detail(x[k], y[k], f"{where}.{k}")
    if isinstance(x, list):
        if len(x) != len(y):
            return f"{where}: agent has {len(x)} entries, context {len(y)}: agent {_preview(x, 300)} / context {_preview(y, 300)}"
        for i, (u, v) in enumerate(zip(x, y)):
            if u != v:
                return _detail(u, v, f"{where}[{i}]")
    if isinstance(x, str):
        i = next((k for k, (u, v) in enumerate(zip(x, y)) if u != v), min(len(x), len(y)))
        return f"{where}: strings differ at char {i} (agent {len(x)} chars, context {len(y)}): agent ...{x[max(0, i-40):i+80]!r} / context ...{y[max(0, i-40):i+80]!r}"
    return f"{where}: agent {_preview(x, 120)} / context {_preview(y, 120)}"


def _pi_anthropic(records):
    """Pi's context records (its own messages, as `transcriptd context` prints them) as pi-ai's
    Anthropic provider sends them (`convertMessages` of providers/anthropic.ts, 0.73.1, for the
    model that wrote them): blank texts and messages left empty are not sent; a call is a
    `tool_use`; consecutive tool results are one user message of `tool_result` blocks whose
    content is the texts joined by newlines (blocks when there is an image)."""
    def image(b):
        return {"type": "image", "source": {"type": "base64", "media_type": b.get("mimeType"), "data": b.get("data")}}

    def result_content(content):
        if not any(c.get("type") == "image" for c in content):
            return "\n".join(c.get("text", "") for c in content)
        blocks = [{"type": "text", "text": c.get("text", "")} if c.get("type") == "text" else image(c) for c in content]
        if not any(b["type"] == "text" for b in blocks):
            blocks.insert(0, {"type": "text", "text": "(see attached image)"})
        return blocks

    out = []
    i = 0
    while i < len(records):
        m = records[i]
        role = m.get("role")
        if role == "user":
            c = m.get("content")
            if isinstance(c, str):
                if c.strip():
                    out.append({"role": "user", "content": c})
            else:
                blocks = [{"type": "text", "text": b.get("text", "")} if b.get("type") == "text" else image(b) for b in c or []]
                blocks = [b for b in blocks if b["type"] != "text" or b["text"].strip()]
                if blocks:
                    out.append({"role": "user", "content": blocks})
        elif role == "assistant":
            blocks = []
            for b in m.get("content") or []:
                t = b.get("type")
                if t == "text" and b.get("text", "").strip():
                    blocks.append({"type": "text", "text": b["text"]})
                elif t == "thinking":
                    if b.get("redacted"):
                        blocks.append({"type": "redacted_thinking", "data": b.get("thinkingSignature")})
                    elif b.get("thinking", "").strip():
                        sig = (b.get("thinkingSignature") or "").strip()
                        blocks.append({"type": "thinking", "thinking": b["thinking"], "signature": b["thinkingSignature"]} if sig else {"type": "text", "text": b["thinking"]})
                elif t == "toolCall":
                    blocks.append({"type": "tool_use", "id": b.get("id"), "name": b.get("name"), "input": b.get("arguments") or {}})
            if blocks:
                out.append({"role": "assistant", "content": blocks})
        elif role == "toolResult":
            results = []
            while i < len(records) and records[i].get("role") == "toolResult":
                r = records[i]
                results.append({"type": "tool_result", "tool_use_id": r.get("toolCallId"), "content": result_content(r.get("content") or []), "is_error": r.get("isError")})
                i += 1
            out.append({"role": "user", "content": results})
            continue
        i += 1
    return out


def _drop_new_turn_pi(msgs, prompt):
    """Pi's request without the new turn: its last message, the user prompt."""
    if msgs and msgs[-1].get("role") == "user" and any(x.strip() == prompt for x in texts_of(msgs[-1].get("content"))):
        return msgs[:-1]
    return msgs


def _qwen_openai(records):
    """Qwen Code's context records (Gemini `Content`s, as `transcriptd context` prints them) as
    its OpenAI converter sends them (`processContent`, then `mergeConsecutiveAssistantMessages`
    of 0.24.4's converter; its `cleanOrphanedToolCalls` is not applied here: `context` models
    it, and this comparison must see what `context` printed)."""
    msgs = []
    for c in records:
        role = "assistant" if c.get("role") == "model" else "user"
        texts, reasoning, calls = [], [], []
        seen_calls, seen_results = set(), set()
        for p in c.get("parts") or []:
            if isinstance(p, str):
                texts.append(p)
                continue
            if not isinstance(p, dict):
                continue
            if p.get("thought") and "text" in p and role == "assistant" and p.get("text"):
                reasoning.append(p["text"])
            if p.get("text") and not p.get("thought"):
                texts.append(p["text"])
            fc = p.get("functionCall")
            if fc and role == "assistant":
                if fc.get("id") in seen_calls:
                    continue
                if fc.get("id"):
                    seen_calls.add(fc["id"])
                calls.append({"id": fc.get("id") or f"call_{len(calls)}", "type": "function",
                              "function": {"name": fc.get("name") or "", "arguments": json.dumps(fc.get("args") or {})}})
            fr = p.get("functionResponse")
            if fr and role == "user":
                if fr.get("id") in seen_results:
                    continue
                if fr.get("id"):
                    seen_results.add(fr["id"])
                r = fr.get("response")
                if r is None:
                    text = ""
                elif isinstance(r, str):
                    text = r
                elif isinstance(r, dict) and isinstance(r.get("output"), str):
                    text = r["output"]
                elif isinstance(r, dict) and isinstance(r.get("error"), str):
                    text = r["error"]
                else:
                    text = json.dumps(r, separators=(",", ":"), ensure_ascii=False)
                content = [{"type": "text", "text": text}] if text else []
                content += [{"type": "text", "text": x["text"]} for x in fr.get("parts") or [] if isinstance(x, dict) and x.get("text")]
                msgs.append({"role": "tool", "tool_call_id": fr.get("id") or "", "content": content or ""})
        if role == "assistant":
            if not texts and not calls and not reasoning:
                continue
            m = {"role": "assistant", "content": "".join(texts) or ("" if reasoning else None)}
            if calls:
                m["tool_calls"] = calls
            if reasoning:
                m["reasoning_content"] = "".join(reasoning)
            if msgs and msgs[-1]["role"] == "assistant":
                last = msgs[-1]
                last["content"] = "".join(x for x in (last.get("content"), m["content"]) if x) or None
                if calls:
                    last["tool_calls"] = (last.get("tool_calls") or []) + calls
                if reasoning:
                    last["reasoning_content"] = (last.get("reasoning_content") or "") + m["reasoning_content"]
                continue
            msgs.append(m)
        elif texts:
            msgs.append({"role": "user", "content": [{"type": "text", "text": t} for t in texts]})
    return msgs


def _qwen_norm(msgs, agent_side):
    """Chat Completions messages compared by what they say: the system message and, on the
    agent's side, the `<system-reminder>` parts it adds to user messages (its startup context,
    the date: never in the session file) left out; tool call arguments parsed."""
    out = []
    for m in msgs:
        r = m.get("role")
        if r == "system":
            continue
        if r == "user":
            texts = [t for t in texts_of(m.get("content")) if not (agent_side and t.lstrip().startswith("<system-reminder>"))]
            if texts:
                out.append({"role": "user", "content": [{"type": "text", "text": t} for t in texts]})
        elif r == "assistant":
            calls = []
            for tc in m.get("tool_calls") or []:
                f = tc.get("function") or {}
                try:
                    args = json.loads(f.get("arguments") or "{}")
                except ValueError:
                    args = f.get("arguments")
                calls.append({"type": "tool_use", "id": tc.get("id"), "name": f.get("name"), "input": args})
            content = [{"type": "text", "text": m["content"]}] if m.get("content") else []
            if m.get("reasoning_content"):
                content.insert(0, {"type": "thinking", "thinking": m["reasoning_content"]})
            out.append({"role": "assistant", "content": content + calls})
        elif r == "tool":
            out.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": m.get("tool_call_id"),
                                                     "content": texts_of(m.get("content"))}]})
    return out


def _gemini_contents(contents):
    """Gemini contents with consecutive turns of one role joined (the API joins them)."""
    out = []
    for c in contents:
        parts = list(c.get("parts") or [])
        if out and out[-1]["role"] == c.get("role"):
            out[-1]["parts"].extend(parts)
        else:
            out.append({"role": c.get("role"), "parts": parts})
    return [c for c in out if c["parts"]]


def _drop_new_turn_gemini(contents, prompt):
    """Gemini CLI's request without what it adds itself: the `<session_context>` text it puts
    first (the environment, made anew on every start; the file's own is not sent), and the new
    prompt at the end."""
    out = []
    for c in contents:
        parts = [p for p in c.get("parts") or [] if not (isinstance(p, dict) and isinstance(p.get("text"), str)
                                                         and p["text"].lstrip().startswith("<session_context>"))]
        out.append({"role": c.get("role"), "parts": parts})
    out = _gemini_contents(out)
    if out and out[-1]["role"] == "user":
        parts = out[-1]["parts"]
        if parts and isinstance(parts[-1], dict) and (parts[-1].get("text") or "").strip() == prompt:
            out[-1]["parts"] = parts[:-1]
    return [c for c in out if c["parts"]]


def _drop_new_turn_copilot(msgs, prompt):
    """Copilot's request without the new turn: the last text block of its last user message,
    "<current_datetime>...</current_datetime>\n\n" and the prompt (after a compaction it shares
    the message with the summary)."""
    msgs = [dict(m) for m in msgs]
    if msgs and msgs[-1]["role"] == "user":
        blocks = list(msgs[-1]["content"])
        if blocks and blocks[-1].get("type") == "text" and carries_prompt({"messages": [{"role": "user", "content": [blocks[-1]]}]}, prompt):
            blocks.pop()
            if blocks:
                msgs[-1]["content"] = blocks
            else:
                msgs.pop()
    return msgs


def compare(agent, request, records, prompt="continue"):
    body = request.get("body", request)
    if agent == "copilot":
        # Both sides as the Anthropic API reads them: consecutive messages of one role are one.
        a = _drop_new_turn_copilot(_claude_messages(body.get("messages") or []), prompt)
        t = _claude_messages([r for r in records if r.get("role") in ("user", "assistant")])
    elif agent == "qwen":
        a = _qwen_norm(body.get("messages") or [], True)
        # The new prompt: the last text of the last user message (Qwen Code joins it to a user
        # message the history ends with).
        if a and a[-1].get("role") == "user" and a[-1]["content"] and a[-1]["content"][-1].get("text", "").strip() == prompt:
            a[-1]["content"] = a[-1]["content"][:-1]
            if not a[-1]["content"]:
                a = a[:-1]
        t = _qwen_norm(_qwen_openai(records), False)
    elif agent == "gemini":
        a = _drop_new_turn_gemini(body.get("contents") or [], prompt)
        t = _gemini_contents(records)
    elif agent == "pi":
        a = _drop_new_turn_pi([{"role": m.get("role"), "content": [_strip_cache_control(b) for b in m["content"]] if isinstance(m.get("content"), list) else m.get("content")}
                               for m in body.get("messages") or []], prompt)
        t = _pi_anthropic(records)
    elif agent == "claude":
        a = _drop_new_turn_claude(_claude_messages(_drop_injections_claude(body.get("messages") or [])), prompt)
        t = _claude_messages(_drop_injections_claude([r for r in records if r.get("role") in ("user", "assistant")]))
    else:
        t, meta = _codex_context_items(records)
        a = [_codex_item(i) for i in body.get("input") or []]
        if a and a[0].get("type") == "message" and a[0].get("role") == "developer" and (not t or a[0] != t[0]):
            # The agent's instructions: rebuilt from the session's base_instructions (0.171.0
            # leaves sections out), or its own when session_meta has none.
            a = a[1:]
        # The new turn: trailing developer/user messages ending with the prompt, beyond the
        # longest common prefix with the context.
        common = 0
        while common < min(len(a), len(t)) and a[common] == t[common]:
            common += 1
        if a and a[-1].get("type") == "message" and a[-1].get("role") == "user" and \
                any(x.strip() == prompt for x in texts_of(a[-1].get("content"))):
            k = len(a) - 1
            while k > common and a[k - 1].get("type") == "message" and a[k - 1].get("role") in ("developer", "user"):
                k -= 1
            a = a[:k]
    diffs = _describe(a, t)
    return {"match": not diffs, "agent_items": len(a), "context_items": len(t), "differences": diffs,
            "open_calls": {"context": open_calls(agent, t), "agent": open_calls(agent, a),
                           "agent_answers": answers_for(agent, a, open_calls(agent, t))}}


def _calls(agent, items):
    calls, results = [], {}
    if agent == "gemini":
        for c in items:
            for p in c.get("parts") or []:
                if isinstance(p, dict) and isinstance(p.get("functionCall"), dict):
                    calls.append(p["functionCall"].get("id"))
                elif isinstance(p, dict) and isinstance(p.get("functionResponse"), dict):
                    results[p["functionResponse"].get("id")] = p["functionResponse"].get("response")
    elif agent in ("claude", "pi", "qwen", "copilot"):
        for m in items:
            for b in m.get("content") or []:
                if isinstance(b, dict) and b.get("type") == "tool_use":
                    calls.append(b.get("id"))
                elif isinstance(b, dict) and b.get("type") == "tool_result":
                    results[b.get("tool_use_id")] = b.get("content")
    else:
        for i in items:
            if not isinstance(i, dict):
                continue
            if i.get("type") in ("function_call", "custom_tool_call", "local_shell_call", "tool_search_call") and i.get("call_id"):
                calls.append(i["call_id"])
            elif str(i.get("type", "")).endswith("_output") and i.get("call_id"):
                results[i["call_id"]] = i.get("output")
    return calls, results


def open_calls(agent, items):
    """The calls without a result."""
    calls, results = _calls(agent, items)
    return [c for c in calls if c not in results]


def answers_for(agent, items, ids):
    """What the agent sends for each call the context leaves open: its result, or "dropped"
    when the call itself is not sent."""
    calls, results = _calls(agent, items)
    return {c: (results[c] if c in results else ("open" if c in calls else "dropped")) for c in ids}



def _texts_in(previews):
    return " ".join(previews)


def classify(diff):
    """A difference in words: one of the kinds TRUTH.md lists, else the detail itself."""
    a = _texts_in(diff.get("agent_sent", []))
    t = _texts_in(diff.get("context_printed", []))
    details = diff.get("detail") or []
    kinds = []
    if "[Tool call interrupted" in a and "[Tool call interrupted" not in t:
        kinds.append("agent answers an open call with its own interrupted result")
    if '"output": "aborted"' in a and '"output": "aborted"' not in t:
        kinds.append("agent answers an open call with output \"aborted\"")
    if "No response requested." in a and "No response requested." not in t:
        kinds.append("agent adds an assistant \"No response requested.\" after a trailing user message")
    if "<command-name>" in a and "<command-name>" not in t:
        kinds.append("agent sends system/local_command lines as user text")
    if ('"role": "system"' in a or "<system-reminder>\\nAttribution" in a) and diff["op"] != "equal" and \
            "<system-reminder>\\nAttribution" not in t:
        kinds.append("agent rebuilds a turn from its api-request-blob lines (system-reminders, an environment system message)")
    if "# Environment update" in a:
        kinds.append("agent inserts a system message \"# Environment update\" when the working directory changed")
    if '"text": "(no content)"' in a:
        kinds.append("agent sends a user \"(no content)\" text")
    if "chars truncated" in " ".join(details) or "chars truncated" in a:
        kinds.append("agent truncates a long function_call_output in the middle (\"…N chars truncated…\")")
    for d in details:
        if "'Agent' / context ...'Task'" in d:
            kinds.append("agent renames tool_use name Task to Agent")
        elif "strings differ" in d and "/ context" in d and re.search(r"agent \d+ chars, context \d+\)", d):
            m = re.search(r"agent (\d+) chars, context (\d+)\)", d)
            if int(m.group(1)) == int(m.group(2)) + 1 and "\\n'" in d.split(" / context")[0][-4:]:
                kinds.append("agent ends a user text with a newline that context strips")
            elif "truncated" not in d:
                kinds.append("text differs: " + d[:200])
        elif "agent has" in d and "entries, context" in d:
            m = re.search(r"agent has (\d+) entries, context (\d+)", d)
            ctx = d.split("/ context", 1)[-1]
            if '"type": "thinking"' in ctx and '"type": "thinking"' not in d.split("/ context", 1)[0]:
                kinds.append("agent drops thinking blocks")
            elif '"text": "\\n\\n"' in ctx:
                kinds.append("agent drops whitespace-only text blocks")
            elif '"type": "tool_use"' in ctx and '"type": "tool_use"' not in d.split("/ context", 1)[0]:
                kinds.append("agent drops an open tool_use block (keeps the rest of the message)")
            elif m and int(m.group(1)) > int(m.group(2)):
                kinds.append("agent sends more blocks in a message: " + d[:160])
            else:
                kinds.append("blocks differ: " + d[:200])
        elif "only the agent sends it" in d or "only context prints it" in d:
            kinds.append(d[:200])
        elif "type" in d:
            kinds.append(d[:200])
    if not kinds and diff["op"] == "delete":
        kinds.append("agent sends messages context does not print: " + a[:160])
    if not kinds and diff["op"] == "insert":
        kinds.append("context prints messages the agent does not send: " + t[:160])
    if not kinds:
        kinds.append(f"{diff['op']}: agent {a[:120]} / context {t[:120]}")
    return sorted(set(kinds))


def context_args(agent, model=None):
    """What `transcriptd context` is told of the resume that is not in the file: the model Codex
    resumes with."""
    return ["--model", model or CODEX_MODEL] if agent == "codex" else []


def cmd_compare(args):
    request = json.loads(Path(args.request).read_text())
    records = [json.loads(l) for l in Path(args.context).read_text().splitlines() if l.strip()]
    result = compare(args.agent, request, records)
    print(json.dumps(result, indent=1, ensure_ascii=False))
    return 0 if result["match"] else 1


def cmd_table(args):
    """Resumes each transcript with the agent, prints `transcriptd context -o json` for it, and
    compares: one JSON line per file with the verdict and the differences."""
    from concurrent.futures import ThreadPoolExecutor
    me = Path(__file__).resolve()

    def one(f):
        with tempfile.TemporaryDirectory(prefix="oracle-table-") as d:
            req = Path(d) / "req.json"
            cmd = [sys.executable, str(me), "resume", f, "--agent", args.agent, "--out", str(req), "--timeout", str(args.timeout)]
            if args.bin:
                cmd += ["--bin", args.bin]
            r = subprocess.run(cmd, capture_output=True, text=True)
            row = {"file": f, "agent": args.agent}
            if r.returncode != 0:
                row.update({"resumed": False, "not_resumable": r.returncode == 4,
                            "kinds": ["not resumed: " + (r.stderr.strip().splitlines() or ["?"])[0][:200]], "match": False, "why": (r.stderr.strip().splitlines() or ["?"])[0][:300],
                            "stderr": r.stderr[-1500:]})
                return row
            k = subprocess.run([args.transcriptd, "check", "-o", "json", f], capture_output=True, text=True)
            kinds = sorted({json.loads(l).get("kind") for l in k.stdout.splitlines() if l.strip().startswith("{")} - {None})
            row["check"] = kinds
            c = subprocess.run([args.transcriptd, "context", "-o", "json", *context_args(args.agent), f], capture_output=True, text=True)
            records = [json.loads(l) for l in c.stdout.splitlines() if l.strip()]
            res = compare(args.agent, json.loads(req.read_text()), records)
            row.update({"resumed": True, **res})
            row["kinds"] = sorted({k for d in res["differences"] for k in classify(d)})
            return row

    with ThreadPoolExecutor(args.jobs) as pool:
        for row in pool.map(one, args.files):
            print(json.dumps(row, ensure_ascii=False), flush=True)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("resume")
    r.add_argument("transcript")
    r.add_argument("--agent", choices=["claude", "codex", "pi", "qwen", "gemini", "copilot"], required=True)
    r.add_argument("--bin")
    r.add_argument("--out", required=True)
    r.add_argument("--timeout", type=float, default=90)
    r.add_argument("--keep", action="store_true")
    r.add_argument("--model", help="Claude Code: the model to resume with (default: the transcript's last; 'none': the agent's default)")
    r.add_argument("--enforce-api-rules", action="store_true",
                   help="answer a Messages request that breaks the API's rules as the API does (400/413 with its error text)")
    r.add_argument("--until-exit", action="store_true",
                   help="do not kill the agent once the request is captured: let it take the answer and end; its exit and output go into the out file as \"agent\"")
    w = sub.add_parser("record")
    w.add_argument("--agent", choices=["claude", "codex", "pi", "qwen", "gemini", "copilot"], required=True)
    w.add_argument("--bin")
    w.add_argument("--script", required=True)
    w.add_argument("--kill-at", choices=["mid-tool", "mid-stream", "compaction"])
    w.add_argument("--fail-compaction", action="store_true", help="answer a compaction's summary request with an API error (HTTP 500)")
    w.add_argument("--out", required=True)
    w.add_argument("--prompt", help="the prompt (default: the script's)")
    w.add_argument("--resume", help="a session to resume (its file is laid down as for `resume`) instead of a new one")
    w.add_argument("--timeout", type=float, default=90)
    w.add_argument("--keep", action="store_true")
    w.add_argument("--before", help="a shell command run in the agent's throwaway HOME before it starts")
    w.add_argument("--home", help="the agent's HOME: a directory the caller keeps (default: a throwaway one)")
    c = sub.add_parser("compare")
    c.add_argument("--agent", choices=["claude", "codex", "pi", "qwen", "gemini", "copilot"], required=True)
    c.add_argument("request")
    c.add_argument("context")
    t = sub.add_parser("table")
    t.add_argument("--agent", choices=["claude", "codex", "pi", "qwen", "gemini", "copilot"], required=True)
    t.add_argument("--bin")
    t.add_argument("--transcriptd", required=True)
    t.add_argument("--jobs", type=int, default=3)
    t.add_argument("--timeout", type=float, default=90)
    t.add_argument("files", nargs="+")
    args = ap.parse_args()
    sys.exit({"resume": cmd_resume, "record": cmd_record, "compare": cmd_compare, "table": cmd_table}[args.cmd](args))


if __name__ == "__main__":
    main()
