//! GRPO's group-relative advantages from rulegym rewards: two prompts, four sampled answers
//! each; an answer is pushed up when it beat its group's mean and down when it fell short.
//!
//! `cargo run --release --example grpo_advantages`

use rulegym::grpo::{GrpoConfig, group_advantages};
use rulegym::reward::{ScoreMode, score};

fn main() -> Result<(), rulegym::grpo::GrpoError> {
    let gold = ["Ann Lee".to_owned(), "Bo Tan".to_owned()];
    let groups = [
        ["Ann Lee, Bo Tan", "Ann Lee", "Cy Ray", "bo tan, ann lee"],
        ["Bo Tan", "Bo Tan", "Bo Tan", "Bo Tan"],
    ];
    let mut rewards = Vec::new();
    for group in &groups {
        for answer in group {
            rewards.push(score(answer, &gold, ScoreMode::Squad).f1 as f32);
        }
    }
    let mut advantages = vec![0.0; rewards.len()];
    group_advantages(&rewards, 4, &GrpoConfig::default(), &mut advantages)?;
    for ((answer, reward), advantage) in groups.iter().flatten().zip(&rewards).zip(&advantages) {
        println!("{answer:>18}: reward {reward:.3}, advantage {advantage:+.3}");
    }
    Ok(())
}
