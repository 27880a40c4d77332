//! `rulegym reward-check` and the `rewardcheck` library: rulegym's own reward passes every
//! property (in process, and as a reward command through the CLI); planted bugs are caught with
//! minimal counterexamples; commands that die, answer garbage, stall or miss lines are protocol
//! errors (exit 2) naming the line; reports are byte-identical for a seed.

use crate::cli::{rulegym, run};
use proptest::prelude::*;
use rulegym::reward::{ScoreMode, normalize_squad, score};
use rulegym::rewardcheck::{
    CaseSource, CheckConfig, ExactReward, Property, Report, RewardError, RewardFn, RewardInput,
    check, exact_reward,
};
use std::sync::{Arc, OnceLock};

/// One small universe shared by the tests (8 trees, seed 5).
fn source() -> Arc<CaseSource> {
    static SOURCE: OnceLock<Arc<CaseSource>> = OnceLock::new();
    SOURCE
        .get_or_init(|| rulegym::testkit::universe(5, 8).unwrap())
        .clone()
}

/// A reward in process from a closure over (response, answers).
struct Plain<F: FnMut(&str, &[String]) -> f64>(F);

impl<F: FnMut(&str, &[String]) -> f64> RewardFn for Plain<F> {
    fn rewards(&mut self, inputs: &[RewardInput], _: usize) -> Result<Vec<f64>, RewardError> {
        Ok(inputs
            .iter()
            .map(|i| (self.0)(i.text("response"), &i.answers()))
            .collect())
    }
}

fn answers_of(input: &serde_json::Value) -> Vec<String> {
    serde_json::from_value(input["answers"].clone()).unwrap()
}

fn response_of(input: &serde_json::Value) -> String {
    input["response"].as_str().unwrap().to_owned()
}

fn run_check(reward: &mut dyn RewardFn, cases: usize) -> Report {
    let config = CheckConfig {
        seed: 3,
        cases,
        ..Default::default()
    };
    check(&source(), reward, &config).unwrap().unwrap()
}

fn failure<'a>(report: &'a Report, property: &str) -> &'a rulegym::rewardcheck::Failure {
    report
        .failures
        .iter()
        .find(|f| f.property == property)
        .unwrap_or_else(|| panic!("no {property} failure in {report:#?}"))
}

/// The last `<answer>` of a text (verl's and Search-R1's extraction).
fn last_tag(text: &str) -> Option<String> {
    let start = text.rfind("<answer>")? + "<answer>".len();
    let end = text[start..].find("</answer>")? + start;
    Some(text[start..end].to_owned())
}

#[test]
fn rulegym_reward_passes_every_property() {
    let report = run_check(&mut ExactReward, 2400);
    assert!(report.passed, "{:#?}", report.failures);
    assert!(report.failures.is_empty());
    for p in &report.properties {
        assert!(p.tried > 0, "{} was never tried", p.property);
        assert_eq!(p.failed, 0, "{}", p.property);
    }
    assert_eq!(report.properties.len(), Property::ANSWER_REPORT.len());
}

#[test]
fn alternatives_reward_fails_subset_with_a_minimal_counterexample() {
    // verl's search_r1_like_qa_em: the gold list as alternatives, exact match on the last tag.
    let mut reward = Plain(|response: &str, answers: &[String]| {
        let Some(answer) = last_tag(response) else {
            return 0.0;
        };
        let a = normalize_squad(&answer);
        f64::from(u8::from(answers.iter().any(|g| normalize_squad(g) == a)))
    });
    let report = run_check(&mut reward, 1200);
    assert!(!report.passed);
    let f = failure(&report, "subset_below_one");
    // Minimal: two gold answers, one of them answered, plainly written.
    assert_eq!(answers_of(&f.input).len(), 2, "{f:#?}");
    let inner = last_tag(&response_of(&f.input)).unwrap();
    assert!(answers_of(&f.input).contains(&inner), "{f:#?}");
    assert_eq!(response_of(&f.input), format!("<answer>{inner}</answer>"));
    assert_eq!(f.expected, "< 1");
    assert_eq!(f.got, serde_json::json!(1.0));
    assert!((f.rulegym.unwrap() - 2.0 / 3.0).abs() < 1e-12);
    // The complete answer of a multi-answer question is not one alternative: it scores 0.
    failure(&report, "gold_renderings");
    // Reading the last tag is a convention, not a hedge: the two orders together score 1.
    assert!(report.failures.iter().all(|f| f.property != "several_tags"));

    // Any tag that matches pays: hedging across tags earns 2 over both orders.
    let mut any_tag = Plain(|response: &str, answers: &[String]| {
        response
            .split("<answer>")
            .skip(1)
            .filter_map(|t| t.split_once("</answer>").map(|(a, _)| a))
            .map(|a| score(a, answers, ScoreMode::Squad).f1)
            .fold(0.0, f64::max)
    });
    let report = run_check(&mut any_tag, 1200);
    let f = failure(&report, "several_tags");
    assert_eq!(
        (f.got.as_f64(), f.base_got),
        (Some(1.0), Some(1.0)),
        "{f:#?}"
    );
    assert_eq!(answers_of(&f.input).len(), 1, "{f:#?}");
}

