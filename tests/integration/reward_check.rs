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

// ---- The catalogue of issue #43: every new property has a correct reward that passes it (no
// false alarm, including rewards that make the other choice where a property is a choice) and
// a planted bug that fails it.

/// An independently written set F1: its own normalisation (lower case, ASCII punctuation out,
/// articles out, whitespace collapsed), its own tag reading (the LAST complete `<answer>` tag,
/// as verl reads it, where rulegym reads the first), items deduplicated by their key.
fn independent_set_f1(response: &str, answers: &[String]) -> f64 {
    fn key(item: &str) -> Option<String> {
        let lowered: String = item
            .to_lowercase()
            .chars()
            .map(|c| if c.is_ascii_punctuation() { ' ' } else { c })
            .collect();
        let words: Vec<&str> = lowered
            .split_whitespace()
            .filter(|w| !["a", "an", "the"].contains(w))
            .collect();
        (!words.is_empty()).then(|| words.concat())
    }
    let Some(answer) = last_tag(response) else {
        return 0.0;
    };
    set_f1(
        answer.split(',').filter_map(key).collect(),
        answers.iter().filter_map(|a| key(a)).collect(),
    )
}

fn set_f1(
    predicted: std::collections::BTreeSet<String>,
    gold: std::collections::BTreeSet<String>,
) -> f64 {
    let hits = predicted.intersection(&gold).count() as f64;
    if hits == 0.0 {
        return 0.0;
    }
    let (p, r) = (hits / predicted.len() as f64, hits / gold.len() as f64);
    2.0 * p * r / (p + r)
}

/// A correct reward that makes the other choice wherever a property is a choice: tag names in
/// any case and with spaces (`<Answer>`, `< answer >`), Unicode folded (zero-width and
/// combining characters dropped, Cyrillic look-alikes and full-width forms read as Latin),
/// counts in words read as numbers and dates with month names or slashes read as dates. It
/// reads the last tag and deduplicates after folding: it pays no exploit.
fn lenient_set_f1(response: &str, answers: &[String]) -> f64 {
    fn fold(text: &str) -> String {
        text.chars()
            .filter_map(|c| match c {
                '\u{200B}'..='\u{200D}' | '\u{2060}' | '\u{FEFF}' => None,
                '\u{0300}'..='\u{036F}' => None,
                '\u{FF01}'..='\u{FF5E}' => char::from_u32(c as u32 - 0xFEE0),
                _ => Some(match "асеорхуіјѕАВСЕНКМОРТХЅ".chars().position(|x| x == c)
                {
                    Some(i) => "aceopxyijsABCEHKMOPTXS".chars().nth(i).unwrap(),
                    None => c,
                }),
            })
            .collect()
    }
    const MONTHS: [&str; 12] = [
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
    ];
    fn number(words: &str) -> Option<u64> {
        const SMALL: [&str; 20] = [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
        ];
        const TENS: [&str; 8] = [
            "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
        ];
        let mut total = 0;
        for w in words
            .split(['-', ' '])
            .filter(|w| !w.is_empty() && *w != "and")
        {
            total += if let Some(n) = SMALL.iter().position(|x| *x == w) {
                n as u64
            } else if let Some(t) = TENS.iter().position(|x| *x == w) {
                20 + 10 * t as u64
            } else if w == "hundred" {
                total * 99
            } else {
                return None;
            };
        }
        Some(total)
    }
    fn date(words: &[&str]) -> Option<String> {
        let num = |w: &str| -> Option<u32> {
            w.trim_end_matches(|c: char| c.is_ascii_alphabetic())
                .parse()
                .ok()
        };
        let month = |w: &str| MONTHS.iter().position(|m| *m == w).map(|m| m as u32 + 1);
        let words: Vec<&str> = words.iter().copied().filter(|w| *w != "of").collect();
        let (y, m, d) = match words.as_slice() {
            [d, m, y] if month(m).is_some() => (num(y)?, month(m)?, num(d)?),
            [m, d, y] if month(m).is_some() => (num(y)?, month(m)?, num(d)?),
            [ymd] => {
                let p: Vec<&str> = ymd.split(['/', '-']).collect();
                match p.as_slice() {
                    [y, m, d] if y.len() == 4 => {
                        (y.parse().ok()?, m.parse().ok()?, d.parse().ok()?)
                    }
                    _ => return None,
                }
            }
            _ => return None,
        };
        Some(format!("{y:04}-{m:02}-{d:02}"))
    }
    fn key(item: &str) -> Option<String> {
        let folded = fold(item).to_lowercase();
        let words: Vec<&str> = folded
            .split_whitespace()
            .map(|w| w.trim_matches(|c: char| c.is_ascii_punctuation() && c != '/' && c != '-'))
            .filter(|w| !w.is_empty() && !["a", "an", "the"].contains(w))
            .collect();
        if words.is_empty() {
            return None;
        }
        if let Some(d) = date(&words) {
            return Some(d);
        }
        let joined = words.join(" ");
        if let Some(n) = number(&joined) {
            return Some(n.to_string());
        }
        Some(
            joined
                .chars()
                .filter(|c| !c.is_ascii_punctuation())
                .collect::<String>()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" "),
        )
    }
    // The last complete tag, any case, spaces allowed inside the brackets.
    let lower = response.to_lowercase();
    let squeezed: String = {
        // Map positions: remove spaces directly inside angle brackets of answer tags.
        let mut s = lower.clone();
        for (from, to) in [
            ("< answer >", "<answer>"),
            ("</ answer >", "</answer>"),
            ("<answer >", "<answer>"),
            ("</answer >", "</answer>"),
        ] {
            s = s.replace(from, to);
        }
        s
    };
    let Some(answer) = last_tag(&squeezed) else {
        return 0.0;
    };
    set_f1(
        answer.split(',').filter_map(key).collect(),
        answers.iter().filter_map(|a| key(a)).collect(),
    )
}

