#!/usr/bin/env python3
"""Whole-process benchmarks of `transcriptd run` (stdlib only).

  benches/daemon.py latency  [--samples N]        append -> finding on stdout, p50/p99
  benches/daemon.py idle     [--files N] [--secs S] CPU and RSS with N idle watched files
  benches/daemon.py ingest   [--mib M]             sustained ingest of appended lines, all sinks
  benches/daemon.py catchup  [--mib M]             cold start: a file already there, read until /health is 200
  benches/daemon.py coldstart [--mib M] [--rounds N] cold start against `check --jobs 2` on the same file,
                                                  interleaved rounds, the ratio per round and its median
  benches/daemon.py snapshot [--mib M] [--rounds N]  cold start with and without a snapshot sink, interleaved,
                                                  and the store's bytes on disk per transcript byte

Each run starts the release binary (or $TRANSCRIPTD_BIN) with its own temp dirs and config, and
prints one JSON object with the figures, the machine and the command line. See BENCHMARKS.md.
"""

import argparse
import json
import os
import platform
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# TRANSCRIPTD_BIN compares another build (e.g. the one before a change) in the same session.
BIN = os.environ.get("TRANSCRIPTD_BIN") or os.path.join(ROOT, "target", "release", "transcriptd")


# Each benchmark's temp dirs, removed at exit (TRANSCRIPTD_KEEP=1 keeps them).
ROOTS = []


def workdir(prefix):
    d = tempfile.mkdtemp(prefix=prefix)
    ROOTS.append(d)
    return d


def corpus_file(mib):
    """The generated corpus of `mib` MiB (seed 5, 1% faults), made once and kept in the temp
    dir: every run (and every build compared) reads the same bytes."""
    path = os.path.join(tempfile.gettempdir(), f"td-corpus-{mib}MiB-seed5.jsonl")
    if not os.path.exists(path):
        tmp = path + f".{os.getpid()}.tmp"
        subprocess.run([sys.executable, os.path.join(HERE, "..", "tests", "gen", "gen_transcripts.py"), "--bytes", f"{mib}MiB", "--seed", "5", "--faults", "0.01", "--split-assistant", "-o", tmp], check=True)
        os.rename(tmp, path)
    return path


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def config(root, port, grace="10m", extra_sinks=""):
    return f"""[daemon]
state_dir = "{root}/state"
checkpoint_interval = "1s"
poll_interval = "2s"

[[sources]]
include = ["{root}/watch/**/*.jsonl"]

[[stages]]
type = "parse"
[[stages]]
type = "compaction"
[[stages]]
type = "orphans"
grace = "{grace}"
[[stages]]
type = "validate"

[[sinks]]
type = "stdout"
[[sinks]]
type = "prometheus"
address = "127.0.0.1:{port}"
{extra_sinks}
"""


def scrape(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    data = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
    s.close()
    text = data.split(b"\r\n\r\n", 1)[1].decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, val = line.rpartition(" ")
            try:
                out[name] = float(val)
            except ValueError:
                pass
    return out


def wait_health(port, timeout=30, every=0.05):
    """Polls /health every `every` seconds until it answers 200."""
    end = time.time() + timeout
    while time.time() < end:
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=1)
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            # 503 until the files already there are read.
            if s.recv(4096).startswith(b"HTTP/1.1 200"):
                s.close()
                return
        except OSError:
            pass
        time.sleep(every)
    raise SystemExit("daemon did not become healthy")


# `--tap-clients N`: N clients read the daemon's /tap (curl, to a file) while it is measured.
TAP_CLIENTS = 0
TAPS = []


def start(root, port, stdout, every=0.05, env=None, **kw):
    os.makedirs(f"{root}/watch", exist_ok=True)
    with open(f"{root}/t.toml", "w") as f:
        f.write(config(root, port, **kw))
    p = subprocess.Popen([BIN, "run", "--config", f"{root}/t.toml"], stdout=stdout, stderr=open(f"{root}/err.log", "w"), env=env)
    wait_health(port, every=every)
    for i in range(TAP_CLIENTS):
        out = f"{root}/tap-{i}.txt"
        TAPS.append((out, subprocess.Popen(["curl", "-sN", "-o", out, f"http://127.0.0.1:{port}/tap"])))
    if TAP_CLIENTS:
        time.sleep(0.2)  # connected before the measurement starts
    return p


