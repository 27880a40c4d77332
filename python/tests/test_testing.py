"""rulegym.testing: check_reward in process for the three signatures, the real peers (verl
0.9.1's search_r1_like_qa_em through its own code), the reward-check CLI running a Python reward
command, and the Hypothesis strategies."""

import json
import subprocess
import sys

import pytest

import rulegym
from conftest import REPO, import_or_skip
from rulegym.testing import PROPERTIES, check_reward, questions, responses, universe

CASES = 600
WORLD = dict(seed=5, trees=8)


def failed(report):
    return {f["property"] for f in report["failures"]}


def test_rulegym_rewards_pass_every_property_in_every_signature():
    import rulegym.trl
    import rulegym.verl

    def plain(response, answers):
        return rulegym.trl.f1_reward([response], answers=[answers])[0]

    for fn, signature in [
        (plain, "plain"),
        (rulegym.trl.f1_reward, "trl"),
        (rulegym.verl.compute_score, "verl"),
    ]:
        report = check_reward(fn, signature, cases=CASES, **WORLD)
        assert report["passed"], (signature, report["failures"])
        assert [p["property"] for p in report["properties"]][: len(PROPERTIES)] == PROPERTIES
        assert all(p["tried"] > 0 for p in report["properties"]), report["properties"]


def test_planted_bug_is_caught_with_a_minimal_counterexample():
    # Case-sensitive exact match of the last tag against any gold item.
    def buggy(response, answers):
        if "<answer>" not in response or "</answer>" not in response:
            return 0.0
        inner = response.rsplit("<answer>", 1)[1].split("</answer>", 1)[0]
        return 1.0 if inner in answers else 0.0

    report = check_reward(buggy, cases=CASES, **WORLD)
    assert not report["passed"]
    f = next(f for f in report["failures"] if f["property"] == "subset_below_one")
    assert len(f["input"]["answers"]) == 2
    assert f["input"]["response"].startswith("<answer>") and f["got"] == 1.0
    assert f["expected"] == "< 1"


def test_a_reward_that_is_not_a_number_is_an_error_as_on_the_cli():
    def textual(response, answers):
        return "1"

    with pytest.raises(rulegym.RulegymError, match="TypeError: a reward must be a number, got str '1'"):
        check_reward(textual, cases=10, **WORLD)
    # Numbers of any kind, verl's {"score": x} and None (no reward) are accepted.
    report = check_reward(lambda r, a: {"score": 0}, cases=10, **WORLD)
    assert set(report) >= {"passed", "properties", "failures"}


def test_verl_search_r1_like_qa_em_treats_the_gold_list_as_alternatives():
    import_or_skip("verl")
    from verl.utils.reward_score import default_compute_score
    from verl.utils.reward_score import search_r1_like_qa_em

    # The example, through verl's own code.
    gold = {"target": ["Mac Neuman", "Carly Neuman"]}
    assert search_r1_like_qa_em.compute_score("<answer>Mac Neuman, Carly Neuman</answer>", gold) == 0
    assert search_r1_like_qa_em.compute_score("<answer>Mac Neuman</answer>", gold) == 1

    # verl's dispatcher, as a verl user's reward manager calls it for Search-R1 data.
    def verl_reward(data_source, solution_str, ground_truth, extra_info=None):
        return default_compute_score("searchR1_nq", solution_str, ground_truth, extra_info)

    report = check_reward(verl_reward, "verl", cases=CASES, **WORLD)
    assert {"gold_renderings", "subset_below_one"} <= failed(report), report["failures"]
    subset = next(f for f in report["failures"] if f["property"] == "subset_below_one")
    assert len(subset["input"]["answers"]) == 2 and subset["got"] == 1.0


def run_peer(cli, tmp_path, peer):
    """`rulegym reward-check` on a scripts/reward-peer.py reward command: (process, report)."""
    out = tmp_path / "report.json"
    cmd = f"{sys.executable} {REPO / 'scripts' / 'reward-peer.py'} {peer}"
    proc = subprocess.run(
        [cli, "reward-check", "--cmd", cmd, "--seed", "5", "--trees", "8", "--cases", "600", "--out", str(out)],
        capture_output=True,
        text=True,
    )
    return proc, (json.loads(out.read_text()) if out.exists() else None)


