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


def test_tool_env_good_episode_scores_one(scorer):
    env = rulegym.ToolEnv(TASK, scorer, protocol="hermes", max_turns=8, mapping_llm=flights)
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


def test_tool_env_garbage_scores_zero(scorer):
    env = rulegym.ToolEnv(json.loads(TASK), scorer, max_turns=3, mapping_llm=flights)
    env.reset()
    done = False
    while not done:
        out = env.step("<tool_call>{oops</tool_call> blah")
        done = out["done"]
    assert out["reward"] == 0.0
