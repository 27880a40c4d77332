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


def _files(path):
    return {p.name: p.read_bytes() for p in sorted(path.iterdir())}


def test_universes_over_ray_equal_single_seed_runs(ray_runtime, tmp_path):
    """By universe: 2 local workers write the same bytes as one process per seed."""
    from rulegym.ray import generate_universes

    seeds = range(3, 8)
    rows = generate_universes(tmp_path / "ray", seeds, CONFIG, num_tasks=2)
    assert [r["seed"] for r in rows] == list(seeds)
    assert all(r["questions"] > 20 for r in rows)
    in_process = rulegym.generate_datasets(str(tmp_path / "local"), "3..8", CONFIG["universe"], CONFIG["questions"])
    assert [r["seed"] for r in in_process] == list(seeds)
    for seed in seeds:
        single = tmp_path / f"single-{seed}"
        rulegym.generate_dataset(str(single), {**CONFIG["universe"], "seed": seed}, CONFIG["questions"])
        want = _files(single)
        assert _files(tmp_path / "ray" / f"seed-{seed}") == want, seed
        assert _files(tmp_path / "local" / f"seed-{seed}") == want, seed
    # An existing output is refused before any task starts, unless forced.
    with pytest.raises(FileExistsError):
        generate_universes(tmp_path / "ray", seeds, CONFIG)
    again = generate_universes(tmp_path / "ray", range(3, 5), CONFIG, num_tasks=1, force=True)
    assert [r["seed"] for r in again] == [3, 4]


def test_bad_seed_ranges_are_clear_errors(tmp_path):
    from rulegym.ray import generate_universes

    for bad in (range(5, 5), range(1, 9, 2), "1..4"):
        with pytest.raises(ValueError, match="non-empty range with step 1"):
            generate_universes(tmp_path / "x", bad, CONFIG)
    for text, says in (("5..5", "empty"), ("9..2", "reversed"), ("a..b", "expected A..B")):
        with pytest.raises(rulegym.RulegymError, match=says):
            rulegym.generate_datasets(str(tmp_path / "y"), text, CONFIG["universe"], CONFIG["questions"])
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()
