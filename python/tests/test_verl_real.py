"""rulegym in verl's real code (the verl 0.9.1 wheel from PyPI, with torch from PyPI; see
scripts/test-requirements.txt).

* The reward function loads the way verl loads ``custom_reward_function.path`` (a standalone file).
* Exported tool schemas pass verl's pydantic schema classes without losing anything, and verl's
  tool registry instantiates the exported tool config (``config.type: native``) and the README's
  search tool config.
* Tool-use rows run end to end in rulegym's registered agent loop (``rulegym_tool_agent``, a
  subclass of verl's ``ToolAgentLoop``): verl's dataset class reads the exported parquet, verl's
  agent loop registry takes the exported agent loop config, hydra instantiates the loop as verl's
  agent loop worker does, and verl's own state machine, Hermes tool parser, continuous-token
  builder and tool registry run; the simulated user answers turns without tool calls and the
  rubric scores the episode. The oracle gets reward 1, a garbage policy 0.
* Search rows run in ``rulegym_search_agent``: the proof-derived oracle gets reward 1.

STAND-INS, and only for what needs a GPU or a model download: the LLM server (``generate``
returns the tokens of a scripted policy's turn) and the model's tokenizer (chat_tokenizer.py,
built locally). Nothing between them and rulegym is replaced.
"""

import asyncio
import json
import os
from pathlib import Path

import pytest

import rulegym
from chat_tokenizer import make_tokenizer
from conftest import import_or_skip, run_cli


@pytest.fixture(scope="module")
def verl():
    """verl's agent loop package (imports torch); skipped loudly where verl is not installed."""
    import_or_skip("verl.experimental.agent_loop")
    import verl

    return verl


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    import_or_skip("transformers")
    return make_tokenizer(tmp_path_factory.mktemp("tokenizer"))


@pytest.fixture(scope="module")
def exported(dataset, cli, tmp_path_factory):
    root = tmp_path_factory.mktemp("verl_real")
    tasks = root / "tasks.jsonl"
    run_cli(cli, "tools", "generate", "--universe", str(dataset["dir"]), "--count", "6", "--out", str(tasks))
    run_cli(cli, "export", "--tasks", str(tasks), "--format", "verl", "--out", str(root / "train.parquet"))
    run_cli(cli, "export", "--dataset", str(dataset["dir"]), "--index", str(dataset["index"]),
            "--format", "verl", "--out", str(root / "search.parquet"))
    return {
        "root": root,
        "tasks": [json.loads(l) for l in tasks.read_text().splitlines()],
        "parquet": root / "train.parquet",
        "search": root / "search.parquet",
        "tool_config": root / "train_tool_config.yaml",
        "agent_loop_config": root / "train_agent_loop_config.yaml",
    }


def trainer_config(verl, response_length=65536):
    """verl's own generated PPO trainer config, with the rollout settings a run would set."""
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(os.path.join(os.path.dirname(verl.__file__), "trainer/config/_generated_ppo_trainer.yaml"))
    cfg.actor_rollout_ref.rollout.prompt_length = 16384
    cfg.actor_rollout_ref.rollout.response_length = response_length
    cfg.actor_rollout_ref.rollout.multi_turn.format = "hermes"
    return cfg


class ScriptedServer:
    """STAND-IN for verl's LLM server client (the GPU part): each ``generate`` returns the
    tokens of the next scripted turn, ended by the end-of-turn token."""

    def __init__(self, tokenizer, turns):
        self.tokenizer, self.turns, self.prompts = tokenizer, list(turns), []

    async def generate(self, request_id, prompt_ids, sampling_params, **kwargs):
        from verl.workers.rollout.replica import TokenOutput

        self.prompts.append(self.tokenizer.decode(prompt_ids))
        text = (self.turns.pop(0) if self.turns else "I give up.") + "<|im_end|>"
        return TokenOutput(token_ids=self.tokenizer.encode(text, add_special_tokens=False))


def instantiate(verl, entry, server, tokenizer, tools=(), response_length=65536):
    """What verl's AgentLoopWorker._run_agent_loop does with a registry entry (verl 0.9.1)."""
    import hydra
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap

    cfg = trainer_config(verl, response_length)
    return hydra.utils.instantiate(
        config=entry, trainer_config=DictConfigWrap(config=cfg), server_manager=server,
        tokenizer=tokenizer, processor=None, hf_model_type=None, dataset_cls=None,
        data_config=DictConfigWrap(cfg.data), tools=ToolListWrap(list(tools)),
    )


