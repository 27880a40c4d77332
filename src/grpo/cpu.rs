//! The CPU reference: allocation-free kernels that write into caller-provided buffers.
//!
//! [`policy_loss`] makes two passes: a cheap one over the mask (token and sequence counts, 1 byte
//! per token) and one fused pass that reads `logp_old`, `logp_new` and `mask` once and writes
//! `grad` once while accumulating the loss and every metric. Work is split with `rayon::join` at
//! fixed token positions (independent of the thread count), so results are bit-identical on any
//! number of threads. The per-token arithmetic uses no fused multiply-add, so the AVX-512, AVX2
//! and portable code paths (chosen at run time) also give bit-identical results.

use super::{Aggregation, GrpoConfig, GrpoError, GrpoStats, Layout, StdKind, TokenBatch};

/// Tokens per parallel leaf of the fused pass.
const GRAIN: usize = 1 << 15;
/// SIMD lanes the kernel is written for (one AVX-512 register of `f32`).
const LANES: usize = 16;
/// Tokens per block: each lane sums 16 values in `f32` before the block is added in `f64`.
const BLOCK: usize = 16 * LANES;

/// Writes one advantage per reward into `out` (same length as `rewards`).
///
/// Rewards come in consecutive groups of `group_size`. Sums run in `f64`; a group whose rewards
/// are all equal (every group when `group_size == 1`) gets 0. On error `out` is zero-filled.
/// Cost: two reads of `rewards`, no allocation.
pub fn group_advantages(
    rewards: &[f32],
    group_size: usize,
    config: &GrpoConfig,
    out: &mut [f32],
) -> Result<(), GrpoError> {
    let result = advantages_inner(rewards, group_size, config, out);
    if result.is_err() {
        out.fill(0.0);
    }
    result
}

fn advantages_inner(
    rewards: &[f32],
    group_size: usize,
    config: &GrpoConfig,
    out: &mut [f32],
) -> Result<(), GrpoError> {
    super::check_rewards(rewards, group_size, config)?;
    if out.len() != rewards.len() {
        return Err(GrpoError::Shape(format!(
            "advantage buffer has {} entries, rewards has {}",
            out.len(),
            rewards.len()
        )));
    }
    for (rs, os) in rewards
        .chunks_exact(group_size)
        .zip(out.chunks_exact_mut(group_size))
    {
        group(rs, os, config);
    }
    Ok(())
}

/// Advantages of one group (inputs already validated).
fn group(rs: &[f32], os: &mut [f32], config: &GrpoConfig) {
    let first = rs[0];
    if rs.iter().all(|&r| r == first) {
        os.fill(0.0);
        return;
    }
    let n = rs.len() as f64;
    let mean = rs.iter().map(|&r| r as f64).sum::<f64>() / n;
    if config.mean_only {
        for (o, &r) in os.iter_mut().zip(rs) {
            *o = (r as f64 - mean) as f32;
        }
        return;
    }
    let ss: f64 = rs
        .iter()
        .map(|&r| (r as f64 - mean) * (r as f64 - mean))
        .sum();
    let dof = match config.std {
        StdKind::Sample => n - 1.0,
        StdKind::Population => n,
    };
    let denom = (ss / dof).sqrt() + config.eps;
    for (o, &r) in os.iter_mut().zip(rs) {
        *o = ((r as f64 - mean) / denom) as f32;
    }
}

/// Computes the aggregated clipped-surrogate loss and metrics, and writes `d loss / d logp_new`
/// for every token into `grad` (same length as the batch; 0 where masked or clipped).
///
/// `advantages` has one entry per sequence (from [`group_advantages`] or anywhere else; must be
/// finite). No allocation; parallel over token ranges with rayon. On error `grad` is
/// zero-filled. Cost: about 13 bytes of memory traffic per token (plus 1 byte per token for
/// `seq-mean-token-mean`, whose per-sequence counts are recounted from cache).
pub fn policy_loss(
    batch: &TokenBatch<'_>,
    advantages: &[f32],
    config: &GrpoConfig,
    grad: &mut [f32],
) -> Result<GrpoStats, GrpoError> {
    let result = loss_inner(batch, advantages, config, grad);
    if result.is_err() {
        grad.fill(0.0);
    }
    result
}

/// Normalization shared by every leaf.
struct Ctx<'a, 'b> {
    batch: &'a TokenBatch<'b>,
    adv: &'a [f32],
    config: &'a GrpoConfig,
    /// `1 / unmasked tokens` or `1 / non-empty sequences`, by aggregation.
    inv: f64,
}

