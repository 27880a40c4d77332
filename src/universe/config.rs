//! Universe configuration, with PhantomWiki's knob names and validation.

use serde::{Deserialize, Serialize};

/// Knobs of a universe. Defaults reproduce the PhantomEnvironments training universe
/// (100 trees of up to 10 people, depth 10, easy mode, seed 1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct UniverseConfig {
    /// The one seed that drives everything (trees, names, dates, friendships, attributes).
    pub seed: u64,
    /// Number of family trees.
    pub num_family_trees: usize,
    /// Target people per tree; a tree stops at this size or one more (PhantomWiki semantics).
    pub max_family_tree_size: usize,
    /// Maximum number of generations in a tree.
    pub max_family_tree_depth: usize,
    /// Maximum children per couple.
    pub max_branching_factor: usize,
    /// Expected number of friends per person (random graph G(n, k/n)).
    pub friendship_k: f64,
    /// Easy mode: questions use only the 11 immediate-family relations and friend.
    pub easy_mode: bool,
}

impl Default for UniverseConfig {
    fn default() -> Self {
        UniverseConfig {
            seed: 1,
            num_family_trees: 100,
            max_family_tree_size: 10,
            max_family_tree_depth: 10,
            max_branching_factor: 5,
            friendship_k: 3.0,
            easy_mode: true,
        }
    }
}

impl UniverseConfig {
    /// Checks every knob; the error names the knob and the accepted range.
    pub fn validate(&self) -> crate::Result<()> {
        let fail = |msg: String| Err(crate::Error::Config(msg));
        if self.num_family_trees == 0 || self.num_family_trees > 1_000_000 {
            return fail(format!(
                "num_family_trees must be in 1..=1000000, got {}",
                self.num_family_trees
            ));
        }
        if self.max_family_tree_size == 0 || self.max_family_tree_size > 10_000 {
            return fail(format!(
                "max_family_tree_size must be in 1..=10000, got {}",
                self.max_family_tree_size
            ));
        }
        if self.max_family_tree_depth == 0 || self.max_family_tree_depth > 20 {
            return fail(format!(
                "max_family_tree_depth must be in 1..=20 (dates of birth span 4-digit years), got {}",
                self.max_family_tree_depth
            ));
        }
        if self.max_branching_factor == 0 || self.max_branching_factor > 20 {
            return fail(format!(
                "max_branching_factor must be in 1..=20, got {}",
                self.max_branching_factor
            ));
        }
        if !self.friendship_k.is_finite() || self.friendship_k < 0.0 {
            return fail(format!(
                "friendship_k must be a finite number >= 0, got {}",
                self.friendship_k
            ));
        }
        let people = self.num_family_trees * (self.max_family_tree_size + 1);
        if people > 2_000_000 {
            return fail(format!(
                "at most 2,000,000 people are supported, this config allows {people}"
            ));
        }
        Ok(())
    }
}
