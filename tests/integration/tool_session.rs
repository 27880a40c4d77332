//! The tool-call session itself (`toolcall`), protocol-free: both kinds (a scored search
//! question, a tool-use task) and browsing, every tool, every fault, the episode's end, and
//! rewards equal to `rulegym score`'s and the rubric's; the served `World`'s picking and listing.
//! The protocol suites (MCP, OpenEnv, TRL, verifiers) run the same session through real clients.

use super::cli::{rulegym, run_ok};
use super::tool_env::{env_with, scorer, world};
use super::tool_rubric::trip_task;
use rulegym::env::Environment;
use rulegym::llm::{ChatMessage, Role};
use rulegym::reward::score;
use rulegym::search::session::SearchSession;
use rulegym::search::{SearchEnv, SearchEnvConfig, SearchTask};
use rulegym::toolcall::limits::{MAX_ARGS_BYTES, MAX_TEXT_CHARS};
use rulegym::toolcall::{
    FixedEpisode, ResetRequest, SearchWorld, SessionKind, TaskWorld, ToolFault, ToolSession, World,
    WorldError, WorldKind,
};
use rulegym::tooluse::env::{ToolEnvConfig, openai_call, trajectory_from_messages};
use rulegym::{Error, Question};
use serde_json::{Map, Value, json};

use crate::search_env::dataset;

fn args(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => unreachable!(),
    }
}

fn search_session(q: &Question, max_turns: usize) -> ToolSession {
    let d = dataset();
    let config = SearchEnvConfig {
        max_turns,
        ..SearchEnvConfig::default()
    };
    let task = SearchTask {
        question: q.question.clone(),
        answers: q.answers.clone(),
        gold_docs: Vec::new(),
    };
    let env = SearchEnv::new(d.index.clone(), config, task).unwrap();
    let session = SearchSession::new(env, d.index.clone(), q.clone()).unwrap();
    ToolSession::search(session, d.index.clone())
}

fn names(s: &ToolSession) -> Vec<String> {
    s.tools().into_iter().map(|t| t.name).collect()
}

/// A fault's message, after checking that it took no turn and changed nothing.
fn fault(s: &mut ToolSession, name: &str, a: Value) -> ToolFault {
    let (turns, done, reward) = (s.turns(), s.done(), s.reward());
    let f = s.call(name, &args(a)).unwrap_err();
    assert_eq!((s.turns(), s.done(), s.reward()), (turns, done, reward));
    f
}

