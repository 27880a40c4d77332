"""Package-level checks: import time, errors, thread safety of environments, generation equal to
the CLI's."""

import json
import subprocess
import sys
import threading

import pytest

import rulegym
from conftest import QUESTIONS, UNIVERSE, run_cli


def test_import_under_half_a_second():
    code = "import time; t = time.perf_counter(); import rulegym; print(time.perf_counter() - t)"
    times = [float(subprocess.check_output([sys.executable, "-c", code])) for _ in range(3)]
    assert min(times) < 0.5, times


def test_errors_carry_the_rust_message(dataset):
    with pytest.raises(rulegym.RulegymError, match="unknown field `bogus`"):
        rulegym.generate_universe({"bogus": 1})
    with pytest.raises(rulegym.RulegymError, match="top_k must be in 1..=100"):
        rulegym.SearchEnv(str(dataset["index"]), "q", ["a"], config={"top_k": 0})
    with pytest.raises(rulegym.RulegymError):
        rulegym.Index(str(dataset["dir"] / "missing.bin"))
    env = rulegym.SearchEnv(str(dataset["index"]), "q", ["Ann"])
    env.reset()
    assert env.step("<answer> ann </answer>")["reward"] == 1.0
    with pytest.raises(rulegym.RulegymError, match="step after the episode ended"):
        env.step("<answer> a </answer>")


def test_generation_equals_cli(dataset, cli, tmp_path):
    out = tmp_path / "cli"
    run_cli(cli, "generate", "--out", str(out), "--quiet", "--seed", str(UNIVERSE["seed"]),
            "--num-family-trees", str(UNIVERSE["num_family_trees"]),
            "--max-family-tree-size", str(UNIVERSE["max_family_tree_size"]),
            "--families", ",".join(QUESTIONS["families"]), "--per-template", str(QUESTIONS["per_template"]),
            "--max-hops", str(QUESTIONS["max_hops"]))
    cli_bytes = (out / "questions.jsonl").read_bytes()
    assert rulegym.generate_questions_jsonl(UNIVERSE, QUESTIONS) == cli_bytes
    assert (dataset["dir"] / "questions.jsonl").read_bytes() == cli_bytes
    assert (dataset["dir"] / "articles.jsonl").read_bytes() == (out / "articles.jsonl").read_bytes()
    records = rulegym.generate_questions(UNIVERSE, QUESTIONS)
    assert records == [json.loads(l) for l in cli_bytes.decode().splitlines()]


def test_index_search(dataset):
    index = rulegym.Index(str(dataset["index"]))
    people = [json.loads(l)["name"] for l in (dataset["dir"] / "people.jsonl").read_text().splitlines()]
    assert len(index) == len(people)
    hits = index.search(people[:5], k=3)
    assert [len(h) for h in hits] == [3] * 5
    found = sum(h[0]["contents"].startswith(f'"{p}"') for p, h in zip(people, hits))
    assert found >= 4, hits
    assert all(h[0]["score"] >= h[1]["score"] >= h[2]["score"] for h in hits)


def test_environments_from_many_threads(dataset):
    """Episodes run concurrently on 8 threads (environments shared and not shared) give
    exactly the sequential results."""
    questions = [json.loads(l) for l in (dataset["dir"] / "questions.jsonl").read_text().splitlines()]
    people = [json.loads(l)["name"] for l in (dataset["dir"] / "people.jsonl").read_text().splitlines()]
    index = rulegym.Index(str(dataset["index"]))

    def episode(q, i):
        env = rulegym.SearchEnv(index, q["question"], q["answers"], config={"max_turns": 5})
        env.reset()
        outs = [env.step(f"<search> {people[(i + j) % len(people)]} </search>") for j in range(3)]
        outs.append(env.step(f"<answer> {', '.join(q['answers'][: 1 + i % 2])} </answer>"))
        return outs

    work = [(q, i) for i, q in enumerate(questions)] * 2
    sequential = [episode(q, i) for q, i in work]
    results = [None] * len(work)

    def worker(t):
        for k in range(t, len(work), 8):
            results[k] = episode(*work[k])

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == sequential

    # One environment stepped from several threads: steps are serialised, none lost.
    env = rulegym.SearchEnv(index, "q", ["a"], config={"max_turns": 1000})
    env.reset()
    def hammer():
        for _ in range(50):
            env.step("<search> x </search>")
    threads = [threading.Thread(target=hammer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert env.step("<answer> a </answer>")["metadata"]["turn"] == 201


def test_index_rewritten_in_place_is_reloaded(dataset, tmp_path):
    corpus = tmp_path / "small.jsonl"
    lines = (dataset["dir"] / "articles.jsonl").read_text().splitlines()
    corpus.write_text("\n".join(lines[:10]) + "\n")
    path = tmp_path / "ix.bin"
    rulegym.build_index(str(dataset["dir"] / "articles.jsonl"), str(path))
    assert len(rulegym.Index(str(path))) == len(lines)
    rulegym.build_index(str(corpus), str(path))
    assert len(rulegym.Index(str(path))) == 10


def test_wheel_installs_in_a_fresh_venv_without_rust(tmp_path):
    """The wheel CI built (RULEGYM_WHEEL) installs into a new venv with no Rust toolchain on
    PATH and works there."""
    import glob
    import os

    from conftest import skip_loudly

    wheels = glob.glob(os.environ.get("RULEGYM_WHEEL", ""))
    if not wheels:
        skip_loudly("RULEGYM_WHEEL is not set to the built wheel (scripts/test.sh sets it)")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", wheels[0]], check=True, env=env)
    code = ("import rulegym, numpy as np; a = np.empty(2, dtype=np.float32); "
            "rulegym.group_advantages(np.array([1, 0], dtype=np.float32), 2, a); "
            "print(rulegym.score('<answer> Ann </answer>', ['Ann'])['f1'], a[0] > 0)")
    out = subprocess.run([str(venv / "bin" / "python"), "-c", code], check=True, env=env,
                         capture_output=True, text=True).stdout.split()
    assert out == ["1.0", "True"]
