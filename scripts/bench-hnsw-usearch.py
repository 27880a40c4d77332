#!/usr/bin/env python3
"""usearch (C++ HNSW, PyPI `usearch`) peer for rulegym's HNSW index, on the same vectors.

Usage:
  cargo run --release --features hnsw,testkit --example hnsw_bench -- N DIM QUERIES target/hnsw-bench
  python3 scripts/bench-hnsw-usearch.py target/hnsw-bench DIM [ROUNDS]

Same parameters as rulegym's defaults: inner product, connectivity (M) 16, expansion_add
(ef_construction) 200, k = 10; recall@10 against exact numpy inner-product top-10 (ties to
the lowest index). Reports build time and the throughput of the whole query batch on all
cores per ef, ROUNDS times (default 1). The built index is saved as usearch-N-DIM.index in the
directory and reused by later runs (delete it, or set HNSW_BENCH_REBUILD=1, to rebuild).
"""

import os
import sys
import time

import numpy as np
import usearch
from usearch.index import Index


def main() -> None:
    d, dim = sys.argv[1], int(sys.argv[2])
    threads = os.cpu_count() or 1
    base = np.fromfile(f"{d}/base.f32", dtype=np.float32).reshape(-1, dim)
    queries = np.fromfile(f"{d}/queries.f32", dtype=np.float32).reshape(-1, dim)
    scores = queries @ base.T
    exact = np.argsort(-scores, axis=1, kind="stable")[:, :10]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    cache = f"{d}/usearch-{len(base)}-{dim}.index"
    index = Index(ndim=dim, metric="ip", dtype="f32", connectivity=16, expansion_add=200, expansion_search=64)
    print(f"usearch {usearch.__version__}: n={len(base)} dim={dim} queries={len(queries)} threads={threads} M=16 ef_construction=200")
    if os.path.exists(cache) and not os.environ.get("HNSW_BENCH_REBUILD"):
        index.load(cache)
        print(f"usearch index loaded from {cache} (not rebuilt)")
    else:
        t = time.perf_counter()
        index.add(np.arange(len(base)), base, threads=threads)
        build = time.perf_counter() - t
        index.save(cache)
        print(f"usearch build: {build:.2f} s ({len(base) / build:.0f} vectors/s)")
    for ef in [16, 32, 64, 128, 256] * rounds:
        index.expansion_search = ef
        t = time.perf_counter()
        res = index.search(queries, 10, threads=threads)
        s = time.perf_counter() - t
        keys = np.asarray(res.keys)
        recall = np.mean([len(set(keys[i]) & set(exact[i])) / 10 for i in range(len(queries))])
        print(f"usearch ef={ef:4}: recall@10 {recall:.4f}, {len(queries) / s:.0f} queries/s, {s * 1e6 / len(queries):.1f} us/query")


if __name__ == "__main__":
    main()