#[test]
fn search_session_every_tool_every_fault_and_the_end() {
    let d = dataset();
    let q = &d.questions[0];
    let mut s = search_session(q, 5);
    assert_eq!(s.kind(), SessionKind::Search);
    assert_eq!(names(&s), ["answer", "get_article", "search"]);
    for t in s.tools() {
        let (field, spec) = t.input_schema["properties"]
            .as_object()
            .unwrap()
            .iter()
            .next()
            .unwrap();
        assert_eq!(t.input_schema["required"], json!([field]));
        assert_eq!(t.input_schema["additionalProperties"], false);
        assert_eq!(spec["maxLength"], MAX_TEXT_CHARS);
    }
    assert_eq!(s.id(), Some(q.id.as_str()));
    assert!(
        s.instructions()
            .ends_with(&format!("Question: {}", q.question))
    );
    let name = &d.universe.people[0].name;
    // search: the passages without Search-R1's wrapper, and the articles as data.
    let found = s
        .call("search", &args(json!({"query": format!("{name} hobby")})))
        .unwrap();
    assert!(found.text.starts_with("Doc 1(Title: "), "{}", found.text);
    assert!(!found.text.contains("<information>") && !found.is_error);
    assert_eq!(
        found.data["results"].as_array().unwrap().len(),
        SearchEnvConfig::default().top_k
    );
    // get_article: the article; a missing title is an error result naming the nearest titles.
    let article = s
        .call("get_article", &args(json!({"title": name})))
        .unwrap();
    assert_eq!(article.text, d.index.article(name).unwrap().contents);
    assert_eq!(article.data["title"], json!(name));
    let missing = s
        .call("get_article", &args(json!({"title": "Nobody Here"})))
        .unwrap();
    assert!(missing.is_error);
    assert!(
        missing
            .text
            .starts_with("No article is titled 'Nobody Here'. Nearest titles: "),
        "{}",
        missing.text
    );
    assert_eq!(s.turns(), 3);
    // Faults: no turn, nothing changes.
    let f = fault(&mut s, "browse", json!({"query": "x"}));
    assert!(
        matches!(&f, ToolFault::UnknownTool { name, known } if name == "browse" && known == "answer, get_article, search"),
        "{f}"
    );
    assert_eq!(f.kind(), "tool_not_found");
    let f = fault(&mut s, "search", json!({}));
    assert_eq!(f.to_string(), "search: missing argument \"query\"");
    assert_eq!(f.kind(), "invalid_args");
    let f = fault(&mut s, "search", json!({"query": 3}));
    assert_eq!(f.to_string(), "search: query must be a string, got 3");
    let f = fault(&mut s, "search", json!({"query": "a", "k": 2}));
    assert_eq!(
        f.to_string(),
        "search: unknown argument \"k\" (the tool takes query)"
    );
    let f = fault(&mut s, "search", json!({"query": "  "}));
    assert_eq!(f.to_string(), "search: query is empty");
    let f = fault(&mut s, "answer", json!({"answer": "x</answer>"}));
    assert!(matches!(f, ToolFault::ProtocolText { .. }), "{f}");
    let f = fault(
        &mut s,
        "get_article",
        json!({"title": "x".repeat(MAX_TEXT_CHARS + 1)}),
    );
    assert!(matches!(f, ToolFault::TooLong { .. }), "{f}");
    // answer: the environment's reward (`rulegym score`'s set F1); the episode ends.
    let wrong = format!("{name}, Nobody Here");
    let done = s.call("answer", &args(json!({"answer": wrong}))).unwrap();
    let f1 = score(&wrong, &q.answers, SearchEnvConfig::default().score_mode).f1;
    assert!(done.done && s.done());
    assert_eq!((done.reward, s.reward()), (f1, f1));
    assert_eq!(done.data["f1"], json!(f1));
    assert!(
        done.text.starts_with("Episode over. Score (F1): "),
        "{}",
        done.text
    );
    assert_eq!(s.state()["reward"], json!(f1));
    // After the end every tool is refused before its arguments are read.
    for t in ["answer", "get_article", "search"] {
        let f = fault(&mut s, t, json!({"no": "arguments"}));
        assert_eq!(f, ToolFault::EpisodeOver { reward: f1 });
        assert_eq!(f.kind(), "execution_error");
    }
    assert_eq!(s.turns(), 4);
    // The turn cap: the call using the last turn without an answer ends the episode at 0.
    let mut capped = search_session(q, 2);
    capped
        .call("get_article", &args(json!({"title": name})))
        .unwrap();
    let last = capped
        .call("get_article", &args(json!({"title": name})))
        .unwrap();
    assert!(last.done && capped.done());
    assert_eq!(
        last.text,
        "Episode over (turn cap reached without an answer). Score: 0."
    );
    assert_eq!(capped.reward(), 0.0);
    // The gold answer scores 1.
    let mut gold = search_session(q, 4);
    let out = gold
        .call("answer", &args(json!({"answer": q.answers.join(", ")})))
        .unwrap();
    assert_eq!((out.reward, gold.reward()), (1.0, 1.0));
}

