"""A hostile peer on the daemon's port, for tests/integration/hostile.rs (issue 28).

    python3 hostile_peer.py MODE DIR

Listens on 127.0.0.1 (a free port), prints the port, and answers each GET:

- MODE `records`: `/tap` sends two records whose strings hold terminal controls (read from
  DIR/records.jsonl, one JSON object a line) and closes; `/metrics` and `/stats` give a model
  and a file of such names (DIR/metrics.txt, DIR/stats.json).
- MODE `endless`: `/tap` sends `data: ` and then `x` without end; once DIR/bytes MiB are sent
  it writes DIR/sent, waits for DIR/go, ends the event, sends one record and closes. `/metrics`
  answers once, then sends a body without end (256 MiB, then the connection held open).
"""

import os
import socket
import sys
import threading
import time

mode, d = sys.argv[1], sys.argv[2]
first = [True]


def head(c, kind, length=None):
    h = "HTTP/1.1 200 OK\r\nContent-Type: %s\r\nConnection: close\r\n" % kind
    if length is not None:
        h += "Content-Length: %d\r\n" % length
    c.sendall((h + "\r\n").encode())


def serve(c):
    try:
        req = b""
        while b"\r\n\r\n" not in req:
            more = c.recv(4096)
            if not more:
                return
            req += more
        path = req.split(b" ")[1].decode()
        if mode == "records":
            if path.startswith("/tap"):
                head(c, "text/event-stream")
                with open(os.path.join(d, "records.jsonl"), "rb") as f:
                    for line in f.read().splitlines():
                        c.sendall(b"data: " + line + b"\n\n")
            elif path.startswith("/metrics"):
                body = open(os.path.join(d, "metrics.txt"), "rb").read()
                head(c, "text/plain", len(body))
                c.sendall(body)
            else:
                body = open(os.path.join(d, "stats.json"), "rb").read()
                head(c, "application/json", len(body))
                c.sendall(body)
        elif path.startswith("/tap"):
            head(c, "text/event-stream")
            c.sendall(b"data: ")
            block = b"x" * (1 << 20)
            for _ in range(int(open(os.path.join(d, "bytes")).read())):
                c.sendall(block)
            open(os.path.join(d, "sent"), "w").close()
            while not os.path.exists(os.path.join(d, "go")):
                time.sleep(0.02)
            c.sendall(b'\n\ndata: {"type":"file_opened","file":"after.jsonl","format":"codex","offset":0}\n\n')
        elif path.startswith("/stats"):
            body = b'{"time_ms":1,"files":[]}'
            head(c, "application/json", len(body))
            c.sendall(body)
        elif first[0]:
            # The first reading is the daemon's (top starts only on one).
            first[0] = False
            body = b"transcriptd_files_watched 1\n"
            head(c, "text/plain", len(body))
            c.sendall(body)
        else:
            # A body without end: 256 MiB, then nothing more, the connection held open.
            head(c, "text/plain")
            block = b"# x\n" * (1 << 18)
            for _ in range(256):
                c.sendall(block)
            time.sleep(60)
    except OSError:
        pass
    finally:
        c.close()


s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 0))
s.listen(16)
print(s.getsockname()[1], flush=True)
while True:
    conn, _ = s.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
