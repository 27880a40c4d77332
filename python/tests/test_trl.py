"""rulegym.trl against TRL's own GRPOTrainer: one CPU training step on a tiny locally built
model, single-turn (reward_funcs) and multi-turn (environment_factory with TRL's tool-calling
loop), over rows written by `rulegym export --format trl`.

The policy is a tiny Llama whose `generate` is scripted (it writes the gold answer for some
prompts, a wrong one for the others), so the rewards TRL computes and logs are known in
advance; everything else (tokenising, the tool loop, response parsing, reward weighting and
logging, the loss and the optimiser step) is TRL's and transformers' code."""

import json
import re
from pathlib import Path

import pytest

import rulegym
from conftest import import_or_skip, run_cli

torch = import_or_skip("torch")
trl = import_or_skip("trl")
transformers = import_or_skip("transformers")
datasets = import_or_skip("datasets")

from rulegym.trl import (  # noqa: E402
    RowError,
    SearchEnvironment,
    check_rows,
    f1_reward,
    format_reward,
    tool_environments,
)


@pytest.fixture(scope="module")
def trl_rows(cli, tmp_path_factory):
    """TRL rows of a small generated dataset (CLI `generate` and `export --format trl`)."""
    root = tmp_path_factory.mktemp("trl")
    data = root / "data"
    run_cli(cli, "generate", "--quiet", "--seed", "3", "--num-family-trees", "4", "--out", str(data))
    out = root / "rows.jsonl"
    run_cli(cli, "export", "--format", "trl", "--dataset", str(data), "--out", str(out))
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows and all(r["environment"] == "rulegym_search" for r in rows)
    return {"rows": rows, "file": out, "data": data}


def tiny_tokenizer(directory, chat_template=None):
    from chat_tokenizer import make_tokenizer

    tok = make_tokenizer(directory)
    if chat_template is not None:
        tok.chat_template = chat_template
    tok.padding_side = "left"
    return tok


class Scripted:
    """The scripted part of the policy: the completion text for a decoded context."""

    def __init__(self, script):
        self.script = script


def scripted_model(tok, script):
    """A 2-layer Llama over the tokenizer's vocabulary whose `generate` appends the tokens of
    `script(context_text)` (then EOS, then padding) to each row of the batch."""
    from transformers import LlamaConfig, LlamaForCausalLM

    class ScriptedLlama(LlamaForCausalLM):
        def generate(self, input_ids=None, attention_mask=None, **kwargs):
            rows = []
            for ids, mask in zip(input_ids, attention_mask):
                context = tok.decode(ids[mask.bool()], skip_special_tokens=False)
                text = script(context)
                rows.append(tok(text, add_special_tokens=False)["input_ids"] + [tok.eos_token_id])
            width = max(len(r) for r in rows)
            out = torch.full((len(rows), width), tok.pad_token_id, dtype=input_ids.dtype)
            for i, r in enumerate(rows):
                out[i, : len(r)] = torch.tensor(r, dtype=input_ids.dtype)
            return torch.cat([input_ids, out], dim=1)

    config = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=4096,
                         pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, bos_token_id=None)
    torch.manual_seed(0)
    return ScriptedLlama(config)


def grpo_config(tmp_path, **kw):
    from trl import GRPOConfig

    kw = {"max_steps": 1, **kw}
    return GRPOConfig(output_dir=str(tmp_path / "out"), use_cpu=True, num_generations=2,
                      per_device_train_batch_size=4, logging_steps=1, save_strategy="no",
                      report_to="none", beta=0.0, loss_type="dapo", learning_rate=1e-3, seed=0,
                      dataloader_num_workers=0, **kw)


NAME = re.compile(r"[A-Z][a-z]+(?: [A-Z][a-z]+)+")


def named(rows):
    """Questions of one hop from a named person (the answer is in that person's article)."""
    return [r for r in rows if r["hops"] == 1 and NAME.search(r["question"])]


def gold_for(rows):
    return {r["question"]: r for r in rows}


def question_in(context, by_question):
    # The last question of the context (the prompt ends with it).
    found = [q for q in by_question if q in context]
    assert found, context[-300:]
    return max(found, key=lambda q: context.rfind(q))


def gold_then_wrong(by_question):
    """A scripted policy that alternates the gold answer and a wrong one, both in answer tags:
    each GRPO group of 2 gets one of each. ``script.calls["n"]`` counts the generations."""
    calls = {"n": 0}

    def script(context):
        calls["n"] += 1
        r = by_question[question_in(context, by_question)]
        return f"<answer>{', '.join(r['answers'])}</answer>" if calls["n"] % 2 else "<answer>Nobody Atall</answer>"

    script.calls = calls
    return script


