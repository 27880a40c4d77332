//! GRPO policy-gradient math: group advantages, the token-level clipped surrogate loss, its
//! gradient with respect to every `logp_new`, and the usual training metrics.
//!
//! Two implementations share one definition: the CPU reference in [`cpu`] (always built) and
//! WGSL compute shaders in `gpu` (feature `gpu`), which are tested against the CPU within 1e-5.
//!
//! # The math
//! * **Group advantages** ([`group_advantages`]): rollouts come in consecutive groups of `G`.
//!   `A_i = (r_i - mean) / (std + eps)` with `std` the sample (n-1) or population deviation,
//!   or `A_i = r_i - mean` with [`GrpoConfig::mean_only`]. A group whose rewards are all equal
//!   (this includes every group of `G = 1`) gets `A = 0`.
//! * **Surrogate** per unmasked token, with `rho = exp(logp_new - logp_old)`:
//!   `l = -min(rho*A, clip(rho, 1 - clip_low, 1 + clip_high)*A)`; with dual clip `c`,
//!   `l = min(l, -c*A)` when `A < 0`. A ratio cap `C` ([`GrpoConfig::ratio_cap`],
//!   PhantomEnvironments' "ratio clipped at 2.0 at token level") bounds the ratio whatever the
//!   advantage's sign: the upper clip becomes `min(1 + clip_high, C)` and the dual clip
//!   `min(c, C)` (for `A < 0`, capping `rho` at `C` is exactly a dual clip at `C`). Masked tokens (mask 0) contribute nothing to the loss,
//!   the gradient or any metric.
//! * **Aggregation** ([`Aggregation`]): `token-mean` divides the sum over all unmasked tokens by
//!   their count; `seq-mean-token-mean` averages per-sequence token means and
//!   `seq-mean-token-sum` per-sequence token sums, over the sequences with at least one unmasked
//!   token. A batch with no unmasked token has loss 0 and gradient 0.
//! * **Gradient** of the aggregated loss with respect to `logp_new`: `-A*rho*w` where the
//!   clip (or dual clip) is inactive, 0 where it is active or the token is masked (`w` is the
//!   aggregation weight of the token). At a clip boundary exactly the gradient flows.
//! * **Metrics** ([`GrpoStats`]) are token means over all unmasked tokens of the batch whatever
//!   the aggregation: clip fractions (low: `A < 0` and `rho < 1 - clip_low`; high: `A > 0` and
//!   `rho > 1 + clip_high`; dual: `A < 0` and `rho > c`), mean ratio, and the approximate
//!   KL(old || new) estimators `k1 = mean(logp_old - logp_new)` and
//!   `k3 = mean(rho - 1 - (logp_new - logp_old))` (Schulman's k1 and k3, samples from the old policy).
//!
//! # Precision
//! Inputs and per-token values are `f32`: `rho` comes from a polynomial `exp` within 2 ulp of
//! the correctly rounded result, with its argument clamped to `[-87, 88]` (so `rho` is finite and
//! never 0). Sums are exact where it matters: token sums run in `f32` over blocks of at most 16
//! values per lane and are then accumulated in `f64`; counts are integers; advantages are computed
//! in `f64` and rounded to `f32` once. Results do not depend on the number of threads: the batch
//! is split at fixed token positions and partial sums are combined in a fixed order.
//!
//! # Errors
//! Non-finite rewards or unmasked log-probabilities, mask values other than 0/1, shape
//! mismatches, bad offsets and invalid configurations return a [`GrpoError`]; on error every
//! caller-provided output buffer is zero-filled, so no NaN ever escapes.
//!
//! ```
//! use rulegym::grpo::{GrpoConfig, TokenBatch, group_advantages, policy_loss};
//! let cfg = GrpoConfig::default();
//! let rewards = [1.0, 0.0];                      // one group of G = 2
//! let mut adv = [0.0f32; 2];
//! group_advantages(&rewards, 2, &cfg, &mut adv).unwrap();
//! let logp_old = [-1.0, -2.0, -0.5];             // sequence 0: 2 tokens, sequence 1: 1 token
//! let logp_new = [-0.9, -2.0, -0.7];
//! let mask = [1u8, 1, 1];
//! let offsets = [0usize, 2, 3];
//! let batch = TokenBatch::ragged(&logp_old, &logp_new, &mask, &offsets).unwrap();
//! let mut grad = [0.0f32; 3];
//! let stats = policy_loss(&batch, &adv, &cfg, &mut grad).unwrap();
//! assert!(stats.loss.is_finite());
//! ```

