//! Answer rewards: set F1, exact match, precision and recall between a comma-separated prediction
//! and a gold answer set, after SQuAD normalisation of each item; HotpotQA's yes/no guard;
//! PhantomWiki's own scorer as a mode; extraction of the last `<answer>` from the model's turns.

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// How answer items are normalised before comparison.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ScoreMode {
    /// SQuAD: lower-case, strip punctuation, drop a/an/the, collapse whitespace; HotpotQA's guard
    /// (an item yes/no/noanswer on either side scores 0 unless the sets are equal).
    #[default]
    Squad,
    /// PhantomWiki's scorer: strip and lower-case each item only.
    Phantomwiki,
}

/// The scores of one prediction.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct AnswerScore {
    /// Harmonic mean of precision and recall (0 when either is 0).
    pub f1: f64,
    /// 1 when the normalised sets are equal, else 0.
    pub em: f64,
    /// Fraction of predicted items that are gold.
    pub precision: f64,
    /// Fraction of gold items that were predicted.
    pub recall: f64,
}

impl AnswerScore {
    const ZERO: AnswerScore = AnswerScore {
        f1: 0.0,
        em: 0.0,
        precision: 0.0,
        recall: 0.0,
    };
}

/// SQuAD's answer normalisation: lower-case, remove ASCII punctuation, remove the articles
/// a/an/the, collapse whitespace. Idempotent.
pub fn normalize_squad(text: &str) -> String {
    let lowered = text.to_lowercase();
    let no_punct: String = lowered
        .chars()
        .filter(|c| !c.is_ascii_punctuation())
        .collect();
    no_punct
        .split_whitespace()
        .filter(|w| !matches!(*w, "a" | "an" | "the"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn normalize(item: &str, mode: ScoreMode) -> String {
    match mode {
        ScoreMode::Squad => normalize_squad(item),
        ScoreMode::Phantomwiki => item.trim().to_lowercase(),
    }
}

/// The normalised, distinct, non-empty items of a comma-separated answer.
pub fn answer_set(text: &str, mode: ScoreMode) -> BTreeSet<String> {
    text.split(',')
        .map(|item| normalize(item, mode))
        .filter(|item| !item.is_empty())
        .collect()
}

/// Scores a comma-separated `prediction` against the gold items.
pub fn score(prediction: &str, gold: &[String], mode: ScoreMode) -> AnswerScore {
    let predicted = answer_set(prediction, mode);
    let gold: BTreeSet<String> = gold
        .iter()
        .map(|g| normalize(g, mode))
        .filter(|g| !g.is_empty())
        .collect();
    if predicted.is_empty() || gold.is_empty() {
        return AnswerScore::ZERO;
    }
    if mode == ScoreMode::Squad && predicted != gold {
        let special = |s: &BTreeSet<String>| {
            s.iter()
                .any(|i| matches!(i.as_str(), "yes" | "no" | "noanswer"))
        };
        if special(&predicted) || special(&gold) {
            return AnswerScore::ZERO;
        }
    }
    let hits = predicted.intersection(&gold).count() as f64;
    if hits == 0.0 {
        return AnswerScore::ZERO;
    }
    let precision = hits / predicted.len() as f64;
    let recall = hits / gold.len() as f64;
    AnswerScore {
        f1: 2.0 * precision * recall / (precision + recall),
        em: f64::from(u8::from(predicted == gold)),
        precision,
        recall,
    }
}

/// The text of the last `<answer>...</answer>` in the model's own turns (never the prompt), or
/// `None` when there is none.
pub fn last_answer<'a>(turns: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let mut last = None;
    for turn in turns {
        let mut rest = turn;
        while let Some(start) = rest.find("<answer>") {
            let after = &rest[start + "<answer>".len()..];
            match after.find("</answer>") {
                Some(end) => {
                    last = Some(after[..end].trim().to_owned());
                    rest = &after[end + "</answer>".len()..];
                }
                None => break,
            }
        }
    }
    last
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gold(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn hand_computed_cases() {
        let g = gold(&["Ann Lee", "Bob Stone"]);
        assert_eq!(score("ann lee, Bob Stone.", &g, ScoreMode::Squad).f1, 1.0);
        let half = score("Ann Lee", &g, ScoreMode::Squad);
        assert_eq!((half.precision, half.recall), (1.0, 0.5));
        assert!((half.f1 - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(half.em, 0.0);
        assert_eq!(score("Carl", &g, ScoreMode::Squad).f1, 0.0);
        assert_eq!(score("", &g, ScoreMode::Squad).f1, 0.0);
        assert_eq!(score("The Ann Lee", &g, ScoreMode::Squad).recall, 0.5);
        // PhantomWiki's scorer keeps articles and punctuation.
        assert_eq!(score("The Ann Lee", &g, ScoreMode::Phantomwiki).f1, 0.0);
        // HotpotQA's guard.
        assert_eq!(score("yes, Ann Lee", &g, ScoreMode::Squad).f1, 0.0);
        assert_eq!(score("yes", &gold(&["yes"]), ScoreMode::Squad).f1, 1.0);
    }

    #[test]
    fn last_answer_wins_and_unclosed_is_ignored() {
        let turns = ["<answer>a</answer> then <answer>b</answer>", "<answer>c"];
        assert_eq!(last_answer(turns), Some("b".into()));
        assert_eq!(last_answer(["no tags"]), None);
    }
}
