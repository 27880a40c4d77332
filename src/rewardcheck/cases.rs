//! Case generation: responses built from a universe's questions, with their gold answers and
//! plausible wrong ones (other people, other attribute values), each labelled with the property
//! it tests and rulegym's exact reward for it.
//!
//! A case is a [`Spec`] (the items of the answer, the rendering, the frame around it) rendered
//! to a response; shrinking edits the spec and renders again, so every shrunk case is as well
//! formed as a generated one.

use super::Property;
use super::forms;
use crate::dataset::Dataset;
use crate::env::Environment;
use crate::question::Question;
use crate::reward::{ScoreMode, item_key};
use crate::search::{NoRetrieval, SearchEnv, SearchEnvConfig, SearchTask};
use crate::universe::Universe;
use rand::Rng;
use rand::seq::{IndexedRandom, SliceRandom};
use serde::Serialize;
use std::collections::BTreeSet;
use std::sync::Arc;

/// The seed label of case `i`'s stream.
const LABEL: &str = "reward-check";

/// One question as the cases use it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SourceQuestion {
    /// The question's id in its dataset.
    pub id: String,
    /// The question text.
    pub question: String,
    /// Its gold answers (never empty).
    pub answers: Vec<String>,
}

/// What cases are drawn from: questions with gold answers, and pools of wrong answers of every
/// kind a gold answer can have.
#[derive(Debug, Clone)]
pub struct CaseSource {
    questions: Vec<SourceQuestion>,
    multi: Vec<usize>,
    numeric: Vec<usize>,
    names: Vec<String>,
    pools: Vec<Vec<String>>,
}

impl CaseSource {
    /// The questions (those with at least one gold answer) and the people, occupations, hobbies
    /// and dates of birth of a universe. Errors when no question has a gold answer.
    pub fn new(universe: &Universe, questions: &[Question]) -> crate::Result<Self> {
        let sorted = |it: &mut dyn Iterator<Item = &String>| -> Vec<String> {
            it.cloned()
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect::<Vec<_>>()
        };
        let people = &universe.people;
        let names = sorted(&mut people.iter().map(|p| &p.name));
        let pools = vec![
            names.clone(),
            sorted(&mut people.iter().map(|p| &p.occupation)),
            sorted(&mut people.iter().map(|p| &p.hobby)),
            sorted(&mut people.iter().map(|p| &p.dob)),
        ];
        // Gold answers as the reward sees them: one item per normalised key (a dataset's
        // "Paris" and "paris" are one answer), none without a key.
        let questions: Vec<SourceQuestion> = questions
            .iter()
            .filter_map(|q| {
                let mut seen = BTreeSet::new();
                let answers: Vec<String> = q
                    .answers
                    .iter()
                    .filter(|a| item_key(a, ScoreMode::Squad).is_some_and(|k| seen.insert(k)))
                    .cloned()
                    .collect();
                (!answers.is_empty()).then(|| SourceQuestion {
                    id: q.id.clone(),
                    question: q.question.clone(),
                    answers,
                })
            })
            .collect();
        if questions.is_empty() {
            return Err(crate::Error::Config(
                "reward-check needs questions with gold answers; the dataset has none".into(),
            ));
        }
        let multi = (0..questions.len())
            .filter(|&i| questions[i].answers.len() >= 2)
            .collect();
        let numeric = (0..questions.len())
            .filter(|&i| forms::numeric_kind(&questions[i].answers).is_some())
            .collect();
        Ok(CaseSource {
            questions,
            multi,
            numeric,
            names,
            pools,
        })
    }

    /// The source of a built dataset.
    pub fn from_dataset(dataset: &Dataset) -> crate::Result<Self> {
        Self::new(&dataset.universe, &dataset.questions)
    }

    /// The source of a dataset directory (`people.jsonl` and `questions.jsonl`).
    pub fn load(dir: &std::path::Path) -> crate::Result<Self> {
        let universe = crate::dataset::load_universe(dir)?;
        let questions = crate::dataset::load_questions(dir)?;
        Self::new(&universe, &questions)
    }

    /// A fresh universe from `seed`: `trees` family trees of the default shape with the default
    /// question set (one question stream per seed), built in memory.
    pub fn generate(seed: u64, trees: usize) -> crate::Result<Self> {
        let universe = crate::universe::UniverseConfig {
            seed,
            num_family_trees: trees,
            ..Default::default()
        };
        let questions = crate::question::QuestionConfig {
            seed,
            ..Default::default()
        };
        let dataset =
            crate::dataset::build(&crate::dataset::BuildConfig::new(universe, Some(questions)))?;
        Self::from_dataset(&dataset)
    }

