"""GRPO from NumPy: equal to `rulegym grpo` (the CLI) bit for bit; no input copies for
contiguous arrays of the native dtypes; errors raise and zero the outputs."""

import json

import numpy as np
import pytest

import rulegym
from conftest import run_cli

CONFIGS = [
    {},
    {"mean_only": True},
    {"std": "population", "clip_low": 0.1, "clip_high": 0.5},
    {"dual_clip": 3.0, "aggregation": "seq-mean-token-mean"},
    {"aggregation": "seq-mean-token-sum", "eps": 0.0},
]


def random_batch(seed, groups=6, group_size=4):
    rng = np.random.default_rng(seed)
    n = groups * group_size
    lengths = rng.integers(0, 40, size=n)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.uint64)
    tokens = int(offsets[-1])
    rewards = rng.choice([0.0, 0.5, 1.0], size=n).astype(np.float32)
    rewards[:group_size] = 1.0  # one group with equal rewards (advantage 0)
    old = rng.normal(-1.5, 0.8, size=tokens).astype(np.float32)
    new = (old + rng.normal(0, 0.3, size=tokens)).astype(np.float32)
    mask = (rng.random(tokens) < 0.85).astype(np.uint8)
    return rewards, group_size, old, new, mask, offsets


def python_step(rewards, group_size, old, new, mask, offsets, config):
    adv = np.empty_like(rewards)
    rulegym.group_advantages(rewards, group_size, adv, config)
    grad = np.full_like(new, np.nan)
    stats = rulegym.policy_loss(old, new, mask, offsets, adv, grad, config)
    return adv, grad, stats


@pytest.mark.parametrize("case", range(len(CONFIGS)))
def test_equals_cli(case, cli, tmp_path):
    config = CONFIGS[case]
    rewards, g, old, new, mask, offsets = random_batch(case)
    rows = [slice(int(a), int(b)) for a, b in zip(offsets[:-1], offsets[1:])]
    doc = {
        "rewards": rewards.tolist(), "group_size": g,
        "logp_old": [old[r].tolist() for r in rows], "logp_new": [new[r].tolist() for r in rows],
        "mask": [mask[r].tolist() for r in rows], "config": config,
    }
    path = tmp_path / "batch.json"
    path.write_text(json.dumps(doc))
    want = json.loads(run_cli(cli, "grpo", "--input", str(path)))
    adv, grad, stats = python_step(rewards, g, old, new, mask, offsets, config)
    assert np.array_equal(adv, np.array(want["advantages"], dtype=np.float32))
    want_grad = np.array([x for row in want["grad"] for x in row], dtype=np.float32)
    assert np.array_equal(grad, want_grad)
    for key, value in stats.items():
        assert value == want[key], key
    assert stats["tokens"] == int(mask.sum()) > 0


def test_no_copies_for_native_arrays():
    rewards, g, old, new, mask, offsets = random_batch(11)
    before = rulegym.grpo_bytes_copied()
    python_step(rewards, g, old, new, mask, offsets, None)
    python_step(rewards, g, old, new, mask.astype(bool), offsets, None)  # bool masks: viewed
    assert rulegym.grpo_bytes_copied() == before
    # A strided view and int64 offsets are copied, and counted.
    old2 = np.repeat(old, 2)[::2]
    assert not old2.flags.c_contiguous
    _, grad_strided, stats_strided = python_step(rewards, g, old2, new, mask, offsets.astype(np.int64), None)
    copied = rulegym.grpo_bytes_copied() - before
    assert copied == old.nbytes + offsets.nbytes
    _, grad, stats = python_step(rewards, g, old, new, mask, offsets, None)
    assert np.array_equal(grad, grad_strided) and stats == stats_strided


def test_padded_matches_ragged():
    rng = np.random.default_rng(3)
    rows, cols = 8, 16
    old = rng.normal(-1, 0.5, size=(rows, cols)).astype(np.float32)
    new = (old + rng.normal(0, 0.2, size=(rows, cols))).astype(np.float32)
    mask = (rng.random((rows, cols)) < 0.7).astype(np.uint8)
    adv = rng.normal(size=rows).astype(np.float32)
    grad2 = np.zeros_like(old)
    s2 = rulegym.policy_loss_padded(old, new, mask, adv, grad2)
    grad1 = np.zeros(rows * cols, dtype=np.float32)
    offsets = np.arange(0, rows * cols + 1, cols, dtype=np.uint64)
    s1 = rulegym.policy_loss(old.ravel(), new.ravel(), mask.ravel(), offsets, adv, grad1)
    np.testing.assert_allclose(grad2.ravel(), grad1, rtol=1e-6, atol=0)
    assert abs(s1["loss"] - s2["loss"]) <= 1e-6 * max(1.0, abs(s1["loss"]))


def test_errors_raise_with_rust_message_and_zero_outputs():
    rewards, g, old, new, mask, offsets = random_batch(5)
    new = new.copy()
    new[np.argmax(mask)] = np.nan
    adv = np.zeros_like(rewards)
    rulegym.group_advantages(rewards, g, adv)
    grad = np.full_like(new, 7.0)
    with pytest.raises(rulegym.RulegymError, match="non-finite"):
        rulegym.policy_loss(old, new, mask, offsets, adv, grad)
    assert not grad.any()
    with pytest.raises(rulegym.RulegymError, match="shape"):
        rulegym.group_advantages(rewards, g, np.zeros(3, dtype=np.float32))
    with pytest.raises(rulegym.RulegymError, match="clip_low"):
        rulegym.group_advantages(rewards, g, adv, {"clip_low": 2.0})
    with pytest.raises(TypeError):
        rulegym.group_advantages(rewards.astype(np.float64), g, adv)
