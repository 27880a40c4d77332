//! PhantomWiki's `questions.json`, re-answered by the engine.

use super::*;

/// `prolog` of a PhantomWiki question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PwProlog {
    /// Query atoms, outermost first.
    pub query: Vec<String>,
    /// The answer variable.
    pub answer: String,
}

/// One record of PhantomWiki's `questions.json` (fields rulegym does not use are ignored).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "RawQuestion", into = "RawQuestion")]
pub struct PwQuestion {
    /// PhantomWiki's id (a random uuid).
    pub id: String,
    /// The question text.
    pub question: String,
    /// PhantomWiki's answers.
    pub answer: Vec<String>,
    /// The Prolog query.
    pub prolog: PwProlog,
    /// Template index (`type` when it is a number, as in PhantomWiki 1.0.3).
    pub template_index: Option<u64>,
    /// `type` when it is a string (extensions name their shapes there).
    pub type_name: Option<String>,
    /// The template tokens (extensions put a shape name such as `comparison_age` there).
    pub template: Vec<String>,
    /// `question_category`, which some extensions add (`superlative_youngest`).
    pub question_category: Option<String>,
}

/// `type`: a template index or, in extensions, a shape name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
enum PwType {
    Index(u64),
    Name(String),
}

/// A record as it is stored (serde's view of [`PwQuestion`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct RawQuestion {
    #[serde(default)]
    id: String,
    question: String,
    answer: Vec<String>,
    prolog: PwProlog,
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    kind: Option<PwType>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    template: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    question_category: Option<String>,
}

impl From<RawQuestion> for PwQuestion {
    fn from(raw: RawQuestion) -> Self {
        let (template_index, type_name) = match raw.kind {
            Some(PwType::Index(i)) => (Some(i), None),
            Some(PwType::Name(n)) => (None, Some(n)),
            None => (None, None),
        };
        PwQuestion {
            id: raw.id,
            question: raw.question,
            answer: raw.answer,
            prolog: raw.prolog,
            template_index,
            type_name,
            template: raw.template,
            question_category: raw.question_category,
        }
    }
}

impl From<PwQuestion> for RawQuestion {
    fn from(q: PwQuestion) -> Self {
        let kind = match (q.template_index, q.type_name) {
            (Some(i), _) => Some(PwType::Index(i)),
            (None, Some(n)) => Some(PwType::Name(n)),
            (None, None) => None,
        };
        RawQuestion {
            id: q.id,
            question: q.question,
            answer: q.answer,
            prolog: q.prolog,
            kind,
            template: q.template,
            question_category: q.question_category,
        }
    }
}

