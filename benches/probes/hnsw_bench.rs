//! HNSW build/query time and recall@10 against the exact flat index (feature `hnsw`), on
//! clustered unit vectors; optionally writes the vectors for the usearch peer script.
//!
//! cargo run --release --features hnsw --example hnsw_bench -- N DIM QUERIES [OUT_DIR]
//!
//! Prints one line per search width `ef` (threads: rayon's default pool).

use rulegym::retrieval::hnsw::{HnswIndex, HnswParams, recall_at_k};
use rulegym::retrieval::{FlatIndex, synthetic};
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize, d: usize| args.get(i).and_then(|s| s.parse().ok()).unwrap_or(d);
    let (n, dim, m) = (arg(1, 100_000), arg(2, 384), arg(3, 1000));
    let (clusters, noise) = (100, 0.1 / (dim as f32 / 64.0).sqrt());
    let data = synthetic::clustered_unit_vectors(n, dim, clusters, noise, 11, "base");
    let queries = synthetic::clustered_unit_vectors(m, dim, clusters, noise, 11, "queries");
    if let Some(out) = args.get(4) {
        std::fs::create_dir_all(out)?;
        std::fs::write(format!("{out}/base.f32"), bytemuck::cast_slice(&data))?;
        std::fs::write(format!("{out}/queries.f32"), bytemuck::cast_slice(&queries))?;
    }
    let flat = FlatIndex::new(dim, &data)?;
    let t = Instant::now();
    let exact = flat.search(&queries, 10)?;
    let flat_s = t.elapsed().as_secs_f64();
    let params = HnswParams::default();
    let t = Instant::now();
    let index = HnswIndex::new(dim, &data, params)?;
    let build_s = t.elapsed().as_secs_f64();
    println!(
        "n={n} dim={dim} queries={m} clusters={clusters} noise={noise:.4} threads={} m={} ef_construction={}",
        rayon::current_num_threads(),
        params.m,
        params.ef_construction
    );
    println!("flat exact: {:.1} queries/s (batch {m})", m as f64 / flat_s);
    println!(
        "hnsw build: {build_s:.2} s ({:.0} vectors/s)",
        n as f64 / build_s
    );
    for ef in [16, 32, 64, 128, 256] {
        // one query at a time on the pool, as the library searches a batch
        let t = Instant::now();
        let approx = index.search_ef(&queries, 10, ef)?;
        let s = t.elapsed().as_secs_f64();
        println!(
            "hnsw ef={ef:4}: recall@10 {:.4}, {:.0} queries/s, {:.1} us/query",
            recall_at_k(&approx, &exact, 10),
            m as f64 / s,
            s * 1e6 / m as f64
        );
    }
    Ok(())
}
