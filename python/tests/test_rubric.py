"""Rubric scoring from Python: the trip fixture's hand-built trajectories score as in the Rust
tests (tests/integration/tool_rubric.rs): 1 for the good one, 0 with a forbidden call."""

import copy
import json

import pytest

import rulegym
from conftest import REPO

TASK = (REPO / "tests" / "fixtures" / "tools" / "trip.json").read_text()

GOOD = {
    "events": [
        {"event": "asked_user", "step": 1, "text": "Where are you going?"},
        {"event": "user_said", "step": 1, "text": "Oslo."},
        {"event": "user_revealed", "step": 1, "slot": "destination"},
        {"event": "asked_user", "step": 2, "text": "On which date?"},
        {"event": "user_said", "step": 2, "text": "2024-06-03."},
        {"event": "user_revealed", "step": 2, "slot": "date"},
        {"event": "tool_call", "step": 3, "tool": "search_flights", "args": {"destination": "Oslo", "date": "2024-06-03"}},
        {"event": "tool_result", "step": 3, "tool": "search_flights", "result": {"flights": [{"flight_id": "OS123", "price": 120}]}},
        {"event": "tool_call", "step": 4, "tool": "book_flight", "args": {"flight_id": "OS123", "date": "2024-06-03"}},
        {"event": "answered", "step": 5, "text": "Your flight OS123 is Booked."},
    ],
    "final_state": {"bookings": {"OS123": {"date": "2024-06-03"}}},
    "state_matches": True,
    "turns": 5,
}


@pytest.fixture(scope="module")
def scorer():
    return rulegym.RubricScorer()


def test_good_trajectory_scores_one(scorer):
    r = scorer.score(TASK, GOOD)
    assert r["reward"] == 1.0, r
    items = {i["id"]: i for i in r["items"]}
    assert items["asked_date"]["step"] == 2 and items["confirmed"]["step"] == 5
    assert items["no_refund"]["status"] == "passed"
    # A task dict works as well as its JSON text.
    assert scorer.score(json.loads(TASK), GOOD) == r


def test_forbidden_call_zeroes_the_reward(scorer):
    bad = copy.deepcopy(GOOD)
    bad["events"].append({"event": "tool_call", "step": 6, "tool": "refund_booking", "args": {"flight_id": "OS123"}})
    r = scorer.score(TASK, bad)
    assert r["reward"] == 0.0 and r["forbidden_violated"]
    item = next(i for i in r["items"] if i["id"] == "no_refund")
    assert (item["status"], item["step"]) == ("failed", 6)


def test_bad_input_raises_with_the_rust_message(scorer):
    with pytest.raises(rulegym.RulegymError, match="variant"):
        rulegym.RubricScorer("nope")
    with pytest.raises(rulegym.RulegymError):
        scorer.score("{not json", GOOD)
    with pytest.raises(rulegym.RulegymError, match="trajectory"):
        scorer.score(TASK, {"events": [{"event": "teleported", "step": 1}], "turns": 1})


HERMES_GOOD = [
    "Where are you flying to?",
    "<question>What date do you leave?</question>",
    "Let me search.\n<tool_call>\n{\"name\": \"search_flights\", \"arguments\": {\"destination\": \"Oslo\", \"date\": \"2024-06-03\"}}\n</tool_call>",
    "<tool_call>{\"name\": \"book_flight\", \"arguments\": {\"flight_id\": \"OS123\", \"date\": \"2024-06-03\"}}</tool_call>",
    "<answer>Your flight OS123 is booked.</answer>",
]


def flights(messages):
    """The mapping tool's simulator: a scripted 'LLM' answering with fixed flights."""
    assert messages and all("role" in m for m in messages)
    return json.dumps({"flights": [{"flight_id": "OS123", "price": 120}]})


def test_tool_env_good_episode_scores_one(scorer, tmp_path):
    sim = rulegym.Simulation({"dir": str(tmp_path)}, llm=flights)
    env = rulegym.ToolEnv(TASK, scorer, protocol="hermes", max_turns=8, simulation=sim)
    prompt = env.reset()
    assert "search_flights" in prompt[0]["content"] and prompt[1]["role"] == "user"
    assert env.step(HERMES_GOOD[0])["observations"][0]["content"] == "Oslo."
    env.step(HERMES_GOOD[1])
    out = env.step(HERMES_GOOD[2])
    assert out["observations"][0]["content"].startswith("<tool_response>")
    env.step(HERMES_GOOD[3])
    out = env.step(HERMES_GOOD[4])
    assert out["done"] and out["reward"] == 1.0, out["metadata"]
    assert env.result()["reward"] == 1.0
    with pytest.raises(rulegym.RulegymError):
        env.step("again")


