//! The check: cases sent in batches, every answer judged, each failing property shrunk to a
//! minimal counterexample.

use super::cases::{Case, CaseSource, Expectation, Spec, exact_reward};
use super::{Property, RewardError, RewardFn, RewardInput};
use serde::Serialize;
use std::collections::BTreeMap;

/// The most cases one check generates (each case's spec is held until the end for shrinking;
/// a stuffing case lists every wrong answer of its kind).
pub const MAX_CASES: usize = 100_000;

/// What to check.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckConfig {
    /// Seed of the case streams.
    pub seed: u64,
    /// Cases to generate (spread evenly over the generated properties).
    pub cases: usize,
    /// Cases per round trip to the reward function.
    pub batch: usize,
    /// Rounds of shrinking per failing property (each one round trip).
    pub shrink_rounds: usize,
}

impl Default for CheckConfig {
    fn default() -> Self {
        CheckConfig {
            seed: 1,
            cases: 1200,
            batch: 2000,
            shrink_rounds: 100,
        }
    }
}

impl CheckConfig {
    /// Checks the knobs.
    pub fn validate(&self) -> crate::Result<()> {
        if !(1..=MAX_CASES).contains(&self.cases) {
            return Err(crate::Error::Config(format!(
                "cases must be in 1..={MAX_CASES}, got {}",
                self.cases
            )));
        }
        if !(1..=1_000_000).contains(&self.batch) {
            return Err(crate::Error::Config(format!(
                "batch must be in 1..=1000000, got {}",
                self.batch
            )));
        }
        Ok(())
    }
}

/// One property's tally.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PropertyReport {
    /// The property's name.
    pub property: &'static str,
    /// What it checks.
    pub description: &'static str,
    /// Cases (or lines, for bounded/deterministic/timely) tried.
    pub tried: usize,
    /// Those that failed.
    pub failed: usize,
}

/// A minimal counterexample of one property.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Failure {
    /// The property's name.
    pub property: &'static str,
    /// The (shrunk) input: the line the reward was given (without its id), and the line the
    /// property compares it with as `base_response` (or `base`), if any.
    pub input: serde_json::Value,
    /// What the reward should be (`= 1`, `< 1`, `<= 0.004`, `>= 0.5`...).
    pub expected: String,
    /// What it was (NaN and infinities written as strings).
    pub got: serde_json::Value,
    /// The reward of `base_response`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_got: Option<f64>,
    /// rulegym's exact reward for the response (none for a line left unanswered).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rulegym: Option<f64>,
}

/// The report of a check: deterministic for a seed, a source and a reward function.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Whether every property held.
    pub passed: bool,
    /// The case seed.
    pub seed: u64,
    /// Questions (tool-use tasks, for a rubric check) the cases were drawn from.
    pub questions: usize,
    /// Cases generated.
    pub cases: usize,
    /// Input lines sent to the reward function (cases, their duplicates, bases, shrinking).
    pub lines: usize,
    /// Whether the check stopped early (the reward did not answer in time).
    pub stopped_early: bool,
    /// Every property, with cases tried and failed.
    pub properties: Vec<PropertyReport>,
    /// One minimal counterexample per failed property.
    pub failures: Vec<Failure>,
}

impl Failure {
    /// The `timely` failure of a reward that left input `line` (id `id`) unanswered for `secs`.
    pub(super) fn timely(line: usize, id: &str, secs: f64) -> Failure {
        Failure {
            property: Property::Timely.name(),
            input: serde_json::json!({"line": line, "id": id}),
            expected: format!(
                "an answer within {secs} s (does the command flush stdout after each line?)"
            ),
            got: serde_json::Value::String("no answer".into()),
            base_got: None,
            rulegym: None,
        }
    }
}

/// A reward as the report writes it (NaN and infinities as strings).
pub(super) fn number(v: f64) -> serde_json::Value {
    serde_json::Number::from_f64(v)
        .map(serde_json::Value::Number)
        .unwrap_or_else(|| serde_json::Value::String(v.to_string()))
}

/// Whether a reward is a number in [0, 1].
pub(super) fn in_bounds(v: f64) -> bool {
    (0.0..=1.0).contains(&v)
}

/// Whether two answers to the same line agree (two NaNs do).
pub(super) fn same(a: f64, b: f64) -> bool {
    a == b || (a.is_nan() && b.is_nan())
}

/// Sends inputs to the reward, counting lines over the whole run.
pub(super) struct Sender<'a> {
    pub(super) reward: &'a mut dyn RewardFn,
    pub(super) lines: usize,
}

