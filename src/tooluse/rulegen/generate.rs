//! The generator: distinct candidates drawn in index order, in parallel batches.

use super::context::Context;
use super::{RuleGenConfig, RuleGenError, RuleTask};
use crate::universe::Universe;
use std::collections::BTreeSet;

/// Generates `count` distinct tasks from `universe`.
pub fn generate(
    universe: &Universe,
    config: &RuleGenConfig,
    count: usize,
) -> Result<Vec<RuleTask>, RuleGenError> {
    config.validate()?;
    let ctx = Context::new(universe)?;
    let mut out = Vec::with_capacity(count);
    let mut seen = BTreeSet::new();
    let limit = (count as u64)
        .saturating_mul(config.attempts_per_task)
        .max(64);
    let mut next = 0u64;
    let batch = 256u64;
    while out.len() < count && next < limit {
        let end = (next + batch).min(limit);
        let made: Vec<Option<(String, RuleTask)>> = {
            use rayon::prelude::*;
            (next..end)
                .into_par_iter()
                .map(|i| ctx.candidate(config, i))
                .collect()
        };
        for (key, task) in made.into_iter().flatten() {
            if out.len() < count && seen.insert(key) {
                out.push(task);
            }
        }
        next = end;
    }
    if out.len() < count {
        return Err(RuleGenError::Exhausted {
            found: out.len(),
            tried: next,
            wanted: count,
        });
    }
    Ok(out)
}