def test_tool_env_garbage_scores_zero(scorer, tmp_path):
    sim = rulegym.Simulation({"dir": str(tmp_path)}, llm=flights)
    env = rulegym.ToolEnv(json.loads(TASK), scorer, max_turns=3, simulation=sim)
    env.reset()
    done = False
    while not done:
        out = env.step("<tool_call>{oops</tool_call> blah")
        done = out["done"]
    assert out["reward"] == 0.0


SEARCH = '<tool_call>{"name": "search_flights", "arguments": {"destination": "Oslo", "date": "2024-06-03"}}</tool_call>'


def test_one_simulation_gives_a_group_of_envs_one_world(scorer, tmp_path):
    calls = []

    def llm(messages):
        calls.append(messages)
        return json.dumps({"response": {"flights": [{"flight_id": "OS123", "price": 100 + len(calls)}]}})

    sim = rulegym.Simulation({"dir": str(tmp_path)}, llm=llm)
    envs = [rulegym.ToolEnv(TASK, scorer, protocol="hermes", simulation=sim) for _ in range(8)]
    seen = []
    for env in envs:
        env.reset()
        seen.append(env.step(SEARCH)["observations"][0]["content"])
    assert len(set(seen)) == 1 and "OS123" in seen[0]
    assert len(calls) == 1, "one generation for the whole group"
    assert calls[0][0]["content"].startswith("You simulate the tool `search_flights`")
    entries = sim.mapping("trip-oslo-1")
    assert [e["tool"] for e in entries] == ["search_flights"]
    assert (tmp_path / "mappings" / "trip-oslo-1.json").is_file()
    assert sim.config["semantic_equivalence"] is True


def test_a_config_dict_means_the_process_wide_simulation(scorer, tmp_path):
    # Record a world, then serve it read-only through a config dict (as SkyRL and verl pass it).
    sim = rulegym.Simulation({"dir": str(tmp_path / "rec")}, llm=flights)
    env = rulegym.ToolEnv(TASK, scorer, simulation=sim)
    env.reset()
    env.step(SEARCH)
    config = {"seed_mappings": str(tmp_path / "rec" / "mappings")}
    a, b = rulegym.Simulation.shared(config), rulegym.Simulation.shared(dict(config))
    assert len(a.mapping("trip-oslo-1")) == 1 and len(b.mapping("trip-oslo-1")) == 1
    env = rulegym.ToolEnv(TASK, scorer, simulation=config)
    env.reset()
    assert "OS123" in env.step(SEARCH)["observations"][0]["content"]


def test_a_failed_simulation_is_an_observation_and_a_log_line(scorer, tmp_path, caplog):
    def down(messages):
        raise ConnectionError("simulator is down")

    sim = rulegym.Simulation({"dir": str(tmp_path), "user": "llm"}, llm=down)
    env = rulegym.ToolEnv(TASK, scorer, protocol="hermes", simulation=sim)
    env.reset()
    with caplog.at_level("WARNING", logger="rulegym"):
        out = env.step(SEARCH)
        assert not out["done"]
        assert '"error"' in out["observations"][0]["content"] and "simulator is down" in out["observations"][0]["content"]
        assert out["metadata"]["simulation_errors"][0]["tool"] == "search_flights"
        out = env.step("Where are you flying to?")
        assert out["observations"][0]["content"] == "(The user did not answer.)"
        assert "simulator is down" in out["metadata"]["user_error"]
    logged = [r.getMessage() for r in caplog.records if r.name == "rulegym"]
    assert any("tool simulation failed" in m for m in logged), logged
    assert any("user simulation failed" in m for m in logged), logged
    assert env.step("<answer>sorry</answer>")["done"]


@pytest.mark.parametrize(
    "config, message",
    [
        ({"endpoint": "http://127.0.0.1:9/v1"}, "needs `dir`"),
        ({"user": "llm"}, 'user "llm" needs an endpoint'),
        ({"endpiont": "http://127.0.0.1:9/v1"}, "unknown field `endpiont`"),
        ({"max_concurrency": 0}, "max_concurrency 0 must be 1-1024"),
        ({"user": "oracle"}, "unknown variant `oracle`"),
    ],
)
def test_bad_simulation_configs_are_clear_errors(config, message):
    with pytest.raises(rulegym.RulegymError, match=message.replace("(", r"\(")):
        rulegym.Simulation(config)
