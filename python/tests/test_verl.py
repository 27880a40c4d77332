"""verl adapter: `compute_score` agrees with `rulegym score` on 1,000 pairs; the search tool core
returns Search-R1 passages; the verl `BaseTool` subclass is tested when verl imports."""

import asyncio
import json
import random

import rulegym
from conftest import import_or_skip, run_cli
from rulegym.verl import SearchToolCore, compute_score


def make_pairs(questions, n, seed=0):
    """Predictions of every kind a model writes: exact, partial, extra items, case and
    punctuation variants, articles, tags (several, unclosed), empty, yes/no, garbage."""
    rng = random.Random(seed)
    names = sorted({a for q in questions for a in q["answers"]})
    pairs = []
    for i in range(n):
        gold = questions[i % len(questions)]["answers"]
        k = i % 12
        if k == 0:
            pred = ", ".join(gold)
        elif k == 1:
            pred = f"<answer> {', '.join(gold)} </answer>"
        elif k == 2:
            pred = ", ".join(gold[: max(1, len(gold) // 2)])
        elif k == 3:
            pred = ", ".join(gold + [rng.choice(names)])
        elif k == 4:
            pred = ", ".join(f"The {g.upper()}." for g in gold)
        elif k == 5:
            pred = f"<answer>{rng.choice(names)}</answer> then <answer>{', '.join(gold)}</answer>"
        elif k == 6:
            pred = f"<answer>{', '.join(gold)}"
        elif k == 7:
            pred = ""
        elif k == 8:
            pred = rng.choice(["yes", "no", "<answer>no</answer>"])
        elif k == 9:
            pred = "".join(rng.choice("abc ,.<>/") for _ in range(rng.randint(0, 40)))
        elif k == 10:
            pred = ", ".join(rng.sample(names, min(3, len(names))))
        else:
            pred = "  " + " ,  ".join(g.lower() for g in reversed(gold)) + " ,"
        pairs.append({"answers": gold, "prediction": pred})
    return pairs


def test_compute_score_agrees_with_cli_on_1000_pairs(dataset, cli, tmp_path):
    questions = [json.loads(l) for l in (dataset["dir"] / "questions.jsonl").read_text().splitlines()]
    pairs = make_pairs(questions, 1000)
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in pairs))
    expected = [json.loads(l)["f1"] for l in run_cli(cli, "score", "--pairs", str(path)).splitlines()]
    assert len(expected) == 1000
    # The response's last answer tag is what is scored (as the CLI scores a tagged prediction);
    # a response without one scores 0 (paying untagged text is a format exploit: rulegym
    # reward-check's no_tag_scores_zero). An untagged prediction inside a tag scores as the CLI
    # scores the plain prediction.
    got = []
    for p in pairs:
        gt = {"target": p["answers"]}
        direct = compute_score("rulegym_search", p["prediction"], gt, {})
        if rulegym.last_answer([p["prediction"]]) is None:
            assert direct == 0.0, p
            got.append(compute_score("rulegym_search", f"<think>x</think><answer>{p['prediction']}</answer>", gt, {}))
        else:
            got.append(direct)
    mismatches = [(p, e, g) for p, e, g in zip(pairs, expected, got) if e != g]
    assert not mismatches, mismatches[:5]
    # The pairs exercise every outcome, not just one.
    assert {1.0, 0.0} <= set(got) and any(0.0 < x < 1.0 for x in got)
    # Ground truth in every shape verl rows carry it.
    p = pairs[0]
    tagged = p["prediction"] if rulegym.last_answer([p["prediction"]]) else f"<answer>{p['prediction']}</answer>"
    assert compute_score(None, tagged, p["answers"]) == got[0]
    assert compute_score(None, tagged, ", ".join(p["answers"])) == got[0]


def test_search_tool_core(dataset):
    core = SearchToolCore({"index_path": str(dataset["index"]), "top_k": 2})
    person = json.loads((dataset["dir"] / "people.jsonl").read_text().splitlines()[0])["name"]

    async def episode():
        iid = await core.create()
        text, reward, metrics = await core.execute_text(iid, {"query_list": [person]})
        bad, _, _ = await core.execute_text(iid, {"query": "  "})
        await core.release(iid)
        return text, reward, metrics, bad

    text, reward, metrics, bad = asyncio.run(episode())
    assert text.startswith("Doc 1(Title: ") and "Doc 2(Title: " in text and person in text
    assert reward == 0.0 and metrics == {"queries": 1}
    assert bad.startswith("Error:")


def test_verl_base_tool(dataset):
    import_or_skip("verl.tools.base_tool")
    from rulegym.verl import SearchTool

    tool = SearchTool({"index_path": str(dataset["index"]), "top_k": 1})

    async def episode():
        iid, _ = await tool.create()
        resp, reward, _ = await tool.execute(iid, {"query_list": ["doctor"]})
        await tool.release(iid)
        return resp

    assert asyncio.run(episode()).text.startswith("Doc 1(Title: ")
