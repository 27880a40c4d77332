//! Index load time, checksum included: builds a flat index of N synthetic documents, saves it and
//! loads it 7 times; prints the file size and the median load.
//! `cargo run --release --example index_load -- 20000` (BENCHMARKS.md, "Hostile input").

use rulegym::retrieval::{IndexKind, SearchIndex, synthetic};
use std::time::Instant;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20_000);
    let (corpus, _) = synthetic::corpus(n, 1);
    let index = SearchIndex::build(
        corpus,
        &"builtin".parse().expect("encoder"),
        IndexKind::Flat,
    )
    .expect("index builds");
    let dir = tempfile::tempdir().expect("temporary folder");
    let path = dir.path().join("probe.rgi");
    index.save(&path).expect("index saves");
    let size = std::fs::metadata(&path).expect("saved").len();
    let mut times: Vec<f64> = (0..7)
        .map(|_| {
            let start = Instant::now();
            let loaded = SearchIndex::load(&path).expect("index loads");
            assert_eq!(loaded.docs().len(), n);
            start.elapsed().as_secs_f64()
        })
        .collect();
    times.sort_by(f64::total_cmp);
    println!(
        "{n} documents, {size} bytes, median load {:.1} ms",
        times[3] * 1e3
    );
}
