#!/usr/bin/env python3
"""Deterministic generator of conversation-per-line dataset JSONL (stdlib only).

One conversation per line, in the shape of --format:

  openai-dataset  {"messages": [...], "tools": [...]}             (chat fine-tuning)
  openai-batch    {"custom_id", "method", "url": "/v1/chat/completions", "body": {"model", "messages", "tools"}}
  anthropic-batch {"custom_id", "params": {"model", "max_tokens", "system", "messages", "tools"}}
  sharegpt        {"conversations": [{"from", "value"}], "tools": "<json>"}

A conversation is an optional system message, then 1-3 exchanges: a user prompt,
0-2 assistant messages with 1-3 (parallel) tool calls, each answered by its results,
then an assistant answer. Fine-tuning shapes end with the answer; batch requests are
prompts, so they end before the last answer. Every call names a declared tool and
passes its required arguments. Call ids are 9 letters and digits (the shape Mistral's
tokenizers want), so that a peer validator has nothing to say about clean lines.

--faults RATE injects one fault into that share of lines, drawn from --kinds (or every
kind the format has); --manifest FILE lists each as a JSON line {"line", "fault",
"message"} (1-based line, 0-based message index), so a checker can be held to it.

  fault                 what changes                                         finding
  missing_result        a call's result is left out (a later assistant turn)  unanswered_call
  orphan_result         a result for an unknown id after the results          orphan_result
  duplicate_result      a result written twice                                duplicate_result
  result_after_prompt   a new prompt comes between a call and its result      unanswered_call
  consecutive_assistant a second text answer after the answer (fine-tuning)   consecutive_assistant
  invalid_arguments     arguments that are not JSON                           invalid_arguments
  undeclared_tool       a call to a tool the line does not declare            undeclared_tool
  missing_argument      a required argument left out                          missing_required_argument
  unknown_role          a message with role "bot"                             unknown_role
  empty_answer          the final answer is ""                                empty_content
  no_final_answer       the final answer is left out (fine-tuning)            last_message_not_assistant
  misplaced_system      a system message after the first answer (warning)     misplaced_system
  malformed             the line is cut in the middle                         malformed_line
  duplicate_custom_id   the custom_id of an earlier line (batch)              duplicate_custom_id

Examples:
  gen_datasets.py --format openai-dataset --lines 1000 --faults 0.2 --manifest m.jsonl -o d.jsonl
  gen_datasets.py --format openai-batch --bytes 1GiB --seed 1 -o big.jsonl
"""

import argparse
import json
import random
import sys

FORMATS = ["openai-dataset", "openai-batch", "anthropic-batch", "sharegpt"]
KINDS = {
    "missing_result": "unanswered_call",
    "orphan_result": "orphan_result",
    "duplicate_result": "duplicate_result",
    "result_after_prompt": "unanswered_call",
    "consecutive_assistant": "consecutive_assistant",
    "invalid_arguments": "invalid_arguments",
    "undeclared_tool": "undeclared_tool",
    "missing_argument": "missing_required_argument",
    "unknown_role": "unknown_role",
    "empty_answer": "empty_content",
    "no_final_answer": "last_message_not_assistant",
    "misplaced_system": "misplaced_system",
    "malformed": "malformed_line",
    "duplicate_custom_id": "duplicate_custom_id",
}
FINE_TUNING_ONLY = {"consecutive_assistant", "no_final_answer"}
BATCH_ONLY = {"duplicate_custom_id"}
# ShareGPT calls have no ids: results answer the calls of the message before them.
NO_IDS = {"orphan_result", "duplicate_result"}

WORDS = (
    "the a of to in for on with and is are be this that it we you function module parser "
    "buffer line file session tool result value error config stream event index cache token "
    "request response handler schema field weather city forecast order invoice customer flight "
    "booking hotel price currency convert search query document summary report table column"
).split()
UNICODE = ["é", "ü", "→", "✓", "…", "日本語", "привет", "🚀", "°C", "½"]

TOOLS = [
    ("get_weather", "Current weather for a city", {"city": "string", "unit": "string"}, ["city"]),
    ("search_docs", "Full-text search over the documentation", {"query": "string", "limit": "integer"}, ["query"]),
    ("get_order", "Look up an order by id", {"order_id": "string"}, ["order_id"]),
    ("convert_currency", "Convert an amount", {"amount": "number", "from": "string", "to": "string"}, ["amount", "from", "to"]),
    ("run_sql", "Run a read-only SQL query", {"sql": "string"}, ["sql"]),
    ("book_flight", "Book a flight", {"origin": "string", "destination": "string", "date": "string"}, ["origin", "destination", "date"]),
]


