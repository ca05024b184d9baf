#!/usr/bin/env python3
"""Instructions per request, counted by valgrind's callgrind: a measure
that does not move with what else the machine runs, for differences too
small for wrk's rates (a few per cent) to show.

    python3 bench/request_instructions.py BINARY [BINARY...] [--requests N]

Starts each binary's `serve` under callgrind on a fresh SQLite database,
admits 64 members, warms up, then for each kind of request (GET /healthz,
GET a member, POST join-progress) zeroes the counters, sends N requests
one after another over one keep-alive connection, and dumps them: the
instructions of the whole process (every thread) divided by N. Prints one
line per binary and kind.
"""

import argparse
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

ADMIN = "bench-bootstrap-token-0123456789abcdefghij"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def measure(binary, n):
    tmp = tempfile.mkdtemp()
    port = free_port()
    out = os.path.join(tmp, "callgrind.out")
    env = dict(os.environ, STRATUM_DATABASE_URL=f"sqlite://{tmp}/stratum.db",
               STRATUM_BOOTSTRAP_TOKEN=ADMIN, STRATUM_LOG="warn")
    server = subprocess.Popen(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
         binary, "serve", "--listen", f"127.0.0.1:{port}"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        conn = None
        for _ in range(600):
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                conn.request("GET", "/readyz")
                if conn.getresponse().read() and True:
                    break
            except OSError:
                time.sleep(0.2)
        auth = {"Authorization": f"Bearer {ADMIN}", "Content-Type": "application/json"}

        def call(method, path, body=None):
            conn.request(method, path, body=json.dumps(body) if body is not None else None,
                         headers=auth)
            res = conn.getresponse()
            res.read()
            assert res.status < 300, (method, path, res.status)

        for i in range(64):
            call("POST", "/v1/admin/cluster/members",
                 {"nodeId": f"n-{i}", "role": "compute", "mgmtIp": f"10.9.0.{i + 1}"})
        steps = iter(range(10**9))
        kinds = [
            ("GET /healthz", lambda i: call("GET", "/healthz")),
            ("GET a member", lambda i: call("GET", f"/v1/admin/cluster/members/n-{i % 64}")),
            ("POST join-progress", lambda i: call(
                "POST", f"/v1/admin/cluster/members/n-{i % 64}/join-progress",
                {"step": f"join/s-{next(steps)}"})),
        ]
        results = []
        for name, send in kinds:
            for i in range(max(n // 10, 20)):
                send(i)
            subprocess.run(["callgrind_control", "-z", str(server.pid)],
                           check=True, stdout=subprocess.DEVNULL)
            for i in range(n):
                send(i)
            before = set(os.listdir(tmp))
            subprocess.run(["callgrind_control", "-d", str(server.pid)],
                           check=True, stdout=subprocess.DEVNULL)
            dumps = sorted(set(os.listdir(tmp)) - before)
            total = 0
            for d in dumps:
                with open(os.path.join(tmp, d), encoding="utf-8", errors="replace") as f:
                    for line in f:
                        m = re.match(r"^(?:summary|totals): (\d+)", line)
                        if m:
                            total += int(m.group(1))
                            break
            results.append((name, total / n))
        return results
    finally:
        server.terminate()
        server.wait()
        subprocess.run(["rm", "-rf", tmp])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("binaries", nargs="+")
    p.add_argument("--requests", type=int, default=500)
    a = p.parse_args()
    for b in a.binaries:
        for name, per in measure(b, a.requests):
            print(f"{b}\t{name}\t{per:,.0f} instructions/request", flush=True)


if __name__ == "__main__":
    sys.exit(main())
