"""Runs rulegym's verifiers taskset through verifiers' own code (0.4, v1 API): its loader
(`vf.load_environment`), its serving (shared tool server, interception proxy), its subprocess
runtime and null harness, and its scoring, against a scripted OpenAI-compatible endpoint
started here. Run by python/tests/test_verifiers.py under the interpreter of a venv that holds
verifiers and the rulegym wheel (verifiers pins mcp 2.0.0; the test venv pins 2.3.0).

    python verifiers_driver.py SPEC_JSON

SPEC: {"taskset": {...taskset config...}, "script": {question text: [turns...]}, "only": [keys]}.
Each script entry is the model's turns for that question: a list of tool calls
([name, arguments]) made one per turn, then a final text reply. Prints one JSON line per trace:
{"key", "reward", "rewards", "metrics", "ok", "errors", "tools"}."""

import asyncio
import json
import socket
import sys
import threading
import time
import uuid

from aiohttp import web

import verifiers.v1 as vf


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scripted_app(script):
    """POST /v1/chat/completions: the script's next turn for the question in the prompt
    (streamed as SSE, as verifiers' harness asks)."""

    def user_text(messages):
        for m in messages:
            if m["role"] == "user":
                c = m["content"]
                return c if isinstance(c, str) else "".join(p.get("text", "") for p in c)
        return ""

    async def chat(request):
        body = await request.json()
        prompt = user_text(body["messages"])
        turns = next(t for q, t in script.items() if q in prompt)
        done = sum(1 for m in body["messages"] if m["role"] == "assistant")
        step = turns[min(done, len(turns) - 1)]
        if isinstance(step, list):
            name, args = step
            msg = {"tool_calls": [{"index": 0, "id": f"call_{uuid.uuid4().hex[:8]}", "type": "function",
                                   "function": {"name": name, "arguments": json.dumps(args)}}]}
            finish = "tool_calls"
        else:
            msg, finish = {"content": step}, "stop"
        base = {"id": f"chatcmpl-{uuid.uuid4().hex[:8]}", "created": int(time.time()),
                "model": body.get("model", "scripted"), "object": "chat.completion.chunk"}
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)

        async def send(choices, **extra):
            await resp.write(f"data: {json.dumps({**base, 'choices': choices, **extra})}\n\n".encode())

        await send([{"index": 0, "delta": {"role": "assistant", **msg}, "finish_reason": None}])
        await send([{"index": 0, "delta": {}, "finish_reason": finish}])
        await send([], usage={"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15})
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    return app


def serve(app, port):
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", port).start())
    threading.Thread(target=loop.run_forever, daemon=True).start()


async def run(spec, port):
    config = vf.resolve_env_config({
        "taskset": spec["taskset"],
        "agent": {"runtime": {"type": "subprocess"}, "harness": {"id": "null"}, "max_turns": 12},
    })
    env = vf.load_environment(config)
    ctx = vf.ModelContext(model="scripted", client=vf.EvalClientConfig(
        base_url=f"http://127.0.0.1:{port}/v1", api_key_var="RULEGYM_SCRIPTED_API_KEY"))
    only = set(spec.get("only") or [])
    tasks = [t for t in env.taskset if not only or t.key in only]
    async with env.serving():
        episodes = await asyncio.gather(*(env.run_slot(s, ctx) for t in tasks for s in env.slots(t, n=1)))
    for ep in episodes:
        for tr in ep.traces:
            print(json.dumps({
                "key": tr.task.key, "reward": tr.reward, "ok": tr.ok,
                "rewards": {k: v and v.model_dump() for k, v in tr.rewards.items()},
                "metrics": tr.metrics, "errors": [e.message[:500] for e in tr.errors],
                "tools": [t.name for t in tr.tools], "answer": getattr(tr.state, "answer", None),
            }, default=str), flush=True)


def main():
    spec = json.loads(sys.argv[1])
    port = free_port()
    serve(scripted_app(spec["script"]), port)
    asyncio.run(run(spec, port))


if __name__ == "__main__":
    main()