def parse_size(s):
    units = {"k": 1 << 10, "K": 1 << 10, "KiB": 1 << 10, "M": 1 << 20, "MiB": 1 << 20, "G": 1 << 30, "GiB": 1 << 30, "kB": 10**3, "MB": 10**6, "GB": 10**9}
    n = s.rstrip("".join(sorted({c for u in units for c in u})))
    unit = s[len(n):]
    return int(n) * (units[unit] if unit else 1)


class Gen:
    def __init__(self, a):
        self.a = a
        self.r = random.Random(a.seed)
        self.pool = [self.sentence(self.r.randint(4, 40)) for _ in range(512)]
        self.outputs = [self.tool_output() for _ in range(256)]
        self.ids = set()
        self.custom_ids = []

    def sentence(self, n):
        r = self.r
        words = [r.choice(WORDS) for _ in range(n)]
        if r.random() < 0.2:
            words.insert(r.randrange(len(words) + 1), r.choice(UNICODE))
        return " ".join(words).capitalize() + "."

    def tool_output(self):
        r = self.r
        lines = []
        for _ in range(r.randint(1, 30)):
            k = r.random()
            if k < 0.3:
                lines.append('{"id": %d, "name": "%s", "ok": %s}' % (r.randint(1, 99999), r.choice(WORDS), r.choice(["true", "false"])))
            elif k < 0.5:
                lines.append("\t" + " | ".join(r.choice(WORDS) for _ in range(5)))
            else:
                lines.append(self_sentence(r))
        return "\n".join(lines)

    def text(self, lo=1, hi=4):
        return " ".join(self.r.choice(self.pool) for _ in range(self.r.randint(lo, hi)))

    def call_id(self):
        alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
        while True:
            i = "".join(self.r.choice(alphabet) for _ in range(9))
            if i not in self.ids:
                self.ids.add(i)
                return i

    def args_for(self, tool):
        r = self.r
        name, _, props, _ = tool
        out = {}
        for p, ty in props.items():
            if ty == "string":
                out[p] = r.choice(WORDS) + ("" if r.random() < 0.7 else " " + r.choice(UNICODE))
            elif ty == "integer":
                out[p] = r.randint(1, 50)
            else:
                out[p] = round(r.uniform(1, 1000), 2)
        return out

    # A conversation in a neutral shape: a list of dicts
    #   {"role": "system"|"user"|"assistant"|"tool", "text", "calls": [(id, tool, args_json)], "result_of": id}
    def conversation(self, fine_tuning):
        r = self.r
        tools = r.sample(TOOLS, r.randint(1, 4))
        msgs = []
        if r.random() < 0.7:
            msgs.append({"role": "system", "text": self.text(1, 2)})
        for _ in range(r.randint(1, 3)):
            msgs.append({"role": "user", "text": self.text(1, 3)})
            for _ in range(r.choice([0, 1, 1, 2])):
                calls = []
                for _ in range(r.choice([1, 1, 1, 2, 3])):
                    t = r.choice(tools)
                    calls.append([self.call_id(), t[0], json.dumps(self.args_for(t), ensure_ascii=False)])
                msgs.append({"role": "assistant", "text": self.text(0, 1) if r.random() < 0.3 else "", "calls": calls})
                for c in calls:
                    msgs.append({"role": "tool", "text": r.choice(self.outputs), "result_of": c[0], "name": c[1]})
            msgs.append({"role": "assistant", "text": self.text(1, 4)})
        if not fine_tuning:
            msgs.pop()
        return msgs, tools

    def inject(self, kind, msgs, tools, fmt):
        """Changes msgs for `kind`; returns the message index the finding names (or None)."""
        r = self.r
        results = [i for i, m in enumerate(msgs) if m["role"] == "tool"]
        calls = [i for i, m in enumerate(msgs) if m.get("calls")]
        answers = [i for i, m in enumerate(msgs) if m["role"] == "assistant" and not m.get("calls")]
        if kind == "missing_result":
            # A result whose call is followed by a later assistant turn.
            cands = [i for i in results if any(j > i for j in answers + calls)]
            if not cands:
                return False
            i = r.choice(cands)
            rid = msgs[i]["result_of"]
            call = next(k for k, m in enumerate(msgs) if any(c[0] == rid for c in m.get("calls", [])))
            if fmt == "sharegpt":
                # One observation answers all the calls before it: leave it all out.
                while call + 1 < len(msgs) and msgs[call + 1]["role"] == "tool":
                    del msgs[call + 1]
            else:
                del msgs[i]
            return call
        if kind == "orphan_result":
            if not results:
                return False
            i = results[-1] + 1
            msgs.insert(i, {"role": "tool", "text": "stray", "result_of": self.call_id(), "name": "x"})
            return i
        if kind == "duplicate_result":
            if not results:
                return False
            i = r.choice(results)
            j = i
            while j + 1 < len(msgs) and msgs[j + 1]["role"] == "tool":
                j += 1
            msgs.insert(j + 1, dict(msgs[i]))
            return j + 1
        if kind == "result_after_prompt":
            # A prompt between a call message and its results (all of them).
            cands = [i for i in calls if i + 1 < len(msgs)]
            if not cands:
                return False
            i = r.choice(cands)
            msgs.insert(i + 1, {"role": "user", "text": "wait, " + self.text(1, 1)})
            return i
        if kind == "consecutive_assistant":
            msgs.append({"role": "assistant", "text": self.text(1, 2)})
            return len(msgs) - 1
        if kind in ("invalid_arguments", "undeclared_tool", "missing_argument"):
            if not calls:
                return False
            i = r.choice(calls)
            c = r.choice(msgs[i]["calls"])
            if kind == "invalid_arguments":
                c[2] = c[2][: max(1, len(c[2]) // 2)]
            elif kind == "undeclared_tool":
                declared = {t[0] for t in tools}
                c[1] = r.choice([t[0] for t in TOOLS if t[0] not in declared] or ["not_declared"])
                if c[1] == "not_declared" or c[1] in declared:
                    c[1] = "undeclared_tool_x"
            else:
                tool = next(t for t in TOOLS if t[0] == c[1])
                args = json.loads(c[2])
                del args[r.choice(tool[3])]
                c[2] = json.dumps(args, ensure_ascii=False)
            return i
        if kind == "unknown_role":
            i = r.randrange(len(msgs) + 1)
            while i > 0 and i < len(msgs) and msgs[i]["role"] == "tool":
                i -= 1
            msgs.insert(i, {"role": "bot", "text": self.text(1, 1)})
            return i
        if kind == "empty_answer":
            if not answers:
                return False
            msgs[answers[-1]]["text"] = ""
            return answers[-1]
        if kind == "no_final_answer":
            msgs.pop()
            # The new last message is a result or a prompt.
            return len(msgs) - 1
        if kind == "misplaced_system":
            first = next((i for i in answers + calls), None)
            if first is None:
                return False
            at = first + 1
            while at < len(msgs) and msgs[at]["role"] == "tool":
                at += 1
            if at >= len(msgs):
                # Not last: that would be another fault (a fine-tuning example must end with
                # an answer).
                return False
            msgs.insert(at, {"role": "system", "text": "Be brief."})
            return at
        return None

    def line(self, n, fmt, kind):
        r = self.r
        fine = fmt in ("openai-dataset", "sharegpt")
        msgs, tools = self.conversation(fine)
        at = None
        if kind not in (None, "malformed", "duplicate_custom_id"):
            at = self.inject(kind, msgs, tools, fmt)
            if at is False:
                return None
        text = render(fmt, msgs, tools, self)
        if kind == "duplicate_custom_id":
            if not self.custom_ids:
                return None
            v = json.loads(text)
            v["custom_id"] = r.choice(self.custom_ids)
            text = json.dumps(v, ensure_ascii=False, separators=(",", ":"))
        elif fmt in ("openai-batch", "anthropic-batch") and kind != "malformed":
            self.custom_ids.append(json.loads(text)["custom_id"])
        if kind == "malformed":
            text = text[: r.randint(1, len(text) - 1)]
        return text, at


def self_sentence(r):
    return " ".join(r.choice(WORDS) for _ in range(r.randint(3, 14)))


def render(fmt, msgs, tools, g):
    if fmt == "sharegpt":
        conv = []
        for m in msgs:
            if m.get("calls"):
                cs = [{"name": c[1], "arguments": json.loads(c[2]) if is_json(c[2]) else c[2]} for c in m["calls"]]
                conv.append({"from": "function_call", "value": json.dumps(cs[0] if len(cs) == 1 else cs, ensure_ascii=False)})
            elif m["role"] == "tool":
                # One observation answers every call of the function_call before it.
                if conv and conv[-1]["from"] == "observation" and not m.get("dup"):
                    conv[-1]["value"] += "\n" + m["text"]
                    continue
                conv.append({"from": "observation", "value": m["text"]})
            else:
                conv.append({"from": {"system": "system", "user": "human", "assistant": "gpt"}.get(m["role"], m["role"]), "value": m["text"]})
        decl = [{"name": t[0], "description": t[1], "parameters": schema(t)} for t in tools]
        return dumps({"conversations": conv, "tools": json.dumps(decl, ensure_ascii=False)})
    if fmt == "anthropic-batch":
        system = None
        out = []
        for m in msgs:
            if m["role"] == "system" and system is None and not out:
                system = m["text"]
            elif m["role"] == "system":
                out.append({"role": "system", "content": m["text"]})
            elif m.get("calls"):
                blocks = ([{"type": "text", "text": m["text"]}] if m["text"] else []) + [
                    {"type": "tool_use", "id": "toolu_" + c[0], "name": c[1], "input": json.loads(c[2]) if is_json(c[2]) else c[2]} for c in m["calls"]
                ]
                out.append({"role": "assistant", "content": blocks})
            elif m["role"] == "tool":
                block = {"type": "tool_result", "tool_use_id": "toolu_" + m["result_of"], "content": m["text"]}
                if out and out[-1]["role"] == "user" and isinstance(out[-1]["content"], list) and out[-1].get("results"):
                    out[-1]["content"].append(block)
                else:
                    out.append({"role": "user", "content": [block], "results": True})
            else:
                out.append({"role": m["role"], "content": m["text"]})
        for m in out:
            m.pop("results", None)
        params = {"model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": out,
                  "tools": [{"name": t[0], "description": t[1], "input_schema": schema(t)} for t in tools]}
        if system is not None:
            params = {"model": params["model"], "max_tokens": 1024, "system": system, "messages": out, "tools": params["tools"]}
        return dumps({"custom_id": "req-%d-%d" % (g.r.randrange(1 << 30), len(g.custom_ids)), "params": params})
    out = []
    for m in msgs:
        if m.get("calls"):
            o = {"role": "assistant", "content": m["text"] or None,
                 "tool_calls": [{"id": c[0], "type": "function", "function": {"name": c[1], "arguments": c[2]}} for c in m["calls"]]}
        elif m["role"] == "tool":
            o = {"role": "tool", "tool_call_id": m["result_of"], "content": m["text"]}
        else:
            o = {"role": m["role"], "content": m["text"]}
        out.append(o)
    tools_decl = [{"type": "function", "function": {"name": t[0], "description": t[1], "parameters": schema(t)}} for t in tools]
    if fmt == "openai-dataset":
        return dumps({"messages": out, "tools": tools_decl})
    return dumps({"custom_id": "req-%d-%d" % (g.r.randrange(1 << 30), len(g.custom_ids)), "method": "POST", "url": "/v1/chat/completions",
                  "body": {"model": "gpt-4o-mini", "messages": out, "tools": tools_decl}})


def schema(t):
    return {"type": "object", "properties": {p: {"type": ty} for p, ty in t[2].items()}, "required": list(t[3])}


def is_json(s):
    try:
        json.loads(s)
        return True
    except ValueError:
        return False


def dumps(v):
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--format", choices=FORMATS, default="openai-dataset")
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--lines", type=int, help="lines to write (default 1000)")
    size.add_argument("--bytes", type=parse_size, help="approximate size, e.g. 100M, 1GiB")
    ap.add_argument("--seed", default="0")
    ap.add_argument("--faults", type=float, default=0.0, help="share of lines with one injected fault")
    ap.add_argument("--kinds", default="", help="comma-separated faults to draw from (default: all the format has)")
    ap.add_argument("--manifest", help="write injected faults as JSON lines")
    ap.add_argument("-o", "--output", help="output file (default stdout)")
    a = ap.parse_args()
    g = Gen(a)
    kinds = [k for k in (a.kinds.split(",") if a.kinds else KINDS) if k]
    for k in kinds:
        if k not in KINDS:
            ap.error("unknown fault " + k)
    fine = a.format in ("openai-dataset", "sharegpt")
    batch = a.format in ("openai-batch", "anthropic-batch")
    kinds = [k for k in kinds if (fine or k not in FINE_TUNING_ONLY) and (batch or k not in BATCH_ONLY) and (a.format != "sharegpt" or k not in NO_IDS)]
    if a.format == "anthropic-batch":
        # The Messages API has no system role in messages: that is unknown_role there.
        kinds = [k for k in kinds if k != "misplaced_system"]
    out = open(a.output, "w", encoding="utf-8", newline="\n") if a.output else sys.stdout
    man = open(a.manifest, "w", encoding="utf-8") if a.manifest else None
    lines = a.lines if a.lines is not None else (None if a.bytes else 1000)
    written = n = 0
    while (lines is not None and n < lines) or (lines is None and written < a.bytes):
        kind = g.r.choice(kinds) if kinds and g.r.random() < a.faults else None
        got = g.line(n + 1, a.format, kind)
        if got is None:
            continue
        text, at = got
        n += 1
        out.write(text + "\n")
        written += len(text.encode("utf-8")) + 1
        if kind and man:
            rec = {"line": n, "fault": kind, "finding": KINDS[kind]}
            # Message indices are those of the rendered conversation only where messages map
            # one to one (the OpenAI shapes; Anthropic merges results, ShareGPT observations).
            if at is not None and a.format.startswith("openai"):
                rec["message"] = at
            man.write(json.dumps(rec) + "\n")
    if man:
        man.close()
    if a.output:
        out.close()


if __name__ == "__main__":
    main()
