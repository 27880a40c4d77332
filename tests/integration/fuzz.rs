//! Fuzz loops on stable Rust (proptest; nightly's cargo-fuzz is not available here): every
//! parser and loader a user's text reaches must return a value or an error, never panic, abort or
//! hang. CI runs a short budget; `scripts/fuzz.sh` runs a long one (`RULEGYM_FUZZ_CASES`).
//! Findings become regression cases in `tests/proptest-regressions/` (proptest records each
//! failing input there) and hand-written cases below.

use proptest::prelude::*;
use rulegym::dataset::phantomwiki;
use rulegym::engine::{ReadLimits, read_clause, read_term};
use rulegym::llm::{ChatMessage, FunctionCall, Role, ToolCall};
use rulegym::reward::{ScoreMode, item_key, last_answer, normalize_squad, score};
use rulegym::search::parse_action;
use rulegym::tooluse::env::parse_assistant;
use rulegym::tooluse::rubric::check::Checker;
use std::path::Path;

/// Cases per in-process fuzz loop (`RULEGYM_FUZZ_CASES`, default 512).
fn cases() -> u32 {
    std::env::var("RULEGYM_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(512)
}

/// Text built from fragments that matter to the parsers (tags, quotes, escapes, operators,
/// brackets, commas, unicode) and arbitrary characters.
fn texty() -> impl Strategy<Value = String> {
    let fragment = prop_oneof![
        Just("<search>".to_owned()),
        Just("</search>".to_owned()),
        Just("<answer>".to_owned()),
        Just("</answer>".to_owned()),
        Just("<tool_call>".to_owned()),
        Just("</tool_call>".to_owned()),
        Just("{\"name\": \"book\", \"arguments\": {\"a\": [1, {}]}}".to_owned()),
        Just("'it''s'".to_owned()),
        Just("\"q\\\"\"".to_owned()),
        Just("\\x41\\".to_owned()),
        Just(":- ".to_owned()),
        Just(" , ".to_owned()),
        Just("(".to_owned()),
        Just(")".to_owned()),
        Just("[a|T]".to_owned()),
        Just(" is ".to_owned()),
        Just("\\+ ".to_owned()),
        Just("findall(X, between(1, 9, X), L)".to_owned()),
        Just("tool_call(S, book, A)".to_owned()),
        Just("job(Y_1, \"doctor\")".to_owned()),
        Just("The The".to_owned()),
        Just("Washington, D.C.".to_owned()),
        Just("%".to_owned()),
        Just("/*".to_owned()),
        Just(".".to_owned()),
        Just("\u{0}".to_owned()),
        Just("é漢🙂".to_owned()),
        "\\PC{0,8}",
        "[ -~]{0,8}",
    ];
    proptest::collection::vec(fragment, 0..24).prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn action_parsers_never_panic(text in texty(), args in texty(), name in texty()) {
        let _ = parse_action(&text);
        let _ = last_answer([text.as_str(), args.as_str()]);
        let mut message = ChatMessage::text(Role::Assistant, text.clone());
        message.tool_calls.push(ToolCall {
            id: "c".into(),
            kind: "function".into(),
            function: FunctionCall { name, arguments: args },
        });
        let _ = parse_assistant(&message, 1);
        let _ = parse_assistant(&ChatMessage::text(Role::Assistant, text), 2);
    }

    #[test]
    fn answer_scores_are_bounded_and_a_gold_scores_itself(prediction in texty(), gold in texty()) {
        for mode in [ScoreMode::Squad, ScoreMode::Phantomwiki] {
            let s = score(&prediction, std::slice::from_ref(&gold), mode);
            prop_assert!((0.0..=1.0).contains(&s.f1) && (0.0..=1.0).contains(&s.em));
            if item_key(&gold, mode).is_some() {
                let own = score(&gold, std::slice::from_ref(&gold), mode);
                prop_assert_eq!(own.f1, 1.0, "{:?} against itself ({:?})", gold, mode);
            }
        }
        let once = normalize_squad(&prediction);
        prop_assert_eq!(normalize_squad(&once), once);
    }

    #[test]
    fn term_reader_and_rubric_checker_never_panic(text in texty()) {
        let _ = read_term(&text, &ReadLimits::DEFAULT);
        let _ = read_clause(&text, &ReadLimits::DEFAULT);
        let _ = Checker::new().check(&text);
        let mut task = super::tool_rubric::trip_task();
        task.rubric.subgoals[0].rule = Some(text);
        let _ = task.rubric_program();
    }

    #[test]
    fn phantomwiki_importers_never_panic(
        lines in proptest::collection::vec(
            prop_oneof![
                texty(),
                ("[A-Za-z ]{0,12}", "[a-z]{0,6}").prop_map(|(a, b)| format!("gender(\"{a}\", \"{b}\").")),
                ("[A-Za-z ]{0,12}", "[A-Za-z ]{0,12}").prop_map(|(a, b)| format!("parent(\"{a}\", \"{b}\").")),
                ("[A-Za-z ]{0,12}", "[0-9-]{0,12}").prop_map(|(a, b)| format!("dob(\"{a}\", \"{b}\").")),
                ("[A-Za-z ]{0,12}", "[A-Za-z ]{0,12}").prop_map(|(a, b)| format!("friend_(\"{a}\", \"{b}\").")),
            ],
            0..24,
        ),
        atoms in proptest::collection::vec(texty(), 0..4),
        answer in texty(),
    ) {
        let text = lines.join("\n");
        if let Ok(facts) = phantomwiki::parse_facts(&text, "facts.pl") {
            let _ = phantomwiki::import_universe(&facts);
        }
        let _ = phantomwiki::compile_query(&atoms, &answer);
        let _ = phantomwiki::parse_questions(&text, "questions.json");
        let _ = phantomwiki::parse_articles(&text, "articles.json");
    }
}

/// JSON values shaped like the CLI inputs, broken at random.
fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        (-1e300f64..1e300).prop_map(serde_json::Value::from),
        texty().prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..8).prop_map(serde_json::Value::from),
            proptest::collection::btree_map(
                prop_oneof![
                    Just("answers".to_owned()),
                    Just("prediction".to_owned()),
                    Just("rewards".to_owned()),
                    Just("group_size".to_owned()),
                    Just("logp_old".to_owned()),
                    Just("logp_new".to_owned()),
                    Just("mask".to_owned()),
                    Just("config".to_owned()),
                    Just("messages".to_owned()),
                    Just("role".to_owned()),
                    Just("content".to_owned()),
                    Just("tool_calls".to_owned()),
                    "[a-z_]{1,8}",
                ],
                inner,
                0..6,
            )
            .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Runs the CLI on `input` as `flag`; the exit must be a normal success or error, never a