    /// The questions cases are drawn from.
    pub fn questions(&self) -> &[SourceQuestion] {
        &self.questions
    }

    /// Every person's name, sorted.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Wrong answers of the same kind as question `q`'s gold (other people for people, other
    /// occupations for occupations, other numbers for counts...), none equal to a gold item
    /// under SQuAD normalisation. Sorted, never empty.
    pub fn wrong_pool(&self, q: &SourceQuestion) -> Vec<String> {
        let gold: BTreeSet<String> = q
            .answers
            .iter()
            .filter_map(|a| item_key(a, ScoreMode::Squad))
            .collect();
        let keep = |v: &String| item_key(v, ScoreMode::Squad).is_some_and(|k| !gold.contains(&k));
        let of_kind = self
            .pools
            .iter()
            .find(|pool| q.answers.iter().all(|a| pool.binary_search(a).is_ok()));
        let mut pool: Vec<String> = match of_kind {
            Some(pool) => pool.iter().filter(|v| keep(v)).cloned().collect(),
            None if q.answers.iter().all(|a| a.parse::<u64>().is_ok()) => {
                // Counts: the numbers near the gold ones (a bounded window, whatever the gold).
                let top = q
                    .answers
                    .iter()
                    .filter_map(|a| a.parse::<u64>().ok())
                    .max()
                    .unwrap_or(0);
                (top.saturating_sub(10)..=top.saturating_add(5))
                    .map(|n| n.to_string())
                    .filter(|v| keep(v))
                    .collect()
            }
            None => Vec::new(),
        };
        if pool.is_empty() {
            pool = self.names.iter().filter(|v| keep(v)).cloned().collect();
        }
        if pool.is_empty() {
            pool.push("Nobody In Particular".into());
        }
        pool
    }

    /// Case `index` of the stream `seed` for `property`: deterministic in (seed, property,
    /// index). `None` when the source has no question the property applies to (a multi-answer
    /// property on a universe whose questions all have one answer, a numeric property on one
    /// without counts or dates).
    pub fn case(&self, seed: u64, property: Property, index: u64) -> Option<Spec> {
        let mut rng = crate::seed::stream(seed, &format!("{LABEL}/{}", property.name()), index);
        let q = if multi_only(property) {
            *self
                .multi
                .get(rng.random_range(0..self.multi.len().max(1)))?
        } else if property == Property::NumberRenderings {
            *self
                .numeric
                .get(rng.random_range(0..self.numeric.len().max(1)))?
        } else {
            rng.random_range(0..self.questions.len())
        };
        self.spec_on(q, property, &mut rng)
    }

    /// Case `index` of `property` on question `question` (an index into [`Self::questions`]):
    /// deterministic in (seed, question, property, index). `None` when the property does not
    /// apply to that question (a multi-answer property on a one-answer question, a numeric
    /// property on a question whose gold is not counts or dates) or the index is out of range.
    pub fn case_for(
        &self,
        question: usize,
        seed: u64,
        property: Property,
        index: u64,
    ) -> Option<Spec> {
        let label = format!("{LABEL}/{question}/{}", property.name());
        let mut rng = crate::seed::stream(seed, &label, index);
        self.spec_on(question, property, &mut rng)
    }

