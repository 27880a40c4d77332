//! The user examples in `examples/` run as written and print what they promise (`cargo test`
//! builds them next to this binary's directory: `target/<profile>/examples/`).

use std::path::PathBuf;
use std::process::Command;

fn example(name: &str) -> String {
    let deps = std::env::current_exe().expect("test binary path");
    let dir: PathBuf = deps
        .parent()
        .and_then(|d| d.parent())
        .expect("target/<profile>")
        .join("examples");
    let bin = dir.join(name);
    assert!(
        bin.exists(),
        "{} is missing: cargo test builds the examples",
        bin.display()
    );
    let out = Command::new(&bin).output().expect("example runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{name} failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn search_episode_pays_the_gold_answer_and_not_a_wrong_one() {
    let out = example("search_episode");
    assert!(out.contains("-> reward 1 (done: true)"), "{out}");
    assert!(
        out.contains("\"Nobody Known\" -> reward 0 (done: true)"),
        "{out}"
    );
}

#[test]
fn tool_task_reference_script_earns_the_full_rubric_reward() {
    let out = example("tool_task");
    assert!(out.starts_with("instruction: "), "{out}");
    assert!(out.contains("tool: "), "{out}");
    assert!(out.trim_end().ends_with("rubric reward 1"), "{out}");
}

#[test]
fn grpo_advantages_rank_answers_within_their_group() {
    let out = example("grpo_advantages");
    let line = |answer: &str| {
        out.lines()
            .find(|l| l.trim_start().starts_with(&format!("{answer}:")))
            .unwrap_or_else(|| panic!("{answer} missing: {out}"))
            .to_owned()
    };
    assert!(
        line("Ann Lee, Bo Tan").contains("reward 1.000, advantage +"),
        "{out}"
    );
    assert!(
        line("Cy Ray").contains("reward 0.000, advantage -"),
        "{out}"
    );
    // A group whose answers all score the same teaches nothing.
    assert!(line("Bo Tan").contains("advantage +0.000"), "{out}");
}
