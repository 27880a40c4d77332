//! PhantomWiki compatibility: every question of PhantomWiki 1.0.3's own output (easy and hard
//! mode) gets the same answer set from rulegym's engine and rule base on the imported universe,
//! and rulegym's articles state the same sentences and facts. Fixtures: tests/fixtures/PHANTOMWIKI.md.

use super::cli::{rulegym, run, run_ok};
use rulegym::dataset::phantomwiki::{DirReport, PwDir, compile_query, read_dir, verify_dir};
use rulegym::relations::RELATIONS;
use std::collections::BTreeSet;
use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    crate::repo().join("tests/fixtures").join(name)
}

const FIXTURES: [&str; 3] = [
    "phantomwiki-n100-seed1",
    "phantomwiki-hard-n100-seed1",
    "phantomwiki-hard-t20-s25-seed2",
];

fn check(name: &str) -> (PwDir, DirReport) {
    let pw = read_dir(&fixture(name)).unwrap();
    let report = verify_dir(&pw).unwrap();
    let q = &report.questions;
    assert_eq!(q.questions, 380, "{name}: 38 templates x 10");
    assert_eq!(
        (q.agree, q.disagree, q.errors),
        (380, 0, 0),
        "{name}: disagreements {:#?}\nerrors {:#?}",
        q.disagreements,
        q.error_details
    );
    assert_eq!(
        q.oracle_disagree, 0,
        "{name}: engine and native oracle differ"
    );
    assert_eq!(
        q.text_differs, 0,
        "{name}: rulegym renders other question text: {:?}",
        q.text_examples
    );
    let a = report.articles.as_ref().expect("articles.json is present");
    assert!(a.sentences_agree(), "{name}: {a:#?}");
    assert_eq!(a.articles, pw.universe.people.len());
    assert_eq!(a.identical + a.order_only, a.articles);
    (pw, report)
}

#[test]
fn easy_mode_fixture_agrees() {
    let (pw, report) = check(FIXTURES[0]);
    assert_eq!((report.people, report.trees), (103, 10));
    // Easy mode: only the 12 easy relations appear.
    let used = relations_used(&pw);
    assert!(
        used.iter()
            .all(|r| rulegym::relations::relation(r).unwrap().easy),
        "{used:?}"
    );
}

#[test]
fn hard_mode_fixture_agrees() {
    check(FIXTURES[1]);
}

#[test]
fn hard_mode_fixture_with_large_trees_covers_every_relation_and_agrees() {
    let (pw, report) = check(FIXTURES[2]);
    assert_eq!((report.people, report.trees), (505, 20));
    let used = relations_used(&pw);
    let all: BTreeSet<String> = RELATIONS.iter().map(|r| r.name.to_owned()).collect();
    assert_eq!(used, all, "the fixture asks about all 45 relations");
}

/// Relations named in the fixture's queries (compiled, so only relations of the rule base).
fn relations_used(pw: &PwDir) -> BTreeSet<String> {
    let mut used = BTreeSet::new();
    for q in &pw.questions {
        let query = compile_query(&q.prolog.query, &q.prolog.answer).unwrap();
        for chain in query.chains() {
            used.extend(chain.hops().map(str::to_owned));
        }
        if let rulegym::question::Query::HowMany(_, r) = &query {
            used.insert(r.clone());
        }
    }
    used
}

#[test]
fn a_changed_answer_is_a_disagreement() {
    let mut pw = read_dir(&fixture(FIXTURES[0])).unwrap();
    pw.questions[5].answer.push("Nobody Atall".into());
    pw.questions[7].answer.clear();
    pw.questions[9].prolog.query[0] = "friend(Y_4, Y_2".into();
    let report = verify_dir(&pw).unwrap();
    let q = &report.questions;
    // An atom that is not a term makes the record malformed (it was counted as an error before
    // the extended shapes).
    assert_eq!((q.agree, q.disagree, q.errors, q.malformed), (377, 2, 0, 1));
    assert_eq!(
        q.disagreements.iter().map(|d| d.index).collect::<Vec<_>>(),
        [5, 7]
    );
    assert!(
        q.malformed_details[0]
            .error
            .as_ref()
            .unwrap()
            .contains("column")
    );
    assert!(!report.ok());
}

