//! Where rulegym's executable rubric and SynthAgent's LLM judge disagree: both score the same
//! recorded trajectories, and every item's two verdicts (passed or failed) go into a confusion
//! matrix, per item kind and in total, with Cohen's kappa; the two rewards are compared too. A
//! judge call that failed (unparseable, endpoint error) is counted, never guessed.

use super::ItemKind;
use super::{ItemStatus, RubricResult};
use serde::Serialize;
use std::collections::BTreeMap;

/// A 2x2 confusion matrix of two raters' pass/fail verdicts (rules = rater A, judge = rater B).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Confusion {
    /// Both say passed.
    pub both_passed: u64,
    /// The rules say passed, the judge failed.
    pub rules_passed_judge_failed: u64,
    /// The rules say failed, the judge passed.
    pub rules_failed_judge_passed: u64,
    /// Both say failed.
    pub both_failed: u64,
}

impl Confusion {
    /// Adds one pair of verdicts (`true` = passed).
    pub fn add(&mut self, rules: bool, judge: bool) {
        match (rules, judge) {
            (true, true) => self.both_passed += 1,
            (true, false) => self.rules_passed_judge_failed += 1,
            (false, true) => self.rules_failed_judge_passed += 1,
            (false, false) => self.both_failed += 1,
        }
    }

    /// Pairs counted.
    pub fn total(&self) -> u64 {
        self.both_passed
            + self.rules_passed_judge_failed
            + self.rules_failed_judge_passed
            + self.both_failed
    }

    /// The fraction of pairs that agree (`None` when there are none).
    pub fn observed_agreement(&self) -> Option<f64> {
        let n = self.total();
        (n > 0).then(|| (self.both_passed + self.both_failed) as f64 / n as f64)
    }

    /// Cohen's kappa, `(p_o - p_e) / (1 - p_e)` with `p_e` from the two raters' marginals.
    /// `None` when there are no pairs, or when chance agreement is 1 (both raters gave one
    /// verdict throughout: kappa is undefined there, not 0 or 1).
    pub fn kappa(&self) -> Option<f64> {
        let n = self.total() as f64;
        let p_o = self.observed_agreement()?;
        let rules_pass = (self.both_passed + self.rules_passed_judge_failed) as f64 / n;
        let judge_pass = (self.both_passed + self.rules_failed_judge_passed) as f64 / n;
        let p_e = rules_pass * judge_pass + (1.0 - rules_pass) * (1.0 - judge_pass);
        (p_e < 1.0).then(|| (p_o - p_e) / (1.0 - p_e))
    }
}

/// One trajectory's two rewards.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RewardPair {
    /// Task id.
    pub id: String,
    /// The Prolog rubric's reward.
    pub rules: f64,
    /// The judge's reward (`None` when its call failed).
    pub judge: Option<f64>,
    /// Why the judge gave no reward.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub judge_error: Option<String>,
}

/// The agreement of the rules and the judge over a set of trajectories.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct AgreementReport {
    /// Trajectories scored.
    pub trajectories: u64,
    /// Trajectories whose judge call failed (their items are not in the matrices).
    pub judge_failures: u64,
    /// Item verdicts, all kinds together.
    pub items: Confusion,
    /// Item verdicts per kind (`forbidden`, `subgoal`, `interaction`).
    pub by_kind: BTreeMap<String, Confusion>,
    /// Trajectories whose reward is 1 under each scorer (the "solved" verdict).
    pub solved: Confusion,
    /// Mean absolute difference of the two rewards over the judged trajectories.
    pub reward_mean_abs_diff: Option<f64>,
    /// Every trajectory's rewards.
    pub rewards: Vec<RewardPair>,
    /// Sum of |rules - judge| over the judged trajectories (for the mean).
    #[serde(skip)]
    abs_diff_sum: f64,
}

