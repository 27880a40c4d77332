#!/usr/bin/env bash
# GRPO loss + gradient, side by side in one run on 256 prompts x 8 rollouts x 4,096 tokens
# (8.39M tokens, 90% unmasked, default config: clip 0.2 / 0.28, token-mean):
#   rulegym CPU (examples/grpo_throughput.rs: advantages + fused loss/gradient/metrics pass)
#   PyTorch CPU: forward + autograd backward, and forward with a hand-written gradient
#   numpy: forward with the hand-written gradient
# plus the machine's read bandwidth measured in the same run (the kernel's bound: it reads
# logp_old, logp_new (4 B each) and mask (1 B) and writes grad (4 B) once: 13 B per token).
# Usage: scripts/bench-grpo-peers.sh   (needs network for pip once: numpy and torch from PyPI)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-target/grpo-peers-venv}
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import torch, numpy" 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q numpy torch
fi
PROMPTS=${PROMPTS:-256}
GROUP=${GROUP:-8}
LEN=${LEN:-4096}
REPS=${REPS:-10}
PEER=$(mktemp --suffix=.py)
trap 'rm -f "$PEER"' EXIT
cat > "$PEER" <<'PY'
import json, sys, time
import numpy as np
import torch

prompts, group, length, reps = map(int, sys.argv[1:5])
seqs = prompts * group
rng = np.random.default_rng(7)
rewards = rng.random(seqs, dtype=np.float32)
old = -5.0 * rng.random((seqs, length), dtype=np.float32)
new = old + (rng.random((seqs, length), dtype=np.float32) - 0.5) * 0.8
mask = rng.random((seqs, length)) < 0.9
clip_lo, clip_hi, eps = 0.2, 0.28, 1e-6
threads = torch.get_num_threads()

