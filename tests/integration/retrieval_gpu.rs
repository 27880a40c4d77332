//! GPU flat search (WGSL through wgpu) against the CPU flat index: exact indices, scores within
//! the rounding bound, ties, multi-chunk bindings, bad input, and the no-adapter error.

use super::cli::{rulegym, run, run_ok};
use rand::Rng;
use rulegym::gpu::{GpuContext, GpuError};
use rulegym::retrieval::gpu::{GpuFlatIndex, MAX_K, score_tolerance};
use rulegym::retrieval::{FlatIndex, RetrievalError};

/// The GPU context (every GPU test's), or `None` after a loud message when the machine has no
/// adapter; a missing adapter fails the test when `CI` or `RULEGYM_REQUIRE_GPU` is set (CI
/// installs lavapipe; `scripts/gpu-recipe.sh run` sets the latter on a lent GPU machine).
pub(crate) fn context(test: &str) -> Option<GpuContext> {
    match GpuContext::new() {
        Ok(ctx) => {
            eprintln!("GPU adapter: {}", ctx.describe());
            Some(ctx)
        }
        Err(e @ GpuError::NoAdapter(_)) => {
            super::skip::skip(test, &e.to_string(), Some("RULEGYM_REQUIRE_GPU"));
            None
        }
        Err(e) => panic!("GPU setup failed: {e}"),
    }
}

/// Values in -2..=2: every dot product is exact in f32 whatever the association, so GPU and
/// CPU scores must be bit-identical and ties are frequent. Every 7th row duplicates an
/// earlier one (ties between distinct rows).
fn integer_data(seed: u64, n: usize, dim: usize) -> Vec<f32> {
    let mut rng = rulegym::seed::stream(seed, "retrieval-gpu-int", 0);
    let mut data: Vec<f32> = (0..n * dim)
        .map(|_| rng.random_range(-2i32..=2) as f32)
        .collect();
    for r in (7..n).step_by(7) {
        let src = rng.random_range(0..r);
        data.copy_within(src * dim..(src + 1) * dim, r * dim);
    }
    data
}

fn unit_data(seed: u64, n: usize, dim: usize) -> Vec<f32> {
    let mut rng = rulegym::seed::stream(seed, "retrieval-gpu-float", 0);
    let mut data: Vec<f32> = (0..n * dim)
        .map(|_| rng.random_range(-1.0f32..1.0))
        .collect();
    for v in data.chunks_exact_mut(dim) {
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter_mut().for_each(|x| *x /= n);
    }
    data
}

/// (dim, rows, queries, k): single rows, tile boundaries (2,048 rows), k above the row count.
const EXACT_CASES: &[(usize, usize, usize, usize)] = &[
    (1, 1, 3, 1),
    (1, 300, 4, 50),
    (3, 17, 5, 40),
    (7, 2048, 9, 10),
    (16, 5000, 33, 10),
    (24, 4097, 3, 300),
    (5, 70, 2, 1),
];

#[test]
fn gpu_flat_equals_cpu_exactly_on_integer_data_with_ties() {
    let Some(ctx) = context("GPU-vs-CPU flat search (integer data)") else {
        return;
    };
    for (i, &(dim, n, m, k)) in EXACT_CASES.iter().enumerate() {
        let data = integer_data(i as u64, n, dim);
        let queries = integer_data(100 + i as u64, m, dim);
        let cpu = FlatIndex::new(dim, &data).unwrap();
        let gpu = GpuFlatIndex::new(&ctx, &cpu).unwrap();
        let want = cpu.search(&queries, k).unwrap();
        let got = gpu.search(&queries, k).unwrap();
        assert_eq!(
            got, want,
            "case {i}: dim {dim}, rows {n}, queries {m}, k {k}"
        );
        let ties = want
            .iter()
            .flat_map(|h| h.windows(2))
            .filter(|w| w[0].score == w[1].score)
            .count();
        assert!(ties > 0 || k == 1, "case {i} has no ties to break");
    }
}

#[test]
fn gpu_flat_matches_cpu_on_float_data_within_tolerance() {
    let Some(ctx) = context("GPU-vs-CPU flat search (float data)") else {
        return;
    };
    for (seed, dim, n, m, k) in [
        (1u64, 64usize, 5000usize, 16usize, 10usize),
        (2, 384, 3000, 8, 25),
    ] {
        let data = unit_data(seed, n, dim);
        let queries = unit_data(seed + 50, m, dim);
        let cpu = FlatIndex::new(dim, &data).unwrap();
        let want = cpu.search(&queries, k).unwrap();
        let got = GpuFlatIndex::new(&ctx, &cpu)
            .unwrap()
            .search(&queries, k)
            .unwrap();
        let mut max_err = 0f32;
        for (qi, (g, w)) in got.iter().zip(&want).enumerate() {
            let gi: Vec<u32> = g.iter().map(|h| h.index).collect();
            let wi: Vec<u32> = w.iter().map(|h| h.index).collect();
            assert_eq!(gi, wi, "query {qi}: indices differ");
            let q = &queries[qi * dim..(qi + 1) * dim];
            for (a, b) in g.iter().zip(w) {
                let x = &data[a.index as usize * dim..(a.index as usize + 1) * dim];
                let tol = score_tolerance(q, x);
                let err = (a.score - b.score).abs();
                max_err = max_err.max(err);
                assert!(
                    err <= tol,
                    "query {qi}: |{} - {}| > {tol}",
                    a.score,
                    b.score
                );
            }
        }
        eprintln!("dim {dim}: max |gpu - cpu| score difference {max_err:e}");
    }
}