fn kind_name(kind: ItemKind) -> String {
    serde_json::to_value(kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

impl AgreementReport {
    /// Adds one trajectory's two results (items are matched by position: the same rubric).
    pub fn add(&mut self, id: &str, rules: &RubricResult, judge: Result<RubricResult, String>) {
        self.trajectories += 1;
        let judge_reward = match judge {
            Ok(judged) => {
                for (r, j) in rules.items.iter().zip(&judged.items) {
                    let (r_pass, j_pass) = (
                        r.status == ItemStatus::Passed,
                        j.status == ItemStatus::Passed,
                    );
                    self.items.add(r_pass, j_pass);
                    self.by_kind
                        .entry(kind_name(r.kind))
                        .or_default()
                        .add(r_pass, j_pass);
                }
                self.solved.add(rules.reward >= 1.0, judged.reward >= 1.0);
                Ok(judged.reward)
            }
            Err(e) => {
                self.judge_failures += 1;
                Err(e)
            }
        };
        if let Ok(j) = judge_reward {
            self.abs_diff_sum += (rules.reward - j).abs();
            let judged = self.trajectories - self.judge_failures;
            self.reward_mean_abs_diff = Some(self.abs_diff_sum / judged as f64);
        }
        self.rewards.push(RewardPair {
            id: id.to_owned(),
            rules: rules.reward,
            judge: judge_reward.as_ref().ok().copied(),
            judge_error: judge_reward.err(),
        });
    }

    /// A Markdown summary: one row per matrix.
    pub fn markdown(&self) -> String {
        let fmt = |v: Option<f64>| v.map_or("n/a".to_owned(), |v| format!("{v:.3}"));
        let mut out = format!(
            "{} trajectories, {} judge failures; mean |reward(rules) - reward(judge)| = {}\n\n\
             | verdicts | n | both passed | rules only | judge only | both failed | agreement | kappa |\n\
             |---|---|---|---|---|---|---|---|\n",
            self.trajectories,
            self.judge_failures,
            fmt(self.reward_mean_abs_diff)
        );
        let mut rows: Vec<(String, &Confusion)> = vec![("all items".into(), &self.items)];
        rows.extend(self.by_kind.iter().map(|(k, c)| (k.clone(), c)));
        rows.push(("solved (reward 1)".into(), &self.solved));
        for (name, c) in rows {
            out.push_str(&format!(
                "| {name} | {} | {} | {} | {} | {} | {} | {} |\n",
                c.total(),
                c.both_passed,
                c.rules_passed_judge_failed,
                c.rules_failed_judge_passed,
                c.both_failed,
                fmt(c.observed_agreement()),
                fmt(c.kappa())
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matrix(a: u64, b: u64, c: u64, d: u64) -> Confusion {
        Confusion {
            both_passed: a,
            rules_passed_judge_failed: b,
            rules_failed_judge_passed: c,
            both_failed: d,
        }
    }

    #[test]
    fn kappa_matches_worked_examples() {
        // Wikipedia's example: 20 yes/yes, 5 yes/no, 10 no/yes, 15 no/no -> kappa 0.4.
        let k = matrix(20, 5, 10, 15).kappa().unwrap();
        assert!((k - 0.4).abs() < 1e-12, "{k}");
        // Perfect agreement with both verdicts present.
        assert_eq!(matrix(3, 0, 0, 7).kappa(), Some(1.0));
        // Agreement exactly at chance level.
        let k = matrix(1, 1, 1, 1).kappa().unwrap();
        assert!(k.abs() < 1e-12);
        // Systematic disagreement is negative.
        assert!(matrix(0, 5, 5, 0).kappa().unwrap() < 0.0);
    }

    #[test]
    fn kappa_is_undefined_without_variation_or_data() {
        assert_eq!(matrix(0, 0, 0, 0).kappa(), None);
        assert_eq!(matrix(9, 0, 0, 0).kappa(), None);
        assert_eq!(matrix(0, 0, 0, 4).observed_agreement(), Some(1.0));
    }
}