/// Partial sums of a token range.
#[derive(Clone, Copy, Default)]
struct Acc {
    loss: f64,
    rho: f64,
    d: f64,
    k3: f64,
    low: u64,
    high: u64,
    dual: u64,
    bad_in: bool,
    bad_out: bool,
}

impl Acc {
    fn combine(self, o: Acc) -> Acc {
        Acc {
            loss: self.loss + o.loss,
            rho: self.rho + o.rho,
            d: self.d + o.d,
            k3: self.k3 + o.k3,
            low: self.low + o.low,
            high: self.high + o.high,
            dual: self.dual + o.dual,
            bad_in: self.bad_in | o.bad_in,
            bad_out: self.bad_out | o.bad_out,
        }
    }
}

fn loss_inner(
    batch: &TokenBatch<'_>,
    adv: &[f32],
    config: &GrpoConfig,
    grad: &mut [f32],
) -> Result<GrpoStats, GrpoError> {
    super::check_loss_shapes(batch, config, Some(adv.len()), grad.len())?;
    let layout = batch.layout;
    let seqs = layout.sequences();
    let n = layout.tokens();
    if let Some(i) = adv.iter().position(|a| !a.is_finite()) {
        return Err(GrpoError::NonFinite(format!(
            "advantages[{i}] = {}",
            adv[i]
        )));
    }
    let pre = prepass(&layout, batch.mask, 0, seqs);
    if pre.bad_mask {
        let index = batch.mask.iter().position(|&m| m > 1).unwrap_or(0);
        return Err(GrpoError::Mask {
            index,
            value: batch.mask[index],
        });
    }
    if pre.tokens == 0 {
        grad.fill(0.0);
        return Ok(GrpoStats::default());
    }
    let inv = match config.aggregation {
        Aggregation::TokenMean => 1.0 / pre.tokens as f64,
        Aggregation::SeqMeanTokenMean | Aggregation::SeqMeanTokenSum => 1.0 / pre.seqs as f64,
    };
    let ctx = Ctx {
        batch,
        adv,
        config,
        inv,
    };
    let acc = run(&ctx, 0, n, grad);
    if acc.bad_in
        && let Some(e) = first_non_finite(batch)
    {
        return Err(e);
    }
    let t = pre.tokens as f64;
    let stats = GrpoStats {
        loss: acc.loss,
        tokens: pre.tokens,
        sequences: pre.seqs,
        clip_frac_low: acc.low as f64 / t,
        clip_frac_high: acc.high as f64 / t,
        dual_clip_frac: acc.dual as f64 / t,
        mean_ratio: acc.rho / t,
        approx_kl_k1: -acc.d / t,
        approx_kl_k3: acc.k3 / t,
    };
    super::finite_stats(stats, acc.bad_in || acc.bad_out)
}

/// The first unmasked token with a non-finite log-probability, as an error.
pub(crate) fn first_non_finite(batch: &TokenBatch<'_>) -> Option<GrpoError> {
    let i = (0..batch.tokens()).find(|&i| {
        batch.mask[i] != 0 && !(batch.logp_old[i].is_finite() && batch.logp_new[i].is_finite())
    })?;
    Some(GrpoError::NonFinite(format!(
        "unmasked token {i} (sequence {}): logp_old = {}, logp_new = {}",
        batch.layout.sequence_of(i),
        batch.logp_old[i],
        batch.logp_new[i]
    )))
}

/// Mask statistics.
#[derive(Clone, Copy, Default)]
struct Pre {
    tokens: u64,
    seqs: u64,
    bad_mask: bool,
}

fn prepass(layout: &Layout<'_>, mask: &[u8], lo: usize, hi: usize) -> Pre {
    let toks = layout.start(hi) - layout.start(lo);
    if hi - lo <= 1 || toks <= 4 * GRAIN {
        let mut p = Pre::default();
        for s in lo..hi {
            let m = &mask[layout.start(s)..layout.end(s)];
            let c = count_ones(m);
            p.tokens += c;
            p.seqs += (c > 0) as u64;
            p.bad_mask |= m.iter().fold(0u8, |a, &x| a | x) > 1;
        }
        return p;
    }
    let mid = lo + (hi - lo) / 2;
    let (a, b) = rayon::join(
        || prepass(layout, mask, lo, mid),
        || prepass(layout, mask, mid, hi),
    );
    Pre {
        tokens: a.tokens + b.tokens,
        seqs: a.seqs + b.seqs,
        bad_mask: a.bad_mask | b.bad_mask,
    }
}

