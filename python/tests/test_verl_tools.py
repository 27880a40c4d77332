"""verl adapter for tool-use tasks, on rows written by ``rulegym export --tasks ... --format verl``
(and ``--format skyrl``): an oracle episode through ``TaskToolCore`` + ``UserInteractionCore``
(driven the way verl's tool agent loop calls them) reaches reward 1, a garbage one 0;
concurrent rollouts of one row stay apart; the reward function reads the interaction's score;
two tasks that give one tool name different schemas export as two tools and both reach reward 1.

``test_verl_subclasses_with_stand_in`` runs the real ``TaskTool``/``UserInteraction``/``SearchTool``
subclasses against python/tests/fake_verl: A STAND-IN FOR VERL'S BASE-CLASS SHAPES ONLY. It is
kept for ``UserInteraction``, whose base class (``verl.interactions``) exists only in verl <= 0.7;
CI installs verl 0.9.1, where ``TaskTool`` and ``SearchTool`` run in verl's real code
(test_verl_real.py). It checks the subclasses accept verl 0.7's constructor and call
signatures; it does not test real verl.
"""

import asyncio
import importlib
import json
import sys
import uuid
from pathlib import Path

import pytest

import rulegym
from conftest import import_or_skip, run_cli
from rulegym.verl import (
    EpisodeRegistry,
    TaskToolCore,
    UserInteractionCore,
    compute_score,
)

FAKE_VERL = Path(__file__).resolve().parent / "fake_verl"


class AgentData:
    """What verl's agent loop passes to ``tool.execute`` as ``agent_data`` (the part we read)."""

    def __init__(self, request_id):
        self.request_id = request_id


@pytest.fixture(scope="module")
def exported(dataset, cli, tmp_path_factory):
    """Tasks generated from the test universe, exported for verl and SkyRL."""
    root = tmp_path_factory.mktemp("tool_export")
    tasks = root / "tasks.jsonl"
    run_cli(cli, "tools", "generate", "--universe", str(dataset["dir"]), "--count", "12", "--out", str(tasks))
    verl = root / "train.parquet"
    out = run_cli(cli, "export", "--tasks", str(tasks), "--format", "verl", "--out", str(verl))
    assert "wrote 12 verl rows" in out
    skyrl = root / "skyrl.parquet"
    run_cli(cli, "export", "--tasks", str(tasks), "--format", "skyrl", "--out", str(skyrl))
    import_or_skip("pyarrow.parquet")
    yaml = import_or_skip("yaml")
    import pyarrow.parquet as pq

    return {
        "tasks": [json.loads(l) for l in tasks.read_text().splitlines()],
        "verl": pq.read_table(str(verl)).to_pylist(),
        "skyrl": pq.read_table(str(skyrl)).to_pylist(),
        "tool_config": yaml.safe_load((root / "train_tool_config.yaml").read_text()),
        "interaction_config": yaml.safe_load((root / "train_interaction_config.yaml").read_text()),
        "tool_config_path": root / "train_tool_config.yaml",
        "interaction_config_path": root / "train_interaction_config.yaml",
    }


def oracle(task):
    """The task's reference solution (its workflow lines) as (kind, payload) steps."""
    steps = []
    for line in task["workflow"]:
        verb, _, rest = line.partition(" ")
        if verb == "ask":
            steps.append(("say", rest.split(": ", 1)[1]))
        elif verb == "call":
            name, _, args = rest.partition(" ")
            steps.append(("call", (name, json.loads(args))))
        elif verb == "answer":
            steps.append(("say", f"<answer>{rest}</answer>"))
    return steps


def garbage(task):
    """Deletes a record without asking anything, chats, then claims success."""
    someone = sorted(task["initial_state"]["people"])[0]
    return [
        ("call", ("delete_record", {"name": someone})),
        ("say", "What a nice day, isn't it?"),
        ("say", "<answer>All done.</answer>"),
    ]


def make_cores(exported, registry):
    tools = {}
    for entry in exported["tool_config"]["tools"]:
        name = entry["tool_schema"]["function"]["name"]
        tools[name] = TaskToolCore(name, entry["config"], registry)
    (spec,) = exported["interaction_config"]["interaction"]
    user = UserInteractionCore({**spec["config"], "name": spec["name"]}, registry)
    return tools, user