def logged(trainer, key):
    values = [h[key] for h in trainer.state.log_history if key in h]
    assert values, f"TRL logged no {key}: {trainer.state.log_history}"
    return values[-1]


def test_rewards_are_rulegyms_exact_reward(trl_rows):
    rows = trl_rows["rows"][:12]
    multi = next(r for r in trl_rows["rows"] if len(r["answers"]) > 1)
    rows.append(multi)
    completions, answers, expected = [], [], []
    for r in rows:
        gold = ", ".join(r["answers"])
        for text in (f"<think>x</think><answer>{gold}</answer>", f"<answer>{r['answers'][0]}</answer>",
                     "<answer>Nobody Atall</answer>", "no tags at all", f"<search>{gold}</search><answer>{gold}</answer>"):
            completions.append([{"role": "assistant", "content": text}])
            answers.append(r["answers"])
            env = rulegym.SearchEnv(trl_rows["rows"][0]["index_path"], r["question"], r["answers"])
            env.reset()
            step = env.step(text)
            expected.append(step["reward"] if step["done"] else 0.0)
    got = f1_reward(completions, answers, question=[None] * len(completions))
    assert got == expected
    # One answer tag: the number rulegym.score gives.
    for c, a, g in zip(completions, answers, got):
        text = c[0]["content"]
        if text.count("<answer>") == 1 and "<search>" not in text:
            assert g == rulegym.score(text, a)["f1"]
    assert 0.0 < rulegym.score(f"<answer>{multi['answers'][0]}</answer>", multi["answers"])["f1"] < 1.0
    tags = format_reward(completions, answers)
    assert tags == [1.0, 1.0, 1.0, 0.0, 0.0] * len(rows)


def test_bad_rows_are_clear_errors(trl_rows, tmp_path):
    row = dict(trl_rows["rows"][0])
    with pytest.raises(RowError, match="answers"):
        check_rows([{**row, "answers": []}])
    with pytest.raises(RowError, match="answers"):
        f1_reward(["<answer>x</answer>"], [None])
    with pytest.raises(RowError, match="does not exist"):
        check_rows([{**row, "index_path": str(tmp_path / "missing.idx")}])
    with pytest.raises(RowError, match="not one of"):
        check_rows([{**row, "environment": "elsewhere"}], ["rulegym_search"])
    env = SearchEnvironment()
    with pytest.raises(RowError, match="does not exist"):
        env.reset(**{**row, "index_path": str(tmp_path / "missing.idx")})
    with pytest.raises(RowError, match="task"):
        tool_environments([{"environment": "x"}])
    assert check_rows(trl_rows["rows"], ["rulegym_search"]) == len(trl_rows["rows"])


def test_rows_load_with_datasets(trl_rows):
    data = datasets.load_dataset("json", data_files=str(trl_rows["file"]), split="train")
    assert len(data) == len(trl_rows["rows"])
    assert data[0]["prompt"] == trl_rows["rows"][0]["prompt"]
    assert data[0]["answers"] == trl_rows["rows"][0]["answers"]


def test_search_environment_tools(trl_rows):
    row = named(trl_rows["rows"])[0]
    env = SearchEnvironment()
    assert env.reset(**row) is None
    passages = env.search(row["question"])
    assert "Doc 1(Title:" in passages
    name = NAME.findall(row["question"])[-1]
    article = env.get_article(name)
    assert name in article
    assert "No article" in env.get_article("Nobody Atall")
    assert env.get_reward() == 0.0
    env.answer(", ".join(row["answers"]))
    assert env.get_reward() == 1.0
    # After the end a call is refused (TRL shows the model {"error": ...}).
    with pytest.raises(rulegym.RulegymError, match="episode is over"):
        env.search("more")
    # The turn cap: every tool call is a turn; the last one ends the episode with reward 0.
    env.reset(**row)
    for _ in range(env._session.opening()["max_turns"] - 1):
        env.get_article(name)
    assert env.get_article(name) == "Episode over (turn cap reached without an answer). Score: 0."
    with pytest.raises(rulegym.RulegymError, match="episode is over"):
        env.answer(", ".join(row["answers"]))
    assert env.get_reward() == 0.0


def test_one_grpo_step_single_turn(trl_rows, tmp_path):
    from datasets import Dataset
    from trl import GRPOTrainer

    rows = [r for r in trl_rows["rows"] if r["split"] == "train"][:2]
    script = gold_then_wrong(gold_for(rows))
    tok = tiny_tokenizer(tmp_path / "tok")
    model = scripted_model(tok, script)
    before = [p.detach().clone() for p in model.parameters()]
    trainer = GRPOTrainer(model=model, reward_funcs=[f1_reward, format_reward],
                          args=grpo_config(tmp_path, reward_weights=[1.0, 0.0]),
                          train_dataset=Dataset.from_list(rows), processing_class=tok)
    trainer.train()
    assert script.calls["n"] == 4
    # TRL received rulegym's rewards: half gold (1.0), half wrong (0.0); tags always present.
    assert logged(trainer, "rewards/f1_reward/mean") == pytest.approx(0.5)
    assert logged(trainer, "rewards/format_reward/mean") == pytest.approx(1.0)
    assert logged(trainer, "reward") == pytest.approx(0.5)  # format weighted 0
    changed = any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
    assert changed, "one GRPO step with non-zero advantages moves the weights"


