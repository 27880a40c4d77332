//! The knobs of question generation and the retrieval setting of solvability certificates.

use super::{AnchorStrategy, Comparison, Family, Sampler};
use serde::{Deserialize, Serialize};

/// Knobs of question generation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct QuestionConfig {
    /// Seed of the question streams (independent of the universe's).
    pub seed: u64,
    /// The families to generate.
    pub families: Vec<Family>,
    /// Grammar depth for `base` (16 gives PhantomWiki's 38 templates).
    pub depth: usize,
    /// Questions per template (`base`) or per cell (the other families).
    pub per_template: usize,
    /// Use only the 12 easy relations.
    pub easy_mode: bool,
    /// Drop "How many" questions from `base` (they are easy to reward-hack).
    pub exclude_aggregation: bool,
    /// Longest chain of the `hops*` families.
    pub max_hops: usize,
    /// The comparison shapes of `hops+comparisons`, taken in turn by question slot (the
    /// paper's: `older` alone).
    pub comparisons: Vec<Comparison>,
    /// Let zero-hop comparison sides name their person by two or three attributes ("the person
    /// whose hobby is H and whose occupation is O"), an extension shape; off in the paper.
    pub multi_attribute_sides: bool,
    /// Anchor slot strategy of the bidirectional walk (the paper's default: uniform).
    pub anchor: AnchorStrategy,
    /// How each step of the `hops*` families' walks is drawn.
    pub sampler: Sampler,
    /// Keep questions the search environment cannot answer (labelled by their certificate)
    /// instead of rejecting them; for PhantomWiki-identical distributions.
    pub keep_unsolvable: bool,
    /// The retrieval setting under which questions must be answerable.
    pub solvability: Solvability,
    /// Walk attempts per question slot before the slot is reported skipped.
    pub max_attempts: usize,
    /// Cell-balance the `hops*` families (paper's downsampling and soft cap).
    pub balance: bool,
    /// Fraction of each cell held out as the validation split.
    pub val_fraction: f64,
}

impl Default for QuestionConfig {
    fn default() -> Self {
        QuestionConfig {
            seed: 1,
            families: vec![Family::Base],
            depth: 16,
            per_template: 10,
            easy_mode: true,
            exclude_aggregation: false,
            max_hops: 7,
            comparisons: vec![Comparison::Older],
            multi_attribute_sides: false,
            anchor: AnchorStrategy::Uniform,
            sampler: Sampler::Uniform,
            keep_unsolvable: false,
            solvability: Solvability::default(),
            max_attempts: 100,
            balance: false,
            val_fraction: 0.1,
        }
    }
}

impl QuestionConfig {
    /// The rule of every front end: the question seed and easy mode are the universe's unless
    /// the caller chose them (`seed`, `easy_mode`).
    pub fn following(
        mut self,
        universe: &crate::universe::UniverseConfig,
        seed: Option<u64>,
        easy_mode: Option<bool>,
    ) -> Self {
        self.seed = seed.unwrap_or(universe.seed);
        self.easy_mode = easy_mode.unwrap_or(universe.easy_mode);
        self
    }

    /// Checks every knob.
    pub fn validate(&self) -> crate::Result<()> {
        let fail = |m: String| Err(crate::Error::Config(m));
        if !(4..=30).contains(&self.depth) {
            return fail(format!("depth must be in 4..=30, got {}", self.depth));
        }
        if self.per_template > 100_000 {
            return fail(format!(
                "per_template must be at most 100000, got {}",
                self.per_template
            ));
        }
        if !(1..=12).contains(&self.max_hops) {
            return fail(format!("max_hops must be in 1..=12, got {}", self.max_hops));
        }
        if self.max_attempts == 0 {
            return fail("max_attempts must be at least 1".into());
        }
        if !(0.0..1.0).contains(&self.val_fraction) {
            return fail(format!(
                "val_fraction must be in [0, 1), got {}",
                self.val_fraction
            ));
        }
        if self.families.is_empty() {
            return fail("at least one family is needed".into());
        }
        if self.comparisons.is_empty() {
            return fail(format!(
                "at least one comparison shape is needed (valid: {})",
                Comparison::NAMES
            ));
        }
        if !(1..=100).contains(&self.solvability.top_k) {
            return fail(format!(
                "solvability top_k must be in 1..=100, got {}",
                self.solvability.top_k
            ));
        }
        if !(2..=1000).contains(&self.solvability.max_turns) {
            return fail(format!(
                "solvability max_turns must be in 2..=1000, got {}",
                self.solvability.max_turns
            ));
        }
        Ok(())
    }
}

/// The retrieval setting of solvability certificates: the search environment's built-in encoder
/// over the dataset's articles (the index `generate` writes), `top_k` passages per search and a
/// cap of `max_turns` turns (searches plus the answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Solvability {
    /// Passages per search (the paper: 3).
    pub top_k: usize,
    /// Turn cap (the paper: 10 in training, 20 at evaluation).
    pub max_turns: usize,
}

impl Default for Solvability {
    fn default() -> Self {
        Solvability {
            top_k: 3,
            max_turns: 10,
        }
    }
}
