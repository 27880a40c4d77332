#!/usr/bin/env python3
"""The two CPU speed-ups of scripts/train-sft-grpo-cpu.py, each A/B alternated with the medians:
  decode: a left-padded batch of 16 x 600 tokens, 40 greedy new tokens under bf16 autocast, with
          transformers' sdpa attention vs the pipeline's grouped one-token attention;
  train:  one optimiser step on 2 x 1,024 tokens, float32 vs bf16 autocast.
  RULEGYM_BIN=target/release/rulegym .venv-test/bin/python scripts/bench-decode-cpu.py MODEL_DIR [--repeats 3]
(MODEL_DIR: the converted SmolLM2-135M-Instruct, e.g. the pipeline's WORK/smollm2-135m-instruct)."""
import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("model", type=Path)
ap.add_argument("--repeats", type=int, default=3)
ap.add_argument("--threads", type=int, default=2)
args = ap.parse_args()
torch.set_num_threads(args.threads)
spec = importlib.util.spec_from_file_location("pipeline", Path(__file__).with_name("train-sft-grpo-cpu.py"))
pipeline = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pipeline)

torch.manual_seed(0)
ids = torch.randint(3, 49000, (16, 600))
mask = torch.ones_like(ids)
for i in range(16):
    ids[i, : 20 * i], mask[i, : 20 * i] = 2, 0
models = {"sdpa": AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32, attn_implementation="sdpa"),
          "grouped": pipeline.load_model(args.model)}
times = {k: [] for k in models}
for _ in range(args.repeats):
    for name, m in models.items():
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            t = time.perf_counter()
            m.eval().generate(input_ids=ids, attention_mask=mask, max_new_tokens=40, min_new_tokens=40,
                              do_sample=False, pad_token_id=2)
            times[name].append(time.perf_counter() - t)
med = {k: statistics.median(v) for k, v in times.items()}
print(f"decode 16x600 +40, bf16 autocast: sdpa median {med['sdpa']:.1f} s, grouped {med['grouped']:.1f} s, "
      f"ratio {med['sdpa'] / med['grouped']:.2f} (runs {times})", flush=True)

m = models["sdpa"].train()
opt = torch.optim.AdamW(m.parameters(), lr=1e-7)
x = torch.randint(3, 49000, (2, 1024))
times = {"float32": [], "bf16": []}
for r in range(args.repeats + 1):
    for name in times:
        t = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=name == "bf16"):
            loss = m(input_ids=x, labels=x).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        if r:  # the first round warms up
            times[name].append(2048 / (time.perf_counter() - t))
med = {k: statistics.median(v) for k, v in times.items()}
print(f"train step 2x1024: float32 median {med['float32']:.0f} tokens/s, bf16 autocast {med['bf16']:.0f}, "
      f"ratio {med['bf16'] / med['float32']:.2f}", flush=True)
sys.exit(0)
