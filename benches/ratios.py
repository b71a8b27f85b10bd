#!/usr/bin/env python3
"""Interleaved whole-process timings on a noisy machine.

Runs each command once per round, in order, for N rounds (`--prepare` before each run), and
reports each command's wall time as a ratio to each earlier command's time *in the same round*:
on a shared VM whose speed drifts by tens of percent over seconds, a ratio between runs taken
side by side is steadier than one between means taken minutes apart. Prints each round, then
the median, min and max of each ratio.

    benches/ratios.py --rounds 10 --prepare 'rm -rf /dev/shm/out' -- \
        'wc -l f.jsonl' 'transcriptd check --no-summary --jobs 1 f.jsonl' \
        'transcriptd repair --no-summary --jobs 1 --out /dev/shm/out f.jsonl'
"""
import argparse
import resource
import shlex
import statistics
import subprocess
import sys
import time


def run(cmd: str) -> tuple[float, float, float]:
    """Wall, user and system seconds of one run (exit status ignored: check exits 1 on findings)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(shlex.split(cmd), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--prepare", default="", help="shell command run before every timed run")
    ap.add_argument("commands", nargs="+", help="the first is the baseline (wc -l)")
    a = ap.parse_args()
    walls: list[list[float]] = [[] for _ in a.commands]
    for r in range(a.rounds):
        row = []
        for cmd in a.commands:
            if a.prepare:
                subprocess.run(a.prepare, shell=True, check=True)
            row.append(run(cmd))
        base = row[0][0]
        for k, (wall, _, _) in enumerate(row):
            walls[k].append(wall)
        cells = "  ".join(f"{w:.2f}s (u {u:.2f} s {s:.2f}) {w / base:.2f}x" for w, u, s in row)
        print(f"round {r + 1}: {cells}", flush=True)
    print(f"median / min / max over {a.rounds} rounds of one command's time over another's in the same round:")
    for j in range(1, len(a.commands)):
        for i in range(j):
            rs = [x / y for x, y in zip(walls[j], walls[i])]
            print(f"  {statistics.median(rs):6.2f}x  {min(rs):6.2f}x  {max(rs):6.2f}x  [{j + 1}] / [{i + 1}]")
    for k, cmd in enumerate(a.commands):
        print(f"  [{k + 1}] {cmd}: median {statistics.median(walls[k]):.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
