"""README snippets for the trainers run as written: the core API block (it writes data/py, which
the others use), the SkyRL-gym block and the verl reward block, each executed verbatim in a
fresh working directory with the `rulegym` CLI on PATH."""

import os
import re
from pathlib import Path

import pytest

from conftest import REPO, import_or_skip

BLOCKS = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), re.S)


def block(marker):
    found = [b for b in BLOCKS if marker in b]
    assert len(found) == 1, f"README has {len(found)} python blocks with {marker!r}"
    return found[0]


@pytest.fixture
def workdir(tmp_path, cli, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", f"{Path(cli).parent}{os.pathsep}{os.environ['PATH']}")
    return tmp_path


def run(code, name):
    scope = {"__name__": f"readme_{name}"}
    exec(compile(code, f"README.md ({name})", "exec"), scope)
    return scope


def test_core_skyrl_and_verl_reward_snippets(workdir, capsys):
    import_or_skip("skyrl_gym")
    run(block("rulegym.generate_dataset"), "core")
    scope = run(block("rulegym.skyrl.register()"), "skyrl")
    assert scope["out"]["reward"] == 1.0 and scope["out"]["done"]
    run(block("from rulegym.verl import compute_score\nprint("), "verl reward")
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("0.666"), last


def test_ray_snippet(workdir):
    """The Ray block: both ways of splitting generation, and an environment in a Ray actor."""
    ray = import_or_skip("ray")
    run(block("rulegym.generate_dataset"), "core")
    try:
        scope = run(block("from rulegym.ray import"), "ray")
    finally:
        ray.shutdown()
    assert [r["seed"] for r in scope["rows"]] == [1, 2, 3, 4]
    assert sorted(p.name for p in (workdir / "data" / "ray-sweep").iterdir()) == [f"seed-{s}" for s in range(1, 5)]