/// A 4 KiB binding cap splits the rows into many chunks and the queries into several query
/// chunks; results must not change.
#[test]
fn gpu_flat_multi_chunk_equals_cpu() {
    let Some(mut ctx) = context("GPU-vs-CPU flat search (multi-chunk)") else {
        return;
    };
    ctx.set_max_binding_bytes(4096);
    let (dim, n, m, k) = (16, 3000, 20, 10);
    let data = integer_data(7, n, dim);
    let queries = integer_data(8, m, dim);
    let cpu = FlatIndex::new(dim, &data).unwrap();
    let gpu = GpuFlatIndex::new(&ctx, &cpu).unwrap();
    assert_eq!(gpu.chunk_count(), n.div_ceil(4096 / (dim * 4)));
    assert!(gpu.chunk_count() > 40);
    assert_eq!(
        gpu.search(&queries, k).unwrap(),
        cpu.search(&queries, k).unwrap()
    );
    // float data across chunks too
    let data = unit_data(9, n, dim);
    let queries = unit_data(10, m, dim);
    let cpu = FlatIndex::new(dim, &data).unwrap();
    let got = GpuFlatIndex::new(&ctx, &cpu)
        .unwrap()
        .search(&queries, k)
        .unwrap();
    let want = cpu.search(&queries, k).unwrap();
    for (g, w) in got.iter().zip(&want) {
        let gi: Vec<u32> = g.iter().map(|h| h.index).collect();
        let wi: Vec<u32> = w.iter().map(|h| h.index).collect();
        assert_eq!(gi, wi);
        for (a, b) in g.iter().zip(w) {
            assert!((a.score - b.score).abs() <= 16.0 * f32::EPSILON);
        }
    }
}

#[test]
fn gpu_flat_rejects_bad_input() {
    let Some(ctx) = context("GPU flat search bad input") else {
        return;
    };
    let data = integer_data(3, 2000, 4);
    let cpu = FlatIndex::new(4, &data).unwrap();
    let gpu = GpuFlatIndex::new(&ctx, &cpu).unwrap();
    assert!(matches!(
        gpu.search(&[1.0; 4], 0),
        Err(RetrievalError::InvalidK(0))
    ));
    assert!(matches!(
        gpu.search(&[1.0, f32::NAN, 0.0, 0.0], 3),
        Err(RetrievalError::NonFinite(_))
    ));
    assert!(matches!(
        gpu.search(&[1.0; 5], 3),
        Err(RetrievalError::Shape(_))
    ));
    assert!(matches!(
        gpu.search(&[1.0; 4], MAX_K + 1),
        Err(RetrievalError::Config(_))
    ));
    assert!(gpu.search(&[], 3).unwrap().is_empty());
    let empty = FlatIndex::new(4, &[]).unwrap();
    let got = GpuFlatIndex::new(&ctx, &empty)
        .unwrap()
        .search(&[1.0; 8], 3)
        .unwrap();
    assert_eq!(got, vec![Vec::new(), Vec::new()]);
}

/// With no usable backend (`WGPU_BACKEND=metal` on Linux) `rulegym search --gpu` fails with
/// the no-adapter message instead of panicking.
#[test]
fn gpu_search_without_adapter_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("c.jsonl");
    std::fs::write(
        &corpus,
        "{\"id\":\"1\",\"contents\":\"\\\"Ann\\\"\\nAnn likes tea.\"}\n{\"id\":\"2\",\"contents\":\"\\\"Bob\\\"\\nBob likes coffee.\"}\n",
    )
    .unwrap();
    let idx = dir.path().join("i.idx");
    run_ok(
        rulegym()
            .args(["index", "--corpus"])
            .arg(&corpus)
            .arg("--out")
            .arg(&idx),
    );
    let out = run(rulegym()
        .args(["search", "--gpu", "--index"])
        .arg(&idx)
        .arg("tea")
        .env("WGPU_BACKEND", "metal"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "stderr: {err}");
    assert!(err.contains("no GPU adapter"), "stderr: {err}");
    assert!(!err.contains("panicked"), "stderr: {err}");
    if context("rulegym search --gpu with an adapter").is_some() {
        let out = run(rulegym()
            .args(["search", "--gpu", "--topk", "1", "--index"])
            .arg(&idx)
            .arg("tea"));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success() && text.contains("id=1"), "{text}");
    }
}
