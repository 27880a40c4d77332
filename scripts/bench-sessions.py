#!/usr/bin/env python3
"""Session bounds under a flood, side by side for `rulegym mcp --transport http` and
`rulegym serve` (issue 29): per-session memory, sessions opened per second, and a valid client's
p50/p99 per call while 20,000 abandoned sessions arrive.

    python3 scripts/bench-sessions.py [--bin target/release/rulegym] [--flood 20000]

An MCP session is what `initialize` opens (never DELETEd); a `serve` session is a keep-alive
connection that sent one request and stays open. Both servers run with their defaults
(--max-sessions 1024, so each client's share is 512), except a 6 s idle timeout so the reclaim
shows within the run. The flood comes from four clients (threads bound to 127.0.0.10-13, all
loopback on Linux), the valid client from 127.0.0.3: servers tell clients apart by peer address.
Memory is the server process's VmRSS (/proc/PID/status). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INIT = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                   "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                              "clientInfo": {"name": "bench", "version": "0"}}})


def rss_kib(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def read_response(sock: socket.socket) -> tuple[int, dict, bytes]:
    """One HTTP/1.1 response (Content-Length, chunked, or to EOF)."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = sock.recv(65536)
        if not d:
            break
        buf += d
    head, _, body = buf.partition(b"\r\n\r\n")
    lines = head.decode(errors="replace").split("\r\n")
    status = int(lines[0].split(" ")[1]) if lines and len(lines[0].split(" ")) > 1 else 0
    headers = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])}
    if "content-length" in headers:
        n = int(headers["content-length"])
        while len(body) < n:
            d = sock.recv(65536)
            if not d:
                break
            body += d
    elif headers.get("transfer-encoding") == "chunked":
        while not body.endswith(b"0\r\n\r\n"):
            d = sock.recv(65536)
            if not d:
                break
            body += d
    else:
        while True:
            d = sock.recv(65536)
            if not d:
                break
            body += d
    return status, headers, body


VALID = "127.0.0.3"
FLOODERS = [f"127.0.0.{10 + i}" for i in range(4)]


def connect(addr, src: str) -> socket.socket:
    return socket.create_connection(addr, source_address=(src, 0))


def request(addr, method, path, body="", headers=None, sock=None, close=True, src=VALID):
    own = sock is None
    if own:
        sock = connect(addr, src)
    h = {"Host": "127.0.0.1", "Content-Type": "application/json", "Content-Length": str(len(body))}
    h.update(headers or {})
    if close:
        h["Connection"] = "close"
    sock.sendall((f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items())
                  + "\r\n" + body).encode())
    out = read_response(sock)
    if own and close:
        sock.close()
    return out


def start(cmd: list[str]) -> tuple[subprocess.Popen, tuple[str, int]]:
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    line = proc.stderr.readline()
    url = line.split("http://", 1)[1].split()[0].split("/")[0]
    host, port = url.rsplit(":", 1)
    threading.Thread(target=proc.stderr.read, daemon=True).start()
    return proc, (host, int(port))


def flood(addr, total: int, one):
    """Starts a thread per flooding client calling `one(addr, src)` `total` times in all:
    (threads, counts, start)."""
    counter = iter(range(total))
    lock = threading.Lock()
    counts = {"ok": 0, "busy": 0}

    def worker(src):
        while True:
            with lock:
                if next(counter, None) is None:
                    return
            ok = one(addr, src)
            with lock:
                counts["ok" if ok else "busy"] += 1

    t0 = time.time()
    threads = [threading.Thread(target=worker, args=(src,)) for src in FLOODERS]
    for t in threads:
        t.start()
    return threads, counts, t0


def measure(name, proc, addr, open_one, valid_call, total, idle_s):
    pid = proc.pid
    start_kib = rss_kib(pid)
    threads, counts, t0 = flood(addr, total, open_one)
    lat, peak = [], start_kib
    while any(t.is_alive() for t in threads):
        t = time.perf_counter()
        valid_call()
        lat.append((time.perf_counter() - t) * 1000)
        peak = max(peak, rss_kib(pid))
        time.sleep(0.005)
    for t in threads:
        t.join()
    secs = time.time() - t0
    peak = max(peak, rss_kib(pid))
    time.sleep(idle_s + 3)
    after = rss_kib(pid)
    lat.sort()
    admitted = counts["ok"]
    return {
        "server": name,
        "flood": total,
        "admitted": admitted,
        "refused_503": counts["busy"],
        "flood_s": round(secs, 2),
        "attempts_per_s": round(total / secs),
        "rss_start_kib": start_kib,
        "rss_peak_kib": peak,
        "kib_per_session": round((peak - start_kib) / max(admitted, 1), 1),
        "rss_after_idle_kib": after,
        "valid_calls": len(lat),
        "valid_p50_ms": round(statistics.median(lat), 2) if lat else None,
        "valid_p99_ms": round(lat[len(lat) * 99 // 100], 2) if lat else None,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.environ.get("RULEGYM_BIN", str(ROOT / "target" / "release" / "rulegym")))
    ap.add_argument("--flood", type=int, default=20_000)
    args = ap.parse_args()
    idle = 6
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        subprocess.run([args.bin, "generate", "--quiet", "--out", str(data)], check=True)
        limits = ["--idle-timeout", str(idle)]

        # MCP: abandoned sessions.
        proc, addr = start([args.bin, "mcp", "--dataset", str(data), "--transport", "http", "--port", "0", *limits])
        try:
            accept = {"Accept": "application/json, text/event-stream"}
            st, h, _ = request(addr, "POST", "/mcp", INIT, accept)
            sid = h["mcp-session-id"]
            sess = {**accept, "mcp-session-id": sid, "mcp-protocol-version": "2025-06-18"}
            request(addr, "POST", "/mcp", json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}), sess)
            call = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                               "params": {"name": "search", "arguments": {"query": "who is the mother", "k": 2}}})

            def valid():
                st, _, _ = request(addr, "POST", "/mcp", call, sess)
                assert st == 200, st

            def open_mcp(a, src):
                st, _, _ = request(a, "POST", "/mcp", INIT, accept, src=src)
                return st == 200

            results.append(measure("mcp --transport http", proc, addr, open_mcp, valid, args.flood, idle))
        finally:
            proc.kill()
            proc.wait()

        # serve: abandoned keep-alive connections.
        proc, addr = start([args.bin, "serve", "--index", str(data / "index.idx"), "--port", "0", *limits])
        held, lock = [], threading.Lock()
        try:
            vsock = connect(addr, VALID)
            body = json.dumps({"queries": ["who is the mother"], "topk": 2})

            def valid():
                st, _, _ = request(addr, "POST", "/retrieve", body, sock=vsock, close=False)
                assert st == 200, st

            def open_conn(a, src):
                try:
                    s = connect(a, src)
                except OSError:
                    return False
                st, _, _ = request(a, "GET", "/health", sock=s, close=False)
                if st == 200:
                    with lock:
                        held.append(s)
                    return True
                s.close()
                return False

            results.append(measure("serve", proc, addr, open_conn, valid, args.flood, idle))
        finally:
            for s in held:
                s.close()
            proc.kill()
            proc.wait()
    print(json.dumps({"load_1min": os.getloadavg()[0], "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