#[test]
fn cli_prints_the_summary_and_fails_on_disagreement() {
    let ok = run_ok(
        rulegym()
            .args(["phantomwiki", "verify", "--compact"])
            .arg(fixture(FIXTURES[0])),
    );
    let json: serde_json::Value = serde_json::from_slice(&ok.stdout).unwrap();
    assert_eq!(json["questions"], 380);
    assert_eq!(json["agree"], 380);
    assert_eq!(json["disagree"], 0);
    assert_eq!(json["errors"], 0);
    assert_eq!(json["disagreements"].as_array().unwrap().len(), 0);

    // A copy with one wrong answer: exit status 1 and the question listed.
    let dir = tempfile::tempdir().unwrap();
    for file in ["facts.pl", "articles.json"] {
        std::fs::copy(fixture(FIXTURES[0]).join(file), dir.path().join(file)).unwrap();
    }
    let text = std::fs::read_to_string(fixture(FIXTURES[0]).join("questions.json")).unwrap();
    let mut questions: serde_json::Value = serde_json::from_str(&text).unwrap();
    questions[3]["answer"] = serde_json::json!(["Nobody Atall"]);
    std::fs::write(dir.path().join("questions.json"), questions.to_string()).unwrap();
    let bad = run(rulegym()
        .args(["phantomwiki", "verify", "--compact"])
        .arg(dir.path()));
    assert_eq!(bad.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_slice(&bad.stdout).unwrap();
    assert_eq!(json["disagree"], 1);
    assert_eq!(json["disagreements"][0]["index"], 3);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("1 of 380 questions disagree"));

    // A missing directory is an error, not a panic.
    let missing = run(rulegym()
        .args(["phantomwiki", "verify"])
        .arg(dir.path().join("nope")));
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("facts.pl"));
}

/// A PhantomWiki directory of the extended-shapes questions over the n100 universe (the fixture
/// holds only `questions.json`; `facts.pl` is the n100 fixture's).
fn extended_shapes_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (from, name) in [
        ("phantomwiki-n100-seed1", "facts.pl"),
        ("phantomwiki-extended-shapes", "questions.json"),
    ] {
        std::fs::copy(fixture(from).join(name), dir.path().join(name)).unwrap();
    }
    dir
}

/// The PhantomEnvironments fork's comparisons with long chains on both sides (295 x 67 people):
/// its gold is the winner of one pairing, past the 17,600th; every pairing counts, so both are
/// ambiguous (tests/fixtures/phantomenvs-n1029-seed1/README.md), through the CLI.
#[test]
fn long_chain_comparisons_of_the_phantomenvs_fork_are_ambiguous() {
    let dir = fixture("phantomenvs-n1029-seed1");
    let out = run_ok(
        rulegym()
            .args(["phantomwiki", "verify", "--compact"])
            .arg(&dir),
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["people"], 1029);
    let counts = [
        "questions",
        "agree",
        "disagree",
        "errors",
        "ambiguous",
        "malformed",
    ]
    .map(|k| report[k].as_u64().unwrap());
    assert_eq!(counts, [2, 0, 0, 0, 2, 0], "{report:#}");
    assert_eq!(report["oracle_disagree"], 0);
}

