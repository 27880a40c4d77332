//! The main side of a `rulegym generate` at PhantomWiki's 10K-people configuration, stage by
//! stage (what runs beside the engine's consult; BENCHMARKS.md "The engine holds people by id"):
//! article rendering, the facts texts, fitting and encoding the built-in index, and the
//! certifier's searches. Medians of 5; run it with `RAYON_NUM_THREADS=1` for single-core costs.
//! `cargo run --release --example index_profile -- [TREES]` (default 1,000 trees).
use rulegym::retrieval::{BuiltinConfig, BuiltinEncoder, Encoder, TextKind};
use rulegym::search::oracle::Certifier;
use rulegym::universe::{Universe, UniverseConfig};
use std::time::Instant;

/// Median wall time of 5 runs of `f`, in milliseconds.
fn median_ms<T>(mut f: impl FnMut() -> T) -> f64 {
    let mut times: Vec<f64> = (0..5)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(f());
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[2]
}

fn main() -> rulegym::Result<()> {
    let trees = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1000);
    let universe = Universe::generate(&UniverseConfig {
        num_family_trees: trees,
        ..Default::default()
    })?;
    println!("{} people", universe.people.len());
    let articles = rulegym::corpus::articles(&universe);
    println!(
        "articles: {:.1} ms",
        median_ms(|| rulegym::corpus::articles(&universe))
    );
    println!("facts.pl text: {:.1} ms", median_ms(|| universe.facts()));
    println!(
        "engine facts text: {:.1} ms",
        median_ms(|| universe.engine_facts())
    );
    let contents: Vec<String> = articles
        .iter()
        .enumerate()
        .map(|(i, a)| a.record(i as u32).contents)
        .collect();
    let texts: Vec<&str> = contents.iter().map(String::as_str).collect();
    println!(
        "index fit (document frequencies): {:.1} ms",
        median_ms(|| BuiltinEncoder::fit(BuiltinConfig::default(), &texts))
    );
    let encoder = BuiltinEncoder::fit(BuiltinConfig::default(), &texts)?;
    println!(
        "index encode ({} passages): {:.1} ms",
        texts.len(),
        median_ms(|| encoder.encode(&texts, TextKind::Passage))
    );
    let index = rulegym::dataset::build::article_index(&articles)?;
    println!(
        "certifier (every name and rare attribute searched): {:.1} ms",
        median_ms(|| Certifier::new(&universe, &index, Default::default()))
    );
    Ok(())
}
