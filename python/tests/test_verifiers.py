"""rulegym's verifiers v1 taskset (`rulegym-search-v1`) run by verifiers' own loading, serving,
rollout and scoring code against a scripted OpenAI-compatible endpoint (verifiers_driver.py).

verifiers 0.4 pins mcp 2.0.0 and the suite pins 2.3.0, so verifiers lives in its own venv
(scripts/test.sh makes `.venv-verifiers` with the rulegym wheel and sets
RULEGYM_VERIFIERS_PYTHON). Its harness is a uv script (`uv` from that venv; the first run
resolves the harness's own dependencies from PyPI into ~/.cache/verifiers)."""

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import TRIP, TRIP_CALLS, tool_reward, trip_task_dir, unrelated_person, venv_python

DRIVER = Path(__file__).with_name("verifiers_driver.py")


@pytest.fixture(scope="module")
def verifiers_python():
    return venv_python("RULEGYM_VERIFIERS_PYTHON", ".venv-verifiers")


def drive(py, spec):
    env = dict(os.environ, RULEGYM_SCRIPTED_API_KEY="unused",
               PATH=f"{Path(py).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    res = subprocess.run([py, str(DRIVER), json.dumps(spec)], capture_output=True, text=True,
                         timeout=900, env=env)
    assert res.returncode == 0, f"verifiers driver failed:\n{res.stdout[-4000:]}\n{res.stderr[-6000:]}"
    return [json.loads(l) for l in res.stdout.splitlines() if l.startswith("{")]


def test_search_taskset_in_verifiers(cli, dataset, verifiers_python):
    questions = [json.loads(l) for l in (dataset["dir"] / "questions.jsonl").read_text().splitlines()]
    train = [q for q in questions if q["split"] == "train"]
    people = [json.loads(l)["name"] for l in (dataset["dir"] / "people.jsonl").read_text().splitlines()]
    multi = next(q for q in train[3:] if len(q["answers"]) > 1)
    picked = [train[0], train[1], train[2], multi]
    script, expected = {}, {}
    for i, q in enumerate(picked):
        gold = ", ".join(q["answers"])
        wrong = unrelated_person(people, q["answers"])
        answer = [gold, wrong, None, q["answers"][0]][i]
        turns = [["search", {"query": q["question"][:120]}],
                 ["get_article", {"title": people[0]}]]
        if answer is not None:
            turns.append(["answer", {"answer": answer}])
        turns.append(answer or "I do not know.")
        script[q["question"]] = turns
        expected[q["id"]] = answer
    spec = {
        "taskset": {"id": "rulegym-search-v1", "dataset": str(dataset["dir"]),
                    "index": str(dataset["index"]), "split": "train"},
        "script": script,
        # Only the picked questions: the script knows no others.
        "only": list(expected),
    }
    traces = drive(verifiers_python, spec)
    by_key = {t["key"]: t for t in traces}
    assert set(expected) <= set(by_key), (set(expected), list(by_key)[:5])
    for key, answer in expected.items():
        t = by_key[key]
        assert t["ok"] and not t["errors"], t
        assert sorted(t["tools"]) == ["answer", "get_article", "search"], t
        assert t["answer"] == answer, t
        q = next(q for q in picked if q["id"] == key)
        if answer is None:
            reference = 0.0
        else:
            line = json.dumps({"answers": q["answers"], "prediction": answer}) + "\n"
            out = subprocess.run([cli, "score"], input=line, capture_output=True, text=True, check=True)
            reference = json.loads(out.stdout)["f1"]
        assert t["reward"] == t["rewards"]["f1"]["score"] == reference, (t, reference)
        assert t["metrics"]["turns"] == (3.0 if answer is not None else 2.0), t
    rewards = [by_key[q["id"]]["reward"] for q in picked]
    assert rewards[0] == 1.0 and rewards[1] == 0.0 and rewards[2] == 0.0 and 0.0 < rewards[3] < 1.0, rewards


