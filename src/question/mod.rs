//! Multi-hop questions with Prolog-verified gold answers.
//!
//! Templates come from PhantomWiki's grammar ([`grammar`]); walks over the universe graph propose
//! fillings ([`sample`]); each filling is a typed [`Query`] whose gold answers are the result of
//! running it, set-at-a-time, on the engine. Four families: `base` (PhantomWiki's grammar), `hops`,
//! `hops+constraints` and `hops+comparisons` (PhantomEnvironments), each with a versioned id.

pub mod balance;
pub mod degenerate;
pub mod grammar;
pub mod query;
pub mod sample;
pub mod text;

pub use degenerate::Degeneracy;
pub use grammar::{AnchorKind, Ask, Template, templates};
pub use query::{Anchor, Attr, Chain, ChainStep, Query, QueryError};
pub use sample::{AnchorStrategy, Sampler};

use crate::engine::Engine;
use crate::relations::relation;
use crate::seed;
use crate::universe::Universe;
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};

/// A question family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Family {
    /// PhantomWiki's grammar, every template.
    #[serde(rename = "base")]
    Base,
    /// Linear chains of 1 to 7 hops anchored on a name or an attribute ("the person whose hobby
    /// is chess"), asking who is at the end or one of their attributes; unique answer.
    #[serde(rename = "hops")]
    Hops,
    /// Chains with 0 to 3 attribute filters anywhere along them, unique answer.
    #[serde(rename = "hops+constraints")]
    HopsConstraints,
    /// Half single chains, half "Who is older, A or B?" over two chains (a zero-hop cell
    /// compares two anchors); at most one filter.
    #[serde(rename = "hops+comparisons")]
    HopsComparisons,
}

impl Family {
    /// All families.
    pub const ALL: [Family; 4] = [
        Family::Base,
        Family::Hops,
        Family::HopsConstraints,
        Family::HopsComparisons,
    ];

    /// The family's name (`hops+constraints`).
    pub fn name(self) -> &'static str {
        match self {
            Family::Base => "base",
            Family::Hops => "hops",
            Family::HopsConstraints => "hops+constraints",
            Family::HopsComparisons => "hops+comparisons",
        }
    }

    /// Versioned id, bumped whenever the family's output for a fixed seed changes.
    pub fn version_id(self) -> &'static str {
        match self {
            Family::Base => "phantomwiki-base-v2",
            Family::Hops => "family-hops-v2",
            Family::HopsConstraints => "family-hops-constraints-v2",
            Family::HopsComparisons => "family-hops-comparisons-v2",
        }
    }
}

impl std::str::FromStr for Family {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Family::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| {
                format!("unknown family {s:?} (base, hops, hops+constraints, hops+comparisons)")
            })
    }
}

/// A comparison shape of `hops+comparisons`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Comparison {
    /// "Who is older, A, or B?" (the paper's).
    Older,
    /// "Who is younger, A, or B?"
    Younger,
    /// "Who was born first, A, or B?"
    BornFirst,
    /// "Who is the oldest R of <chain>?"
    Oldest,
    /// "Who is the youngest R of <chain>?"
    Youngest,
    /// "Who has the most Rs among <chain>?"
    Most,
}

impl Comparison {
    /// Every shape.
    pub const ALL: [Comparison; 6] = [
        Comparison::Older,
        Comparison::Younger,
        Comparison::BornFirst,
        Comparison::Oldest,
        Comparison::Youngest,
        Comparison::Most,
    ];
    /// The shapes' names, for error messages.
    pub const NAMES: &'static str = "older, younger, born-first, oldest, youngest, most";

    /// The shape's name (`born-first`).
    pub fn name(self) -> &'static str {
        match self {
            Comparison::Older => "older",
            Comparison::Younger => "younger",
            Comparison::BornFirst => "born-first",
            Comparison::Oldest => "oldest",
            Comparison::Youngest => "youngest",
            Comparison::Most => "most",
        }
    }
}

impl std::str::FromStr for Comparison {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Comparison::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown comparison shape {s:?} (valid: {})",
                    Comparison::NAMES
                )
            })
    }
}

