"""Demonstrations as TRL's SFTTrainer reads them: the search environment's proof-derived rows
(`rulegym.demonstrations`, `rulegym oracle --format sft`) and the tool-use tasks' reference
solutions (`rulegym tools oracle --format sft`). Each row's tool calls, rendered by TRL's
Qwen2.5 ChatML template, parse back with TRL's own response parser to the calls of the row; a
task row's conversation scores 1 under the task's rubric; and TRL 1.16's SFTTrainer takes a
training step on both kinds of rows with a tiny local model."""

import json
import subprocess

import pytest

import rulegym
from conftest import import_or_skip


@pytest.fixture(scope="module")
def rows(cli, tmp_path_factory):
    root = tmp_path_factory.mktemp("sft")
    data = root / "data"
    subprocess.run([cli, "generate", "--quiet", "--num-family-trees", "6", "--out", str(data)], check=True)
    search = rulegym.demonstrations(str(data), index=str(data / "index.idx"), max_per_family=4)
    tasks = root / "tasks.jsonl"
    subprocess.run([cli, "tools", "generate", "--universe", str(data), "--count", "4", "--out", str(tasks)],
                   check=True, capture_output=True)
    out = root / "tool-sft.jsonl"
    subprocess.run([cli, "tools", "oracle", "--tasks", str(tasks), "--format", "sft", "--out", str(out)],
                   check=True, capture_output=True)
    task_rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert search and len(task_rows) == 4
    return {"search": search, "tasks": task_rows, "task_file": tasks}


def tool_calls(row):
    return [(c["function"]["name"], c["function"]["arguments"])
            for m in row["messages"] for c in m.get("tool_calls") or []]


def test_task_rows_are_reference_solutions_scored_one(rows, cli, tmp_path):
    for row in rows["tasks"]:
        assert row["reward"] == 1.0 and row["tools"], row["id"]
        # The user's replies are in the conversation, and every call's arguments are an object.
        assert sum(m["role"] == "user" for m in row["messages"]) >= 2
        assert all(isinstance(a, dict) for _, a in tool_calls(row))
    # Scored again from the rows as written (the rubric reads the conversation).
    conversations = tmp_path / "rows.jsonl"
    conversations.write_text("".join(json.dumps({"id": r["id"], "messages": r["messages"]}) + "\n"
                                     for r in rows["tasks"]))
    out = subprocess.run([cli, "tools", "score", "--tasks", str(rows["task_file"]),
                          "--trajectories", str(conversations)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == f"scored {len(rows['tasks'])}, mean reward 1.0 (paper)", out.stdout


def test_tool_calls_render_and_parse_back_with_trls_parser(rows, tmp_path):
    import_or_skip("trl")
    import_or_skip("transformers")
    from trl.chat_template_utils import add_response_schema, parse_response, qwen2_5_chat_template
    from test_trl import tiny_tokenizer

    tok = add_response_schema(tiny_tokenizer(tmp_path / "tok", qwen2_5_chat_template))
    checked = 0
    for row in rows["search"] + rows["tasks"]:
        for i, m in enumerate(row["messages"]):
            if not m.get("tool_calls"):
                continue
            prefix = tok.apply_chat_template(row["messages"][:i], tools=row["tools"], tokenize=False,
                                             add_generation_prompt=True)
            full = tok.apply_chat_template(row["messages"][: i + 1], tools=row["tools"], tokenize=False)
            assert full.startswith(prefix)
            ids = tok(full[len(prefix):], add_special_tokens=False)["input_ids"]
            parsed = parse_response(tok, ids, prefix=tok(prefix, add_special_tokens=False)["input_ids"],
                                    tools=row["tools"])
            got = [(c["function"]["name"], c["function"]["arguments"]) for c in parsed.get("tool_calls") or []]
            want = [(c["function"]["name"], c["function"]["arguments"]) for c in m["tool_calls"]]
            assert got == want, (row["id"], full[len(prefix):])
            checked += 1
    assert checked >= 10


def test_one_sft_step_on_search_and_task_demonstrations(rows, tmp_path):
    torch = import_or_skip("torch")
    import_or_skip("trl")
    datasets = import_or_skip("datasets")
    from transformers import LlamaConfig, LlamaForCausalLM
    from trl import SFTConfig, SFTTrainer
    from trl.chat_template_utils import qwen2_5_chat_template
    from test_trl import tiny_tokenizer

    tok = tiny_tokenizer(tmp_path / "tok", qwen2_5_chat_template)
    keep = ("messages", "tools")
    data = datasets.Dataset.from_list(
        [{k: json.dumps(r[k]) for k in keep} for r in rows["search"][:2] + rows["tasks"][:2]]
    ).map(lambda r: {k: json.loads(r[k]) for k in keep})
    config = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=8192,
                         pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, bos_token_id=None)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    args = SFTConfig(output_dir=str(tmp_path / "out"), max_steps=1, per_device_train_batch_size=4,
                     learning_rate=1e-3, logging_steps=1, report_to=[], save_strategy="no",
                     max_length=8192, use_cpu=True, assistant_only_loss=False)
    trainer = SFTTrainer(model=model, args=args, train_dataset=data, processing_class=tok)
    trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(losses) == 1 and losses[0] > 0, trainer.state.log_history
