//! Memory of one rubric scorer over many distinct tasks: replays the oracle of N rule-generated
//! tasks (generated 1,000 at a time, so the tasks themselves are not held) through ONE
//! `RubricScorer` and prints the process RSS after every 1,000 tasks, and the peak.
//!
//! `cargo run --release --example rubric_memory -- 10000 1024` (the default cap) and
//! `cargo run --release --example rubric_memory -- 10000 0` (0: no cap, every rubric stays in
//! one engine, as before the cap existed). Asserts reward 1.0 for every task.

use rulegym::tooluse::rubric::{RubricScorer, ScoreConfig};
use rulegym::tooluse::rulegen::{RuleGenConfig, generate, replay_oracle};
use rulegym::universe::{Universe, UniverseConfig};
use std::sync::Arc;

fn status_kb(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map_or(Ok(10_000), |s| s.parse())?;
    let cap: usize = args.next().map_or(Ok(1024), |s| s.parse())?;
    let max_rubrics = if cap == 0 { usize::MAX } else { cap };
    let universe = Universe::generate(&UniverseConfig::default())?;
    let scorer = Arc::new(RubricScorer::new(ScoreConfig {
        max_rubrics,
        ..ScoreConfig::default()
    })?);
    let start = std::time::Instant::now();
    let base = status_kb("VmRSS:");
    println!(
        "cap {cap} (0: none); RSS before scoring {:.0} MB",
        base as f64 / 1e3
    );
    let mut done = 0;
    for chunk in 0.. {
        if done >= n {
            break;
        }
        let count = (n - done).min(1000);
        let config = RuleGenConfig {
            seed: chunk,
            ..RuleGenConfig::default()
        };
        for w in generate(&universe, &config, count)? {
            let episode = replay_oracle(w.task, scorer.clone())?;
            assert_eq!(episode.reward, 1.0, "oracle reward");
        }
        done += count;
        println!(
            "{done:>6} tasks: RSS {:>5.0} MB (+{:.0} MB), rubrics in engine {}, engines started {}",
            status_kb("VmRSS:") as f64 / 1e3,
            (status_kb("VmRSS:") as f64 - base as f64) / 1e3,
            scorer.loaded_rubrics(),
            scorer.engines_started()
        );
    }
    println!(
        "peak RSS {:.0} MB; {:.1} s; all {done} rewards 1.0",
        status_kb("VmHWM:") as f64 / 1e3,
        start.elapsed().as_secs_f64()
    );
    Ok(())
}
