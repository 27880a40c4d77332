#!/usr/bin/env python3
"""The peers' answer rewards as `rulegym reward-check` commands: reads one
{"id", "question", "response", "answers"} per line on stdin, calls the peer's own function, and
writes {"id", "reward"} per line on stdout.

  verl-search-r1     verl's verl.utils.reward_score.search_r1_like_qa_em.compute_score (what
                     default_compute_score runs for Search-R1 data sources), given the response
                     as verl's reward manager decodes it (the response tokens only) and
                     ground_truth {"target": answers}
  search-r1-em       Search-R1's own verl/utils/reward_score/qa_em.py compute_score_em, from a
  search-r1-subem    checkout given with --repo (the repository is fetched, never vendored);
                     its reward manager decodes prompt + response, so the solution string is
                     Search-R1's prompt for the question followed by the response
  trl-accuracy       TRL's trl.rewards.accuracy_reward (math_verify), completions as strings
                     and the gold answers joined by ", " as the solution column
  rulegym-trl        rulegym.trl.f1_reward (rulegym's reward through its TRL signature)

Example:
  rulegym reward-check --cmd "python scripts/reward-peer.py verl-search-r1" --out report.json
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import sys
from pathlib import Path


def search_r1_prompt(question: str) -> str:
    # Search-R1's training prompt (the one rulegym's DEFAULT_PROMPT follows), rendered as its
    # chat template puts it before the response.
    import rulegym

    return "<|im_start|>user\n" + rulegym.DEFAULT_PROMPT.replace("{question}", question) + "<|im_end|>\n<|im_start|>assistant\n"


def load_peer(name: str, repo: Path | None):
    if name == "verl-search-r1":
        from verl.utils.reward_score import search_r1_like_qa_em

        return lambda x: search_r1_like_qa_em.compute_score(x["response"], {"target": x["answers"]})
    if name in ("search-r1-em", "search-r1-subem"):
        if repo is None:
            raise SystemExit(f"{name} needs --repo, a checkout of PeterGriffinJin/Search-R1")
        path = repo / "verl" / "utils" / "reward_score" / "qa_em.py"
        spec = importlib.util.spec_from_file_location("search_r1_qa_em", path)
        if spec is None or spec.loader is None:
            raise SystemExit(f"cannot load {path}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        fn = module.compute_score_em if name == "search-r1-em" else module.compute_score_subem
        return lambda x: fn(search_r1_prompt(x["question"]) + x["response"], {"target": x["answers"]})
    if name == "trl-accuracy":
        from trl.rewards import accuracy_reward

        return lambda x: accuracy_reward([[{"role": "assistant", "content": x["response"]}]], solution=[", ".join(x["answers"])])[0]
    if name == "rulegym-trl":
        from rulegym.trl import f1_reward

        return lambda x: f1_reward([x["response"]], answers=[x["answers"]], question=[x["question"]])[0]
    raise SystemExit(f"unknown peer {name!r}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("peer", choices=["verl-search-r1", "search-r1-em", "search-r1-subem", "trl-accuracy", "rulegym-trl"])
    ap.add_argument("--repo", type=Path, help="a Search-R1 checkout (search-r1-*)")
    args = ap.parse_args()
    reward = load_peer(args.peer, args.repo)
    out = sys.stdout
    for line in sys.stdin:
        if not line.strip():
            continue
        x = json.loads(line)
        # Peers print (Search-R1 prints a sample of its inputs): keep stdout for answers.
        with contextlib.redirect_stdout(sys.stderr):
            r = reward(x)
        out.write(json.dumps({"id": x["id"], "reward": None if r is None else float(r)}) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