/// Number of nonzero bytes (the mask is 0/1, checked separately).
fn count_ones(m: &[u8]) -> u64 {
    m.chunks(1 << 20)
        .map(|c| c.iter().map(|&x| (x != 0) as u32).sum::<u32>() as u64)
        .sum()
}

fn run(ctx: &Ctx<'_, '_>, lo: usize, hi: usize, grad: &mut [f32]) -> Acc {
    if hi - lo <= GRAIN {
        return leaf(ctx, lo, hi, grad);
    }
    let mid = lo + (hi - lo) / 2 / BLOCK * BLOCK;
    let (gl, gr) = grad.split_at_mut(mid - lo);
    let (a, b) = rayon::join(|| run(ctx, lo, mid, gl), || run(ctx, mid, hi, gr));
    a.combine(b)
}

fn leaf(ctx: &Ctx<'_, '_>, lo: usize, hi: usize, grad: &mut [f32]) -> Acc {
    let b = ctx.batch;
    let layout = b.layout;
    let mut acc = Acc::default();
    let mut s = layout.sequence_of(lo);
    while s < layout.sequences() && layout.start(s) < hi {
        let (start, end) = (layout.start(s), layout.end(s));
        let (x, y) = (start.max(lo), end.min(hi));
        if x < y {
            let a = ctx.adv[s];
            let w = match ctx.config.aggregation {
                Aggregation::TokenMean | Aggregation::SeqMeanTokenSum => ctx.inv,
                Aggregation::SeqMeanTokenMean => {
                    let c = count_ones(&b.mask[start..end]);
                    if c == 0 { 0.0 } else { ctx.inv / c as f64 }
                }
            };
            let coef = -(a as f64) * w;
            let (low, high) = ctx.config.bounds(a);
            let input = SpanIn {
                old: &b.logp_old[x..y],
                new: &b.logp_new[x..y],
                mask: &b.mask[x..y],
                low,
                high,
                coef: coef as f32,
            };
            let sp = span(input, &mut grad[x - lo..y - lo]);
            acc.loss += coef * sp.v;
            acc.rho += sp.rho;
            acc.d += sp.d;
            acc.k3 += sp.k3;
            if a > 0.0 {
                acc.high += sp.above;
            } else if a < 0.0 {
                acc.low += sp.below;
                acc.dual += sp.above;
            }
            acc.bad_in |= sp.bad_in;
            acc.bad_out |= sp.bad_out;
        }
        s += 1;
    }
    acc
}

/// The inputs of one token span of one sequence: log-probabilities and mask (same length as
/// the span's gradient), the ratio's clip bounds and the gradient coefficient.
#[derive(Clone, Copy)]
struct SpanIn<'a> {
    old: &'a [f32],
    new: &'a [f32],
    mask: &'a [u8],
    low: f32,
    high: f32,
    coef: f32,
}

/// Sums over one token span of one sequence.
#[derive(Clone, Copy, Default)]
struct Span {
    v: f64,
    rho: f64,
    d: f64,
    k3: f64,
    below: u64,
    above: u64,
    bad_in: bool,
    bad_out: bool,
}

/// `exp(x)` for `x` clamped to `[-86, 88]`, within 2 ulp; branch-free so it vectorizes.
///
/// Cody-Waite reduction `x = k ln2 + r` with a split `ln2` and the Cephes degree-7 polynomial
/// on `|r| <= ln2 / 2`; `2^k` is built from exponent bits. The clamp keeps the result normal.
#[inline(always)]
pub(crate) fn exp32<const FMA: bool>(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const SHIFT: f32 = 12_582_912.0; // 1.5 * 2^23: adding it rounds to an integer
    const LN2_HI: f32 = 0.693_359_4; // 355/512, exact in 9 bits
    const LN2_LO: f32 = -2.121_944_4e-4;
    let x = if x < -86.0 { -86.0 } else { x };
    let x = if x > 88.0 { 88.0 } else { x };
    let t = madd::<FMA>(x, LOG2E, SHIFT);
    let kf = t - SHIFT;
    let k = (t.to_bits() as i32).wrapping_sub(SHIFT.to_bits() as i32);
    let r = madd::<FMA>(-kf, LN2_HI, x);
    let r = madd::<FMA>(-kf, LN2_LO, r);
    let p = 1.987_569_1e-4_f32;
    let p = madd::<FMA>(p, r, 1.398_199_9e-3);
    let p = madd::<FMA>(p, r, 8.333_452e-3);
    let p = madd::<FMA>(p, r, 4.166_579_6e-2);
    let p = madd::<FMA>(p, r, 1.666_666_5e-1);
    let p = madd::<FMA>(p, r, 0.5);
    let p = madd::<FMA>(p, r * r, r) + 1.0;
    let scale = f32::from_bits((k.wrapping_add(127) as u32) << 23);
    p * scale
}

