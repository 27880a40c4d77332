//! Supervised demonstrations of the tool-calling search environment, derived from each
//! question's proof: the conversation a policy would have if it read exactly the articles the
//! proof needs (`get_article` for each person, `search` for an attribute anchor) and answered the
//! gold set. Every demonstration is replayed through a [`ToolSession`] with the tools of
//! [`super::search`] (the observations in the rows are the session's own) and kept only when it
//! scores reward 1, so a row never teaches something the environment would not pay for.
//!
//! Rows are what TRL's `SFTTrainer` reads for tool calling: `messages` (OpenAI chat with
//! `tool_calls` and `tool` messages) and `tools` (the function schemas). The sentence before each
//! call rests on what was read: before reading the next person, or answering, it quotes the
//! article lines that name them ("The daughter of A is B."), so a policy learns to follow the
//! fact that leads on, not to open any name it has seen. The phrasings are drawn by a ChaCha
//! stream keyed by the question id, so the rows do not repeat one template, and are the same on
//! every run.

use super::ToolSession;
use super::search::{self as tools, SYSTEM_PROMPT};
use crate::question::{Anchor, Family, Question};
use crate::retrieval::SearchIndex;
use crate::search::oracle::proof_plan;
use crate::search::session::SearchSession;
use crate::search::{SearchEnv, SearchEnvConfig, SearchTask};
use crate::universe::PersonId;
use crate::universe::Universe;
use rand::Rng;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;

/// One demonstration: an SFT row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Demonstration {
    /// The question id.
    pub id: String,
    /// The question.
    pub question: String,
    /// Its gold answers.
    pub answers: Vec<String>,
    /// Its family.
    pub family: Family,
    /// Its relation hops.
    pub hops: usize,
    /// The conversation: system prompt, question, the calls with their observations, and a
    /// closing assistant message.
    pub messages: Vec<Value>,
    /// The tools' function schemas ([`tools::schemas`]).
    pub tools: Vec<tools::ToolSchema>,
    /// The reward the environment gave the replayed conversation (always 1).
    pub reward: f64,
}

/// What [`demonstrations`] made of a list of questions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DemoReport {
    /// Demonstrations written.
    pub written: usize,
    /// Questions whose replay scored below 1 (a retrieval miss, or a plan longer than the turn
    /// cap): left out.
    pub failed: usize,
    /// Questions left out by the per-family cap.
    pub capped: usize,
}

/// Options of [`demonstrations`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[non_exhaustive]
pub struct DemoOptions {
    /// Seed of the phrasing streams.
    pub seed: u64,
    /// At most this many demonstrations per question family (in question order).
    pub max_per_family: Option<usize>,
    /// The environment the demonstrations are replayed in (its turn cap and passages per
    /// search).
    pub env: SearchEnvConfig,
}

impl Default for DemoOptions {
    fn default() -> Self {
        DemoOptions {
            seed: 1,
            max_per_family: None,
            env: SearchEnvConfig::default(),
        }
    }
}

impl DemoOptions {
    /// Options with this phrasing seed and per-family cap, the default environment.
    pub fn new(seed: u64, max_per_family: Option<usize>) -> Self {
        DemoOptions {
            seed,
            max_per_family,
            ..DemoOptions::default()
        }
    }
}

const FIRST_READ: [&str; 3] = [
    "The question is about {}, so I read their article first.",
    "I start with the article about {}.",
    "Let me read the article about {}.",
];
/// The next read, grounded in the line that names the person (`{q}`: the quoted line).
const NEXT_READ: [&str; 3] = [
    "The article says: \"{q}\" Next, the article about {}.",
    "I read: \"{q}\" So now I read about {}.",
    "\"{q}\" {} is the next person to check.",
];
/// The next read when no line read so far names the person (a fallback; the proof's reads
/// are normally all named by what was read before them).
const NEXT_READ_UNQUOTED: [&str; 2] = [
    "Next, the article about {}.",
    "{} is the next person to check.",
];
const ATTRIBUTE_SEARCH: [&str; 2] = [
    "First I search for \"{}\" to find who the question means.",
    "Let me find who matches \"{}\".",
];
/// The answer, grounded in the lines that state it.
const ANSWER: [&str; 3] = [
    "The article says: \"{q}\" So the answer is {}.",
    "I read: \"{q}\" That answers it: {}.",
    "\"{q}\" I have what I need; the answer is {}.",
];
/// The answer when no line states it (a count, a comparison).
const ANSWER_UNQUOTED: [&str; 3] = [
    "So the answer is {}.",
    "That answers it: {}.",
    "I have what I need; the answer is {}.",
];
const CLOSING: [&str; 3] = ["Done.", "I have answered.", "The answer is given."];
/// At most this many lines are quoted before a call.
const MAX_QUOTED: usize = 2;

