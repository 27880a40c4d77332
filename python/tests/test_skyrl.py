"""SkyRL-gym adapter: rows from `rulegym export --format skyrl` drive `rulegym.skyrl.SearchEnv`
through `skyrl_gym.make`; the proof-derived oracle gets reward 1, garbage gets 0."""

import json

import pytest
import random

import rulegym
from conftest import import_or_skip, run_cli


def _rows(dataset, cli, env_class):
    path = dataset["dir"].parent / "skyrl.jsonl"
    run_cli(cli, "export", "--dataset", str(dataset["dir"]), "--format", "skyrl",
            "--out", str(path), "--env-class", env_class)
    return [json.loads(line) for line in path.read_text().splitlines()]


def _make(skyrl_gym, row, index, max_turns):
    extras = {"reward_spec": row["reward_spec"], "extra_info": row["extra_info"], "max_turns": max_turns}
    return skyrl_gym.make(row["env_class"], env_config={"index_path": str(index)}, extras=extras)


def test_oracle_policy_gets_reward_one(dataset, cli):
    skyrl_gym = import_or_skip("skyrl_gym")
    import rulegym.skyrl as rs

    assert rs.register() == [rs.SEARCH_ENV_ID, rs.TOOL_ENV_ID]
    rows = {r["extra_info"]["id"]: r for r in _rows(dataset, cli, rs.SEARCH_ENV_ID)}
    trajectories = rulegym.oracle(str(dataset["dir"]), str(dataset["index"]))
    assert trajectories and len(trajectories) == len(rows)
    for t in trajectories:
        row = rows[t["id"]]
        actions = [m["content"] for m in t["messages"] if m["role"] == "assistant"]
        env = _make(skyrl_gym, row, dataset["index"], max_turns=len(actions) + 1)
        assert isinstance(env, rs.SearchEnv)
        prompt, _ = env.init(row["prompt"])
        # The exported prompt is the environment's own prompt, as the oracle saw it.
        assert prompt == t["messages"][: len(prompt)]
        replayed = list(prompt)
        for i, action in enumerate(actions):
            out = env.step(action)
            replayed.append({"role": "assistant", "content": action})
            replayed.extend(out["observations"])
            assert out["done"] == (i == len(actions) - 1)
        assert out["reward"] == 1.0, (t["id"], out["metadata"])
        assert out["metadata"]["f1"] == 1.0
        # Same observations as the Rust replay: the adapter adds nothing and drops nothing.
        assert replayed == t["messages"]
        assert env.get_metrics()["reward"] == 1.0
        env.close()


def test_garbage_policy_gets_zero(dataset, cli):
    skyrl_gym = import_or_skip("skyrl_gym")
    import rulegym.skyrl as rs

    rs.register()
    rng = random.Random(0)
    junk = ["", "hello", "<search>", "</answer>", "<answer></answer>", "<answer> nobody at all </answer>",
            "<answer>yes</answer>", "\x00\uffff", "<search> </search>", "x" * 5000,
            "<answer> Zzyzx Qwerty, Foo Bar </answer>", "<think>hmm</think>"]
    rows = _rows(dataset, cli, rs.SEARCH_ENV_ID)
    episodes = 0
    for row in rows:
        env = _make(skyrl_gym, row, dataset["index"], max_turns=4)
        env.init(row["prompt"])
        done, turns = False, 0
        while not done:
            out = env.step(rng.choice(junk))
            done, turns = out["done"], turns + 1
            assert out["reward"] == 0.0
            if not done:
                assert out["observations"] and out["observations"][0]["role"] == "user"
        assert turns <= 4
        episodes += 1
    assert episodes == len(rows) > 0


def test_ground_truth_shapes():
    import_or_skip("skyrl_gym")
    from rulegym.skyrl import ground_truth_answers

    assert ground_truth_answers({"target": ["A", "B"]}) == ["A", "B"]
    assert ground_truth_answers("A, B") == ["A", "B"]
    assert ground_truth_answers(("A",)) == ["A"]