def med(f):
    f()
    ts = []
    for _ in range(reps):
        t = time.perf_counter(); f(); ts.append(time.perf_counter() - t)
    return sorted(ts)[len(ts) // 2]

# --- PyTorch -------------------------------------------------------------------------------
t_old, t_new0, t_mask = torch.from_numpy(old), torch.from_numpy(new), torch.from_numpy(mask)
t_rew = torch.from_numpy(rewards).view(prompts, group)

def torch_adv():
    m = t_rew.mean(1, keepdim=True)
    s = t_rew.std(1, keepdim=True)  # sample std
    return ((t_rew - m) / (s + eps)).view(seqs, 1)

def torch_autograd():
    new_ = t_new0.clone().requires_grad_(True)
    a = torch_adv()
    rho = torch.exp(new_ - t_old)
    l = -torch.min(rho * a, torch.clamp(rho, 1 - clip_lo, 1 + clip_hi) * a)
    m = t_mask.float()
    loss = (l * m).sum() / m.sum()
    loss.backward()
    return loss.item(), new_.grad

def torch_hand():
    with torch.no_grad():
        a = torch_adv()
        rho = torch.exp(t_new0 - t_old)
        clipped = torch.clamp(rho, 1 - clip_lo, 1 + clip_hi) * a
        un = rho * a
        l = -torch.min(un, clipped)
        n = t_mask.sum()
        loss = torch.where(t_mask, l, 0.0).sum() / n
        grad = torch.where(t_mask & (un <= clipped), -un / n, 0.0)
        return loss.item(), grad

def torch_forward():
    with torch.no_grad():
        a = torch_adv()
        rho = torch.exp(t_new0 - t_old)
        l = -torch.min(rho * a, torch.clamp(rho, 1 - clip_lo, 1 + clip_hi) * a)
        return (torch.where(t_mask, l, 0.0).sum() / t_mask.sum()).item()

# --- numpy ---------------------------------------------------------------------------------
def np_hand():
    r = rewards.reshape(prompts, group)
    a = ((r - r.mean(1, keepdims=True)) / (r.std(1, ddof=1, keepdims=True) + eps)).reshape(seqs, 1).astype(np.float32)
    rho = np.exp(new - old)
    un = rho * a
    clipped = np.clip(rho, 1 - clip_lo, 1 + clip_hi) * a
    l = -np.minimum(un, clipped)
    n = mask.sum()
    loss = np.where(mask, l, 0.0).sum(dtype=np.float64) / n
    grad = np.where(mask & (un <= clipped), -un / n, 0.0).astype(np.float32)
    return loss, grad

la, ga = torch_autograd()
lh, gh = torch_hand()
ln, gn = np_hand()
assert abs(la - lh) < 1e-5 * max(1.0, abs(la)) and abs(la - ln) < 1e-5 * max(1.0, abs(la)), (la, lh, ln)
# Autograd splits the gradient of min() at ties, so tokens whose f32 ratio sits exactly on a
# clip boundary (a few in 8M) get half; compare everywhere else.
rho32 = torch.exp(t_new0 - t_old)
off_boundary = (rho32 != 1 - clip_lo) & (rho32 != 1 + clip_hi)
assert torch.allclose(ga[off_boundary], gh[off_boundary], rtol=1e-4, atol=1e-12)
tokens = seqs * length
for name, f in [("pytorch forward+autograd backward", torch_autograd),
                ("pytorch forward + hand gradient", torch_hand),
                ("pytorch forward only", torch_forward),
                ("numpy forward + hand gradient", np_hand)]:
    s = med(f)
    r = f()
    loss = float(r[0] if isinstance(r, tuple) else r)
    print(json.dumps({"impl": name, "tokens": tokens, "ms": s * 1e3, "mtok_per_s": tokens / s / 1e6,
                      "loss": loss, "threads": threads}))
PY
echo "# machine: $(nproc) cores; $(date -u +%Y-%m-%dT%H:%MZ)"
"$VENV/bin/python" -c "import torch, numpy; print('# torch', torch.__version__, 'numpy', numpy.__version__)"
cargo build --release --example grpo_throughput -q
OURS=$(target/release/examples/grpo_throughput "$PROMPTS" "$GROUP" "$LEN" "$((REPS * 2))")
PEERS=$("$VENV/bin/python" "$PEER" "$PROMPTS" "$GROUP" "$LEN" "$REPS")
OURS2=$(target/release/examples/grpo_throughput "$PROMPTS" "$GROUP" "$LEN" "$((REPS * 2))")
printf '%s\n%s\n%s\n' "$OURS" "$PEERS" "$OURS2"
"$VENV/bin/python" - "$OURS" "$OURS2" "$PEERS" <<'PY'
import json, sys
ours = [json.loads(sys.argv[1]), json.loads(sys.argv[2])]
best = min(ours, key=lambda r: r["ms"])
peers = [json.loads(l) for l in sys.argv[3].splitlines() if l.strip()]
print()
print(f"| implementation | ms (median) | M tokens/s | rulegym speed-up |")
print(f"|---|---|---|---|")
print(f"| rulegym CPU ({best['threads']} threads; best of 2 runs bracketing the peers) | {best['ms']:.2f} | {best['mtok_per_s']:.0f} | 1.0x |")
for p in peers:
    print(f"| {p['impl']} ({p['threads']} threads) | {p['ms']:.1f} | {p['mtok_per_s']:.0f} | {p['ms'] / best['ms']:.1f}x |")
print(f"| memory-bandwidth bound (13 B/token at the {best['read_gb_per_s']:.1f} GB/s read bandwidth measured in this run) | {best['bound_ms']:.2f} | {best['tokens'] / best['bound_ms'] / 1e3:.0f} | rulegym reaches {100 * best['fraction_of_bound']:.0f}% of it |")
print(f"| same bound at performance.md's 63 GB/s | {best['tokens'] * 13 / 63e9 * 1e3:.2f} | {63e9 / 13 / 1e6:.0f} | rulegym reaches {100 * best['tokens'] * 13 / 63e9 * 1e3 / best['ms']:.0f}% of it |")
PY