def tap_records():
    """Records each /tap client received (its `data:` lines), once the clients are stopped."""
    counts = []
    for out, c in TAPS:
        c.terminate()
        c.wait()
        with open(out, "rb") as f:
            counts.append(sum(1 for line in f if line.startswith(b"data:")))
    TAPS.clear()
    return counts


def proc_stat(pid):
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return (int(parts[11]) + int(parts[12])) / tick


def rss_kib(pid, key="VmRSS"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def machine():
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "")
    except OSError:
        pass
    return {"cpus": os.cpu_count(), "cpu": model, "kernel": platform.release()}


def latency(args):
    root = workdir("td-lat-")
    port = free_port()
    p = start(root, port, subprocess.PIPE)
    path = f"{root}/watch/s.jsonl"
    with open(path, "w") as f:
        f.write('{"role":"user","content":"hi"}\n')
    time.sleep(0.5)
    fd = p.stdout.fileno()
    os.set_blocking(fd, False)
    buf = b""
    lat = []
    with open(path, "a") as f:
        for i in range(args.samples):
            line = '{"role":"tool","tool_call_id":"lat%d","content":"x"}\n' % i
            t0 = time.perf_counter()
            f.write(line)
            f.flush()
            want = b'"call_id":"lat%d"' % i
            while want not in buf:
                select.select([fd], [], [], 1.0)
                try:
                    chunk = os.read(fd, 65536)
                except BlockingIOError:
                    chunk = b""
                buf += chunk
            lat.append((time.perf_counter() - t0) * 1000)
            buf = buf[buf.index(want):]
            time.sleep(args.interval)
    # New files: created with one line that has a finding, in a new directory half the time.
    new = []
    for i in range(args.new_files):
        d = f"{root}/watch/n{i}" if i % 2 else f"{root}/watch"
        os.makedirs(d, exist_ok=True)
        t0 = time.perf_counter()
        with open(f"{d}/new{i}.jsonl", "w") as f:
            f.write('{"role":"tool","tool_call_id":"new%d","content":"x"}\n' % i)
        want = b'"call_id":"new%d"' % i
        while want not in buf:
            select.select([fd], [], [], 1.0)
            try:
                buf += os.read(fd, 65536)
            except BlockingIOError:
                pass
        new.append((time.perf_counter() - t0) * 1000)
        buf = buf[buf.index(want):]
        time.sleep(args.interval)
    p.send_signal(signal.SIGTERM)
    p.wait()
    lat.sort()
    new.sort()
    q = lambda v, x: v[min(len(v) - 1, int(x * len(v)))] if v else None
    return {
        "benchmark": "append->finding latency, and new file->finding",
        "samples": len(lat),
        "p50_ms": round(q(lat, 0.5), 2),
        "p90_ms": round(q(lat, 0.9), 2),
        "p99_ms": round(q(lat, 0.99), 2),
        "max_ms": round(lat[-1], 2),
        "new_file_samples": len(new),
        "new_file_p50_ms": round(q(new, 0.5), 2) if new else None,
        "new_file_p99_ms": round(q(new, 0.99), 2) if new else None,
        "new_file_max_ms": round(new[-1], 2) if new else None,
    }


def idle(args):
    root = workdir("td-idle-")
    port = free_port()
    body = open(os.path.join(ROOT, "tests/data/real/claude-code/spotter/short.jsonl"), "rb").read()
    for i in range(args.files):
        d = f"{root}/watch/p{i // 100}"
        os.makedirs(d, exist_ok=True)
        with open(f"{d}/s{i}.jsonl", "wb") as f:
            f.write(body)
    old = time.time() - 3600
    for dp, _, fs in os.walk(f"{root}/watch"):
        for fn in fs:
            os.utime(os.path.join(dp, fn), (old, old))
    t0 = time.time()
    p = start(root, port, subprocess.DEVNULL)
    while scrape(port).get("transcriptd_files_watched", 0) < args.files:
        time.sleep(0.2)
    startup = time.time() - t0
    time.sleep(5)  # let the startup work settle (grace, eviction need no waiting: files are old)
    c0, w0 = proc_stat(p.pid), time.time()
    time.sleep(args.secs)
    c1, w1 = proc_stat(p.pid), time.time()
    out = {
        "benchmark": "idle watched files",
        "files": args.files,
        "startup_s": round(startup, 2),
        "cpu_percent_of_one_core": round(100 * (c1 - c0) / (w1 - w0), 3),
        "rss_mib": round(rss_kib(p.pid) / 1024, 1),
        "peak_rss_mib": round(rss_kib(p.pid, "VmHWM") / 1024, 1),
        "open_files": scrape(port).get("transcriptd_open_files"),
    }
    p.send_signal(signal.SIGTERM)
    p.wait()
    return out