#[test]
fn correct_rewards_pass_every_property_whatever_they_choose() {
    // rulegym's own reward as verl's adapter reads it (the last tag), the independent set F1
    // and the lenient one: no false alarm.
    let mut last = Plain(|response: &str, answers: &[String]| {
        rulegym::reward::last_answer([response])
            .map_or(0.0, |a| score(&a, answers, ScoreMode::Squad).f1)
    });
    let mut independent = Plain(independent_set_f1);
    let mut lenient = Plain(lenient_set_f1);
    for (name, reward) in [
        ("last tag", &mut last as &mut dyn RewardFn),
        ("independent", &mut independent),
        ("lenient", &mut lenient),
    ] {
        let report = run_check(reward, 2400);
        assert!(report.passed, "{name}: {:#?}", report.failures);
        for p in &report.properties {
            assert!(p.tried > 0, "{name}: {} was never tried", p.property);
        }
    }
    // The lenient reward does make the other choices: it pays what rulegym's does not.
    let gold = vec!["12".to_owned()];
    assert_eq!(lenient_set_f1("<answer>twelve</answer>", &gold), 1.0);
    assert_eq!(
        exact_reward("", "<answer>twelve</answer>", &gold).unwrap(),
        0.0
    );
    // rulegym's choice for dates: another format is another answer, unless it differs only by
    // punctuation (SQuAD normalisation drops it).
    let gold = vec!["0339-07-06".to_owned()];
    for (response, reward) in [
        ("<answer>0339/07/06</answer>", 1.0),
        ("<answer>6 July 339</answer>", 0.0),
    ] {
        assert_eq!(
            exact_reward("", response, &gold).unwrap(),
            reward,
            "{response}"
        );
        assert_eq!(lenient_set_f1(response, &gold), 1.0, "{response}");
    }
    let gold = vec!["Ada Neuman".to_owned()];
    for response in [
        "<Answer>Ada Neuman</Answer>",
        "<answer>Ada Neu\u{200B}man</answer>",
    ] {
        assert_eq!(lenient_set_f1(response, &gold), 1.0, "{response}");
        assert_eq!(
            exact_reward("", response, &gold).unwrap(),
            0.0,
            "{response}"
        );
    }
}

