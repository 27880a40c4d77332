//! Supervised demonstrations of the tool-calling search environment, derived from each
//! question's proof: the conversation a policy would have if it read exactly the articles the
//! proof needs (`get_article` for each person, `search` for an attribute anchor) and answered the
//! gold set. Every demonstration is replayed through a [`ToolSession`] with the tools of
//! [`super::search`] (the observations in the rows are the session's own) and kept only when it
//! scores reward 1, so a row never teaches something the environment would not pay for.
//!
//! Rows are what TRL's `SFTTrainer` reads for tool calling: `messages` (OpenAI chat with
//! `tool_calls` and `tool` messages) and `tools` (the function schemas). The sentence before each
//! call is drawn from a few phrasings by a ChaCha stream keyed by the question id, so the rows do
//! not repeat one template, and are the same on every run.

use super::ToolSession;
use super::search::{self as tools, SYSTEM_PROMPT};
use crate::question::{Family, Question};
use crate::retrieval::SearchIndex;
use crate::search::oracle::proof_plan;
use crate::search::session::SearchSession;
use crate::search::{SearchEnv, SearchEnvConfig, SearchTask};
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
const NEXT_READ: [&str; 3] = [
    "Next, the article about {}.",
    "Now I read about {}, who came up in what I have read.",
    "{} is the next person to check.",
];
const ATTRIBUTE_SEARCH: [&str; 2] = [
    "First I search for \"{}\" to find who the question means.",
    "Let me find who matches \"{}\".",
];
const ANSWER: [&str; 3] = [
    "So the answer is {}.",
    "That answers it: {}.",
    "I have what I need; the answer is {}.",
];
const CLOSING: [&str; 3] = ["Done.", "I have answered.", "The answer is given."];

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
    let mut pick = |choices: &[&str], slot: &str| -> String {
        choices[rng.random_range(0..choices.len())].replace("{}", slot)
    };
    // (tool, argument name, argument, the sentence before the call)
    let mut calls: Vec<(&str, &str, String, String)> = Vec::new();
    for (text, _) in &plan.attribute_searches {
        calls.push((
            "search",
            "query",
            text.clone(),
            pick(&ATTRIBUTE_SEARCH, text),
        ));
    }
    for (i, &p) in plan.reads.iter().enumerate() {
        let name = universe.person(p).name.clone();
        let first = i == 0 && plan.attribute_searches.is_empty();
        let line = pick(if first { &FIRST_READ } else { &NEXT_READ }, &name);
        calls.push(("get_article", "title", name, line));
    }
    let answer = q.answers.join(", ");
    calls.push(("answer", "answer", answer.clone(), pick(&ANSWER, &answer)));
    let mut messages = vec![
        json!({"role": "system", "content": SYSTEM_PROMPT}),
        json!({"role": "user", "content": q.question}),
    ];
    for (name, argument, value, line) in calls {
        let mut arguments = Map::new();
        arguments.insert(argument.to_owned(), Value::from(value.clone()));
        let observation = session.call(name, &arguments)?.text;
        messages.push(call_message(line, name, argument, &value));
        messages.push(json!({"role": "tool", "name": name, "content": observation}));
        if session.done() {
            break;
        }
    }
    if !session.done() || session.reward() != 1.0 {
        return Ok(None);
    }
    messages.push(json!({"role": "assistant", "content": pick(&CLOSING, "")}));
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
