//! The search tools' TRL schemas (`toolcall::search`), the SFT demonstrations
//! (`toolcall::demo`, `rulegym oracle --format sft`) and the curriculum's draws. The session
//! itself is tested in `tool_session.rs`.

use crate::cli::{generate_small, rulegym, run, run_ok};
use rulegym::curriculum::{Curriculum, CurriculumConfig, Level};
use rulegym::search::oracle::proof_plan;
use rulegym::search::session::SearchSession;
use rulegym::search::{SearchEnv, SearchEnvConfig, SearchTask};
use rulegym::toolcall::ToolSession;
use rulegym::toolcall::demo::{DemoOptions, demonstration, demonstrations};
use rulegym::toolcall::search::{self as tools, TOOLS};
use rulegym::{Question, SearchIndex};
use serde_json::{Map, Value, json};
use std::sync::Arc;

use crate::search_env::dataset;

fn session(index: &Arc<SearchIndex>, q: &Question, max_turns: usize) -> ToolSession {
    let task = SearchTask {
        question: q.question.clone(),
        answers: q.answers.clone(),
        gold_docs: Vec::new(),
    };
    let config = SearchEnvConfig {
        max_turns,
        ..SearchEnvConfig::default()
    };
    let env = SearchEnv::new(index.clone(), config, task).unwrap();
    ToolSession::search(
        SearchSession::of_task(env, index.clone()).unwrap(),
        index.clone(),
    )
}

fn args(pairs: &[(&str, &str)]) -> Map<String, Value> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), Value::from(*v)))
        .collect()
}