def ingest(args):
    root = workdir("td-ing-")
    port = free_port()
    corpus = corpus_file(args.mib)
    size = os.path.getsize(corpus)
    sinks = f'[[sinks]]\ntype = "file"\npath = "{root}/findings.jsonl"\nmax_bytes = "64MiB"\nkeep = 3\n'
    p = start(root, port, open(f"{root}/stdout.jsonl", "wb"), extra_sinks=sinks)
    t0 = time.time()
    with open(corpus, "rb") as src, open(f"{root}/watch/s.jsonl", "ab") as dst:
        while True:
            b = src.read(1 << 20)
            if not b:
                break
            dst.write(b)
            dst.flush()
    written = time.time() - t0
    while scrape(port).get("transcriptd_bytes_read_total", 0) < size:
        time.sleep(0.01)
    done = time.time() - t0
    out = {
        "benchmark": "sustained ingest (appended in 1 MiB writes; stdout file, file sink, prometheus)",
        "bytes": size,
        "append_s": round(written, 3),
        "ingest_s": round(done, 3),
        "mb_per_s": round(size / done / 1e6, 1),
        "findings": int(sum(v for k, v in scrape(port).items() if k.startswith("transcriptd_findings_total"))),
        "peak_rss_mib": round(rss_kib(p.pid, "VmHWM") / 1024, 1),
    }
    p.send_signal(signal.SIGTERM)
    p.wait()
    return out


def catchup(args):
    root = workdir("td-cu-")
    port = free_port()
    os.makedirs(f"{root}/watch", exist_ok=True)
    corpus = f"{root}/watch/s.jsonl"
    # A hard link: no 512 MiB of dirty pages written back during the run.
    os.link(corpus_file(args.mib), corpus)
    size = os.path.getsize(corpus)
    old = time.time() - 3600
    os.utime(corpus, (old, old))
    # Page cache warm, as for the other benchmarks.
    with open(corpus, "rb") as f:
        while f.read(1 << 24):
            pass
    t0 = time.time()
    # /health every 5 ms: the time is known to that (every 50 ms added 25 ms on average).
    p = start(root, port, subprocess.DEVNULL, every=0.005)
    done = time.time() - t0
    out = {
        "benchmark": "cold start: one file already there, read (all stages, stdout to /dev/null) until /health answers 200",
        "bytes": size,
        "seconds": round(done, 3),
        "mb_per_s": round(size / done / 1e6, 1),
        "bytes_read_total": scrape(port).get("transcriptd_bytes_read_total"),
        "cpu_s": round(proc_stat(p.pid), 2),
        "peak_rss_mib": round(rss_kib(p.pid, "VmHWM") / 1024, 1),
    }
    p.send_signal(signal.SIGTERM)
    p.wait()
    return out