/// The extended shapes of public PhantomWiki extensions over the n100 universe: every answer was
/// worked out by hand (tests/fixtures/phantomwiki-extended-shapes/README.md).
#[test]
fn extended_shapes_are_verified_per_shape() {
    let dir = extended_shapes_dir();
    let pw = read_dir(dir.path()).unwrap();
    let report = verify_dir(&pw).unwrap();
    let q = &report.questions;
    let summary = format!(
        "disagreements {:#?}\nerrors {:#?}\nambiguous {:#?}\nmalformed {:#?}",
        q.disagreements, q.error_details, q.ambiguous_details, q.malformed_details
    );
    assert_eq!(q.questions, 22);
    assert_eq!(
        (q.agree, q.disagree, q.errors, q.ambiguous, q.malformed),
        (13, 1, 1, 2, 5),
        "{summary}"
    );
    assert_eq!(q.oracle_disagree, 0, "{summary}");
    // (shape, questions, agree, disagree, errors, ambiguous, malformed)
    let expected: &[(&str, usize, usize, usize, usize, usize, usize)] = &[
        ("born-first", 1, 1, 0, 0, 0, 0),
        ("how-many", 1, 1, 0, 0, 0, 0),
        ("most", 2, 1, 0, 0, 1, 0),
        ("multi-attribute", 3, 2, 0, 0, 0, 1),
        ("older", 4, 2, 1, 0, 0, 1),
        ("oldest", 1, 1, 0, 0, 0, 0),
        ("undecided", 1, 0, 0, 0, 0, 1),
        ("unsupported", 1, 0, 0, 1, 0, 0),
        ("what", 1, 1, 0, 0, 0, 0),
        ("who", 2, 1, 0, 0, 0, 1),
        ("younger", 3, 2, 0, 0, 1, 0),
        ("youngest", 2, 1, 0, 0, 0, 1),
    ];
    let got: Vec<(&str, usize, usize, usize, usize, usize, usize)> = q
        .by_shape
        .iter()
        .map(|(s, c)| {
            (
                s.as_str(),
                c.questions,
                c.agree,
                c.disagree,
                c.errors,
                c.ambiguous,
                c.malformed,
            )
        })
        .collect();
    assert_eq!(got, expected, "{summary}");
    let indices = |checks: &[rulegym::dataset::phantomwiki::QuestionCheck]| {
        checks.iter().map(|c| c.index).collect::<Vec<_>>()
    };
    assert_eq!(indices(&q.disagreements), [13]);
    assert_eq!(indices(&q.ambiguous_details), [11, 12]);
    assert_eq!(indices(&q.malformed_details), [14, 15, 16, 17, 21]);
    assert_eq!(indices(&q.error_details), [18]);
    for check in q.malformed_details.iter().chain(&q.error_details) {
        let error = check.error.as_deref().unwrap();
        assert!(
            error.starts_with(&format!("question {}: ", check.index)),
            "{error}"
        );
    }
    // The engine's answers of the agreeing extended shapes, and the per-binding gold of the
    // ambiguous comparison (a two-person side whose pairings differ has no answer).
    assert_eq!(q.ambiguous_details[0].got.as_deref(), Some(&[][..]));
    // A two-person (#19) and a four-person (#20) side whose pairings all agree have that answer
    // (they count as agreeing above, and the engine matched the native oracle on every
    // question); the oracle's answers, from the records' own queries:
    let agreed: Vec<Vec<String>> = [19, 20]
        .iter()
        .map(|&i| {
            let r = &pw.questions[i];
            let (query, _) = rulegym::dataset::phantomwiki::compile_record(r).unwrap();
            query.evaluate_native(&pw.universe).unwrap()
        })
        .collect();
    assert_eq!(agreed, [["Brittaney Jarrett"], ["Alberto Jarrett"]]);
    let one_side = q.malformed_details.last().unwrap();
    assert!(
        one_side
            .error
            .as_deref()
            .unwrap()
            .contains("needs two sides"),
        "{one_side:?}"
    );
    assert!(
        !report.ok(),
        "malformed records and a disagreement fail the check"
    );

    // The CLI: exit 1, the new counts in the JSON and on stderr.
    let out = run(rulegym()
        .args(["phantomwiki", "verify", "--compact"])
        .arg(dir.path()));
    assert_eq!(out.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["ambiguous"], 2);
    assert_eq!(json["malformed"], 5);
    assert_eq!(json["by_shape"]["younger"]["ambiguous"], 1);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("1 of 22 questions disagree, 1 failed, 5 malformed (2 ambiguous)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("most: 2 questions, 1 agree, 0 disagree, 0 errors, 1 ambiguous"),
        "{stderr}"
    );
}

#[test]
fn a_bad_record_is_an_error_naming_its_index() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        fixture(FIXTURES[0]).join("facts.pl"),
        dir.path().join("facts.pl"),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("questions.json"),
        r#"[{"question": "Who?", "answer": [], "prolog": {"query": [], "answer": "X"}, "type": "x"},
            {"question": "Who?", "answer": [], "prolog": {"query": []}}]"#,
    )
    .unwrap();
    let err = read_dir(dir.path()).unwrap_err().to_string();
    assert!(err.contains("question 1"), "{err}");
}