def run_row(verl, entry, server, tokenizer, row, tools=()):
    """Instantiates the loop inside the running event loop (as verl's worker does: the loop
    keeps the event loop it was built in) and runs one row."""

    async def go():
        return await instantiate(verl, entry, server, tokenizer, tools).run({}, **row)

    return asyncio.run(go())


def dataset_rows(parquet, tokenizer):
    """The rows as verl's RLHFDataset hands them to the agent loop (raw_prompt, tools_kwargs...)."""
    from omegaconf import OmegaConf
    from verl.utils.dataset.rl_dataset import RLHFDataset

    config = OmegaConf.create({"filter_overlong_prompts": False, "max_prompt_length": 16384,
                               "cache_dir": str(Path(parquet).parent / "cache")})
    ds = RLHFDataset(data_files=[str(parquet)], tokenizer=tokenizer, config=config)
    return [ds[i] for i in range(len(ds))]


def oracle_turns(task):
    """The task's reference solution as model turns (Hermes tool calls, questions, the answer)."""
    turns = []
    for line in task["workflow"]:
        verb, _, rest = line.partition(" ")
        if verb == "ask":
            turns.append(rest.split(": ", 1)[1])
        elif verb == "call":
            name, _, args = rest.partition(" ")
            turns.append('<tool_call>{"name": "%s", "arguments": %s}</tool_call>' % (name, args))
        elif verb == "answer":
            turns.append(f"<answer>{rest}</answer>")
    return turns


def test_reward_function_loads_standalone_as_verl_loads_it(verl):
    from omegaconf import OmegaConf
    from verl.trainer.ppo.reward import get_custom_reward_fn

    import rulegym.verl as rv

    path = rv.__file__  # <site-packages>/rulegym/verl.py, as the README says
    for name in ("compute_score",):
        cfg = OmegaConf.create({"reward": {"custom_reward_function": {"path": path, "name": name}}})
        fn = get_custom_reward_fn(cfg)
        score = fn("rulegym_search", "<answer> Ann Lee </answer>", {"target": ["Ann Lee", "Bob Stone"]}, {})
        assert abs(score - 2 / 3) < 1e-9
        assert fn("rulegym_tools", "", {"task_id": "t"}, {"turn_scores": [0.0, 1.0]}) == 1.0


def test_exported_tool_schemas_survive_verl(verl, exported):
    import yaml
    from verl.tools.schemas import OpenAIFunctionToolSchema
    from verl.tools.tool_registry import load_all_tools

    entries = yaml.safe_load(exported["tool_config"].read_text())["tools"]
    task_tools = {t["name"]: t for task in exported["tasks"] for t in task["tools"]}
    folded = 0
    for entry in entries:
        assert entry["config"]["type"] == "native"
        schema = entry["tool_schema"]
        # verl keeps every key of the exported form: what the model is shown is what we wrote.
        kept = OpenAIFunctionToolSchema.model_validate(schema).model_dump(exclude_unset=True, exclude_none=True)
        assert kept == schema
        # ... while the task's own schema would lose its constraints in verl: they are in the
        # descriptions instead, as JSON.
        own = task_tools[schema["function"]["name"]]
        original = {"type": "function", "function": {k: own[k] for k in ("name", "description", "parameters")}}
        lost = OpenAIFunctionToolSchema.model_validate(original).model_dump(exclude_unset=True, exclude_none=True)
        if lost != original:
            folded += 1
            text = json.dumps(schema)
            for prop in own["parameters"].get("properties", {}).values():
                for key in prop:
                    if key not in ("type", "description", "enum"):
                        assert f'\\"{key}\\"' in text, (key, text)
    assert folded > 0, "the generated tasks have constraints verl would drop"
    tools = load_all_tools(tool_config_path=str(exported["tool_config"]), function_tool_path=None)
    assert [t.name for t in tools] == [e["tool_schema"]["function"]["name"] for e in entries]