#[test]
fn new_answer_properties_catch_their_planted_bugs() {
    let caught = |reward: &mut dyn RewardFn, property: &str| {
        let report = run_check(reward, 1200);
        let f = failure(&report, property).clone();
        assert!(f.rulegym.is_some(), "{f:#?}");
        f
    };
    // Counts items before normalising: "Ada Neuman, ada neuman" makes up a two-answer gold.
    let raw_count = |response: &str, answers: &[String]| {
        let Some(answer) = exact_tag(response) else {
            return 0.0;
        };
        let raw: std::collections::BTreeSet<&str> = answer
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        let gold: Vec<String> = answers.iter().map(|a| normalize_squad(a)).collect();
        let hits = raw
            .iter()
            .filter(|r| gold.contains(&normalize_squad(r)))
            .count();
        if hits == 0 {
            return 0.0;
        }
        let (p, r) = (
            hits as f64 / raw.len() as f64,
            (hits as f64 / gold.len() as f64).min(1.0),
        );
        2.0 * p * r / (p + r)
    };
    let f = caught(&mut Plain(raw_count), "repeated_items");
    assert_eq!(f.got.as_f64(), Some(1.0), "{f:#?}");
    // The issue's example, shrunk: two gold answers, one of them twice.
    assert_eq!(answers_of(&f.input).len(), 2, "{f:#?}");
    assert!((f.rulegym.unwrap() - 2.0 / 3.0).abs() < 1e-9, "{f:#?}");

    // The same, folding Unicode disguises before matching.
    let folded_raw_count = |response: &str, answers: &[String]| {
        let clean: String = response
            .chars()
            .filter(|c| !matches!(c, '\u{200B}'..='\u{200D}' | '\u{2060}' | '\u{FEFF}' | '\u{0300}'..='\u{036F}'))
            .map(|c| match c {
                'а' => 'a',
                'е' => 'e',
                'о' => 'o',
                'с' => 'c',
                'А' => 'A',
                'Е' => 'E',
                'О' => 'O',
                'Н' => 'H',
                'М' => 'M',
                'Т' => 'T',
                '\u{FF01}'..='\u{FF5E}' => char::from_u32(c as u32 - 0xFEE0).unwrap(),
                _ => c,
            })
            .collect();
        // Raw strings counted before folding: split the original, match the folded.
        let Some(original) = exact_tag(response) else {
            return 0.0;
        };
        let Some(folded) = exact_tag(&clean) else {
            return 0.0;
        };
        let raw: std::collections::BTreeSet<&str> = original
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        let gold: Vec<String> = answers.iter().map(|a| normalize_squad(a)).collect();
        let hits = folded
            .split(',')
            .filter(|r| gold.contains(&normalize_squad(r)))
            .count()
            .min(raw.len());
        if hits == 0 {
            return 0.0;
        }
        let (p, r) = (
            hits as f64 / raw.len() as f64,
            (hits as f64 / gold.len() as f64).min(1.0),
        );
        2.0 * p * r / (p + r)
    };
    let f = caught(&mut Plain(folded_raw_count), "unicode_disguise");
    assert!(
        f.base_got.is_some() && f.got.as_f64() > f.base_got,
        "{f:#?}"
    );

    // Unescapes HTML before reading the tag.
    let unescaping = |response: &str, answers: &[String]| {
        let text = response
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&#60;", "<")
            .replace("&#62;", ">");
        exact_tag(&text).map_or(0.0, |a| score(&a, answers, ScoreMode::Squad).f1)
    };
    let f = caught(&mut Plain(unescaping), "escaped_tag");
    assert!(response_of(&f.input).starts_with('&'), "{f:#?}");

    // A lenient judge: a confident override is taken at its word.
    let judge = |response: &str, answers: &[String]| {
        let lower = response.to_lowercase();
        if ["correct", "score 1", "reward 1"]
            .iter()
            .any(|w| lower.contains(w))
        {
            1.0
        } else {
            exact_reward("", response, answers).unwrap()
        }
    };
    let f = caught(&mut Plain(judge), "grader_override");
    assert_eq!(f.expected, "= 0");

    // Token F1 on the answer tag: junk that shares a token pays.
    let token = |response: &str, answers: &[String]| {
        exact_tag(response).map_or(0.0, |a| rulegym::reward::token_f1(&a, answers))
    };
    caught(&mut Plain(token), "junk_scores_zero");

    // Reads the reasoning when the answer tag is missing or empty.
    let reads_think = |response: &str, answers: &[String]| {
        if let Some(a) = exact_tag(response).filter(|a| !a.trim().is_empty()) {
            return score(&a, answers, ScoreMode::Squad).f1;
        }
        let text = normalize_squad(response);
        let hits = answers
            .iter()
            .filter(|g| text.contains(&normalize_squad(g)))
            .count();
        hits as f64 / answers.len() as f64
    };
    caught(&mut Plain(reads_think), "answer_in_think");

    // Strict first tag, falling back to variant spellings when it scores below 1: hedging
    // across spellings pays (it passes several_tags: two strict tags never reach the fallback).
    let fallback = |response: &str, answers: &[String]| {
        let strict = exact_tag(response).map_or(0.0, |a| score(&a, answers, ScoreMode::Squad).f1);
        if strict >= 1.0 {
            return strict;
        }
        let variants: Vec<String> = [
            ("<answer>", "</answer>"),
            ("<Answer>", "</Answer>"),
            ("<ANSWER>", "</ANSWER>"),
            ("< answer >", "</ answer >"),
            ("<answer >", "</answer >"),
        ]
        .iter()
        .filter_map(|(o, c)| {
            let start = response.find(o)? + o.len();
            let end = response[start..].find(c)? + start;
            Some(response[start..end].to_owned())
        })
        .collect();
        variants
            .iter()
            .map(|a| score(a, answers, ScoreMode::Squad).f1)
            .fold(strict, f64::max)
    };
    let report = run_check(&mut Plain(fallback), 1200);
    let f = failure(&report, "tag_variants");
    assert_eq!(
        (f.got.as_f64(), f.base_got),
        (Some(1.0), Some(1.0)),
        "{f:#?}"
    );
    assert!(report.failures.iter().all(|f| f.property != "several_tags"));

    // A numeric verifier that reads words and month names, and is off by one or by the day.
    let lenient_numbers = |response: &str, answers: &[String]| {
        let Some(answer) = exact_tag(response) else {
            return 0.0;
        };
        let near = |item: &str, gold: &str| -> bool {
            let item = normalize_squad(item);
            let words = [
                "zero",
                "one",
                "two",
                "three",
                "four",
                "five",
                "six",
                "seven",
                "eight",
                "nine",
                "ten",
                "eleven",
                "twelve",
                "thirteen",
                "fourteen",
                "fifteen",
                "sixteen",
                "seventeen",
                "eighteen",
                "nineteen",
                "twenty",
            ];
            let n = words
                .iter()
                .position(|w| *w == item)
                .map(|n| n as i64)
                .or_else(|| item.parse().ok());
            if let (Some(n), Ok(g)) = (n, gold.parse::<i64>()) {
                return (n - g).abs() <= 1;
            }
            // Dates: the year alone decides.
            gold.len() == 10 && item.contains(gold[..4].trim_start_matches('0'))
        };
        let items: Vec<&str> = answer.split(',').collect();
        let hits = answers
            .iter()
            .filter(|g| items.iter().any(|i| near(i, g)))
            .count();
        hits as f64 / answers.len() as f64
    };
    let f = caught(&mut Plain(lenient_numbers), "number_renderings");
    assert_eq!(f.expected, "= 0");
}

