#!/usr/bin/env python3
"""How a trained model does on fresh questions of one curriculum level, before GRPO is spent
there: draws --n questions from rulegym.Curriculum (the ladder given, held at --level, the
held-out universe's seed excluded) and runs them greedily, multi-turn, with the evaluation of
scripts/train-sft-grpo-cpu.py (same episodes, parsing and limits). A level whose greedy reward
is near zero gives GRPO groups with no reward spread, so no gradient.

  RULEGYM_BIN=target/release/rulegym .venv-test/bin/python scripts/probe-curriculum.py \\
      --work target/sg/run --model sft --ladder "$(cat ladder.json)" --level 0 --n 32 --bf16

Prints one JSON object (progress goes to stderr): the mean reward and SE, by hops, episode
ends, and each question with its answers and reward.
"""

import argparse
import contextlib
import importlib.util
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def pipeline():
    spec = importlib.util.spec_from_file_location("train_sft_grpo", HERE / "train-sft-grpo-cpu.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, required=True, help="a work dir of train-sft-grpo-cpu.py")
    ap.add_argument("--model", choices=["model", "sft", "grpo", "grpo_nc"], default="sft")
    ap.add_argument("--ladder", required=True, help="curriculum ladder, JSON (as train-sft-grpo-cpu.py's --ladder)")
    ap.add_argument("--level", type=int, default=0, help="the ladder level the questions are drawn at")
    ap.add_argument("--n", type=int, default=32, help="questions")
    ap.add_argument("--seed", type=int, default=7, help="the curriculum's seed")
    ap.add_argument("--heldout-seed", type=int, default=1001, help="excluded from the draws")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--bf16", action="store_true")
    args = ap.parse_args(argv)
    train = pipeline()
    import rulegym
    import torch

    torch.set_num_threads(args.threads)
    ladder = json.loads(args.ladder)
    # Started at the level asked for; nothing is reported, so it stays there.
    cur = rulegym.Curriculum({"seed": args.seed, "ladder": ladder, "start_level": args.level,
                              "exclude_seeds": [args.heldout_seed]})
    # A draw is a row as the evaluation takes it (id, question, answers, hops, index, env_config).
    rows = [cur.draw() for _ in range(args.n)]
    eval_args = train.parse_args(["--work", str(args.work), "--eval-batch", "16", "--threads", str(args.threads)]
                                 + (["--bf16"] if args.bf16 else []))
    work = train.Work(args.work)
    tok = train.load_tokenizer(work)
    model = train.load_model(work.model_dir(args.model))
    with contextlib.redirect_stdout(sys.stderr):  # the evaluation's progress lines
        r = train.evaluate(model, tok, rows, eval_args, f"probe level {args.level}")
    out = {k: r[k] for k in ("reward", "se", "n", "by_hops", "ends", "answer_rate")}
    out["questions"] = [{"question": row["question"], "answers": row["answers"], "reward": s}
                        for row, s in zip(rows, r["rewards"])]
    json.dump(out, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
