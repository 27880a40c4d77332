"""Drives a running `rulegym openenv` server with the `openenv` package's own clients
(openenv 0.10: `GenericEnvClient` and `MCPToolClient`, async and `.sync()`, over WebSocket and
HTTP `/mcp`). Run by python/tests/test_openenv.py under the interpreter of a venv that holds
openenv (it cannot share the test venv: its fastmcp needs mcp < 2, the suite pins 2.3.0).

    python openenv_client.py search|tools|drop|validate BASE_URL SPEC_JSON

Asserts what the protocol promises and prints one JSON object of what it saw (rewards for the
caller to compare with `rulegym score`)."""

import asyncio
import json
import subprocess
import sys
import time
import urllib.request

from openenv.core import GenericEnvClient, MCPToolClient
from openenv.core.env_server.mcp_types import CallToolAction


def get(base, path):
    with urllib.request.urlopen(base + path, timeout=10) as r:
        return json.loads(r.read())


def post(base, path, body):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def text_of(result):
    """The text of a call_tool observation's result (FastMCP's CallToolResult shape)."""
    return result["data"]


async def answer_episode(base, question_id, answer):
    """One episode over GenericEnvClient (async): reset to the question, search once, answer."""
    async with GenericEnvClient(base_url=base) as env:
        r = await env.reset(question_id=question_id)
        assert r.observation["question_id"] == question_id, r.observation
        assert r.done is False and r.reward is None
        r = await env.step({"type": "call_tool", "tool_name": "search",
                            "arguments": {"query": r.observation["question"][:200]}})
        assert r.observation["error"] is None and r.done is False and r.reward == 0.0, r
        r = await env.step({"type": "call_tool", "tool_name": "answer", "arguments": {"answer": answer}})
        assert r.done is True and r.observation["error"] is None, r
        state = await env.state()
        assert state["question_id"] == question_id and state["done"] is True, state
        assert state["step_count"] == 2, state
        return r.reward


