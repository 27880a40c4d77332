//! Probe: where question generation spends its time (engine start, consult, verification).
//! `cargo run --release --example question_probe -- 100 10` (trees, questions per template).
use rulegym::engine::Engine;
use rulegym::question::{self, QuestionConfig};
use rulegym::universe::{Universe, UniverseConfig};
use std::time::Instant;

fn main() -> rulegym::Result<()> {
    let mut args = std::env::args()
        .skip(1)
        .map(|a| a.parse::<usize>().unwrap());
    let (trees, per) = (args.next().unwrap_or(100), args.next().unwrap_or(10));
    let t = Instant::now();
    let engine = Engine::new()?;
    println!("engine start {:?}", t.elapsed());
    let universe = Universe::generate(&UniverseConfig {
        num_family_trees: trees,
        ..Default::default()
    })?;
    let t = Instant::now();
    engine.consult("facts", &universe.engine_facts())?;
    println!("consult {:?}", t.elapsed());
    let config = QuestionConfig {
        per_template: per,
        ..Default::default()
    };
    let t = Instant::now();
    let (qs, _) = question::generate(&universe, &engine, &config, None)?;
    println!("generate {} questions {:?}", qs.len(), t.elapsed());
    let t = Instant::now();
    let mut times: Vec<(f64, String)> = qs
        .iter()
        .map(|q| {
            let t = Instant::now();
            q.plan.evaluate(&engine, &universe).unwrap();
            (t.elapsed().as_secs_f64() * 1e6, q.question.clone())
        })
        .collect();
    println!("re-evaluate all {:?}", t.elapsed());
    times.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap());
    println!(
        "median {:.0} us, p90 {:.0} us, max {:.0} us",
        times[times.len() / 2].0,
        times[times.len() * 9 / 10].0,
        times.last().unwrap().0
    );
    for (us, q) in times.iter().rev().take(3) {
        println!("{us:.0} us: {q}");
    }
    let t = Instant::now();
    for q in &qs {
        q.plan.evaluate_native(&universe).unwrap();
    }
    println!("native oracle all {:?}", t.elapsed());
    Ok(())
}