def test_cli_runs_a_python_reward_command(cli, tmp_path):
    # rulegym's reward through its TRL signature, as a reward command in Python.
    proc, report = run_peer(cli, tmp_path, "rulegym-trl")
    assert proc.returncode == 0, proc.stderr
    assert report["passed"] and report["cases"] == 600


def test_cli_reports_verl_peer_failures(cli, tmp_path):
    import_or_skip("verl")
    proc, report = run_peer(cli, tmp_path, "verl-search-r1")
    assert proc.returncode == 1, proc.stderr
    assert "subset_below_one" in failed(report)


def test_hypothesis_strategies_drive_a_users_test():
    import rulegym.trl

    hyp = import_or_skip("hypothesis")
    given, settings = hyp.given, hyp.settings
    world = universe(**WORLD)

    @settings(max_examples=150, deadline=None, derandomize=True)
    @given(responses(world))
    def exact_reward_holds(case):
        got = rulegym.trl.f1_reward([case.response], answers=[case.answers])[0]
        assert got == pytest.approx(case.expected)
        base = None
        if case.base_response is not None:
            base = rulegym.trl.f1_reward([case.base_response], answers=[case.answers])[0]
        assert case.holds(got, base), case

    exact_reward_holds()

    seen = []

    @settings(max_examples=30, deadline=None, derandomize=True)
    @given(questions(world).flatmap(lambda q: responses(q).map(lambda c: (q, c))))
    def responses_stay_on_their_question(qc):
        q, c = qc
        assert c.question == q.question and list(c.answers) == list(q.answers)
        seen.append(c.property)

    responses_stay_on_their_question()
    assert len(set(seen)) > 3

    # A planted bug fails a Hypothesis test: "any gold item matches" scores a subset 1.
    @settings(max_examples=300, deadline=None, derandomize=True, database=None)
    @given(responses(world))
    def alternatives_reward(case):
        inner = case.response.split("<answer>")[-1].split("</answer>")[0] if "</answer>" in case.response else ""
        got = 1.0 if any(rulegym.normalize_answer(a) == rulegym.normalize_answer(inner) for a in case.answers) else 0.0
        if case.base_response is None:
            assert case.holds(got), case

    with pytest.raises(AssertionError):
        alternatives_reward()


def test_tool_use_rubric_rewards():
    from rulegym.testing import TOOL_PROPERTIES, check_tool_reward, tool_tasks, trajectories

    source = tool_tasks(seed=5, trees=30, tasks=8)
    def rubric(task, messages):
        return source.exact_reward(task, messages)

    report = check_tool_reward(rubric, source=source, cases=32)
    assert report["passed"], report["failures"]
    assert [p["property"] for p in report["properties"]][: len(TOOL_PROPERTIES)] == TOOL_PROPERTIES

    # A planted bug: a reward that ignores forbidden actions.
    def lenient(task, messages):
        return 1.0 if any("<answer>" in (m.get("content") or "") for m in messages) else 0.0

    report = check_tool_reward(lenient, source=source, cases=32)
    assert "forbidden_scores_zero" in failed(report)

    hyp = import_or_skip("hypothesis")

    @hyp.settings(max_examples=20, deadline=None, derandomize=True)
    @hyp.given(trajectories(source))
    def rubric_holds(case):
        assert case.holds(rubric(case.task, case.messages)), case

    rubric_holds()


