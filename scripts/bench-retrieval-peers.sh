#!/usr/bin/env bash
# Exact flat search, side by side: rulegym (criterion bench `retrieval`) versus faiss-cpu
# IndexFlatIP (PyPI wheel) default and tuned, and numpy, on 100,000 x 384 float32, k = 10,
# batches 1 / 32 / 256 / 1024, plus the read bandwidth measured in the same run.
# Usage: scripts/bench-retrieval-peers.sh   (prints a markdown table; needs network for pip once)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-target/bench-venv}
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q faiss-cpu numpy
fi
PEER=$(mktemp)
cat > "$PEER" <<'PY'
import json, os, sys, time
import numpy as np, faiss
mode = sys.argv[1]
N, D, K = 100_000, 384, 10
rng = np.random.default_rng(7)
xb = rng.random((N, D), dtype=np.float32) - 0.5
xb /= np.linalg.norm(xb, axis=1, keepdims=True)
xq = rng.random((1024, D), dtype=np.float32) - 0.5
xq /= np.linalg.norm(xq, axis=1, keepdims=True)
faiss.omp_set_num_threads(os.cpu_count())
if mode == "tuned":
    faiss.cvar.distance_compute_blas_threshold = 1
index = faiss.IndexFlatIP(D)
index.add(xb)
def med(f, reps):
    ts = []
    for _ in range(reps):
        t = time.perf_counter(); f(); ts.append(time.perf_counter() - t)
    return sorted(ts)[len(ts) // 2]
out = {}
for b in [1, 32, 256, 1024]:
    q = xq[:b]
    reps = 50 if b == 1 else (10 if b <= 256 else 5)
    if mode == "numpy":
        def f():
            s = q @ xb.T
            np.argpartition(-s, K, axis=1)[:, :K]
    else:
        def f():
            index.search(q, K)
    f()
    out[b] = b / med(f, reps)
print(json.dumps({"mode": mode, "qps": out}))
PY
echo "running faiss default / tuned / numpy ..." >&2
DEF=$("$VENV/bin/python" "$PEER" default)
TUN=$(OPENBLAS_CORETYPE=SkylakeX "$VENV/bin/python" "$PEER" tuned)
NPY=$(OPENBLAS_CORETYPE=SkylakeX "$VENV/bin/python" "$PEER" numpy)
rm -f "$PEER"
echo "running cargo bench --features testkit --bench retrieval ..." >&2
cargo bench -q --features testkit --bench retrieval -- 'flat_100000x384_k10|read_bandwidth' >&2
python3 - "$DEF" "$TUN" "$NPY" <<'PY'
import json, sys
peers = {j["mode"]: j["qps"] for j in map(json.loads, sys.argv[1:4])}
def median_s(path):
    return json.load(open(f"target/criterion/{path}/new/estimates.json"))["median"]["point_estimate"] / 1e9
bw = 100_000 * 384 * 4 / median_s("read_bandwidth/100000x384_f32")
print(f"read bandwidth (2 threads, this run): {bw / 1e9:.1f} GB/s; batch-1 bound = 153.6 MB / bw = {153.6e6 / bw * 1e3:.2f} ms\n")
print("| batch | rulegym q/s | faiss default q/s | faiss tuned q/s | numpy q/s | vs default | vs tuned |")
print("|---|---|---|---|---|---|---|")
for b in [1, 32, 256, 1024]:
    ours = b / median_s(f"flat_100000x384_k10/batch/{b}")
    d, t, n = (peers[m][str(b)] for m in ("default", "tuned", "numpy"))
    print(f"| {b} | {ours:,.0f} | {d:,.0f} | {t:,.0f} | {n:,.0f} | {ours / d:.2f}x | {ours / t:.2f}x |")
lat = median_s("flat_100000x384_k10/batch/1")
print(f"\nbatch-1 latency {lat * 1e3:.2f} ms = {lat / (153.6e6 / bw):.2f}x the bandwidth bound")
PY
