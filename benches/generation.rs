//! Universe generation and engine load, in people per second, at 1K and 10K people; and many
//! universes per process (`generate --seeds`), in universes per second: fresh single-seed builds
//! against one warm engine, and the batch writer with one worker per core.
//! `cargo bench --bench generation`. Each iteration checks its output (the build checks that the
//! engine holds every person; the bench checks the article count), so the bench is also a test.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use rulegym::dataset::batch::{self, Batch};
use rulegym::dataset::{self, BuildConfig};
use rulegym::question::QuestionConfig;
use rulegym::universe::{Universe, UniverseConfig};
use std::time::Duration;

fn generation(c: &mut Criterion) {
    let mut group = c.benchmark_group("generation");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(20));
    for trees in [100usize, 1000] {
        let config = UniverseConfig {
            num_family_trees: trees,
            ..Default::default()
        };
        let people = Universe::generate(&config).unwrap().people.len();
        group.throughput(Throughput::Elements(people as u64));
        group.bench_with_input(
            BenchmarkId::new("universe", people),
            &config,
            |b, config| {
                b.iter(|| {
                    let u = Universe::generate(config).unwrap();
                    assert_eq!(u.people.len(), people);
                })
            },
        );
        group.bench_with_input(
            BenchmarkId::new("universe+engine+articles", people),
            &config,
            |b, config| {
                b.iter(|| {
                    let data = dataset::build(&BuildConfig {
                        engines: 1,
                        ..BuildConfig::new(config.clone(), None)
                    })
                    .unwrap();
                    assert_eq!(data.articles.len(), people);
                })
            },
        );
    }
    group.finish();
}

/// Four universes of ~1,036 people and 380 questions per iteration (the PhantomWiki comparison's
/// configuration): one fresh single-seed build each, one warm engine for all four, a fresh
/// engine per universe in the batch path, and the batch writer (one worker per core).
fn many_universes(c: &mut Criterion) {
    let mut group = c.benchmark_group("many_universes");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(30));
    let seeds = "1..=4".parse().unwrap();
    let base = BuildConfig::new(
        UniverseConfig::default(),
        Some(QuestionConfig {
            depth: 16,
            ..Default::default()
        }),
    );
    let batch = |budget: usize| Batch {
        workers: 1,
        engine_budget: budget,
        ..Batch::new(base.clone(), seeds)
    };
    group.throughput(Throughput::Elements(4));
    group.bench_function("single_seed_builds", |b| {
        let batch = batch(0);
        b.iter(|| {
            for seed in batch.seeds.seeds() {
                let data = dataset::build(&batch.config_for(seed)).unwrap();
                assert!(data.questions.len() > 300);
            }
        })
    });
    for (name, budget) in [("warm_engine", usize::MAX), ("fresh_engine_each", 0)] {
        let batch = batch(budget);
        group.bench_function(name, |b| {
            b.iter(|| {
                let built = batch::build_all(&batch).unwrap();
                assert!(built.iter().all(|d| d.questions.len() > 300));
            })
        });
    }
    let tmp = std::env::temp_dir().join(format!("rulegym-bench-batch-{}", std::process::id()));
    group.bench_function("batch_write_one_worker_per_core", |b| {
        let batch = Batch {
            workers: 0,
            ..batch(dataset::batch::DEFAULT_ENGINE_BUDGET)
        };
        b.iter(|| {
            let report = batch::generate(&batch, &tmp, true, &|_| {}).unwrap();
            assert_eq!(report.universes.len(), 4);
        })
    });
    let _ = std::fs::remove_dir_all(&tmp);
    group.finish();
}

criterion_group!(benches, generation, many_universes);
criterion_main!(benches);
