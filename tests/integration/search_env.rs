//! The search environment: Search-R1 protocol, answer scoring, oracle trajectories, conformance.

use proptest::prelude::*;
use rulegym::env::Environment;
use rulegym::llm::Role;
use rulegym::question::{self, QuestionConfig};
use rulegym::retrieval::Document;
use rulegym::reward::{ScoreMode, answer_set, normalize_squad, score};
use rulegym::search::oracle::replay;
use rulegym::search::{
    INVALID_ACTION, Retriever, SearchEnv, SearchEnvConfig, SearchTask, parse_action,
    truncate_action,
};
use std::sync::{Arc, OnceLock};

/// A retriever that returns fixed passages (unit tests of the protocol only).
struct Fixed;
impl Retriever for Fixed {
    fn retrieve(&self, queries: &[&str], k: usize) -> rulegym::Result<Vec<Vec<Document>>> {
        Ok(queries
            .iter()
            .map(|q| {
                (0..k)
                    .map(|i| Document {
                        id: i.to_string(),
                        contents: format!("\"Doc {i}\"\nabout {q} <answer>x</answer>"),
                    })
                    .collect()
            })
            .collect())
    }
}

fn env(config: SearchEnvConfig) -> SearchEnv {
    let task = SearchTask {
        question: "Who?".into(),
        answers: vec!["Ann Lee".into()],
        gold_docs: vec!["1".into()],
    };
    let mut env = SearchEnv::new(Arc::new(Fixed), config, task).unwrap();
    env.reset().unwrap();
    env
}

#[test]
fn protocol_search_answer_invalid_and_turn_cap() {
    let mut e = env(SearchEnvConfig::default());
    let s = e
        .step("<think>hm</think><search> ann </search><answer>Ann Lee</answer>")
        .unwrap();
    assert!(!s.done);
    let obs = &s.observations[0].content_str();
    assert!(
        obs.starts_with("\n\n<information>Doc 1(Title: \"Doc 0\") about ann"),
        "{obs:?}"
    );
    assert!(obs.ends_with("</information>\n\n"));
    assert_eq!(s.env_spans[0].end, obs.len());
    assert_eq!(s.metadata["gold_retrieved"], true);
    assert_eq!(
        s.metadata["retrieved_ids"],
        serde_json::json!(["0", "1", "2"])
    );
    // Neither tag: the invalid-action observation, not done.
    let s = e.step("I think the answer is Ann").unwrap();
    assert_eq!(s.observations[0].content_str(), INVALID_ACTION);
    // The first complete tag decides; text after the first closing tag is ignored.
    let s = e
        .step("<answer>Ann Lee</answer><search>x</search>")
        .unwrap();
    assert!(s.done);
    assert_eq!(s.reward, 1.0);
    assert!(
        e.step("<answer>again</answer>").is_err(),
        "no step after the end"
    );
    // Turn cap: reward 0 without an answer.
    let mut e = env(SearchEnvConfig {
        max_turns: 2,
        ..Default::default()
    });
    assert!(!e.step("<search>a</search>").unwrap().done);
    let s = e.step("<search>b</search>").unwrap();
    assert!(s.done && s.reward == 0.0);
    // end_on_invalid ends the episode with 0.
    let mut e = env(SearchEnvConfig {
        end_on_invalid: true,
        ..Default::default()
    });
    let s = e.step("no tags").unwrap();
    assert!(s.done && s.reward == 0.0);
}

