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