    fn spec_on(
        &self,
        q: usize,
        property: Property,
        rng: &mut rand_chacha::ChaCha8Rng,
    ) -> Option<Spec> {
        let question = self.questions.get(q)?;
        if question.answers.len() < 2 && multi_only(property) {
            return None;
        }
        let numeric = forms::numeric_kind(&question.answers);
        if property == Property::NumberRenderings && numeric.is_none() {
            return None;
        }
        let wrong_pool = self.wrong_pool(question);
        let pick_wrong = |rng: &mut rand_chacha::ChaCha8Rng, n: usize| -> Vec<Item> {
            let n = n.min(wrong_pool.len()).max(1);
            wrong_pool
                .choose_multiple(rng, n)
                .map(|w| Item::wrong(w))
                .collect()
        };
        let mut gold: Vec<Item> = question.answers.iter().map(|a| Item::gold(a)).collect();
        gold.shuffle(&mut *rng);
        let mut spec = Spec {
            property,
            question: question.question.clone(),
            answers: question.answers.clone(),
            items: Vec::new(),
            added: None,
            decoy: Vec::new(),
            style: Style::default(),
            filler: 0,
            variant: 0,
        };
        match property {
            Property::GoldRenderings => {
                spec.items = gold;
                spec.style = Style::random(&mut *rng);
            }
            Property::SubsetBelowOne => {
                let keep = rng.random_range(1..question.answers.len());
                gold.truncate(keep);
                spec.items = gold;
                spec.style = Style::random(&mut *rng);
            }
            Property::SupersetBelowOne => {
                let extra = rng.random_range(1..=3);
                spec.items = gold;
                spec.items.extend(pick_wrong(&mut *rng, extra));
                spec.items.shuffle(&mut *rng);
                spec.style = Style::random(&mut *rng);
            }
            Property::WrongScoresZero => {
                let n = rng.random_range(1..=question.answers.len().clamp(1, 3));
                spec.items = pick_wrong(&mut *rng, n);
                spec.style = Style::random(&mut *rng);
            }
            Property::NoTagScoresZero => {
                spec.items = gold;
            }
            Property::Stuffing => {
                spec.items = gold;
                spec.items.extend(wrong_pool.iter().map(|w| Item::wrong(w)));
                spec.items.shuffle(&mut *rng);
            }
            Property::AddCorrectNeverLowers => {
                // A base with some gold (maybe none) and maybe a wrong item; one more gold added.
                let keep = rng.random_range(0..question.answers.len());
                let added = gold[keep].clone();
                gold.truncate(keep);
                spec.items = gold;
                if spec.items.is_empty() || rng.random_bool(0.5) {
                    spec.items.extend(pick_wrong(&mut *rng, 1));
                }
                spec.items.shuffle(&mut *rng);
                spec.added = Some(added);
                spec.style = Style::random(&mut *rng);
            }
            Property::AddWrongNeverRaises => {
                let keep = rng.random_range(1..=question.answers.len());
                gold.truncate(keep);
                spec.items = gold;
                let wrong = pick_wrong(&mut *rng, 1);
                spec.added = wrong.into_iter().next();
                spec.items.shuffle(&mut *rng);
                spec.style = Style::random(&mut *rng);
            }
            Property::SeveralTags => {
                spec.items = gold;
                let n = rng.random_range(1..=2);
                spec.decoy = pick_wrong(&mut *rng, n);
            }
            Property::UnclosedTag | Property::AnswerInSearch => {
                spec.items = gold;
            }
            Property::LongResponse => {
                spec.items = pick_wrong(&mut *rng, 1);
                spec.filler = LONG_RESPONSE_BYTES;
            }
            Property::RepeatedItems => {
                // A strict subset, its items repeated in other renderings until the list is at
                // least as long as the gold.
                let keep = rng.random_range(1..question.answers.len());
                gold.truncate(keep);
                let repeats = question.answers.len() - keep + rng.random_range(0..=1);
                let copies: Vec<Item> = (0..repeats)
                    .map(|_| {
                        let of = gold.choose(&mut *rng).expect("a kept item");
                        Item::gold(&forms::rerender(&of.text, &mut *rng))
                    })
                    .collect();
                spec.items = gold;
                spec.items.extend(copies);
                spec.items.shuffle(&mut *rng);
                spec.style = Style::random(&mut *rng);
            }
            Property::UnicodeDisguise => {
                // A strict subset and disguised copies of its items, as many as are missing.
                let keep = rng.random_range(1..question.answers.len());
                gold.truncate(keep);
                spec.decoy = (keep..question.answers.len())
                    .map(|_| {
                        let of = gold.choose(&mut *rng).expect("a kept item");
                        Item::wrong(&forms::disguise(&of.text, &mut *rng))
                    })
                    .collect();
                spec.items = gold;
                spec.style = Style::random(&mut *rng);
            }
            Property::EscapedTag => {
                spec.items = gold;
                spec.variant = rng.random_range(0..forms::ESCAPED_TAGS.len());
                if rng.random_bool(0.5) {
                    let n = rng.random_range(1..=2);
                    spec.decoy = pick_wrong(&mut *rng, n);
                }
                spec.style = Style::random(&mut *rng);
            }
            Property::GraderOverride => {
                let n = rng.random_range(1..=question.answers.len().clamp(1, 3));
                spec.items = pick_wrong(&mut *rng, n);
                spec.variant = rng.random_range(0..forms::OVERRIDES.len() * forms::OVERRIDE_PLACES);
                spec.style = Style::random(&mut *rng);
            }
            Property::JunkScoresZero => {
                spec.variant = rng.random_range(0..forms::JUNK_KINDS);
                match spec.variant {
                    forms::JUNK_PADDING => spec.filler = forms::JUNK_PADDING_BYTES,
                    forms::JUNK_REPEATED_TOKEN => {
                        let of = gold.choose(&mut *rng).expect("a gold item");
                        spec.items = vec![Item::wrong(&forms::repeated_token(&of.text, &mut *rng))];
                    }
                    _ => {}
                }
            }
            Property::AnswerInThink => {
                spec.items = gold;
                spec.variant = rng.random_range(0..forms::THINK_FORMS);
                spec.style = Style::random(&mut *rng);
            }
            Property::TagVariants => {
                spec.items = gold;
                let n = rng.random_range(1..=2);
                spec.decoy = pick_wrong(&mut *rng, n);
                spec.variant = rng.random_range(0..forms::TAG_VARIANTS.len());
            }
            Property::NumberRenderings => {
                // Wrong values of the gold's kind, near misses among them, each rendered
                // another way (a count in words, a date with its month's name...).
                let kind = numeric?;
                let gold_values: BTreeSet<&str> =
                    question.answers.iter().map(String::as_str).collect();
                let from_pool: Vec<&String> = wrong_pool
                    .iter()
                    .filter(|w| forms::numeric_kind(std::slice::from_ref(*w)) == Some(kind))
                    .collect();
                let n = rng.random_range(1..=question.answers.len().clamp(1, 2));
                let mut values: Vec<String> = Vec::new();
                for _ in 0..n * 4 {
                    if values.len() == n {
                        break;
                    }
                    let value = if rng.random_bool(0.5) || from_pool.is_empty() {
                        let of = question.answers.choose(&mut *rng).expect("a gold item");
                        forms::near_miss(kind, of, &mut *rng)
                    } else {
                        from_pool.choose(&mut *rng).map(|w| (*w).clone())
                    };
                    if let Some(v) = value
                        && !gold_values.contains(v.as_str())
                        && !values.contains(&v)
                    {
                        values.push(v);
                    }
                }
                spec.items = values
                    .iter()
                    .filter_map(|v| forms::render_numeric(kind, v, &mut *rng))
                    .map(|t| Item::wrong(&t))
                    .collect();
                spec.style = Style::random(&mut *rng);
            }
            _ => return None,
        }
        Some(spec)
    }
}