def test_readme_search_tool_yaml_loads_in_verl(verl, dataset, tmp_path):
    from verl.tools.tool_registry import load_all_tools

    config = tmp_path / "search_tool.yaml"
    config.write_text("tools:\n  - class_name: rulegym.verl.SearchTool\n"
                      f"    config: {{type: native, index_path: {dataset['index']}, top_k: 3}}\n")
    (tool,) = load_all_tools(tool_config_path=str(config), function_tool_path=None)

    async def once():
        iid, _ = await tool.create()
        resp, _, _ = await tool.execute(iid, {"query_list": ["doctor"]})
        await tool.release(iid)
        return resp.text

    assert asyncio.run(once()).startswith("Doc 1(Title: ")


def run_tool_rows(verl, exported, tokenizer, policy):
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
    from verl.tools.tool_registry import load_all_tools

    import rulegym.verl_agent  # noqa: F401  (hydra imports it from the config's _target_ too)

    # What AgentLoopWorker.__init__ does with agent_loop_config_path and tool_config_path.
    for entry in OmegaConf.load(exported["agent_loop_config"]):
        _agent_loop_registry[entry.name] = entry
    tools = load_all_tools(tool_config_path=str(exported["tool_config"]), function_tool_path=None)
    rows = dataset_rows(exported["parquet"], tokenizer)
    outputs = []
    for row, task in zip(rows, exported["tasks"]):
        assert row["agent_name"] == "rulegym_tool_agent"
        server = ScriptedServer(tokenizer, policy(task))
        entry = _agent_loop_registry[row["agent_name"]]
        outputs.append((run_row(verl, entry, server, tokenizer, row, tools), server))
    return outputs


def test_tool_use_rows_run_in_rulegym_agent_loop(verl, exported, tokenizer):
    from rulegym.verl import EPISODES

    before = len(EPISODES)  # other tests (the README's verl block) may leave theirs open
    outputs = run_tool_rows(verl, exported, tokenizer, oracle_turns)
    for (out, server), task in zip(outputs, exported["tasks"]):
        assert out.reward_score == 1.0, (task["id"], out.extra_fields)
        assert out.extra_fields["turn_scores"][-1] == 1.0
        assert out.extra_fields["rulegym"]["reason"] == "answer"
        # The model saw the tool results and the user's replies in its context.
        assert "<tool_response>" in server.prompts[-1]
        assert len(out.response_ids) == len(out.response_mask) and 0 in out.response_mask
    assert len(EPISODES) == before, "every episode is released with its trajectory"

    def garbage(task):
        return ['<tool_call>{"name": "no_such_tool", "arguments": {}}</tool_call>',
                '<tool_call>{"name": "get_record", "arguments": "not json"}</tool_call>',
                "Nice weather.", "<answer>All done.</answer>"]

    for (out, _), task in zip(run_tool_rows(verl, exported, tokenizer, garbage), exported["tasks"]):
        assert out.reward_score == 0.0, (task["id"], out.extra_fields)


def test_search_rows_run_in_rulegym_search_agent(verl, exported, dataset, tokenizer):
    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry

    import rulegym.verl_agent as ra

    trajectories = {t["id"]: t for t in rulegym.oracle(str(dataset["dir"]), str(dataset["index"]))}
    rows = dataset_rows(exported["search"], tokenizer)
    entry = {**_agent_loop_registry[ra.SEARCH_AGENT], "index_path": str(dataset["index"])}
    rewards = []
    for row in rows[:12]:
        t = trajectories[row["extra_info"]["id"]]
        actions = [m["content"] for m in t["messages"] if m["role"] == "assistant"]
        server = ScriptedServer(tokenizer, actions)
        out = run_row(verl, entry, server, tokenizer, row)
        rewards.append(out.reward_score)
        assert out.extra_fields["rulegym"]["done"]
    assert rewards == [1.0] * len(rewards)
    # A policy that never answers gets 0 (the row's own index_path is used: no index in config).
    bare = {**_agent_loop_registry[ra.SEARCH_AGENT]}
    row = rows[0]
    out = run_row(verl, bare, ScriptedServer(tokenizer, ["<search> x </search>"] * 20), tokenizer, row)
    # The environment's turn cap (10) ends it with reward 0.
    assert out.reward_score == 0.0 and out.extra_fields["rulegym"]["done"]
    assert out.extra_fields["rulegym"]["searches"] == 10