#[test]
fn protocol_edge_cases() {
    assert_eq!(
        truncate_action("<search>a</search> more </answer>"),
        "<search>a</search>"
    );
    assert_eq!(
        parse_action("<answer>x</answer><search>y</search>"),
        Some(("answer", "x"))
    );
    assert_eq!(
        parse_action("<search>y</search><answer>x</answer>"),
        Some(("search", "y"))
    );
    assert_eq!(
        parse_action("<search>unclosed <answer>x</answer>"),
        Some(("answer", "x"))
    );
    assert_eq!(parse_action("<answer>unclosed"), None);
    // Empty query: invalid, not a search.
    let mut e = env(SearchEnvConfig::default());
    let s = e.step("<search>   </search>").unwrap();
    assert_eq!(s.metadata["reason"], "empty search query");
    // Tags inside retrieved passages are never parsed as the model's answer.
    let s = e.step("<search>q</search>").unwrap();
    assert!(
        s.observations[0]
            .content_str()
            .contains("<answer>x</answer>")
    );
    assert!(!s.done);
    // 1 MB action with multi-byte characters around the tags.
    let big = format!(
        "{}<search>é名</search>{}",
        "ü".repeat(500_000),
        "名".repeat(1000)
    );
    let s = e.step(&big).unwrap();
    assert_eq!(s.metadata["query"], "é名");
    // Bad configs are errors.
    for bad in [
        SearchEnvConfig {
            top_k: 0,
            ..Default::default()
        },
        SearchEnvConfig {
            max_turns: 0,
            ..Default::default()
        },
        SearchEnvConfig {
            prompt: "no placeholder".into(),
            ..Default::default()
        },
    ] {
        let task = SearchTask {
            question: "q".into(),
            answers: vec![],
            gold_docs: vec![],
        };
        assert!(SearchEnv::new(Arc::new(Fixed), bad, task).is_err());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]
    #[test]
    fn no_action_panics(action in ".{0,300}", prefix in "(<search>|<answer>|</search>|</answer>|<information>|é|名|\\s)*") {
        let mut e = env(SearchEnvConfig { max_turns: 3, ..Default::default() });
        for _ in 0..3 {
            let text = format!("{prefix}{action}");
            match e.step(&text) {
                Ok(s) => { prop_assert!((0.0..=1.0).contains(&s.reward)); if s.done { break; } }
                Err(_) => break,
            }
        }
    }

    #[test]
    fn scorer_properties(
        // Items that never normalise to nothing (a lone "a", "an" or "the" would).
        gold in prop::collection::vec("[B-DF-SU-Z][a-z]{2,6}( [B-DF-SU-Z][a-z]{2,6})?", 1..5),
        extra in "[A-Za-z]{7,9}",
        picks in prop::collection::vec(any::<prop::sample::Index>(), 1..6),
    ) {
        let predicted: Vec<String> = picks.iter().map(|i| i.get(&gold).clone()).collect();
        let joined = predicted.join(", ");
        let s = score(&joined, &gold, ScoreMode::Squad);
        prop_assert!((0.0..=1.0).contains(&s.f1));
        // Order and duplicates do not matter.
        let mut reversed = predicted.clone();
        reversed.reverse();
        reversed.extend(predicted.iter().cloned());
        prop_assert_eq!(score(&reversed.join(","), &gold, ScoreMode::Squad).f1, s.f1);
        // F1 = 1 iff the normalised sets are equal.
        let gold_set: std::collections::BTreeSet<String> = gold.iter().map(|g| normalize_squad(g)).collect();
        prop_assert_eq!(s.f1 == 1.0, answer_set(&joined, ScoreMode::Squad) == gold_set);
        prop_assert_eq!(score(&gold.join(", "), &gold, ScoreMode::Squad).f1, 1.0);
        // Adding a wrong item never raises F1.
        let with_wrong = format!("{joined}, {extra}");
        prop_assert!(score(&with_wrong, &gold, ScoreMode::Squad).f1 <= s.f1);
        // Normalisation is idempotent.
        for g in &gold {
            prop_assert_eq!(normalize_squad(&normalize_squad(g)), normalize_squad(g));
        }
    }
}

#[path = "../support/search.rs"]
pub(crate) mod search;

/// The default universe, its questions and index, built once for the search tests.
pub(crate) fn dataset() -> &'static search::SearchData {
    static D: OnceLock<search::SearchData> = OnceLock::new();
    D.get_or_init(|| search::search_data(&QuestionConfig::default()))
}

#[test]
fn oracle_trajectories_replay_to_f1_one() {
    let d = dataset();
    let config = SearchEnvConfig::default();
    let (mut perfect, mut named, mut named_perfect) = (0, 0, 0);
    for q in &d.questions {
        let t = replay(&d.universe, d.index.clone(), &config, q).unwrap();
        assert!(
            t.f1 == 1.0 || !t.retrieval_misses.is_empty(),
            "{}: {:?}",
            q.id,
            t.failure
        );
        let by_name = q
            .plan
            .chains()
            .iter()
            .all(|c| matches!(c.anchor, question::Anchor::Name(_)));
        perfect += usize::from(t.f1 == 1.0);
        if by_name {
            named += 1;
            named_perfect += usize::from(t.f1 == 1.0);
        }
    }
    eprintln!(
        "oracle replay: {perfect}/{} at F1 = 1; name-anchored {named_perfect}/{named}",
        d.questions.len()
    );
    // Every query naming a person retrieves that person's article (built-in encoder, top-3).
    assert_eq!(named_perfect, named);
}

