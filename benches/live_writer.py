#!/usr/bin/env python3
"""The live-writer case of issue 14 at full size: an in-place repair of a 100 MB transcript
while a writer appends a line every 5 ms through an O_APPEND descriptor it keeps open.

For each variant (--force with a backup, --force --no-backup, and the idle guard: no --force,
the file quiet for an hour, a writer that resumes 50 ms into the repair, opening and closing the
file for each line as an agent does) it reports how many of the lines the writer wrote are in
the repaired file, how many only in the kept old file, and how many are lost, with the repair's
own report. Usage: benches/live_writer.py [--bytes 100M] [--bin target/release/transcriptd]
[--work DIR]. Needs the release binary and python3.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def writer_line(i):
    return ('{"type":"progress","writer":%d,"data":{"pad":"%s"}}\n' % (i, "w" * 80)).encode()


def writer_numbers(path):
    out = []
    if not os.path.exists(path):
        return out
    with open(path, "rb") as f:
        for line in f:
            if b'"writer":' in line:
                out.append(json.loads(line)["writer"])
    return out


def hold_and_write(path, stop, written, interval):
    """Keeps one O_APPEND descriptor, appends a line every `interval` s until `stop` is set."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    i = 0
    while not stop.is_set():
        os.write(fd, writer_line(i))
        i += 1
        written[0] = i
        time.sleep(interval)
    os.close(fd)


def open_each_time(path, stop, written, interval, delay):
    """Resumes after `delay` s: opens, appends one line, closes, every `interval` s."""
    time.sleep(delay)
    i = 0
    while not stop.is_set():
        with open(path, "ab") as f:
            f.write(writer_line(i))
        i += 1
        written[0] = i
        time.sleep(interval)


def run(variant, template, work, binary, after):
    d = os.path.join(work, variant)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    path = os.path.join(d, "live.jsonl")
    shutil.copyfile(template, path)
    stop, written = threading.Event(), [0]
    if variant == "guard":
        old = time.time() - 3600
        os.utime(path, (old, old))
        args = [binary, "repair", "--in-place", "--min-idle", "10s", "-o", "json", path]
        t = threading.Thread(target=open_each_time, args=(path, stop, written, 0.005, 0.05))
        t.start()
    else:
        args = [binary, "repair", "--in-place", "--force", "-o", "json", path]
        if variant == "no-backup":
            args.append("--no-backup")
        t = threading.Thread(target=hold_and_write, args=(path, stop, written, 0.005))
        t.start()
        time.sleep(0.1)
    started = time.monotonic()
    # The writer stops `after` s after the repair started; a repair that follows the old file
    # waits for it to close.
    threading.Timer(after, stop.set).start()
    r = subprocess.run(args, capture_output=True, text=True)
    took = time.monotonic() - started
    stop.set()
    t.join()
    reports = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
    report = reports[0] if reports else {}
    in_new = writer_numbers(path)
    backups = [os.path.join(d, n) for n in os.listdir(d) if ".orig" in n]
    in_old = set()
    for b in backups:
        in_old.update(writer_numbers(b))
    n = written[0]
    missing_new = [i for i in range(n) if i not in set(in_new)]
    lost = [i for i in missing_new if i not in in_old]
    in_order = in_new == sorted(in_new) and len(in_new) == len(set(in_new))
    print(
        f"{variant:10} exit {r.returncode} status {report.get('status')!s:9} in {took:5.2f}s: "
        f"writer wrote {n} lines; in the repaired file {len(in_new)} (in order, once: {in_order}); "
        f"only in the old file {len(missing_new) - len(lost)}; lost {len(lost)}; "
        f"carried {report.get('carried', {})}; backup kept: {bool(backups)}"
    )
    for note in report.get("notes", []):
        print(f"{'':10} note: {note}")
    if report.get("message"):
        print(f"{'':10} message: {report['message']}")
    return len(lost)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bytes", default="100M")
    ap.add_argument("--bin", default=os.path.join(os.path.dirname(HERE), "target/release/transcriptd"))
    ap.add_argument("--work", default=None)
    ap.add_argument("--after", type=float, default=2.0, help="seconds the writer goes on after the repair starts")
    a = ap.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="transcriptd-live-")
    os.makedirs(work, exist_ok=True)
    template = os.path.join(work, f"template-{a.bytes}.jsonl")
    if not os.path.exists(template):
        subprocess.run(
            [sys.executable, os.path.join(HERE, "..", "tests", "gen", "gen_transcripts.py"), "--bytes", a.bytes, "--seed", "14", "--faults", "0.01", "--split-assistant", "-o", template],
            check=True,
        )
    print(f"== {os.path.getsize(template)} bytes, writer every 5 ms; {a.bin}")
    lost = sum(run(v, template, work, a.bin, a.after) for v in ["force", "no-backup", "guard"])
    sys.exit(1 if lost else 0)


if __name__ == "__main__":
    main()