/// Parses `questions.json` (a JSON array of question records); a bad record is an error naming
/// its index.
pub fn parse_questions(json: &str, file: &str) -> Result<Vec<PwQuestion>> {
    let records: Vec<serde_json::Value> =
        serde_json::from_str(json).map_err(|source| Error::Json {
            context: format!("parsing {file} (PhantomWiki questions, --question-format json)"),
            source,
        })?;
    records
        .into_iter()
        .enumerate()
        .map(|(index, record)| {
            serde_json::from_value(record).map_err(|source| Error::Json {
                context: format!("parsing {file}: question {index}"),
                source,
            })
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Shapes
// ---------------------------------------------------------------------------------------------

/// The shape names `verify` reports, besides `unsupported` (a record whose query rulegym cannot
/// compile) and `undecided` (a malformed record whose shape cannot be told).
pub const SHAPES: [&str; 10] = [
    "who",
    "what",
    "how-many",
    "multi-attribute",
    "older",
    "younger",
    "born-first",
    "oldest",
    "youngest",
    "most",
];

/// The shape of a typed query: `multi-attribute` is a `who` question about "the person whose A
/// is a and whose B is b" (no relation, two or more attributes).
pub fn shape_of(query: &Query) -> &'static str {
    match query {
        Query::Who(c)
            if c.hops().next().is_none()
                && c.filters() > 0
                && matches!(c.anchor, Anchor::Attribute { .. }) =>
        {
            "multi-attribute"
        }
        Query::Who(_) => "who",
        Query::What(..) => "what",
        Query::HowMany(..) => "how-many",
        Query::Older(..) => "older",
        Query::Younger(..) => "younger",
        Query::BornFirst(..) => "born-first",
        Query::Oldest(..) => "oldest",
        Query::Youngest(..) => "youngest",
        Query::MostRelatives(..) => "most",
    }
}

/// The shape the question text announces, if any.
fn shape_of_text(text: &str) -> Option<&'static str> {
    let t = text.trim_start();
    let starts = |p: &str| t.starts_with(p);
    Some(if starts("Who is older,") {
        "older"
    } else if starts("Who is younger,") {
        "younger"
    } else if starts("Who was born first,") {
        "born-first"
    } else if starts("Who is the oldest ") {
        "oldest"
    } else if starts("Who is the youngest ") {
        "youngest"
    } else if starts("Who has the most ") {
        "most"
    } else if starts("How many ") {
        "how-many"
    } else if starts("What is ") {
        "what"
    } else if starts("Who is the person whose ") && t.contains(" and whose ") {
        "multi-attribute"
    } else if starts("Who is ") {
        "who"
    } else {
        return None;
    })
}

/// The shape a record's tags (`type` name, `question_category`, one-word template tokens)
/// name, if any: `comparison_younger`, `superlative_oldest`, `born_first`, ...
fn shape_of_tags(q: &PwQuestion) -> Option<&'static str> {
    let tags = q
        .type_name
        .iter()
        .chain(&q.question_category)
        .chain(q.template.iter().filter(|t| !t.contains([' ', '<'])));
    for tag in tags {
        let tag = tag.to_ascii_lowercase().replace('-', "_");
        let shape = if tag.contains("youngest") {
            "youngest"
        } else if tag.contains("oldest") {
            "oldest"
        } else if tag.contains("younger") {
            "younger"
        } else if tag.contains("older") {
            "older"
        } else if tag.contains("born_first") || tag.contains("bornfirst") {
            "born-first"
        } else {
            continue;
        };
        return Some(shape);
    }
    None
}

/// Why a record could not be compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecordError {
    /// The record is internally inconsistent or garbled (atoms that are not terms, a comparison
    /// whose text names none, a text that contradicts the query or the tags, an empty answer
    /// where the shape needs one, a text that lost the query's names or values).
    Malformed(String),
    /// The record is well-formed but outside the supported shapes.
    Unsupported(String),
}

impl std::fmt::Display for RecordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecordError::Malformed(m) => write!(f, "malformed: {m}"),
            RecordError::Unsupported(m) => write!(f, "unsupported: {m}"),
        }
    }
}