async def search_async(base, spec):
    out = {}
    async with GenericEnvClient(base_url=base) as env:
        q = spec["questions"][0]
        r = await env.reset(question_id=q["id"], episode_id="ep-1")
        assert r.observation["question"] == q["question"]
        r = await env.step({"type": "list_tools"})
        tools = {t["name"]: t for t in r.observation["tools"]}
        assert set(tools) == {"search", "get_article", "answer"}, tools
        assert tools["search"]["input_schema"]["required"] == ["query"]
        out["tools"] = sorted(tools)
        r = await env.step({"type": "call_tool", "tool_name": "search", "arguments": {"query": spec["person"]}})
        passages = text_of(r.observation["result"])
        assert spec["person"] in passages, passages
        r = await env.step({"type": "call_tool", "tool_name": "get_article", "arguments": {"title": spec["person"]}})
        assert text_of(r.observation["result"]).startswith(f'"{spec["person"]}"') or spec["person"] in text_of(r.observation["result"])
        # Malformed actions: an error frame or an error observation; the session goes on.
        try:
            await env.step({"tool_name": 3})
            raise AssertionError("a malformed action was accepted")
        except RuntimeError as e:
            assert "VALIDATION_ERROR" in str(e), e
        r = await env.step({"type": "call_tool", "tool_name": "nope", "arguments": {}})
        assert r.observation["error"]["error_type"] == "tool_not_found" and r.done is False
        r = await env.step({"type": "call_tool", "tool_name": "answer", "arguments": {"answer": 7}})
        assert r.observation["error"]["error_type"] == "invalid_args", r.observation
        r = await env.step({"type": "call_tool", "tool_name": "answer", "arguments": {"answer": "x</answer>"}})
        assert r.observation["error"]["error_type"] == "invalid_args", r.observation
        try:
            await env.reset(question_id="no-such-question")
            raise AssertionError("an unknown question id was accepted")
        except RuntimeError as e:
            assert "no-such-question" in str(e), e
        try:
            await env.reset(colour="blue")
            raise AssertionError("an unknown reset argument was accepted")
        except RuntimeError as e:
            assert "colour" in str(e), e
        state = await env.state()
        assert state["episode_id"] == "ep-1" and state["question_id"] == q["id"], state
        # Still alive: the gold answer scores 1 and ends the episode.
        r = await env.step({"type": "call_tool", "tool_name": "answer", "arguments": {"answer": ", ".join(q["answers"])}})
        assert r.done is True and r.reward == 1.0, r
        r = await env.step({"type": "call_tool", "tool_name": "search", "arguments": {"query": "more"}})
        # After the end a call is refused (an execution error), the reward stays.
        assert r.done is True and r.reward == 1.0, r
        assert r.observation["error"]["error_type"] == "execution_error", r.observation
        assert "episode is over" in r.observation["error"]["message"], r.observation
        # The turn cap: an episode without an answer ends at 0.
        await env.reset(question_id=q["id"])
        for _ in range(spec["max_turns"]):
            r = await env.step({"type": "call_tool", "tool_name": "get_article", "arguments": {"title": "Nobody"}})
        r = await env.step({"type": "call_tool", "tool_name": "answer", "arguments": {"answer": ", ".join(q["answers"])}})
        assert r.done is True and r.reward == 0.0, r
        # reset by seed: the same seed gives the same question.
        a = (await env.reset(seed=5)).observation["question_id"]
        b = (await env.reset(seed=5)).observation["question_id"]
        assert a == b
        for split in spec["splits"]:
            v = (await env.reset(split=split, index=0)).observation
            assert v["split"] == split, v
        try:
            await env.reset(split="nope")
            raise AssertionError("an unknown split was accepted")
        except RuntimeError as e:
            assert "nope" in str(e), e

    # Every scored answer, in its own episode (the caller compares with `rulegym score`).
    out["scored"] = []
    for item in spec["answers"]:
        reward = await answer_episode(base, item["id"], item["prediction"])
        out["scored"].append({**item, "reward": reward})

    # 32 concurrent sessions, each answering its own question: no cross-talk.
    jobs = spec["concurrent"]
    rewards = await asyncio.gather(*(answer_episode(base, j["id"], j["prediction"]) for j in jobs))
    out["concurrent"] = [{**j, "reward": r} for j, r in zip(jobs, rewards)]

    # MCPToolClient: HTTP session + WebSocket, tools over /mcp, scored steps over the socket.
    async with MCPToolClient(base_url=base) as env:
        q = spec["questions"][1]
        await env.reset(question_id=q["id"])
        tools = await env.list_tools()
        assert sorted(t.name for t in tools) == ["answer", "get_article", "search"], tools
        assert tools[0].input_schema["type"] == "object"
        passages = await env.call_tool("search", query=spec["person"])
        assert spec["person"] in passages
        try:
            await env.call_tool("search")
            raise AssertionError("a call without its argument was accepted")
        except RuntimeError as e:
            assert "missing argument" in str(e), e
        r = await env.step(CallToolAction(tool_name="answer", arguments={"answer": ", ".join(q["answers"])}))
        assert r.reward == 1.0 and r.done is True, r
        out["mcp_async"] = r.reward
    return out


def search_sync(base, spec):
    q = spec["questions"][2]
    with GenericEnvClient(base_url=base).sync() as env:
        env.reset(question_id=q["id"])
        r = env.step({"type": "call_tool", "tool_name": "answer", "arguments": {"answer": spec["wrong"]}})
        assert r.done is True and r.reward == 0.0, r
    with MCPToolClient(base_url=base).sync() as env:
        env.reset(question_id=q["id"])
        assert "search" in [t.name for t in env.list_tools()]
        r = env.step(CallToolAction(tool_name="answer", arguments={"answer": ", ".join(q["answers"])}))
        assert r.done is True and r.reward == 1.0, r
    return {"sync_wrong": 0.0, "sync_gold": 1.0}


def task_api(base, spec):
    name = spec["env_name"]
    assert get(base, "/list_environments") == [name]
    splits = get(base, f"/{name}/splits")
    assert [s["name"] for s in splits] == spec["splits"] and {"name": "train", "type": "train"} in splits, splits
    status, n = post(base, f"/{name}/num_tasks", {"split": "train"})
    assert status == 200 and n["num_tasks"] == spec["num_train"], n
    status, t = post(base, f"/{name}/task", {"split": "train", "index": 0})
    assert status == 200 and t["task"]["id"] == spec["first_train"] and "answers" not in t["task"], t
    status, r = post(base, f"/{name}/task_range", {"split": "train", "start": 1, "stop": 4})
    assert status == 200 and len(r["tasks"]) == 3, r
    status, r = post(base, f"/{name}/tasks", {"split": "train"})
    assert status == 200 and len(r["tasks"]) == spec["num_train"]
    status, _ = post(base, f"/{name}/task", {"split": "train", "index": 10 ** 6})
    assert status == 400
    status, _ = post(base, f"/{name}/num_tasks", {"split": "nope"})
    assert status == 400
    status, _ = post(base, "/other_env/num_tasks", {"split": "train"})
    assert status == 404
    return {"splits": splits}