/// Knobs of question generation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct QuestionConfig {
    /// Seed of the question streams (independent of the universe's).
    pub seed: u64,
    /// The families to generate.
    pub families: Vec<Family>,
    /// Grammar depth for `base` (16 gives PhantomWiki's 38 templates).
    pub depth: usize,
    /// Questions per template (`base`) or per cell (the other families).
    pub per_template: usize,
    /// Use only the 12 easy relations.
    pub easy_mode: bool,
    /// Drop "How many" questions from `base` (they are easy to reward-hack).
    pub exclude_aggregation: bool,
    /// Longest chain of the `hops*` families.
    pub max_hops: usize,
    /// The comparison shapes of `hops+comparisons`, taken in turn by question slot (the
    /// paper's: `older` alone).
    pub comparisons: Vec<Comparison>,
    /// Let zero-hop comparison sides name their person by two or three attributes ("the person
    /// whose hobby is H and whose occupation is O"), an extension shape; off in the paper.
    pub multi_attribute_sides: bool,
    /// Anchor slot strategy of the bidirectional walk (the paper's default: uniform).
    pub anchor: AnchorStrategy,
    /// How each step of the `hops*` families' walks is drawn.
    pub sampler: Sampler,
    /// Keep questions the search environment cannot answer (labelled by their certificate)
    /// instead of rejecting them; for PhantomWiki-identical distributions.
    pub keep_unsolvable: bool,
    /// The retrieval setting under which questions must be answerable.
    pub solvability: Solvability,
    /// Walk attempts per question slot before the slot is reported skipped.
    pub max_attempts: usize,
    /// Cell-balance the `hops*` families (paper's downsampling and soft cap).
    pub balance: bool,
    /// Fraction of each cell held out as the validation split.
    pub val_fraction: f64,
}

impl Default for QuestionConfig {
    fn default() -> Self {
        QuestionConfig {
            seed: 1,
            families: vec![Family::Base],
            depth: 16,
            per_template: 10,
            easy_mode: true,
            exclude_aggregation: false,
            max_hops: 7,
            comparisons: vec![Comparison::Older],
            multi_attribute_sides: false,
            anchor: AnchorStrategy::Uniform,
            sampler: Sampler::Uniform,
            keep_unsolvable: false,
            solvability: Solvability::default(),
            max_attempts: 100,
            balance: false,
            val_fraction: 0.1,
        }
    }
}

impl QuestionConfig {
    /// Checks every knob.
    pub fn validate(&self) -> crate::Result<()> {
        let fail = |m: String| Err(crate::Error::Config(m));
        if !(4..=30).contains(&self.depth) {
            return fail(format!("depth must be in 4..=30, got {}", self.depth));
        }
        if self.per_template > 100_000 {
            return fail(format!(
                "per_template must be at most 100000, got {}",
                self.per_template
            ));
        }
        if !(1..=12).contains(&self.max_hops) {
            return fail(format!("max_hops must be in 1..=12, got {}", self.max_hops));
        }
        if self.max_attempts == 0 {
            return fail("max_attempts must be at least 1".into());
        }
        if !(0.0..1.0).contains(&self.val_fraction) {
            return fail(format!(
                "val_fraction must be in [0, 1), got {}",
                self.val_fraction
            ));
        }
        if self.families.is_empty() {
            return fail("at least one family is needed".into());
        }
        if self.comparisons.is_empty() {
            return fail(format!(
                "at least one comparison shape is needed (valid: {})",
                Comparison::NAMES
            ));
        }
        if !(1..=100).contains(&self.solvability.top_k) {
            return fail(format!(
                "solvability top_k must be in 1..=100, got {}",
                self.solvability.top_k
            ));
        }
        if !(2..=1000).contains(&self.solvability.max_turns) {
            return fail(format!(
                "solvability max_turns must be in 2..=1000, got {}",
                self.solvability.max_turns
            ));
        }
        Ok(())
    }
}

/// The retrieval setting of solvability certificates: the search environment's built-in encoder
/// over the dataset's articles (the index `generate` writes), `top_k` passages per search and a
/// cap of `max_turns` turns (searches plus the answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Solvability {
    /// Passages per search (the paper: 3).
    pub top_k: usize,
    /// Turn cap (the paper: 10 in training, 20 at evaluation).
    pub max_turns: usize,
}

impl Default for Solvability {
    fn default() -> Self {
        Solvability {
            top_k: 3,
            max_turns: 10,
        }
    }
}