/// Compiles one record into its typed query and shape, using the text (and the tags) where the
/// query alone does not decide: a date comparison is "older", "younger" or "born first" as its
/// text says. Consistency checks for the extended shapes (everything but who / what /
/// how-many): a non-empty answer, a text ending in `?` that names every person and value of
/// the query, a superlative text that says the query's direction, tags that do not contradict
/// the text.
pub fn compile_record(q: &PwQuestion) -> std::result::Result<(Query, &'static str), RecordError> {
    for (i, atom) in q.prolog.query.iter().enumerate() {
        parse_term(atom).map_err(|e| RecordError::Malformed(format!("query atom {i}: {e}")))?;
    }
    let query = compile_query(&q.prolog.query, &q.prolog.answer).map_err(|e| match e {
        PhantomWikiError::Inconsistent(m) => RecordError::Malformed(m),
        e => RecordError::Unsupported(e.to_string()),
    })?;
    let text = shape_of_text(&q.question);
    let tags = shape_of_tags(q);
    let malformed = |m: String| Err(RecordError::Malformed(m));
    let query = match query {
        Query::Older(a, b) => match text {
            Some("older") => Query::Older(a, b),
            Some("younger") => Query::Younger(a, b),
            Some("born-first") => Query::BornFirst(a, b),
            _ => {
                return malformed(format!(
                    "a date comparison whose text {:?} names no known comparison \
                     (older, younger, born first)",
                    q.question
                ));
            }
        },
        other => other,
    };
    let mut query = query;
    for chain in chains_mut(&mut query) {
        text_order(chain, &q.question);
    }
    let shape = shape_of(&query);
    let directional = |s: &str| {
        matches!(
            s,
            "older" | "younger" | "born-first" | "oldest" | "youngest"
        )
    };
    if matches!(shape, "oldest" | "youngest" | "most") && text != Some(shape) {
        return malformed(format!(
            "the query asks the {shape}, the text {:?} does not",
            q.question
        ));
    }
    if let Some(tag) = tags
        && directional(shape)
        && directional(tag)
        && tag != shape
    {
        return malformed(format!(
            "the text asks {shape:?}, the record's tags {tag:?}"
        ));
    }
    if !matches!(shape, "who" | "what" | "how-many") {
        if q.answer.is_empty() {
            return malformed(format!("empty answer list for a {shape} question"));
        }
        if !q.question.trim_end().ends_with('?') {
            return malformed(format!("the text {:?} is cut short", q.question));
        }
        for chain in query.chains() {
            let mut names: Vec<&str> = Vec::new();
            match &chain.anchor {
                Anchor::Name(n) => names.push(n),
                Anchor::Attribute { value, .. } => names.push(value),
            }
            for step in &chain.steps {
                if let ChainStep::Filter { value, .. } = step {
                    names.push(value);
                }
            }
            if let Some(missing) = names.iter().find(|n| !q.question.contains(**n)) {
                return malformed(format!(
                    "the text {:?} does not mention {missing:?} of the query",
                    q.question
                ));
            }
        }
    }
    Ok((query, shape))
}

fn chains_mut(query: &mut Query) -> Vec<&mut Chain> {
    match query {
        Query::Who(c)
        | Query::What(c, _)
        | Query::HowMany(c, _)
        | Query::Oldest(c, _)
        | Query::Youngest(c, _)
        | Query::MostRelatives(c, _) => vec![c],
        Query::Older(a, b) | Query::Younger(a, b) | Query::BornFirst(a, b) => vec![a, b],
    }
}

/// Puts the attributes describing a chain's first person ("the person whose A is a and whose B
/// is b": the anchor and the filters right after it) in the order the text names them (the
/// same people either way; the order only matters for the rendered text).
fn text_order(chain: &mut Chain, text: &str) {
    let Anchor::Attribute { attribute, value } = &chain.anchor else {
        return;
    };
    let mut group = vec![(*attribute, value.clone())];
    let leading = chain
        .steps
        .iter()
        .take_while(|s| matches!(s, ChainStep::Filter { .. }))
        .count();
    for step in chain.steps.drain(..leading) {
        if let ChainStep::Filter { attribute, value } = step {
            group.push((attribute, value));
        }
    }
    group.sort_by_key(|(attribute, value)| {
        text.find(&format!("whose {} is {value}", attribute.noun()))
            .unwrap_or(usize::MAX)
    });
    let mut group = group.into_iter();
    let (attribute, value) = group.next().expect("the anchor");
    chain.anchor = Anchor::Attribute { attribute, value };
    let filters: Vec<ChainStep> = group
        .map(|(attribute, value)| ChainStep::Filter { attribute, value })
        .collect();
    chain.steps.splice(0..0, filters);
}

// ---------------------------------------------------------------------------------------------
// Ambiguity
// ---------------------------------------------------------------------------------------------

/// When a question has no single right answer: the answer sets that a generator could have
/// meant. `structural`: a comparison side or a superlative base denotes several people whose
/// choices lead to different answers (any answer consistent with a choice counts as ambiguous,
/// even one equal to the query's own union; when every choice gives the same answer, the
/// question has one right answer and is not ambiguous); otherwise a tie (dates of birth, counts, or several people matching a
/// multi-attribute description): PhantomWiki's answer agrees when it names every tied person
/// and is ambiguous when it names some of them.
struct Readings {
    structural: bool,
    choices: Vec<BTreeSet<String>>,
}

