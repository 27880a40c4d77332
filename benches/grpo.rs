//! GRPO loss + gradient on the CPU: 256 prompts x 8 rollouts x 4,096 tokens (8.4M tokens), the
//! size of the peer comparison in scripts/bench-grpo-peers.sh. Reports tokens per second and
//! asserts the output against an independent f64 recomputation of the loss.
//!
//! `cargo bench --bench grpo` (set `GRPO_BENCH_TOKENS=512` etc. for other sequence lengths).

#![allow(clippy::needless_range_loop)] // index loops mirror the math

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rand::Rng;
use rulegym::grpo::{GrpoConfig, TokenBatch, group_advantages, policy_loss};

struct Data {
    rewards: Vec<f32>,
    old: Vec<f32>,
    new: Vec<f32>,
    mask: Vec<u8>,
    offsets: Vec<usize>,
}

fn data(prompts: usize, group: usize, len: usize) -> Data {
    let mut rng = rulegym::seed::stream(7, "bench-grpo", 0);
    let seqs = prompts * group;
    let n = seqs * len;
    let rewards = (0..seqs).map(|_| rng.random_range(0.0f32..1.0)).collect();
    let old: Vec<f32> = (0..n).map(|_| -rng.random_range(0.0f32..5.0)).collect();
    let new = old
        .iter()
        .map(|&o| o + rng.random_range(-0.4f32..0.4))
        .collect();
    let mask = (0..n).map(|_| rng.random_bool(0.9) as u8).collect();
    let offsets = (0..=seqs).map(|s| s * len).collect();
    Data {
        rewards,
        old,
        new,
        mask,
        offsets,
    }
}

/// The loss recomputed naively in f64 from the definition (token-mean), and the mean absolute
/// per-token loss (the scale that f32 rounding errors are relative to).
fn reference_loss(d: &Data, adv: &[f32], cfg: &GrpoConfig) -> (f64, f64) {
    let (mut sum, mut abs, mut count) = (0.0f64, 0.0f64, 0u64);
    for s in 0..adv.len() {
        let a = adv[s] as f64;
        for t in d.offsets[s]..d.offsets[s + 1] {
            if d.mask[t] == 0 {
                continue;
            }
            let rho = ((d.new[t] - d.old[t]) as f64).exp();
            let clipped = rho.clamp(1.0 - cfg.clip_low as f64, 1.0 + cfg.clip_high as f64);
            let l = -(rho * a).min(clipped * a);
            sum += l;
            abs += l.abs();
            count += 1;
        }
    }
    (sum / count as f64, abs / count as f64)
}

fn bench(c: &mut Criterion) {
    let len: usize = std::env::var("GRPO_BENCH_TOKENS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4096);
    let (prompts, group) = (256, 8);
    let d = data(prompts, group, len);
    let cfg = GrpoConfig::default();
    let mut adv = vec![0.0f32; d.rewards.len()];
    group_advantages(&d.rewards, group, &cfg, &mut adv).unwrap();
    let batch = TokenBatch::ragged(&d.old, &d.new, &d.mask, &d.offsets).unwrap();
    let mut grad = vec![0.0f32; d.old.len()];
    let stats = policy_loss(&batch, &adv, &cfg, &mut grad).unwrap();
    let (want, scale) = reference_loss(&d, &adv, &cfg);
    assert!(
        (stats.loss - want).abs() <= 1e-6 * scale,
        "loss {} vs reference {want}",
        stats.loss
    );
    assert!(stats.clip_frac_high > 0.0 && stats.clip_frac_low > 0.0);
    assert!(grad.iter().zip(&d.mask).all(|(g, &m)| m == 1 || *g == 0.0));

    let mut g = c.benchmark_group("grpo");
    g.throughput(Throughput::Elements(d.old.len() as u64));
    g.sample_size(30);
    g.bench_function(format!("policy_loss_cpu/{prompts}x{group}x{len}"), |b| {
        b.iter(|| policy_loss(&batch, &adv, &cfg, &mut grad).unwrap())
    });
    g.finish();
    let mut g = c.benchmark_group("grpo_advantages");
    g.throughput(Throughput::Elements(d.rewards.len() as u64));
    g.bench_function(format!("group_advantages_cpu/{prompts}x{group}"), |b| {
        b.iter(|| group_advantages(&d.rewards, group, &cfg, &mut adv).unwrap())
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