pub(crate) mod cpu;
#[cfg(feature = "gpu")]
pub mod gpu;

pub use cpu::{group_advantages, policy_loss};

use serde::{Deserialize, Serialize};

/// Errors from the GRPO math. Every bad input gets its own variant and a message that says
/// where the problem is.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GrpoError {
    /// A configuration value is out of range.
    #[error("invalid GRPO config: {0}")]
    Config(String),
    /// Array lengths or offsets are inconsistent.
    #[error("GRPO shape mismatch: {0}")]
    Shape(String),
    /// The batch has no sequence or no reward.
    #[error("GRPO input is empty: {0}")]
    Empty(String),
    /// A reward or an unmasked log-probability is NaN or infinite.
    #[error("non-finite GRPO input: {0}")]
    NonFinite(String),
    /// A mask value is neither 0 nor 1.
    #[error("GRPO mask value {value} at token {index} is not 0 or 1")]
    Mask {
        /// Flat token index.
        index: usize,
        /// The offending value.
        value: u8,
    },
    /// A result overflowed (the log-ratio is so large that `rho * A` exceeds `f32`).
    #[error("GRPO result overflowed: {0}")]
    Overflow(String),
    /// The GPU path failed (no adapter, device error, readback error).
    #[error("GRPO on GPU: {0}")]
    Gpu(String),
}

/// Which standard deviation normalizes group advantages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum StdKind {
    /// Divide by `n - 1` (the default, as in DeepSeekMath's GRPO and `torch.std`).
    #[default]
    Sample,
    /// Divide by `n`.
    Population,
}

/// How per-token losses are reduced to the scalar loss.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Aggregation {
    /// Sum over all unmasked tokens of the batch divided by their count (the default).
    #[default]
    TokenMean,
    /// Mean over non-empty sequences of each sequence's mean over its unmasked tokens.
    SeqMeanTokenMean,
    /// Mean over non-empty sequences of each sequence's sum over its unmasked tokens.
    SeqMeanTokenSum,
}

/// Every choice in the GRPO math; JSON field names are kebab-case (`clip-low`, ...), and
/// snake_case aliases are accepted.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "kebab-case", deny_unknown_fields)]
pub struct GrpoConfig {
    /// Sample or population standard deviation [sample].
    #[serde(alias = "std_kind", alias = "std")]
    pub std: StdKind,
    /// Added to the standard deviation before dividing [1e-6]; must be finite and >= 0.
    pub eps: f64,
    /// Subtract the group mean only, no division (Dr.GRPO) [false].
    #[serde(alias = "mean_only")]
    pub mean_only: bool,
    /// Lower clip: ratios below `1 - clip_low` are clipped for `A < 0` [0.2]; in `[0, 1]`.
    #[serde(alias = "clip_low")]
    pub clip_low: f32,
    /// Upper clip: ratios above `1 + clip_high` are clipped for `A > 0` [0.28]; finite, >= 0.
    /// PhantomEnvironments caps the ratio at 2.0: `clip_high = 1.0`.
    #[serde(alias = "clip_high")]
    pub clip_high: f32,
    /// Dual-clip constant `c > 1` for negative advantages (`l = min(l, -c*A)`) [off].
    #[serde(alias = "dual_clip")]
    pub dual_clip: Option<f32>,
    /// Token-level cap `C > 1` on the importance ratio for every advantage sign [off;
    /// PhantomEnvironments 2.0]: the effective upper clip is `min(1 + clip_high, C)` and the
    /// effective dual clip `min(c, C)`; clip metrics count against the effective bounds.
    #[serde(alias = "ratio_cap", skip_serializing_if = "Option::is_none")]
    pub ratio_cap: Option<f32>,
    /// Loss aggregation [token-mean].
    pub aggregation: Aggregation,
}