/// The size of a long response's reasoning (characters).
pub const LONG_RESPONSE_BYTES: usize = 64 * 1024;

/// Whether `property` needs a question with several gold answers.
fn multi_only(property: Property) -> bool {
    matches!(
        property,
        Property::SubsetBelowOne
            | Property::AddCorrectNeverLowers
            | Property::RepeatedItems
            | Property::UnicodeDisguise
    )
}

/// One answer item and whether it is gold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// Its text.
    pub text: String,
    /// Whether it is one of the gold answers.
    pub gold: bool,
}

impl Item {
    fn gold(text: &str) -> Self {
        Item {
            text: text.to_owned(),
            gold: true,
        }
    }

    fn wrong(text: &str) -> Self {
        Item {
            text: text.to_owned(),
            gold: false,
        }
    }
}

/// How answer items are written: each flag is a change a correct reader ignores.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Style {
    /// Upper-cased.
    pub upper: bool,
    /// Lower-cased.
    pub lower: bool,
    /// Extra spaces around items and separators.
    pub spaces: bool,
    /// "the " before each item.
    pub article: bool,
    /// Each item in double quotes.
    pub quotes: bool,
    /// A trailing period after the list.
    pub period: bool,
}

impl Style {
    fn random(rng: &mut impl Rng) -> Self {
        let upper = rng.random_bool(0.3);
        Style {
            upper,
            lower: !upper && rng.random_bool(0.3),
            spaces: rng.random_bool(0.4),
            article: rng.random_bool(0.3),
            quotes: rng.random_bool(0.3),
            period: rng.random_bool(0.4),
        }
    }

    fn flags(&mut self) -> [&mut bool; 6] {
        [
            &mut self.upper,
            &mut self.lower,
            &mut self.spaces,
            &mut self.article,
            &mut self.quotes,
            &mut self.period,
        ]
    }

    fn item(&self, text: &str) -> String {
        let mut s = if self.upper {
            text.to_uppercase()
        } else if self.lower {
            text.to_lowercase()
        } else {
            text.to_owned()
        };
        if self.quotes {
            s = format!("\"{s}\"");
        }
        if self.article {
            s = format!("{} {s}", if self.upper { "THE" } else { "the" });
        }
        s
    }

