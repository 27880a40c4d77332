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
    for shards in (2, 3, 5):
        assert generate_sharded(CONFIG, shards) == single, shards


def test_shard_assignment():
    from rulegym.ray import shard_families

    assert shard_families(["a", "b", "c"], 2) == [[(0, "a"), (2, "c")], [(1, "b")]]
    assert shard_families(["a"], 4) == [[(0, "a")]]
    with pytest.raises(ValueError):
        shard_families(["a"], 0)