impl Default for GrpoConfig {
    fn default() -> Self {
        Self {
            std: StdKind::Sample,
            eps: 1e-6,
            mean_only: false,
            clip_low: 0.2,
            clip_high: 0.28,
            dual_clip: None,
            ratio_cap: None,
            aggregation: Aggregation::TokenMean,
        }
    }
}

impl GrpoConfig {
    /// Checks every value's range; the kernels call this first.
    pub fn validate(&self) -> Result<(), GrpoError> {
        if !(self.eps.is_finite() && self.eps >= 0.0) {
            return Err(GrpoError::Config(format!(
                "eps must be finite and >= 0, got {}",
                self.eps
            )));
        }
        if !(self.clip_low.is_finite() && (0.0..=1.0).contains(&self.clip_low)) {
            return Err(GrpoError::Config(format!(
                "clip_low must be in [0, 1], got {}",
                self.clip_low
            )));
        }
        if !(self.clip_high.is_finite() && self.clip_high >= 0.0) {
            return Err(GrpoError::Config(format!(
                "clip_high must be finite and >= 0, got {}",
                self.clip_high
            )));
        }
        if let Some(c) = self.dual_clip
            && !(c.is_finite() && c > 1.0)
        {
            return Err(GrpoError::Config(format!(
                "dual_clip c must be finite and > 1, got {c}"
            )));
        }
        if let Some(cap) = self.ratio_cap
            && !(cap.is_finite() && cap > 1.0)
        {
            return Err(GrpoError::Config(format!(
                "ratio_cap must be finite and > 1, got {cap}"
            )));
        }
        Ok(())
    }

    /// The effective upper bound of the ratio for `A > 0`: `min(1 + clip_high, ratio_cap)`.
    pub fn high_bound(&self) -> f32 {
        let high = 1.0 + self.clip_high;
        self.ratio_cap.map_or(high, |cap| high.min(cap))
    }

    /// The effective dual-clip constant for `A < 0`: `min(dual_clip, ratio_cap)` (either alone
    /// when only one is set; `None` when neither is).
    pub fn dual_bound(&self) -> Option<f32> {
        match (self.dual_clip, self.ratio_cap) {
            (Some(c), Some(cap)) => Some(c.min(cap)),
            (c, cap) => c.or(cap),
        }
    }

    /// `(low, high)` per-token bounds on the ratio for a sequence with advantage `a`: the clipped
    /// value is `clamp(rho, low, high)` and the gradient flows iff `low <= rho <= high`.
    pub(crate) fn bounds(&self, a: f32) -> (f32, f32) {
        if a > 0.0 {
            (0.0, self.high_bound())
        } else if a < 0.0 {
            (
                1.0 - self.clip_low,
                self.dual_bound().unwrap_or(f32::INFINITY),
            )
        } else {
            (0.0, f32::INFINITY)
        }
    }
}

/// Where the sequences of a flat token array begin and end.
#[derive(Clone, Copy, Debug)]
pub enum Layout<'a> {
    /// Sequence `s` is tokens `offsets[s]..offsets[s + 1]`; `offsets` has one more entry than
    /// there are sequences, starts at 0, never decreases and ends at the token count.
    Ragged(&'a [usize]),
    /// Row-major `rows x cols`; padding is marked by mask 0.
    Padded {
        /// Number of sequences.
        rows: usize,
        /// Tokens per row.
        cols: usize,
    },
}

impl Layout<'_> {
    /// Number of sequences.
    pub fn sequences(&self) -> usize {
        match self {
            Layout::Ragged(o) => o.len().saturating_sub(1),
            Layout::Padded { rows, .. } => *rows,
        }
    }
    /// Flat index of the first token of sequence `s`.
    #[inline]
    pub fn start(&self, s: usize) -> usize {
        match self {
            Layout::Ragged(o) => o[s],
            Layout::Padded { cols, .. } => s * cols,
        }
    }
    /// Flat index one past the last token of sequence `s`.
    #[inline]
    pub fn end(&self, s: usize) -> usize {
        self.start(s + 1)
    }
    /// Total number of tokens.
    pub fn tokens(&self) -> usize {
        self.start(self.sequences())
    }
    /// The sequence containing flat token `t` (the first non-empty one when `t` is a boundary).
    pub(crate) fn sequence_of(&self, t: usize) -> usize {
        match self {
            Layout::Ragged(o) => o[1..].partition_point(|&e| e <= t),
            Layout::Padded { cols, .. } => t / cols,
        }
    }
}