/// The reward a session gives an answer is `rulegym score`'s F1 for it.
#[test]
fn search_rewards_equal_rulegym_score() {
    let d = dataset();
    let q = d.questions.iter().find(|q| q.answers.len() >= 2).unwrap();
    let answers = [
        q.answers.join(", "),
        q.answers[0].clone(),
        format!("{}, {}", q.answers[0], d.universe.people[1].name),
        String::new(),
    ];
    let dir = tempfile::tempdir().unwrap();
    let pairs = dir.path().join("pairs.jsonl");
    // Lines with an `id` get it back; lines without one get none.
    let lines: Vec<String> = (answers.iter().enumerate())
        .map(|(i, a)| match i {
            0 => json!({"answers": q.answers, "prediction": a}).to_string(),
            _ => json!({"answers": q.answers, "prediction": a, "id": format!("p{i}")}).to_string(),
        })
        .collect();
    std::fs::write(&pairs, lines.join("\n") + "\n").unwrap();
    let out = run_ok(rulegym().arg("score").arg("--pairs").arg(&pairs));
    // Compared as the printed text: serde_json's default float parser is not exact, Rust's
    // shortest round-trip printing is.
    let stdout = String::from_utf8(out.stdout).unwrap();
    let scored: Vec<&str> = stdout.lines().collect();
    assert_eq!(scored.len(), answers.len());
    for (i, (answer, report)) in answers.iter().zip(&scored).enumerate() {
        let id: serde_json::Value =
            serde_json::from_str::<serde_json::Value>(report).unwrap()["id"].clone();
        assert_eq!(
            id,
            if i == 0 {
                json!(null)
            } else {
                json!(format!("p{i}"))
            }
        );
        let mut s = search_session(q, 4);
        s.call("answer", &args(json!({ "answer": answer })))
            .unwrap();
        let f1 = format!("\"f1\":{}", serde_json::to_string(&s.reward()).unwrap());
        assert!(report.contains(&f1), "{answer:?}: {report} lacks {f1}");
    }

    // Malformed lines are answered with an error line each (output stays aligned with the
    // input), the rest are scored, and the exit says how many failed.
    let mixed = format!(
        "{}\nnot json\n\n{{\"answers\": [\"x\"]}}\n{}\n",
        lines[1], lines[2]
    );
    std::fs::write(&pairs, mixed).unwrap();
    let out = crate::cli::run(rulegym().arg("score").arg("--pairs").arg(&pairs));
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let replies: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(replies.len(), 4, "{stdout}");
    assert_eq!(replies[0]["id"], "p1");
    assert_eq!(
        (replies[1]["line"].clone(), replies[2]["line"].clone()),
        (json!(2), json!(4))
    );
    assert!(
        replies[2]["error"].as_str().unwrap().contains("prediction"),
        "{stdout}"
    );
    assert_eq!(replies[3]["id"], "p2");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("2 of 4 lines were malformed"), "{stderr}");
}

fn config() -> ToolEnvConfig {
    ToolEnvConfig {
        max_turns: 8,
        ..ToolEnvConfig::default()
    }
}

fn task_session() -> ToolSession {
    ToolSession::task(env_with(config()), "trip").unwrap()
}