def coldstart(args):
    """Issue 16's target: the daemon catches up a backlog at >= 0.8x the throughput of
    `check --jobs 2` on the same file. Each round runs both (their order alternating), so that
    the ratio is taken between runs seconds apart on this noisy machine."""
    rounds = []
    for r in range(args.rounds):
        def daemon_run():
            return catchup(args)

        def check_run():
            corpus = corpus_file(args.mib)
            t0 = time.time()
            p = subprocess.run([BIN, "check", "-q", "--jobs", "2", corpus], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            took = time.time() - t0
            if p.returncode not in (0, 1):
                raise SystemExit(f"check failed: {p.returncode}")
            return took

        if r % 2 == 0:
            d = daemon_run()
            c = check_run()
        else:
            c = check_run()
            d = daemon_run()
        rounds.append({"daemon_s": d["seconds"], "daemon_cpu_s": d["cpu_s"], "check_s": round(c, 3), "ratio": round(c / d["seconds"], 3)})
    ratios = sorted(x["ratio"] for x in rounds)
    n = len(ratios)
    median = ratios[n // 2] if n % 2 else (ratios[n // 2 - 1] + ratios[n // 2]) / 2
    return {
        "benchmark": "cold start vs check --jobs 2: throughput ratio (check seconds / daemon seconds; >= 0.8 is the target)",
        "bytes": os.path.getsize(corpus_file(args.mib)),
        "rounds": rounds,
        "median_ratio": round(median, 3),
        "load_average": os.getloadavg(),
    }


def du(path):
    """Bytes on disk (allocated blocks) and apparent bytes of the files under `path`."""
    disk = apparent = 0
    for d, _, files in os.walk(path):
        for f in files:
            st = os.lstat(os.path.join(d, f))
            disk += st.st_blocks * 512
            apparent += st.st_size
    return disk, apparent


def snapshot(args):
    """The cold start with and without a `snapshot` sink, interleaved (the same file, page cache
    warm), until /health is 200 and until the store holds every byte and a checkpoint covers it;
    and what the store costs on disk, for the file alone and with a copy of it beside."""
    corpus = corpus_file(args.mib)
    size = os.path.getsize(corpus)
    with open(corpus, "rb") as f:
        while f.read(1 << 24):
            pass
    rows = []
    stores = []
    # "snapshot-serial": the store syncing one file after another
    # (TRANSCRIPTD_SNAPSHOT_SYNC_THREADS=1, as before the syncs ran at once).
    kinds = ["plain", "snapshot"] + (["snapshot-serial"] if args.serial else [])
    for r in range(args.rounds):
        for kind in (kinds if r % 2 == 0 else kinds[::-1]):
            root = workdir("td-snap-")
            port = free_port()
            os.makedirs(f"{root}/watch", exist_ok=True)
            os.link(corpus, f"{root}/watch/s.jsonl")
            old = time.time() - 3600
            os.utime(f"{root}/watch/s.jsonl", (old, old))
            extra = f'[[sinks]]\ntype = "snapshot"\ndir = "{root}/snapshots"\n' if kind != "plain" else ""
            env = dict(os.environ, TRANSCRIPTD_SNAPSHOT_SYNC_THREADS="1") if kind == "snapshot-serial" else None
            t0 = time.time()
            p = start(root, port, subprocess.DEVNULL, every=0.005, env=env, extra_sinks=extra)
            health = time.time() - t0
            durable = health
            if kind != "plain":
                # Durable: the last checkpoint written once the store took every byte (a
                # checkpoint follows the store's sync; none is written without progress).
                key = 'transcriptd_checkpoint_writes_total{result="ok"}'
                last, changed, full_at = scrape(port).get(key, 0), time.time(), None
                while full_at is None or time.time() - max(changed, full_at) < 1.5:
                    m = scrape(port)
                    if m.get(key, 0) != last:
                        last, changed = m.get(key, 0), time.time()
                    if full_at is None and m.get("transcriptd_snapshot_bytes_total", 0) >= size:
                        full_at = time.time()
                    time.sleep(0.005)
                durable = max(changed, full_at) - t0
            row = {"round": r, "kind": kind, "health_s": round(health, 3), "durable_s": round(durable, 3), "cpu_s": round(proc_stat(p.pid), 2), "peak_rss_mib": round(rss_kib(p.pid, "VmHWM") / 1024, 1)}
            p.send_signal(signal.SIGTERM)
            p.wait()
            if kind != "plain":
                row["store_disk_bytes"], row["store_apparent_bytes"] = du(f"{root}/snapshots")
            rows.append(row)
            # Removed at the end: ext4 passes over inodes freed in the last 1–5 minutes when
            # it creates a file (`recently_deleted`), so a store removed here made the next
            # rounds' ~2,000 creates 2–3× slower (perf: 40% of the CPU in ext4_create).
            stores.append(root)
    for root in stores:
        shutil.rmtree(root, ignore_errors=True)
    # A copy beside the file (another inode, the same bytes): what the store adds for it.
    root = workdir("td-snap-copy-")
    port = free_port()
    os.makedirs(f"{root}/watch", exist_ok=True)
    os.link(corpus, f"{root}/watch/s.jsonl")
    shutil.copyfile(corpus, f"{root}/watch/copy.jsonl")
    p = start(root, port, subprocess.DEVNULL, every=0.005, extra_sinks=f'[[sinks]]\ntype = "snapshot"\ndir = "{root}/snapshots"\n')
    while scrape(port).get("transcriptd_snapshot_bytes_total", 0) < 2 * size:
        time.sleep(0.01)
    time.sleep(2.5)
    m = scrape(port)
    p.send_signal(signal.SIGTERM)
    p.wait()
    copy_disk, copy_apparent = du(f"{root}/snapshots")
    shutil.rmtree(root, ignore_errors=True)

    def med(xs):
        xs = sorted(xs)
        return xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2

    def per_round(kind):
        """Each round's (until health, until durable) time of `kind` over the plain daemon's."""
        out = []
        for r in range(args.rounds):
            pl = next(x for x in rows if x["round"] == r and x["kind"] == "plain")
            k = next(x for x in rows if x["round"] == r and x["kind"] == kind)
            out.append((round(k["health_s"] / pl["health_s"], 3), round(k["durable_s"] / pl["health_s"], 3)))
        return out

    ratios = per_round("snapshot")
    serial = per_round("snapshot-serial") if args.serial else []
    snaps = [x for x in rows if x["kind"] == "snapshot"]
    return {
        "benchmark": "cold start with and without a snapshot sink (one file already there; interleaved rounds), and the store's cost",
        "bytes": size,
        "rounds": rows,
        "ratio_health_per_round": [a for a, _ in ratios],
        "ratio_durable_per_round": [b for _, b in ratios],
        "median_ratio_health": med([a for a, _ in ratios]),
        "median_ratio_durable": med([b for _, b in ratios]),
        "serial_median_ratio_health": med([a for a, _ in serial]) if serial else None,
        "serial_median_ratio_durable": med([b for _, b in serial]) if serial else None,
        "store_disk_per_byte": round(med([x["store_disk_bytes"] for x in snaps]) / size, 4),
        "with_a_copy": {"transcript_bytes": 2 * size, "store_disk_bytes": copy_disk, "store_apparent_bytes": copy_apparent, "store_disk_per_transcript_byte": round(copy_disk / (2 * size), 4), "deduplicated_bytes": m.get("transcriptd_snapshot_deduplicated_bytes_total")},
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tap-clients", type=int, default=0, help="clients reading /tap during the run (curl)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("latency")
    a.add_argument("--samples", type=int, default=500)
    a.add_argument("--interval", type=float, default=0.01)
    # Builds before issue 15 can miss a file written right after its directory is created
    # (then this waits forever): 0 skips the new-file phase.
    a.add_argument("--new-files", type=int, default=200)
    a = sub.add_parser("idle")
    a.add_argument("--files", type=int, default=10000)
    a.add_argument("--secs", type=float, default=60)
    a = sub.add_parser("ingest")
    a.add_argument("--mib", type=int, default=512)
    a = sub.add_parser("catchup")
    a.add_argument("--mib", type=int, default=512)
    a = sub.add_parser("coldstart")
    a.add_argument("--mib", type=int, default=512)
    a.add_argument("--rounds", type=int, default=8)
    a = sub.add_parser("snapshot")
    a.add_argument("--mib", type=int, default=512)
    a.add_argument("--rounds", type=int, default=6)
    a.add_argument("--serial", action="store_true", help="also the store with one sync thread (TRANSCRIPTD_SNAPSHOT_SYNC_THREADS=1), interleaved")
    args = ap.parse_args()
    global TAP_CLIENTS
    TAP_CLIENTS = args.tap_clients
    if not os.path.exists(BIN):
        raise SystemExit("build first: cargo build --release")
    try:
        res = {"latency": latency, "idle": idle, "ingest": ingest, "catchup": catchup, "coldstart": coldstart, "snapshot": snapshot}[args.cmd](args)
        if TAP_CLIENTS:
            res["tap_clients"] = TAP_CLIENTS
            res["tap_records_per_client"] = tap_records()
    finally:
        if not os.environ.get("TRANSCRIPTD_KEEP"):
            for d in ROOTS:
                shutil.rmtree(d, ignore_errors=True)
    res["machine"] = machine()
    res["binary"] = BIN
    res["command"] = " ".join(["benches/daemon.py"] + sys.argv[1:])
    print(json.dumps(res))


if __name__ == "__main__":
    main()