async def tools_async(base, spec):
    out = {}
    async with GenericEnvClient(base_url=base) as env:
        r = await env.reset(task_id=spec["task_id"])
        assert r.observation["task_id"] == spec["task_id"] and spec["instruction"] in r.observation["instruction"]
        r = await env.step({"type": "list_tools"})
        names = {t["name"] for t in r.observation["tools"]}
        assert names == set(spec["tools"]) | {"ask_user", "finish"}, names
        seen = []
        for name, args in spec["calls"]:
            r = await env.step({"type": "call_tool", "tool_name": name, "arguments": args})
            assert r.observation["error"] is None, r.observation
            seen.append(text_of(r.observation["result"]))
        assert r.done is True, r
        out["reward"] = r.reward
        out["texts"] = seen
        r = await env.step({"type": "call_tool", "tool_name": "ask_user", "arguments": {"question": "More?"}})
        assert r.done is True and r.reward == out["reward"]
        r = await env.step({"type": "call_tool", "tool_name": "search", "arguments": {"query": "x"}})
        assert r.observation["error"]["error_type"] == "tool_not_found"
        # After the end every known tool is refused before its arguments are read.
        r = await env.step({"type": "call_tool", "tool_name": "ask_user", "arguments": {"question": "<answer>x</answer>"}})
        assert r.observation["error"]["error_type"] == "execution_error", r.observation
        assert "episode is over" in r.observation["error"]["message"], r.observation
    async with MCPToolClient(base_url=base) as env:
        await env.reset(task_id=spec["task_id"])
        for name, args in spec["calls"][:-1]:
            await env.call_tool(name, **args)
        name, args = spec["calls"][-1]
        r = await env.step(CallToolAction(tool_name=name, arguments=args))
        assert r.done is True
        out["mcp_reward"] = r.reward
    return out


async def drop(base, spec):
    """Opens sessions and drops them mid-episode without closing: sockets cut, HTTP sessions
    abandoned. The server must reclaim every one."""
    import websockets

    n = spec["n"]
    sockets = []
    for i in range(n):
        ws = await websockets.connect(base.replace("http", "ws") + "/ws")
        await ws.send(json.dumps({"type": "reset", "data": {"index": i % 5}}))
        reply = json.loads(await ws.recv())
        assert reply["type"] == "observation", reply
        sockets.append(ws)
    live = get(base, "/health")["sessions"]
    assert live >= n, live
    for ws in sockets:
        ws.transport.abort()  # no close frame: the client vanished
    # HTTP sessions that are created and never closed (MCPToolClient killed mid-episode).
    for i in range(spec["http"]):
        status, body = post(base, "/mcp", {"jsonrpc": "2.0", "id": i, "method": "openenv/session/create"})
        assert status == 200 and "session_id" in body["result"], body
    deadline = time.time() + spec["wait_s"]
    while time.time() < deadline:
        h = get(base, "/health")
        if h["sessions"] == 0:
            return {"reclaimed_after_s": round(spec["wait_s"] - (deadline - time.time()), 2), **h}
        time.sleep(0.2)
    raise AssertionError(f"sessions leaked: {get(base, '/health')}")


def validate(base, spec):
    """`openenv validate` on the package directory (static) and on the running server."""
    cli = spec["openenv_cli"]
    res = subprocess.run([cli, "validate", "--url", base, "--json"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    report = json.loads(res.stdout)
    failed = [c for c in report["criteria"] if not c.get("passed")]
    assert report["passed"] and not failed, failed
    res2 = subprocess.run([cli, "validate", spec["package"], "--level", "static", "--skip-build"],
                          capture_output=True, text=True, timeout=120)
    assert res2.returncode == 0, res2.stdout + res2.stderr
    return {"criteria": [c["id"] if "id" in c else c.get("name") for c in report["criteria"]], "mode": report.get("mode")}


def main():
    mode, base, spec = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    if mode == "search":
        out = asyncio.run(search_async(base, spec))
        out.update(search_sync(base, spec))
        out.update(task_api(base, spec))
    elif mode == "tools":
        out = asyncio.run(tools_async(base, spec))
    elif mode == "drop":
        out = asyncio.run(drop(base, spec))
    elif mode == "validate":
        out = validate(base, spec)
    else:
        raise SystemExit(f"unknown mode {mode}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