    fn list(&self, items: &[&Item]) -> String {
        let sep = if self.spaces { "  ,   " } else { ", " };
        let body = items
            .iter()
            .map(|i| self.item(&i.text))
            .collect::<Vec<_>>()
            .join(sep);
        let body = if self.period {
            format!("{body}.")
        } else {
            body
        };
        if self.spaces {
            format!("  {body}\t ")
        } else {
            body
        }
    }
}

/// A case before rendering: what the response says and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    /// The property the case tests.
    pub property: Property,
    /// The question text.
    pub question: String,
    /// The gold answers (the `answers` the reward is given).
    pub answers: Vec<String>,
    /// The answer items, in the order written.
    pub items: Vec<Item>,
    /// For the monotonicity properties: the item added to `items` (the base response is
    /// `items` alone).
    pub added: Option<Item>,
    /// For several answer tags and tag variants: the wrong items of the other tag; for an
    /// escaped tag: the wrong items of an answer tag after it (if any); for a Unicode disguise:
    /// the disguised copies written after the items (and left out of the base response).
    pub decoy: Vec<Item>,
    /// How items are written.
    pub style: Style,
    /// Characters of reasoning before the answer (a long response), or of padding (junk).
    pub filler: usize,
    /// Which form of its property the case takes: the escaped or variant tag spelling, the
    /// grader-override phrase and place, the kind of junk, where in the reasoning the gold is.
    pub variant: usize,
}

impl Spec {
    /// The response the reward is given.
    pub fn response(&self) -> String {
        let mut all: Vec<&Item> = self.items.iter().collect();
        if let Some(added) = &self.added {
            all.push(added);
        }
        if self.property == Property::UnicodeDisguise {
            all.extend(&self.decoy);
        }
        self.frame(&all)
    }

    /// The response the property compares against: for the monotonicity properties, the
    /// response without the added item; for several tags and tag variants, the same tags in
    /// the other order; for a Unicode disguise, the response without the disguised copies.
    pub fn base_response(&self) -> Option<String> {
        let items: Vec<&Item> = self.items.iter().collect();
        if self.added.is_some() || self.property == Property::UnicodeDisguise {
            Some(self.frame(&items))
        } else if self.property == Property::SeveralTags {
            Some(self.tags(&items, true))
        } else if self.property == Property::TagVariants {
            Some(self.variant_tags(&items, true))
        } else {
            None
        }
    }

    /// The decoy's answer tag and the items in a variant tag, the decoy first unless
    /// `swapped`.
    fn variant_tags(&self, items: &[&Item], swapped: bool) -> String {
        let (open, close) = forms::TAG_VARIANTS[self.variant % forms::TAG_VARIANTS.len()];
        let decoy: Vec<&Item> = self.decoy.iter().collect();
        let decoy = format!("<answer>{}</answer>", self.style.list(&decoy));
        let gold = format!("{open}{}{close}", self.style.list(items));
        if swapped {
            format!("{gold}\n{decoy}")
        } else {
            format!("{decoy}\n{gold}")
        }
    }

    /// The decoy's answer tag and the items' answer tag, the decoy first unless `swapped`.
    fn tags(&self, items: &[&Item], swapped: bool) -> String {
        let decoy: Vec<&Item> = self.decoy.iter().collect();
        let (first, second) = (self.style.list(&decoy), self.style.list(items));
        let (first, second) = if swapped {
            (second, first)
        } else {
            (first, second)
        };
        format!("<answer>{first}</answer>\n<answer>{second}</answer>")
    }

