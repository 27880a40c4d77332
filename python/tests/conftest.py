"""Shared fixtures: a small generated dataset with its index, and the `rulegym` CLI binary."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import json

import pytest

import rulegym

REPO = Path(__file__).resolve().parents[2]

UNIVERSE = {"seed": 7, "num_family_trees": 8, "max_family_tree_size": 10}
QUESTIONS = {"families": ["base", "hops"], "per_template": 2, "max_hops": 4}


def skip_loudly(reason: str):
    """Skips with the reason printed to stderr (shown by pytest -s and in CI logs); a failure
    when `CI` is set, where scripts/test.sh installs everything the tests need."""
    print(f"SKIPPED: {reason}", file=sys.stderr)
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; CI is set, so this test may not be skipped", pytrace=False)
    pytest.skip(reason)


def import_or_skip(name: str):
    try:
        return __import__(name)
    except Exception as e:  # ImportError or a broken dependency
        skip_loudly(f"{name} is not importable here ({type(e).__name__}: {e})")


@pytest.fixture(scope="session")
def dataset(tmp_path_factory):
    """A dataset directory (universe, articles, questions) and a built-in-encoder index."""
    root = tmp_path_factory.mktemp("rulegym")
    out = root / "data"
    n = rulegym.generate_dataset(str(out), UNIVERSE, QUESTIONS)
    assert n > 0
    index = root / "index.bin"
    assert rulegym.build_index(str(out / "articles.jsonl"), str(index)) > 0
    return {"dir": out, "index": index}


@pytest.fixture(scope="session")
def cli():
    """Path of the `rulegym` binary (RULEGYM_BIN, else $CARGO_TARGET_DIR/release/rulegym, else
    target/release/rulegym)."""
    target_dir = os.environ.get("CARGO_TARGET_DIR")
    candidates = [
        os.environ.get("RULEGYM_BIN"),
        Path(target_dir) / "release" / "rulegym" if target_dir else None,
        REPO / "target" / "release" / "rulegym",
        shutil.which("rulegym"),
    ]
    for c in candidates:
        if c and Path(c).is_file() and os.access(c, os.X_OK):
            return str(c)
    skip_loudly("no rulegym CLI binary found (set RULEGYM_BIN or build target/release/rulegym)")


def run_cli(cli, *args, stdin=None):
    res = subprocess.run([cli, *args], input=stdin, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    return res.stdout


#: The trip task fixture (tools search_flights, book_flight, get_booking, refund_booking).
TRIP = REPO / "tests" / "fixtures" / "tools" / "trip.json"
#: What its one mapping-simulated tool answers in the mapping of :func:`trip_task_dir`.
FLIGHTS = {"flights": [{"flight_id": "OS123", "price": 120}, {"flight_id": "OS456", "price": 180}]}


def trip_task_dir(tmp_path):
    """The trip task with a mapping for its one mapping-simulated tool (search_flights)."""
    import shutil

    shutil.copy(TRIP, tmp_path / "trip.json")
    (tmp_path / "mappings").mkdir()
    entry = {
        "tool": "search_flights",
        "args": json.dumps({"date": "2024-06-03", "destination": "Oslo"}, separators=(",", ":")),
        "response": FLIGHTS,
    }
    (tmp_path / "mappings" / "trip-oslo-1.json").write_text(
        json.dumps({"task": "trip-oslo-1", "entries": [entry]})
    )
    return tmp_path / "trip.json"


def unrelated_person(people, gold):
    """A person's name sharing no word with any gold answer (token-level F1 0 against it)."""
    words = {w.lower() for g in gold for w in g.split()}
    return next(p for p in people if not words & {w.lower() for w in p.split()})


def venv_python(env_var: str, venv: str) -> str:
    """The interpreter of a test venv of its own (one whose pins conflict with this venv's),
    named by `env_var`; a loud skip (a failure under CI) when it is missing."""
    py = os.environ.get(env_var)
    if not py or not Path(py).is_file():
        skip_loudly(f"no {venv} ({env_var}; scripts/test.sh makes it)")
    return py


#: The trip task's reference solution as tool calls (every rubric item passes: reward 1).
TRIP_CALLS = [
    ["ask_user", {"question": "Where are you going?"}],
    ["ask_user", {"question": "On which date do you fly?"}],
    ["search_flights", {"destination": "Oslo", "date": "2024-06-03"}],
    ["book_flight", {"flight_id": "OS123", "date": "2024-06-03"}],
    ["finish", {"summary": "Your flight OS123 is booked."}],
]


def tool_reward(task, calls, mappings):
    """The rubric reward rulegym's own tool-use environment gives `calls` on `task` (the
    reference for every protocol that serves the task)."""
    import rulegym.trl as rt

    env_cls = next(iter(rt.tool_environments([{"environment": "task", "task": task}],
                                             simulation={"seed_mappings": str(mappings)}).values()))
    env = env_cls()
    env.reset(task=task)
    for name, args in calls:
        getattr(env, name)(**args)
    return env.get_reward()