class StubUserServer:
    """STAND-IN for the simulator LLM (unit test of the config path only; the real server is
    exercised by scripts/test-llm-server.sh): an OpenAI chat-completions endpoint on loopback
    that always answers as the user."""

    REPLY = "STUB-USER: I would rather not say."

    def __enter__(self):
        import http.server
        import threading

        reply = self.REPLY

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers["Content-Length"]))
                body = json.dumps({"id": "x", "object": "chat.completion", "choices": [
                    {"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": reply}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __exit__(self, *exc):
        self.httpd.shutdown()


def test_the_agent_loop_config_sets_the_simulation(verl, exported, tokenizer, tmp_path):
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
    from verl.tools.tool_registry import load_all_tools

    import rulegym.verl_agent  # noqa: F401

    tools = load_all_tools(tool_config_path=str(exported["tool_config"]), function_tool_path=None)
    row = dataset_rows(exported["parquet"], tokenizer)[0]
    with StubUserServer() as url:
        entries = OmegaConf.load(exported["agent_loop_config"])
        entry = next(e for e in entries if e.name == row["agent_name"])
        # What a user writes into the agent loop config (hydra passes it to the constructor).
        entry = OmegaConf.merge(entry, {"simulation": {"endpoint": url, "model": "stub", "user": "llm",
                                                       "dir": str(tmp_path / "world")}})
        _agent_loop_registry[entry.name] = entry
        server = ScriptedServer(tokenizer, ["Which record do you mean?", "<answer>unknown</answer>"])
        out = run_row(verl, entry, server, tokenizer, row, tools)
    assert StubUserServer.REPLY in server.prompts[-1], "the LLM user answered the question"
    assert out.extra_fields["rulegym"]["reason"] == "answer"
    assert any((tmp_path / "world" / "llm-cache").rglob("*.json")), "the user's answer is recorded"


def test_audit_reads_verls_rollout_dump_and_flags_a_planted_buggy_reward(verl, exported, cli, tmp_path):
    """verl's own dump writer (``RayPPOTrainer._write_generations``, what
    ``trainer.rollout_data_dir`` runs) writes one step's rollouts twice: scored by rulegym's
    verl reward, and by a planted buggy reward that pays a gold name anywhere in the response.
    ``rulegym reward-check --audit`` passes the first and flags every overpaid rollout of the
    second by the property it breaks; ``rulegym.testing.RewardAudit`` does the same in a loop."""
    import subprocess

    import pandas
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    from rulegym.testing import RewardAudit, audit_rewards
    from rulegym.verl import compute_score

    rows = pandas.read_parquet(exported["search"]).to_dict("records")[:5]
    inputs, outputs, gts = [], [], []
    for r in rows:
        gold = r["reward_model"]["ground_truth"]       # {"target": numpy array}, as verl reads it
        answers = [str(a) for a in gold["target"]]
        for response in (f"<answer>{', '.join(answers)}</answer>", ", ".join(answers),
                         "<answer>Nobody Atall</answer>"):
            inputs.append(r["prompt"][-1]["content"])
            outputs.append(response)
            gts.append(gold)
    good = [compute_score("rulegym", o, g) for o, g in zip(outputs, gts)]
    bad = [1.0 if any(str(a).lower() in o.lower() for a in g["target"]) else 0.0 for o, g in zip(outputs, gts)]
    for name, scores in (("good", good), ("bad", bad)):
        RayPPOTrainer._write_generations(inputs, outputs, gts, scores, {}, str(tmp_path / name), 7)
    audit = lambda name: subprocess.run([cli, "reward-check", "--audit", str(tmp_path / name / "7.jsonl"),
                                         "--out", str(tmp_path / f"{name}.json")], capture_output=True, text=True)
    ok = audit("good")
    assert ok.returncode == 0, ok.stderr
    flagged = audit("bad")
    assert flagged.returncode == 1, flagged.stderr
    report = json.loads((tmp_path / "bad.json").read_text())
    assert report["rollouts"] == 15 and report["diverge"] == 5 and not report["errors"], report
    assert report["by_property"]["no_tag_scores_zero"]["count"] == 5
    assert report["overpaid"] == pytest.approx(5.0)
    # The same in process: a monitor audits every second step.
    lines = (tmp_path / "bad" / "7.jsonl").read_text().splitlines()
    assert audit_rewards(lines)["diverge"] == 5
    seen = []
    monitor = RewardAudit(every=2, on_report=seen.append)
    for output, score, gold in zip(outputs, bad, gts):
        monitor.record(output, score, answers=[str(a) for a in gold["target"]])
    assert monitor.step() is None
    assert monitor.step()["diverge"] == 5 and seen[0]["step"] == 2

