//! The tool-use environment: simulators (mapping consistency under concurrency, outputs
//! validation, persistence), the rule-based user, routing and protocols, and end-to-end runs of
//! scripted agents behind a local OpenAI-compatible HTTP server.

use super::cli;
use super::tool_rubric::trip_task;
use rulegym::env::Environment;
use rulegym::llm::openai::{OpenAiBackend, OpenAiConfig};
use rulegym::llm::{
    CacheMode, CachedBackend, ChatMessage, ChatRequest, ChatResponse, LlmBackend, LlmError, Role,
    ScriptedBackend, assistant_text,
};
use rulegym::tooluse::env::{
    Protocol, ToolEnv, ToolEnvConfig, openai_call, play_episode, trajectory_from_messages,
};
use rulegym::tooluse::mock_tools::{MappingConfig, MappingSimulator, SimError, canonical_json};
use rulegym::tooluse::rubric::{Event, RubricScorer, ScoreConfig};
use rulegym::tooluse::schema::Schema;
use rulegym::tooluse::task::CompiledTask;
use rulegym::tooluse::task::ValidateOptions;
use rulegym::tooluse::user::{DONT_KNOW, RuleUser, UserSimulator};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

pub(super) fn world() -> Arc<CompiledTask> {
    Arc::new(trip_task().compile(ValidateOptions::default()).unwrap())
}

pub(super) fn scorer() -> Arc<RubricScorer> {
    static S: OnceLock<Arc<RubricScorer>> = OnceLock::new();
    S.get_or_init(|| Arc::new(RubricScorer::new(ScoreConfig::default()).unwrap()))
        .clone()
}

/// A simulator backend that answers with a new flight list per call (so reuse is visible).
fn flight_backend() -> Arc<ScriptedBackend> {
    let n = Arc::new(AtomicU64::new(0));
    Arc::new(ScriptedBackend::new(move |_req| {
        let i = n.fetch_add(1, Ordering::SeqCst);
        Ok(assistant_text(
            &json!({"flights": [{"flight_id": "OS123", "price": 120 + i}]}).to_string(),
        ))
    }))
}

fn outputs_schema() -> Schema {
    Schema::compile(
        trip_task()
            .tool("search_flights")
            .unwrap()
            .outputs
            .as_ref()
            .unwrap(),
    )
    .unwrap()
}

