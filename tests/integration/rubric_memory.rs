//! The rubric scorer's memory stays bounded across many tasks: scryer keeps the memory of every
//! consulted clause, so the scorer swaps in a fresh engine after `max_rubrics` distinct rubrics.
//! Checked on the Prolog side (the engine's own count of rubric predicates) and by rewards that
//! stay exact across engine swaps.

use rulegym::tooluse::rubric::{RubricScorer, ScoreConfig};
use rulegym::tooluse::rulegen::{RuleGenConfig, generate, replay_oracle};
use rulegym::universe::{Universe, UniverseConfig};
use std::sync::Arc;

fn tasks(count: usize) -> Vec<rulegym::tooluse::task::Task> {
    let universe = Universe::generate(&UniverseConfig {
        seed: 11,
        num_family_trees: 12,
        ..UniverseConfig::default()
    })
    .unwrap();
    generate(&universe, &RuleGenConfig::default(), count)
        .unwrap()
        .into_iter()
        .map(|w| w.task)
        .collect()
}

fn scorer(max_rubrics: usize) -> Arc<RubricScorer> {
    Arc::new(
        RubricScorer::new(ScoreConfig {
            max_rubrics,
            ..ScoreConfig::default()
        })
        .unwrap(),
    )
}

#[test]
fn rubric_count_stays_bounded_and_rewards_exact() {
    let tasks = tasks(40);
    let capped = scorer(8);
    for (i, task) in tasks.iter().enumerate() {
        let episode = replay_oracle(task.clone(), capped.clone()).unwrap();
        assert_eq!(episode.reward, 1.0, "task {i} {}", task.id);
        let loaded = capped.loaded_rubrics();
        assert!((1..=8).contains(&loaded), "{loaded} rubrics after task {i}");
        assert_eq!(capped.engine_rubric_predicates().unwrap(), loaded);
    }
    // 40 distinct rubrics, 8 per engine: the 9th, 17th, 25th and 33rd started a new one.
    assert_eq!(capped.engines_started(), 5);
    assert_eq!(capped.loaded_rubrics(), 8);

    // Scoring a task again that the engine holds costs no consult and no swap.
    let last = tasks.last().unwrap().clone();
    assert_eq!(replay_oracle(last, capped.clone()).unwrap().reward, 1.0);
    assert_eq!((capped.engines_started(), capped.loaded_rubrics()), (5, 8));

    // Without the cap the engine keeps every rubric: what the swap prevents.
    let uncapped = scorer(usize::MAX);
    for task in &tasks {
        replay_oracle(task.clone(), uncapped.clone()).unwrap();
    }
    assert_eq!(uncapped.engine_rubric_predicates().unwrap(), tasks.len());
    assert_eq!(uncapped.engines_started(), 1);

    // A cap of 0 counts as 1 (no error, no panic).
    let one = scorer(0);
    for task in &tasks[..3] {
        assert_eq!(
            replay_oracle(task.clone(), one.clone()).unwrap().reward,
            1.0
        );
    }
    assert_eq!((one.loaded_rubrics(), one.engines_started()), (1, 3));
}