def test_skyrl_tool_env_episode():
    skyrl_gym = import_or_skip("skyrl_gym")
    import rulegym.skyrl as rs
    from conftest import REPO

    rs.register()
    task = json.loads((REPO / "tests" / "fixtures" / "tools" / "trip.json").read_text())
    env = skyrl_gym.make(rs.TOOL_ENV_ID, env_config={"protocol": "hermes"},
                         extras={"extra_info": {"task": task}, "max_turns": 3})
    prompt, _ = env.init([])
    assert prompt[1]["role"] == "user"
    assert env.step("Where are you flying to?")["observations"][0]["content"] == "Oslo."
    env.step("hmm")
    out = env.step("<answer>done</answer>")
    assert out["done"] and 0.0 <= out["reward"] < 1.0


def test_skyrl_tool_env_takes_the_simulation_from_env_config(tmp_path):
    skyrl_gym = import_or_skip("skyrl_gym")
    import rulegym
    import rulegym.skyrl as rs
    from conftest import REPO

    rs.register()
    task = json.loads((REPO / "tests" / "fixtures" / "tools" / "trip.json").read_text())
    # A recorded world (the teacher's mapping), then the env reads it through its env_config.
    recorded = rulegym.Simulation(
        {"dir": str(tmp_path)},
        llm=lambda messages: json.dumps({"flights": [{"flight_id": "SK42", "price": 99}]}),
    )
    env = rulegym.ToolEnv(task, rulegym.RubricScorer(), simulation=recorded)
    env.reset()
    call = '<tool_call>{"name": "search_flights", "arguments": {"destination": "Oslo", "date": "2024-06-03"}}</tool_call>'
    env.step(call)
    env = skyrl_gym.make(rs.TOOL_ENV_ID,
                         env_config={"protocol": "hermes",
                                     "simulation": {"seed_mappings": str(tmp_path / "mappings")}},
                         extras={"extra_info": {"task": task}, "max_turns": 4})
    env.init([])
    assert "SK42" in env.step(call)["observations"][0]["content"]
    with pytest.raises(Exception, match="unknown field"):
        skyrl_gym.make(rs.TOOL_ENV_ID, env_config={"simulation": {"endpont": "x"}},
                       extras={"extra_info": {"task": task}})


def test_preset_rows_carry_the_environment(dataset, cli):
    """Rows exported with ``--preset phantomenvs`` carry the paper's environment: the SkyRL
    environment built from the row alone ends the episode on a tag-less turn (the default
    would answer with the invalid-action observation) and uses the preset's turn cap."""
    skyrl_gym = import_or_skip("skyrl_gym")
    import rulegym.skyrl as rs

    rs.register()
    path = dataset["dir"].parent / "skyrl-preset.jsonl"
    run_cli(cli, "export", "--dataset", str(dataset["dir"]), "--format", "skyrl",
            "--out", str(path), "--preset", "phantomenvs", "--index", str(dataset["index"]))
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert rows
    for row in rows[:5]:
        config = json.loads(row["extra_info"]["env_config"])
        assert config["end_on_invalid"] is True and config["max_turns"] == 10
        env = skyrl_gym.make(row["env_class"], env_config={},
                             extras={"reward_spec": row["reward_spec"], "extra_info": row["extra_info"]})
        prompt, _ = env.init(row["prompt"])
        assert prompt[0]["role"] == "system" and "helpful and harmless" in prompt[0]["content"]
        assert env.max_turns == 10
        out = env.step("I am not sure.")
        assert out["done"] and out["reward"] == 0.0
        env.close()
    # Default rows keep the default environment: a tag-less turn is only an invalid action.
    row = _rows(dataset, cli, rs.SEARCH_ENV_ID)[0]
    env = _make(skyrl_gym, row, dataset["index"], max_turns=4)
    env.init(row["prompt"])
    out = env.step("I am not sure.")
    assert not out["done"]
