#!/usr/bin/env python3
"""Server memory while clients read a long member history page by page.

Starts `stratum serve` (the binary named by the first argument, default
target/release/stratum) on a fresh SQLite database in a temporary
directory, records EVENTS join-progress events in one member's stream,
then has CLIENTS clients read the whole history a page (1,000 events) at a
time, ROUNDS times each, while the server's resident memory is sampled
every 50 ms from /proc. Prints the figures; exits 1 if the peak passes
LIMIT_MB.

    python3 bench/history_memory.py target/release/stratum \
        --events 50000 --clients 8 --rounds 3 --limit-mb 300
"""
import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

TOKEN = "history-bench-bootstrap-token-0123456789abcdef"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


class Api:
    def __init__(self, port):
        self.c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def call(self, method, path, body=None):
        headers = {"Authorization": f"Bearer {TOKEN}"}
        data = None
        if body is not None:
            data = json.dumps(body)
            headers["Content-Type"] = "application/json"
        self.c.request(method, path, body=data, headers=headers)
        r = self.c.getresponse()
        text = r.read()
        if r.status >= 300:
            raise RuntimeError(f"{method} {path}: {r.status} {text[:200]!r}")
        return json.loads(text) if text else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary", nargs="?", default="target/release/stratum")
    ap.add_argument("--events", type=int, default=50_000)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--writers", type=int, default=16)
    ap.add_argument("--limit-mb", type=float, default=300)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="history-bench-")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("STRATUM_")}
    env.update(
        STRATUM_BOOTSTRAP_TOKEN=TOKEN,
        STRATUM_DATABASE_URL=f"sqlite://{work}/stratum.db",
        STRATUM_LISTEN=f"127.0.0.1:{port}",
        STRATUM_LOG="warn",
    )
    server = subprocess.Popen([os.path.abspath(a.binary), "serve"], env=env, cwd=work,
                              stdout=subprocess.DEVNULL, stderr=open(f"{work}/serve.log", "w"))
    try:
        for _ in range(200):
            try:
                Api(port).c.request("GET", "/healthz")
                break
            except OSError:
                time.sleep(0.05)
        Api(port).call("POST", "/v1/admin/cluster/members",
                       {"nodeId": "n-1", "role": "hybrid", "mgmtIp": "192.0.2.11"})
        t0 = time.time()
        counter = iter(range(a.events - 1))
        lock = threading.Lock()

        def write():
            api = Api(port)
            while True:
                with lock:
                    i = next(counter, None)
                if i is None:
                    return
                api.call("POST", "/v1/admin/cluster/members/n-1/join-progress",
                         {"step": f"join/s{i}"})

        ws = [threading.Thread(target=write) for _ in range(a.writers)]
        for w in ws:
            w.start()
        for w in ws:
            w.join()
        wrote = time.time() - t0
        before = rss_mb(server.pid)
        peak = [before]
        done = threading.Event()

        def sample():
            while not done.is_set():
                peak[0] = max(peak[0], rss_mb(server.pid))
                time.sleep(0.05)

        pages = [0]
        read_events = [0]

        def read():
            api = Api(port)
            for _ in range(a.rounds):
                cursor = None
                while True:
                    q = "?limit=1000" + (f"&cursor={cursor}" if cursor else "")
                    page = api.call("GET", f"/v1/admin/cluster/members/n-1/history{q}")
                    with lock:
                        pages[0] += 1
                        read_events[0] += len(page["events"])
                    cursor = page.get("nextCursor")
                    if not cursor:
                        break

        s = threading.Thread(target=sample)
        s.start()
        t1 = time.time()
        rs = [threading.Thread(target=read) for _ in range(a.clients)]
        for r in rs:
            r.start()
        for r in rs:
            r.join()
        took = time.time() - t1
        done.set()
        s.join()
        after = rss_mb(server.pid)
        print(f"events in the member's history: {a.events} (written in {wrote:.1f} s)")
        print(f"clients: {a.clients} x {a.rounds} full reads, {pages[0]} pages, "
              f"{read_events[0]} events in {took:.1f} s")
        print(f"server RSS: {before:.0f} MB before, {peak[0]:.0f} MB peak, {after:.0f} MB after")
        return 0 if peak[0] <= a.limit_mb else 1
    finally:
        server.terminate()
        server.wait(timeout=20)


if __name__ == "__main__":
    sys.exit(main())
