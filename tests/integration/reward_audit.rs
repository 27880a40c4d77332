//! `rulegym reward-check --audit LOG`: a trainer's logged rewards beside rulegym's exact reward.
//! A log written as a buggy trainer would (a planted reward that pays untagged answers,
//! repeated items, subsets and wrong answers) is flagged line by line, grouped by the property
//! each divergence breaks, with the reward paid beyond the exact one; a correct reward's log
//! passes; unreadable lines are named and the rest audited.

use super::cli::{generate_small, rulegym, run};
use rulegym::dataset;
use serde_json::{Value, json};

/// A planted buggy reward: 1 whenever a gold answer appears anywhere in the response.
fn buggy(response: &str, answers: &[String]) -> f64 {
    let lower = response.to_lowercase();
    if answers.iter().any(|a| lower.contains(&a.to_lowercase())) {
        1.0
    } else {
        0.0
    }
}

#[test]
fn an_audit_flags_a_buggy_trainers_rewards_by_property_and_passes_a_correct_one() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    generate_small(&data);
    let questions = dataset::load_questions(&data).unwrap();
    let multi = questions.iter().find(|q| q.answers.len() >= 2).unwrap();
    let one = questions.iter().find(|q| q.answers.len() == 1).unwrap();
    let gold = multi.answers.join(", ");
    let other = &one.answers[0];
    let responses = [
        (multi, format!("<answer>{gold}</answer>")),
        (multi, gold.clone()),
        (
            multi,
            format!(
                "<answer>{}, {}</answer>",
                multi.answers[0],
                multi.answers[0].to_lowercase()
            ),
        ),
        (multi, format!("<answer>{}</answer>", multi.answers[0])),
        (
            one,
            format!("<think>{other}?</think><answer>Nobody Atall</answer>"),
        ),
        (one, format!("<answer>{other}</answer>")),
    ];
    // The buggy trainer's log, half as plain lines (by id), half as verl's dump (gts).
    let mut log = String::new();
    let mut exact_total = 0.0;
    let mut paid_total = 0.0;
    for (i, (q, response)) in responses.iter().enumerate() {
        let reward = buggy(response, &q.answers);
        let exact = rulegym::rewardcheck::exact_reward(&q.question, response, &q.answers).unwrap();
        paid_total += (reward - exact).max(0.0);
        exact_total += exact;
        let line = if i % 2 == 0 {
            json!({"id": q.id, "response": response, "reward": reward})
        } else {
            json!({"input": q.question, "output": response, "gts": {"target": q.answers},
                   "score": reward, "step": 1})
        };
        log.push_str(&format!("{line}\n"));
    }
    let path = dir.path().join("buggy.jsonl");
    std::fs::write(&path, &log).unwrap();
    let out_json = dir.path().join("audit.json");
    // The audit of the log at `path`: its exit, and its report.
    let audited = || {
        let out = run(rulegym()
            .args(["reward-check", "--audit"])
            .arg(&path)
            .arg("--dataset")
            .arg(&data)
            .arg("--out")
            .arg(&out_json));
        let report: Value = serde_json::from_slice(&std::fs::read(&out_json).unwrap()).unwrap();
        (out, report)
    };
    let (out, report) = audited();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(report["rollouts"], 6);
    assert_eq!(report["agree"], 2, "{report:#}");
    assert_eq!(report["diverge"], 4);
    let by = &report["by_property"];
    for (property, line) in [
        ("no_tag_scores_zero", 2),
        ("repeated_items", 3),
        ("subset_below_one", 4),
        ("wrong_scores_zero", 5),
    ] {
        assert_eq!(by[property]["count"], 1, "{property}: {report:#}");
        assert_eq!(by[property]["examples"][0]["line"], line, "{property}");
    }
    let overpaid = report["overpaid"].as_f64().unwrap();
    assert!(
        (overpaid - paid_total).abs() < 1e-9,
        "{overpaid} vs {paid_total}"
    );
    let mean_exact = report["mean_exact"].as_f64().unwrap();
    assert!((mean_exact - exact_total / 6.0).abs() < 1e-9);

    // The same responses with the exact rewards: no divergence, exit 0.
    let correct: String = responses
        .iter()
        .map(|(q, r)| {
            let reward = rulegym::rewardcheck::exact_reward(&q.question, r, &q.answers).unwrap();
            format!("{}\n", json!({"id": q.id, "response": r, "reward": reward}))
        })
        .collect();
    std::fs::write(&path, correct).unwrap();
    let (out, report) = audited();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        (report["diverge"].clone(), report["agree"].clone()),
        (json!(0), json!(6))
    );

    // Unreadable lines are named; the others are audited, and nothing is lost.
    let mut mixed = log.clone();
    mixed.push_str("not json\n{\"id\": \"nope\", \"response\": \"x\", \"reward\": 0}\n");
    mixed.push_str(&format!("{}\n", json!({"id": one.id, "response": "x"})));
    std::fs::write(&path, mixed).unwrap();
    let (out, report) = audited();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(report["rollouts"], 6);
    let errors: Vec<(u64, String)> = report["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["line"].as_u64().unwrap(),
                e["message"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        errors.iter().map(|e| e.0).collect::<Vec<_>>(),
        [7, 8, 9],
        "{errors:?}"
    );
    assert!(
        errors[1].1.contains("nope") && errors[2].1.contains("no reward"),
        "{errors:?}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("line 8: no question with id \"nope\""),
        "{stderr}"
    );
}