/// `a * b + c`, fused (one rounding) when `FMA`; only instantiated with `FMA = true` inside
/// functions compiled with the `fma` target feature, where it is one instruction.
#[inline(always)]
fn madd<const FMA: bool>(a: f32, b: f32, c: f32) -> f32 {
    if FMA { a.mul_add(b, c) } else { a * b + c }
}

/// Per-token results: `(grad, v, rho, d, k3, below, above)`, all zero for masked tokens.
///
/// Non-finite inputs need no test here: they make `d` (hence the sum of `d`) non-finite, which
/// the caller detects once per span.
#[inline(always)]
#[allow(clippy::type_complexity)]
fn token<const FMA: bool>(
    o: f32,
    n: f32,
    m: u8,
    low: f32,
    high: f32,
    coef: f32,
) -> (f32, f32, f32, f32, f32, u32, u32) {
    let on = m != 0;
    let d = n - o;
    let rho = exp32::<FMA>(d);
    let below = rho < low;
    let above = rho > high;
    let v = if below { low } else { rho };
    let v = if above { high } else { v };
    let flows = on & !(below | above);
    let g = if flows { coef * rho } else { 0.0 };
    let k3 = rho - 1.0 - d;
    (
        g,
        if on { v } else { 0.0 },
        if on { rho } else { 0.0 },
        if on { d } else { 0.0 },
        if on { k3 } else { 0.0 },
        (on & below) as u32,
        (on & above) as u32,
    )
}

/// The fused per-span loop, written for 16 lanes so LLVM vectorizes it.
#[inline(always)]
fn span_generic<const FMA: bool>(input: SpanIn<'_>, grad: &mut [f32]) -> Span {
    let SpanIn {
        old,
        new,
        mask,
        low,
        high,
        coef,
    } = input;
    let n = old.len();
    let (new, mask, grad) = (&new[..n], &mask[..n], &mut grad[..n]);
    let mut v64 = [0f64; LANES];
    let mut rho64 = [0f64; LANES];
    let mut d64 = [0f64; LANES];
    let mut k364 = [0f64; LANES];
    let mut below = [0u32; LANES];
    let mut above = [0u32; LANES];
    let full = n / BLOCK * BLOCK;
    for (((ob, nb), mb), gb) in old[..full]
        .chunks_exact(BLOCK)
        .zip(new[..full].chunks_exact(BLOCK))
        .zip(mask[..full].chunks_exact(BLOCK))
        .zip(grad[..full].chunks_exact_mut(BLOCK))
    {
        let mut v32 = [0f32; LANES];
        let mut rho32 = [0f32; LANES];
        let mut d32 = [0f32; LANES];
        let mut k332 = [0f32; LANES];
        for (((oc, nc), mc), gc) in ob
            .chunks_exact(LANES)
            .zip(nb.chunks_exact(LANES))
            .zip(mb.chunks_exact(LANES))
            .zip(gb.chunks_exact_mut(LANES))
        {
            for l in 0..LANES {
                let (g, v, rho, d, k3, lo, hi) = token::<FMA>(oc[l], nc[l], mc[l], low, high, coef);
                gc[l] = g;
                v32[l] += v;
                rho32[l] += rho;
                d32[l] += d;
                k332[l] += k3;
                below[l] += lo;
                above[l] += hi;
            }
        }
        for l in 0..LANES {
            v64[l] += v32[l] as f64;
            rho64[l] += rho32[l] as f64;
            d64[l] += d32[l] as f64;
            k364[l] += k332[l] as f64;
        }
    }
    let mut sp = Span::default();
    for l in 0..LANES {
        sp.v += v64[l];
        sp.rho += rho64[l];
        sp.d += d64[l];
        sp.k3 += k364[l];
        sp.below += below[l] as u64;
        sp.above += above[l] as u64;
    }
    for i in full..n {
        let (g, v, rho, d, k3, lo, hi) = token::<FMA>(old[i], new[i], mask[i], low, high, coef);
        grad[i] = g;
        sp.v += v as f64;
        sp.rho += rho as f64;
        sp.d += d as f64;
        sp.k3 += k3 as f64;
        sp.below += lo as u64;
        sp.above += hi as u64;
    }
    // Non-finite inputs make some unmasked `d` non-finite, and so the sum of `d`.
    sp.bad_in = !(sp.d.is_finite() && sp.k3.is_finite());
    // `rho <= e^88` is finite, so `coef * rho` overflows only if `|coef| * max rho` does; the sum
    // of `rho` bounds `max rho`, and the exact (rare) check reads the span's gradient again.
    let bound = (coef.abs() as f64) * sp.rho;
    if bound.is_nan() || bound >= f32::MAX as f64 {
        sp.bad_out = grad.iter().any(|g| !g.is_finite());
    }
    sp
}

