//! Probe: engine start-up, fact loading and a few queries on a generated universe.
//! `cargo run --release --example engine_probe -- 1000` (number of trees).
use rulegym::engine::{Engine, Term, Var};
use rulegym::universe::{Universe, UniverseConfig};
use std::time::Instant;

/// Resident set size of this process, in MB (Linux).
fn rss_mb() -> f64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: f64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0.0);
    pages * 4096.0 / 1e6
}

fn main() -> rulegym::Result<()> {
    let trees = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100);
    let config = UniverseConfig {
        num_family_trees: trees,
        ..Default::default()
    };
    let t = Instant::now();
    let universe = Universe::generate(&config)?;
    let facts = universe.engine_facts();
    println!(
        "universe: {} people, {} clauses, {:?}",
        universe.people.len(),
        facts.lines().count(),
        t.elapsed()
    );
    let t = Instant::now();
    let engine = Engine::new()?;
    println!("engine start: {:?}", t.elapsed());
    let before = rss_mb();
    let t = Instant::now();
    engine.consult("facts", &facts)?;
    let after = rss_mb();
    println!("consult {} bytes: {:?}", facts.len(), t.elapsed());
    println!(
        "RSS {before:.0} MB -> {after:.0} MB: {:.2} KB per clause, {:.1} KB per person",
        (after - before) * 1e3 / facts.lines().count() as f64,
        (after - before) * 1e3 / universe.people.len() as f64
    );
    let x = Var::numbered(0);
    // The engine holds people by id (`Universe::engine_facts`).
    let name = 5;
    for rel in [
        "parent",
        "child",
        "sibling",
        "friend",
        "married",
        "mother",
        "cousin",
        "grandchild",
    ] {
        let t = Instant::now();
        let rows = engine.query(
            &Term::compound(rel, [Term::Int(name), Term::var(&x)]),
            std::slice::from_ref(&x),
        )?;
        println!(
            "{rel}({name}, X): {} answers in {:?}",
            rows.len(),
            t.elapsed()
        );
    }
    Ok(())
}