async def rollout(row, steps, tools, user):
    """One rollout the way verl's tool agent loop drives it: start the interaction with the
    row's interaction_kwargs, a fresh tool instance per call (create_kwargs from tools_kwargs,
    agent_data carrying the request id), the interaction after every turn without tool calls."""
    request_id = uuid.uuid4().hex
    extra = row["extra_info"]
    kwargs = extra["interaction_kwargs"]
    await user.start_interaction(request_id, **kwargs)
    messages = [dict(m) for m in row["prompt"]]
    scores, replies = [], []
    for kind, payload in steps:
        await asyncio.sleep(0)  # let concurrent rollouts interleave
        if kind == "call":
            name, args = payload
            tool = tools[name]
            iid = await tool.create(create_kwargs=extra["tools_kwargs"][name]["create_kwargs"])
            text, step_reward, _ = await tool.execute_text(iid, args, agent_data=AgentData(request_id))
            await tool.release(iid)
            assert step_reward == 0.0
            call = {"function": {"name": name, "arguments": args}}
            messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
            messages.append({"role": "tool", "content": text})
            replies.append(text)
        else:
            messages.append({"role": "assistant", "content": payload})
            done, reply, score, meta = await user.generate_response(request_id, messages, **kwargs)
            scores.append(score)
            if done:
                break
            messages.append({"role": "user", "content": reply})
            replies.append(reply)
    final = await tools[next(iter(tools))].calc_reward(request_id)
    return {
        "scores": scores, "final": final, "done": done, "meta": meta, "replies": replies,
        "request_id": request_id,
    }


def test_export_rows_match_tasks(exported):
    tasks, rows = exported["tasks"], exported["verl"]
    assert len(rows) == len(tasks) == 12
    names = [t["tool_schema"]["function"]["name"] for t in exported["tool_config"]["tools"]]
    assert names == [t["name"] for t in tasks[0]["tools"]]
    for entry, tool in zip(exported["tool_config"]["tools"], tasks[0]["tools"]):
        assert entry["class_name"] == "rulegym.verl.TaskTool"
        # The task's schema in the form verl keeps (constraints folded into descriptions; see
        # test_verl_real.py for verl's own classes on it).
        schema = entry["tool_schema"]
        assert schema["type"] == "function" and schema["function"]["name"] == tool["name"]
        assert schema["function"]["description"].startswith(tool["description"])
        params = schema["function"]["parameters"]
        assert set(params) <= {"type", "properties", "required"}
        assert params["required"] == tool["parameters"].get("required", [])
        assert set(params["properties"]) == set(tool["parameters"]["properties"])
    for row, task in zip(rows, tasks):
        assert row["prompt"][-1] == {"role": "user", "content": task["instruction"]}
        assert row["reward_model"] == {"style": "rule", "ground_truth": {"task_id": task["id"]}}
        assert set(row["extra_info"]["tools_kwargs"]) == set(names)
        assert json.loads(row["extra_info"]["interaction_kwargs"]["task"]) == task
    (spec,) = exported["interaction_config"]["interaction"]
    assert spec["class_name"] == "rulegym.verl.UserInteraction"
    assert all(r["extra_info"]["interaction_kwargs"]["name"] == spec["name"] for r in rows)
    # verl loads both files with OmegaConf.
    omegaconf = import_or_skip("omegaconf")
    loaded = omegaconf.OmegaConf.to_container(omegaconf.OmegaConf.load(exported["tool_config_path"]))
    assert loaded == exported["tool_config"]


def test_oracle_reward_one_and_garbage_zero(exported):
    registry = EpisodeRegistry()
    tools, user = make_cores(exported, registry)
    for row, task in zip(exported["verl"], exported["tasks"]):
        good = asyncio.run(rollout(row, oracle(task), tools, user))
        assert good["done"] and good["scores"][-1] == 1.0 and good["final"] == 1.0, (task["id"], good)
        assert all(s == 0.0 for s in good["scores"][:-1])
        assert good["meta"]["reason"] == "answer"
        gt = row["reward_model"]["ground_truth"]
        assert compute_score(row["data_source"], "", gt, {"turn_scores": good["scores"]}) == 1.0
        # The user revealed a hidden slot only when asked: the replies carry the slot values.
        for slot in task["hidden_context"]["slots"]:
            assert any(slot["value"] in r for r in good["replies"]), slot

        bad = asyncio.run(rollout(row, garbage(task), tools, user))
        assert bad["done"] and bad["scores"][-1] == 0.0 and bad["final"] == 0.0, (task["id"], bad)
        assert compute_score(row["data_source"], "", gt, {"turn_scores": bad["scores"]}) == 0.0
    # Finished episodes keep only their result; finalize drops them.
    assert len(registry) == 2 * len(exported["verl"])
    asyncio.run(user.finalize_interaction(good["request_id"]))
    assert len(registry) == 2 * len(exported["verl"]) - 1


