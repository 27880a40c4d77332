#!/usr/bin/env python3
"""Alternated timing of several `rulegym generate` binaries on one configuration.

Runs each binary in turn, RUNS rounds, so machine drift hits them alike; prints each binary's
median and minimum wall time (time.perf_counter around the process) and median CPU time
(user + system from RUSAGE_CHILDREN), and checks that every binary wrote the same bytes
(SHA-256 of each output file; the manifest without its rulegym_version line).

Usage: scripts/ab-generate.py RUNS TREES PER_TEMPLATE BINARY [BINARY ...]
e.g.   scripts/ab-generate.py 9 1000 10 /tmp/rulegym-before target/release/rulegym
"""
import hashlib
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def digest(directory):
    sums = {}
    for name in sorted(os.listdir(directory)):
        with open(os.path.join(directory, name), "rb") as f:
            data = f.read()
        if name == "manifest.json":
            data = b"\n".join(l for l in data.splitlines() if b"rulegym_version" not in l)
        sums[name] = hashlib.sha256(data).hexdigest()
    return sums


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    runs, trees, per_template = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    binaries = sys.argv[4:]
    # By position: the same binary may be given twice (a noise check).
    wall = [[] for _ in binaries]
    cpu = [[] for _ in binaries]
    sums = [None for _ in binaries]
    work = tempfile.mkdtemp(prefix="ab-generate-")
    try:
        for round_ in range(runs):
            for i, binary in enumerate(binaries):
                out = os.path.join(work, str(i))
                shutil.rmtree(out, ignore_errors=True)
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                start = time.perf_counter()
                subprocess.run(
                    [binary, "generate", "--out", out, "--num-family-trees", trees,
                     "--per-template", per_template],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
                wall[i].append(time.perf_counter() - start)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu[i].append(after.ru_utime - before.ru_utime
                                   + after.ru_stime - before.ru_stime)
                if round_ == 0:
                    sums[i] = digest(out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for i, binary in enumerate(binaries):
        w = wall[i]
        print(f"{binary}: wall median {statistics.median(w) * 1e3:.1f} ms "
              f"(min {min(w) * 1e3:.1f}), CPU median {statistics.median(cpu[i]) * 1e3:.0f} ms, "
              f"n={len(w)}")
    same = len({tuple(sorted(s.items())) for s in sums}) == 1
    print("same bytes" if same else "DIFFERENT OUTPUT")
    print("load average", " ".join(open("/proc/loadavg").read().split()[:3]))
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
