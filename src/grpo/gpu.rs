//! GRPO on the GPU (feature `gpu`): `shaders/grpo_advantage.wgsl` and `shaders/grpo_loss.wgsl`
//! run through [`crate::gpu`], with every reduction (group statistics, token and sequence
//! counts, loss and metric sums) done on the device.
//!
//! The token arrays are split into chunks of at most [`GpuContext::max_binding_bytes`] per
//! binding (100 MB), and each chunk into items of at most 4,096 tokens of one sequence; one
//! submission runs counting, weighting, the loss pass and the final reduction. Results agree
//! with the CPU reference within 1e-5 relative (tested on Mesa lavapipe); float sums on the
//! device are f32 (per thread, then trees), within ~1e-7 of the sum of absolute values. Limits: at most 2^24 unmasked tokens per sequence
//! and 25 million sequences (one binding of advantages).
//!
//! The host allocates staging vectors here; the allocation-free API is the CPU one.

use super::cpu::first_non_finite;
use super::{Aggregation, GrpoConfig, GrpoError, GrpoOutput, GrpoStats, StdKind, TokenBatch};
use crate::gpu::{GpuContext, GpuError, chunks};

/// Most tokens per workgroup item.
const TILE: usize = 4096;

impl From<GpuError> for GrpoError {
    fn from(e: GpuError) -> Self {
        GrpoError::Gpu(e.to_string())
    }
}

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct AdvParams {
    n_groups: u32,
    group_size: u32,
    mean_only: u32,
    population: u32,
    eps: f32,
    pad: [u32; 3],
}

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct LossParams {
    n_seqs: u32,
    n_items: u32,
    item_base: u32,
    aggregation: u32,
    clip_lo: f32,
    clip_hi: f32,
    dual_c: f32,
    has_dual: u32,
}

/// Mirrors `Partial` in grpo_loss.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Default, bytemuck::Pod, bytemuck::Zeroable)]
struct Partial {
    s: [f32; 4],
    c: [u32; 8],
}

/// The GPU GRPO kernels bound to a [`GpuContext`]; pipelines are compiled once in [`Self::new`].
#[derive(Debug)]
pub struct GpuGrpo<'a> {
    ctx: &'a GpuContext,
    advantage: wgpu::ComputePipeline,
    count: wgpu::ComputePipeline,
    finalize: wgpu::ComputePipeline,
    loss: wgpu::ComputePipeline,
    reduce: wgpu::ComputePipeline,
}

fn u32_of(n: usize, what: &str) -> Result<u32, GrpoError> {
    u32::try_from(n)
        .map_err(|_| GrpoError::Shape(format!("{what} = {n} exceeds the GPU path's u32 range")))
}

impl<'a> GpuGrpo<'a> {
    /// Compiles the GRPO pipelines on `ctx`.
    pub fn new(ctx: &'a GpuContext) -> Result<Self, GrpoError> {
        Ok(Self {
            ctx,
            advantage: ctx.pipeline("grpo_advantage", "main")?,
            count: ctx.pipeline("grpo_loss", "count_tokens")?,
            finalize: ctx.pipeline("grpo_loss", "finalize")?,
            loss: ctx.pipeline("grpo_loss", "policy_loss")?,
            reduce: ctx.pipeline("grpo_loss", "reduce")?,
        })
    }

    /// Group advantages on the device into `out`; same contract as
    /// [`crate::grpo::group_advantages`] (on error `out` is zero-filled).
    pub fn advantages(
        &self,
        rewards: &[f32],
        group_size: usize,
        config: &GrpoConfig,
        out: &mut [f32],
    ) -> Result<(), GrpoError> {
        let r = self
            .advantages_device(rewards, group_size, config)
            .and_then(|buf| {
                if out.len() != rewards.len() {
                    return Err(GrpoError::Shape(format!(
                        "advantage buffer has {} entries, rewards has {}",
                        out.len(),
                        rewards.len()
                    )));
                }
                self.ctx.read_into(&buf, out)?;
                if out.iter().any(|a| !a.is_finite()) {
                    return Err(GrpoError::Overflow(
                        "an advantage is not finite in f32 (use eps > 0)".into(),
                    ));
                }
                Ok(())
            });
        if r.is_err() {
            out.fill(0.0);
        }
        r
    }

    /// Loss, metrics and gradient on the device; same contract as [`crate::grpo::policy_loss`]
    /// (on error `grad` is zero-filled).
    pub fn policy_loss(
        &self,
        batch: &TokenBatch<'_>,
        advantages: &[f32],
        config: &GrpoConfig,
        grad: &mut [f32],
    ) -> Result<GrpoStats, GrpoError> {
        let r = (|| {
            if advantages.len() != batch.sequences() {
                return Err(GrpoError::Shape(format!(
                    "{} advantages for {} sequences",
                    advantages.len(),
                    batch.sequences()
                )));
            }
            if let Some(i) = advantages.iter().position(|a| !a.is_finite()) {
                return Err(GrpoError::NonFinite(format!(
                    "advantages[{i}] = {}",
                    advantages[i]
                )));
            }
            let adv = self.ctx.storage("advantages", advantages)?;
            self.loss_device(batch, &adv, config, grad)
        })();
        if r.is_err() {
            grad.fill(0.0);
        }
        r
    }