#[test]
fn planted_bugs_are_caught_and_shrunk() {
    // Substring match: stuffing and long responses pay, so do answers in search tags.
    let mut substring = Plain(|response: &str, answers: &[String]| {
        let text = normalize_squad(response);
        let hits = answers
            .iter()
            .filter(|g| text.contains(&normalize_squad(g)))
            .count();
        hits as f64 / answers.len() as f64
    });
    let report = run_check(&mut substring, 1200);
    for p in [
        "no_tag_scores_zero",
        "stuffing",
        "answer_in_search",
        "long_response",
    ] {
        failure(&report, p);
    }
    let stuffing = failure(&report, "stuffing");
    // Shrunk to the gold answers plus one wrong name.
    let items = last_tag(&response_of(&stuffing.input)).unwrap();
    assert_eq!(
        items.split(',').count(),
        answers_of(&stuffing.input).len() + 1,
        "{stuffing:#?}"
    );
    let long = failure(&report, "long_response");
    assert!(response_of(&long.input).len() < 200, "{long:#?}");

    // Case-sensitive: a gold rendering in upper case scores 0; shrunk to one answer, upper
    // case only.
    let mut case_sensitive = Plain(|response: &str, answers: &[String]| {
        let Some(answer) = exact_tag(response) else {
            return 0.0;
        };
        let got: Vec<&str> = answer.split(',').map(str::trim).collect();
        let hits = answers.iter().filter(|g| got.contains(&g.as_str())).count();
        if hits == answers.len() && got.len() == answers.len() {
            1.0
        } else {
            score(&answer, answers, ScoreMode::Squad).f1.min(0.99)
        }
    });
    let report = run_check(&mut case_sensitive, 1200);
    let f = failure(&report, "gold_renderings");
    assert_eq!(answers_of(&f.input).len(), 1, "{f:#?}");
    let upper = format!(
        "<answer>{}</answer>",
        answers_of(&f.input)[0].to_uppercase()
    );
    let lower = format!(
        "<answer>{}</answer>",
        answers_of(&f.input)[0].to_lowercase()
    );
    let trailing = format!("<answer>{}.</answer>", answers_of(&f.input)[0]);
    let quoted = format!("<answer>\"{}\"</answer>", answers_of(&f.input)[0]);
    assert!(
        [upper, lower, trailing, quoted].contains(&response_of(&f.input)),
        "not minimal: {f:#?}"
    );

    // Out of range and non-deterministic rewards.
    let mut calls = 0u64;
    let mut noisy = Plain(move |response: &str, answers: &[String]| {
        calls += 1;
        let r = exact_reward("", response, answers).unwrap();
        if calls.is_multiple_of(7) {
            r * 2.0 + 0.5
        } else {
            r
        }
    });
    let report = run_check(&mut noisy, 600);
    failure(&report, "bounded");
    failure(&report, "deterministic");
}

/// The first complete answer tag.
fn exact_tag(text: &str) -> Option<String> {
    let start = text.find("<answer>")? + "<answer>".len();
    let end = text[start..].find("</answer>")? + start;
    Some(text[start..end].to_owned())
}