const MAX_CHOICES: usize = 10_000;

/// Whether the readings do not all give the same answer.
fn differ(choices: &[BTreeSet<String>]) -> bool {
    choices.windows(2).any(|w| w[0] != w[1])
}

/// The distinct answers of the pairings of a member of `xs` with a member of `ys` (the one
/// born first, or last; both on a tie; the person alone when paired with themself), sorted.
/// Every pairing is accounted for without enumerating the pairs (sides of a few hundred
/// people each, as long friend chains give, make ~10^5 pairings): a person alone is a winner
/// of some pairing ([`pairing_winners`], linear in the sides) or on both sides, and a tie
/// pairs two people of equal dates from the two sides.
fn pairing_choices(
    u: &Universe,
    xs: &[PersonId],
    ys: &[PersonId],
    oldest: bool,
) -> BTreeSet<Vec<PersonId>> {
    use crate::question::query::pairing_winners;
    let in_ys: BTreeSet<PersonId> = ys.iter().copied().collect();
    let mut choices: BTreeSet<Vec<PersonId>> = pairing_winners(u, xs, ys, oldest)
        .into_iter()
        .chain(xs.iter().copied().filter(|p| in_ys.contains(p)))
        .map(|p| vec![p])
        .collect();
    // Ties: people of one date on the two sides, each pair of distinct people.
    let dob = |p: PersonId| u.person(p).dob.as_str();
    let mut by_date: BTreeMap<&str, (BTreeSet<PersonId>, BTreeSet<PersonId>)> = BTreeMap::new();
    for &x in xs {
        by_date.entry(dob(x)).or_default().0.insert(x);
    }
    for &y in &in_ys {
        if let Some(entry) = by_date.get_mut(dob(y)) {
            entry.1.insert(y);
        }
    }
    for (left, right) in by_date.values() {
        for &x in left {
            for &y in right {
                if x != y {
                    choices.insert(if x < y { vec![x, y] } else { vec![y, x] });
                }
            }
        }
    }
    choices
}

fn readings(
    query: &Query,
    shape: &str,
    u: &Universe,
) -> std::result::Result<Option<Readings>, crate::question::QueryError> {
    use crate::question::query::{extreme_born, most_related};
    let names = |ids: &[PersonId]| -> BTreeSet<String> {
        ids.iter().map(|&p| u.person(p).name.clone()).collect()
    };
    let relation_of = |r: &str| {
        relation(r).ok_or_else(|| crate::question::QueryError::UnknownRelation(r.to_owned()))
    };
    Ok(match query {
        Query::Older(a, b) | Query::Younger(a, b) | Query::BornFirst(a, b) => {
            let (xs, ys) = (a.evaluate_native(u)?, b.evaluate_native(u)?);
            let oldest = !matches!(query, Query::Younger(..));
            let choices: Vec<BTreeSet<String>> = pairing_choices(u, &xs, &ys, oldest)
                .iter()
                .map(|c| names(c))
                .collect();
            let structural = (xs.len() > 1 || ys.len() > 1) && choices.len() > 1;
            let tie = choices.iter().any(|c| c.len() > 1);
            (structural || tie).then_some(Readings {
                structural,
                choices,
            })
        }
        Query::Oldest(c, r) | Query::Youngest(c, r) => {
            let r = relation_of(r)?;
            let base = c.evaluate_native(u)?;
            let oldest = matches!(query, Query::Oldest(..));
            let choices: Vec<BTreeSet<String>> = base
                .iter()
                .take(MAX_CHOICES)
                .map(|&p| names(&extreme_born(u, &r.related(u, p), oldest)))
                .filter(|c| !c.is_empty())
                .collect();
            let structural = base.len() > 1 && differ(&choices);
            let tie = choices.iter().any(|c| c.len() > 1);
            (structural || tie).then_some(Readings {
                structural,
                choices,
            })
        }
        Query::MostRelatives(c, r) => {
            let winners = names(&most_related(u, &c.evaluate_native(u)?, relation_of(r)?));
            (winners.len() > 1).then(|| Readings {
                structural: false,
                choices: vec![winners],
            })
        }
        Query::Who(c) if shape == "multi-attribute" => {
            let matching = names(&c.evaluate_native(u)?);
            (matching.len() > 1).then(|| Readings {
                structural: false,
                choices: vec![matching],
            })
        }
        _ => None,
    })
}

