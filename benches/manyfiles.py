#!/usr/bin/env python3
"""Issue 29: the daemon over N small transcripts in one directory.

  manyfiles.py cold N      # cold start: time until every file's finding is out, and `watching`
  manyfiles.py warm N      # then a restart with the checkpoint of N files present
  manyfiles.py idle N SECS # then CPU used over SECS seconds of idle steady state

Each file holds one tool result nothing called (one `orphan_result`), mtime an hour ago.
TRANSCRIPTD_BIN names the binary (default target/release/transcriptd). Prints one JSON line.
"""
import json, os, shutil, signal, subprocess, sys, tempfile, time

BIN = os.environ.get("TRANSCRIPTD_BIN", "target/release/transcriptd")


def make(root, n):
    w = os.path.join(root, "watch")
    os.makedirs(w, exist_ok=True)
    old = time.time() - 3600
    for i in range(n):
        p = os.path.join(w, f"s{i:06d}.jsonl")
        with open(p, "w") as f:
            f.write('{"role":"tool","tool_call_id":"c%d","content":"x"}\n' % i)
        os.utime(p, (old, old))
    return w


def cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(root, w, want, label):
    out = open(os.path.join(root, f"out-{label}.jsonl"), "wb")
    err = open(os.path.join(root, f"err-{label}.log"), "wb")
    t0 = time.monotonic()
    p = subprocess.Popen(["/usr/bin/time", "-v", BIN, "run", "--watch", w, "--state-dir", os.path.join(root, "state"), "--log-format", "json"],
                         stdout=out, stderr=err, env=dict(os.environ, TRANSCRIPTD_LOG="info"))
    found_at = watching_at = None
    outp, errp = out.name, err.name
    while True:
        time.sleep(0.1)
        now = time.monotonic() - t0
        if found_at is None:
            with open(outp, "rb") as f:
                n = f.read().count(b'"orphan_result"')
            if n >= want:
                found_at = now
        if watching_at is None:
            with open(errp, "rb") as f:
                if b'"watching"' in f.read():
                    watching_at = now
        if found_at is not None and watching_at is not None:
            break
        if p.poll() is not None or now > 3600:
            break
    return p, found_at, watching_at


def child_pid(p):
    # /usr/bin/time's child
    with open(f"/proc/{p.pid}/task/{p.pid}/children") as f:
        return int(f.read().split()[0])


def stop(p, root, label):
    os.kill(child_pid(p), signal.SIGTERM)
    p.wait()
    with open(os.path.join(root, f"err-{label}.log")) as f:
        tv = [l.strip() for l in f if l.startswith("\t")]
    pick = lambda k: next((l.split(": ", 1)[1] for l in tv if l.startswith(k)), None)
    return {"user_s": pick("User time"), "sys_s": pick("System time"), "max_rss_kib": pick("Maximum resident"), "wall": pick("Elapsed")}


def main():
    mode, n = sys.argv[1], int(sys.argv[2])
    root = tempfile.mkdtemp(prefix="manyfiles-", dir=os.environ.get("TMPDIR", "/tmp"))
    try:
        w = make(root, n)
        res = {"n": n, "load": os.getloadavg()}
        p, found, watching = run(root, w, n, "cold")
        res["cold"] = {"findings_s": found, "watching_s": watching}
        if mode == "cold":
            res["cold"].update(stop(p, root, "cold"))
        else:
            res["cold"].update(stop(p, root, "cold"))
            cp = os.path.getsize(os.path.join(root, "state", "checkpoints.json")) if os.path.exists(os.path.join(root, "state", "checkpoints.json")) else None
            res["checkpoint_bytes"] = cp
            p, _, watching = run(root, w, 0, "warm")
            res["warm"] = {"watching_s": watching}
            if mode == "idle":
                secs = float(sys.argv[3])
                pid = child_pid(p)
                c0 = cpu(pid)
                time.sleep(secs)
                res["idle"] = {"secs": secs, "cpu_s": round(cpu(pid) - c0, 3)}
            res["warm"].update(stop(p, root, "warm"))
            with open(os.path.join(root, "out-warm.jsonl"), "rb") as f:
                res["warm"]["findings_again"] = f.read().count(b'"orphan_result"')
        print(json.dumps(res))
    finally:
        if not os.environ.get("KEEP"):
            shutil.rmtree(root, ignore_errors=True)


main()