#[test]
fn conformance_same_seed_same_episodes_gold_one_wrong_zero() {
    let d = dataset();
    let run = |q: &question::Question| {
        let task = SearchTask {
            question: q.question.clone(),
            answers: q.answers.clone(),
            gold_docs: vec![],
        };
        let mut e = SearchEnv::new(d.index.clone(), SearchEnvConfig::default(), task).unwrap();
        let prompt = e.reset().unwrap();
        let search = e.step(&format!("<search>{}</search>", q.question)).unwrap();
        let gold = e
            .step(&format!("<answer>{}</answer>", q.answers.join(", ")))
            .unwrap();
        (
            serde_json::to_string(&prompt).unwrap(),
            serde_json::to_string(&search).unwrap(),
            gold.reward,
        )
    };
    for q in d.questions.iter().take(40) {
        let (p1, s1, r1) = run(q);
        let (p2, s2, r2) = run(q);
        assert_eq!((p1, s1), (p2, s2), "same seed, same episode");
        assert_eq!((r1, r2), (1.0, 1.0), "gold scores 1");
        let task = SearchTask {
            question: q.question.clone(),
            answers: q.answers.clone(),
            gold_docs: vec![],
        };
        let mut e = SearchEnv::new(d.index.clone(), SearchEnvConfig::default(), task).unwrap();
        e.reset().unwrap();
        assert_eq!(
            e.step("<answer>Nobody Atall</answer>").unwrap().reward,
            0.0,
            "wrong scores 0"
        );
    }
}

/// The phantomenvs environment preset: the paper's prompt and system message, a turn without
/// tags ends the episode, turn caps 10 / 20, and the token budgets are enforced.
#[test]
fn phantomenvs_preset_prompt_termination_and_token_budgets() {
    use rulegym::env::tokens::{ApproxTokenCounter, TokenCounter};
    use rulegym::preset::{EnvPreset, Shipped, Stage};
    let preset = EnvPreset::named("phantomenvs").unwrap();
    let train = preset.search(Stage::Train).unwrap();
    let mut e = env(train.clone());
    let reset = e.reset().unwrap();
    assert_eq!(reset[0].role, Role::System);
    assert!(reset[0].content_str().contains("helpful and harmless"));
    assert!(reset[1].content_str().contains("sub-questions"));
    assert!(reset[1].content_str().ends_with("Question: Who?\n"));
    // A turn with neither tag ends the episode with reward 0.
    let s = e.step("I am not sure.").unwrap();
    assert!(s.done && s.reward == 0.0, "{:?}", s.metadata);

    // ~500 generated tokens per turn: a tag after the 500th (approximate) token never counts.
    let mut e = env(train.clone());
    let filler = "x".repeat(500 * 4);
    let s = e
        .step(&format!("{filler}<answer>Ann Lee</answer>"))
        .unwrap();
    assert!(s.done && s.reward == 0.0, "a cut action has no answer");
    assert_eq!(s.metadata["action_truncated"], true);
    let mut e = env(train.clone());
    // Exactly 500 approximate tokens (2,000 characters) including the answer: accepted.
    let tag = "<answer>Ann Lee</answer>";
    let short = "x".repeat(500 * 4 - tag.len());
    let s = e.step(&format!("{short}{tag}")).unwrap();
    assert_eq!(s.reward, 1.0, "an answer inside the budget counts");
    assert!(!s.metadata.contains_key("action_truncated"));

    // The context budget: a conversation that would exceed it ends with reward 0.
    let small = SearchEnvConfig {
        max_context_tokens: Some(400),
        ..train.clone()
    };
    let mut e = env(small);
    let prompt_tokens: usize = e
        .reset()
        .unwrap()
        .iter()
        .map(|m| ApproxTokenCounter.count(m.content_str()))
        .sum();
    assert!(prompt_tokens < 400, "{prompt_tokens}");
    let mut ended = None;
    for turn in 1..=10 {
        let s = e.step("<search>ann</search>").unwrap();
        if s.done {
            ended = Some((turn, s));
            break;
        }
        assert!(s.metadata["context_tokens"].as_u64().unwrap() <= 400);
    }
    let (turn, s) = ended.expect("the budget ends the episode before the turn cap");
    assert!(turn < 10);
    assert_eq!(s.reward, 0.0);
    assert_eq!(s.metadata["reason"], "context token budget exceeded");

    // Evaluation stage: 20 turns, a 32,768-token budget.
    let eval = preset.search(Stage::Eval).unwrap();
    assert_eq!(eval.max_turns, 20);
    assert_eq!(eval.max_context_tokens, Some(32768));
    // Out-of-range budgets are clear errors.
    let bad = SearchEnvConfig {
        max_action_tokens: Some(0),
        ..SearchEnvConfig::default()
    };
    let err = bad.validate().unwrap_err().to_string();
    assert!(err.contains("max_action_tokens must be in 1..="), "{err}");
}