#[test]
fn schemas_are_openai_functions_of_string_arguments() {
    let schemas: Vec<Value> = tools::schemas()
        .iter()
        .map(|s| serde_json::to_value(s).unwrap())
        .collect();
    let names: Vec<&str> = schemas
        .iter()
        .map(|s| s["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["answer", "get_article", "search"], "TRL's order");
    // Keys in the order transformers' get_json_schema writes them (a template renders the text).
    let text = serde_json::to_string(&tools::schemas()[0]).unwrap();
    assert!(
        text.starts_with(r#"{"type":"function","function":{"name":"answer","description":"#),
        "{text}"
    );
    assert!(text.contains(
        r#""parameters":{"type":"object","properties":{"answer":{"type":"string","description":"#
    ));
    assert!(
        text.ends_with(r#""return":{"type":"string","description":"The score of the answer."}}}"#),
        "{text}"
    );
    for (s, t) in schemas.iter().zip(TOOLS) {
        assert_eq!(s["type"], "function");
        let params = &s["function"]["parameters"];
        assert_eq!(params["required"], json!([t.params[0].name]));
        assert_eq!(params["properties"][t.params[0].name]["type"], "string");
        assert_eq!(s["function"]["return"]["description"], t.returns);
    }
}

/// Replays a demonstration's calls in a fresh session: (observations, reward).
fn replay(index: &Arc<SearchIndex>, q: &Question, messages: &[Value]) -> (Vec<String>, f64) {
    let mut s = session(index, q, SearchEnvConfig::default().max_turns);
    let mut observations = Vec::new();
    for m in messages {
        for call in m["tool_calls"].as_array().into_iter().flatten() {
            let f = &call["function"];
            let a = f["arguments"].as_object().unwrap();
            observations.push(s.call(f["name"].as_str().unwrap(), a).unwrap().text);
        }
    }
    (observations, s.reward())
}

#[test]
fn demonstrations_replay_to_reward_one_in_the_environment_they_teach() {
    let d = dataset();
    let options = DemoOptions::default();
    let (demos, report) = demonstrations(&d.universe, &d.index, &options, &d.questions).unwrap();
    eprintln!(
        "demonstrations: {} of {} questions ({} below reward 1)",
        demos.len(),
        d.questions.len(),
        report.failed
    );
    assert_eq!(report.written + report.failed, d.questions.len());
    let by_id: std::collections::BTreeMap<&str, &Question> =
        d.questions.iter().map(|q| (q.id.as_str(), q)).collect();
    // Reads go by title, so a question anchored on names whose proof fits in the turn cap always
    // has its demonstration (these questions were generated without the certifier, so many
    // need more turns than the cap, or an attribute search that misses a holder).
    let cap = SearchEnvConfig::default().max_turns;
    let fitting: Vec<&str> = d
        .questions
        .iter()
        .filter(|q| {
            let plan = proof_plan(&d.universe, &q.plan);
            plan.attribute_searches.is_empty() && plan.reads.len() < cap
        })
        .map(|q| q.id.as_str())
        .collect();
    let written: std::collections::BTreeSet<&str> = demos.iter().map(|x| x.id.as_str()).collect();
    assert!(fitting.len() >= 100, "{}", fitting.len());
    for id in &fitting {
        assert!(
            written.contains(id),
            "{id} fits the cap but has no demonstration"
        );
    }
    let mut openings = std::collections::BTreeSet::new();
    let mut quoted = 0;
    for demo in &demos {
        let q = by_id[demo.id.as_str()];
        assert_eq!(demo.reward, 1.0);
        assert_eq!(demo.tools, tools::schemas());
        let m = &demo.messages;
        assert_eq!(m[0]["role"], "system");
        assert_eq!(m[0]["content"], tools::SYSTEM_PROMPT);
        assert_eq!(
            (&m[1]["role"], &m[1]["content"]),
            (&json!("user"), &json!(q.question))
        );
        // Each call is followed by its tool message: exactly what the session returns.
        let (observations, reward) = replay(&d.index, q, m);
        assert_eq!(reward, 1.0, "{}", demo.id);
        let shown: Vec<&str> = m
            .iter()
            .filter(|x| x["role"] == "tool")
            .map(|x| x["content"].as_str().unwrap())
            .collect();
        assert_eq!(shown, observations);
        let calls: Vec<&str> = m
            .iter()
            .flat_map(|x| x["tool_calls"].as_array().into_iter().flatten())
            .map(|c| c["function"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(calls.last(), Some(&"answer"));
        assert_eq!(m.last().unwrap()["role"], "assistant");
        // Every quoted line is a sentence of something already read, and names what the call
        // goes to (the person read next, or an answer).
        for (i, x) in m
            .iter()
            .enumerate()
            .filter(|(_, x)| x["role"] == "assistant")
        {
            let content = x["content"].as_str().unwrap();
            let Some(call) = x["tool_calls"].get(0) else {
                continue;
            };
            let argument = call["function"]["arguments"]
                .as_object()
                .unwrap()
                .values()
                .next()
                .unwrap()
                .as_str()
                .unwrap();
            let read: Vec<&str> = m[..i]
                .iter()
                .filter(|y| y["role"] == "tool")
                .flat_map(|y| y["content"].as_str().unwrap().lines())
                .map(str::trim)
                .collect();
            for quote in content.split('"').skip(1).step_by(2) {
                if call["function"]["name"] == "search" {
                    continue;
                }
                let lines: Vec<&str> = quote.split_inclusive(". ").map(str::trim).collect();
                for line in &lines {
                    assert!(read.contains(line), "{}: {line:?} was not read", demo.id);
                }
                quoted += 1;
                let named = match call["function"]["name"].as_str().unwrap() {
                    "answer" => q.answers.iter().any(|a| quote.contains(a.as_str())),
                    _ => quote.contains(argument),
                };
                assert!(named, "{}: {quote:?} does not name {argument:?}", demo.id);
            }
        }
        openings.insert(
            m[2]["content"]
                .as_str()
                .unwrap()
                .split(' ')
                .next()
                .unwrap()
                .to_owned(),
        );
    }
    assert!(openings.len() >= 3, "phrasings vary: {openings:?}");
    // Most steps rest on a quoted line (all but the opening read, counts and comparisons).
    assert!(
        quoted >= demos.len(),
        "{quoted} quotes in {} demos",
        demos.len()
    );
    // Deterministic, and the per-family cap holds.
    let again = demonstration(&d.universe, &d.index, &options, by_id[demos[0].id.as_str()])
        .unwrap()
        .unwrap();
    assert_eq!(again, demos[0]);
    let capped = DemoOptions::new(1, Some(5));
    let (few, report) = demonstrations(&d.universe, &d.index, &capped, &d.questions).unwrap();
    assert_eq!(few.len(), 5);
    assert_eq!(few[..], demos[..5]);
    assert!(report.capped > 0);
}

#[test]
fn oracle_sft_rows_from_the_cli_and_a_dataset_without_an_index() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    generate_small(&data);
    let out = dir.path().join("sft.jsonl");
    let o = run_ok(
        rulegym()
            .args([
                "oracle",
                "--format",
                "sft",
                "--split",
                "train",
                "--max-per-family",
                "7",
            ])
            .arg("--dataset")
            .arg(&data)
            .arg("--out")
            .arg(&out),
    );
    let rows: Vec<Value> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 7, "{}", String::from_utf8_lossy(&o.stdout));
    for r in &rows {
        assert_eq!(r["reward"], 1.0);
        assert_eq!(r["tools"], json!(tools::schemas()));
        assert!(r["id"].as_str().unwrap().starts_with("base-"));
    }
    // The same command gives the same bytes.
    let again = dir.path().join("again.jsonl");
    run_ok(
        rulegym()
            .args([
                "oracle",
                "--format",
                "sft",
                "--split",
                "train",
                "--max-per-family",
                "7",
            ])
            .arg("--dataset")
            .arg(&data)
            .arg("--out")
            .arg(&again),
    );
    assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&again).unwrap());
    std::fs::remove_file(data.join("index.idx")).unwrap();
    let o = run(rulegym()
        .args(["oracle", "--format", "sft", "--dataset"])
        .arg(&data)
        .arg("--out")
        .arg(dir.path().join("none.jsonl")));
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no search index"), "{err}");
}

/// A two-level curriculum (1 hop; 2-3 hops) of small universes deciding every `window` rewards.
fn small_curriculum(window: usize) -> CurriculumConfig {
    let mut config = CurriculumConfig::default();
    config.ladder = vec![Level::hops(1, 1), Level::hops(2, 3)];
    config.window = window;
    config.questions_per_universe = 4;
    config.per_cell = 4;
    config
}

#[test]
fn curriculum_draws_play_in_the_tool_session_and_follow_the_rewards() {
    let mut c = Curriculum::new(small_curriculum(3)).unwrap();
    let mut levels = Vec::new();
    for i in 0..8 {
        let d = c.draw().unwrap();
        let range = &c.config().ladder[d.level];
        assert!((range.min_hops..=range.max_hops).contains(&d.question.hops));
        // A policy that answers gold at level 0 and nothing at level 1.
        let mut s = session(&d.index, &d.question, 10);
        let answer = if d.level == 0 {
            d.question.answers.join(", ")
        } else {
            "Nobody At All".to_owned()
        };
        s.call("answer", &args(&[("answer", &answer)])).unwrap();
        levels.push(c.report(s.reward()).unwrap());
        if i == 0 {
            assert_eq!(s.reward(), 1.0);
        }
    }
    assert_eq!(levels, [0, 0, 1, 1, 1, 0, 0, 0]);
}

#[test]
fn openenv_serves_the_curriculum_to_resets_that_name_no_question() {
    use super::attacks::{CLIENT, Server, dataset, health, ws_call, ws_open};
    let config = small_curriculum(2);
    // The server's draws are the library's: the same config draws the same questions.
    let mut mirror = Curriculum::new(config.clone()).unwrap();
    let dir = dataset();
    let file = dir.path().join("curriculum.json");
    std::fs::write(&file, serde_json::to_string(&config).unwrap()).unwrap();
    let server = Server::openenv(
        &dir.path().join("data"),
        &["--curriculum", file.to_str().unwrap()],
    );
    let mut ws = ws_open(CLIENT, server.addr, "/ws", None).unwrap();
    let mut levels = Vec::new();
    for _ in 0..3 {
        let draw = mirror.draw().unwrap();
        let r = ws_call(&mut ws, json!({"type": "reset", "data": {}}));
        assert_eq!(r["type"], "observation", "{r}");
        let state = ws_call(&mut ws, json!({"type": "state"}));
        assert_eq!(
            state["data"]["question_id"],
            json!(draw.question.id),
            "{state}"
        );
        assert_eq!(state["data"]["curriculum_level"], json!(draw.level));
        let answer = draw.question.answers.join(", ");
        let r = ws_call(
            &mut ws,
            json!({"type": "step", "data": {"type": "call_tool", "tool_name": "answer",
                   "arguments": {"answer": answer}}}),
        );
        assert_eq!(r["data"]["reward"], 1.0, "{r}");
        assert_eq!(r["data"]["done"], true);
        levels.push(mirror.report(1.0).unwrap());
    }
    // Two rewards of 1 fill the window: the level goes up, as the library's does.
    assert_eq!(levels, [0, 1, 1]);
    let h = health(server.addr);
    assert_eq!(
        h["curriculum"],
        json!({"level": 1, "draws": 3, "reports": 3}),
        "{h}"
    );
    // A reset that names a question still plays the dataset's.
    let r = ws_call(&mut ws, json!({"type": "reset", "data": {"index": 0}}));
    assert_eq!(r["type"], "observation", "{r}");
    let state = ws_call(&mut ws, json!({"type": "state"}));
    assert!(
        state["data"]["question_id"]
            .as_str()
            .unwrap()
            .starts_with("base-"),
        "{state}"
    );
}