/// Defines `span`, which runs [`span_generic`] compiled for the first listed kernel whose
/// target features this CPU has (detection is cached by std), else the portable build. Each
/// kernel's feature list is written once and serves both `#[target_feature]` and the run-time
/// check; every list must include `fma`, as the kernels are instantiated with `FMA = true`.
macro_rules! dispatch_span {
    ($($kernel:ident: [$($feature:tt),+]),+ $(,)?) => {
        $(
            #[cfg(target_arch = "x86_64")]
            $(#[target_feature(enable = $feature)])+
            fn $kernel(input: SpanIn<'_>, grad: &mut [f32]) -> Span {
                span_generic::<true>(input, grad)
            }
        )+

        /// Runs the widest kernel this CPU supports (detection is cached by std).
        fn span(input: SpanIn<'_>, grad: &mut [f32]) -> Span {
            #[cfg(target_arch = "x86_64")]
            {
                $(
                    if $(std::arch::is_x86_feature_detected!($feature))&&+ {
                        // SAFETY: the CPU supports every feature the kernel is compiled for.
                        return unsafe { $kernel(input, grad) };
                    }
                )+
            }
            span_generic::<false>(input, grad)
        }
    };
}

dispatch_span! {
    span_avx512: ["avx512f", "avx512bw", "avx512vl", "avx512dq", "fma"],
    span_avx2: ["avx2", "fma"],
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp32_is_within_2_ulp() {
        let mut worst = 0.0f64;
        let mut x = -86.0f32;
        while x <= 88.0 {
            let got = exp32::<false>(x) as f64;
            let want = (x as f64).exp();
            let ulp = f32::EPSILON as f64 * want.abs();
            worst = worst.max((got - want).abs() / ulp);
            x += 0.000_731;
        }
        assert!(worst <= 2.0, "worst error {worst} ulp");
        assert_eq!(exp32::<false>(0.0), 1.0);
        assert_eq!(exp32::<true>(0.0), 1.0);
    }

    #[test]
    fn dispatched_kernel_matches_portable_bit_for_bit() {
        let n = 3 * BLOCK + 37;
        let old: Vec<f32> = (0..n)
            .map(|i| -((i * 7919 % 1000) as f32) / 300.0)
            .collect();
        let new: Vec<f32> = (0..n)
            .map(|i| old[i] + ((i * 104_729 % 997) as f32 - 498.0) / 900.0)
            .collect();
        let mask: Vec<u8> = (0..n).map(|i| (i % 5 != 0) as u8).collect();
        for (low, high, coef) in [
            (0.0, 1.28, -0.01),
            (0.8, 3.0, 0.02),
            (0.8, f32::INFINITY, 0.5),
        ] {
            let mut g1 = vec![0.0; n];
            let mut g2 = vec![0.0; n];
            let input = SpanIn {
                old: &old,
                new: &new,
                mask: &mask,
                low,
                high,
                coef,
            };
            let a = span_generic::<true>(input, &mut g1);
            let b = span(input, &mut g2);
            assert_eq!(
                g1.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                g2.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
            );
            assert_eq!(
                [a.v, a.rho, a.d, a.k3].map(f64::to_bits),
                [b.v, b.rho, b.d, b.k3].map(f64::to_bits)
            );
            assert_eq!((a.below, a.above), (b.below, b.above));
            assert!(a.v > 0.0 && a.below + a.above > 0);
        }
    }
}
