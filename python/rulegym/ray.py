"""Question generation sharded over Ray tasks.

:func:`generate_sharded` runs ``num_shards`` Ray tasks. Each builds the universe and an engine,
samples every question (cheap and deterministic: each slot draws from its own ChaCha stream
keyed by ``(seed, family/cell, index)``, the single-process derivation, not a re-seeding) and
verifies one contiguous shard of them on its engine, which is where the time goes. The shards'
bytes concatenated in shard order are the single-process ``questions.jsonl``
(:func:`rulegym.generate_questions_jsonl`) byte for byte, for any number of shards.

Running environments inside Ray workers needs nothing special: ``rulegym.SearchEnv`` objects
are created in the worker (the index loads once per worker process) and their ``step`` releases
the GIL; see the README's "Use from Python" section.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

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
    config = config or {}
    unknown = set(config) - {"universe", "questions"}
    if unknown:
        raise ValueError(f"unknown config keys {sorted(unknown)} (universe, questions)")
    universe, questions = config.get("universe"), config.get("questions")
    task = ray.remote(_shard_task)
    refs = [task.remote(universe, questions, i, num_shards) for i in range(num_shards)]
    return b"".join(ray.get(refs))
