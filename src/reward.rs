//! Answer rewards: set F1, exact match, precision and recall between a comma-separated prediction
//! and a gold answer set, after SQuAD normalisation of each item; HotpotQA's yes/no guard;
//! PhantomWiki's own scorer as a mode; extraction of the last `<answer>` from the model's turns.
//!
//! The item rule ([`score`]):
//! - The prediction is split on commas into pieces. A gold item that itself contains a comma
//!   ("Washington, D.C.") matches as a whole: a run of consecutive pieces whose comma-joined
//!   text normalises to such a gold item is one predicted item (longest run first, left to
//!   right, at most as many pieces as that gold item has).
//! - Each item is compared by its key: its normalisation ([`normalize_squad`] or PhantomWiki's
//!   trim and lower-case); an item whose normalisation is empty ("The The", "a") is keyed by its
//!   lower-cased, whitespace-collapsed text instead, so such a gold still scores against the same
//!   prediction; an item that is empty even then (only spaces) is dropped.
//! - Predicted and gold keys are sets; F1, precision and recall compare them, EM is set
//!   equality. An empty side scores 0.

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

/// The key an item is compared by: its normalisation, or, when that is empty, its lower-cased
/// text with whitespace collapsed; `None` for an item that is empty even then.
pub fn item_key(item: &str, mode: ScoreMode) -> Option<String> {
    let normal = normalize(item, mode);
    if !normal.is_empty() {
        return Some(normal);
    }
    let plain = item
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase();
    (!plain.is_empty()).then_some(plain)
}

/// The distinct item keys of a comma-separated answer (no gold is consulted: every piece
/// between commas is an item).
pub fn answer_set(text: &str, mode: ScoreMode) -> BTreeSet<String> {
    text.split(',')
        .filter_map(|item| item_key(item, mode))
        .collect()
}

/// The predicted item keys, a run of pieces that spells a gold item containing commas taken as
/// that one item (see the module docs).
fn predicted_set(text: &str, gold: &[String], mode: ScoreMode) -> BTreeSet<String> {
    let comma_golds: BTreeSet<String> = gold
        .iter()
        .filter(|g| g.contains(','))
        .filter_map(|g| item_key(g, mode))
        .collect();
    let longest = gold
        .iter()
        .filter(|g| g.contains(','))
        .map(|g| g.matches(',').count() + 1)
        .max()
        .unwrap_or(1);
    let pieces: Vec<&str> = text.split(',').collect();
    let mut out = BTreeSet::new();
    let mut i = 0;
    while i < pieces.len() {
        let mut taken = 1;
        for j in (i + 2..=pieces.len().min(i + longest)).rev() {
            if item_key(&pieces[i..j].join(","), mode).is_some_and(|k| comma_golds.contains(&k)) {
                taken = j - i;
                break;
            }
        }
        if let Some(key) = item_key(&pieces[i..i + taken].join(","), mode) {
            out.insert(key);
        }
        i += taken;
    }
    out
}