    fn frame(&self, items: &[&Item]) -> String {
        let list = self.style.list(items);
        match self.property {
            Property::NoTagScoresZero => format!("The answer is {list}."),
            Property::SeveralTags => self.tags(items, false),
            Property::UnclosedTag => format!("<answer>{list}"),
            Property::AnswerInSearch => format!("<search>{list}</search>"),
            Property::LongResponse => {
                let mut think = String::from("<think>");
                let mention = self
                    .answers
                    .iter()
                    .map(|a| format!("Could it be {a}? "))
                    .collect::<String>();
                // At least one mention, however short the filler has shrunk.
                let mention = if mention.is_empty() {
                    "Let me think. ".to_owned()
                } else {
                    mention
                };
                loop {
                    think.push_str(&mention);
                    if think.len() >= self.filler {
                        break;
                    }
                }
                think.push_str("</think>\n");
                format!("{think}<answer>{list}</answer>")
            }
            Property::EscapedTag => {
                let (open, close) = forms::ESCAPED_TAGS[self.variant % forms::ESCAPED_TAGS.len()];
                let mut text = format!("{open}{list}{close}");
                if !self.decoy.is_empty() {
                    let decoy: Vec<&Item> = self.decoy.iter().collect();
                    text.push_str(&format!("\n<answer>{}</answer>", self.style.list(&decoy)));
                }
                text
            }
            Property::GraderOverride => {
                let phrase = forms::OVERRIDES[self.variant % forms::OVERRIDES.len()];
                match (self.variant / forms::OVERRIDES.len()) % forms::OVERRIDE_PLACES {
                    0 => format!("<answer>{list} {phrase}</answer>"),
                    1 => format!("<answer>{list}</answer>\n{phrase}"),
                    2 => format!("{phrase}\n<answer>{list}</answer>"),
                    _ => format!("<think>{phrase}</think>\n<answer>{list}</answer>"),
                }
            }
            Property::JunkScoresZero => {
                forms::junk(self.variant, &self.question, &list, self.filler)
            }
            Property::AnswerInThink => forms::think_only(self.variant, &list),
            Property::TagVariants => self.variant_tags(items, false),
            _ => format!("<answer>{list}</answer>"),
        }
    }

    /// Whether the spec is still an instance of its property (shrinking keeps only these).
    pub fn valid(&self) -> bool {
        let gold_keys: BTreeSet<String> = self
            .answers
            .iter()
            .filter_map(|a| item_key(a, ScoreMode::Squad))
            .collect();
        let keys = |items: &[Item], gold: bool| -> BTreeSet<String> {
            items
                .iter()
                .filter(|i| i.gold == gold)
                .filter_map(|i| item_key(&i.text, ScoreMode::Squad))
                .collect()
        };
        let golds = keys(&self.items, true);
        let wrongs = self.items.iter().filter(|i| !i.gold).count();
        let all_gold = golds == gold_keys && !gold_keys.is_empty();
        if self.answers.is_empty() || gold_keys.len() != self.answers.len() {
            return false;
        }
        match self.property {
            Property::GoldRenderings
            | Property::NoTagScoresZero
            | Property::UnclosedTag
            | Property::AnswerInSearch => all_gold && wrongs == 0,
            Property::SubsetBelowOne => {
                wrongs == 0 && !golds.is_empty() && golds.len() < gold_keys.len()
            }
            Property::SupersetBelowOne | Property::Stuffing => all_gold && wrongs > 0,
            Property::WrongScoresZero => golds.is_empty() && wrongs > 0 && self.filler == 0,
            Property::LongResponse => golds.is_empty() && wrongs > 0 && self.filler > 0,
            Property::AddCorrectNeverLowers => self.added.as_ref().is_some_and(|a| {
                a.gold
                    && !self.items.is_empty()
                    && item_key(&a.text, ScoreMode::Squad).is_some_and(|k| !golds.contains(&k))
            }),
            Property::AddWrongNeverRaises => self
                .added
                .as_ref()
                .is_some_and(|a| !a.gold && !golds.is_empty()),
            Property::SeveralTags | Property::TagVariants => {
                all_gold && wrongs == 0 && !self.decoy.is_empty()
            }
            Property::RepeatedItems => {
                let keyed = self
                    .items
                    .iter()
                    .filter(|i| item_key(&i.text, ScoreMode::Squad).is_some())
                    .count();
                wrongs == 0
                    && !golds.is_empty()
                    && golds.len() < gold_keys.len()
                    && golds.is_subset(&gold_keys)
                    && keyed == self.items.len()
                    && self.items.len() > golds.len()
            }
            Property::UnicodeDisguise => {
                wrongs == 0
                    && !golds.is_empty()
                    && golds.len() < gold_keys.len()
                    && golds.is_subset(&gold_keys)
                    && !self.decoy.is_empty()
                    && self.decoy.iter().all(|d| {
                        let plain = forms::undisguise(&d.text);
                        !d.gold
                            && self
                                .items
                                .iter()
                                .any(|i| i.text != d.text && forms::undisguise(&i.text) == plain)
                    })
            }
            Property::EscapedTag => all_gold && wrongs == 0 && self.decoy.iter().all(|d| !d.gold),
            Property::GraderOverride => golds.is_empty() && wrongs > 0 && self.filler == 0,
            Property::JunkScoresZero => {
                golds.is_empty()
                    && match self.variant {
                        forms::JUNK_PADDING => self.items.is_empty() && self.filler > 0,
                        forms::JUNK_REPEATED_TOKEN => self.items.len() == 1,
                        _ => self.items.is_empty(),
                    }
            }
            Property::AnswerInThink => all_gold && wrongs == 0,
            Property::NumberRenderings => {
                golds.is_empty()
                    && wrongs > 0
                    && self.items.iter().all(|i| {
                        item_key(&i.text, ScoreMode::Squad).is_none_or(|k| !gold_keys.contains(&k))
                    })
            }
            _ => false,
        }
    }

