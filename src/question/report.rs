//! What generation did: counts per run and per cell.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Counts of what generation did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GenerationReport {
    /// Questions accepted.
    pub accepted: usize,
    /// Slots given up after `max_attempts` walks.
    pub skipped_slots: usize,
    /// Walks rejected (dead end, duplicate, or not a unique answer where one is required).
    pub rejections: usize,
    /// Questions dropped by cell balancing.
    pub balanced_away: usize,
    /// Per cell (`family/cell`): slots, accepted questions, rejections by reason.
    pub cells: BTreeMap<String, CellReport>,
}

/// What sampling did in one cell.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CellReport {
    /// Question slots.
    pub slots: usize,
    /// Slots filled.
    pub accepted: usize,
    /// Walks that hit a dead end (no unvisited person satisfies the next relation).
    pub dead_ends: usize,
    /// Proposals whose text repeats an earlier question's.
    pub duplicates: usize,
    /// Proposals with no answer, or several where the family needs one.
    pub not_unique: usize,
    /// Proposals that revisit a person or name their answer ([`Degeneracy`](super::Degeneracy)).
    pub degenerate: usize,
    /// Proposals the search environment cannot answer ([`Certificate`](super::Certificate)).
    pub unsolvable: usize,
}

impl GenerationReport {
    /// The cells' counts summed (`slots` and `accepted` included).
    pub fn total(&self) -> CellReport {
        let mut total = CellReport::default();
        for c in self.cells.values() {
            total.slots += c.slots;
            total.accepted += c.accepted;
            total.dead_ends += c.dead_ends;
            total.duplicates += c.duplicates;
            total.not_unique += c.not_unique;
            total.degenerate += c.degenerate;
            total.unsolvable += c.unsolvable;
        }
        total
    }
}

impl CellReport {
    /// All rejected proposals.
    pub fn rejections(&self) -> usize {
        self.dead_ends + self.duplicates + self.not_unique + self.degenerate + self.unsolvable
    }

    /// Rejected walks per walk: rejections / (rejections + accepted).
    pub fn rejection_rate(&self) -> f64 {
        let r = self.rejections();
        r as f64 / (r + self.accepted).max(1) as f64
    }
}