/// Scores a comma-separated `prediction` against the gold items (the rule is in the module
/// docs).
pub fn score(prediction: &str, gold: &[String], mode: ScoreMode) -> AnswerScore {
    let predicted = predicted_set(prediction, gold, mode);
    let gold: BTreeSet<String> = gold.iter().filter_map(|g| item_key(g, mode)).collect();
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

/// Token-level F1 (SQuAD / HotpotQA style): the bag-of-tokens F1 between the SQuAD-normalised
/// prediction and the SQuAD-normalised gold answers joined by spaces. With one gold answer this
/// is exactly SQuAD's and HotpotQA's token F1; with several, the prediction is expected to list
/// them all (as the set F1 of [`score`] does) and partial overlaps earn partial credit.
/// HotpotQA's guard holds: when either side normalises to yes/no/noanswer the score is 1 for an
/// exact match and 0 otherwise. Empty sides score 0.
pub fn token_f1(prediction: &str, gold: &[String]) -> f64 {
    let pred = normalize_squad(prediction);
    let gold = normalize_squad(&gold.join(" "));
    let special = |s: &str| matches!(s, "yes" | "no" | "noanswer");
    if special(&pred) || special(&gold) {
        return f64::from(u8::from(pred == gold && !pred.is_empty()));
    }
    let mut counts: std::collections::BTreeMap<&str, (usize, usize)> = Default::default();
    for t in pred.split_whitespace() {
        counts.entry(t).or_default().0 += 1;
    }
    for t in gold.split_whitespace() {
        counts.entry(t).or_default().1 += 1;
    }
    let (np, ng) = counts
        .values()
        .fold((0, 0), |(a, b), &(p, g)| (a + p, b + g));
    let common: usize = counts.values().map(|&(p, g)| p.min(g)).sum();
    if common == 0 || np == 0 || ng == 0 {
        return 0.0;
    }
    let precision = common as f64 / np as f64;
    let recall = common as f64 / ng as f64;
    2.0 * precision * recall / (precision + recall)
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
    fn token_f1_hand_computed() {
        // SQuAD: "the Ann Lee." vs "Ann Lee" normalise equal.
        assert_eq!(token_f1("the Ann Lee.", &gold(&["Ann Lee"])), 1.0);
        // One of two tokens: P = 1/1, R = 1/2, F1 = 2/3.
        assert!((token_f1("Ann", &gold(&["Ann Lee"])) - 2.0 / 3.0).abs() < 1e-12);
        // Several gold answers: prediction "Ann Lee, Bob" has 3 tokens, gold has 4
        // (ann lee bob stone): common 3, P = 1, R = 3/4, F1 = 6/7.
        let g = gold(&["Ann Lee", "Bob Stone"]);
        assert!((token_f1("Ann Lee, Bob", &g) - 6.0 / 7.0).abs() < 1e-12);
        // Unlike set F1, a partly right name earns credit.
        assert_eq!(
            score("Ann Leigh", &gold(&["Ann Lee"]), ScoreMode::Squad).f1,
            0.0
        );
        assert!((token_f1("Ann Leigh", &gold(&["Ann Lee"])) - 0.5).abs() < 1e-12);
        // HotpotQA's yes/no guard, empty sides.
        assert_eq!(token_f1("yes", &gold(&["yes"])), 1.0);
        assert_eq!(token_f1("yes it is", &gold(&["yes"])), 0.0);
        assert_eq!(token_f1("", &gold(&["Ann"])), 0.0);
        assert_eq!(token_f1("Ann", &[]), 0.0);
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
    fn gold_items_with_commas_match_whole() {
        let dc = gold(&["Washington, D.C."]);
        assert_eq!(score("Washington, D.C.", &dc, ScoreMode::Squad).f1, 1.0);
        assert_eq!(score("washington dc", &dc, ScoreMode::Squad).f1, 1.0);
        assert_eq!(
            score("Washington, D.C.", &dc, ScoreMode::Phantomwiki).em,
            1.0
        );
        // Two gold items, one with a comma, in any order.
        let two = gold(&["Washington, D.C.", "New York"]);
        assert_eq!(
            score("New York, Washington, D.C.", &two, ScoreMode::Squad).em,
            1.0
        );
        assert_eq!(
            score("Washington, D.C., New York", &two, ScoreMode::Squad).em,
            1.0
        );
        // Half of it is not the item: the pieces stay separate items.
        let s = score("Washington, Boston", &dc, ScoreMode::Squad);
        assert_eq!(s.f1, 0.0);
        // HotpotQA-style multi-part answers without commas are unchanged.
        let g = gold(&["Ann Lee", "Bob Stone"]);
        assert_eq!(score("Bob Stone, Ann Lee", &g, ScoreMode::Squad).em, 1.0);
        // A hostile prediction with many commas stays linear in the number of pieces.
        let long = ",".repeat(200_000);
        assert_eq!(score(&long, &two, ScoreMode::Squad).f1, 0.0);
    }

    #[test]
    fn golds_that_normalise_to_empty_still_score() {
        // SQuAD normalisation drops articles: "The The" (a band) normalises to "".
        let band = gold(&["The The"]);
        assert_eq!(score("The The", &band, ScoreMode::Squad).f1, 1.0);
        assert_eq!(score("the  the", &band, ScoreMode::Squad).f1, 1.0);
        assert_eq!(score("The", &band, ScoreMode::Squad).f1, 0.0);
        assert_eq!(score("A", &gold(&["a"]), ScoreMode::Squad).em, 1.0);
        // Items that are empty even then are dropped on both sides.
        assert_eq!(score(" , ", &gold(&["  "]), ScoreMode::Squad).f1, 0.0);
        // SQuAD's own cases are unchanged.
        let squad = gold(&["the Denver Broncos"]);
        assert_eq!(score("Denver Broncos", &squad, ScoreMode::Squad).f1, 1.0);
    }

    #[test]
    fn last_answer_wins_and_unclosed_is_ignored() {
        let turns = ["<answer>a</answer> then <answer>b</answer>", "<answer>c"];
        assert_eq!(last_answer(turns), Some("b".into()));
        assert_eq!(last_answer(["no tags"]), None);
    }
}
