"""The snippets of README.md and the guides in docs/ run as written: the core API block (it writes
data/py, which the others use), the SkyRL-gym block, the verl reward block and the rest, each
executed verbatim in a fresh working directory with the wheel's `rulegym` command on PATH. A marker names one
block across all of those files."""

import os
import re
import shutil
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
    import_or_skip("pyarrow")
    import_or_skip("yaml")
    run_sh("rulegym export --tasks tasks.jsonl --format verl", workdir)
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


#: Every ```sh and ```python block of README.md and docs/, by a marker unique to it: the test
#: that runs it, or why the suite does not. A block added to a guide without an entry here fails
#: `test_every_guide_block_is_run_or_says_why`, so no guide can drift unchecked again.
GUIDE_BLOCKS = {
    # README.md
    "cargo run --release -- generate --out data/demo\n": "run: test_shell_blocks_run_as_written",
    "scripts/test.sh\n": "not run: it is the suite itself (CI runs it)",
    "rulegym phantomwiki verify PWDIR": "not run as a whole: a tour of one line per command; its "
    "servers, LLM endpoint and placeholders (PWDIR, my_reward.py) are each run by the test of "
    "that command, and its first line is the README generate block's",
    # docs/datasets.md
    "--preset phantomenvs\n# the same families": "not run: ~70 s for the PhantomEnvironments preset "
    "and 100 universes; tests/integration/batch.rs and question_quality.rs run each flag smaller",
    '"id":"hops+constraints-h3c1-00008"': "run: test_shell_blocks_run_as_written",
    "the rule base without scryer's library imports": "run: test_shell_blocks_run_as_written "
    "(with swipl, after the README generate block, beside a copy of prolog/)",
    # docs/mcp.md
    "# stdio (what a client launches)": "not run: servers waiting for a client; "
    "python/tests/test_mcp.py drives each with the PyPI mcp client",
    "import anyio": "run: python/tests/test_mcp.py (the PyPI mcp client)",
    "--transport http --port 8000 --eval": "not run: a server; tests/integration/attacks.rs "
    "(mcp_as_an_evaluation_service_deals_questions_and_bounds_sessions) runs it",
    # docs/papers.md
    "# PhantomEnvironments: generate, export with the paper's prompt": "not run: a Qwen2.5-3B "
    "endpoint and SkyRL/verl training; each command is tested by search_export.rs and "
    "search_eval.rs",
    # docs/protocols.md
    "rulegym generate --out data --num-family-trees 8": "run: python/tests/test_openenv.py "
    "(test_protocols_doc_openenv_block)",
    "from openenv.core import GenericEnvClient": "run: python/tests/test_openenv.py "
    "(test_protocols_doc_openenv_block)",
    "vf-eval rulegym-search-v1": "not run: vf-eval needs a model endpoint; python/tests/"
    "test_verifiers.py loads the same taskset with verifiers' own code",
    "import verifiers.v1 as vf": "run: python/tests/test_verifiers.py "
    "(test_protocols_doc_verifiers_block)",
    # docs/python.md
    "pip install maturin && maturin build": "run: scripts/test.sh builds and installs the wheel "
    "exactly so (with -i and -o of its own)",
    'rulegym.generate_dataset("data/py"': "run: test_core_skyrl_and_verl_reward_snippets, "
    "test_guides_run_in_a_fresh_venv_with_only_the_wheel",
    "rulegym.Curriculum(": "run: test_demonstrations_and_curriculum_snippet, fresh venv",
    "task = rulegym.EXAMPLE_TASK                          #": "run: test_tool_env_snippet, "
    "fresh venv",
    "import skyrl_gym": "run: test_core_skyrl_and_verl_reward_snippets",
    "from rulegym.trl import": "run: test_trl_snippet, fresh venv",
    "from rulegym.verl import compute_score\nprint(": "run: "
    "test_core_skyrl_and_verl_reward_snippets, fresh venv",
    "reward.custom_reward_function.path=<site-packages>": "not run: verl command-line "
    "overrides, not a shell command; test_verl_config_blocks_load_in_verl loads them in verl",
    "rulegym export --tasks tasks.jsonl --format verl": "run: test_verl_tool_use_blocks",
    "UserInteractionCore": "run: test_verl_tool_use_blocks",
    "from rulegym.ray import": "run: test_ray_snippet",
    "import numpy as np, rulegym": "run: fresh venv",
    # docs/reward-check.md
    'rulegym reward-check --cmd "python my_reward.py" --cases 10000': "not run: my_reward.py and \"...\" are "
    "the reader's; the middle line (rulegym's own reward) is run by "
    "tests/integration/reward_check.rs",
    "rulegym reward-check --tool-use": "run: test_shell_blocks_run_as_written",
    "from rulegym.testing import check_reward": "run: test_reward_check_snippets, fresh venv",
    "from hypothesis import given, settings": "run: test_reward_check_snippets",
    # docs/search-environment.md
    "# retrieval and the search environment on the demo dataset": "run: "
    "test_shell_blocks_run_as_written (after the README generate block, a fake endpoint on 8000)",
    "rulegym generate --out data --families hops,hops+constraints --quiet": "run: "
    "test_shell_blocks_run_as_written",
    # docs/tool-use.md
    "cargo run --release -- synth --personas personas.txt": "not run: synthesis needs an LLM "
    "that answers each stage's JSON schema; tests/integration/synth_pipeline.rs runs it against "
    "a scripted server and replays it",
    "rulegym.Simulation({\"endpoint\"": "run: fresh venv",
    "rulegym tools play --tasks tasks.jsonl --endpoint http://localhost:8000/v1": "not run: an LLM policy, user and judge; "
    "tests/integration/tool_env.rs (cli_plays_tasks_and_replays_them_offline, "
    "cli_reports_where_rules_and_judge_disagree_and_replays_it) runs both commands",
    "rulegym tools generate --universe data --count 5": "run: test_shell_blocks_run_as_written",
    # docs/training-on-a-cpu.md
    "scripts/train-trl-cpu.sh --seed 1": "not run: training runs of 50-90 minutes "
    "(benchmarks/ holds their results and logs)",
    "scripts/train-sft-grpo-cpu.py --smoke": "not run: training (~3 min smoke, hours in full); "
    "python/tests/test_sft.py and test_curriculum_trl.py run its pieces (SFTTrainer and "
    "GRPOTrainer steps) with tiny models, test_train_pipeline.py its decoding and side-by-side helpers",
}