def test_infinite_stream_is_unbounded_and_fresh(tmp_path, verifiers_python):
    """`infinite: true`: the taskset is unbounded; its first tasks come from fresh universes
    (seed, seed+1, ...), each question keyed by its id and pointing at its universe's index."""
    code = r"""
import json, sys
import verifiers.v1 as vf
from rulegym.verifiers.search import RulegymSearchConfig, RulegymSearchTaskset
ts = RulegymSearchTaskset(RulegymSearchConfig(id="rulegym-search-v1", infinite=True, seed=3,
    cache_dir=sys.argv[1], universe={"num_family_trees": 2, "max_family_tree_size": 6},
    questions={"families": ["base"], "per_template": 1}))
assert not ts.bounded
tasks = []
for t in ts:
    tasks.append(t)
    if len({x.data.index_path for x in tasks}) == 2:
        break
print(json.dumps([[t.key, t.data.index_path] for t in tasks]))
"""
    res = subprocess.run([verifiers_python, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-4000:]
    tasks = json.loads(res.stdout.splitlines()[-1])
    paths = sorted({p for _, p in tasks})
    assert [Path(p).parent.name for p in paths] == ["seed-3", "seed-4"], paths
    assert all(Path(p).is_file() for p in paths)


def test_curriculum_stream_draws_fresh_questions_and_follows_the_rewards(tmp_path, verifiers_python):
    """`infinite: true` with `curriculum`: tasks are drawn from a rulegym.Curriculum (fresh
    universes, their indexes written for the tool server), each task's reward is reported to it,
    and a window of full rewards moves the level up, as verifiers scores the tasks."""
    code = r"""
import asyncio, json, sys
import verifiers.v1 as vf
from rulegym.verifiers.search import RulegymSearchConfig, RulegymSearchTaskset
ts = RulegymSearchTaskset(RulegymSearchConfig(id="rulegym-search-v1", infinite=True,
    cache_dir=sys.argv[1], curriculum={"seed": 7, "window": 4, "exclude_seeds": [1]}))
assert not ts.bounded
tasks, levels = [], []
for t in ts:
    levels.append(t.key.rsplit("level", 1)[1])
    class State:
        answer = ", ".join(t.data.answers)
    class Trace:
        state = State()
    assert asyncio.run(t.f1(Trace())) == 1.0
    tasks.append(t)
    if len(tasks) == 5:
        break
print(json.dumps({"levels": levels, "state": ts.curriculum.state()["level"],
                  "paths": sorted({t.data.index_path for t in tasks})}))
"""
    res = subprocess.run([verifiers_python, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-4000:]
    out = json.loads(res.stdout.splitlines()[-1])
    # Four full rewards at level 0 move the curriculum to level 1; the fifth draw is there.
    assert out["levels"] == ["0", "0", "0", "0", "1"] and out["state"] == 1, out
    assert all(Path(p).is_file() and Path(p).parent == tmp_path for p in out["paths"])


def test_protocols_doc_verifiers_block(cli, tmp_path, verifiers_python):
    """docs/protocols.md: the verifiers block loads the taskset as written (after the OpenEnv
    section's generate line wrote `data`)."""
    import re

    text = (Path(__file__).resolve().parents[2] / "docs" / "protocols.md").read_text()
    sh = next(b for b in re.findall(r"```sh\n(.*?)```", text, re.S) if "rulegym generate" in b)
    generate = next(l for l in sh.splitlines() if l.startswith("rulegym generate"))
    subprocess.run([cli, *generate.split()[1:]], cwd=tmp_path, check=True, capture_output=True)
    blocks = [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "vf.load_environment" in b]
    assert len(blocks) == 1
    res = subprocess.run([verifiers_python, "-c", blocks[0]], cwd=tmp_path, capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stderr[-4000:]
    assert "questions; first: base-" in res.stdout, res.stdout


def test_tool_use_taskset_in_verifiers(tmp_path, verifiers_python):
    """`rulegym-tools-v1`: the trip task played through verifiers (a tool server per rollout
    with the task's own tools, ask_user and finish); the reward is the rubric score that
    rulegym's own tool-use environment gives the same calls."""
    trip = json.loads(TRIP.read_text())
    trip_task_dir(tmp_path)
    calls = TRIP_CALLS
    spec = {"taskset": {"id": "rulegym-tools-v1", "tasks": str(tmp_path / "trip.json")},
            "script": {trip["instruction"]: [*calls, "Your flight OS123 is booked."]}}
    (trace,) = drive(verifiers_python, spec)
    assert trace["ok"] and not trace["errors"], trace
    assert sorted(trace["tools"]) == sorted([t["name"] for t in trip["tools"]] + ["ask_user", "finish"]), trace
    assert trace["metrics"]["finished"] == 1.0 and trace["metrics"]["tool_calls"] == 5.0, trace
    reference = tool_reward(trip, calls, tmp_path / "mappings")
    assert trace["reward"] == trace["rewards"]["rubric"]["score"] == reference == 1.0, trace
