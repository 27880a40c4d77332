//! HNSW build/query time and recall@10 against the exact flat index (feature `hnsw`), on
//! clustered unit vectors; optionally writes the vectors for the usearch peer script.
//!
//! cargo run --release --features hnsw,testkit --example hnsw_bench -- N DIM QUERIES [OUT_DIR [ROUNDS]]
//!
//! Prints one line per search width `ef` and round (threads: rayon's default pool). With
//! `OUT_DIR`, the built graph is saved there (`rulegym-graph-N-DIM.bin`) and reused by the
//! next run instead of rebuilding (delete it, or set `HNSW_BENCH_REBUILD=1`, to rebuild).

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
    let cache = args
        .get(4)
        .map(|out| std::path::PathBuf::from(format!("{out}/rulegym-graph-{n}-{dim}.bin")));
    let rebuild = std::env::var_os("HNSW_BENCH_REBUILD").is_some();
    let t = Instant::now();
    let (index, built) = match &cache {
        Some(path) if path.exists() && !rebuild => {
            let mut r = std::io::BufReader::new(std::fs::File::open(path)?);
            (HnswIndex::with_graph(dim, &data, params, &mut r)?, false)
        }
        _ => {
            let index = HnswIndex::new(dim, &data, params)?;
            if let Some(path) = &cache {
                let mut w = std::io::BufWriter::new(std::fs::File::create(path)?);
                index.write_graph(&mut w)?;
            }
            (index, true)
        }
    };
    let build_s = t.elapsed().as_secs_f64();
    println!(
        "n={n} dim={dim} queries={m} clusters={clusters} noise={noise:.4} threads={} m={} ef_construction={}",
        rayon::current_num_threads(),
        params.m,
        params.ef_construction
    );
    println!("flat exact: {:.1} queries/s (batch {m})", m as f64 / flat_s);
    if built {
        println!(
            "hnsw build: {build_s:.2} s ({:.0} vectors/s)",
            n as f64 / build_s
        );
    } else {
        println!("hnsw graph loaded from the cache in {build_s:.2} s (not rebuilt)");
    }
    let rounds = arg(5, 1);
    for ef in (0..rounds).flat_map(|_| [16, 32, 64, 128, 256]) {
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
