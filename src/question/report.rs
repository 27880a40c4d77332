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

impl GenerationReport {
    /// A table of every cell's slots, questions and rejected walks by reason, then what each
    /// column means (`rulegym generate --explain`).
    pub fn explain(&self) -> String {
        use std::fmt::Write;
        let width = self.cells.keys().map(String::len).max().unwrap_or(4).max(4);
        let mut out = format!(
            "{:width$}  {:>5} {:>9} {:>9} {:>9} {:>10} {:>10} {:>10}\n",
            "cell",
            "slots",
            "questions",
            "dead ends",
            "duplicate",
            "not unique",
            "degenerate",
            "unsolvable"
        );
        let total = self.total();
        let rows = self.cells.iter().map(|(k, c)| (k.as_str(), c));
        for (cell, c) in rows.chain(std::iter::once(("all", &total))) {
            let _ = writeln!(
                out,
                "{cell:width$}  {:>5} {:>9} {:>9} {:>9} {:>10} {:>10} {:>10}",
                c.slots,
                c.accepted,
                c.dead_ends,
                c.duplicates,
                c.not_unique,
                c.degenerate,
                c.unsolvable
            );
        }
        out.push_str(EXPLAIN);
        if self.balanced_away > 0 {
            let _ = writeln!(
                out,
                "balancing then dropped {} questions so that every cell of a family holds as \
                 many as its smallest",
                self.balanced_away
            );
        }
        out
    }
}

/// What the columns of [`GenerationReport::explain`] and the generate summary mean.
const EXPLAIN: &str = "\
slots: questions asked for (so many per template or cell); a slot with no question after \
max_attempts walks is skipped.
questions: slots filled. Every other column counts rejected walks, by reason:
  dead ends: no unvisited person satisfies the next relation of the walk;
  duplicate: the text repeats an earlier question of the family;
  not unique: no answer, or several where the family needs exactly one;
  degenerate: the chain revisits a person, or the answer is stated in the question;
  unsolvable: the search environment's oracle cannot answer it within the certificate's top-k \
and turn cap.
";

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