def test_concurrent_rollouts_of_one_row_stay_apart(exported):
    registry = EpisodeRegistry(max_episodes=8)
    tools, user = make_cores(exported, registry)
    row, task = exported["verl"][0], exported["tasks"][0]

    async def group():
        policies = [oracle(task) if i % 2 == 0 else garbage(task) for i in range(6)]
        return await asyncio.gather(*[rollout(row, steps, tools, user) for steps in policies])

    results = asyncio.run(group())
    assert [r["final"] for r in results] == [1.0, 0.0] * 3
    # The registry is bounded: older episodes are dropped first.
    for _ in range(5):
        asyncio.run(rollout(row, oracle(task), tools, user))
    assert len(registry) == 8


def test_tool_errors_and_missing_episode(exported):
    registry = EpisodeRegistry()
    tools, user = make_cores(exported, registry)
    row = exported["verl"][0]
    tool = tools["get_record"]

    async def run():
        iid = await tool.create(create_kwargs={"task_id": row["extra_info"]["id"]})
        orphan, _, _ = await tool.execute_text(iid, {"name": "x"}, agent_data=AgentData("no-such-request"))
        await user.start_interaction("r1", **row["extra_info"]["interaction_kwargs"])
        invalid, _, _ = await tool.execute_text(iid, {"nom": 3}, agent_data=AgentData("r1"))
        return orphan, invalid, await user.calculate_score("r1")

    orphan, invalid, partial = asyncio.run(run())
    assert orphan.startswith("Error: no rulegym episode")
    assert json.loads(invalid)["error"].startswith("invalid arguments")
    assert partial == 0.0
    with pytest.raises(ValueError):
        compute_score(row["data_source"], "", row["reward_model"]["ground_truth"], {})


def test_skyrl_rows_run_in_tool_env(exported):
    import_or_skip("skyrl_gym")
    import rulegym.skyrl as rs

    for row, task in zip(exported["skyrl"][:4], exported["tasks"][:4]):
        assert row["env_class"] == rs.TOOL_ENV_ID
        env = rs.ToolEnv({}, row)
        prompt, _ = env.init(row["prompt"])
        system = prompt[0]["content"]
        assert system.startswith("You are a helpful assistant") and "<tools>" in system
        out = None
        for kind, payload in oracle(task):
            if kind == "call":
                name, args = payload
                action = "<tool_call>" + json.dumps({"name": name, "arguments": args}) + "</tool_call>"
            else:
                action = payload
            out = env.step(action)
            if out["done"]:
                break
        assert out["done"] and out["reward"] == 1.0, task["id"]


@pytest.fixture(scope="module")
def conflicting(exported, cli, tmp_path_factory):
    """Three tasks where two give one tool name different schemas (as LLM-made tasks do: two
    different ``send_email``), exported for verl."""
    import pyarrow.parquet as pq
    import yaml

    tasks = [json.loads(json.dumps(t)) for t in exported["tasks"][:3]]
    called = [{p[0] for k, p in oracle(t) if k == "call"} for t in tasks[:2]]
    shared = sorted(called[0] & called[1])
    assert shared, "the first two generated tasks call no tool in common"
    name = shared[0]
    b = tasks[1]
    b["id"] = "b-task"
    for tool in b["tools"]:
        if tool["name"] == name:
            tool["description"] += " (through another service)"
            tool["parameters"]["properties"]["note"] = {"type": "string", "description": "Optional note."}
    root = tmp_path_factory.mktemp("conflict")
    path = root / "tasks.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    out = root / "mixed.parquet"
    printed = run_cli(cli, "export", "--tasks", str(path), "--format", "verl", "--out", str(out))
    assert "wrote 3 verl rows" in printed
    return {
        "name": name,
        "tasks": tasks,
        "verl": pq.read_table(str(out)).to_pylist(),
        "tool_config": yaml.safe_load((root / "mixed_tool_config.yaml").read_text()),
        "interaction_config": exported["interaction_config"],
    }


def own_tools(row):
    """The row's task tools: task name -> exported name (``create_kwargs.tool`` of a renamed
    variant; ``""`` marks a variant of another task)."""
    own = {}
    for exported_name, kwargs in row["extra_info"]["tools_kwargs"].items():
        create = kwargs["create_kwargs"]
        tool = create.get("tool", exported_name) if isinstance(create, dict) else exported_name
        if tool:
            own[tool] = exported_name
    return own