#[test]
fn task_session_every_tool_every_fault_and_the_rubric_reward() {
    let mut s = task_session();
    assert_eq!(s.kind(), SessionKind::Task);
    let tools = names(&s);
    assert_eq!(tools[tools.len() - 2..], ["ask_user", "finish"]);
    assert!(tools.contains(&"search_flights".to_owned()));
    assert_eq!(s.opening()["task_id"], "trip");
    assert!(
        s.instructions()
            .contains("The user's request: Book me a flight for my next trip.")
    );
    // Faults.
    let f = fault(&mut s, "teleport", json!({}));
    assert!(matches!(f, ToolFault::UnknownTool { .. }), "{f}");
    assert!(f.to_string().contains("ask_user, finish"), "{f}");
    let f = fault(&mut s, "ask_user", json!({"question": " "}));
    assert_eq!(f.to_string(), "ask_user: question is empty");
    let f = fault(
        &mut s,
        "ask_user",
        json!({"question": "<answer>done</answer>"}),
    );
    assert!(matches!(f, ToolFault::ProtocolText { .. }), "{f}");
    let f = fault(&mut s, "finish", json!({}));
    assert_eq!(f.to_string(), "finish: missing argument \"summary\"");
    let big = json!({"destination": "x".repeat(MAX_ARGS_BYTES), "date": "2024-06-03"});
    let f = fault(&mut s, "search_flights", big);
    assert!(
        matches!(f, ToolFault::TooLong { max, .. } if max == MAX_ARGS_BYTES),
        "{f}"
    );
    assert_eq!(s.turns(), 0);
    // The good episode: the user answers the questions, the tools run, `finish` scores 1.
    let where_to = s
        .call(
            "ask_user",
            &args(json!({"question": "Where are you going?"})),
        )
        .unwrap();
    assert_eq!(where_to.text, "Oslo.");
    s.call("ask_user", &args(json!({"question": "Which date?"})))
        .unwrap();
    let flights = s
        .call(
            "search_flights",
            &args(json!({"destination": "Oslo", "date": "2024-06-03"})),
        )
        .unwrap();
    assert!(
        !flights.is_error && flights.text.contains("OS123"),
        "{}",
        flights.text
    );
    let bad = s
        .call("search_flights", &args(json!({"destination": 3})))
        .unwrap();
    assert!(bad.is_error, "a task tool's error response: {}", bad.text);
    s.call(
        "book_flight",
        &args(json!({"flight_id": "OS123", "date": "2024-06-03"})),
    )
    .unwrap();
    let done = s
        .call(
            "finish",
            &args(json!({"summary": "Your flight OS123 is booked."})),
        )
        .unwrap();
    assert!(done.done && s.done());
    assert!(done.text.ends_with("Score: 1."), "{}", done.text);
    assert_eq!(done.data["score"], 1.0);
    let f = fault(&mut s, "finish", json!({}));
    assert_eq!(f, ToolFault::EpisodeOver { reward: 1.0 });
    // The reward is the rubric's: the same messages sent to a bare ToolEnv end at the same
    // result, and the saved transcript scores the same through the rubric scorer.
    let w = world();
    let mut env = env_with(config());
    env.reset().unwrap();
    let say = |t: &str| ChatMessage::text(Role::Assistant, t);
    let call = |id: &str, name: &str, a: Value| ChatMessage {
        role: Role::Assistant,
        content: None,
        tool_calls: vec![openai_call(id, name, &a)],
        tool_call_id: None,
    };
    for m in [
        say("<question>Where are you going?</question>"),
        say("<question>Which date?</question>"),
        call(
            "call_1",
            "search_flights",
            json!({"destination": "Oslo", "date": "2024-06-03"}),
        ),
        call("call_2", "search_flights", json!({"destination": 3})),
        call(
            "call_3",
            "book_flight",
            json!({"flight_id": "OS123", "date": "2024-06-03"}),
        ),
        say("<answer>Your flight OS123 is booked.</answer>"),
    ] {
        env.step_message(&m).unwrap();
    }
    assert_eq!(env.result().unwrap().reward, s.reward());
    let t = trajectory_from_messages(&w, env.transcript()).unwrap();
    let r = scorer().score(&w.program, &t, None).unwrap();
    assert_eq!(r.reward, s.reward());
}

#[test]
fn a_task_tool_named_like_a_built_in_one_is_refused() {
    let mut task = trip_task();
    task.tools[0].name = "finish".into();
    let text = serde_json::to_string(&task).unwrap();
    let file = tempfile::NamedTempFile::with_suffix(".json").unwrap();
    std::fs::write(file.path(), text).unwrap();
    let e = TaskWorld::load(file.path(), Default::default(), ToolEnvConfig::default())
        .err()
        .unwrap();
    assert!(
        matches!(&e, Error::World(WorldError::ToolNameClash { tool, .. }) if tool == "finish"),
        "{e}"
    );
}

fn search_world() -> World {
    let d = dataset();
    let people = d.universe.people.iter().map(|p| p.name.clone()).collect();
    let w = SearchWorld::new(
        d.index.clone(),
        d.questions.clone(),
        people,
        SearchEnvConfig::default(),
    );
    World::new("rulegym_search", WorldKind::Search(w))
}