#[test]
fn canonical_json_ignores_order_whitespace_and_integral_floats() {
    let a: Value = serde_json::from_str(r#"{"b": [1, 2.0], "a": {"y": 1, "x": "s p"}}"#).unwrap();
    let b: Value = serde_json::from_str("{\"a\":{\"x\":\"s p\",\n\"y\":1.0},\"b\":[1,2]}").unwrap();
    assert_eq!(canonical_json(&a), canonical_json(&b));
    assert_ne!(
        canonical_json(&a),
        canonical_json(&json!({"a": {"x": "sp", "y": 1}, "b": [1, 2]}))
    );
}

#[test]
fn sixteen_concurrent_rollouts_get_one_response_and_one_entry() {
    let dir = tempfile::tempdir().unwrap();
    let backend = flight_backend();
    let sim = Arc::new(
        MappingSimulator::new(
            "trip",
            Some(dir.path().join("trip.json")),
            Some(backend.clone() as Arc<dyn LlmBackend>),
            MappingConfig::default(),
        )
        .unwrap(),
    );
    let task = trip_task();
    let tool = task.tool("search_flights").unwrap().clone();
    let outputs = outputs_schema();
    let texts = [
        r#"{"destination": "Oslo", "date": "2024-06-03"}"#,
        r#"{"date":"2024-06-03","destination":"Oslo"}"#,
        "{\n  \"date\" : \"2024-06-03\",\n  \"destination\" : \"Oslo\"\n}",
    ];
    let responses: Vec<Value> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..16)
            .map(|i| {
                let sim = sim.clone();
                let (tool, outputs) = (&tool, &outputs);
                let args: Value = serde_json::from_str(texts[i % texts.len()]).unwrap();
                s.spawn(move || sim.lookup(tool, outputs, &args).unwrap())
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(
        responses.iter().all(|r| r == &responses[0]),
        "{responses:?}"
    );
    assert_eq!(backend.calls(), 1, "one generation for one canonical key");
    assert_eq!(sim.len(), 1);
    // Distinct keys from 16 threads: no entry is lost, in memory or on disk.
    std::thread::scope(|s| {
        for i in 0..16 {
            let sim = sim.clone();
            let (tool, outputs) = (&tool, &outputs);
            s.spawn(move || {
                let args = json!({"destination": format!("City{i}"), "date": "2024-06-03"});
                sim.lookup(tool, outputs, &args).unwrap()
            });
        }
    });
    assert_eq!(sim.len(), 17);
    // A second simulator on the same file (another process) replays every entry, no LLM needed.
    let replay = MappingSimulator::new(
        "trip",
        Some(dir.path().join("trip.json")),
        None,
        MappingConfig::default(),
    )
    .unwrap();
    assert_eq!(replay.entries(), sim.entries());
    let args = json!({"date": "2024-06-03", "destination": "Oslo"});
    assert_eq!(replay.lookup(&tool, &outputs, &args).unwrap(), responses[0]);
    let miss = replay.lookup(
        &tool,
        &outputs,
        &json!({"destination": "Rome", "date": "2024-06-03"}),
    );
    assert!(matches!(miss, Err(SimError::NoBackend(_))));
}

#[test]
fn two_simulators_on_one_file_lose_no_entries() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.json");
    let tool = trip_task().tool("search_flights").unwrap().clone();
    let outputs = outputs_schema();
    let make = || {
        Arc::new(
            MappingSimulator::new(
                "t",
                Some(path.clone()),
                Some(flight_backend() as Arc<dyn LlmBackend>),
                MappingConfig::default(),
            )
            .unwrap(),
        )
    };
    let (a, b) = (make(), make());
    std::thread::scope(|s| {
        for i in 0..8 {
            for sim in [&a, &b] {
                let sim = sim.clone();
                let (tool, outputs) = (&tool, &outputs);
                s.spawn(move || {
                    sim.lookup(
                        tool,
                        outputs,
                        &json!({"destination": format!("C{i}"), "date": "2024-06-03"}),
                    )
                    .unwrap()
                });
            }
        }
    });
    let disk = MappingSimulator::new("t", Some(path), None, MappingConfig::default()).unwrap();
    assert_eq!(disk.len(), 8);
    // Each key has one response everywhere (the first recorded wins).
    for e in disk.entries() {
        let args: Value = serde_json::from_str(&e.args).unwrap();
        assert_eq!(a.lookup(&tool, &outputs, &args).unwrap(), e.response);
        assert_eq!(b.lookup(&tool, &outputs, &args).unwrap(), e.response);
    }
}

#[test]
fn responses_violating_outputs_are_rejected_with_a_reason() {
    let tool = trip_task().tool("search_flights").unwrap().clone();
    let outputs = outputs_schema();
    for (answer, why) in [
        (
            r#"{"flights": [{"flight_id": "X"}]}"#,
            "missing required property \"price\"",
        ),
        ("Sure! Here are some flights: OS123", "not a JSON value"),
        (r#"{"flights": "none"}"#, "expected array"),
    ] {
        let sim = MappingSimulator::new(
            "t",
            None,
            Some(Arc::new(ScriptedBackend::constant(answer)) as Arc<dyn LlmBackend>),
            MappingConfig::default(),
        )
        .unwrap();
        let err = sim
            .lookup(
                &tool,
                &outputs,
                &json!({"destination": "Oslo", "date": "2024-06-03"}),
            )
            .unwrap_err();
        match &err {
            SimError::InvalidResponse {
                reason, attempts, ..
            } => {
                assert!(reason.contains(why), "{reason}");
                assert_eq!(*attempts, 3);
            }
            other => panic!("{other}"),
        }
        assert!(sim.is_empty(), "an invalid response is never recorded");
    }
    // A fenced JSON answer is accepted; the map is bounded.
    let sim = MappingSimulator::new(
        "t",
        None,
        Some(
            Arc::new(ScriptedBackend::constant("```json\n{\"flights\": []}\n```"))
                as Arc<dyn LlmBackend>,
        ),
        MappingConfig {
            capacity: 2,
            ..MappingConfig::default()
        },
    )
    .unwrap();
    for i in 0..2 {
        sim.lookup(
            &tool,
            &outputs,
            &json!({"destination": format!("C{i}"), "date": "x"}),
        )
        .unwrap();
    }
    let full = sim.lookup(&tool, &outputs, &json!({"destination": "C9", "date": "x"}));
    assert!(matches!(full, Err(SimError::Full { capacity: 2, .. })));
}

/// The system prompt of a simulator request.
fn system_of(req: &ChatRequest) -> &str {
    req.messages[0].content_str()
}

#[test]
fn equivalence_check_is_part_of_the_one_request_that_answers_a_miss() {
    let tool = trip_task().tool("search_flights").unwrap().clone();
    let outputs = outputs_schema();
    let backend = Arc::new(ScriptedBackend::new(move |req: &ChatRequest| {
        let system = system_of(req);
        let format = req
            .response_schema
            .as_ref()
            .expect("the answer's schema is sent");
        let offered = format.schema.to_string().contains("same_as");
        assert_eq!(
            offered,
            system.contains("same_as"),
            "the schema offers what the prompt does"
        );
        if system.contains("[1] search_flights") && system.contains("same_as") {
            Ok(assistant_text(r#"{"same_as": 1}"#))
        } else {
            Ok(assistant_text(
                r#"{"response": {"flights": [{"flight_id": "OS123", "price": 120}]}}"#,
            ))
        }
    }));
    let sim = MappingSimulator::new(
        "t",
        None,
        Some(backend.clone() as Arc<dyn LlmBackend>),
        MappingConfig::default(),
    )
    .unwrap();
    let a = sim
        .lookup(
            &tool,
            &outputs,
            &json!({"destination": "Oslo", "date": "2024-06-03"}),
        )
        .unwrap();
    let b = sim
        .lookup(
            &tool,
            &outputs,
            &json!({"destination": "oslo", "date": "2024-06-03"}),
        )
        .unwrap();
    assert_eq!(a, b);
    assert_eq!(
        backend.calls(),
        2,
        "one request per miss, the check included"
    );
    let entries = sim.entries();
    assert_eq!(entries.len(), 2);
    let matched = entries.iter().find(|e| e.args.contains("oslo")).unwrap();
    assert_eq!(
        matched.same_as.as_deref(),
        Some(r#"{"date":"2024-06-03","destination":"Oslo"}"#),
        "the match is recorded"
    );
    // With the check off, the prompt offers no `same_as` and a new response is generated.
    let plain = MappingSimulator::new(
        "t",
        None,
        Some(backend.clone() as Arc<dyn LlmBackend>),
        MappingConfig {
            semantic_equivalence: false,
            ..MappingConfig::default()
        },
    )
    .unwrap();
    plain
        .lookup(
            &tool,
            &outputs,
            &json!({"destination": "Oslo", "date": "x"}),
        )
        .unwrap();
    plain
        .lookup(
            &tool,
            &outputs,
            &json!({"destination": "oslo", "date": "x"}),
        )
        .unwrap();
    assert!(plain.entries().iter().all(|e| e.same_as.is_none()));
}

#[test]
fn the_whole_mapping_is_shown_within_the_character_budget() {
    let task = trip_task();
    let tool = task.tool("search_flights").unwrap().clone();
    let outputs = outputs_schema();
    let seen = Arc::new(std::sync::Mutex::new(String::new()));
    let record = seen.clone();
    let backend = Arc::new(ScriptedBackend::new(move |req: &ChatRequest| {
        *record.lock().unwrap() = system_of(req).to_owned();
        Ok(assistant_text(r#"{"flights": []}"#))
    }));
    let make = |context_chars| {
        let sim = MappingSimulator::new(
            "t",
            None,
            Some(backend.clone() as Arc<dyn LlmBackend>),
            MappingConfig {
                context_chars,
                ..MappingConfig::default()
            },
        )
        .unwrap();
        for i in 0..30 {
            let args = json!({"destination": format!("City{i:02}"), "date": "d"});
            sim.insert("search_flights", &args, json!({"flights": []}))
                .unwrap();
        }
        sim.insert(
            "book_flight",
            &json!({"flight_id": "X"}),
            json!({"ok": true}),
        )
        .unwrap();
        sim
    };
    make(16_000)
        .lookup(
            &tool,
            &outputs,
            &json!({"destination": "Nowhere", "date": "d"}),
        )
        .unwrap();
    let prompt = seen.lock().unwrap().clone();
    assert!(
        prompt.contains("[30] search_flights"),
        "more than 8 earlier calls: {prompt}"
    );
    assert!(
        prompt.contains("[31] book_flight"),
        "other tools' calls too"
    );
    make(300)
        .lookup(
            &tool,
            &outputs,
            &json!({"destination": "Nowhere", "date": "d"}),
        )
        .unwrap();
    let prompt = seen.lock().unwrap().clone();
    assert!(prompt.contains("[1] search_flights") && !prompt.contains("[30]"));
}

#[test]
fn an_invalid_match_is_retried_with_the_reason_then_becomes_an_error() {
    let tool = trip_task().tool("search_flights").unwrap().clone();
    let outputs = outputs_schema();
    let backend = Arc::new(ScriptedBackend::new(|req: &ChatRequest| {
        // Always name the book_flight entry, which is not a call of this tool.
        assert!(
            req.messages.len() == 2
                || req
                    .messages
                    .last()
                    .unwrap()
                    .content_str()
                    .contains("not of")
        );
        Ok(assistant_text(r#"{"same_as": 1}"#))
    }));
    let sim = MappingSimulator::new(
        "t",
        None,
        Some(backend.clone() as Arc<dyn LlmBackend>),
        MappingConfig::default(),
    )
    .unwrap();
    sim.insert(
        "book_flight",
        &json!({"flight_id": "X"}),
        json!({"ok": true}),
    )
    .unwrap();
    let err = sim
        .lookup(
            &tool,
            &outputs,
            &json!({"destination": "Oslo", "date": "d"}),
        )
        .unwrap_err();
    assert!(
        matches!(&err, SimError::InvalidResponse { attempts: 3, reason, .. } if reason.contains("not of `search_flights`")),
        "{err}"
    );
    assert_eq!(backend.calls(), 3);
    assert_eq!(sim.len(), 1, "nothing recorded for the failed call");
}

#[test]
fn rule_user_reveals_one_asked_slot_per_turn() {
    let mut user = RuleUser::new(&trip_task());
    assert_eq!(
        user.reply("Which tool should I use?").unwrap().text,
        DONT_KNOW
    );
    assert_eq!(user.reply("What is your budget?").unwrap().text, DONT_KNOW);
    let r = user
        .reply("Where are you going, and on what date?")
        .unwrap();
    assert_eq!(
        (r.text.as_str(), r.revealed.clone()),
        ("Oslo.", vec!["destination".to_owned()])
    );
    let r = user
        .reply("Where are you going, and on what date?")
        .unwrap();
    assert_eq!(
        (r.text.as_str(), r.revealed.clone()),
        ("2024-06-03.", vec!["date".to_owned()])
    );
    let r = user.reply("Sorry, where again?").unwrap();
    assert_eq!(r.text, "Oslo.");
    assert!(r.revealed.is_empty());
}

fn env(protocol: Protocol) -> ToolEnv {
    env_with(ToolEnvConfig {
        max_turns: 8,
        protocol,
        ..ToolEnvConfig::default()
    })
}

const HERMES_GOOD: &[&str] = &[
    "Where are you flying to?",
    "<question>What date do you leave?</question>",
    "Let me search.\n<tool_call>\n{\"name\": \"search_flights\", \"arguments\": {\"destination\": \"Oslo\", \"date\": \"2024-06-03\"}}\n</tool_call>",
    "<tool_call>{\"name\": \"book_flight\", \"arguments\": {\"flight_id\": \"OS123\", \"date\": \"2024-06-03\"}}</tool_call>",
    "<answer>Your flight OS123 is booked.</answer>",
];

pub(super) fn env_with(config: ToolEnvConfig) -> ToolEnv {
    let w = world();
    let sim = Arc::new(
        MappingSimulator::new(
            "trip",
            None,
            Some(flight_backend() as Arc<dyn LlmBackend>),
            MappingConfig::default(),
        )
        .unwrap(),
    );
    ToolEnv::new(
        w.clone(),
        Some(sim),
        Box::new(RuleUser::new(&w.task)),
        scorer(),
        config,
    )
}

/// The synthagent preset: Hermes protocol, 16 turns, 13,000 response tokens per episode; the
/// good episode fits, and a budget it exceeds ends it with reason `response_budget`.
#[test]
fn synthagent_preset_and_response_budget() {
    use rulegym::env::tokens::{ApproxTokenCounter, TokenCounter};
    use rulegym::preset::{EnvPreset, Shipped, Stage};
    let config = EnvPreset::named("synthagent")
        .unwrap()
        .tooluse(Stage::Train)
        .unwrap();
    assert_eq!(
        (
            config.max_turns,
            config.protocol,
            config.max_response_tokens
        ),
        (16, Protocol::Hermes, Some(13000))
    );
    let mut e = env_with(config.clone());
    let mut last = None;
    for turn in HERMES_GOOD {
        last = Some(e.step(turn).unwrap());
    }
    let s = last.unwrap();
    assert!(s.done);
    assert_eq!(
        (s.reward, s.metadata["reason"].as_str()),
        (1.0, Some("answer"))
    );
    let used: usize = HERMES_GOOD
        .iter()
        .map(|t| ApproxTokenCounter.count(t))
        .sum();
    assert_eq!(s.metadata["response_tokens"], used);
    // A budget smaller than the first three turns: the third ends the episode, unscored turns
    // are not acted on.
    let first_two: usize = HERMES_GOOD[..2]
        .iter()
        .map(|t| ApproxTokenCounter.count(t))
        .sum();
    let mut e = env_with(ToolEnvConfig {
        max_response_tokens: Some(first_two as u32),
        ..config
    });
    assert!(!e.step(HERMES_GOOD[0]).unwrap().done);
    assert!(!e.step(HERMES_GOOD[1]).unwrap().done);
    let s = e.step(HERMES_GOOD[2]).unwrap();
    assert!(s.done);
    assert_eq!(s.metadata["reason"], "response_budget");
    assert!(s.reward < 1.0);
    // Out of range: an error naming the knob.
    let bad = ToolEnvConfig {
        max_response_tokens: Some(0),
        ..ToolEnvConfig::default()
    };
    assert!(
        bad.validate()
            .unwrap_err()
            .to_string()
            .contains("max_response_tokens")
    );
}

#[test]
fn hermes_episode_routes_turns_and_scores_one() {
    let mut e = env(Protocol::Hermes);
    let prompt = e.reset().unwrap();
    assert!(
        prompt[0].content_str().contains("<tools>")
            && prompt[0].content_str().contains("search_flights")
    );
    assert_eq!(
        prompt[1].content_str(),
        "Book me a flight for my next trip."
    );
    let s = e.step(HERMES_GOOD[0]).unwrap();
    assert_eq!(s.observations[0].content_str(), "Oslo.");
    assert_eq!(s.env_spans[0].end, "Oslo.".len());
    e.step(HERMES_GOOD[1]).unwrap();
    let s = e.step(HERMES_GOOD[2]).unwrap();
    assert!(
        s.observations[0]
            .content_str()
            .starts_with("<tool_response>\n{\"flights\""),
        "{:?}",
        s.observations
    );
    let s = e.step(HERMES_GOOD[3]).unwrap();
    assert!(s.observations[0].content_str().contains("\"ok\":true"));
    let s = e.step(HERMES_GOOD[4]).unwrap();
    assert!(s.done);
    assert_eq!(s.reward, 1.0, "{:#?}", s.metadata["rubric"]);
    assert_eq!(s.metadata["reason"], "answer");
    assert!(e.step("again").is_err(), "no step after the end");
    // The saved conversation scores the same through the message reader.
    let t = trajectory_from_messages(&world(), e.transcript()).unwrap();
    let w = world();
    let r = scorer().score(&w.program, &t, None).unwrap();
    assert_eq!(r, e.result().unwrap().clone());
}

#[test]
fn errors_become_tool_error_facts_and_markers_end_episodes() {
    let mut e = env(Protocol::Hermes);
    e.reset().unwrap();
    let s = e
        .step("<tool_call>{\"name\": \"teleport\", \"arguments\": {}}</tool_call>")
        .unwrap();
    assert!(
        s.observations[0]
            .content_str()
            .contains("unknown tool \\\"teleport\\\""),
        "{:?}",
        s.observations
    );
    let s = e.step("<tool_call>{\"name\": \"search_flights\", \"arguments\": {\"destination\": 5}}</tool_call>").unwrap();
    assert!(
        s.observations[0]
            .content_str()
            .contains("invalid arguments"),
        "{:?}",
        s.observations
    );
    let s = e
        .step("<tool_call>{\"name\": \"search_flights\", \"arguments\": {oops</tool_call>")
        .unwrap();
    assert!(s.observations[0].content_str().contains("not valid JSON"));
    let s = e.step("<tool_call>{\"name\": \"get_booking\", \"arguments\": {\"flight_id\": \"NOPE\"}}</tool_call>").unwrap();
    assert!(
        s.observations[0]
            .content_str()
            .contains("no bookings record")
    );
    let errors: Vec<_> = e
        .trajectory()
        .events
        .into_iter()
        .filter(|ev| matches!(ev, Event::ToolError { .. }))
        .collect();
    assert_eq!(errors.len(), 4);
    let s = e.step("I cannot do this. ###TRANSFER_TO_HUMAN").unwrap();
    assert!(s.done);
    assert_eq!(s.metadata["reason"], "transfer_to_human");
    assert!(s.reward < 1.0);
    // Turn cap.
    let mut e = env(Protocol::Hermes);
    e.reset().unwrap();
    // The task's max_turns (12) overrides the environment's (8).
    for _ in 0..11 {
        assert!(!e.step("Hmm?").unwrap().done);
    }
    let last = e.step("Hmm?").unwrap();
    assert!(last.done);
    assert_eq!(last.metadata["reason"], "turn_cap");
}

#[path = "../support/openai_stub.rs"]
mod openai_stub;
use openai_stub::serve;

fn turn_of(request: &Value) -> usize {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "assistant")
        .count()
}

fn say(text: &str) -> Value {
    json!({"role": "assistant", "content": text})
}

fn call(turn: usize, name: &str, args: Value) -> Value {
    serde_json::to_value(ChatMessage {
        role: Role::Assistant,
        content: None,
        tool_calls: vec![openai_call(&format!("call_{turn}"), name, &args)],
        tool_call_id: None,
    })
    .unwrap()
}

fn good_policy(r: &Value) -> Value {
    assert_eq!(r["tools"].as_array().unwrap().len(), 4, "tools are sent");
    assert_eq!(r["seed"], 7);
    let t = turn_of(r);
    match t {
        0 => say("Where are you going?"),
        1 => say("Which date do you want to fly?"),
        2 => call(
            t,
            "search_flights",
            json!({"destination": "Oslo", "date": "2024-06-03"}),
        ),
        3 => call(
            t,
            "book_flight",
            json!({"flight_id": "OS123", "date": "2024-06-03"}),
        ),
        _ => say("<answer>Your flight OS123 is booked.</answer>"),
    }
}

fn forbidden_policy(r: &Value) -> Value {
    let t = turn_of(r);
    match t {
        4 => call(t, "refund_booking", json!({"flight_id": "OS123"})),
        5 => say("<answer>Your flight OS123 is booked.</answer>"),
        _ => good_policy(r),
    }
}

fn never_asks_policy(r: &Value) -> Value {
    let t = turn_of(r);
    match t {
        0 => call(
            t,
            "search_flights",
            json!({"destination": "Oslo", "date": "2024-06-10"}),
        ),
        _ => say("<answer>I booked it for you.</answer>"),
    }
}

fn run_policy(
    policy: fn(&Value) -> Value,
    fail_first: u64,
) -> (rulegym::tooluse::env::Episode, u64) {
    let (endpoint, count) = serve(policy, fail_first);
    let agent = OpenAiBackend::new(OpenAiConfig {
        endpoint,
        backoff: Duration::from_millis(10),
        timeout: Duration::from_secs(10),
        ..OpenAiConfig::default()
    })
    .unwrap();
    let mut e = env(Protocol::OpenAi);
    let episode = play_episode(&mut e, &agent, "scripted", Some(0.0), Some(7)).unwrap();
    (episode, count.load(Ordering::SeqCst))
}

#[test]
fn end_to_end_good_policy_reaches_one_through_retries() {
    let (episode, requests) = run_policy(good_policy, 2);
    assert_eq!(episode.reward, 1.0, "{:#?}", episode.result);
    assert_eq!(requests, 5 + 2, "two 500s were retried");
    assert!(
        episode
            .messages
            .iter()
            .any(|m| m.role == Role::Tool && m.tool_call_id.as_deref() == Some("call_2"))
    );
    // Scoring the saved messages (as `rulegym tools score` does) gives the same result.
    let t = trajectory_from_messages(&world(), &episode.messages).unwrap();
    let w = world();
    assert_eq!(
        scorer().score(&w.program, &t, None).unwrap(),
        episode.result
    );
}

#[test]
fn end_to_end_forbidden_tool_scores_zero() {
    let (episode, _) = run_policy(forbidden_policy, 0);
    assert_eq!(episode.reward, 0.0);
    assert!(episode.result.forbidden_violated);
}

#[test]
fn end_to_end_never_asking_loses_the_interaction_share() {
    let (episode, _) = run_policy(never_asks_policy, 0);
    let r = &episode.result;
    assert!(!r.forbidden_violated);
    assert_eq!(r.interaction_fraction, 0.0);
    assert!(r.subgoal_fraction > 0.0);
    assert_eq!(episode.reward, r.subgoal_fraction / 2.0);
    assert!(episode.reward < 1.0);
}

#[test]
fn client_gives_up_with_the_status_after_retries() {
    let (endpoint, count) = serve(|_| json!({}), u64::MAX);
    let agent = OpenAiBackend::new(OpenAiConfig {
        endpoint,
        backoff: Duration::from_millis(5),
        max_retries: 2,
        ..OpenAiConfig::default()
    })
    .unwrap();
    let err = agent
        .chat(&ChatRequest::new(
            "m",
            vec![ChatMessage::text(Role::User, "hi")],
        ))
        .unwrap_err();
    assert!(
        matches!(&err, LlmError::GaveUp { attempts: 3, last, .. } if last.contains("HTTP 500")),
        "{err}"
    );
    assert_eq!(count.load(Ordering::SeqCst), 3);
    assert!(
        OpenAiBackend::new(OpenAiConfig {
            endpoint: "ftp://x".into(),
            ..OpenAiConfig::default()
        })
        .is_err()
    );
}

#[test]
fn record_replay_cache_replays_bit_exactly_offline() {
    let dir = tempfile::tempdir().unwrap();
    let live: Arc<dyn LlmBackend> = flight_backend();
    let rec = CachedBackend::new(Some(live), dir.path(), CacheMode::Record);
    let req = |s: &str| ChatRequest::new("m", vec![ChatMessage::text(Role::User, s)]);
    let a: ChatResponse = rec.chat(&req("a")).unwrap();
    let b = rec.chat(&req("b")).unwrap();
    assert_eq!(rec.chat(&req("a")).unwrap(), a, "a hit is reused");
    let offline = CachedBackend::new(None, dir.path(), CacheMode::Record);
    assert_eq!(offline.chat(&req("a")).unwrap(), a);
    assert_eq!(offline.chat(&req("b")).unwrap(), b);
    assert!(matches!(
        offline.chat(&req("c")),
        Err(LlmError::NotRecorded(_))
    ));
}

/// The trip task as `dir/tasks.jsonl`.
fn trip_tasks(dir: &std::path::Path) -> std::path::PathBuf {
    let tasks = dir.join("tasks.jsonl");
    let task: Value = serde_json::from_str(include_str!("../fixtures/tools/trip.json")).unwrap();
    std::fs::write(&tasks, format!("{task}\n")).unwrap();
    tasks
}

/// `rulegym tools score --tasks TASKS`.
fn tools_score(tasks: &std::path::Path) -> std::process::Command {
    let mut cmd = cli::rulegym();
    cmd.args(["tools", "score", "--tasks"]).arg(tasks);
    cmd
}

/// `messages` without the `book_flight` call and its result: two sub-goals are lost.
fn without_booking(messages: &[ChatMessage]) -> Vec<ChatMessage> {
    let i = messages
        .iter()
        .position(|m| {
            m.tool_calls
                .iter()
                .any(|c| c.function.name == "book_flight")
        })
        .unwrap();
    [&messages[..i], &messages[i + 2..]].concat()
}

#[test]
fn cli_scores_a_saved_conversation() {
    let (episode, _) = run_policy(good_policy, 0);
    let dir = tempfile::tempdir().unwrap();
    let traj = dir.path().join("traj.json");
    std::fs::write(&traj, serde_json::to_string(&episode.messages).unwrap()).unwrap();
    let tasks = trip_tasks(dir.path());
    let out = cli::run_ok(
        tools_score(&tasks)
            .args(["--id", "trip-oslo-1", "--trajectory"])
            .arg(&traj)
            .arg("--json"),
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["reward"], 1.0);
    assert_eq!(v["result"]["items"].as_array().unwrap().len(), 8);
    assert_eq!(v["result"]["items"][6]["id"], "asked_destination");
    assert_eq!(v["result"]["items"][6]["step"], 1);
    // --json prints what the command printed before it had a summary: the id, the reward, the
    // rubric's result and the facts derived from the conversation, pretty-printed.
    let w = world();
    let facts = trajectory_from_messages(&w, &episode.messages).unwrap();
    let result = scorer().score(&w.program, &facts, None).unwrap();
    let before =
        json!({"id": "trip-oslo-1", "reward": result.reward, "result": result, "facts": facts});
    assert_eq!(v, before);
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        format!("{}\n", serde_json::to_string_pretty(&before).unwrap())
    );
}

#[test]
fn cli_score_prints_the_reward_then_each_item() {
    let (episode, _) = run_policy(good_policy, 0);
    let dir = tempfile::tempdir().unwrap();
    let tasks = trip_tasks(dir.path());
    let traj = dir.path().join("traj.json");
    std::fs::write(&traj, serde_json::to_string(&episode.messages).unwrap()).unwrap();
    let score = |traj: &std::path::Path, extra: &[&str]| {
        let out = cli::run_ok(
            tools_score(&tasks)
                .args(["--id", "trip-oslo-1", "--trajectory"])
                .arg(traj)
                .args(extra),
        );
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(
        score(&traj, &[]),
        "reward 1.0 (paper)\n\
         satisfied      forbidden    no_refund: refund_booking must NOT be used: the user never wants a refund\n\
         satisfied      forbidden    no_assumed_date: book_flight must NOT be called before the user gave the date\n\
         satisfied      sub-goal     searched_oslo: searched flights to Oslo\n\
         satisfied      sub-goal     booked: a flight is booked on the right date\n\
         satisfied      sub-goal     state_ok: the final state is the expected one\n\
         satisfied      sub-goal     confirmed: told the user the booking is done\n\
         satisfied      interaction  asked_destination: asked where the user flies\n\
         satisfied      interaction  asked_date: asked the departure date\n"
    );
    // Without the booking: sub-goals 1/2, interactions 1, so peer-weighted is
    // 0.7 x 0.5 + 0.3 x 1 = 0.6499999999999999 in the JSON and 0.65 in the summary.
    let cut = dir.path().join("cut.json");
    let messages = without_booking(&episode.messages);
    std::fs::write(&cut, serde_json::to_string(&messages).unwrap()).unwrap();
    let summary = score(&cut, &["--variant", "peer-weighted"]);
    let lines: Vec<&str> = summary.lines().collect();
    assert_eq!(lines[0], "reward 0.65 (peer-weighted)");
    assert_eq!(lines.len(), 1 + 8, "{summary}");
    assert_eq!(
        lines[4],
        "not satisfied  sub-goal     booked: a flight is booked on the right date"
    );
    assert_eq!(
        lines[3],
        "satisfied      sub-goal     searched_oslo: searched flights to Oslo"
    );
    let v: Value =
        serde_json::from_str(&score(&cut, &["--variant", "peer-weighted", "--json"])).unwrap();
    assert_eq!(v["reward"], 0.7 * 0.5 + 0.3 * 1.0);
    assert_ne!(v["reward"], 0.65);
    // A forbidden behaviour that occurred is "violated".
    let (forbidden, _) = run_policy(forbidden_policy, 0);
    std::fs::write(&traj, serde_json::to_string(&forbidden.messages).unwrap()).unwrap();
    let summary = score(&traj, &[]);
    assert!(
        summary.starts_with("reward 0.0 (paper)\nviolated       forbidden    no_refund: "),
        "{summary}"
    );
}

#[test]
fn cli_scores_a_file_of_trajectories_and_reports_the_lines_that_fail() {
    let (good, _) = run_policy(good_policy, 0);
    let (forbidden, _) = run_policy(forbidden_policy, 0);
    let dir = tempfile::tempdir().unwrap();
    let tasks = trip_tasks(dir.path());
    let file = dir.path().join("trajectories.jsonl");
    let line =
        |messages: &[ChatMessage], id: &str| json!({"id": id, "messages": messages}).to_string();
    let lines = [
        line(&good.messages, "trip-oslo-1"),
        "{\"id\": \"trip-oslo-1\", \"messages\": [".to_owned(),
        line(&good.messages, "trip-nowhere"),
        line(&forbidden.messages, "trip-oslo-1"),
        line(&without_booking(&good.messages), "trip-oslo-1"),
    ];
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let run = |extra: &[&str]| {
        let out = cli::run(
            tools_score(&tasks)
                .arg("--trajectories")
                .arg(&file)
                .args(extra),
        );
        assert_eq!(out.status.code(), Some(1), "a line failed");
        let stderr = String::from_utf8(out.stderr).unwrap();
        let name = file.display().to_string();
        assert!(
            stderr.contains(&format!("{name} line 2: not a trajectory")),
            "{stderr}"
        );
        assert!(
            stderr.contains(&format!("{name} line 3: no task with id \"trip-nowhere\"")),
            "{stderr}"
        );
        assert!(stderr.contains("2 of 5 lines failed"), "{stderr}");
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(
        run(&[]),
        "trip-oslo-1 1.0\n\
         trip-oslo-1 0.0\n\
         trip-oslo-1 0.75\n\
         scored 3 of 5, mean reward 0.5833 (paper); 2 failed\n"
    );
    let scored: Vec<Value> = run(&["--json"])
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let rewards: Vec<&Value> = scored.iter().map(|v| &v["reward"]).collect();
    assert_eq!(rewards, [1.0, 0.0, 0.75]);
    assert!(scored.iter().all(|v| v["id"] == "trip-oslo-1"
        && v["result"]["items"].is_array()
        && v["facts"].is_object()));
    // --trajectories or --id with --trajectory, not both, not neither.
    let traj = dir.path().join("traj.json");
    std::fs::write(&traj, serde_json::to_string(&good.messages).unwrap()).unwrap();
    for args in [
        vec!["--id", "trip-oslo-1"],
        vec![],
        vec![
            "--id",
            "trip-oslo-1",
            "--trajectories",
            file.to_str().unwrap(),
        ],
        vec![
            "--trajectory",
            traj.to_str().unwrap(),
            "--trajectories",
            file.to_str().unwrap(),
        ],
    ] {
        let out = cli::run(tools_score(&tasks).args(&args));
        assert_eq!(out.status.code(), Some(2), "{args:?} is a usage error");
    }
}

fn agent_and_simulator(r: &Value) -> Value {
    let first = r["messages"][0]["content"].as_str().unwrap_or_default();
    if first.starts_with("You simulate the tool") {
        return say(r#"{"flights": [{"flight_id": "OS123", "price": 120}]}"#);
    }
    good_policy(r)
}

#[test]
fn cli_plays_tasks_and_replays_them_offline() {
    let (endpoint, count) = serve(agent_and_simulator, 0);
    let dir = tempfile::tempdir().unwrap();
    let tasks = dir.path().join("tasks.jsonl");
    let task: Value = serde_json::from_str(include_str!("../fixtures/tools/trip.json")).unwrap();
    std::fs::write(&tasks, format!("{task}\n")).unwrap();
    let out = dir.path().join("out");
    let run = |extra: &[&str]| {
        cli::run_ok(
            cli::rulegym()
                .args(["tools", "play", "--tasks"])
                .arg(&tasks)
                .args([
                    "--endpoint",
                    &endpoint,
                    "--model",
                    "scripted",
                    "--seed",
                    "7",
                    "--out",
                ])
                .arg(&out)
                .args(extra),
        );
        std::fs::read_to_string(out.join("trajectories.jsonl")).unwrap()
    };
    let first = run(&[]);
    let line: Value = serde_json::from_str(first.lines().next().unwrap()).unwrap();
    assert_eq!(line["reward"], 1.0, "{line:#}");
    assert_eq!(line["id"], "trip-oslo-1");
    let calls = count.load(Ordering::SeqCst);
    assert_eq!(calls, 5 + 1, "5 agent turns and 1 simulated tool response");
    // Offline replay from the recorded cache: identical output, no request sent.
    let second = run(&["--replay"]);
    assert_eq!(first, second);
    assert_eq!(count.load(Ordering::SeqCst), calls);
    // `tools score` reads play's trajectories.jsonl as it is.
    let scored = cli::run_ok(
        tools_score(&tasks)
            .arg("--trajectories")
            .arg(out.join("trajectories.jsonl")),
    );
    assert_eq!(
        String::from_utf8(scored.stdout).unwrap(),
        "trip-oslo-1 1.0\nscored 1, mean reward 1.0 (paper)\n"
    );
}

/// The agent, the simulator and a judge that says every item passed except `asked_date`.
fn agent_simulator_and_judge(r: &Value) -> Value {
    let first = r["messages"][0]["content"].as_str().unwrap_or_default();
    if first.starts_with("You grade an assistant's episode") {
        let ids: Vec<String> = first
            .lines()
            .filter_map(|l| l.strip_prefix("- "))
            .filter_map(|l| l.split_once(" (").map(|(id, _)| id.to_owned()))
            .filter(|id| !id.contains(':'))
            .collect();
        let verdicts: serde_json::Map<String, Value> = ids
            .into_iter()
            .map(|id| {
                let forbidden = id.starts_with("no_");
                let holds = !forbidden && id != "asked_date";
                (id, Value::Bool(holds))
            })
            .collect();
        return say(&Value::Object(verdicts).to_string());
    }
    agent_and_simulator(r)
}

#[test]
fn cli_reports_where_rules_and_judge_disagree_and_replays_it() {
    let (endpoint, count) = serve(agent_simulator_and_judge, 0);
    let dir = tempfile::tempdir().unwrap();
    let tasks = dir.path().join("tasks.jsonl");
    let task: Value = serde_json::from_str(include_str!("../fixtures/tools/trip.json")).unwrap();
    std::fs::write(&tasks, format!("{task}\n")).unwrap();
    let play = dir.path().join("play");
    cli::run_ok(
        cli::rulegym()
            .args(["tools", "play", "--tasks"])
            .arg(&tasks)
            .args([
                "--endpoint",
                &endpoint,
                "--model",
                "scripted",
                "--seed",
                "7",
                "--out",
            ])
            .arg(&play),
    );
    let agree = dir.path().join("agree");
    let run = |extra: &[&str]| {
        let out = cli::run_ok(
            cli::rulegym()
                .args(["tools", "agree", "--tasks"])
                .arg(&tasks)
                .arg("--trajectories")
                .arg(play.join("trajectories.jsonl"))
                .args(["--judge-model", "j", "--out"])
                .arg(&agree)
                .args(extra),
        );
        (
            String::from_utf8(out.stdout).unwrap(),
            std::fs::read(agree.join("agreement.json")).unwrap(),
        )
    };
    let (table, report) = run(&["--judge-endpoint", &endpoint]);
    let v: Value = serde_json::from_slice(&report).unwrap();
    assert_eq!(v["trajectories"], 1);
    assert_eq!(v["judge_failures"], 0);
    let items = task["rubric"]["forbidden"].as_array().unwrap().len()
        + task["rubric"]["subgoals"].as_array().unwrap().len()
        + task["rubric"]["interactions"].as_array().unwrap().len();
    let m = &v["items"];
    let total: u64 = [
        "both_passed",
        "rules_passed_judge_failed",
        "rules_failed_judge_passed",
        "both_failed",
    ]
    .iter()
    .map(|k| m[k].as_u64().unwrap())
    .sum();
    assert_eq!(total as usize, items);
    assert_eq!(m["rules_passed_judge_failed"], 1, "asked_date: {v:#}");
    assert_eq!(v["rewards"][0]["rules"], 1.0);
    assert!(v["rewards"][0]["judge"].as_f64().unwrap() < 1.0);
    assert!(table.contains("| all items |"), "{table}");
    // The judge's answers are recorded: an offline rerun gives the same bytes.
    let calls = count.load(Ordering::SeqCst);
    let (_, again) = run(&["--replay-only"]);
    assert_eq!(again, report);
    assert_eq!(count.load(Ordering::SeqCst), calls);
}
