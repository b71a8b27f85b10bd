#!/usr/bin/env python3
"""Generated breaks of real Claude Code sessions, resumed by the real agent: does `context` print
what the agent sends?

  agent_mutations.py [--agent claude|codex] --bin AGENT --transcriptd BIN [--per-file N] [--seed S] [--jobs J] --out DIR FILE...

Each FILE (a session of the agent whose resume `context` already matches) gets N mutations, each
one break chosen by the seed. Claude Code sessions:

  rewind      a new prompt appended under an earlier message line (the user rewound there)
  dangle      a message line's parentUuid set to a uuid no line has
  unreadable  a line cut short (no longer JSON), not the last
  drop        a line deleted (its child now names a missing parent)
  dupid       a later tool_use given the id of an earlier one, and its result too
  pause       a missing parent after the line before it was moved 10 s back in time

Codex rollouts (`--agent codex`):

  unreadable   a line cut short (no longer JSON), not the first or the last
  drop_output  a call's output deleted (the call is left open in the middle of the history)
  drop_call    a call deleted (its output is left without it)
  dupid        a later call given the call_id of an earlier one, and its output too
  drop         a message item deleted

Every mutation gets its own session id (a UUID: the agent resumes only those; Codex's is
`session_meta.payload.id`). It is resumed with
`agent_oracle.py resume` (network namespace, local fake provider) and compared with
`transcriptd context` by `agent_oracle.py compare` (the equivalence written down there).
Writes DIR/results.jsonl (one row per mutation: base, shape, line, match, differences) and
prints a table per shape. Exit 0 whatever the agreement: the figures are the output.

Python 3.11, standard library only.
"""

import argparse
import concurrent.futures
import json
import random
import subprocess
import sys
import uuid
from collections import Counter, defaultdict
from pathlib import Path

ORACLE = Path(__file__).with_name("agent_oracle.py")
sys.path.insert(0, str(ORACLE.parent))
from agent_oracle import context_args  # noqa: E402  (what context is told of the resume)
SHAPES = ["rewind", "dangle", "unreadable", "drop", "dupid", "pause"]
CODEX_SHAPES = ["unreadable", "drop_output", "drop_call", "dupid", "drop"]
CALLS = ("function_call", "custom_tool_call", "local_shell_call")
OUTPUTS = ("function_call_output", "custom_tool_call_output")