impl Sender<'_> {
    /// The rewards of `inputs`, one per input (a reward that answers another count is an error).
    pub(super) fn send(&mut self, inputs: &[RewardInput]) -> Result<Vec<f64>, RewardError> {
        if inputs.is_empty() {
            return Ok(Vec::new());
        }
        let got = self.reward.rewards(inputs, self.lines + 1)?;
        if got.len() != inputs.len() {
            return Err(RewardError::Failed {
                line: self.lines + 1,
                message: format!(
                    "{} rewards for a batch of {} inputs",
                    got.len(),
                    inputs.len()
                ),
            });
        }
        self.lines += inputs.len();
        Ok(got)
    }

    /// The rewards of a case's response and base (if any).
    fn case_rewards(
        &mut self,
        cases: &[Case],
        tag: &str,
    ) -> Result<Vec<(f64, Option<f64>)>, RewardError> {
        let mut inputs = Vec::new();
        for (i, c) in cases.iter().enumerate() {
            inputs.push(c.input(format!("{tag}{i}"), &c.response));
            if let Some(base) = &c.base {
                inputs.push(c.input(format!("{tag}{i}b"), base));
            }
        }
        let got = self.send(&inputs)?;
        let mut it = got.into_iter();
        Ok(cases
            .iter()
            .map(|c| {
                let main = it.next().unwrap_or(f64::NAN);
                let base = c.base.as_ref().map(|_| it.next().unwrap_or(f64::NAN));
                (main, base)
            })
            .collect())
    }
}

/// Runs every property against `reward` on cases from `source`. Property failures are in the
/// report; an `Err` is a reward that could not be checked (it died, answered garbage or
/// missed lines), or a bad config.
pub fn check(
    source: &CaseSource,
    reward: &mut dyn RewardFn,
    config: &CheckConfig,
) -> crate::Result<Result<Report, RewardError>> {
    config.validate()?;
    // Cases: property i % N, the (i / N)-th of its stream (N generated properties). Only specs are kept (a long
    // response is rendered again per batch), and only those whose property rulegym's own reward
    // meets: a dataset whose gold answers collide under normalisation yields no case that
    // would wrongly fail a correct reward.
    let mut cases: Vec<Spec> = Vec::with_capacity(config.cases);
    let mut tried: BTreeMap<Property, usize> = BTreeMap::new();
    for i in 0..config.cases {
        let property = Property::ANSWER_GENERATED[i % Property::ANSWER_GENERATED.len()];
        let index = (i / Property::ANSWER_GENERATED.len()) as u64;
        tried.entry(property).or_default();
        let Some(spec) = source.case(config.seed, property, index) else {
            continue;
        };
        let case = Case::new(spec)?;
        let base = match &case.base {
            Some(b) => Some(exact_reward(&case.spec.question, b, &case.spec.answers)?),
            None => None,
        };
        if case.spec.valid() && case.holds(case.expected, base) {
            *tried.entry(property).or_default() += 1;
            cases.push(case.spec);
        }
    }
    let mut sender = Sender { reward, lines: 0 };
    let mut failed: BTreeMap<Property, usize> = BTreeMap::new();
    let mut first_failure: BTreeMap<Property, (usize, f64, Option<f64>)> = BTreeMap::new();
    let mut lines_checked = 0usize;
    let mut checked_cases = 0usize;
    let mut stopped = None;
    'batches: for (b, specs) in cases.chunks(config.batch).enumerate() {
        let chunk = specs
            .iter()
            .cloned()
            .map(Case::new)
            .collect::<crate::Result<Vec<_>>>()?;
        // Each case, its base, and a duplicate of its response for determinism.
        let mut inputs = Vec::new();
        for (i, c) in chunk.iter().enumerate() {
            let id = b * config.batch + i;
            inputs.push(c.input(id.to_string(), &c.response));
            if let Some(base) = &c.base {
                inputs.push(c.input(format!("{id}b"), base));
            }
        }
        // The duplicates go after the whole batch, so they are not adjacent to the original.
        for (i, c) in chunk.iter().enumerate() {
            let id = b * config.batch + i;
            inputs.push(c.input(format!("{id}d"), &c.response));
        }
        let got = match sender.send(&inputs) {
            Ok(got) => got,
            Err(RewardError::Timeout { line, id, secs }) => {
                stopped = Some((line, id, secs));
                break 'batches;
            }
            Err(e) => return Ok(Err(e)),
        };
        lines_checked += got.len();
        checked_cases += chunk.len();
        let mut fails: Vec<(Property, usize, f64, Option<f64>)> = Vec::new();
        let bounded_failures = got.iter().filter(|v| !in_bounds(**v)).count();
        *failed.entry(Property::Bounded).or_default() += bounded_failures;
        let mut k = 0;
        let mut mains = Vec::with_capacity(chunk.len());
        for c in &chunk {
            let main = got[k];
            k += 1;
            let base = c.base.as_ref().map(|_| {
                k += 1;
                got[k - 1]
            });
            mains.push((main, base));
        }
        for (i, c) in chunk.iter().enumerate() {
            let case = b * config.batch + i;
            let (main, base) = mains[i];
            let dup = got[k + i];
            if !same(main, dup) {
                fails.push((Property::Deterministic, case, main, Some(dup)));
            }
            if let Some(bad) = [Some(main), base, Some(dup)]
                .into_iter()
                .flatten()
                .find(|v| !in_bounds(*v))
            {
                first_failure
                    .entry(Property::Bounded)
                    .or_insert((case, bad, None));
            }
            if !c.holds(main, base) {
                fails.push((c.spec.property, case, main, base));
            }
        }
        for (p, case, main, base) in fails {
            *failed.entry(p).or_default() += 1;
            first_failure.entry(p).or_insert((case, main, base));
        }
    }
    // Shrink each failing property's first case.
    let mut failures = Vec::new();
    for (&property, &(case, main, base)) in &first_failure {
        let c = &Case::new(cases[case].clone())?;
        let failure = match property {
            Property::Deterministic => Failure {
                property: property.name(),
                input: failure_input(c),
                expected: format!("= {} (the first answer to the same line)", number(main)),
                got: number(base.unwrap_or(f64::NAN)),
                base_got: None,
                rulegym: Some(c.expected),
            },
            _ => {
                let fails = |r: &Case, main: f64, base: Option<f64>| {
                    if property == Property::Bounded {
                        !in_bounds(main) || base.is_some_and(|b| !in_bounds(b))
                    } else {
                        !r.holds(main, base)
                    }
                };
                // Shrink only a reward that still answers, from a case that shows the failure
                // (an out-of-range duplicate is reported as it came).
                let shrunk = if stopped.is_some() || !fails(c, main, base) {
                    (c.clone(), main, base)
                } else {
                    match shrink(
                        &mut sender,
                        c.clone(),
                        (main, base),
                        &fails,
                        config.shrink_rounds,
                    )? {
                        Ok(s) => s,
                        Err(RewardError::Timeout { line, id, secs }) => {
                            stopped = Some((line, id, secs));
                            (c.clone(), main, base)
                        }
                        Err(e) => return Ok(Err(e)),
                    }
                };
                let (shrunk, main, base) = shrunk;
                let expected = if property == Property::Bounded {
                    "in [0, 1]".to_owned()
                } else {
                    Expectation::of(&shrunk, base).describe()
                };
                Failure {
                    property: property.name(),
                    input: failure_input(&shrunk),
                    expected,
                    got: number(main),
                    base_got: base,
                    rulegym: Some(shrunk.expected),
                }
            }
        };
        failures.push(failure);
    }
    if let Some((line, id, secs)) = &stopped {
        failed.insert(Property::Timely, 1);
        failures.push(Failure::timely(*line, id, *secs));
    }
    let properties = Property::ANSWER_REPORT
        .iter()
        .map(|&p| PropertyReport {
            property: p.name(),
            description: p.description(),
            tried: match p {
                Property::Bounded | Property::Timely => lines_checked,
                Property::Deterministic => checked_cases,
                _ => tried.get(&p).copied().unwrap_or(0),
            },
            failed: failed.get(&p).copied().unwrap_or(0),
        })
        .collect();
    Ok(Ok(Report {
        passed: failures.is_empty() && failed.values().all(|&n| n == 0),
        seed: config.seed,
        questions: source.questions().len(),
        cases: cases.len(),
        lines: sender.lines,
        stopped_early: stopped.is_some(),
        properties,
        failures,
    }))
}

