//! Probe: engine start-up, fact loading and a few queries on a generated universe.
//! `cargo run --release --example engine_probe -- 1000` (number of trees).
use rulegym::engine::{Engine, Term, Var};
use rulegym::universe::{Universe, UniverseConfig};
use std::time::Instant;

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
    let facts = universe.facts();
    println!(
        "universe: {} people, {} clauses, {:?}",
        universe.people.len(),
        facts.lines().count(),
        t.elapsed()
    );
    let t = Instant::now();
    let engine = Engine::new()?;
    println!("engine start: {:?}", t.elapsed());
    let t = Instant::now();
    engine.consult("facts", &facts)?;
    println!("consult {} bytes: {:?}", facts.len(), t.elapsed());
    let x = Var::numbered(0);
    let name = universe.people[5].name.clone();
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
            &Term::compound(rel, [Term::atom(name.clone()), Term::var(&x)]),
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
