#!/usr/bin/env python3
"""Which files of tests/data/agents/agreement.json change `check`'s exit status between two builds,
with what the agents did on resume of each (resumed, and whether what they sent equals `context`).

    python3 benches/check_exit_changes.py OLD_TRANSCRIPTD NEW_TRANSCRIPTD

Run from the repository's root. Prints the count, then one line per file that changed.
"""
import json
import subprocess
import sys

old, new = sys.argv[1], sys.argv[2]
d = json.load(open("tests/data/agents/agreement.json"))
files = sorted({r["file"] for rows in d["runs"].values() for r in rows})


def code(binary, f):
    return subprocess.run([binary, "check", "-q", f]).returncode


changed = []
for f in files:
    a, b = code(old, f), code(new, f)
    if a != b:
        runs = {run: (r["resumed"], r["match"]) for run, rows in d["runs"].items() for r in rows if r["file"] == f}
        changed.append((f, a, b, runs))
print(f"{len(files)} files; {len(changed)} change exit")
for f, a, b, runs in changed:
    print(f"{f}: exit {a} -> {b}; (resumed, sent what context prints): {runs}")