/// Per-token inputs of a batch: borrowed, validated for shape on construction.
#[derive(Clone, Copy, Debug)]
pub struct TokenBatch<'a> {
    /// Log-probabilities under the policy that sampled the rollouts.
    pub logp_old: &'a [f32],
    /// Log-probabilities under the policy being optimized.
    pub logp_new: &'a [f32],
    /// 1 for tokens the policy generated, 0 for environment tokens and padding.
    pub mask: &'a [u8],
    /// Sequence boundaries.
    pub layout: Layout<'a>,
}

impl<'a> TokenBatch<'a> {
    /// A ragged batch: flat arrays plus `offsets` (length = sequences + 1).
    pub fn ragged(
        logp_old: &'a [f32],
        logp_new: &'a [f32],
        mask: &'a [u8],
        offsets: &'a [usize],
    ) -> Result<Self, GrpoError> {
        if offsets.len() < 2 {
            return Err(GrpoError::Empty(format!(
                "offsets has {} entries; need sequences + 1 >= 2",
                offsets.len()
            )));
        }
        if offsets[0] != 0 {
            return Err(GrpoError::Shape(format!(
                "offsets[0] is {}, must be 0",
                offsets[0]
            )));
        }
        if let Some(i) = offsets.windows(2).position(|w| w[1] < w[0]) {
            return Err(GrpoError::Shape(format!(
                "offsets decrease at {}: {} -> {}",
                i + 1,
                offsets[i],
                offsets[i + 1]
            )));
        }
        Self::check(logp_old, logp_new, mask, Layout::Ragged(offsets))
    }

    /// A padded batch: row-major `rows x cols` arrays; padding must have mask 0.
    pub fn padded(
        logp_old: &'a [f32],
        logp_new: &'a [f32],
        mask: &'a [u8],
        rows: usize,
        cols: usize,
    ) -> Result<Self, GrpoError> {
        if rows == 0 {
            return Err(GrpoError::Empty("padded batch has 0 rows".into()));
        }
        if rows.checked_mul(cols).is_none() {
            return Err(GrpoError::Shape(format!("{rows} x {cols} overflows usize")));
        }
        Self::check(logp_old, logp_new, mask, Layout::Padded { rows, cols })
    }

    fn check(
        logp_old: &'a [f32],
        logp_new: &'a [f32],
        mask: &'a [u8],
        layout: Layout<'a>,
    ) -> Result<Self, GrpoError> {
        let n = layout.tokens();
        for (name, len) in [
            ("logp_old", logp_old.len()),
            ("logp_new", logp_new.len()),
            ("mask", mask.len()),
        ] {
            if len != n {
                return Err(GrpoError::Shape(format!(
                    "{name} has {len} tokens, layout has {n}"
                )));
            }
        }
        Ok(Self {
            logp_old,
            logp_new,
            mask,
            layout,
        })
    }

    /// Number of sequences.
    pub fn sequences(&self) -> usize {
        self.layout.sequences()
    }

    /// Number of tokens (masked ones included).
    pub fn tokens(&self) -> usize {
        self.layout.tokens()
    }
}

/// Scalar results of one loss evaluation. Fractions and means are over the unmasked tokens of
/// the whole batch (0 when there are none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GrpoStats {
    /// The aggregated loss.
    pub loss: f64,
    /// Unmasked tokens in the batch.
    pub tokens: u64,
    /// Sequences with at least one unmasked token.
    pub sequences: u64,
    /// Fraction of tokens with `A < 0` and `rho < 1 - clip_low` (gradient zeroed).
    pub clip_frac_low: f64,
    /// Fraction of tokens with `A > 0` and `rho > 1 + clip_high` (or the ratio cap, when lower;
    /// gradient zeroed).
    pub clip_frac_high: f64,
    /// Fraction of tokens with `A < 0` and `rho > c` (dual clip or ratio cap active; 0 when
    /// both are off).
    pub dual_clip_frac: f64,
    /// Mean of `rho`.
    pub mean_ratio: f64,
    /// Mean of `logp_old - logp_new` (k1 estimator of KL(old || new)).
    pub approx_kl_k1: f64,
    /// Mean of `rho - 1 - log rho` (k3 estimator of KL(old || new); >= 0).
    pub approx_kl_k3: f64,
}