/// The tool calls of a conversation: (index of the assistant message, tool name, arguments).
fn tool_calls(messages: &[serde_json::Value]) -> Vec<(usize, String, serde_json::Value)> {
    let mut out = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        for call in m["tool_calls"].as_array().into_iter().flatten() {
            let f = &call["function"];
            let args = match &f["arguments"] {
                serde_json::Value::String(s) => serde_json::from_str(s).unwrap_or_default(),
                v => v.clone(),
            };
            out.push((i, f["name"].as_str().unwrap_or_default().to_owned(), args));
        }
    }
    out
}

/// A tool-use reward in process from a closure over (task, messages as JSON).
struct ToolPlain<F: FnMut(&rulegym::tooluse::task::Task, &[serde_json::Value]) -> f64>(F);

impl<F: FnMut(&rulegym::tooluse::task::Task, &[serde_json::Value]) -> f64> RewardFn
    for ToolPlain<F>
{
    fn rewards(&mut self, inputs: &[RewardInput], _: usize) -> Result<Vec<f64>, RewardError> {
        Ok(inputs
            .iter()
            .map(|i| {
                let task = serde_json::from_value(i.fields["task"].clone()).unwrap();
                let messages = i.fields["messages"].as_array().cloned().unwrap_or_default();
                (self.0)(&task, &messages)
            })
            .collect())
    }
}