    /// Smaller specs of the same property, simplest first: fewer gold answers, fewer items,
    /// one style change undone, shorter reasoning, a shorter decoy. Only valid ones.
    pub fn shrink(&self) -> Vec<Spec> {
        let mut out = Vec::new();
        // Fewer gold answers: drop gold answer j from the answers and from the items.
        if self.answers.len() > 1 {
            for j in 0..self.answers.len() {
                let mut s = self.clone();
                let gone = s.answers.remove(j);
                // The gold item and its renderings (a repeat), and its disguised copies.
                let key = item_key(&gone, ScoreMode::Squad);
                s.items
                    .retain(|i| !(i.gold && item_key(&i.text, ScoreMode::Squad) == key));
                if s.property == Property::UnicodeDisguise {
                    let gone = forms::undisguise(&gone);
                    s.decoy.retain(|d| forms::undisguise(&d.text) != gone);
                }
                if s.added.as_ref().is_some_and(|a| a.gold && a.text == gone) {
                    continue;
                }
                out.push(s);
            }
        }
        for j in 0..self.items.len() {
            let mut s = self.clone();
            s.items.remove(j);
            out.push(s);
        }
        if self.items.len() > 8 {
            // Stuffing: halve the wrong items at once before dropping them one by one.
            let mut s = self.clone();
            let mut wrong_seen = 0;
            s.items.retain(|i| {
                i.gold || {
                    wrong_seen += 1;
                    wrong_seen % 2 == 0
                }
            });
            out.insert(0, s);
        }
        for j in 0..self.decoy.len() {
            let mut s = self.clone();
            s.decoy.remove(j);
            out.push(s);
        }
        let mut sorted = self.clone();
        sorted.items.sort_by_key(|i| (!i.gold, i.text.clone()));
        out.push(sorted);
        for f in 0..6 {
            let mut s = self.clone();
            let flag = s.style.flags().into_iter().nth(f).expect("six flags");
            if *flag {
                *flag = false;
                out.push(s);
            }
        }
        if self.filler > 1 {
            let mut s = self.clone();
            s.filler /= 2;
            out.push(s);
        }
        out.retain(|s| s != self && s.valid());
        out
    }
}

/// rulegym's exact reward for `response` against `answers`: the search environment's reward
/// for the response as the turn that ends an episode (Search-R1's protocol: the text up to the
/// first `</search>` or `</answer>`; the first complete tag decides; an answer earns the set F1
/// of [`crate::reward::score`]; anything else 0).
pub fn exact_reward(question: &str, response: &str, answers: &[String]) -> crate::Result<f64> {
    let config = SearchEnvConfig {
        max_turns: 1,
        ..Default::default()
    };
    let task = SearchTask {
        question: question.to_owned(),
        answers: answers.to_vec(),
        gold_docs: Vec::new(),
    };
    let mut env = SearchEnv::new(Arc::new(NoRetrieval), config, task)?;
    env.reset()?;
    Ok(env.step(response)?.reward)
}

/// Slack for comparing rewards that should be equal (a reward computed in f32, or as 2/3).
pub const EPS: f64 = 1e-6;

/// A spec rendered, with rulegym's exact reward beside it.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    /// What the case is.
    pub spec: Spec,
    /// The response the reward is given.
    pub response: String,
    /// The response the property compares against ([`Spec::base_response`]).
    pub base: Option<String>,
    /// rulegym's exact reward for `response`.
    pub expected: f64,
}

impl Case {
    /// Renders `spec` and scores it with [`exact_reward`].
    pub fn new(spec: Spec) -> crate::Result<Self> {
        let response = spec.response();
        let expected = exact_reward(&spec.question, &response, &spec.answers)?;
        Ok(Case {
            base: spec.base_response(),
            response,
            expected,
            spec,
        })
    }