#[test]
fn browsing_has_k_and_list_people_and_never_ends() {
    let d = dataset();
    let world = search_world();
    let mut s = world.browse().unwrap();
    assert_eq!(s.kind(), SessionKind::Browse);
    assert_eq!(names(&s), ["search", "get_article", "list_people"]);
    let name = &d.universe.people[0].name;
    let two = s
        .call("search", &args(json!({"query": name, "k": 2})))
        .unwrap();
    assert_eq!(two.data["results"].as_array().unwrap().len(), 2);
    let f = fault(&mut s, "search", json!({"query": name, "k": 0}));
    assert_eq!(f.to_string(), "k must be in 1..=20, got 0");
    let f = fault(&mut s, "search", json!({"query": name, "k": "three"}));
    assert_eq!(
        f.to_string(),
        "search: k must be a whole number, got \"three\""
    );
    let page = s.call("list_people", &args(json!({"limit": 5}))).unwrap();
    assert_eq!(page.text.lines().count(), 5);
    assert_eq!(page.data["next_offset"], 5);
    let f = fault(&mut s, "list_people", json!({"limit": 201}));
    assert_eq!(f.to_string(), "limit must be in 1..=200, got 201");
    let f = fault(&mut s, "answer", json!({"answer": "x"}));
    assert!(matches!(f, ToolFault::UnknownTool { .. }), "{f}");
    for _ in 0..30 {
        s.call("get_article", &args(json!({"title": name})))
            .unwrap();
    }
    assert!(!s.done());
    assert_eq!(s.reward(), 0.0);
}

#[test]
fn the_world_picks_by_id_split_index_seed_and_in_turn() {
    let d = dataset();
    let world = search_world();
    let req = |v: Value| -> ResetRequest { serde_json::from_value(v).unwrap() };
    let id = &d.questions[3].id;
    let s = world.session(&req(json!({"question_id": id}))).unwrap();
    assert_eq!(s.id(), Some(id.as_str()));
    let train: Vec<&Question> = d
        .questions
        .iter()
        .filter(|q| q.split.as_str() == "train")
        .collect();
    let s = world
        .session(&req(json!({"split": "train", "index": 2})))
        .unwrap();
    assert_eq!(s.id(), Some(train[2].id.as_str()));
    let a = world.session(&req(json!({"seed": 9}))).unwrap();
    let b = world.session(&req(json!({"seed": 9}))).unwrap();
    assert_eq!(a.id(), b.id(), "a seed picks the same question");
    let first = world.session(&ResetRequest::default()).unwrap();
    let second = world.session(&ResetRequest::default()).unwrap();
    assert_eq!(first.id(), Some(train[0].id.as_str()));
    assert_eq!(second.id(), Some(train[1].id.as_str()));
    let err = |v: Value| world.session(&req(v)).err().unwrap().to_string();
    assert!(err(json!({"question_id": "nope"})).contains("no question or task with id"));
    assert!(err(json!({"task_id": "trip"})).contains("name a question_id"));
    assert!(err(json!({"split": "test"})).contains("no split \"test\""));
    assert!(err(json!({"split": "train", "index": 100000})).contains("out of range"));
    // The listing holds no gold answers.
    let listed = world.task_range("train", None, None).unwrap();
    assert_eq!(listed.len(), train.len());
    assert!(listed.iter().all(|r| r.get("answers").is_none()));
    // A single-episode server: a question, or browsing.
    assert_eq!(world.fixed(None).unwrap(), FixedEpisode::Browse);
    let fixed = world.fixed(Some(id)).unwrap();
    assert_eq!(world.start(&fixed).unwrap().id(), Some(id.as_str()));
    assert!(world.fixed(Some("nope")).is_err());
}

#[test]
fn a_task_file_of_several_tasks_needs_an_id_for_a_fixed_episode() {
    let mut second = trip_task();
    second.id = "trip-2".into();
    let file = tempfile::NamedTempFile::with_suffix(".json").unwrap();
    std::fs::write(
        file.path(),
        serde_json::to_string(&[trip_task(), second]).unwrap(),
    )
    .unwrap();
    let w = TaskWorld::load(file.path(), Default::default(), ToolEnvConfig::default()).unwrap();
    let world = World::new("rulegym_tools", WorldKind::Tasks(w));
    let e = world.fixed(None).err().unwrap();
    assert!(
        matches!(e, Error::World(WorldError::AmbiguousTask(2))),
        "{e}"
    );
    let fixed = world.fixed(Some("trip-2")).unwrap();
    let s = world.start(&fixed).unwrap();
    assert_eq!(s.id(), Some("trip-2"));
    assert!(matches!(
        world.browse().err().unwrap(),
        Error::World(WorldError::NoBrowsing)
    ));
    let e = world
        .session(&serde_json::from_value(json!({"question_id": "x"})).unwrap())
        .err()
        .unwrap();
    assert!(e.to_string().contains("name a task_id"), "{e}");
}
