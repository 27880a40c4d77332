"""The snippets of README.md and the guides in docs/ run as written: the core API block (it writes
data/py, which the others use), the SkyRL-gym block, the verl reward block and the rest, each
executed verbatim in a fresh working directory with the wheel's `rulegym` command on PATH. A marker names one
block across all of those files."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, import_or_skip, skip_loudly

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
README = "\n".join(p.read_text() for p in DOCS)


def fenced(lang, marker):
    """The one ```lang block of README.md and docs/*.md that contains marker."""
    found = [b for b in re.findall(rf"```{lang}\n(.*?)```", README, re.S) if marker in b]
    assert len(found) == 1, f"README.md and docs/ have {len(found)} {lang} blocks with {marker!r}"
    return found[0]


def block(marker):
    return fenced("python", marker)


def wheel_cli():
    """The `rulegym` command the installed wheel put beside this Python (what a user who ran
    `pip install rulegym` has on PATH)."""
    exe = Path(sys.executable).parent / "rulegym"
    if not exe.is_file():
        skip_loudly(f"the rulegym wheel installed no `rulegym` command beside {sys.executable}")
    return exe


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A fresh directory outside the checkout, with the wheel's `rulegym` command first on PATH."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", f"{wheel_cli().parent}{os.pathsep}{os.environ['PATH']}")
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


def test_verl_tool_use_blocks(workdir, capsys):
    """The verl tool-use shell block (generate, tasks, export) runs as written, then the Python
    block plays the first task's reference solution through the exported rows and configs."""
    import subprocess

    import_or_skip("pyarrow")
    import_or_skip("yaml")
    sh = fenced("sh", "rulegym export --tasks tasks.jsonl --format verl")
    subprocess.run(["bash", "-euo", "pipefail", "-c", sh], check=True, cwd=workdir)
    for name in ("train.parquet", "train_tool_config.yaml", "train_agent_loop_config.yaml"):
        assert (workdir / name).exists(), name
    scope = run(block("UserInteractionCore"), "verl tool use")
    assert scope["scores"][-1] == 1.0
    assert capsys.readouterr().out.strip().splitlines()[-1].endswith(" 1.0")


def test_verl_config_blocks_load_in_verl(workdir):
    """The README's verl configuration as written: both reward-function override lines resolve
    through verl's own loader (with <site-packages> filled in), the agent loop entry names a
    registered-able class, and the search tool YAML loads in verl's tool registry over the core
    block's data/py."""
    import asyncio

    import_or_skip("verl")
    from omegaconf import OmegaConf
    from verl.tools.tool_registry import load_all_tools
    from verl.trainer.ppo.reward import get_custom_reward_fn

    import rulegym.verl as rv

    run(block("rulegym.generate_dataset"), "core")
    site = str(Path(rv.__file__).parent.parent)
    lines = [ln for ln in fenced("sh", "reward.custom_reward_function.path=pkg://").splitlines() if ln and not ln.startswith("#")]
    assert len(lines) == 2
    for line in lines:
        cfg = OmegaConf.from_dotlist(line.replace("<site-packages>", site).split())
        fn = get_custom_reward_fn(cfg)
        assert abs(fn("rulegym_search", "<answer> Ann Lee </answer>", {"target": ["Ann Lee", "Bob Stone"]}, {}) - 2 / 3) < 1e-9

    import hydra.utils

    (entry,) = OmegaConf.create(fenced("yaml", "rulegym_search_agent"))
    assert entry.name == "rulegym_search_agent"
    assert hydra.utils.get_class(entry._target_).__name__ == "SearchAgentLoop"

    config = workdir / "search_tool.yaml"
    config.write_text(fenced("yaml", "rulegym.verl.SearchTool"))
    (tool,) = load_all_tools(tool_config_path=str(config), function_tool_path=None)

    async def once():
        iid, _ = await tool.create()
        resp, _, _ = await tool.execute(iid, {"query_list": ["Ann"]})
        await tool.release(iid)
        return resp.text

    assert asyncio.run(once()).startswith("Doc 1(Title: ")


def test_tool_env_snippet(workdir, capsys):
    """The "Tool-use environment and rubrics" block (its task ships in the wheel)."""
    run(block("rulegym.Simulation({\"dir\": tempfile.mkdtemp()}"), "tool_env")
    assert capsys.readouterr().out.strip().splitlines()[-1] == "1.0"


def test_trl_snippet(workdir, capsys):
    """The TRL block: rows from `export --format trl`, the reward functions, the environment."""
    import_or_skip("trl")
    run(block("rulegym.generate_dataset"), "core")
    run(block("from rulegym.trl import"), "trl")
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-4] == "[1.0, 0.0, 0.0]" and lines[-3] == "[1.0, 1.0, 0.0]", lines
    assert lines[-2].startswith("Doc 1(Title:") and lines[-1] == "1.0", lines


def test_reward_check_snippets(workdir, capsys):
    """docs/reward-check.md: check_reward on a reward that reads the first gold item anywhere
    (it fails, naming the properties), and the Hypothesis block on rulegym's own reward."""
    import_or_skip("hypothesis")
    run(block("from rulegym.testing import check_reward"), "reward check")
    passed, failed = capsys.readouterr().out.strip().splitlines()[-1].split(" ", 1)
    assert passed == "False"
    assert "subset_below_one" in failed and "no_tag_scores_zero" in failed, failed
    run(block("from hypothesis import given, settings"), "hypothesis")


def test_demonstrations_and_curriculum_snippet(workdir, capsys):
    """docs/python.md: demonstrations of a dataset, a curriculum draw played and scored, the
    level moving after a window of rewards, the TRL environment class."""
    run(block("rulegym.generate_dataset"), "core")
    capsys.readouterr()
    scope = run(block("rulegym.Curriculum("), "curriculum")
    out = capsys.readouterr().out.strip().splitlines()
    assert len(scope["rows"]) >= 1 and all(r["reward"] == 1.0 for r in scope["rows"])
    assert out[1] == "['answer', 'get_article', 'search']", out
    assert out[2] == "Episode over. Score (F1): 1 (exact match 1, precision 1, recall 1). 1.0", out
    assert scope["levels"] == [0, 0, 0, 1]
    assert scope["state"]["level"] == 1 and scope["state"]["reports"] == 4
    assert scope["Env"].curriculum is scope["curriculum"]


#: The guides whose Python blocks a fresh venv holding only the wheel must run.
FRESH_VENV_GUIDES = ["python.md", "protocols.md", "reward-check.md", "tool-use.md"]


def test_guides_run_in_a_fresh_venv_with_only_the_wheel(tmp_path):
    """`pip install rulegym` into an empty venv is all a guide's block needs: every Python block
    of the guides above whose imports are rulegym, numpy and the standard library runs as written,
    in guide order, in a directory outside the checkout, with the wheel's `rulegym` command as
    the only CLI on PATH. The blocks that import a trainer's package (TRL, SkyRL, verifiers,
    OpenEnv, Ray, Hypothesis) run in the tests of that package with the same wheel."""
    wheel = os.environ.get("RULEGYM_WHEEL")
    if not wheel:
        skip_loudly("RULEGYM_WHEEL (the built wheel) is not set; scripts/test.sh sets it")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run([python, "-m", "pip", "install", "-q", wheel], check=True, timeout=600)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RULEGYM_", "VIRTUAL_ENV"))}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}/usr/bin{os.pathsep}/bin"
    which = subprocess.run(["bash", "-c", "command -v rulegym"], env=env, capture_output=True, text=True)
    assert which.stdout.strip() == str(venv / "bin" / "rulegym"), which
    allowed = set(sys.stdlib_module_names) | {"rulegym", "numpy"}
    ran, left = [], []
    for guide in FRESH_VENV_GUIDES:
        work = tmp_path / guide.removesuffix(".md")
        work.mkdir()
        text = (REPO / "docs" / guide).read_text()
        for i, code in enumerate(re.findall(r"```python\n(.*?)```", text, re.S)):
            imports = set(re.findall(r"^\s*(?:import|from)\s+([A-Za-z_]\w*)", code, re.M))
            imports |= {m for line in re.findall(r"^\s*import\s+(.+)$", code, re.M)
                        for m in re.findall(r"(?:^|,)\s*([A-Za-z_]\w*)", line)}
            name = f"{guide} block {i + 1} ({code.splitlines()[0]})"
            if not imports <= allowed:
                left.append(f"{name}: imports {sorted(imports - allowed)}")
                continue
            res = subprocess.run([python, "-c", code], cwd=work, env=env, capture_output=True,
                                 text=True, timeout=300)
            assert res.returncode == 0, f"{name} failed in a fresh venv:\n{res.stderr[-3000:]}"
            ran.append(name)
    print("ran in a fresh venv:", *ran, "left to the trainers' tests:", *left, sep="\n  ")
    assert len(ran) >= 7, ran