#[test]
fn new_tool_use_properties_catch_their_planted_bugs() {
    use rulegym::rewardcheck::{ToolCaseSource, check_tools};
    use rulegym::tooluse::rulegen::{ScriptStep, oracle_script};
    let source = ToolCaseSource::generate(5, 30, 12).unwrap();
    let rubric = |task: &rulegym::tooluse::task::Task, messages: &[serde_json::Value]| {
        let messages: Vec<rulegym::llm::ChatMessage> =
            serde_json::from_value(serde_json::Value::Array(messages.to_vec())).unwrap();
        source.exact_reward(task, &messages).unwrap()
    };
    // Every new kind applies on this world, and rulegym's rubric meets every case.
    for p in Property::TOOL_GENERATED {
        for i in 0..12 {
            let case = source.case(p, i).unwrap();
            let Some(case) = case else {
                assert!(
                    p == Property::ToolSkippedSubgoalBelowOne,
                    "{p:?} on task {i} has no case"
                );
                continue;
            };
            assert!(case.holds(case.expected), "{p:?} {i}: {}", case.expected);
        }
    }
    let run = |reward: &mut dyn RewardFn| check_tools(&source, reward, 54, 1000).unwrap().unwrap();

    // Looks for forbidden actions in the last tool call only: an earlier deletion is dropped
    // from the conversation before scoring.
    let mut late_only = ToolPlain(|task, messages: &[serde_json::Value]| {
        let calls = tool_calls(messages);
        let last = calls.last().map(|c| c.0);
        let mut dropped_ids = Vec::new();
        let kept: Vec<serde_json::Value> = messages
            .iter()
            .enumerate()
            .filter(|(i, m)| {
                let deletes = calls.iter().any(|c| c.0 == *i && c.1 == "delete_record");
                if deletes && Some(*i) != last {
                    for call in m["tool_calls"].as_array().into_iter().flatten() {
                        dropped_ids.push(call["id"].clone());
                    }
                    return false;
                }
                !dropped_ids.contains(&m["tool_call_id"])
            })
            .map(|(_, m)| m.clone())
            .collect();
        rubric(task, &kept)
    });
    let report = run(&mut late_only);
    let f = failure(&report, "forbidden_anywhere_scores_zero");
    assert_eq!(
        (f.got.as_f64(), f.rulegym),
        (Some(1.0), Some(0.0)),
        "{f:#?}"
    );
    assert!(
        report
            .failures
            .iter()
            .all(|f| f.property != "forbidden_scores_zero")
    );

    // Checks which tools were called and how often the user was asked, not with what.
    let mut tool_names = ToolPlain(|task, messages: &[serde_json::Value]| {
        let called: std::collections::BTreeSet<String> =
            tool_calls(messages).into_iter().map(|c| c.1).collect();
        let oracle = oracle_script(task).unwrap();
        let needed = oracle.iter().all(|s| match s {
            ScriptStep::Call { tool, .. } => called.contains(tool),
            _ => true,
        });
        let asks = oracle
            .iter()
            .filter(|s| matches!(s, ScriptStep::Ask { .. }))
            .count();
        let asked = messages
            .iter()
            .filter(|m| m["role"] == "assistant" && m["tool_calls"].is_null())
            .count()
            .saturating_sub(1);
        f64::from(u8::from(
            needed && asked >= asks && !called.contains("delete_record"),
        ))
    });
    let report = run(&mut tool_names);
    failure(&report, "ignored_answer_below_one");
    failure(&report, "wrong_arguments_below_one");

    // An LLM-judge-like reward that believes the summary.
    let mut trusts_summary = ToolPlain(|task, messages: &[serde_json::Value]| {
        let last = messages
            .iter()
            .rev()
            .find(|m| m["role"] == "assistant")
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default()
            .to_lowercase();
        if last.contains("i updated") || last.contains("i sent") {
            1.0
        } else {
            rubric(task, messages)
        }
    });
    let report = run(&mut trusts_summary);
    let f = failure(&report, "false_claim_below_one");
    assert_eq!(f.got.as_f64(), Some(1.0), "{f:#?}");

    // Counts the calls that make progress instead of the sub-goals they satisfy.
    let mut counts_calls = ToolPlain(|task, messages: &[serde_json::Value]| {
        let progress =
            |tool: &str| ["list_relatives", "update_record", "send_message"].contains(&tool);
        let made = tool_calls(messages)
            .iter()
            .filter(|c| progress(&c.1))
            .count();
        let oracle = oracle_script(task).unwrap();
        let needed = oracle
            .iter()
            .filter(|s| matches!(s, ScriptStep::Call { tool, .. } if progress(tool)))
            .count();
        (made as f64 / needed as f64).min(1.0)
    });
    let report = run(&mut counts_calls);
    let f = failure(&report, "repeated_subgoal_counts_once");
    assert!(f.got.as_f64().unwrap() > f.rulegym.unwrap(), "{f:#?}");
}