/// Whether `needle` occurs in `line` as whole words (not inside a longer name or number).
fn mentions(line: &str, needle: &str) -> bool {
    let word = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
    line.match_indices(needle).any(|(at, _)| {
        !word(line[..at].chars().next_back()) && !word(line[at + needle.len()..].chars().next())
    })
}

/// The line of what was read that leads to `needle`: a sentence that holds `context` when one is
/// given (the value an attribute search matched), else one that names `needle` as its object
/// ("The daughter of A is B.", "The hobby of B is chess."). Lines whose relation the question
/// names ("The friends of A are ..." for "the friend of A") come first, then the most recent.
fn evidence<'a>(
    observations: &'a [String],
    question: &str,
    needle: &str,
    context: Option<&str>,
) -> Option<&'a str> {
    let leads = |line: &str| match context {
        Some(c) => mentions(line, needle) && mentions(line, c),
        None => [" is ", " are "].iter().any(|verb| {
            line.split_once(verb)
                .is_some_and(|(_, object)| mentions(object, needle))
        }),
    };
    let asked = |line: &str| {
        line.strip_prefix("The ")
            .and_then(|rest| rest.split_once(" of "))
            .is_some_and(|(noun, _)| {
                mentions(question, noun) || mentions(question, noun.trim_end_matches('s'))
            })
    };
    let find = |pick: &dyn Fn(&str) -> bool| {
        observations.iter().rev().find_map(|text| {
            text.lines()
                .map(str::trim)
                .find(|l| l.starts_with("The ") && leads(l) && pick(l))
        })
    };
    find(&asked).or_else(|| find(&|_| true))
}

/// The quoted lines that lead to each of `needles`, each once, at most [`MAX_QUOTED`].
fn quote(
    observations: &[String],
    question: &str,
    needles: &[&str],
    context: Option<&str>,
) -> String {
    let mut quoted: Vec<&str> = Vec::new();
    for needle in needles {
        if let Some(line) = evidence(observations, question, needle, context)
            && quoted.len() < MAX_QUOTED
            && !quoted.contains(&line)
        {
            quoted.push(line);
        }
    }
    quoted.join(" ")
}

