#!/usr/bin/env python3
"""A collector for the http sink's tests: takes POSTed batches of JSON lines, as Vector's
http_server source or Fluent Bit's http input would, and stores each one in OUT as one line
{"id": <x-transcriptd-batch>, "body": <the body>} written with a single append.

--fail-first N answers 500 to the first N requests (after reading them); --status CODE is the
success answer (Fluent Bit answers 201). A batch whose id is already stored (it was taken, then
the answer was lost: this process was killed before answering) is answered but not stored again,
and counted in OUT + ".resent". The port it listens on is written to --port-file once it listens.
--answer-bytes N makes every answer a hostile one: its body is N bytes (declared in Content-Length,
written in 1 MiB pieces for as long as the client reads), the largest answer a collector could
send; each answer's count of bytes the client took before it closed is appended to OUT + ".taken".
"""
import argparse
import http.server
import json
import os
import socketserver
import threading

ap = argparse.ArgumentParser()
ap.add_argument("--port", type=int, default=0)
ap.add_argument("--port-file")
ap.add_argument("--out", required=True)
ap.add_argument("--fail-first", type=int, default=0)
ap.add_argument("--status", type=int, default=200)
ap.add_argument("--answer-bytes", type=int, default=0)
args = ap.parse_args()

seen = set()
if os.path.exists(args.out):
    with open(args.out, "rb") as f:
        for line in f:
            try:
                seen.add(json.loads(line)["id"])
            except ValueError:
                pass  # a torn last line: that batch was not answered, it comes again
state = {"requests": 0}
# A batch sent again while the first copy is still being taken (the sender gave up waiting for
# the answer) must not be stored twice: looking the id up and storing it is one step.
lock = threading.Lock()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n)
        state["requests"] += 1
        if state["requests"] <= args.fail_first:
            self.answer(500)
            return
        bid = self.headers.get("X-Transcriptd-Batch", "")
        with lock:
            if bid in seen:
                with open(args.out + ".resent", "a") as f:
                    f.write(bid + "\n")
            else:
                line = json.dumps({"id": bid, "body": body.decode()}) + "\n"
                fd = os.open(args.out, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                try:
                    os.write(fd, line.encode())
                    os.fsync(fd)
                finally:
                    os.close(fd)
                seen.add(bid)
        self.answer(args.status)

    def answer(self, code):
        self.send_response(code)
        self.send_header("Content-Length", str(args.answer_bytes))
        self.end_headers()
        taken, piece = 0, b"x" * (1 << 20)
        try:
            while taken < args.answer_bytes:
                n = min(len(piece), args.answer_bytes - taken)
                self.wfile.write(piece[:n])
                taken += n
            self.wfile.flush()
        except OSError:
            pass  # the client closed: what it took is what was written before that
        if args.answer_bytes:
            with open(args.out + ".taken", "a") as f:
                f.write(f"{taken}\n")

    def log_message(self, *a):
        pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    allow_reuse_address = True
    daemon_threads = True


srv = Server(("127.0.0.1", args.port), Handler)
if args.port_file:
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(tmp, args.port_file)
srv.serve_forever()