/// Whether the search environment can answer a question: its proof-derived oracle (search each
/// article the proof reads, then answer the gold set) replays to F1 = 1 within the turn cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Certificate {
    /// The oracle reaches F1 = 1 within `max_turns`, every search retrieving what it needs.
    pub solvable: bool,
    /// Searches the oracle makes.
    pub searches: usize,
    /// Passages per search.
    pub top_k: usize,
    /// The turn cap.
    pub max_turns: usize,
}

/// Decides solvability (implemented over the search environment by
/// [`crate::search::oracle::Certifier`]).
pub trait Certify: Sync {
    /// The certificate of `query`, whose answers are `answers`, or `None` when the question
    /// is unsolvable and `unsolvable_too` is false (the sampler then rejects it and needs no
    /// certificate: counting the searches of a plan past the turn cap can cost more than the
    /// decision).
    fn certify(
        &self,
        query: &Query,
        answers: &[String],
        unsolvable_too: bool,
    ) -> crate::Result<Option<Certificate>>;
}

/// One question, as written to `questions.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Question {
    /// Deterministic id: family, cell or template, and index.
    pub id: String,
    /// The question text.
    pub question: String,
    /// Gold answers from the engine: sorted, distinct.
    pub answers: Vec<String>,
    /// PhantomWiki-style query atoms, outermost first.
    pub query: Vec<String>,
    /// The answer variable of `query`.
    pub answer_variable: String,
    /// Template tokens (`base`) or empty.
    pub template: Vec<String>,
    /// Template index (PhantomWiki's `type`), for `base`.
    pub template_index: Option<usize>,
    /// Family name.
    pub family: Family,
    /// Family version id.
    pub family_version: String,
    /// Relation hops (the longer chain for comparisons).
    pub hops: usize,
    /// Attribute filters along the chains (the anchor's attribute not counted).
    pub constraints: usize,
    /// `who`, `what`, `how-many` or `comparison`.
    pub kind: String,
    /// PhantomWiki's difficulty: relation weights + 1 per attribute atom + 1 per aggregation.
    pub difficulty: u32,
    /// Slot the walk started from (bidirectional sampling), if any.
    pub anchor_position: Option<usize>,
    /// Rejected walks before this question was accepted.
    pub rejections: u32,
    /// `train` or `val`.
    pub split: String,
    /// A "How many" question.
    pub is_aggregation: bool,
    /// The typed query, for environments and oracles.
    pub plan: Query,
    /// Whether the search environment can answer it (absent when generated without an index).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate: Option<Certificate>,
}

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
    /// Proposals that revisit a person or name their answer ([`Degeneracy`]).
    pub degenerate: usize,
    /// Proposals the search environment cannot answer ([`Certificate`]).
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

/// PhantomWiki's difficulty of a query.
pub fn difficulty(query: &Query) -> u32 {
    let mut d = 0u32;
    for chain in query.chains() {
        d += chain
            .hops()
            .map(|r| relation(r).map_or(1, |r| r.weight as u32))
            .sum::<u32>();
        d += chain.filters() as u32;
        d += u32::from(matches!(chain.anchor, Anchor::Attribute { .. }));
    }
    d + match query {
        Query::What(..) => 1,
        Query::HowMany(_, r)
        | Query::Oldest(_, r)
        | Query::Youngest(_, r)
        | Query::MostRelatives(_, r) => 1 + relation(r).map_or(1, |r| r.weight as u32),
        Query::Who(_) | Query::Older(..) | Query::Younger(..) | Query::BornFirst(..) => 0,
    }
}

/// A proposal before verification: the query, its template and sampling facts.
struct Proposal {
    query: Query,
    template: Option<&'static Template>,
    anchor_position: Option<usize>,
    cell: String,
}

