"""Generation over Ray tasks: by universe and by verification shard.

:func:`generate_universes` writes many universes (one dataset directory per seed), splitting the
seeds into contiguous chunks, one Ray task per chunk; each task runs
:func:`rulegym.generate_datasets` on one core with a warm engine, so a cluster of many machines
scales by universe. Every directory is the single-process bytes of its seed.

:func:`generate_sharded` runs ``num_shards`` Ray tasks. Each builds the universe and an engine,
samples every question (cheap and deterministic: each slot draws from its own ChaCha stream
keyed by ``(seed, family/cell, index)``, the single-process derivation, not a re-seeding) and
verifies one contiguous shard of them on its engine, which is where the time goes. The shards'
bytes concatenated in shard order are the single-process ``questions.jsonl``
(:func:`rulegym.generate_questions_jsonl`) byte for byte, for any number of shards.

Running environments inside Ray workers needs nothing special: ``rulegym.SearchEnv`` objects
are created in the worker (the index loads once per worker process) and their ``step`` releases
the GIL; see docs/python.md.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional

from . import _rulegym


def _shard_task(universe: Optional[dict], questions: Optional[dict], shard: int, num_shards: int) -> bytes:
    return _rulegym.generate_questions_jsonl(universe, questions, shard, num_shards)


def generate_sharded(config: Optional[Dict[str, Any]] = None, num_shards: int = 2) -> bytes:
    """Generates the questions of ``config`` (``{"universe": {...}, "questions": {...}}``,
    the dicts :func:`rulegym.generate_questions_jsonl` takes) as ``num_shards`` Ray tasks;
    returns the ``questions.jsonl`` bytes, identical to the single-process run. Uses the
    current Ray runtime (Ray starts a local one if none is initialised)."""
    import ray

    if num_shards < 1:
        raise ValueError(f"num_shards must be at least 1, got {num_shards}")
    universe, questions = _config_parts(config)
    task = ray.remote(_shard_task)
    refs = [task.remote(universe, questions, i, num_shards) for i in range(num_shards)]
    return b"".join(ray.get(refs))


def _universes_task(out: str, seeds: str, universe: Optional[dict], questions: Optional[dict]) -> List[dict]:
    # The driver checked and created ``out``; a task may replace only its own seeds' datasets.
    return _rulegym.generate_datasets(out, seeds, universe, questions, True, 1)


def _config_parts(config: Optional[Dict[str, Any]]):
    config = config or {}
    unknown = set(config) - {"universe", "questions"}
    if unknown:
        raise ValueError(f"unknown config keys {sorted(unknown)} (universe, questions)")
    return config.get("universe"), config.get("questions")


def generate_universes(
    out: "os.PathLike[str] | str",
    seeds: range,
    config: Optional[Dict[str, Any]] = None,
    num_tasks: Optional[int] = None,
    force: bool = False,
) -> List[Dict[str, Any]]:
    """Writes one dataset directory per seed of ``seeds`` (a ``range`` with step 1) under
    ``out`` (``out/seed-S``) as ``num_tasks`` Ray tasks of contiguous seeds (default: the
    cluster's CPU count, at most one task per seed). Each directory is byte-identical to
    ``rulegym generate --seed S``. ``config`` is ``{"universe": {...}, "questions": {...}}``.

    On a cluster of many machines ``out`` must be a path every node can write (a shared
    filesystem). An existing ``out`` is an error unless ``force``. Tasks that fail do not stop
    the others: after all finished, a ``RuntimeError`` names the failed seeds (the written
    directories stay). Returns one dict per universe in seed order (seed, dir, people,
    questions, seconds)."""
    import ray

    if not isinstance(seeds, range) or seeds.step != 1 or len(seeds) == 0:
        raise ValueError(f"seeds must be a non-empty range with step 1, got {seeds!r}")
    if seeds.start < 0:
        raise ValueError(f"seeds must be non-negative, got {seeds!r}")
    universe, questions = _config_parts(config)
    out = os.fspath(out)
    if os.path.exists(out) and not force:
        raise FileExistsError(f"{out} already exists (pass force=True to replace its datasets)")
    os.makedirs(out, exist_ok=True)
    if num_tasks is None:
        num_tasks = int(ray.cluster_resources().get("CPU", 1))
    if num_tasks < 1:
        raise ValueError(f"num_tasks must be at least 1, got {num_tasks}")
    num_tasks = min(num_tasks, len(seeds))
    bounds = [seeds.start + len(seeds) * i // num_tasks for i in range(num_tasks + 1)]
    chunks = [f"{a}..{b}" for a, b in zip(bounds, bounds[1:])]
    task = ray.remote(num_cpus=1)(_universes_task)
    refs = [task.remote(out, chunk, universe, questions) for chunk in chunks]
    rows: List[Dict[str, Any]] = []
    failed = []
    for chunk, ref in zip(chunks, refs):
        try:
            rows.extend(ray.get(ref))
        except Exception as error:  # a task's failure is reported with its seeds
            failed.append(f"seeds {chunk}: {error}")
    if failed:
        raise RuntimeError(f"{len(failed)} of {len(chunks)} tasks failed: " + "; ".join(failed))
    return rows