def test_one_grpo_step_multi_turn_tool_calls(trl_rows, tmp_path):
    from datasets import Dataset
    from trl import GRPOTrainer
    from trl.chat_template_utils import qwen2_5_chat_template

    rows = named(trl_rows["rows"])[:2]
    for r in rows:
        r["prompt"] = [{"role": "user", "content": r["question"]}]
    by_q = gold_for(rows)
    seen = []

    def script(context):
        r = by_q[question_in(context, by_q)]
        name = NAME.findall(r["question"])[-1]
        turn = context.count("<tool_response>")
        seen.append(turn)
        if turn == 0:
            call = {"name": "get_article", "arguments": {"title": name}}
        elif turn == 1:
            answer = ", ".join(r["answers"]) if len(seen) % 2 else "Nobody Atall"
            call = {"name": "answer", "arguments": {"answer": answer}}
        else:
            return "Done."
        return f"<tool_call>\n{json.dumps(call)}\n</tool_call>"

    tok = tiny_tokenizer(tmp_path / "tok", qwen2_5_chat_template)
    model = scripted_model(tok, script)
    trainer = GRPOTrainer(model=model, args=grpo_config(tmp_path, max_completion_length=3000),
                          train_dataset=Dataset.from_list(rows), processing_class=tok,
                          environment_factory=SearchEnvironment)
    trainer.train()
    assert max(seen) == 2, seen  # article, answer, then a final message
    # Two of the four rollouts answer gold (F1 1), two a wrong name (0): TRL's reward column
    # for the environment is rulegym's exact reward.
    assert logged(trainer, "rewards/SearchEnvironment/mean") == pytest.approx(0.5)
    assert logged(trainer, "reward") == pytest.approx(0.5)


@pytest.fixture(scope="module")
def tool_rows(cli, tmp_path_factory):
    """TRL rows of two generated tool-use tasks (`tools generate`, `export --tasks --format trl`)."""
    root = tmp_path_factory.mktemp("trl-tools")
    run_cli(cli, "generate", "--quiet", "--seed", "5", "--num-family-trees", "6", "--out", str(root / "u"))
    run_cli(cli, "tools", "generate", "--universe", str(root / "u"), "--count", "2", "--out", str(root / "tasks.jsonl"))
    out = root / "rows.jsonl"
    run_cli(cli, "export", "--format", "trl", "--tasks", str(root / "tasks.jsonl"), "--out", str(out))
    return [json.loads(line) for line in out.read_text().splitlines()]


def oracle_call(step):
    """A task workflow step (`ask SLOT: question`, `call TOOL {args}`, `answer TEXT`) as a call."""
    verb, _, rest = step.partition(" ")
    if verb == "ask":
        return {"name": "ask_user", "arguments": {"question": rest.partition(": ")[2]}}
    if verb == "call":
        tool, _, args = rest.partition(" ")
        return {"name": tool, "arguments": json.loads(args)}
    return {"name": "finish", "arguments": {"summary": rest}}


def test_tool_environments_expose_the_tasks_tools(tool_rows):
    from transformers.utils import get_json_schema

    factories = tool_environments(tool_rows)
    assert set(factories) == {r["environment"] for r in tool_rows}
    env = factories[tool_rows[0]["environment"]]()
    task = json.loads(tool_rows[0]["task"])
    for tool in task["tools"]:
        schema = get_json_schema(getattr(env, tool["name"]))
        assert schema["function"]["name"] == tool["name"]
        params = tool["parameters"]
        assert set(schema["function"]["parameters"]["properties"]) == set(params.get("properties", {}))
        assert set(schema["function"]["parameters"].get("required", [])) == set(params.get("required", []))
    for own in ("ask_user", "finish"):
        assert get_json_schema(getattr(env, own))["function"]["name"] == own
    # The oracle workflow through the methods scores what the Rust environment scores.
    env.reset(**tool_rows[0])
    for step in task["workflow"]:
        call = oracle_call(step)
        getattr(env, call["name"])(**call["arguments"])
    assert env.get_reward() == 1.0
    lazy = factories[tool_rows[0]["environment"]]()
    lazy.reset(**tool_rows[0])
    lazy.finish("Done.")
    reference = rulegym.ToolEnv(tool_rows[0]["task"], rulegym.RubricScorer(), "openai")
    reference.reset()
    reference.step_message({"role": "assistant", "content": "<answer>Done.</answer>"})
    assert lazy.get_reward() == reference.score()["reward"] < 1.0


