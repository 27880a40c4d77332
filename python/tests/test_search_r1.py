"""Search-R1's rollout loop against `rulegym serve`.

The client below sends exactly what Search-R1 sends (PeterGriffinJin/Search-R1, main branch,
``search_r1/llm_agent/generation.py``): ``LLMGenerationManager.postprocess_predictions`` takes the
first ``<(search|answer)>(.*?)</\\1>`` of each prediction and strips its content (so
``<search> </search>`` becomes the query ``""``); ``execute_predictions`` calls ``batch_search``
with the list of the batch's search queries on *every* turn, even when no sample searched (the
list is then empty); ``_batch_search`` POSTs ``{"queries": [...], "topk": config.topk,
"return_scores": True}`` with ``requests.post(search_url, json=payload)`` and reads
``.json()["result"]``; ``_passages2string`` formats each hit's ``document.contents`` as
``Doc i(Title: <first line>) <rest>``; ``execute_predictions`` asserts one result per search
query. This file re-implements that client (our code, not Search-R1's) so CI, which cannot
clone GitHub, replays the same requests. Search-R1's own retrieval server accepts all of them,
and so must rulegym's.
"""

import json
import re
import socket
import subprocess
import time

import pytest

import rulegym
from conftest import import_or_skip


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(dataset, cli):
    """`rulegym serve` on the test dataset's index (as a user starts it)."""
    requests = import_or_skip("requests")
    port = _free_port()
    proc = subprocess.Popen([cli, "serve", "--index", str(dataset["index"]), "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            if proc.poll() is not None:
                pytest.fail(f"rulegym serve exited: {proc.stderr.read()}")
            try:
                if requests.get(url + "/health", timeout=1).status_code == 200:
                    break
            except requests.ConnectionError:
                time.sleep(0.05)
        else:
            pytest.fail("rulegym serve did not come up within 10 s")
        yield {"url": url + "/retrieve", "health": requests.get(url + "/health").json()}
    finally:
        proc.terminate()
        proc.wait(timeout=10)


class SearchR1Client:
    """The retrieval side of Search-R1's ``LLMGenerationManager`` (see the module docstring)."""

    def __init__(self, search_url, topk=3):
        import requests

        self.requests = requests
        self.search_url = search_url
        self.topk = topk
        self.sent = []

    def postprocess_predictions(self, predictions):
        actions, contents = [], []
        for prediction in predictions:
            match = re.search(r"<(search|answer)>(.*?)</\1>", prediction, re.DOTALL)
            actions.append(match.group(1) if match else None)
            contents.append(match.group(2).strip() if match else "")
        return actions, contents

    def _batch_search(self, queries):
        payload = {"queries": queries, "topk": self.topk, "return_scores": True}
        self.sent.append(payload)
        return self.requests.post(self.search_url, json=payload).json()

    def _passages2string(self, retrieval_result):
        out = ""
        for idx, doc_item in enumerate(retrieval_result):
            content = doc_item["document"]["contents"]
            title = content.split("\n")[0]
            text = "\n".join(content.split("\n")[1:])
            out += f"Doc {idx + 1}(Title: {title}) {text}\n"
        return out

    def batch_search(self, queries):
        return [self._passages2string(r) for r in self._batch_search(queries)["result"]]

    def execute_predictions(self, predictions):
        """One turn: the observation of each prediction (search results, '' for an answer,
        None for an invalid action)."""
        actions, contents = self.postprocess_predictions(predictions)
        queries = [c for a, c in zip(actions, contents) if a == "search"]
        results = self.batch_search(queries)  # on every turn, like Search-R1 (do_search=True)
        assert len(results) == sum(1 for a in actions if a == "search")
        obs = []
        for action in actions:
            if action == "answer":
                obs.append("")
            elif action == "search":
                obs.append(f"\n\n<information>{results.pop(0).strip()}</information>\n\n")
            else:
                obs.append(None)
        assert not results
        return obs


def test_search_r1_rollout_turns(server, dataset):
    people = [json.loads(l)["name"] for l in (dataset["dir"] / "people.jsonl").read_text().splitlines()]
    index = rulegym.Index(str(dataset["index"]))
    client = SearchR1Client(server["url"], topk=3)

    # A turn with searches, an empty search, an answer and an invalid action.
    obs = client.execute_predictions([
        f"<think>who?</think><search> {people[0]} </search>",
        "<search> </search>",
        "<answer> Ann </answer>",
        "I do not know",
        f"<search>{people[1]}</search> and <search>ignored second</search>",
    ])
    assert client.sent[-1] == {"queries": [people[0], "", people[1]], "topk": 3, "return_scores": True}
    for ob, person in ((obs[0], people[0]), (obs[4], people[1])):
        hits = index.search([person], 3)[0]
        want = "".join(
            f"Doc {i + 1}(Title: {h['contents'].split(chr(10))[0]}) {h['contents'].split(chr(10), 1)[1]}\n"
            for i, h in enumerate(hits)
        ).strip()
        assert ob == f"\n\n<information>{want}</information>\n\n"
        assert f'(Title: "{person}")' in ob
    assert obs[1] == "\n\n<information></information>\n\n"  # the empty query: no hits
    assert obs[2] == "" and obs[3] is None

    # A turn in which no sample searched: Search-R1 still POSTs an empty list.
    assert client.execute_predictions(["<answer> x </answer>", "nothing"]) == ["", None]
    assert client.sent[-1]["queries"] == []
    raw = client.requests.post(server["url"], json={"queries": [], "topk": 3, "return_scores": True})
    assert raw.status_code == 200 and raw.json() == {"result": []}

    # A topk above the corpus size (Search-R1's config allows any): clamped to the corpus.
    n = server["health"]["documents"]
    big = SearchR1Client(server["url"], topk=n + 50)
    obs = big.execute_predictions([f"<search>{people[2]}</search>"])
    assert obs[0].count("Doc ") == n and f"Doc {n}(Title: " in obs[0]


def test_malformed_requests_get_400_with_a_message(server):
    requests = import_or_skip("requests")
    for body in ['{"queries": [', "{}", '{"queries": "not a list"}', '{"queries": ["a", 3]}',
                 '{"queries": ["a"], "topk": 0}', '{"queries": ["a"], "topk": -1}',
                 '{"queries": ["a"], "return_scores": "yes"}', "[1, 2]"]:
        r = requests.post(server["url"], data=body, headers={"Content-Type": "application/json"})
        assert r.status_code == 400, (body, r.text)
        assert r.json()["error"], body
