"""Question generation sharded over Ray tasks.

:func:`generate_sharded` splits generation by question family: each Ray task builds the
universe and an engine, and generates whole families. Every question slot draws from its own
ChaCha stream keyed by ``(seed, family/cell, index)`` (the per-shard seed derivation is the
single-process one, not a re-seeding), and deduplication and cell balancing are per family,
so the shards' outputs concatenated in family order are byte for byte the single-process
``questions.jsonl`` (:func:`rulegym.generate_questions_jsonl`).

Parallelism is at most the number of families in the config; extra shards get no work.

Running environments inside Ray workers needs nothing special: ``rulegym.SearchEnv`` objects
are created in the worker (the index loads once per worker process) and their ``step`` releases
the GIL; see the README's "Use from Python" section.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from . import _rulegym


def _shard_task(families: List[Tuple[int, str]], universe: Optional[dict], questions: Optional[dict]):
    return [(i, _rulegym.generate_family_jsonl(f, universe, questions)) for i, f in families]


def shard_families(families: List[str], num_shards: int) -> List[List[Tuple[int, str]]]:
    """Round-robin assignment of (position, family) to shards; empty shards are dropped."""
    if num_shards < 1:
        raise ValueError(f"num_shards must be at least 1, got {num_shards}")
    shards: List[List[Tuple[int, str]]] = [[] for _ in range(num_shards)]
    for i, f in enumerate(families):
        shards[i % num_shards].append((i, f))
    return [s for s in shards if s]


def generate_sharded(config: Optional[Dict[str, Any]] = None, num_shards: int = 2) -> bytes:
    """Generates the questions of ``config`` (``{"universe": {...}, "questions": {...}}``,
    the dicts :func:`rulegym.generate_questions_jsonl` takes) as ``num_shards`` Ray tasks;
    returns the ``questions.jsonl`` bytes, identical to the single-process run. Uses the
    current Ray runtime (Ray starts a local one if none is initialised)."""
    import ray

    config = config or {}
    unknown = set(config) - {"universe", "questions"}
    if unknown:
        raise ValueError(f"unknown config keys {sorted(unknown)} (universe, questions)")
    universe, questions = config.get("universe"), config.get("questions")
    families = _rulegym.question_families(universe, questions)
    task = ray.remote(_shard_task)
    refs = [task.remote(shard, universe, questions) for shard in shard_families(families, num_shards)]
    parts = sorted(p for shard in ray.get(refs) for p in shard)
    return b"".join(data for _, data in parts)