    /// Advantages, loss, gradient and metrics; the advantages stay on the device between the
    /// two kernels.
    pub fn step(
        &self,
        rewards: &[f32],
        group_size: usize,
        batch: &TokenBatch<'_>,
        config: &GrpoConfig,
    ) -> Result<GrpoOutput, GrpoError> {
        let adv = self.advantages_device(rewards, group_size, config)?;
        let mut advantages = vec![0.0f32; rewards.len()];
        self.ctx.read_into(&adv, &mut advantages)?;
        if advantages.iter().any(|a| !a.is_finite()) {
            return Err(GrpoError::Overflow(
                "an advantage is not finite in f32 (use eps > 0)".into(),
            ));
        }
        if advantages.len() != batch.sequences() {
            return Err(GrpoError::Shape(format!(
                "{} rewards for {} sequences",
                advantages.len(),
                batch.sequences()
            )));
        }
        let mut grad = vec![0.0f32; batch.tokens()];
        let stats = self.loss_device(batch, &adv, config, &mut grad)?;
        Ok(GrpoOutput {
            advantages,
            grad,
            stats,
        })
    }

    fn advantages_device(
        &self,
        rewards: &[f32],
        group_size: usize,
        config: &GrpoConfig,
    ) -> Result<wgpu::Buffer, GrpoError> {
        super::check_rewards(rewards, group_size, config)?;
        let ctx = self.ctx;
        let input = ctx.storage("rewards", rewards)?;
        let out = ctx.storage_zeroed("advantages", (rewards.len() * 4) as u64)?;
        let n_groups = u32_of(rewards.len() / group_size, "groups")?;
        let params = ctx.uniform(
            "advantage params",
            &AdvParams {
                n_groups,
                group_size: u32_of(group_size, "group_size")?,
                mean_only: config.mean_only as u32,
                population: (config.std == StdKind::Population) as u32,
                eps: config.eps as f32,
                pad: [0; 3],
            },
        );
        let bg = ctx.bind_group(&self.advantage, &[(0, &params), (1, &input), (2, &out)]);
        let mut enc = ctx.encoder();
        ctx.dispatch(&mut enc, &self.advantage, &bg, n_groups.div_ceil(64));
        ctx.submit(enc)?;
        Ok(out)
    }