/// panic (101) or a signal.
fn cli_survives(dir: &Path, args: &[&str], flag: &str, input: &[u8]) -> Result<(), TestCaseError> {
    let path = dir.join("input.json");
    std::fs::write(&path, input).unwrap();
    let out = super::cli::run(super::cli::rulegym().args(args).arg(flag).arg(&path));
    let code = out.status.code();
    prop_assert!(
        matches!(code, Some(0..=2)),
        "{args:?} exited {code:?} on {}: {}",
        String::from_utf8_lossy(input),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases() / 16, ..ProptestConfig::default() })]

    #[test]
    fn cli_json_inputs_never_panic(value in json_value(), lines in proptest::collection::vec(json_value(), 0..4)) {
        let dir = tempfile::tempdir().unwrap();
        let tasks = crate::repo().join("tests/fixtures/tools/trip.json");
        let tasks = tasks.to_str().unwrap();
        let jsonl: Vec<String> = lines.iter().map(|v| v.to_string()).collect();
        cli_survives(dir.path(), &["score"], "--pairs", jsonl.join("\n").as_bytes())?;
        cli_survives(dir.path(), &["grpo"], "--input", value.to_string().as_bytes())?;
        cli_survives(
            dir.path(),
            &["tools", "score", "--tasks", tasks, "--id", "trip-oslo-1"],
            "--trajectory",
            value.to_string().as_bytes(),
        )?;
    }
}
