//! A rule-generated tool-use task (its own tools, a hidden user context, a rubric), played to
//! the end by its reference script in the tool environment, and scored by the Prolog rubric.
//!
//! `cargo run --release --example tool_task`

use rulegym::tooluse::rubric::{RubricScorer, ScoreConfig};
use rulegym::tooluse::rulegen::{self, RuleGenConfig};
use rulegym::universe::{Universe, UniverseConfig};
use std::sync::Arc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let universe = Universe::generate(&UniverseConfig {
        num_family_trees: 10,
        ..UniverseConfig::default()
    })?;
    let world = rulegen::generate(&universe, &RuleGenConfig::default(), 1)?.remove(0);
    let task = world.task;
    println!("instruction: {}", task.instruction);
    for tool in &task.tools {
        println!("tool: {}", tool.name);
    }
    // One scorer (one Prolog engine) serves every episode of a process.
    let scorer = Arc::new(RubricScorer::new(ScoreConfig::default())?);
    let episode = rulegen::replay_oracle(task, scorer)?;
    for message in &episode.messages {
        let text = message.content.as_deref().unwrap_or("(tool call)");
        println!("{:>9}: {}", message.role, text.lines().next().unwrap_or(""));
    }
    println!(
        "ended by {:?}; rubric reward {}",
        episode.reason, episode.reward
    );
    Ok(())
}
