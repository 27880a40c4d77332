"""Pieces of ``scripts/train-sft-grpo-cpu.py`` (issue 46's SFT -> GRPO pipeline) that its speed or
its bookkeeping rests on, checked with tiny models:

* the grouped one-token attention its models decode with gives sdpa's outputs (directly, on a
  padded batch, and through ``generate``: the same greedy tokens and logits);
* ``--side-by-side`` children get the parent's options less the ones each child sets itself;
* the curriculum options reach the library's curriculum, which refuses thresholds out of order;
  ``--beta`` reaches TRL's ``GRPOConfig``;
* the per-step log counts zero-spread groups from the curriculum's rewards and keeps TRL's
  entropy and KL;
* ``--grpo-continue`` continues only when asked and short of its steps; the continued stage
  records all its segments, and the result keeps the held-out evaluation from before it.
"""

import importlib.util
from pathlib import Path

import pytest
from conftest import import_or_skip

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("train_sft_grpo", REPO / "scripts" / "train-sft-grpo-cpu.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Heads:
    """What the attention function reads of its module (Llama's attention layer)."""

    def __init__(self, groups):
        self.num_key_value_groups = groups
        self.is_causal = True
        self.training = False


def padded_mask(torch, batch, length, pads):
    """sdpa's boolean mask for one query position over `length` keys, row i left-padded by pads[i]."""
    mask = torch.ones(batch, 1, 1, length, dtype=torch.bool)
    for i, p in enumerate(pads):
        mask[i, :, :, :p] = False
    return mask


def test_one_token_step_equals_sdpa_on_a_padded_batch(script):
    torch = import_or_skip("torch")
    import_or_skip("transformers")
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    torch.manual_seed(0)
    batch, heads, kv_heads, length, dim = 3, 6, 2, 17, 8
    query = torch.randn(batch, heads, 1, dim)
    key = torch.randn(batch, kv_heads, length, dim)
    value = torch.randn(batch, kv_heads, length, dim)
    for mask in (None, padded_mask(torch, batch, length, [0, 4, 9])):
        ours, _ = script.grouped_attention(Heads(heads // kv_heads), query, key, value, mask)
        theirs, _ = sdpa_attention_forward(Heads(heads // kv_heads), query, key, value, mask)
        assert ours.shape == theirs.shape == (batch, 1, heads, dim)
        torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)
    # An additive float mask (what eager-style masks are) is added, not inverted.
    additive = torch.zeros(batch, 1, 1, length)
    additive[1, :, :, :5] = float("-inf")
    ours, _ = script.grouped_attention(Heads(heads // kv_heads), query, key, value, additive)
    theirs, _ = sdpa_attention_forward(Heads(heads // kv_heads), query, key, value, additive)
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)


def test_a_model_loaded_by_the_pipeline_generates_as_with_sdpa(script, tmp_path, monkeypatch):
    torch = import_or_skip("torch")
    import_or_skip("transformers")
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=101, hidden_size=48, intermediate_size=96, num_hidden_layers=2,
                         num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=128)
    LlamaForCausalLM(config).save_pretrained(tmp_path / "model")
    one_token_steps = []
    grouped = script.grouped_attention

    def counted(module, query, *args, **kwargs):
        one_token_steps.append(query.shape[2] == 1)
        return grouped(module, query, *args, **kwargs)

    monkeypatch.setattr(script, "grouped_attention", counted)
    ours = script.load_model(tmp_path / "model").eval()
    theirs = LlamaForCausalLM.from_pretrained(tmp_path / "model", dtype=torch.float32, attn_implementation="sdpa")
    theirs.eval()
    assert ours.config._attn_implementation == "grouped"
    ids = torch.randint(3, 101, (4, 24))
    mask = torch.ones_like(ids)
    for i, pad in enumerate([0, 3, 7, 12]):
        ids[i, :pad], mask[i, :pad] = 0, 0
    runs = []
    for model in (ours, theirs):
        with torch.no_grad():
            runs.append(model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=16, do_sample=False,
                                       pad_token_id=0, eos_token_id=None, output_logits=True,
                                       return_dict_in_generate=True))
    # 2 layers x (1 prefill + 15 one-token steps) went through the pipeline's attention.
    assert one_token_steps.count(True) == 2 * 15 and one_token_steps.count(False) == 2
    assert torch.equal(runs[0].sequences, runs[1].sequences)
    for a, b in zip(runs[0].logits, runs[1].logits):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_side_by_side_children_drop_the_options_they_set(script):
    argv = ["--bf16", "--stages", "all", "--threads=2", "--out", "x.json", "--work", "w", "--grpo-lr", "3e-5"]
    assert script.without_options(argv, {"--stages", "--threads", "--out"}) == [
        "--bf16", "--work", "w", "--grpo-lr", "3e-5"]


def test_curriculum_options_reach_the_library_curriculum(script):
    rulegym = import_or_skip("rulegym")
    ladder = '[{"families": ["hops"], "min_hops": 1, "max_hops": 1}, {"families": ["hops"], "min_hops": 1, "max_hops": 2}]'
    args = script.parse_args(["--ladder", ladder, "--success-threshold", "0.5", "--curriculum-window", "8"])
    config = rulegym.Curriculum(script.curriculum_config(args)).config()
    assert (config["success_threshold"], config["failure_threshold"], config["window"]) == (0.5, 0.1, 8)
    assert [(lv["min_hops"], lv["max_hops"]) for lv in config["ladder"]] == [(1, 1), (1, 2)]
    assert config["exclude_seeds"] == [args.heldout_seed]
    defaults = rulegym.Curriculum(script.curriculum_config(script.parse_args([]))).config()
    assert (defaults["success_threshold"], defaults["failure_threshold"]) == (0.7, 0.1)
    bad = script.parse_args(["--success-threshold", "0.05"])
    with pytest.raises(Exception, match="thresholds out of order"):
        rulegym.Curriculum(script.curriculum_config(bad))


def test_beta_reaches_the_grpo_config(script, tmp_path):
    import_or_skip("trl")
    assert script.grpo_config(script.parse_args(["--smoke"]), tmp_path, 1, 1).beta == 0.0
    config = script.grpo_config(script.parse_args(["--smoke", "--beta", "0.04"]), tmp_path, 7, 12)
    assert (config.beta, config.loss_type, config.seed, config.max_steps) == (0.04, "dapo", 7, 12)


def test_step_log_groups_curriculum_rewards_by_question(script, tmp_path):
    """The per-step log line: zero-spread groups counted over the rewards the curriculum
    environment saw (whole groups only), the levels drawn at, and TRL's entropy and KL."""
    import json
    from types import SimpleNamespace

    import_or_skip("transformers")

    class Draws:
        level, reports = 1, 6
        taken = [(0, 0, 1.0), (0, 0, 0.0), (1, 1, 0.0), (1, 1, 0.0), (2, 1, 1.0)]  # group 2 unfinished

        def take(self):
            out, self.taken = self.taken, []
            return out

    env_cls = SimpleNamespace(draws=Draws())
    steps, path = [], tmp_path / "log.jsonl"
    logger = script.grpo_step_logger("grpo", path, steps, 0.0, env_cls, generations=2)
    logs = {"reward": 0.4, "reward_std": 0.5, "frac_reward_zero_std": 0.5, "loss": 0.1, "entropy": 0.03, "kl": 0.002}
    logger.on_log(None, SimpleNamespace(global_step=3), None, logs=logs)
    logger.on_log(None, SimpleNamespace(global_step=3), None, logs={"loss": 0.1})  # not a step's reward line
    [entry] = steps
    assert (entry["step"], entry["groups"], entry["frac_zero_spread_env"]) == (3, 2, 0.5)
    assert (entry["reward_env"], entry["level_drawn"], entry["level"]) == (0.4, [0, 1], 1)
    assert (entry["entropy"], entry["kl"]) == (0.03, 0.002)
    assert [json.loads(line) for line in path.read_text().splitlines()] == [entry]


def test_a_continued_grpo_record_goes_on_from_the_saved_one(script):
    """--grpo-continue's stage record: the saved record (of one segment, from before segments
    were recorded) and the new segment's steps, step log, curriculum counts and leak check add
    up; a third segment appends to the list."""
    cur = {"config": {"seed": 1}, "final_level": 1, "levels": 3, "state": {"draws": 5}, "draws": 3, "reports": 24}
    first = {"steps": 2, "stopped_by_budget": True, "learning_rate": 1e-5, "per_step": [{"step": 1}, {"step": 2}],
             "wall_s": 100.0, "curriculum": {**cur, "draws": 2, "reports": 16},
             "leak_check": {"draws_checked": 2, "draws_leaking": 0, "by_kind": {}, "examples": []}}
    segment = {"first_step": 3, "steps": 3, "seed": 3, "learning_rate": 5e-6, "stopped_by_budget": False,
               "wall_s": 50.04}
    leak = {"draws_checked": 3, "draws_leaking": 1, "by_kind": {"name": 1}, "examples": [{"id": "q"}]}
    record = script.grpo_record(first, segment, [{"step": 3}, {"step": 4}, {"step": 5}], cur, leak)
    assert [s["step"] for s in record["per_step"]] == [1, 2, 3, 4, 5]
    assert (record["steps"], record["wall_s"], record["learning_rate"]) == (5, 150.0, 5e-6)
    assert [(s["first_step"], s["steps"], s["seed"]) for s in record["segments"]] == [(1, 2, 1), (3, 3, 3)]
    assert (record["curriculum"]["draws"], record["curriculum"]["reports"]) == (5, 40)
    assert record["curriculum"]["state"] == {"draws": 5}
    assert record["leak_check"] == {"draws_checked": 5, "draws_leaking": 1, "by_kind": {"name": 1},
                                    "examples": [{"id": "q"}]}
    third = script.grpo_record(record, {**segment, "first_step": 6, "steps": 1, "seed": 6}, [{"step": 6}], cur, leak)
    assert [(s["first_step"], s["steps"]) for s in third["segments"]] == [(1, 2), (3, 3), (6, 1)]
    assert (third["steps"], third["leak_check"]["draws_leaking"]) == (6, 2)
    alone = script.grpo_record(None, {**segment, "first_step": 1}, [{"step": 1}])
    assert (alone["steps"], len(alone["segments"]), "curriculum" in alone) == (3, 1, False)


def test_the_result_keeps_evaluations_from_before_a_continuation(script, tmp_path):
    """The held-out evaluation a continuation set aside is reported with its paired difference
    to SFT."""
    import json

    sft = {"ids": ["a", "b", "c"], "rewards": [0.0, 1.0, 0.0], "reward": 1 / 3}
    earlier = {"ids": ["a", "b", "c"], "rewards": [1.0, 1.0, 0.0], "reward": 2 / 3}
    (tmp_path / "grpo_eval-41-steps.json").write_text(json.dumps(earlier))
    (tmp_path / "grpo_eval-9-steps.json").write_text(json.dumps(sft))
    found = script.earlier_evals(script.Work(tmp_path), sft)
    assert [(e["steps"], e["reward"]) for e in found] == [(9, 1 / 3), (41, 2 / 3)]
    assert found[1]["vs_sft"]["diff"] == pytest.approx(1 / 3)
    assert script.earlier_evals(script.Work(tmp_path / "none"), sft) == []


def test_grpo_continues_only_when_asked_and_short_of_its_steps(script, tmp_path):
    """--grpo-continue picks up the saved curriculum arm while it has fewer than --grpo-steps
    steps; without the option, or once there, the stage is done."""
    import json

    work = script.Work(tmp_path)
    base = ["--work", str(tmp_path), "--grpo-steps", "101"]
    assert script.grpo_to_continue(work, script.parse_args([*base, "--grpo-continue"])) is None  # nothing saved
    work.grpo.mkdir()
    work.stage_file("grpo").write_text(json.dumps({"steps": 41}))
    assert script.grpo_to_continue(work, script.parse_args([*base, "--grpo-continue"])) == {"steps": 41}
    assert script.grpo_to_continue(work, script.parse_args(base)) is None
    assert script.grpo_to_continue(work, script.parse_args([*base[:2], "--grpo-steps", "41", "--grpo-continue"])) is None
