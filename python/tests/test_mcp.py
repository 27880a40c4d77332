"""`rulegym mcp` driven by the PyPI `mcp` package's own client (2.x, pinned in
scripts/test-requirements.txt: `ClientSession` over `stdio_client` and over
`streamable_http_client`), against the real CLI binary: search tools, resources, a scored
question, a tool-use task played to `finish`, and bad input."""

import contextlib
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import FLIGHTS, REPO, TRIP, import_or_skip, trip_task_dir

anyio = import_or_skip("anyio")
mcp = import_or_skip("mcp")
from mcp import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

TRANSPORTS = ["stdio", "http"]


@contextlib.asynccontextmanager
async def _http_streams(url):
    async with streamable_http_client(url) as streams:
        yield streams[0], streams[1]


@contextlib.asynccontextmanager
async def serve_http(cli, args):
    """A `rulegym mcp --transport http --port 0` process; yields its /mcp URL."""
    proc = subprocess.Popen(
        [cli, "mcp", *args, "--transport", "http", "--port", "0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stderr.readline()
        m = re.search(r"(http://\S+/mcp)", line)
        assert m, f"no address on stderr: {line!r} (exit {proc.poll()})"
        yield m.group(1)
        assert proc.poll() is None, "the server died during the test"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@contextlib.asynccontextmanager
async def session(transport, cli, args, url=None):
    """An initialized ClientSession to `rulegym mcp ARGS` over `transport` (http: to `url`)."""
    if transport == "stdio":
        cm = stdio_client(StdioServerParameters(command=cli, args=["mcp", *args]))
    else:
        cm = _http_streams(url)
    async with cm as (read, write):
        async with ClientSession(read, write) as s:
            await s.initialize()
            yield s


@contextlib.asynccontextmanager
async def server(transport, cli, args):
    """Yields a function opening sessions on one server (stdio: one process per session)."""
    if transport == "stdio":
        yield lambda: session("stdio", cli, args)
    else:
        async with serve_http(cli, args) as url:
            yield lambda: session("http", cli, args, url)


def run(fn):
    async def main():
        with anyio.fail_after(120):
            await fn()

    anyio.run(main)


def text(result):
    return "\n".join(c.text for c in result.content if getattr(c, "type", None) == "text")


def read_jsonl(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def search_args(dataset, *extra):
    return ["--dataset", str(dataset["dir"]), "--index", str(dataset["index"]), *extra]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_search_tools_and_resources(cli, dataset, transport):
    articles = {a["id"]: a["contents"] for a in read_jsonl(dataset["dir"] / "articles.jsonl")}
    people = [p["name"] for p in read_jsonl(dataset["dir"] / "people.jsonl")]

    async def body():
        async with server(transport, cli, search_args(dataset)) as open_session:
            async with open_session() as s:
                tools = {t.name: t for t in (await s.list_tools()).tools}
                assert set(tools) == {"search", "get_article", "list_people"}
                assert tools["search"].input_schema["required"] == ["query"]

                name = people[3]
                r = await s.call_tool("search", {"query": f"{name} hobby", "k": 2})
                assert not r.is_error, text(r)
                hits = r.structured_content["results"]
                assert len(hits) == 2
                assert all(articles[h["id"]] == h["contents"] for h in hits)
                assert name in [h["title"] for h in hits]
                assert "Doc 1(Title:" in text(r)
                r = await s.call_tool("search", {"query": name})
                assert len(r.structured_content["results"]) == 3  # default k

                r = await s.call_tool("get_article", {"title": name})
                assert not r.is_error, text(r)
                assert r.structured_content["title"] == name
                assert text(r) == articles[r.structured_content["id"]]
                folded = await s.call_tool("get_article", {"title": name.upper()})
                assert folded.structured_content["id"] == r.structured_content["id"]
                missing = await s.call_tool("get_article", {"title": "Nobody Atall"})
                assert missing.is_error
                assert text(missing).startswith("No article is titled 'Nobody Atall'. Nearest titles: ")

                r = await s.call_tool("list_people", {"limit": 5})
                page = r.structured_content
                assert page["people"] == people[:5] and page["total"] == len(people)
                assert page["next_offset"] == 5
                r = await s.call_tool("list_people", {"offset": len(people) - 2, "limit": 5})
                assert r.structured_content["people"] == people[-2:]
                assert r.structured_content["next_offset"] is None
                part = name.split()[0].lower()
                r = await s.call_tool("list_people", {"contains": part, "limit": 200})
                assert r.structured_content["people"] == [p for p in people if part in p.lower()]

                listed = await s.list_resources()
                uris = [res.uri for res in listed.resources]
                assert len(uris) == min(100, len(articles))
                assert all(str(u).startswith("rulegym://article/") for u in uris)
                assert (listed.next_cursor is not None) == (len(articles) > 100)
                if listed.next_cursor:
                    rest = await s.list_resources(params=mcp.types.PaginatedRequestParams(cursor=listed.next_cursor))
                    assert len(listed.resources) + len(rest.resources) == min(200, len(articles))
                doc_id = next(iter(articles))
                read = await s.read_resource(f"rulegym://article/{doc_id}")
                assert read.contents[0].text == articles[doc_id]

    run(body)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_scored_question(cli, dataset, transport):
    question = read_jsonl(dataset["dir"] / "questions.jsonl")[0]
    gold = ", ".join(question["answers"])
    args = search_args(dataset, "--question", question["id"])

    async def body():
        async with server(transport, cli, args) as open_session:
            async with open_session() as s:
                # A scored session has the scored tools only, as in every protocol.
                assert {t.name for t in (await s.list_tools()).tools} == {"answer", "get_article", "search"}
                prompt = await s.get_prompt("question")
                assert question["question"] in prompt.messages[0].content.text
                read = await s.read_resource("rulegym://question")
                assert read.contents[0].text == question["question"]
                r = await s.call_tool("answer", {"answer": gold})
                assert not r.is_error, text(r)
                assert r.structured_content["score"] == 1.0
                assert r.structured_content["done"] is True
                # The episode is over: every tool answers with an error, the server lives on.
                for name, call_args in [("answer", {"answer": gold}), ("search", {"query": "x"})]:
                    after = await s.call_tool(name, call_args)
                    assert after.is_error and "episode is over" in text(after)
            # A new session is a new episode (on HTTP: the same server process).
            async with open_session() as s:
                r = await s.call_tool("answer", {"answer": "Nobody Atall"})
                assert not r.is_error, text(r)
                assert r.structured_content["score"] < 1.0

    run(body)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_tool_use_task(cli, tmp_path, transport):
    task_file = trip_task_dir(tmp_path)
    task = json.loads(TRIP.read_text())

    async def body():
        async with server(transport, cli, ["--tasks", str(task_file)]) as open_session:
            async with open_session() as s:
                tools = {t.name: t for t in (await s.list_tools()).tools}
                assert set(tools) == {t["name"] for t in task["tools"]} | {"ask_user", "finish"}
                assert tools["search_flights"].input_schema == task["tools"][0]["parameters"]
                prompt = await s.get_prompt("task")
                assert task["instruction"] in prompt.messages[0].content.text

                r = await s.call_tool("ask_user", {"question": "Where are you going?"})
                assert text(r) == "Oslo."
                r = await s.call_tool("ask_user", {"question": "On which date do you fly?"})
                assert text(r) == "2024-06-03."
                r = await s.call_tool("search_flights", {"destination": "Oslo", "date": "2024-06-03"})
                assert not r.is_error and json.loads(text(r)) == FLIGHTS
                # Arguments against the tool's schema: a tool error from the environment.
                bad = await s.call_tool("book_flight", {"flight_id": "OS123"})
                assert bad.is_error and "error" in json.loads(text(bad))
                # A call the mapping does not hold: a tool error, no LLM.
                unmapped = await s.call_tool("search_flights", {"destination": "Rome", "date": "2024-06-03"})
                assert unmapped.is_error
                r = await s.call_tool("book_flight", {"flight_id": "OS123", "date": "2024-06-03"})
                assert not r.is_error, text(r)
                r = await s.call_tool("finish", {"summary": "Your flight OS123 is booked."})
                assert not r.is_error, text(r)
                done = r.structured_content
                assert done["done"] is True and done["reason"] == "answer"
                good = done["score"]
                items = {i["id"]: i["status"] for i in done["rubric"]["items"]}
                assert set(items.values()) == {"passed"}, items
                after = await s.call_tool("ask_user", {"question": "Anything else?"})
                assert after.is_error and "episode is over" in text(after)
            async with open_session() as s:
                # A forbidden tool: the same episode start, a lower score.
                await s.call_tool("ask_user", {"question": "Where are you going?"})
                await s.call_tool("refund_booking", {"flight_id": "OS123"})
                r = await s.call_tool("finish", {"summary": "Done."})
                assert r.structured_content["score"] == 0.0, text(r)
        # Every rubric item passed (the rejected calls above are tool errors, not rubric items).
        assert good == 1.0, good

    run(body)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_bad_input_is_an_error_not_a_crash(cli, dataset, tmp_path, transport):
    task_file = trip_task_dir(tmp_path)

    async def body():
        async with server(transport, cli, search_args(dataset)) as open_session:
            async with open_session() as s:
                with pytest.raises(MCPError, match="unknown tool"):
                    await s.call_tool("no_such_tool", {})
                # `answer` exists only in scored sessions.
                with pytest.raises(MCPError, match="unknown tool"):
                    await s.call_tool("answer", {"answer": "x"})
                for args, message in [
                    ({}, 'missing argument "query"'),
                    ({"query": "x", "k": 0}, "k must be in 1..=20, got 0"),
                    ({"query": "x", "k": 10_000}, "k must be in 1..=20"),
                    ({"query": "x", "k": "three"}, "k must be a whole number"),
                    ({"query": "x", "extra": 1}, 'unknown argument "extra"'),
                    ({"query": "   "}, "query is empty"),
                    ({"query": "x" * 5000}, "the limit is 4096"),
                ]:
                    r = await s.call_tool("search", args)
                    assert r.is_error and message in text(r), (args, text(r))
                r = await s.call_tool("list_people", {"limit": 0})
                assert r.is_error and "limit must be in 1..=200" in text(r)
                r = await s.call_tool("list_people", {"offset": -1})
                assert r.is_error and "offset must be in 0..=" in text(r)
                with pytest.raises(MCPError, match="no resource"):
                    await s.read_resource("rulegym://article/no-such-id")
                with pytest.raises(MCPError, match="unknown prompt"):
                    await s.get_prompt("question")  # not a scored session
                # The session still works.
                r = await s.call_tool("search", {"query": "hobby", "k": 1})
                assert not r.is_error and len(r.structured_content["results"]) == 1
        async with server(transport, cli, ["--tasks", str(task_file)]) as open_session:
            async with open_session() as s:
                with pytest.raises(MCPError, match="unknown tool"):
                    await s.call_tool("search", {"query": "x"})
                r = await s.call_tool("ask_user", {"question": "<answer>done</answer>"})
                assert r.is_error and "must not contain" in text(r)
                r = await s.call_tool("finish", {})
                assert r.is_error and 'missing argument "summary"' in text(r)
                r = await s.call_tool("book_flight", {"flight_id": "x" * 70_000, "date": "d"})
                assert r.is_error and "the limit is 65536" in text(r)
                r = await s.call_tool("finish", {"summary": "Nothing done."})
                assert r.structured_content["done"] is True

    run(body)


def test_readme_mcp_snippet(cli, tmp_path, monkeypatch, capsys):
    """README's MCP client block runs as written, after the core block that writes data/py."""
    import os

    from test_readme_snippets import block, run as run_block

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", f"{Path(cli).parent}{os.pathsep}{os.environ['PATH']}")
    run_block(block("rulegym.generate_dataset"), "core")
    capsys.readouterr()
    run_block(block("from mcp.client.stdio import"), "mcp client")
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last == "1.0", last