def test_one_tool_name_with_two_schemas_exports_and_runs(conflicting):
    name, tasks, rows = conflicting["name"], conflicting["tasks"], conflicting["verl"]
    entries = conflicting["tool_config"]["tools"]
    exported = [e["tool_schema"]["function"]["name"] for e in entries]
    variants = [n for n in exported if n.startswith(name + "__")]
    assert len(variants) == 2 and name not in exported, exported
    # Both schemas are in the config, each under its variant name; other names are unchanged.
    by_name = {e["tool_schema"]["function"]["name"]: e["tool_schema"]["function"] for e in entries}
    descriptions = {by_name[v]["description"].split(" (Parameters JSON Schema: ")[0] for v in variants}
    assert descriptions == {t["description"] for task in tasks[:2] for t in task["tools"] if t["name"] == name}
    assert set(exported) - set(variants) == {t["name"] for t in tasks[0]["tools"]} - {name}

    registry = EpisodeRegistry()
    tools, user = make_cores(conflicting, registry)
    for row, task in zip(rows, tasks):
        own = own_tools(row)
        assert sorted(own) == sorted(t["name"] for t in task["tools"]), own
        assert own[name] in variants
        # The oracle, calling the tools by the names the model sees, reaches reward 1.
        steps = [(k, (own[p[0]], p[1])) if k == "call" else (k, p) for k, p in oracle(task)]
        good = asyncio.run(rollout(row, steps, tools, user))
        assert good["done"] and good["final"] == 1.0, (task["id"], good)

    # The other task's variant is not this task's tool: the episode answers with an error.
    row = rows[0]
    other = next(v for v in variants if v != own_tools(row)[name])
    assert row["extra_info"]["tools_kwargs"][other]["create_kwargs"]["tool"] == ""

    async def foreign():
        await user.start_interaction("foreign", **row["extra_info"]["interaction_kwargs"])
        tool = tools[other]
        iid = await tool.create(create_kwargs=row["extra_info"]["tools_kwargs"][other]["create_kwargs"])
        text, _, _ = await tool.execute_text(iid, {}, agent_data=AgentData("foreign"))
        return text

    reply = asyncio.run(foreign())
    assert "error" in json.loads(reply) and other in reply, reply


@pytest.fixture
def stand_in_verl():
    """Puts the verl STAND-IN on sys.path and reloads rulegym.verl; undoes both afterwards."""
    import rulegym.verl as rv

    def purge():
        for name in [m for m in sys.modules if m == "verl" or m.startswith("verl.")]:
            del sys.modules[name]

    purge()
    sys.path.insert(0, str(FAKE_VERL))
    try:
        yield importlib.reload(rv)
    finally:
        sys.path.remove(str(FAKE_VERL))
        purge()
        importlib.reload(rv)


def test_verl_subclasses_with_stand_in(stand_in_verl, exported, dataset):
    """STAND-IN ONLY: the real subclasses with verl's base-class shapes and call signatures."""
    rv = stand_in_verl
    from verl.tools.schemas import OpenAIFunctionToolSchema

    assert "fake_verl" in sys.modules["verl"].__file__
    tools = {}
    for entry in exported["tool_config"]["tools"]:
        tool = rv.TaskTool(entry["config"], OpenAIFunctionToolSchema.model_validate(entry["tool_schema"]))
        tools[tool.name] = tool
    (spec,) = exported["interaction_config"]["interaction"]
    interaction = rv.UserInteraction({**spec["config"], "name": spec["name"]})
    assert interaction.name == "rulegym_user"
    row, task = exported["verl"][1], exported["tasks"][1]

    async def episode(steps):
        request_id = uuid.uuid4().hex
        kwargs = row["extra_info"]["interaction_kwargs"]
        await interaction.start_interaction(request_id, **kwargs)
        messages = [dict(m) for m in row["prompt"]]
        score = None
        for kind, payload in steps:
            if kind == "call":
                name, args = payload
                create_kwargs = row["extra_info"]["tools_kwargs"][name]["create_kwargs"]
                instance_id, _ = await tools[name].create(create_kwargs=create_kwargs)
                agent_data = AgentData(request_id)
                response, _, _ = await tools[name].execute(instance_id, args, agent_data=agent_data)
                await tools[name].release(instance_id)
                assert isinstance(response.text, str) and response.text
                messages.append({"role": "tool", "content": response.text})
            else:
                messages.append({"role": "assistant", "content": payload})
                done, reply, score, _ = await interaction.generate_response(request_id, messages, **kwargs)
                if done:
                    break
                messages.append({"role": "user", "content": reply})
        reward = await tools["get_record"].calc_reward(request_id)
        await interaction.finalize_interaction(request_id)
        return score, reward

    assert asyncio.run(episode(oracle(task))) == (1.0, 1.0)
    assert asyncio.run(episode(garbage(task))) == (0.0, 0.0)

    search = rv.SearchTool({"index_path": str(dataset["index"]), "top_k": 1})
    assert search.name == "search"

    async def search_once():
        iid, _ = await search.create()
        response, reward, metrics = await search.execute(iid, {"query_list": ["doctor"]})
        await search.release(iid)
        return response.text, reward, metrics

    text, reward, metrics = asyncio.run(search_once())
    assert text.startswith("Doc 1(Title: ") and reward == 0.0 and metrics == {"queries": 1}
