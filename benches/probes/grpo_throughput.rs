//! Times the CPU GRPO kernel on `prompts x group x len` tokens and measures the machine's
//! memory bandwidth in the same run; prints one JSON line. Used by scripts/bench-grpo-peers.sh.
//!
//! `cargo run --release --example grpo_throughput -- 256 8 4096 [repeats]`

use rand::Rng;
use rayon::prelude::*;
use rulegym::grpo::{GrpoConfig, TokenBatch, group_advantages, policy_loss};
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("integer argument"))
        .collect();
    let (prompts, group, len) = (
        args.first().copied().unwrap_or(256),
        args.get(1).copied().unwrap_or(8),
        args.get(2).copied().unwrap_or(4096),
    );
    let repeats = args.get(3).copied().unwrap_or(20);
    let seqs = prompts * group;
    let n = seqs * len;
    let mut rng = rulegym::seed::stream(7, "bench-grpo", 0);
    let rewards: Vec<f32> = (0..seqs).map(|_| rng.random_range(0.0f32..1.0)).collect();
    let old: Vec<f32> = (0..n).map(|_| -rng.random_range(0.0f32..5.0)).collect();
    let new: Vec<f32> = old
        .iter()
        .map(|&o| o + rng.random_range(-0.4f32..0.4))
        .collect();
    let mask: Vec<u8> = (0..n).map(|_| rng.random_bool(0.9) as u8).collect();
    let offsets: Vec<usize> = (0..=seqs).map(|s| s * len).collect();
    let cfg = GrpoConfig::default();
    let mut adv = vec![0.0f32; seqs];
    let mut grad = vec![0.0f32; n];
    let batch = TokenBatch::ragged(&old, &new, &mask, &offsets).unwrap();
    let mut times = Vec::new();
    let mut loss = 0.0;
    for _ in 0..repeats + 2 {
        let t = Instant::now();
        group_advantages(&rewards, group, &cfg, &mut adv).unwrap();
        loss = policy_loss(&batch, &adv, &cfg, &mut grad).unwrap().loss;
        times.push(t.elapsed().as_secs_f64());
    }
    let ms = median(times[2..].to_vec()) * 1e3;
    // Read bandwidth: sum logp_old, logp_new and mask (the kernel's inputs) in parallel.
    let mut bw = Vec::new();
    for _ in 0..repeats {
        let t = Instant::now();
        // XOR of the bits: vectorizable at any SIMD width, so the loop is load-bound.
        let s: u32 = old
            .par_chunks(1 << 16)
            .zip(new.par_chunks(1 << 16))
            .map(|(a, b)| {
                a.iter()
                    .zip(b)
                    .fold(0u32, |h, (x, y)| h ^ x.to_bits() ^ y.to_bits())
            })
            .reduce(|| 0, |a, b| a ^ b)
            ^ mask
                .par_chunks(1 << 18)
                .map(|m| m.iter().fold(0u8, |h, &x| h ^ x) as u32)
                .reduce(|| 0, |a, b| a ^ b);
        std::hint::black_box(s);
        bw.push((n * 9) as f64 / t.elapsed().as_secs_f64());
    }
    let read_bw = median(bw);
    let bytes = (n * 13) as f64; // logp_old + logp_new + mask read, grad written
    println!(
        "{{\"impl\": \"rulegym-cpu\", \"tokens\": {n}, \"ms\": {ms:.3}, \"mtok_per_s\": {:.1}, \"loss\": {loss:.9}, \"threads\": {}, \"read_gb_per_s\": {:.1}, \"bound_ms\": {:.3}, \"fraction_of_bound\": {:.3}}}",
        n as f64 / ms / 1e3,
        rayon::current_num_threads(),
        read_bw / 1e9,
        bytes / read_bw * 1e3,
        bytes / read_bw * 1e3 / ms
    );
}
