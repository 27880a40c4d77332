//! Cell-balanced sampling and stratified validation splits, as PhantomEnvironments describes:
//! `hops+constraints` cells (hops x constraints) are downsampled to the smallest cell,
//! `hops+comparisons` cells (hops x kind) soft-capped at 4x the smallest, `hops` cells (hops)
//! downsampled to the smallest; then a fraction of every cell is held out as `val`.

use super::{Family, Question, QuestionConfig};
use crate::seed;
use rand::seq::SliceRandom;
use std::collections::BTreeMap;

/// The balancing cell of a question: (hops, constraints or kind).
pub fn cell(family: Family, q: &Question) -> (usize, String) {
    match family {
        Family::Base => (q.template_index.unwrap_or(0), String::new()),
        Family::Hops => (q.hops, String::new()),
        Family::HopsConstraints => (q.hops, q.constraints.to_string()),
        Family::HopsComparisons => {
            let kind = if matches!(q.kind, super::QuestionKind::Who | super::QuestionKind::What) {
                "base"
            } else {
                "comparison"
            };
            (q.hops, kind.to_owned())
        }
    }
}

/// Balances (when configured) and assigns splits; keeps the generation order within cells.
pub fn balance_and_split(
    family: Family,
    questions: Vec<Question>,
    config: &QuestionConfig,
) -> Vec<Question> {
    let mut cells: BTreeMap<(usize, String), Vec<Question>> = BTreeMap::new();
    for q in questions {
        cells.entry(cell(family, &q)).or_default().push(q);
    }
    if config.balance && family != Family::Base {
        let smallest = cells.values().map(Vec::len).min().unwrap_or(0);
        let cap = match family {
            Family::HopsComparisons => smallest * 4,
            _ => smallest,
        };
        for members in cells.values_mut() {
            members.truncate(cap);
        }
    }
    let mut out = Vec::new();
    for ((hops, sub), mut members) in cells {
        let held_out = (members.len() as f64 * config.val_fraction).round() as usize;
        let label = format!("split/{}/{hops}/{sub}", family.name());
        let mut order: Vec<usize> = (0..members.len()).collect();
        order.shuffle(&mut seed::stream(config.seed, &label, 0));
        for &i in order.iter().take(held_out) {
            members[i].split = super::Split::Val;
        }
        out.append(&mut members);
    }
    out
}

/// A printable grid of cell counts (train/val) per family.
pub fn grid(questions: &[Question]) -> String {
    let mut counts: BTreeMap<(Family, usize, String), (usize, usize)> = BTreeMap::new();
    for q in questions {
        let (hops, sub) = cell(q.family, q);
        let entry = counts.entry((q.family, hops, sub)).or_default();
        if q.split == super::Split::Val {
            entry.1 += 1;
        } else {
            entry.0 += 1;
        }
    }
    let mut out = String::new();
    let mut current = None;
    for ((family, hops, sub), (train, val)) in counts {
        if current != Some(family) {
            out.push_str(&format!("{}\n", family.name()));
            current = Some(family);
        }
        let what = match family {
            Family::Base => format!("template {hops:2}"),
            Family::Hops => format!("hops {hops}"),
            Family::HopsConstraints => format!("hops {hops} constraints {sub}"),
            Family::HopsComparisons => format!("hops {hops} {sub}"),
        };
        out.push_str(&format!("  {what:<28} train {train:5}  val {val:4}\n"));
    }
    out
}