/// The outcome of one question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QuestionCheck {
    /// Position in `questions.json`.
    pub index: usize,
    /// PhantomWiki's id.
    pub id: String,
    /// The question text.
    pub question: String,
    /// The query atoms.
    pub query: Vec<String>,
    /// PhantomWiki's answers, sorted and distinct.
    pub expected: Vec<String>,
    /// rulegym's engine answers (absent on error).
    pub got: Option<Vec<String>>,
    /// The native oracle's answers (absent on error).
    pub oracle: Option<Vec<String>>,
    /// What went wrong, for errors and malformed records.
    pub error: Option<String>,
    /// The question's shape (see [`SHAPES`]; `unsupported` or `undecided` when none).
    pub shape: String,
}

/// The outcomes of the questions of one shape.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ShapeCounts {
    /// Questions of the shape.
    pub questions: usize,
    /// Answers equal to PhantomWiki's as sets.
    pub agree: usize,
    /// Answers that differ (and no reading of an ambiguous question explains PhantomWiki's).
    pub disagree: usize,
    /// Unsupported queries and evaluation failures.
    pub errors: usize,
    /// Questions without one right answer whose PhantomWiki answer fits one reading.
    pub ambiguous: usize,
    /// Internally inconsistent or garbled records.
    pub malformed: usize,
}

/// The summary `rulegym phantomwiki verify` prints. Every question is counted once, in exactly
/// one of `agree`, `disagree`, `errors`, `ambiguous` and `malformed`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct VerifyReport {
    /// Questions read.
    pub questions: usize,
    /// Questions whose engine answers equal PhantomWiki's as sets.
    pub agree: usize,
    /// Questions whose answers differ.
    pub disagree: usize,
    /// Questions that could not be compiled (a shape rulegym does not support) or evaluated.
    pub errors: usize,
    /// Questions where the native oracle differs from the engine (a rulegym bug if non-zero).
    pub oracle_disagree: usize,
    /// Questions whose text rulegym renders differently from the typed query.
    pub text_differs: usize,
    /// The disagreeing questions.
    pub disagreements: Vec<QuestionCheck>,
    /// The questions that failed.
    pub error_details: Vec<QuestionCheck>,
    /// Up to 10 (PhantomWiki text, rulegym text) pairs that differ.
    pub text_examples: Vec<(String, String)>,
    /// Questions that have no one right answer under their own query (a comparison side or a
    /// superlative base denoting several people, a tie) and whose PhantomWiki answer fits one
    /// reading; see `readings` in the source for the rule.
    pub ambiguous: usize,
    /// Records that are internally inconsistent or garbled ([`RecordError::Malformed`]).
    pub malformed: usize,
    /// The counts per shape ([`SHAPES`], `unsupported`, `undecided`).
    pub by_shape: BTreeMap<String, ShapeCounts>,
    /// The ambiguous questions.
    pub ambiguous_details: Vec<QuestionCheck>,
    /// The malformed records.
    pub malformed_details: Vec<QuestionCheck>,
}

/// The shape a malformed record counts under: its query's when the query compiles (a date
/// comparison's only when the text names one), else the one its text announces, else
/// `undecided`.
fn malformed_shape(q: &PwQuestion) -> &'static str {
    let text = shape_of_text(&q.question);
    match compile_query(&q.prolog.query, &q.prolog.answer) {
        Ok(Query::Older(..)) => match text {
            Some(s @ ("older" | "younger" | "born-first")) => s,
            _ => "undecided",
        },
        Ok(query) => shape_of(&query),
        Err(_) => text.unwrap_or("undecided"),
    }
}

