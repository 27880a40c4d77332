"""rulegym's OpenEnv environments (`rulegym.openenv_env`) run in process by NeMo Gym 0.4's own
OpenEnv resources server (`resources_servers/openenv/app.py` of the nemo-gym wheel): it imports
the class by its dotted path, discovers the tools with `ListToolsAction` and registers a POST
route per tool, builds a fresh environment and calls `reset(**reset_kwargs)` per rollout
(`/seed_session`), turns each tool route into `CallToolAction`, and reports the sum of the
observations' rewards (`/verify`). The driver below plays rollouts against that FastAPI app
with Starlette's TestClient (no model, no GPU), as NeMo Gym's simple agent calls it; the
rewards must be rulegym's exact ones.

nemo-gym 0.4 needs Python 3.12 and mcp < 2 while the suite pins mcp 2.3.0, so it lives in its
own venv (scripts/test.sh makes `.venv-nemo-gym` with nemo-gym, openenv and the rulegym wheel,
and sets RULEGYM_NEMO_GYM_PYTHON)."""

import json
import subprocess
import sys

import pytest

import rulegym

from conftest import REPO, TRIP, TRIP_CALLS, tool_reward, trip_task_dir, unrelated_person, venv_python

#: Run under the nemo-gym venv's interpreter: `python -c DRIVER SPEC_JSON`; prints one JSON line.
DRIVER = r'''
import json, os, sys

spec = json.loads(sys.argv[1])
os.environ.update(spec["env"])  # how a host that builds `env_class()` configures rulegym

VERIFY = {"responses_create_params": {"input": "rulegym"},
          "response": {"id": "r", "output": [], "created_at": 0, "model": "scripted", "object": "response",
                       "parallel_tool_calls": True, "tool_choice": "auto", "tools": []}}


def nemo_gym(env_class, id_key, plays, rollouts, reset_kwargs):
    """Rollouts through NeMo Gym's OpenEnv resources server: seed_session, the tool routes,
    verify. Which question (task) a rollout got is read from its environment's OpenEnv state."""
    from unittest.mock import MagicMock
    from fastapi.testclient import TestClient
    from nemo_gym.server_utils import ServerClient
    from resources_servers.openenv.app import OpenEnvResourcesServer, OpenEnvResourcesServerConfig

    config = OpenEnvResourcesServerConfig(
        host="127.0.0.1", port=8080, entrypoint="app.py", name="rulegym_resources_server",
        env_class=env_class, action_class="openenv.core.env_server.mcp_types.CallToolAction",
        is_mcp=True, reset_kwargs=reset_kwargs)
    server = OpenEnvResourcesServer(config=config, server_client=MagicMock(spec=ServerClient))
    app = server.setup_webserver()
    routes = sorted(r.path.lstrip("/") for r in app.routes if r.path.lstrip("/") in server._mcp_tools)
    done = []
    for _ in range(rollouts):
        client = TestClient(app)  # its own session cookie, as each agent rollout has
        client.post("/seed_session", json={}).raise_for_status()
        (session,) = server._sessions.values()
        picked = session.env.state.model_dump()[id_key]
        outputs = []
        for name, args in plays[picked]:
            r = client.post(f"/{name}", json=args)
            outputs.append({"status": r.status_code, "body": r.json()})
        v = client.post("/verify", json=VERIFY)
        v.raise_for_status()
        done.append({"id": picked, "outputs": outputs, "reward": v.json()["reward"],
                     "sessions_left": len(server._sessions)})
    return {"tools": routes, "rollouts": done}


def openenv_conventions(q, wrong):
    """The environment on its own, as OpenEnv 0.10's MCP environments behave."""
    from fastmcp.client.client import CallToolResult
    from openenv.core.env_server.mcp_types import (CallToolAction, CallToolObservation, ListToolsAction,
                                                   ListToolsObservation)
    from rulegym.openenv_env import RulegymSearchEnvironment

    seen = {}
    env = RulegymSearchEnvironment()
    obs = env.reset(question_id=q["id"], episode_id="ep-1")
    seen["reset"] = {"type": type(obs).__name__, "question": obs.opening.get("question"),
                     "prompt_has_question": q["question"] in obs.prompt, "tools": [t.name for t in obs.tools],
                     "reward": obs.reward, "done": obs.done}
    obs = env.step(ListToolsAction())
    seen["list"] = {"ok": isinstance(obs, ListToolsObservation), "tools": sorted(t.name for t in obs.tools)}
    obs = env.step(CallToolAction(tool_name="search", arguments={"query": "  "}))
    seen["blank"] = {"ok": isinstance(obs, CallToolObservation), "result": obs.result,
                     "error_type": obs.error.error_type.value, "reward": obs.reward, "done": obs.done}
    obs = env.step(CallToolAction(tool_name="no_such_tool", arguments={}))
    seen["unknown"] = {"error_type": obs.error.error_type.value, "message": obs.error.message}
    obs = env.step(CallToolAction(tool_name="search", arguments={"query": q["question"]}))
    r = obs.result
    seen["search"] = {"result": isinstance(r, CallToolResult), "error": obs.error, "is_error": r.is_error,
                      "text": r.content[0].text == r.data and bool(r.data), "reward": obs.reward,
                      "done": obs.done, "json": bool(json.dumps(obs.model_dump(mode="json")))}
    obs = env.step(CallToolAction(tool_name="answer", arguments={"answer": wrong}))
    seen["answer"] = {"reward": obs.reward, "done": obs.done, "meta": obs.result.meta}
    obs = env.step(CallToolAction(tool_name="answer", arguments={"answer": wrong}))
    seen["after"] = {"error_type": obs.error.error_type.value, "message": obs.error.message,
                     "reward": obs.reward, "done": obs.done}
    seen["state"] = env.state.model_dump()
    picks = [RulegymSearchEnvironment().reset(seed=s).opening["question"] for s in (5, 5, 6)]
    seen["seeded"] = picks
    fresh = RulegymSearchEnvironment()
    seen["step_first"] = sorted(t.name for t in fresh.step(ListToolsAction()).tools)
    try:
        fresh.reset(task_id="x")
        seen["bad_reset"] = None
    except ValueError as e:  # rulegym.RulegymError: the world holds questions, not tasks
        seen["bad_reset"] = str(e)
    return seen


out = {}
if "search" in spec:
    s = spec["search"]
    out["search"] = nemo_gym("rulegym.openenv_env.RulegymSearchEnvironment", "question_id", s["plays"],
                             s["rollouts"], {})
    out["pinned"] = nemo_gym("rulegym.openenv_env.RulegymSearchEnvironment", "question_id", s["plays"], 2,
                             {"question_id": s["pinned"]})
    out["conventions"] = openenv_conventions(s["question"], s["wrong"])
if "tools" in spec:
    t = spec["tools"]
    out["tools"] = nemo_gym("rulegym.openenv_env.RulegymToolEnvironment", "task_id", t["plays"], 1, {})
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def nemo_gym_python():
    return venv_python("RULEGYM_NEMO_GYM_PYTHON", ".venv-nemo-gym")


def drive(py, spec):
    res = subprocess.run([py, "-c", DRIVER, json.dumps(spec)], capture_output=True, text=True, timeout=900,
                         cwd=REPO)
    assert res.returncode == 0, f"NeMo Gym driver failed:\n{res.stdout[-4000:]}\n{res.stderr[-6000:]}"
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_import_rulegym_needs_no_openenv():
    res = subprocess.run([sys.executable, "-c", "import sys, rulegym; print('rulegym.openenv_env' in sys.modules)"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and res.stdout.strip() == "False", res.stderr


def test_search_environment_in_nemo_gym(dataset, tmp_path, nemo_gym_python):
    questions = [json.loads(l) for l in (dataset["dir"] / "questions.jsonl").read_text().splitlines()]
    train = [q for q in questions if q["split"] == "train"]
    people = [json.loads(l)["name"] for l in (dataset["dir"] / "people.jsonl").read_text().splitlines()]
    # Every train question gets a script: the round-robin order decides which rollout plays
    # which, so each is scripted by its id. Gold, wrong and half-right answers in turn; one
    # blank search first (a fault: reported, no turn taken).
    plays, predictions = {}, {}
    for i, q in enumerate(train):
        gold = q["answers"]
        wrong = unrelated_person(people, gold)
        prediction = [", ".join(gold), wrong, f"{gold[0]}, {wrong}"][i % 3]
        predictions[q["id"]] = prediction
        plays[q["id"]] = [["search", {"query": "   "}], ["search", {"query": q["question"]}],
                          ["get_article", {"title": people[0]}], ["answer", {"answer": prediction}]]
    multi = next(q for q in train if len(q["answers"]) > 1)
    rollouts = min(len(train), 12)
    spec = {
        "env": {"RULEGYM_DATASET": str(dataset["dir"]), "RULEGYM_INDEX": str(dataset["index"])},
        "search": {"plays": plays, "rollouts": rollouts, "pinned": multi["id"],
                   "question": {"id": multi["id"], "question": multi["question"]},
                   "wrong": unrelated_person(people, multi["answers"])},
    }
    seen = drive(nemo_gym_python, spec)
    by_id = {q["id"]: q for q in train}

    # Tools discovered by NeMo Gym through ListToolsAction, one route each.
    assert seen["search"]["tools"] == ["answer", "get_article", "search"]
    done = seen["search"]["rollouts"]
    # A fresh environment per rollout still walks the questions in turn (one order per process).
    assert len({r["id"] for r in done}) == rollouts, [r["id"] for r in done]
    rewards = []
    for r in done:
        q = by_id[r["id"]]
        blank, search, article, answer = r["outputs"]
        assert all(o["status"] == 200 for o in r["outputs"]), r
        assert blank["body"]["result"] is None and "invalid_args" in blank["body"]["error"], blank
        assert search["body"]["error"] is None and search["body"]["result"]["is_error"] is False, search
        assert search["body"]["result"]["content"][0]["text"], search
        assert answer["body"]["error"] is None and answer["body"]["result"]["meta"]["done"] is True, answer
        # NeMo Gym's reward (the sum of the observations' rewards) is rulegym's exact reward.
        reference = rulegym.score(predictions[q["id"]], q["answers"])["f1"]
        assert r["reward"] == reference, (r, q["answers"], reference)
        assert r["sessions_left"] == 0
        rewards.append(r["reward"])
    assert 1.0 in rewards and 0.0 in rewards and any(0.0 < x < 1.0 for x in rewards), rewards

    # reset_kwargs pin a question for every rollout of a server.
    assert [r["id"] for r in seen["pinned"]["rollouts"]] == [multi["id"]] * 2
    assert [r["reward"] for r in seen["pinned"]["rollouts"]] == [
        rulegym.score(predictions[multi["id"]], multi["answers"])["f1"]] * 2

    c = seen["conventions"]
    assert c["reset"] == {"type": "RulegymResetObservation", "question": multi["question"],
                          "prompt_has_question": True, "tools": ["answer", "get_article", "search"],
                          "reward": None, "done": False}, c["reset"]
    assert c["list"] == {"ok": True, "tools": ["answer", "get_article", "search"]}
    assert c["blank"] == {"ok": True, "result": None, "error_type": "invalid_args", "reward": 0.0, "done": False}
    assert c["unknown"]["error_type"] == "tool_not_found" and "unknown tool" in c["unknown"]["message"]
    assert c["search"] == {"result": True, "error": None, "is_error": False, "text": True, "reward": 0.0,
                           "done": False, "json": True}
    assert c["answer"] == {"reward": 0.0, "done": True, "meta": {"reward": 0.0, "done": True}}
    assert c["after"]["error_type"] == "execution_error" and "the episode is over" in c["after"]["message"]
    # step_count counts every step, faults too (which take no turn of the episode).
    assert c["state"] == {"episode_id": "ep-1", "step_count": 6, "question_id": multi["id"], "done": True,
                          "reward": 0.0}, c["state"]
    assert c["seeded"][0] == c["seeded"][1], c["seeded"]
    assert c["step_first"] == ["answer", "get_article", "search"]
    assert c["bad_reset"] and "task_id" in c["bad_reset"] and "question_id" in c["bad_reset"]


def test_tool_use_task_in_nemo_gym(tmp_path, nemo_gym_python):
    """The trip task played through NeMo Gym's resources server: the reward is the rubric
    score rulegym's own tool-use environment gives the same calls."""
    task_file = trip_task_dir(tmp_path)
    task = json.loads(TRIP.read_text())
    spec = {"env": {"RULEGYM_TASKS": str(task_file)},
            "tools": {"plays": {task["id"]: TRIP_CALLS}}}
    seen = drive(nemo_gym_python, spec)
    assert seen["tools"]["tools"] == sorted([t["name"] for t in task["tools"]] + ["ask_user", "finish"])
    (r,) = seen["tools"]["rollouts"]
    assert all(o["status"] == 200 and o["body"]["error"] is None for o in r["outputs"]), r
    assert r["outputs"][0]["body"]["result"]["content"][0]["text"] == "Oslo."
    assert r["reward"] == tool_reward(task, TRIP_CALLS, tmp_path / "mappings") == 1.0
