"""`rulegym openenv` driven by the `openenv` package's own clients (0.10: `GenericEnvClient`,
`MCPToolClient`, async and sync, WebSocket and HTTP `/mcp`), and checked by `openenv validate`.

openenv's fastmcp needs mcp < 2 while the suite pins mcp 2.3.0, so openenv lives in its own
venv (scripts/test.sh makes `.venv-openenv` and sets RULEGYM_OPENENV_PYTHON); the clients run
there as `openenv_client.py`, and this file compares what they saw with `rulegym score` and
with rulegym's own tool-use environment."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FLIGHTS, REPO, TRIP, TRIP_CALLS, tool_reward, trip_task_dir, unrelated_person, venv_python

CLIENT = Path(__file__).with_name("openenv_client.py")


@pytest.fixture(scope="module")
def openenv_python():
    return venv_python("RULEGYM_OPENENV_PYTHON", ".venv-openenv")


class Server:
    """A `rulegym openenv ... --port 0` process."""

    def __init__(self, cli, args):
        self.proc = subprocess.Popen([cli, "openenv", *args, "--port", "0"], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        line = self.proc.stderr.readline()
        m = re.search(r"(http://\S+) ", line)
        assert m, f"no address on stderr: {line!r} (exit {self.proc.poll()})"
        self.url = m.group(1)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        alive = self.proc.poll() is None
        self.proc.terminate()
        self.proc.wait(timeout=30)
        assert alive, "the server died during the test"


def client(py, mode, url, spec, timeout=600):
    res = subprocess.run([py, str(CLIENT), mode, url, json.dumps(spec)], capture_output=True, text=True,
                         timeout=timeout)
    assert res.returncode == 0, f"openenv client ({mode}) failed:\n{res.stdout}\n{res.stderr}"
    return json.loads(res.stdout.strip().splitlines()[-1])


def rulegym_score(cli, items):
    """`rulegym score` over (answers, prediction) lines: the reference reward."""
    lines = "".join(json.dumps({"answers": i["answers"], "prediction": i["prediction"]}) + "\n" for i in items)
    res = subprocess.run([cli, "score"], input=lines, capture_output=True, text=True, timeout=120, check=True)
    return [json.loads(l)["f1"] for l in res.stdout.splitlines()]


def load_questions(dataset):
    return [json.loads(l) for l in (dataset["dir"] / "questions.jsonl").read_text().splitlines()]


def search_spec(dataset):
    questions = load_questions(dataset)
    train = [q for q in questions if q["split"] == "train"]
    people = [json.loads(l)["name"] for l in (dataset["dir"] / "people.jsonl").read_text().splitlines()]
    multi = [q for q in train if len(q["answers"]) > 1][:4]
    single = [q for q in train if len(q["answers"]) == 1][:4]
    answers = []
    for q in multi + single:
        gold = q["answers"]
        wrong = unrelated_person(people, gold)
        answers += [
            {"id": q["id"], "answers": gold, "prediction": ", ".join(gold)},
            {"id": q["id"], "answers": gold, "prediction": ", ".join(reversed(gold)).upper()},
            {"id": q["id"], "answers": gold, "prediction": gold[0]},
            {"id": q["id"], "answers": gold, "prediction": f"{gold[0]}, {wrong}"},
            {"id": q["id"], "answers": gold, "prediction": wrong},
            {"id": q["id"], "answers": gold, "prediction": ""},
        ]
    concurrent = []
    for i, q in enumerate(train[:32]):
        wrong = unrelated_person(people, q["answers"])
        concurrent.append({"id": q["id"], "answers": q["answers"],
                           "prediction": ", ".join(q["answers"]) if i % 2 == 0 else wrong})
    return {
        "questions": [{"id": q["id"], "question": q["question"], "answers": q["answers"]} for q in train[:3]],
        "person": people[0],
        "wrong": unrelated_person(people, train[2]["answers"]),
        "answers": answers,
        "concurrent": concurrent,
        "max_turns": 10,
        "splits": list(dict.fromkeys(q["split"] for q in questions)),
        "env_name": "rulegym_search",
        "num_train": len(train),
        "first_train": train[0]["id"],
    }


def test_search_environment_over_openenv(cli, dataset, openenv_python):
    spec = search_spec(dataset)
    assert len(spec["concurrent"]) == 32
    with Server(cli, ["--dataset", str(dataset["dir"]), "--index", str(dataset["index"])]) as server:
        seen = client(openenv_python, "search", server.url, spec)
    assert seen["tools"] == ["answer", "get_article", "search"]
    # The reward on the protocol is rulegym's exact reward, answer for answer.
    reference = rulegym_score(cli, seen["scored"])
    got = [s["reward"] for s in seen["scored"]]
    assert got == reference, list(zip(seen["scored"], reference))
    assert {0.0, 1.0} <= set(got) and any(0.0 < r < 1.0 for r in got), got
    # 32 sessions at once, each scored on its own question.
    assert [c["reward"] for c in seen["concurrent"]] == rulegym_score(cli, seen["concurrent"])
    assert [c["reward"] for c in seen["concurrent"]] == [1.0 if i % 2 == 0 else 0.0 for i in range(32)]
    assert seen["mcp_async"] == 1.0 and seen["sync_gold"] == 1.0


def test_tool_use_task_over_openenv(cli, tmp_path, openenv_python):
    task_file = trip_task_dir(tmp_path)
    task = json.loads(TRIP.read_text())
    calls = TRIP_CALLS
    spec = {"task_id": task["id"], "instruction": task["instruction"],
            "tools": [t["name"] for t in task["tools"]], "calls": calls}
    with Server(cli, ["--tasks", str(task_file)]) as server:
        seen = client(openenv_python, "tools", server.url, spec)
    assert seen["texts"][0] == "Oslo." and json.loads(seen["texts"][2]) == FLIGHTS
    # The same calls in rulegym's own tool-use environment give the same rubric reward.
    assert seen["reward"] == tool_reward(task, calls, tmp_path / "mappings") == 1.0
    assert seen["mcp_reward"] == 1.0


def test_dropped_clients_leak_nothing(cli, dataset, openenv_python):
    """200 WebSocket sessions cut mid-episode and 200 HTTP sessions never closed: all are
    reclaimed (sockets at once, abandoned HTTP sessions by the idle timeout)."""
    args = ["--dataset", str(dataset["dir"]), "--index", str(dataset["index"]), "--idle-timeout", "2"]
    with Server(cli, args) as server:
        seen = client(openenv_python, "drop", server.url, {"n": 200, "http": 200, "wait_s": 30})
    assert seen["sessions"] == 0 and seen["sessions_ended"] >= 400, seen


def test_openenv_validate(cli, dataset, openenv_python):
    """`openenv validate --url` against the running server (OpenAPI version, health, metadata,
    schema, JSON-RPC /mcp, mode contract) and `--level static` on the package directory."""
    cli_path = str(Path(openenv_python).with_name("openenv"))
    package = REPO / "deploy" / "openenv"
    with Server(cli, ["--dataset", str(dataset["dir"]), "--index", str(dataset["index"])]) as server:
        seen = client(openenv_python, "validate", server.url, {"openenv_cli": cli_path, "package": str(package)})
    assert seen["mode"] == "simulation", seen


def test_bad_flags_are_errors(cli, tmp_path):
    res = subprocess.run([cli, "openenv", "--dataset", str(tmp_path / "missing"), "--port", "0"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode != 0 and "missing" in res.stderr, res.stderr
    res = subprocess.run([cli, "openenv", "--tasks", str(TRIP), "--call-timeout", "0", "--port", "0"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode != 0 and "--call-timeout" in res.stderr, res.stderr


def doc_block(lang, marker):
    """The one ```lang block of docs/protocols.md that contains marker."""
    text = (REPO / "docs" / "protocols.md").read_text()
    found = [b for b in re.findall(rf"```{lang}\n(.*?)```", text, re.S) if marker in b]
    assert len(found) == 1, (marker, len(found))
    return found[0]


def test_protocols_doc_openenv_block(cli, tmp_path, openenv_python):
    """docs/protocols.md: the shell block's generate line and the client block, as written."""
    sh = doc_block("sh", "rulegym openenv --dataset data")
    generate = next(l for l in sh.splitlines() if l.startswith("rulegym generate"))
    subprocess.run([cli, *generate.split()[1:]], cwd=tmp_path, check=True, capture_output=True)
    code = doc_block("python", "GenericEnvClient")
    with Server(cli, ["--dataset", str(tmp_path / "data")]) as server:
        res = subprocess.run([openenv_python, "-c", code], capture_output=True, text=True, timeout=300,
                             cwd=tmp_path, env=dict(os.environ, OPENENV_URL=server.url))
    assert res.returncode == 0, res.stderr[-4000:]
    assert res.stdout.strip().splitlines()[-1] == "reward 0.0 done True", res.stdout