def test_audit_trl_completions_reads_a_hand_written_log(dataset, tmp_path):
    """TRL's completions table written by hand: message-list and string prompts/completions,
    two reward columns (rulegym's exact reward and a planted one that pays any answer tag), a
    text ``log_extra`` column, an ``id`` column, a NaN reward, a repeated step."""
    pa = import_or_skip("pyarrow")
    import pyarrow.parquet as pq

    from rulegym.testing import audit_trl_completions
    from rulegym.trl import f1_reward

    qs = [json.loads(line) for line in (dataset["dir"] / "questions.jsonl").read_text().splitlines()][:6]
    gold = [", ".join(q["answers"]) for q in qs]
    chat = lambda text: [{"role": "user", "content": f"Answer the question. Question: {text}\n"}]
    said = lambda *texts: [{"role": "assistant", "content": t} for t in texts]
    step1 = [  # (question, completion, tag_reward)
        (0, said(f"<think>x</think><answer>{gold[0]}</answer>"), 1.0),
        (1, said("<answer>Nobody Atall</answer>"), 1.0),                       # overpaid
        (2, said("<answer>Nobody Atall</answer>", f"<answer>{gold[2]}</answer>"), 1.0),  # last message
        (3, said("no tag at all"), float("nan")),                               # an error
    ]
    step2 = [
        (4, "<answer>Nobody Atall</answer>", 1.0),                               # overpaid
        (5, f"<answer>{gold[5]}</answer>", 1.0),
    ]
    folder = tmp_path / "out" / "completions"
    folder.mkdir(parents=True)

    def write(step, rows, prompt, ids=None):
        completions = [c for _, c, _ in rows]
        table = {
            "step": [step] * len(rows),
            "prompt": [prompt(qs[i]["question"]) for i, _, _ in rows],
            "completion": completions,
            "f1_reward": f1_reward(completions, [qs[i]["answers"] for i, _, _ in rows]),
            "tag_reward": [t for _, _, t in rows],
            "note": ["a text column from log_extra"] * len(rows),
            "advantage": [0.0] * len(rows),
        }
        if ids is not None:
            table["id"] = ids
        pq.write_table(pa.table(table), folder / f"completions_{step:05d}.parquet")

    write(1, step1, chat)
    # A few-shot prompt of another template: the question asked is the one that ends last.
    few_shot = lambda text: f"Q: {qs[0]['question']}\nA: {gold[0]}\n\nQ: {text}\nA:"
    write(2, step2, few_shot, ids=[qs[4]["id"], None])
    write(10, step2, few_shot, ids=[qs[4]["id"], None])  # the same batch logged again

    with pytest.raises(ValueError, match="reward columns: f1_reward, tag_reward"):
        audit_trl_completions(tmp_path / "out", dataset["dir"])
    with pytest.raises(ValueError, match="'note' holds no numbers"):
        audit_trl_completions(tmp_path / "out", dataset["dir"], reward="note")

    exact = audit_trl_completions(tmp_path / "out", dataset["dir"], reward="f1_reward")
    assert exact["diverge"] == 0 and not exact["errors"], exact
    assert exact["rollouts"] == 6 and exact["steps"] == [1, 2] and exact["repeated_steps"] == [10]
    assert exact["mean_exact"] == pytest.approx(3 / 6)

    planted = audit_trl_completions(folder, dataset["dir"], reward="tag_reward")
    assert planted["rollouts"] == 5 and planted["diverge"] == 2, planted
    assert planted["overpaid"] == pytest.approx(2.0)
    assert planted["by_property"]["wrong_scores_zero"]["count"] == 2
    examples = planted["by_property"]["wrong_scores_zero"]["examples"]
    assert [(e["step"], e["row"], e["line"]) for e in examples] == [(1, 2, 2), (2, 1, 5)]
    assert planted["by_step"] == {1: {"rollouts": 3, "diverge": 1, "overpaid": 1.0},
                                  2: {"rollouts": 2, "diverge": 1, "overpaid": 1.0}}
    [error] = planted["errors"]
    assert (error["step"], error["row"], error["line"]) == (1, 4, 4) and "NaN" in error["message"]

    # One file; without a dataset the rows have no gold answers (errors, nothing dropped).
    one = audit_trl_completions(folder / "completions_00001.parquet", dataset["dir"], reward="tag_reward")
    assert one["rollouts"] == 3 and one["diverge"] == 1
    blind = audit_trl_completions(folder, reward="f1_reward")
    assert blind["rollouts"] == 0 and len(blind["errors"]) == 6
    assert all("no gold answers" in e["message"] for e in blind["errors"])
    with pytest.raises(FileNotFoundError, match="log_completions=True"):
        audit_trl_completions(tmp_path)