    fn loss_device(
        &self,
        batch: &TokenBatch<'_>,
        adv: &wgpu::Buffer,
        config: &GrpoConfig,
        grad: &mut [f32],
    ) -> Result<GrpoStats, GrpoError> {
        super::check_loss_shapes(batch, config, None, grad.len())?;
        let ctx = self.ctx;
        let layout = batch.layout;
        let seqs = layout.sequences();
        let n = layout.tokens();
        // Chunks of tokens (4-token aligned so mask bytes pack into words) and their items.
        let ranges: Vec<_> = chunks(n, 4, ctx.max_binding_bytes(), 256).collect();
        let mut items: Vec<Vec<[u32; 4]>> = Vec::with_capacity(ranges.len());
        let mut per_seq = vec![0u32; seqs + 1];
        for r in &ranges {
            let mut list = Vec::new();
            let mut s = layout.sequence_of(r.start);
            while s < seqs && layout.start(s) < r.end {
                let (a, b) = (layout.start(s).max(r.start), layout.end(s).min(r.end));
                let mut t = a;
                while t < b {
                    let e = (t + TILE).min(b);
                    list.push([s as u32, (t - r.start) as u32, (e - r.start) as u32, 0]);
                    per_seq[s + 1] += 1;
                    t = e;
                }
                s += 1;
            }
            items.push(list);
        }
        for s in 0..seqs {
            per_seq[s + 1] += per_seq[s];
        }
        let n_items = per_seq[seqs] as usize;
        u32_of(seqs, "sequences")?;
        let params = |n_items: usize, item_base: usize| LossParams {
            n_seqs: seqs as u32,
            n_items: n_items as u32,
            item_base: item_base as u32,
            aggregation: match config.aggregation {
                Aggregation::TokenMean => 0,
                Aggregation::SeqMeanTokenMean => 1,
                Aggregation::SeqMeanTokenSum => 2,
            },
            clip_lo: 1.0 - config.clip_low,
            clip_hi: config.high_bound(),
            dual_c: config.dual_bound().unwrap_or(0.0),
            has_dual: config.dual_bound().is_some() as u32,
        };
        let item_stats = ctx.storage_zeroed("item stats", (n_items * 8) as u64)?;
        let partials = ctx.storage_zeroed("partials", (n_items * 48) as u64)?;
        let seq_items = ctx.storage("seq items", &per_seq)?;
        let seq_coef = ctx.storage_zeroed("seq coef", (seqs * 4) as u64)?;
        let totals = ctx.storage_zeroed("totals", 16)?;
        let result = ctx.storage_zeroed("result", 48)?;
        let global = ctx.uniform("params", &params(n_items, 0));

        struct Chunk {
            old: wgpu::Buffer,
            new: wgpu::Buffer,
            mask: wgpu::Buffer,
            items: wgpu::Buffer,
            grad: wgpu::Buffer,
            params: wgpu::Buffer,
            n_items: u32,
        }
        let mut chunk_bufs = Vec::with_capacity(ranges.len());
        let mut base = 0;
        for (r, list) in ranges.iter().zip(&items) {
            chunk_bufs.push(Chunk {
                old: ctx.storage("logp_old", &batch.logp_old[r.clone()])?,
                new: ctx.storage("logp_new", &batch.logp_new[r.clone()])?,
                mask: ctx.storage_bytes("mask", &batch.mask[r.clone()])?,
                items: ctx.storage("items", list)?,
                grad: ctx.storage_zeroed("grad", ((r.end - r.start) * 4) as u64)?,
                params: ctx.uniform("chunk params", &params(list.len(), base)),
                n_items: list.len() as u32,
            });
            base += list.len();
        }

        let mut enc = ctx.encoder();
        for c in &chunk_bufs {
            let bg = ctx.bind_group(
                &self.count,
                &[
                    (0, &c.params),
                    (3, &c.mask),
                    (4, &c.items),
                    (5, &item_stats),
                ],
            );
            ctx.dispatch(&mut enc, &self.count, &bg, c.n_items);
        }
        let bg = ctx.bind_group(
            &self.finalize,
            &[
                (0, &global),
                (6, &seq_items),
                (7, adv),
                (8, &seq_coef),
                (9, &totals),
                (14, &item_stats),
            ],
        );
        ctx.dispatch(&mut enc, &self.finalize, &bg, 1);
        for c in &chunk_bufs {
            let bg = ctx.bind_group(
                &self.loss,
                &[
                    (0, &c.params),
                    (1, &c.old),
                    (2, &c.new),
                    (3, &c.mask),
                    (4, &c.items),
                    (7, adv),
                    (10, &c.grad),
                    (11, &partials),
                    (13, &seq_coef),
                ],
            );
            ctx.dispatch(&mut enc, &self.loss, &bg, c.n_items);
        }
        let bg = ctx.bind_group(
            &self.reduce,
            &[(0, &global), (15, &partials), (12, &result)],
        );
        ctx.dispatch(&mut enc, &self.reduce, &bg, 1);
        ctx.submit(enc)?;

        let mut tot = [0u32; 4];
        ctx.read_into(&totals, &mut tot)?;
        if tot[2] > 0 {
            let index = batch.mask.iter().position(|&m| m > 1).unwrap_or(0);
            return Err(GrpoError::Mask {
                index,
                value: batch.mask[index],
            });
        }
        let mut res = [Partial::default()];
        ctx.read_into(&result, &mut res)?;
        let p = res[0];
        if p.c[3] > 0
            && let Some(e) = first_non_finite(batch)
        {
            return Err(e);
        }
        for (r, c) in ranges.iter().zip(&chunk_bufs) {
            ctx.read_into(&c.grad, &mut grad[r.clone()])?;
        }
        let tokens = tot[0] as u64;
        if tokens == 0 {
            grad.fill(0.0);
            return Ok(GrpoStats::default());
        }
        let t = tokens as f64;
        let pair = |k: usize| p.s[k] as f64;
        let stats = GrpoStats {
            loss: pair(0),
            tokens,
            sequences: tot[1] as u64,
            clip_frac_low: p.c[0] as f64 / t,
            clip_frac_high: p.c[1] as f64 / t,
            dual_clip_frac: p.c[2] as f64 / t,
            mean_ratio: pair(1) / t,
            approx_kl_k1: -pair(2) / t,
            approx_kl_k3: pair(3) / t,
        };
        super::finite_stats(stats, p.c[3] > 0 || p.c[4] > 0)
    }
}

/// Advantages, loss, gradient and metrics on the first GPU adapter (creates a [`GpuContext`];
/// reuse a [`GpuGrpo`] to amortize setup across calls).
pub fn grpo_step_gpu(
    rewards: &[f32],
    group_size: usize,
    batch: &TokenBatch<'_>,
    config: &GrpoConfig,
) -> Result<GrpoOutput, GrpoError> {
    let ctx = GpuContext::new()?;
    GpuGrpo::new(&ctx)?.step(rewards, group_size, batch, config)
}