/// Generates every configured family's questions with one engine holding the universe's facts
/// ([`propose_all`] then [`verify`]; [`crate::dataset::build`] runs the same phases on an engine
/// pool, overlapping the fact load with sampling).
pub fn generate(
    universe: &Universe,
    engine: &Engine,
    config: &QuestionConfig,
    certifier: Option<&dyn Certify>,
) -> crate::Result<(Vec<Question>, GenerationReport)> {
    verify(
        std::slice::from_ref(engine),
        propose_all(universe, config, certifier)?,
    )
}

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
    questions: Vec<Question>,
    report: GenerationReport,
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
/// it is [degenerate](degenerate), or, given a `certifier`, when the search environment cannot
/// answer it (unless `keep_unsolvable`). The native evaluator never provides an answer: phase 2
/// ([`verify`]) takes every gold answer from the engine.
pub fn propose_all(
    universe: &Universe,
    config: &QuestionConfig,
    certifier: Option<&dyn Certify>,
) -> crate::Result<Proposals> {
    config.validate()?;
    if universe.people.is_empty() {
        return Err(crate::Error::Config(
            "the universe has no people to ask about".into(),
        ));
    }
    let mut report = GenerationReport::default();
    let mut all = Vec::new();
    // Under strict certificates an anchor denoting more people than one search returns can
    // never be solvable: walks give it up at once.
    let max_anchor_set = if certifier.is_some() && !config.keep_unsolvable {
        config.solvability.top_k
    } else {
        usize::MAX
    };
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
                    let p = match propose(
                        universe,
                        config,
                        family,
                        &slots,
                        index,
                        max_anchor_set,
                        &mut rng,
                    ) {
                        Ok(p) => p,
                        Err(sample::WalkEnd::DeadEnd) => {
                            counts.dead_ends += 1;
                            continue;
                        }
                        Err(sample::WalkEnd::AnchorTooCommon) => {
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

/// Questions verified per engine call: large enough that scryer's fixed cost per query
/// (~0.1 ms) is paid rarely, small enough that the engines share the work evenly.
const VERIFY_BATCH: usize = 16;

/// Phase 2: runs every proposal's query on the engines (in parallel, from a shared queue) and
/// takes the engine's answers as gold. A disagreement with the native screen is a bug in the rule
/// base or the evaluator, and fails generation loudly rather than writing a doubtful answer.
pub fn verify(
    engines: &[Engine],
    proposals: Proposals,
) -> crate::Result<(Vec<Question>, GenerationReport)> {
    let Proposals {
        mut questions,
        mut report,
    } = proposals;
    if engines.is_empty() {
        return Err(crate::Error::Config(
            "verification needs at least one engine".into(),
        ));
    }
    // Engines pull small batches from a shared queue, so one engine never idles while another
    // still holds a slow part; every question keeps its position, so order is unaffected. Each
    // batch is one engine call (`Query::evaluate_batch`: scryer's fixed cost per query paid once).
    let queue = std::sync::Mutex::new(questions.chunks_mut(VERIFY_BATCH));
    std::thread::scope(|scope| {
        let workers: Vec<_> = engines
            .iter()
            .map(|engine| {
                let queue = &queue;
                scope.spawn(move || -> crate::Result<()> {
                    loop {
                        let Some(batch) = queue.lock().expect("not poisoned").next() else {
                            return Ok(());
                        };
                        let plans: Vec<&Query> = batch.iter().map(|q| &q.plan).collect();
                        let golds = Query::evaluate_batch(&plans, engine)?;
                        for (q, gold) in batch.iter_mut().zip(golds) {
                            if gold != q.answers {
                                return Err(QueryError::OracleMismatch {
                                    question: q.question.clone(),
                                    engine: gold,
                                    native: q.answers.clone(),
                                }
                                .into());
                            }
                            q.answers = gold;
                        }
                    }
                })
            })
            .collect();
        workers.into_iter().try_for_each(|w| {
            w.join()
                .map_err(|_| crate::Error::ThreadPanicked("verification"))?
        })
    })?;
    report.accepted = questions.len();
    Ok((questions, report))
}

/// The generation cells of a family: (label, shape) where shape is the template for `base`
/// and (hops, filters or comparison flag) otherwise.
enum Slots {
    Template(&'static Template),
    Chain {
        hops: usize,
        filters: usize,
        comparison: bool,
    },
}

fn cells(family: Family, config: &QuestionConfig) -> Vec<(String, Slots)> {
    let hop_range = 1..=config.max_hops;
    match family {
        Family::Base => cached_templates(config.depth)
            .iter()
            .filter(|t| !(config.exclude_aggregation && t.ask == Ask::HowMany))
            .map(|t| (format!("t{:02}", t.index), Slots::Template(t)))
            .collect(),
        Family::Hops => hop_range
            .map(|h| {
                (
                    format!("h{h}"),
                    Slots::Chain {
                        hops: h,
                        filters: 0,
                        comparison: false,
                    },
                )
            })
            .collect(),
        Family::HopsConstraints => hop_range
            .flat_map(|h| {
                (0..=3usize.min(h)).map(move |c| {
                    (
                        format!("h{h}c{c}"),
                        Slots::Chain {
                            hops: h,
                            filters: c,
                            comparison: false,
                        },
                    )
                })
            })
            .collect(),
        // The zero-hop cell holds comparisons only ("Who is older, Ann or Bob?").
        Family::HopsComparisons => std::iter::once((
            "h0comparison".to_owned(),
            Slots::Chain {
                hops: 0,
                filters: 0,
                comparison: true,
            },
        ))
        .chain(hop_range.flat_map(|h| {
            [false, true].map(|comparison| {
                let kind = if comparison { "comparison" } else { "base" };
                (
                    format!("h{h}{kind}"),
                    Slots::Chain {
                        hops: h,
                        filters: 0,
                        comparison,
                    },
                )
            })
        }))
        .collect(),
    }
}

/// Templates by depth, computed once per depth.
fn cached_templates(depth: usize) -> &'static [Template] {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static CACHE: OnceLock<Mutex<HashMap<usize, &'static [Template]>>> = OnceLock::new();
    let mut cache = CACHE
        .get_or_init(Default::default)
        .lock()
        .expect("not poisoned");
    cache
        .entry(depth)
        .or_insert_with(|| Box::leak(templates(depth).into_boxed_slice()))
}

/// One proposal for a slot; anchors denoting more than `max_anchor_set` people are given up.
fn propose<R: Rng>(
    u: &Universe,
    config: &QuestionConfig,
    family: Family,
    slots: &Slots,
    index: u64,
    max_anchor_set: usize,
    rng: &mut R,
) -> Result<Proposal, sample::WalkEnd> {
    let dead = sample::WalkEnd::DeadEnd;
    match *slots {
        Slots::Template(t) => {
            let by_attribute = t.anchor == AnchorKind::Attribute;
            let (chain, _) = sample::backward_walk(
                u,
                config.easy_mode,
                t.hops,
                by_attribute,
                max_anchor_set,
                1,
                rng,
            )?;
            let query = match t.ask {
                Ask::Who => Query::Who(chain),
                Ask::What => {
                    let attribute = Attr::ALL[rng.random_range(0..Attr::ALL.len())];
                    Query::What(chain, attribute)
                }
                Ask::HowMany => {
                    let mode: Vec<_> = crate::relations::relations(config.easy_mode).collect();
                    let r = mode[rng.random_range(0..mode.len())];
                    Query::HowMany(chain, r.name.to_owned())
                }
            };
            Ok(Proposal {
                query,
                template: Some(t),
                anchor_position: None,
                cell: format!("t{:02}", t.index),
            })
        }
        Slots::Chain {
            hops,
            filters,
            comparison,
        } => {
            // Like the grammar's tails, a chain is anchored on a name or on "the person whose
            // <attribute> is <value>" with equal odds.
            let walk = |rng: &mut R, hops: usize, filters: usize| {
                let shape = sample::WalkShape {
                    hops,
                    filters,
                    anchor_slot: config.anchor.slot(hops, index, rng),
                    by_attribute: rng.random_bool(0.5),
                    max_anchor_set,
                };
                sample::bidirectional_walk(u, config.easy_mode, config.sampler, shape, rng)
            };
            let (query, anchor_position) = if comparison {
                // Round-robin by slot, so rejections do not tilt the mix towards easy shapes.
                let shape = config.comparisons[index as usize % config.comparisons.len()];
                // At most one filter overall.
                let filter_first = hops > 0 && rng.random_bool(0.25);
                let a = walk(rng, hops, usize::from(filter_first))?;
                let anchor_slot = a.anchor_slot;
                let query = match shape {
                    // Two chains; the second is at most as long.
                    Comparison::Older | Comparison::Younger | Comparison::BornFirst => {
                        let other_hops = rng.random_range(hops.min(1)..=hops);
                        let b = walk(rng, other_hops, 0)?;
                        // A zero-hop side may name its person by two or three attributes.
                        let side = |w: sample::Walk, rng: &mut R| {
                            if config.multi_attribute_sides && w.chain.steps.is_empty() {
                                sample::multi_attribute_chain(u, w.people[0], rng)
                            } else {
                                w.chain
                            }
                        };
                        let (a, b) = (side(a, rng), side(b, rng));
                        match shape {
                            Comparison::Older => Query::Older(a, b),
                            Comparison::Younger => Query::Younger(a, b),
                            _ => Query::BornFirst(a, b),
                        }
                    }
                    // A relation of the chain's end with at least two members to compare.
                    Comparison::Oldest | Comparison::Youngest => {
                        let end = *a.people.last().expect("a walk has people");
                        let mode: Vec<_> = crate::relations::relations(config.easy_mode).collect();
                        let rich: Vec<_> = mode
                            .iter()
                            .filter(|r| r.related(u, end).len() >= 2)
                            .collect();
                        let r = rich
                            .get(rng.random_range(0..rich.len().max(1)))
                            .ok_or(dead)?;
                        if shape == Comparison::Oldest {
                            Query::Oldest(a.chain, r.name.to_owned())
                        } else {
                            Query::Youngest(a.chain, r.name.to_owned())
                        }
                    }
                    // Who among the chain's end has the most relatives of a kind.
                    Comparison::Most => {
                        if a.chain.evaluate_native(u).map_or(0, |s| s.len()) < 2 {
                            return Err(dead); // nobody to compare
                        }
                        let mode: Vec<_> = crate::relations::relations(config.easy_mode).collect();
                        let r = mode[rng.random_range(0..mode.len())];
                        Query::MostRelatives(a.chain, r.name.to_owned())
                    }
                };
                (query, Some(anchor_slot))
            } else {
                let filters = if family == Family::HopsComparisons {
                    usize::from(rng.random_bool(0.25))
                } else {
                    filters
                };
                let a = walk(rng, hops, filters.min(hops))?;
                // The grammar's two question types (aggregation excluded): "Who is ...?" and
                // "What is the <attribute> of ...?", with equal odds.
                // An attribute question never asks what a filter on the last person states
                // ("What is the hobby of the friend, whose hobby is chess, of Ann?").
                let query = if rng.random_bool(0.5) {
                    Query::Who(a.chain)
                } else {
                    let stated: Vec<Attr> = a
                        .chain
                        .steps
                        .iter()
                        .rev()
                        .map_while(|s| match s {
                            ChainStep::Filter { attribute, .. } => Some(*attribute),
                            ChainStep::Hop(_) => None,
                        })
                        .collect();
                    let open: Vec<Attr> = Attr::ALL
                        .into_iter()
                        .filter(|x| !stated.contains(x))
                        .collect();
                    let asked = *open
                        .get(rng.random_range(0..open.len().max(1)))
                        .ok_or(dead)?;
                    Query::What(a.chain, asked)
                };
                (query, Some(a.anchor_slot))
            };
            let kind = if comparison { "comparison" } else { "base" };
            Ok(Proposal {
                query,
                template: None,
                anchor_position,
                cell: match family {
                    Family::HopsConstraints => format!("h{hops}c{filters}"),
                    Family::HopsComparisons => format!("h{hops}{kind}"),
                    _ => format!("h{hops}"),
                },
            })
        }
    }
}

fn record(
    family: Family,
    p: &Proposal,
    question: String,
    answers: Vec<String>,
    index: u64,
    rejections: u32,
) -> Question {
    let (query, answer_variable) = p.query.atoms();
    let chains = p.query.chains();
    let kind = match &p.query {
        Query::Who(_) => "who",
        Query::What(..) => "what",
        Query::HowMany(..) => "how-many",
        Query::Older(..) => "comparison",
        Query::Younger(..) => "comparison-younger",
        Query::BornFirst(..) => "comparison-born-first",
        Query::Oldest(..) => "superlative-oldest",
        Query::Youngest(..) => "superlative-youngest",
        Query::MostRelatives(..) => "superlative-most",
    };
    Question {
        id: format!("{}-{}-{index:05}", family.name(), p.cell),
        question,
        answers,
        query,
        answer_variable,
        template: p.template.map(|t| t.tokens.clone()).unwrap_or_default(),
        template_index: p.template.map(|t| t.index),
        family,
        family_version: family.version_id().to_owned(),
        hops: chains.iter().map(|c| c.hops().count()).max().unwrap_or(0),
        constraints: chains.iter().map(|c| c.filters()).sum(),
        kind: kind.to_owned(),
        difficulty: difficulty(&p.query),
        anchor_position: p.anchor_position,
        rejections,
        split: "train".to_owned(),
        is_aggregation: matches!(p.query, Query::HowMany(..)),
        plan: p.query.clone(),
        certificate: None,
    }
}
