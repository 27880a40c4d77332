//! Retrieval benches: exact flat search on 100,000 x 384 f32 (the faiss comparison shape), the
//! machine's read bandwidth measured in the same run (the batch-1 bound), and the built-in
//! encoder. `scripts/bench-retrieval-peers.sh` runs this next to faiss-cpu and writes ratios.
//!
//! Every bench asserts its output: search results are checked against the canonical scorer on
//! a sample of queries before timing.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use rulegym::retrieval::flat::naive_search;
use rulegym::retrieval::{BuiltinConfig, BuiltinEncoder, Encoder, FlatIndex, TextKind, synthetic};
use std::hint::black_box;
use std::time::Duration;

const N: usize = 100_000;
const D: usize = 384;

fn data(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed | 1;
    let mut v: Vec<f32> = (0..n * D)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        })
        .collect();
    for row in v.chunks_mut(D) {
        let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt();
        row.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

/// Sums `data` with wide independent accumulators on 2 threads: a read-bandwidth probe.
fn read_sum(data: &[f32]) -> f32 {
    use rayon::prelude::*;
    data.par_chunks(data.len().div_ceil(rayon::current_num_threads()))
        .map(sum_wide)
        .sum()
}

#[cfg(target_arch = "x86_64")]
fn sum_wide(c: &[f32]) -> f32 {
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: avx2 detected just above.
        return unsafe { sum_avx2(c) };
    }
    c.iter().sum()
}

#[cfg(not(target_arch = "x86_64"))]
fn sum_wide(c: &[f32]) -> f32 {
    c.iter().sum()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn sum_avx2(c: &[f32]) -> f32 {
    use std::arch::x86_64::*;
    let mut acc = [_mm256_setzero_ps(); 8];
    let chunks = c.chunks_exact(64);
    let rest: f32 = chunks.remainder().iter().sum();
    for ch in chunks {
        for (j, a) in acc.iter_mut().enumerate() {
            // SAFETY: `ch` has 64 floats; j * 8 + 8 <= 64.
            *a = _mm256_add_ps(*a, unsafe { _mm256_loadu_ps(ch.as_ptr().add(j * 8)) });
        }
    }
    let mut out = [0f32; 8];
    let mut t = acc[0];
    for a in &acc[1..] {
        t = _mm256_add_ps(t, *a);
    }
    // SAFETY: `out` has 8 floats.
    unsafe { _mm256_storeu_ps(out.as_mut_ptr(), t) };
    out.iter().sum::<f32>() + rest
}

fn flat(c: &mut Criterion) {
    let rows = data(N, 7);
    let index = FlatIndex::new(D, &rows).unwrap();
    let queries = data(1024, 99);
    // Correctness before timing: a sample of queries equals the naive reference.
    let sample = &queries[..8 * D];
    assert_eq!(
        index.search(sample, 10).unwrap(),
        naive_search(D, &rows, sample, 10)
    );

    let mut g = c.benchmark_group("read_bandwidth");
    g.sample_size(20).measurement_time(Duration::from_secs(3));
    g.throughput(Throughput::Bytes((N * D * 4) as u64));
    g.bench_function("100000x384_f32", |b| b.iter(|| black_box(read_sum(&rows))));
    g.finish();

    let mut g = c.benchmark_group("flat_100000x384_k10");
    g.sample_size(10).measurement_time(Duration::from_secs(4));
    for batch in [1usize, 32, 256, 1024] {
        g.throughput(Throughput::Elements(batch as u64));
        let q = &queries[..batch * D];
        g.bench_with_input(BenchmarkId::new("batch", batch), &batch, |b, _| {
            b.iter(|| black_box(index.search(q, 10).unwrap()))
        });
    }
    g.finish();
}

fn encoder(c: &mut Criterion) {
    let (docs, queries) = synthetic::corpus(10_000, 1);
    let texts: Vec<&str> = docs.iter().map(|d| d.contents.as_str()).collect();
    let enc = BuiltinEncoder::fit(BuiltinConfig::default(), &texts).unwrap();
    let qs: Vec<&str> = queries
        .iter()
        .take(1024)
        .map(|q| q.query.as_str())
        .collect();
    let mut g = c.benchmark_group("builtin_encoder");
    g.sample_size(10).measurement_time(Duration::from_secs(3));
    g.throughput(Throughput::Elements(texts.len() as u64));
    g.bench_function("passages_10000", |b| {
        b.iter(|| black_box(enc.encode(&texts, TextKind::Passage).unwrap()))
    });
    g.throughput(Throughput::Elements(qs.len() as u64));
    g.bench_function("queries_1024", |b| {
        b.iter(|| black_box(enc.encode(&qs, TextKind::Query).unwrap()))
    });
    g.finish();
}

/// The certifier's searches (every person's name over the built-in index of a universe's
/// articles, top 5), dense scan vs sparse search: the same hits bit for bit
/// (`tests/integration/retrieval.rs`), at 1,036 and 10,352 people.
fn certifier_searches(c: &mut Criterion) {
    let mut g = c.benchmark_group("certifier_searches");
    g.sample_size(10).measurement_time(Duration::from_secs(5));
    for trees in [100, 1000] {
        let universe = rulegym::universe::Universe::generate(&rulegym::universe::UniverseConfig {
            num_family_trees: trees,
            ..Default::default()
        })
        .unwrap();
        let index =
            rulegym::dataset::build::article_index(&rulegym::corpus::articles(&universe)).unwrap();
        let names: Vec<&str> = universe.people.iter().map(|p| p.name.as_str()).collect();
        let q = index.encoder().encode(&names, TextKind::Query).unwrap();
        let people = universe.people.len();
        assert_eq!(
            index.flat().search_sparse(&q, 5).unwrap(),
            index.flat().search(&q, 5).unwrap()
        );
        g.throughput(Throughput::Elements(people as u64));
        g.bench_with_input(BenchmarkId::new("dense", people), &people, |b, _| {
            b.iter(|| black_box(index.flat().search(&q, 5).unwrap()))
        });
        g.bench_with_input(BenchmarkId::new("sparse", people), &people, |b, _| {
            b.iter(|| black_box(index.flat().search_sparse(&q, 5).unwrap()))
        });
    }
    g.finish();
}

criterion_group!(benches, flat, encoder, certifier_searches);
criterion_main!(benches);