fn failure_input(c: &Case) -> serde_json::Value {
    let mut input = c.input(String::new(), &c.response).fields;
    if let Some(base) = &c.base {
        input.insert("base_response".into(), base.clone().into());
    }
    serde_json::Value::Object(input)
}

type Shrunk = (Case, f64, Option<f64>);

/// Greedy shrinking: each round sends every smaller spec in one batch and keeps the first
/// that still fails, until none does or the rounds run out.
fn shrink(
    sender: &mut Sender<'_>,
    mut current: Case,
    mut got: (f64, Option<f64>),
    fails: &dyn Fn(&Case, f64, Option<f64>) -> bool,
    rounds: usize,
) -> crate::Result<Result<Shrunk, RewardError>> {
    for _ in 0..rounds {
        let candidates = current
            .spec
            .shrink()
            .into_iter()
            .map(Case::new)
            .collect::<crate::Result<Vec<_>>>()?;
        if candidates.is_empty() {
            break;
        }
        let answers = match sender.case_rewards(&candidates, "s") {
            Ok(a) => a,
            Err(e) => return Ok(Err(e)),
        };
        let next = candidates
            .into_iter()
            .zip(answers)
            .find(|(c, (main, base))| fails(c, *main, *base));
        match next {
            Some((c, g)) => {
                current = c;
                got = g;
            }
            None => break,
        }
    }
    Ok(Ok((current, got.0, got.1)))
}
