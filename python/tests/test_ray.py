"""Ray: question generation sharded over Ray tasks equals the single-process output byte for
byte (local Ray runtime)."""

import pytest

import rulegym
from conftest import UNIVERSE, import_or_skip

CONFIG = {
    "universe": UNIVERSE,
    "questions": {"families": ["base", "hops", "hops+constraints"], "per_template": 2, "max_hops": 3},
}


@pytest.fixture(scope="module")
def ray_runtime():
    ray = import_or_skip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def test_sharded_equals_single_process(ray_runtime):
    from rulegym.ray import generate_sharded

    single = rulegym.generate_questions_jsonl(CONFIG["universe"], CONFIG["questions"])
    assert single.count(b"\n") > 20
    for shards in (1, 2, 3, 7):
        assert generate_sharded(CONFIG, shards) == single, shards


def test_shards_partition_the_questions():
    """Shards are contiguous, non-empty here and together exactly the single-process lines."""
    single = rulegym.generate_questions_jsonl(CONFIG["universe"], CONFIG["questions"])
    parts = [rulegym.generate_questions_jsonl(CONFIG["universe"], CONFIG["questions"], i, 3) for i in range(3)]
    assert all(p.count(b"\n") > 0 for p in parts)
    assert b"".join(parts) == single
    with pytest.raises(Exception, match="shard 3 of 3"):
        rulegym.generate_questions_jsonl(CONFIG["universe"], CONFIG["questions"], 3, 3)
    with pytest.raises(ValueError):
        from rulegym.ray import generate_sharded

        generate_sharded(CONFIG, 0)