/// Everything one GRPO step computes, owned (the convenience result of [`grpo_step`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GrpoOutput {
    /// One advantage per sequence.
    pub advantages: Vec<f32>,
    /// Gradient of the loss with respect to each `logp_new`, in the batch's flat layout.
    pub grad: Vec<f32>,
    /// Loss and metrics.
    pub stats: GrpoStats,
}

/// Checks the config and the rewards of a batch of groups: `group_size` >= 1, a non-empty
/// multiple of it, every reward finite. Shared by the CPU and GPU paths.
pub(crate) fn check_rewards(
    rewards: &[f32],
    group_size: usize,
    config: &GrpoConfig,
) -> Result<(), GrpoError> {
    config.validate()?;
    if group_size == 0 {
        return Err(GrpoError::Config("group_size must be >= 1".into()));
    }
    if rewards.is_empty() {
        return Err(GrpoError::Empty("no rewards".into()));
    }
    if !rewards.len().is_multiple_of(group_size) {
        return Err(GrpoError::Shape(format!(
            "{} rewards is not a multiple of group_size {group_size}",
            rewards.len()
        )));
    }
    if let Some(i) = rewards.iter().position(|r| !r.is_finite()) {
        return Err(GrpoError::NonFinite(format!(
            "rewards[{i}] = {}",
            rewards[i]
        )));
    }
    Ok(())
}

/// Checks the config and the shapes of a loss call: at least one sequence, `advantages`
/// (when given; the GPU path checks its advantages before uploading them) one per sequence,
/// `grad` one entry per token. Shared by the CPU and GPU paths.
pub(crate) fn check_loss_shapes(
    batch: &TokenBatch<'_>,
    config: &GrpoConfig,
    advantages: Option<usize>,
    grad: usize,
) -> Result<(), GrpoError> {
    config.validate()?;
    let seqs = batch.layout.sequences();
    if seqs == 0 {
        return Err(GrpoError::Empty("batch has no sequence".into()));
    }
    if let Some(adv) = advantages
        && adv != seqs
    {
        return Err(GrpoError::Shape(format!(
            "{adv} advantages for {seqs} sequences"
        )));
    }
    let n = batch.layout.tokens();
    if grad != n {
        return Err(GrpoError::Shape(format!(
            "grad buffer has {grad} entries, batch has {n} tokens"
        )));
    }
    Ok(())
}

/// `stats` when they and the pass that summed them are finite, else the overflow error
/// (`overflow`: the pass saw a non-finite input or gradient). Shared by the CPU and GPU paths.
pub(crate) fn finite_stats(stats: GrpoStats, overflow: bool) -> Result<GrpoStats, GrpoError> {
    let finite = [
        stats.loss,
        stats.mean_ratio,
        stats.approx_kl_k1,
        stats.approx_kl_k3,
    ]
    .iter()
    .all(|x| x.is_finite());
    if overflow || !finite {
        return Err(GrpoError::Overflow(
            "log-ratio logp_new - logp_old too large: rho * A or a sum exceeds the float range"
                .into(),
        ));
    }
    Ok(stats)
}

/// Advantages, loss, gradient and metrics in one call on the CPU (allocates the outputs).
/// `rewards` has one entry per sequence, in groups of `group_size` consecutive sequences.
pub fn grpo_step(
    rewards: &[f32],
    group_size: usize,
    batch: &TokenBatch<'_>,
    config: &GrpoConfig,
) -> Result<GrpoOutput, GrpoError> {
    let mut advantages = vec![0.0; rewards.len()];
    group_advantages(rewards, group_size, config, &mut advantages)?;
    let mut grad = vec![0.0; batch.tokens()];
    let stats = policy_loss(batch, &advantages, config, &mut grad)?;
    Ok(GrpoOutput {
        advantages,
        grad,
        stats,
    })
}