def mutate_codex(lines, shape, rng):
    """One break of `shape` in a Codex rollout's `lines`; as `mutate`."""
    recs = []
    for l in lines:
        try:
            recs.append(json.loads(l))
        except ValueError:
            recs.append(None)

    def item(i):
        r = recs[i]
        if isinstance(r, dict) and r.get("type") == "response_item" and isinstance(r.get("payload"), dict):
            return r["payload"]
        return None

    def of(types):
        return [i for i in range(len(recs)) if item(i) is not None and item(i).get("type") in types]

    out = list(lines)
    if shape == "unreadable":
        if len(lines) < 3:
            return None
        at = rng.choice(range(1, len(lines) - 1))
        out[at] = lines[at][: max(1, len(lines[at]) // 2)]
        return out, at + 1
    if shape in ("drop_output", "drop_call", "drop"):
        pick = of(OUTPUTS) if shape == "drop_output" else of(CALLS) if shape == "drop_call" else of(("message",))
        if shape == "drop":
            pick = pick[1:]
        if not pick:
            return None
        at = rng.choice(pick)
        del out[at]
        return out, at + 1
    if shape == "dupid":
        calls = [i for i in of(CALLS) if item(i).get("call_id")]
        if len(calls) < 2:
            return None
        i1, i2 = sorted(rng.sample(calls, 2))
        old, new = item(i2)["call_id"], item(i1)["call_id"]
        for j in range(i2, len(out)):
            it = item(j)
            if it is not None and it.get("call_id") == old and (j == i2 or it.get("type") in OUTPUTS):
                r = json.loads(out[j])
                r["payload"]["call_id"] = new
                out[j] = json.dumps(r)
        return out, i2 + 1
    raise ValueError(shape)


def mutate(lines, shape, rng):
    """One break of `shape` in `lines` (a list of raw JSON strings); the mutated lines and the
    line number (1-based) it is at, or None when the file has no place for it."""
    recs = []
    for l in lines:
        try:
            recs.append(json.loads(l))
        except ValueError:
            recs.append(None)
    msgs = [i for i, r in enumerate(recs) if isinstance(r, dict) and r.get("type") in ("user", "assistant") and r.get("uuid") and not r.get("isSidechain")]
    if len(msgs) < 3:
        return None
    out = list(lines)
    if shape == "rewind":
        at = rng.choice(msgs[:-1])
        r = dict(recs[msgs[-1]]) if recs[msgs[-1]]["type"] == "user" else dict(recs[msgs[0]])
        r.update({"type": "user", "uuid": str(uuid.UUID(int=rng.getrandbits(128), version=4)), "parentUuid": recs[at]["uuid"],
                  "timestamp": "2099-01-01T00:00:00.000Z", "message": {"role": "user", "content": "a rewound prompt"}})
        for k in ("toolUseResult", "sourceToolAssistantUUID", "isMeta", "isCompactSummary"):
            r.pop(k, None)
        out.append(json.dumps(r))
        return out, len(out)
    if shape in ("dangle", "pause"):
        at = rng.choice(msgs[1:])
        r = dict(recs[at])
        r["parentUuid"] = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        out[at] = json.dumps(r)
        if shape == "pause":
            # Everything before the line is 10 s older than it: nothing to bridge to.
            ts = r.get("timestamp")
            if not ts:
                return None
            for j in range(at):
                if isinstance(recs[j], dict) and recs[j].get("timestamp"):
                    q = dict(recs[j]) if j != at else r
                    q["timestamp"] = "2000-01-01T00:00:00.000Z"
                    out[j] = json.dumps(q)
        return out, at + 1
    if shape == "unreadable":
        at = rng.choice(range(len(lines) - 1))
        out[at] = lines[at][: max(1, len(lines[at]) // 2)]
        return out, at + 1
    if shape == "drop":
        at = rng.choice(msgs[1:-1]) if len(msgs) > 2 else None
        if at is None:
            return None
        del out[at]
        return out, at + 1
    if shape == "dupid":
        calls = [(i, b) for i in msgs if recs[i]["type"] == "assistant"
                 for b in (recs[i]["message"].get("content") or []) if isinstance(b, dict) and b.get("type") == "tool_use"]
        if len(calls) < 2:
            return None
        (i1, b1), (i2, b2) = sorted(rng.sample(calls, 2), key=lambda c: c[0])
        if i1 == i2:
            return None
        old, new = b2["id"], b1["id"]
        text = lines[i2].replace(json.dumps(old)[1:-1], json.dumps(new)[1:-1])
        out[i2] = text
        for j in range(len(out)):
            if j != i2 and j > i2 and old in out[j] and '"tool_result"' in out[j]:
                out[j] = out[j].replace(json.dumps(old)[1:-1], json.dumps(new)[1:-1])
        return out, i2 + 1
    raise ValueError(shape)


def with_session(lines, sid):
    out = []
    for l in lines:
        try:
            r = json.loads(l)
        except ValueError:
            out.append(l)
            continue
        if isinstance(r, dict) and "sessionId" in r:
            r["sessionId"] = sid
            l = json.dumps(r)
        elif isinstance(r, dict) and r.get("type") == "session_meta" and isinstance(r.get("payload"), dict):
            r["payload"]["id"] = sid
            l = json.dumps(r)
        out.append(l)
    return out


def run_one(job, args):
    path, base, shape, line = job
    req = path.with_suffix(".req.json")
    r = subprocess.run([sys.executable, str(ORACLE), "resume", str(path), "--agent", args.agent, "--bin", args.bin, "--out", str(req)],
                       capture_output=True, text=True, timeout=120)
    row = {"base": base, "shape": shape, "line": line, "file": str(path)}
    if r.returncode != 0:
        row.update({"resumed": False, "match": None, "why": r.stderr.strip().splitlines()[-1:] })
        return row
    ctx = subprocess.run([args.transcriptd, "context", "--no-summary", *context_args(args.agent), str(path)], capture_output=True)
    cpath = path.with_suffix(".context.jsonl")
    cpath.write_bytes(ctx.stdout)
    c = subprocess.run([sys.executable, str(ORACLE), "compare", "--agent", args.agent, str(req), str(cpath)], capture_output=True, text=True)
    result = json.loads(c.stdout)
    row.update({"resumed": True, "match": result["match"], "differences": [str(d)[:300] for d in result["differences"]][:3]})
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--agent", choices=["claude", "codex"], default="claude")
    ap.add_argument("--bin", required=True)
    ap.add_argument("--transcriptd", required=True)
    ap.add_argument("--per-file", type=int, default=20)
    ap.add_argument("--seed", type=int, default=27)
    ap.add_argument("--jobs", type=int, default=3)
    ap.add_argument("--out", required=True)
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    shapes, mutate_one = (CODEX_SHAPES, mutate_codex) if args.agent == "codex" else (SHAPES, mutate)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    jobs = []
    for f in args.files:
        lines = [l for l in Path(f).read_text().split("\n") if l.strip()]
        made = 0
        tries = 0
        while made < args.per_file and tries < args.per_file * 5:
            tries += 1
            shape = rng.choice(shapes)
            m = mutate_one(lines, shape, rng)
            if m is None:
                continue
            mutated, line = m
            sid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
            p = out / f"{len(jobs):05d}-{shape}.jsonl"
            p.write_text("\n".join(with_session(mutated, sid)) + "\n")
            jobs.append((p, f, shape, line))
            made += 1
    rows = []
    # Each row is written as it comes (in the mutations' order), so that a run cut short keeps
    # what it measured.
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as ex, open(out / "results.jsonl", "w") as w:
        for row in ex.map(lambda j: run_one(j, args), jobs):
            rows.append(row)
            w.write(json.dumps(row) + "\n")
            w.flush()
    by = defaultdict(Counter)
    for row in rows:
        by[row["shape"]]["mutations"] += 1
        by[row["shape"]]["resumed" if row["resumed"] else "not resumed"] += 1
        if row["resumed"]:
            by[row["shape"]]["agree" if row["match"] else "differ"] += 1
    print("| shape | mutations | resumed | agree with context | differ |")
    print("|---|---|---|---|---|")
    total = Counter()
    for s in shapes:
        c = by[s]
        total.update(c)
        print(f"| {s} | {c['mutations']} | {c['resumed']} | {c['agree']} | {c['differ']} |")
    print(f"| all | {total['mutations']} | {total['resumed']} | {total['agree']} | {total['differ']} |")


if __name__ == "__main__":
    main()
