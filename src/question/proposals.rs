//! Phase 1 of generation: every slot of every cell proposed and pre-checked on the universe
//! alone, and the proposals' shards.

use super::cells::cells;
use super::record::record;
use super::slot::propose;
use super::{
    CellReport, Certify, Family, GenerationReport, Question, QuestionConfig, balance, degenerate,
    sample, text,
};
use crate::seed;
use crate::universe::Universe;
use std::collections::HashSet;

/// Checks a shard choice: `index` of `count` shards, `0 <= index < count`.
pub fn check_shard(index: usize, count: usize) -> crate::Result<()> {
    if count == 0 || index >= count {
        return Err(crate::Error::Config(format!(
            "shard {index} of {count}: need 0 <= index < count"
        )));
    }
    Ok(())
}

/// Sampled, not yet verified questions: the first phase of generation, which needs only the
/// universe (so it can run while engines load the facts).
pub struct Proposals {
    /// The proposed questions, in cell and slot order.
    pub(super) questions: Vec<Question>,
    /// What sampling did.
    pub(super) report: GenerationReport,
}

impl Proposals {
    /// The proposed questions (answers from the native screen until verified).
    pub fn questions(&self) -> &[Question] {
        &self.questions
    }

    /// What sampling did.
    pub fn report(&self) -> &GenerationReport {
        &self.report
    }

    /// Keeps shard `index` of `count`: a contiguous run of the proposals, so that the verified
    /// shards concatenated in index order are the unsharded output exactly. Sampling is cheap
    /// and deterministic, verification is where the engine time goes: every worker proposes
    /// everything and verifies its own shard. The report's counts stay with shard 0, so
    /// summing the shards' reports gives the whole run's.
    pub fn into_shard(self, index: usize, count: usize) -> crate::Result<Proposals> {
        check_shard(index, count)?;
        let n = self.questions.len();
        let bounds = |i: usize| i * n / count;
        let questions = self
            .questions
            .into_iter()
            .skip(bounds(index))
            .take(bounds(index + 1) - bounds(index))
            .collect();
        let report = if index == 0 {
            self.report
        } else {
            GenerationReport::default()
        };
        Ok(Proposals { questions, report })
    }
}

/// Phase 1: walk, render and pre-check every slot. Deterministic in (universe, config): each
/// slot draws from its own ChaCha stream keyed by (seed, family/cell, index). A proposal is
/// rejected (and the slot retried, up to `max_attempts` walks) when its text repeats an earlier
/// one, when the native evaluator finds no answer (or several where the family needs one), when
/// it is [degenerate](super::degenerate), or, given a `certifier`, when the search environment cannot
/// answer it (unless `keep_unsolvable`). The native evaluator never provides an answer: phase 2
/// ([`verify`](super::verify)) takes every gold answer from the engine.
pub fn propose_all(
    universe: &Universe,
    config: &QuestionConfig,
    certifier: Option<&dyn Certify>,
) -> crate::Result<Proposals> {
    propose_all_observed(universe, config, certifier, &|_, _| {})
}

/// [`propose_all`], calling `cell_done(cells sampled, cells)` after each cell (progress for a
/// long sampling stage; it does not change what is sampled).
pub fn propose_all_observed(
    universe: &Universe,
    config: &QuestionConfig,
    certifier: Option<&dyn Certify>,
    cell_done: &(dyn Fn(usize, usize) + Sync),
) -> crate::Result<Proposals> {
    config.validate()?;
    if universe.people.is_empty() {
        return Err(crate::Error::Config(
            "the universe has no people to ask about".into(),
        ));
    }
    let mut report = GenerationReport::default();
    let mut all = Vec::new();
    // Under strict certificates a walk gives up as soon as only unsolvable questions can come
    // of it: an anchor denoting more people than one search returns, a chain whose proof is
    // already over the turn cap; and walks that start at the anchor draw it among the
    // retrievable ones.
    let limits = match certifier {
        Some(c) if !config.keep_unsolvable => sample::WalkLimits {
            max_anchor_set: config.solvability.top_k,
            max_searches: config.solvability.max_turns.saturating_sub(1),
            anchors: c.anchors(),
        },
        _ => sample::WalkLimits::NONE,
    };
    let total: usize = config
        .families
        .iter()
        .map(|&f| cells(f, config).len())
        .sum();
    let mut sampled = 0;
    for &family in &config.families {
        let mut questions = Vec::new();
        let mut seen = HashSet::new();
        for (cell, slots) in cells(family, config) {
            let label = format!("{}/{cell}", family.name());
            let mut counts = CellReport {
                slots: config.per_template,
                ..CellReport::default()
            };
            for index in 0..config.per_template as u64 {
                let mut rng = seed::stream(config.seed, &label, index);
                let before = counts.rejections();
                let mut accepted = None;
                for _ in 0..config.max_attempts {
                    let p =
                        match propose(universe, config, family, &slots, index, &limits, &mut rng) {
                            Ok(p) => p,
                            Err(sample::WalkEnd::DeadEnd) => {
                                counts.dead_ends += 1;
                                continue;
                            }
                            Err(
                                sample::WalkEnd::AnchorTooCommon | sample::WalkEnd::TooManySearches,
                            ) => {
                                counts.unsolvable += 1;
                                continue;
                            }
                        };
                    let text = text::question_text(&p.query);
                    if seen.contains(&text) {
                        counts.duplicates += 1;
                        continue;
                    }
                    let screened = p.query.evaluate_native(universe)?;
                    let unique_required = family != Family::Base;
                    // A comparison side naming several people is never asked (such a side has
                    // an answer only when every pairing agrees; imported questions may have one).
                    if screened.is_empty()
                        || (unique_required && screened.len() != 1)
                        || !p.query.one_person_sides(universe)?
                    {
                        counts.not_unique += 1;
                        continue;
                    }
                    if degenerate::degeneracy(universe, &p.query, &screened)?.is_some() {
                        counts.degenerate += 1;
                        continue;
                    }
                    let certificate = match certifier {
                        Some(c) => match c.certify(&p.query, &screened, config.keep_unsolvable)? {
                            Some(c) if c.solvable || config.keep_unsolvable => Some(c),
                            _ => {
                                counts.unsolvable += 1;
                                continue;
                            }
                        },
                        None => None,
                    };
                    seen.insert(text.clone());
                    accepted = Some((p, text, screened, certificate));
                    break;
                }
                let rejections = (counts.rejections() - before) as u32;
                let Some((p, text, screened, certificate)) = accepted else {
                    report.skipped_slots += 1;
                    continue;
                };
                counts.accepted += 1;
                let mut q = record(family, &p, text, screened, index, rejections);
                q.certificate = certificate;
                questions.push(q);
            }
            report.rejections += counts.rejections();
            report.cells.insert(label, counts);
            sampled += 1;
            cell_done(sampled, total);
        }
        let before = questions.len();
        let mut questions = balance::balance_and_split(family, questions, config);
        report.balanced_away += before - questions.len();
        all.append(&mut questions);
    }
    Ok(Proposals {
        questions: all,
        report,
    })
}