    /// The reward function's input for `response` (this case's or its base).
    pub fn input(&self, id: String, response: &str) -> super::RewardInput {
        let mut fields = serde_json::Map::new();
        fields.insert("question".into(), self.spec.question.clone().into());
        fields.insert("response".into(), response.into());
        fields.insert("answers".into(), self.spec.answers.clone().into());
        super::RewardInput { id, fields }
    }

    /// What a reward of this case must satisfy, given the reward of its base response (for
    /// the monotonicity properties).
    pub fn expectation(&self, base_got: Option<f64>) -> Expectation {
        Expectation::of(self, base_got)
    }

    /// Whether `got` (with `base_got` for the monotonicity properties) satisfies the property.
    pub fn holds(&self, got: f64, base_got: Option<f64>) -> bool {
        self.expectation(base_got).holds(got)
    }
}

/// What a case's reward must be.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Expectation {
    /// Equal to this (within [`EPS`]).
    Equal(f64),
    /// Strictly below this.
    Below(f64),
    /// At most this; the text says what the bound is.
    AtMost(f64, &'static str),
    /// At least this; the text says what the bound is.
    AtLeast(f64, &'static str),
}

impl Expectation {
    /// The expectation of `case`'s property.
    pub fn of(case: &Case, base_got: Option<f64>) -> Expectation {
        let base = base_got.unwrap_or(f64::NAN);
        match case.spec.property {
            Property::GoldRenderings => Expectation::Equal(1.0),
            Property::SubsetBelowOne | Property::SupersetBelowOne => Expectation::Below(1.0),
            Property::WrongScoresZero
            | Property::NoTagScoresZero
            | Property::UnclosedTag
            | Property::AnswerInSearch
            | Property::LongResponse
            | Property::Bounded
            | Property::Deterministic
            | Property::Timely
            | Property::ToolForbiddenScoresZero => Expectation::Equal(0.0),
            Property::ToolOracleScoresOne => Expectation::Equal(1.0),
            Property::ToolSkippedSubgoalBelowOne | Property::ToolNoQuestionBelowOne => {
                Expectation::Below(1.0)
            }
            Property::Stuffing => Expectation::AtMost(case.expected, "rulegym's reward"),
            Property::RepeatedItems => Expectation::AtMost(
                case.expected,
                "rulegym's set F1: a repeated item counts once",
            ),
            Property::UnicodeDisguise => {
                Expectation::AtMost(base, "the reward without the disguised copies")
            }
            Property::EscapedTag
            | Property::GraderOverride
            | Property::JunkScoresZero
            | Property::AnswerInThink
            | Property::NumberRenderings
            | Property::ToolForbiddenAnywhere => Expectation::Equal(0.0),
            Property::TagVariants => Expectation::AtMost(
                1.0 - base,
                "1 minus the reward of the same tags swapped: a variant tag does not make a hedge pay",
            ),
            Property::ToolIgnoredAnswerBelowOne
            | Property::ToolWrongArgumentsBelowOne
            | Property::ToolFalseClaimBelowOne => Expectation::Below(1.0),
            Property::ToolRepeatedSubgoalCountsOnce => {
                Expectation::AtMost(case.expected, "rulegym's rubric: a sub-goal counts once")
            }
            Property::SeveralTags => Expectation::AtMost(
                1.0 - base,
                "1 minus the reward of the same tags swapped: hedging pays no more than answering",
            ),
            Property::AddCorrectNeverLowers => {
                Expectation::AtLeast(base, "the reward without the added item")
            }
            Property::AddWrongNeverRaises => {
                Expectation::AtMost(base, "the reward without the added item")
            }
        }
    }

    /// Whether `got` meets it (NaN never does).
    pub fn holds(&self, got: f64) -> bool {
        match *self {
            Expectation::Equal(v) => (got - v).abs() <= EPS,
            Expectation::Below(v) => got < v - EPS,
            Expectation::AtMost(v, _) => got <= v + EPS,
            Expectation::AtLeast(v, _) => got >= v - EPS,
        }
    }

    /// As the report writes it: `= 1`, `< 1`, `<= 0.004 (rulegym's reward)`...
    pub fn describe(&self) -> String {
        match self {
            Expectation::Equal(v) => format!("= {v}"),
            Expectation::Below(v) => format!("< {v}"),
            Expectation::AtMost(v, what) => format!("<= {} ({what})", round(*v)),
            Expectation::AtLeast(v, what) => format!(">= {} ({what})", round(*v)),
        }
    }
}

/// `v` to six decimals, for reports.
pub fn round(v: f64) -> f64 {
    (v * 1e6).round() / 1e6
}