def test_one_grpo_step_tool_use_tasks(tool_rows, tmp_path):
    from datasets import Dataset
    from trl import GRPOTrainer
    from trl.chat_template_utils import qwen2_5_chat_template

    tasks = {r["prompt"][1]["content"]: json.loads(r["task"]) for r in tool_rows}
    rollout = {"n": 0}

    def script(context):
        instruction = max((i for i in tasks if i in context), key=context.rfind)
        turn = context.count("<tool_response>")
        workflow = tasks[instruction]["workflow"]
        if turn == 0:
            # Odd rollouts start the oracle workflow, even ones finish at once.
            rollout["n"] += 1
            step = workflow[0] if rollout["n"] % 2 else workflow[-1]
        elif '{"name": "finish", "arguments"' in context or turn >= len(workflow):
            return "Done."
        else:
            step = workflow[turn]
        return f"<tool_call>\n{json.dumps(oracle_call(step))}\n</tool_call>"

    tok = tiny_tokenizer(tmp_path / "tok", qwen2_5_chat_template)
    model = scripted_model(tok, script)
    model.config.max_position_embeddings = 65536
    trainer = GRPOTrainer(model=model, args=grpo_config(tmp_path, max_completion_length=60000),
                          train_dataset=Dataset.from_list(tool_rows), processing_class=tok,
                          environment_factory=tool_environments(tool_rows))
    trainer.train()
    assert rollout["n"] == 4
    lazy = []
    for row in tool_rows:
        env = rulegym.ToolEnv(row["task"], rulegym.RubricScorer(), "openai")
        env.reset()
        env.step_message({"role": "assistant", "content": "<answer>Done.</answer>"})
        lazy.append(env.score()["reward"])
    # Per task: one oracle rollout (1.0) and one that finishes at once.
    expected = (2 * 1.0 + sum(lazy)) / 4
    rewards = [h["reward"] for h in trainer.state.log_history if "reward" in h]
    assert rewards and rewards[-1] == pytest.approx(expected)


def test_audit_reads_trls_logged_completions_and_flags_a_planted_buggy_reward(trl_rows, tmp_path):
    """Two GRPO steps with ``log_completions=True`` (TRL writes
    ``output_dir/completions/completions_{step}.parquet``) and two reward columns: rulegym's
    ``f1_reward`` and a planted buggy reward that pays any answer tag, the one trained on.
    ``rulegym.testing.audit_trl_completions`` finds each step's questions in the logged prompts
    and flags every wrong answer the planted reward paid; rulegym's own column agrees."""
    import_or_skip("pyarrow")
    from datasets import Dataset
    from trl import GRPOTrainer

    from rulegym.testing import audit_trl_completions
    from rulegym.trl import completion_text

    rows = [r for r in trl_rows["rows"] if r["split"] == "train"][:4]
    script = gold_then_wrong(gold_for(rows))
    def tag_reward(completions, **kwargs):
        return [1.0 if "<answer>" in completion_text(c) else 0.0 for c in completions]

    tok = tiny_tokenizer(tmp_path / "tok")
    trainer = GRPOTrainer(model=scripted_model(tok, script), reward_funcs=[f1_reward, tag_reward],
                          args=grpo_config(tmp_path, reward_weights=[0.0, 1.0], max_steps=2, log_completions=True),
                          train_dataset=Dataset.from_list(rows), processing_class=tok)
    trainer.train()
    assert script.calls["n"] == 8
    out = tmp_path / "out"
    assert sorted(p.name for p in (out / "completions").glob("*.parquet")) == [
        "completions_00001.parquet", "completions_00002.parquet"]

    with pytest.raises(ValueError, match="f1_reward, tag_reward"):
        audit_trl_completions(out, trl_rows["data"])
    exact = audit_trl_completions(out, trl_rows["data"], reward="f1_reward")
    assert exact["rollouts"] == 8 and exact["diverge"] == 0 and not exact["errors"], exact
    assert exact["steps"] == [1, 2] and exact["mean_exact"] == pytest.approx(0.5)

    planted = audit_trl_completions(out, trl_rows["data"], reward="tag_reward")
    assert planted["rollouts"] == 8 and not planted["errors"], planted
    assert planted["diverge"] == 4 and planted["overpaid"] == pytest.approx(4.0)
    assert planted["by_property"]["wrong_scores_zero"]["count"] == 4
    assert {s: v["diverge"] for s, v in planted["by_step"].items()} == {1: 2, 2: 2}
    assert all("Nobody Atall" in e["response"] and e["step"] in (1, 2)
               for e in planted["by_property"]["wrong_scores_zero"]["examples"])
