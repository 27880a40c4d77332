//! Universe generation and engine load, in people per second, at 1K and 10K people.
//! `cargo bench --bench generation`. Each iteration checks its output (the build checks that the
//! engine holds every person; the bench checks the article count), so the bench is also a test.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use rulegym::dataset::{self, BuildConfig};
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

criterion_group!(benches, generation);
criterion_main!(benches);
