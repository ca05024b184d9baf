#!/usr/bin/env python3
"""What a member and a waiting watcher cost the server in memory.

    python3 bench/member_memory.py target/release/stratum --members 20000 --watchers 2000

Starts `stratum serve` on a fresh SQLite database, reads its resident
memory (VmRSS) after start, after admitting MEMBERS members through the
API, and with WATCHERS long-polls of the peer lists waiting
(`GET /v1/admin/cluster/peers?after=G&waitSeconds=60`), and prints the
growth per member and per watcher. RSS includes what the allocator keeps,
so the figures are what the process costs the host, not the exact size of
its structures.
"""

import argparse
import asyncio
import http.client
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

TOKEN = "member-memory-bench-token-0123456789abcdef"


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def settle(pid, seconds=3.0):
    time.sleep(seconds)
    return rss_kib(pid)


def request(port, method, path, body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    c.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def admit(port, i):
    body = {
        "nodeId": f"n-{i}",
        "role": "compute",
        "mgmtIp": f"10.{i // 62500}.{(i // 250) % 250}.{i % 250 + 1}",
    }
    status, data = request(port, "POST", "/v1/admin/cluster/members", body)
    if status != 201:
        raise RuntimeError(f"admit n-{i}: {status} {data[:200]!r}")


async def hold_watchers(port, n, generation, ready):
    """Opens n long-polls and keeps them waiting; answers the writers."""
    writers = []
    req = (
        f"GET /v1/admin/cluster/peers?after={generation}&waitSeconds=60 HTTP/1.1\r\n"
        f"Host: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
    ).encode()
    for _ in range(n):
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(req)
        await w.drain()
        writers.append((r, w))
    ready.set()
    return writers


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--members", type=int, default=20000)
    ap.add_argument("--watchers", type=int, default=2000)
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    with tempfile.TemporaryDirectory() as d:
        port = 20000 + os.getpid() % 20000
        env = {k: v for k, v in os.environ.items() if not k.startswith("STRATUM_")}
        env.update(
            STRATUM_LISTEN=f"127.0.0.1:{port}",
            STRATUM_DATABASE_URL=f"sqlite://{d}/bench.db",
            STRATUM_BOOTSTRAP_TOKEN=TOKEN,
            STRATUM_LOG="warn",
        )
        server = subprocess.Popen([a.binary, "serve"], env=env, stderr=subprocess.DEVNULL)
        try:
            for _ in range(200):
                try:
                    if request(port, "GET", "/healthz")[0] == 200:
                        break
                except OSError:
                    time.sleep(0.05)
            if server.poll() is not None:
                raise RuntimeError(f"stratum serve exited ({server.returncode}); is port {port} taken?")
            base = settle(server.pid)
            started = time.time()
            with ThreadPoolExecutor(16) as pool:
                list(pool.map(lambda i: admit(port, i), range(a.members)))
            took = time.time() - started
            with_members = settle(server.pid)
            status, data = request(port, "GET", "/v1/admin/cluster/peers")
            generation = json.loads(data)["generation"]
            loop = asyncio.new_event_loop()
            ready = asyncio.Event()
            writers = loop.run_until_complete(hold_watchers(port, a.watchers, generation, ready))
            loop.run_until_complete(asyncio.sleep(3))
            with_watchers = rss_kib(server.pid)
            for _, w in writers:
                w.close()
            per_member = (with_members - base) * 1024 / a.members
            per_watcher = (with_watchers - with_members) * 1024 / a.watchers
            print(f"start: {base / 1024:.1f} MiB")
            print(
                f"{a.members} members (admitted in {took:.1f} s): {with_members / 1024:.1f} MiB, "
                f"{per_member / 1024:.2f} KiB per member"
            )
            print(
                f"{a.watchers} long-polls waiting: {with_watchers / 1024:.1f} MiB, "
                f"{per_watcher / 1024:.2f} KiB per watcher"
            )
        finally:
            server.terminate()
            server.wait()


if __name__ == "__main__":
    sys.exit(main())
