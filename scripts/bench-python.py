#!/usr/bin/env python3
"""Python overhead of rulegym's bindings (BENCHMARKS.md, section "## Python").

1. Search-environment `step`: per-step time from Python (`rulegym.SearchEnv.step`, building the
   result dict; and through `rulegym.skyrl.SearchEnv`) minus the per-step time of the same
   action sequence run entirely in Rust (`rulegym.bench_rust_steps`). Medians of 7 runs.
2. GRPO from NumPy: bytes the bindings copied out of the input arrays (their own counter) and
   Python-heap bytes allocated during the call (tracemalloc, which tracks NumPy buffers), for
   a 2M-token batch; time per call.

Usage: .venv-test/bin/python scripts/bench-python.py   (needs the rulegym wheel installed)
"""

import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

import rulegym

RUNS = 7


def median_ns(fn, n):
    samples = []
    for _ in range(RUNS):
        t = time.perf_counter_ns()
        fn(n)
        samples.append((time.perf_counter_ns() - t) / n)
    return statistics.median(samples)


def bench_step(tmp):
    data = Path(tmp) / "data"
    rulegym.generate_dataset(str(data), {"seed": 1}, {"per_template": 1})
    rulegym.build_index(str(data / "articles.jsonl"), str(Path(tmp) / "index.bin"))
    index = rulegym.Index(str(Path(tmp) / "index.bin"))
    people = [l.split('"name":"')[1].split('"')[0] for l in (data / "people.jsonl").read_text().splitlines()[:50]]
    print(f"universe: {len(index)} articles")
    cases = {
        "invalid action (no retrieval)": ["I am thinking about it."],
        "search (top-3 retrieval)": [f"<think>look up</think><search> {p} </search>" for p in people],
    }
    rows = []
    for name, actions in cases.items():
        env = rulegym.SearchEnv(index, "q", ["x"], config={"max_turns": 1000})
        n = 2000 if "invalid" in name else 400

        def rust(n):
            rulegym.bench_rust_steps(env, actions, n)

        def py_dict(n):
            env.reset()
            for i in range(n):
                if i % 999 == 998:
                    env.reset()
                env.step(actions[i % len(actions)])

        def py_reward(n):
            env.reset()
            for i in range(n):
                if i % 999 == 998:
                    env.reset()
                env.step_reward(actions[i % len(actions)])

        try:
            import rulegym.skyrl as rs

            senv = rs.SearchEnv({"index_path": str(Path(tmp) / "index.bin"), "max_turns": 1000},
                                {"reward_spec": {"ground_truth": ["x"]}})

            def py_skyrl(n):
                senv._env.reset()
                for i in range(n):
                    if i % 999 == 998:
                        senv._env.reset()
                    senv.step(actions[i % len(actions)])
        except ImportError:
            py_skyrl = None
        r = median_ns(rust, n)
        d = median_ns(py_dict, n)
        s = median_ns(py_reward, n)
        k = median_ns(py_skyrl, n) if py_skyrl else float("nan")
        rows.append((name, r, s, d, k))
    print("\n| step | Rust only | Python, reward only | Python, full dict | SkyRL adapter | overhead (dict) | overhead (SkyRL) |")
    print("|---|---|---|---|---|---|---|")
    for name, r, s, d, k in rows:
        print(f"| {name} | {r/1e3:.2f} us | {s/1e3:.2f} us | {d/1e3:.2f} us | {k/1e3:.2f} us | "
              f"{(d-r)/1e3:+.2f} us | {(k-r)/1e3:+.2f} us |")


def bench_grpo():
    rng = np.random.default_rng(0)
    seqs, tokens_per = 4096, 512
    n = seqs * tokens_per
    offsets = np.arange(0, n + 1, tokens_per, dtype=np.uint64)
    old = rng.normal(-1.5, 0.8, size=n).astype(np.float32)
    new = (old + rng.normal(0, 0.3, size=n)).astype(np.float32)
    mask = (rng.random(n) < 0.9).astype(np.uint8)
    rewards = rng.choice([0.0, 1.0], size=seqs).astype(np.float32)
    adv = np.empty(seqs, dtype=np.float32)
    grad = np.empty(n, dtype=np.float32)
    input_bytes = old.nbytes + new.nbytes + mask.nbytes + offsets.nbytes + rewards.nbytes
    rulegym.group_advantages(rewards, 8, adv)
    rulegym.policy_loss(old, new, mask, offsets, adv, grad)  # warm up
    copied0 = rulegym.grpo_bytes_copied()
    tracemalloc.start()
    times = []
    for _ in range(RUNS):
        t = time.perf_counter_ns()
        rulegym.group_advantages(rewards, 8, adv)
        rulegym.policy_loss(old, new, mask, offsets, adv, grad)
        times.append(time.perf_counter_ns() - t)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    copied = rulegym.grpo_bytes_copied() - copied0
    strided = np.repeat(old, 2)[::2]
    c1 = rulegym.grpo_bytes_copied()
    rulegym.policy_loss(strided, new, mask, offsets, adv, grad)
    strided_copied = rulegym.grpo_bytes_copied() - c1
    print(f"\nGRPO, {seqs} sequences x {tokens_per} tokens ({n} tokens, {input_bytes/1e6:.1f} MB of inputs):")
    print(f"  bytes copied by the bindings over {RUNS} calls: {copied}")
    print(f"  Python-heap peak during the calls (tracemalloc): {peak} bytes")
    print(f"  advantages + loss + gradient: median {statistics.median(times)/1e6:.2f} ms per call")
    print(f"  a non-contiguous logp_old (strided view) is copied: {strided_copied} bytes")


if __name__ == "__main__":
    print(f"rulegym {rulegym.__version__}, Python {sys.version.split()[0]}, numpy {np.__version__}")
    with tempfile.TemporaryDirectory() as tmp:
        bench_step(tmp)
    bench_grpo()