/// The properties a CLI report lists as failed.
fn failed_properties(report: &serde_json::Value) -> Vec<&str> {
    report["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["property"].as_str().unwrap())
        .collect()
}

fn reward_check(cmd: &str, extra: &[&str]) -> std::process::Output {
    run(rulegym()
        .args(["reward-check", "--trees", "8", "--seed", "5", "--cmd", cmd])
        .args(extra))
}

#[test]
fn cli_checks_rulegym_as_a_command_and_reports_deterministically() {
    let dir = tempfile::tempdir().unwrap();
    let own = format!("{} score --reward-lines", env!("CARGO_BIN_EXE_rulegym"));
    let mut bytes = Vec::new();
    for name in ["a.json", "b.json"] {
        let out_path = dir.path().join(name);
        let out = reward_check(
            &own,
            &["--cases", "1200", "--out", out_path.to_str().unwrap()],
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        bytes.push(std::fs::read(&out_path).unwrap());
    }
    assert_eq!(
        bytes[0], bytes[1],
        "the same seed gives the same report bytes"
    );
    let report: serde_json::Value = serde_json::from_slice(&bytes[0]).unwrap();
    assert_eq!(report["passed"], true);
    assert_eq!(report["failures"], serde_json::json!([]));
    // The command answers exactly as the library's check in process does.
    let in_process = run_check(&mut ExactReward, 1200);
    assert_eq!(report["cases"], in_process.cases);
}

#[test]
fn cli_failing_property_exits_1_with_report_on_stdout() {
    // A reward that answers 1 to everything, in shell.
    let cmd = r#"sed -u -E 's/^\{"id":("[^"]*").*$/{"id":\1,"reward":1}/'"#;
    let out = reward_check(cmd, &["--cases", "240"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["passed"], false);
    let names = failed_properties(&report);
    assert!(names.contains(&"wrong_scores_zero"), "{names:?}");
    for f in report["failures"].as_array().unwrap() {
        for key in ["property", "input", "expected", "got"] {
            assert!(f.get(key).is_some(), "{key} missing in {f}");
        }
    }
}

#[test]
fn cli_protocol_errors_exit_2_naming_the_line() {
    let cases: [(&str, &str); 5] = [
        ("exit 3", "exited"),
        ("read line; echo hello", "output line 1"),
        (
            "read line; echo '{\"id\": \"nope\", \"reward\": 1}'",
            "not one of the lines",
        ),
        (
            "head -n 2 | sed -E 's/^\\{\"id\":(\"[^\"]*\").*$/{\"id\":\\1,\"reward\":0}/'",
            "input line 3",
        ),
        ("/nonexistent/reward-command", "input line 1"),
    ];
    for (cmd, says) in cases {
        let out = reward_check(cmd, &["--cases", "24"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{cmd}: {err}");
        assert!(err.contains(says), "{cmd}: {err}");
    }
    // Usage errors are 2 as well.
    let out = reward_check("cat", &["--timeout", "0"]);
    assert_eq!(out.status.code(), Some(2));
    let out = reward_check("cat", &["--dataset", "/nonexistent"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn cli_stalled_command_fails_timely() {
    // Reads and never answers: the check stops at the time limit with the timely property
    // failed (exit 1), and the command is killed.
    let started = std::time::Instant::now();
    let out = reward_check("cat > /dev/null", &["--cases", "24", "--timeout", "0.5"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["stopped_early"], true);
    assert_eq!(report["failures"][0]["property"], "timely");
    // Neither a child of the shell that never reads (the writer would block on a full pipe)
    // nor blank lines, which are not answers, hold the check past its time limit.
    for cmd in [
        "sleep 30; true",
        "cat > /dev/null & while :; do echo; sleep 0.1; done",
    ] {
        let started = std::time::Instant::now();
        let out = reward_check(cmd, &["--cases", "24", "--timeout", "0.5"]);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{cmd}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "{cmd}"
        );
    }
    // A reward that stops answering after a failing batch: the failures found so far are
    // reported unshrunk with the timely failure (exit 1), not a protocol error.
    let cmd = r#"sed -u -E 's/^\{"id":("[^"]*").*$/{"id":\1,"reward":1}/' | sed -u 30q; sleep 30"#;
    let out = reward_check(cmd, &["--cases", "24", "--batch", "12", "--timeout", "1"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["stopped_early"], true);
    let names = failed_properties(&report);
    assert!(names.contains(&"timely") && names.len() > 1, "{names:?}");
}

#[test]
fn cases_are_deterministic_and_valid() {
    let s = source();
    for &p in &Property::ANSWER_GENERATED {
        for i in 0..20 {
            let a = s.case(9, p, i);
            assert_eq!(a, s.case(9, p, i));
            if let Some(spec) = a {
                assert!(spec.valid(), "{p:?} {i}: {spec:?}");
                for smaller in spec.shrink() {
                    assert!(smaller.valid());
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// rulegym's reward meets every generated case's expectation (the testkit strategies, as a
    /// user's own property test would use them).
    #[test]
    fn exact_reward_meets_testkit_cases(case in rulegym::testkit::responses(source())) {
        let got = exact_reward(&case.spec.question, &case.response, &case.spec.answers).unwrap();
        prop_assert_eq!(got, case.expected);
        let base = case
            .base
            .as_ref()
            .map(|b| exact_reward(&case.spec.question, b, &case.spec.answers).unwrap());
        prop_assert!(case.holds(got, base), "{:?}: {} {:?}", case.spec.property, got, base);
    }

    #[test]
    fn responses_to_one_question_stay_on_it(
        case in rulegym::testkit::responses_to(source(), 0),
    ) {
        let world = source();
        prop_assert_eq!(&case.spec.question, &world.questions()[0].question);
        prop_assert!(case.spec.valid());
    }
}

#[test]
fn tool_use_rubric_rewards() {
    use rulegym::rewardcheck::{ToolCaseSource, check_tools};
    let source = ToolCaseSource::generate(5, 30, 12).unwrap();
    // rulegym's rubric reward, in process: every property holds, and every case's reward is
    // the one the environment recorded while playing it.
    struct Rubric<'a>(&'a ToolCaseSource);
    impl RewardFn for Rubric<'_> {
        fn rewards(&mut self, inputs: &[RewardInput], _: usize) -> Result<Vec<f64>, RewardError> {
            Ok(inputs
                .iter()
                .map(|i| {
                    let task = serde_json::from_value(i.fields["task"].clone()).unwrap();
                    let messages: Vec<rulegym::llm::ChatMessage> =
                        serde_json::from_value(i.fields["messages"].clone()).unwrap();
                    self.0.exact_reward(&task, &messages).unwrap()
                })
                .collect())
        }
    }
    let report = check_tools(&source, &mut Rubric(&source), 48, 10)
        .unwrap()
        .unwrap();
    assert!(report.passed, "{:#?}", report.failures);
    assert!(report.properties.iter().all(|p| p.tried > 0));
    for p in Property::TOOL_GENERATED {
        let case = source.case(p, 3).unwrap().unwrap();
        assert!(case.holds(case.expected), "{p:?}: {}", case.expected);
    }
    // A planted bug: "the agent answered" as the reward ignores the rubric.
    let mut answered = Plain(|_: &str, _: &[String]| 1.0);
    let report = check_tools(&source, &mut answered, 48, 1000)
        .unwrap()
        .unwrap();
    let f = failure(&report, "forbidden_scores_zero");
    assert_eq!((f.got.as_f64(), f.rulegym), (Some(1.0), Some(0.0)));
    assert!(
        f.input["messages"]
            .as_array()
            .is_some_and(|m| !m.is_empty())
    );
    failure(&report, "no_question_below_one");
    failure(&report, "skipped_subgoal_below_one");

    // The CLI: rulegym's rubric as a reward command passes; a constant reward fails (exit 1).
    let own = format!("{} score --reward-lines", env!("CARGO_BIN_EXE_rulegym"));
    let out = reward_check(&own, &["--tool-use", "--cases", "40"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cmd = r#"sed -u -E 's/^\{"id":("[^"]*").*$/{"id":\1,"reward":1}/'"#;
    let out = reward_check(cmd, &["--tool-use", "--cases", "40"]);
    assert_eq!(out.status.code(), Some(1));
}