/// A stable 64-bit key of a question id (FNV-1a), for its phrasing stream.
fn id_key(id: &str) -> u64 {
    id.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The assistant message calling `name` with its one argument.
fn call_message(content: String, name: &str, argument: &str, value: &str) -> Value {
    json!({
        "role": "assistant",
        "content": content,
        "tool_calls": [{"type": "function", "function": {"name": name, "arguments": {argument: value}}}],
    })
}

/// The demonstration of `q`, or `None` when its replay does not score 1. `index` must be the
/// index of `universe`'s articles whose document ids are person ids (the one `rulegym
/// generate` writes).
pub fn demonstration(
    universe: &Universe,
    index: &Arc<SearchIndex>,
    options: &DemoOptions,
    q: &Question,
) -> crate::Result<Option<Demonstration>> {
    let plan = proof_plan(universe, &q.plan);
    let task = SearchTask {
        question: q.question.clone(),
        answers: q.answers.clone(),
        gold_docs: plan.reads.iter().map(|p| p.to_string()).collect(),
    };
    let env = SearchEnv::new(index.clone(), options.env.clone(), task)?;
    let mut session = ToolSession::search(
        SearchSession::new(env, index.clone(), q.clone())?,
        index.clone(),
    );
    let mut rng = crate::seed::stream(options.seed, "demo-phrasing", id_key(&q.id));
    let mut pick = |choices: &[&str], slot: &str, quote: &str| -> String {
        choices[rng.random_range(0..choices.len())]
            .replace("{q}", quote)
            .replace("{}", slot)
    };
    let mut messages = vec![
        json!({"role": "system", "content": SYSTEM_PROMPT}),
        json!({"role": "user", "content": q.question}),
    ];
    let mut observations: Vec<String> = Vec::new();
    // (tool, argument name, argument) in proof order; the sentence before each call is written
    // when the call is made, from what has been read by then.
    let mut calls: Vec<(&str, &str, String)> = Vec::new();
    for (text, _) in &plan.attribute_searches {
        calls.push(("search", "query", text.clone()));
    }
    // An attribute search's holders are found by the value it matched.
    let mut matched: BTreeMap<PersonId, &str> = BTreeMap::new();
    for chain in q.plan.chains() {
        if let Anchor::Attribute { attribute, value } = &chain.anchor {
            for h in universe.holders(attribute.fact(), value) {
                matched.entry(h).or_insert(value.as_str());
            }
        }
    }
    let mut context: BTreeMap<String, &str> = BTreeMap::new();
    for &p in &plan.reads {
        let name = universe.person(p).name.clone();
        if let Some(&value) = matched.get(&p) {
            context.insert(name.clone(), value);
        }
        calls.push(("get_article", "title", name));
    }
    calls.push(("answer", "answer", q.answers.join(", ")));
    for (name, argument, value) in calls {
        let line = match name {
            "search" => pick(&ATTRIBUTE_SEARCH, &value, ""),
            "get_article" if observations.is_empty() => pick(&FIRST_READ, &value, ""),
            _ => {
                let needles: Vec<&str> = if name == "answer" {
                    // A count is no quotable fact: digits also occur inside dates.
                    q.answers
                        .iter()
                        .map(String::as_str)
                        .filter(|a| !a.bytes().all(|b| b.is_ascii_digit()))
                        .collect()
                } else {
                    vec![value.as_str()]
                };
                let held = (name == "get_article").then(|| context.get(&value).copied());
                let quote = quote(&observations, &q.question, &needles, held.flatten());
                match (name, quote.is_empty()) {
                    ("answer", false) => pick(&ANSWER, &value, &quote),
                    ("answer", true) => pick(&ANSWER_UNQUOTED, &value, ""),
                    (_, false) => pick(&NEXT_READ, &value, &quote),
                    (_, true) => pick(&NEXT_READ_UNQUOTED, &value, ""),
                }
            }
        };
        let mut arguments = Map::new();
        arguments.insert(argument.to_owned(), Value::from(value.clone()));
        let observation = session.call(name, &arguments)?.text;
        messages.push(call_message(line, name, argument, &value));
        messages.push(json!({"role": "tool", "name": name, "content": observation}));
        observations.push(observation);
        if session.done() {
            break;
        }
    }
    if !session.done() || session.reward() != 1.0 {
        return Ok(None);
    }
    messages.push(json!({"role": "assistant", "content": pick(&CLOSING, "", "")}));
    Ok(Some(Demonstration {
        id: q.id.clone(),
        question: q.question.clone(),
        answers: q.answers.clone(),
        family: q.family,
        hops: q.hops,
        messages,
        tools: tools::schemas(),
        reward: session.reward(),
    }))
}

/// The demonstrations of `questions` (in their order), at most `options.max_per_family` per
/// family, with what was left out and why.
pub fn demonstrations(
    universe: &Universe,
    index: &Arc<SearchIndex>,
    options: &DemoOptions,
    questions: &[Question],
) -> crate::Result<(Vec<Demonstration>, DemoReport)> {
    let mut report = DemoReport::default();
    let mut per_family: BTreeMap<Family, usize> = BTreeMap::new();
    let mut out = Vec::new();
    for q in questions {
        let taken = per_family.entry(q.family).or_default();
        if options.max_per_family.is_some_and(|cap| *taken >= cap) {
            report.capped += 1;
            continue;
        }
        match demonstration(universe, index, options, q)? {
            Some(d) => {
                *taken += 1;
                out.push(d);
            }
            None => report.failed += 1,
        }
    }
    report.written = out.len();
    Ok((out, report))
}
