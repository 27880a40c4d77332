#!/usr/bin/env python3
"""Scaling of many-universe generation over a local Ray cluster: the same seeds written by 1 and
by 2 Ray workers (``rulegym.ray.generate_universes``), and by one process
(``rulegym.generate_datasets``) for reference; checks that every run wrote the same bytes.

Usage: python scripts/bench-ray-universes.py [--seeds 20] [--trees 100] [--per-template 10]
(needs the rulegym wheel and ray installed, e.g. the test venv .venv-test).
"""

import argparse
import hashlib
import os
import shutil
import tempfile
import time

import ray

import rulegym
from rulegym.ray import generate_universes


def digest(root):
    h = hashlib.sha256()
    for dirpath, _, files in sorted(os.walk(root)):
        for name in sorted(files):
            path = os.path.join(dirpath, name)
            h.update(os.path.relpath(path, root).encode())
            with open(path, "rb") as f:
                h.update(f.read())
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--trees", type=int, default=100)
    ap.add_argument("--per-template", type=int, default=10)
    args = ap.parse_args()
    config = {
        "universe": {"num_family_trees": args.trees},
        "questions": {"per_template": args.per_template, "depth": 16},
    }
    seeds = range(1, args.seeds + 1)
    work = tempfile.mkdtemp(prefix="rulegym-ray-bench-")
    rows = []
    digests = set()
    try:
        for workers in (1, 2):
            ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
            # Warm the workers' imports so the figure is generation, not process start-up.
            generate_universes(os.path.join(work, f"warm{workers}"), range(0, workers), config, num_tasks=workers)
            out = os.path.join(work, f"ray{workers}")
            load = os.getloadavg()[0]
            start = time.perf_counter()
            generate_universes(out, seeds, config, num_tasks=workers)
            wall = time.perf_counter() - start
            ray.shutdown()
            digests.add(digest(out))
            rows.append((f"Ray, {workers} worker(s)", wall, load))
        out = os.path.join(work, "local")
        load = os.getloadavg()[0]
        start = time.perf_counter()
        rulegym.generate_datasets(out, f"1..={args.seeds}", config["universe"], config["questions"])
        rows.append(("one process, one worker per core", time.perf_counter() - start, load))
        digests.add(digest(out))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert len(digests) == 1, "runs wrote different bytes"
    base = rows[0][1]
    print(f"{args.seeds} universes of {args.trees} trees x {args.per_template} questions per template "
          f"({os.cpu_count()} cores); every run wrote the same bytes (sha256 {digests.pop()[:16]})")
    print()
    print("| run | wall s | s per universe | speed-up vs 1 Ray worker | load avg at start |")
    print("| --- | --- | --- | --- | --- |")
    for name, wall, load in rows:
        print(f"| {name} | {wall:.2f} | {wall / args.seeds:.3f} | {base / wall:.2f}x | {load:.2f} |")


if __name__ == "__main__":
    main()
