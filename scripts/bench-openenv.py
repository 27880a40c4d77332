#!/usr/bin/env python3
"""OpenEnv server throughput over loopback, beside `rulegym serve` (issue 25).

    .venv-openenv/bin/python scripts/bench-openenv.py [--rulegym target/release/rulegym] [--steps 2000]

Generates one universe (8 trees), then, for `rulegym openenv --dataset` and `rulegym serve --index`
on the same index:
- step latency: one session, `search` tool calls over a raw WebSocket (openenv's wire format), and
  the same through openenv's own `GenericEnvClient`; one `POST /retrieve` per query on a keep-alive
  connection for `serve`;
- sessions per second: connect, reset, close (WebSocket) for openenv, in sequence and 16 at once;
  a new connection with one request for `serve`.
Prints a JSON object of medians, p90s and rates."""

import argparse
import asyncio
import http.client
import json
import os
import re
import statistics
import subprocess
import tempfile
import time

import websockets


def start(cmd):
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    line = proc.stderr.readline()
    m = re.search(r"http://([\d.]+):(\d+)", line)
    assert m, line
    return proc, m.group(1), int(m.group(2))


def summary(seconds):
    us = sorted(s * 1e6 for s in seconds)
    return {"median_us": round(statistics.median(us), 1), "p90_us": round(us[int(0.9 * len(us))], 1), "n": len(us)}


async def ws_steps(url, queries, steps):
    async with websockets.connect(url.replace("http://", "ws://") + "/ws") as ws:
        await ws.send(json.dumps({"type": "reset", "data": {"index": 0}}))
        await ws.recv()
        times = []
        for i in range(steps):
            if i and i % 999 == 0:
                await ws.send(json.dumps({"type": "reset", "data": {"index": 0}}))
                await ws.recv()
            msg = json.dumps({"type": "step", "data": {"type": "call_tool", "tool_name": "search",
                                                        "arguments": {"query": queries[i % len(queries)]}}})
            t = time.perf_counter()
            await ws.send(msg)
            reply = json.loads(await ws.recv())
            times.append(time.perf_counter() - t)
            assert reply["type"] == "observation" and reply["data"]["observation"]["error"] is None, reply
    return times


async def client_steps(url, queries, steps):
    from openenv.core import GenericEnvClient

    async with GenericEnvClient(base_url=url) as env:
        await env.reset(index=0)
        times = []
        for i in range(steps):
            if i and i % 999 == 0:
                await env.reset(index=0)
            t = time.perf_counter()
            r = await env.step({"type": "call_tool", "tool_name": "search",
                                "arguments": {"query": queries[i % len(queries)]}})
            times.append(time.perf_counter() - t)
            assert r.observation["error"] is None
    return times


async def ws_session(url, i):
    async with websockets.connect(url.replace("http://", "ws://") + "/ws") as ws:
        await ws.send(json.dumps({"type": "reset", "data": {"index": i % 50}}))
        reply = json.loads(await ws.recv())
        assert reply["type"] == "observation", reply
        await ws.send(json.dumps({"type": "close"}))


async def ws_sessions(url, n, concurrency):
    sem = asyncio.Semaphore(concurrency)

    async def one(i):
        async with sem:
            await ws_session(url, i)

    t = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(n)))
    return n / (time.perf_counter() - t)


def serve_steps(host, port, queries, steps):
    conn = http.client.HTTPConnection(host, port)
    times = []
    for i in range(steps):
        body = json.dumps({"queries": [queries[i % len(queries)]], "topk": 3})
        t = time.perf_counter()
        conn.request("POST", "/retrieve", body, {"Content-Type": "application/json"})
        r = conn.getresponse()
        r.read()
        times.append(time.perf_counter() - t)
        assert r.status == 200
    conn.close()
    return times


def serve_sessions(host, port, queries, n):
    t = time.perf_counter()
    for i in range(n):
        conn = http.client.HTTPConnection(host, port)
        conn.request("POST", "/retrieve", json.dumps({"queries": [queries[i % len(queries)]], "topk": 3}),
                     {"Content-Type": "application/json", "Connection": "close"})
        r = conn.getresponse()
        r.read()
        assert r.status == 200
        conn.close()
    return n / (time.perf_counter() - t)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rulegym", default=os.path.join(os.path.dirname(__file__), "..", "target", "release", "rulegym"))
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--sessions", type=int, default=500)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="rulegym-bench-openenv-")
    data = os.path.join(work, "data")
    subprocess.run([args.rulegym, "generate", "--out", data, "--num-family-trees", "8"], check=True,
                   capture_output=True)
    queries = [json.loads(l)["question"][:200] for l in open(os.path.join(data, "questions.jsonl"))][:200]
    oe, oe_host, oe_port = start([args.rulegym, "openenv", "--dataset", data, "--port", "0",
                                  "--max-turns", "1000"])
    sv, sv_host, sv_port = start([args.rulegym, "serve", "--index", os.path.join(data, "index.idx"), "--port", "0"])
    url = f"http://{oe_host}:{oe_port}"
    try:
        out = {
            "load_avg_start": os.getloadavg(),
            "openenv_ws_step": summary(asyncio.run(ws_steps(url, queries, args.steps))),
            "openenv_client_step": summary(asyncio.run(client_steps(url, queries, args.steps))),
            "serve_retrieve": summary(serve_steps(sv_host, sv_port, queries, args.steps)),
            "openenv_sessions_per_s_sequential": round(asyncio.run(ws_sessions(url, args.sessions, 1)), 1),
            "openenv_sessions_per_s_16": round(asyncio.run(ws_sessions(url, args.sessions, 16)), 1),
            "serve_connections_per_s_sequential": round(serve_sessions(sv_host, sv_port, queries, args.sessions), 1),
            "load_avg_end": os.getloadavg(),
        }
    finally:
        for p in (oe, sv):
            p.terminate()
            p.wait(timeout=30)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