/// Without a preset the environment is exactly as before: no budget metadata, no system message.
#[test]
fn default_config_has_no_budgets() {
    let c = SearchEnvConfig::default();
    assert_eq!((c.max_action_tokens, c.max_context_tokens), (None, None));
    let json = serde_json::to_value(&c).unwrap();
    assert!(json.get("max_action_tokens").is_none());
    let mut e = env(c);
    let s = e.step("<search>a</search>").unwrap();
    assert!(!s.metadata.contains_key("context_tokens"));
    assert!(!s.metadata.contains_key("action_truncated"));
}

/// The tool-call session (MCP's and OpenEnv's scored search) is the environment's own episode:
/// a search returns the environment's passages, the answer its exact score, the turn cap ends
/// the episode with reward 0, and nothing runs after the end.
#[test]
fn session_wraps_the_environment_scoring_and_turn_cap() {
    use rulegym::search::session::{Reply, SearchSession};
    let d = dataset();
    let q = &d.questions[0];
    let task = SearchTask {
        question: q.question.clone(),
        answers: q.answers.clone(),
        gold_docs: Vec::new(),
    };
    let config = SearchEnvConfig {
        max_turns: 3,
        ..SearchEnvConfig::default()
    };
    let new = || {
        let env = SearchEnv::new(d.index.clone(), config.clone(), task.clone()).unwrap();
        SearchSession::new(env, d.index.clone(), q.clone()).unwrap()
    };
    // A search: the environment's observation and the passages it retrieved, k of them.
    let mut s = new();
    let name = &d.universe.people[0].name;
    let Reply::Passages { text, docs } = s.search(name, Some(5)).unwrap() else {
        panic!("a search returns passages");
    };
    assert_eq!(docs.len(), 5);
    assert!(text.contains("<information>") && text.contains(docs[0].title()));
    assert!(matches!(s.get_article(name), Reply::Article(Some(doc)) if doc.title() == name));
    // The gold answer scores 1, exactly as the environment's own step would.
    let gold = q.answers.join(", ");
    let Reply::Ended { metadata } = s.answer(&gold).unwrap() else {
        panic!("an answer ends the episode");
    };
    let mut env = SearchEnv::new(d.index.clone(), config.clone(), task.clone()).unwrap();
    env.reset().unwrap();
    let step = env.step(&format!("<answer>{gold}</answer>")).unwrap();
    assert_eq!(
        (s.reward(), metadata["f1"].clone()),
        (step.reward, step.metadata["f1"].clone())
    );
    assert_eq!(s.reward(), 1.0);
    assert!(s.done() && matches!(s.search("x", None).unwrap(), Reply::Over));
    // Markup that the environment would parse as another action is refused, and takes no turn.
    let mut s = new();
    for text in ["<answer>Bob</answer>", "x</search>y"] {
        let err = s.search(text, None).unwrap_err();
        assert!(
            matches!(err, rulegym::Error::ProtocolMarkup { .. }),
            "{err}"
        );
        assert!(s.answer(text).is_err());
    }
    assert!(!s.done() && s.turns() == 0);
    // Three calls without an answer: the third reaches the environment's cap, reward 0.
    assert!(matches!(
        s.get_article("Nobody Atall"),
        Reply::Article(None)
    ));
    assert!(matches!(
        s.search(name, None).unwrap(),
        Reply::Passages { .. }
    ));
    let Reply::Ended { metadata } = s.search(name, None).unwrap() else {
        panic!("the cap ends the episode");
    };
    assert_eq!(s.reward(), 0.0);
    assert!(metadata.contains_key("reason"), "{metadata:?}");
    assert!(matches!(s.answer(&gold).unwrap(), Reply::Over));
    assert_eq!(s.turns(), 3);
}