def guide_blocks():
    """(file, language, text) of every ```sh and ```python block of README.md and docs/."""
    return [(p.name, lang, text) for p in DOCS
            for lang, text in re.findall(r"```(sh|python)\n(.*?)```", p.read_text(), re.S)]


def test_every_guide_block_is_run_or_says_why():
    unclaimed, ambiguous = [], []
    used = {m: 0 for m in GUIDE_BLOCKS}
    for name, lang, text in guide_blocks():
        hits = [m for m in GUIDE_BLOCKS if m in text]
        for m in hits:
            used[m] += 1
        if not hits:
            unclaimed.append(f"{name} ({lang}): {text.splitlines()[0]}")
        elif len(hits) > 1:
            ambiguous.append(f"{name} ({lang}): {hits}")
    assert not unclaimed, "blocks no test runs and no entry explains:\n" + "\n".join(unclaimed)
    assert not ambiguous, "blocks matched by several markers:\n" + "\n".join(ambiguous)
    stale = [m for m, n in used.items() if n != 1]
    assert not stale, f"markers matching no block or several: {stale}"


class FakeEndpoint:
    """An OpenAI-compatible chat completions server on 127.0.0.1:`port` whose every reply is
    `<answer>Nobody</answer>` (what the guides' `--endpoint` lines need to run)."""

    def __init__(self, port):
        import http.server
        import json as _json
        import threading

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                model = _json.loads(body or b"{}").get("model", "m")
                reply = _json.dumps({
                    "id": "fake", "object": "chat.completion", "created": 0, "model": model,
                    "choices": [{"index": 0, "finish_reason": "stop", "message": {
                        "role": "assistant", "content": "<answer>Nobody</answer>"}}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                }).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def run_sh(marker, cwd):
    """Runs the guide's ```sh block holding `marker` with bash -euo pipefail in `cwd`, with
    `cargo run --release --` read as the installed `rulegym` (README: "or cargo run --release --
    in its place")."""
    text = fenced("sh", marker).replace("cargo run --release -- ", "rulegym ")
    res = subprocess.run(["bash", "-euo", "pipefail", "-c", text], cwd=cwd,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, f"{marker!r} failed:\n{res.stdout[-2000:]}\n{res.stderr[-3000:]}"
    return res


def test_shell_blocks_run_as_written(workdir):
    """The guides' shell blocks that run on their own, as written, in fresh directories, with
    the wheel's `rulegym` on PATH and a fake endpoint where they name one."""
    demo = workdir / "demo"
    demo.mkdir()
    run_sh("cargo run --release -- generate --out data/demo\n", demo)
    endpoint = FakeEndpoint(8000)
    try:
        run_sh("# retrieval and the search environment on the demo dataset", demo)
    finally:
        endpoint.close()
    if shutil.which("swipl") is None:
        skip_loudly("swipl is not installed (scripts/apt-packages.txt: swi-prolog-nox)")
    shutil.copytree(REPO / "prolog", demo / "prolog")
    out = run_sh("the rule base without scryer's library imports", demo).stdout.strip()
    people = len((demo / "data" / "demo" / "people.jsonl").read_text().splitlines())
    assert out.startswith(f"{people}-"), out
    import json as _json

    report = _json.loads((demo / "eval-out" / "report.json").read_text())
    assert report["overall"]["n"] > 0, report
    assert (demo / "eval-replay" / "trajectories.jsonl").read_bytes() == (
        demo / "eval-out" / "trajectories.jsonl").read_bytes()
    for marker in ['"id":"hops+constraints-h3c1-00008"',
                   "rulegym generate --out data --families hops,hops+constraints --quiet",
                   "rulegym tools generate --universe data --count 5",
                   "rulegym reward-check --tool-use"]:
        fresh = workdir / f"b{abs(hash(marker))}"
        fresh.mkdir()
        run_sh(marker, fresh)