/// How one question came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Agree,
    Disagree,
    Error,
    Ambiguous,
    Malformed,
}

impl VerifyReport {
    fn count(&mut self, outcome: Outcome, check: QuestionCheck) {
        let shape = self.by_shape.entry(check.shape.clone()).or_default();
        shape.questions += 1;
        match outcome {
            Outcome::Agree => {
                shape.agree += 1;
                self.agree += 1;
            }
            Outcome::Disagree => {
                shape.disagree += 1;
                self.disagree += 1;
                self.disagreements.push(check);
            }
            Outcome::Error => {
                shape.errors += 1;
                self.errors += 1;
                self.error_details.push(check);
            }
            Outcome::Ambiguous => {
                shape.ambiguous += 1;
                self.ambiguous += 1;
                self.ambiguous_details.push(check);
            }
            Outcome::Malformed => {
                shape.malformed += 1;
                self.malformed += 1;
                self.malformed_details.push(check);
            }
        }
    }
}

/// Compiles ([`compile_record`]), evaluates (engine and oracle) and compares every question;
/// `engine` holds `universe` as [`Universe::engine_facts`]. Never panics: a bad record is counted as malformed or an error, with its index.
pub fn verify_questions(
    universe: &Universe,
    engine: &Engine,
    questions: &[PwQuestion],
) -> VerifyReport {
    let mut report = VerifyReport {
        questions: questions.len(),
        ..VerifyReport::default()
    };
    for (index, q) in questions.iter().enumerate() {
        let expected: BTreeSet<String> = q.answer.iter().cloned().collect();
        let mut check = QuestionCheck {
            index,
            id: q.id.clone(),
            question: q.question.clone(),
            query: q.prolog.query.clone(),
            expected: expected.iter().cloned().collect(),
            got: None,
            oracle: None,
            error: None,
            shape: String::new(),
        };
        let (query, shape) = match compile_record(q) {
            Ok(compiled) => compiled,
            Err(e) => {
                let outcome = match e {
                    RecordError::Malformed(_) => Outcome::Malformed,
                    RecordError::Unsupported(_) => Outcome::Error,
                };
                check.shape = match outcome {
                    Outcome::Malformed => malformed_shape(q).to_owned(),
                    _ => "unsupported".to_owned(),
                };
                check.error = Some(format!("question {index}: {e}"));
                report.count(outcome, check);
                continue;
            }
        };
        check.shape = shape.to_owned();
        let outcome = query.evaluate(engine, universe).and_then(|got| {
            let oracle = query.evaluate_native(universe).map_err(Error::from)?;
            let readings = readings(&query, shape, universe).map_err(Error::from)?;
            Ok((got, oracle, readings))
        });
        let (got, oracle, readings) = match outcome {
            Ok(evaluated) => evaluated,
            Err(e) => {
                check.error = Some(format!("question {index}: {e}"));
                report.count(Outcome::Error, check);
                continue;
            }
        };
        let text = question_text(&query);
        if text != q.question {
            report.text_differs += 1;
            if report.text_examples.len() < 10 {
                report.text_examples.push((q.question.clone(), text));
            }
        }
        if oracle != got {
            report.oracle_disagree += 1;
        }
        let equal = got.iter().cloned().collect::<BTreeSet<_>>() == expected;
        let fits =
            |r: &Readings| !expected.is_empty() && r.choices.iter().any(|c| expected.is_subset(c));
        let outcome = match &readings {
            Some(r) if r.structural && (equal || fits(r)) => Outcome::Ambiguous,
            _ if equal => Outcome::Agree,
            Some(r) if fits(r) => Outcome::Ambiguous,
            _ => Outcome::Disagree,
        };
        check.got = Some(got);
        check.oracle = Some(oracle);
        report.count(outcome, check);
    }
    report
}
