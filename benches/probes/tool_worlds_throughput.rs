//! Throughput of rule-generated tool worlds: tasks generated, and tasks verified (reference
//! solution replayed in the tool environment and scored by the Prolog rubric), per minute.
//!
//! `cargo run --release --example tool_worlds_throughput -- [COUNT] [RUNS]` (defaults 20000, 3).
//! Universe: the default config (100 trees, ~1,000 people). Prints each run and the medians.

use rulegym::tooluse::rubric::{RubricScorer, ScoreConfig};
use rulegym::tooluse::rulegen::{RuleGenConfig, generate, replay_oracle};
use rulegym::universe::{Universe, UniverseConfig};
use std::sync::Arc;
use std::time::Instant;

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let count: usize = args.next().map_or(Ok(20_000), |a| a.parse())?;
    let runs: usize = args.next().map_or(Ok(3), |a| a.parse())?;
    let universe = Universe::generate(&UniverseConfig::default())?;
    let threads = rayon::current_num_threads();
    println!(
        "universe: {} people; {count} tasks per run; {runs} runs; {threads} threads",
        universe.people.len()
    );
    let (mut gen_rates, mut ver_rates, mut e2e_rates) = (Vec::new(), Vec::new(), Vec::new());
    for run in 0..runs {
        let config = RuleGenConfig {
            seed: run as u64,
            ..RuleGenConfig::default()
        };
        let t0 = Instant::now();
        let tasks = generate(&universe, &config, count)?;
        // The CLI writes JSONL and the verifier reads it back: include both.
        let lines: Vec<String> = tasks
            .iter()
            .map(|w| serde_json::to_string(&w.task))
            .collect::<Result<_, _>>()?;
        let gen_s = t0.elapsed().as_secs_f64();
        let t1 = Instant::now();
        let rewards: Vec<f64> = {
            use rayon::prelude::*;
            lines
                .par_iter()
                .map_init(
                    || Arc::new(RubricScorer::new(ScoreConfig::default()).expect("engine")),
                    |scorer, line| {
                        let task = rulegym::tooluse::task::Task::from_json(line).expect("task");
                        replay_oracle(task, scorer.clone()).expect("replay").reward
                    },
                )
                .collect()
        };
        let ver_s = t1.elapsed().as_secs_f64();
        let ones = rewards.iter().filter(|&&r| r == 1.0).count();
        assert_eq!(ones, count, "every oracle replay must reach reward 1");
        let per_min = |s: f64| count as f64 * 60.0 / s;
        println!(
            "run {run}: generate {gen_s:.2} s ({:.0}/min), verify {ver_s:.2} s ({:.0}/min), \
             end to end {:.0}/min, reward 1.0 on {ones}/{count}",
            per_min(gen_s),
            per_min(ver_s),
            per_min(gen_s + ver_s)
        );
        gen_rates.push(per_min(gen_s));
        ver_rates.push(per_min(ver_s));
        e2e_rates.push(per_min(gen_s + ver_s));
    }
    println!(
        "median: generate {:.0}/min, verify {:.0}/min, end to end {:.0}/min",
        median(gen_rates),
        median(ver_rates),
        median(e2e_rates)
    );
    Ok(())
}
