//! Universe generation and engine load, in people per second, at 1K and 10K people.
//! `cargo bench --bench generation`. Each iteration checks its output (people loaded == people
//! generated), so the bench is also a test.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use rulegym::corpus;
use rulegym::engine::{Engine, Term, Var};
use rulegym::universe::{Universe, UniverseConfig};
use std::time::Duration;

fn people_loaded(engine: &Engine) -> i64 {
    let (p, n) = (Var::numbered(0), Var::numbered(1));
    let goal = Term::compound(
        "count_solutions",
        [
            Term::compound("gender", [Term::var(&p), Term::atom("female")]),
            Term::var(&n),
        ],
    );
    let female = engine.query(&goal, std::slice::from_ref(&n)).unwrap()[0][0]
        .as_int()
        .unwrap();
    let goal = Term::compound(
        "count_solutions",
        [
            Term::compound("gender", [Term::var(&p), Term::atom("male")]),
            Term::var(&n),
        ],
    );
    female + engine.query(&goal, &[n]).unwrap()[0][0].as_int().unwrap()
}

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
                    let engine = std::thread::spawn(Engine::new);
                    let u = Universe::generate(config).unwrap();
                    let facts = u.facts();
                    let engine = engine.join().unwrap().unwrap();
                    let articles = std::thread::scope(|s| {
                        let loading = s.spawn(|| engine.consult("facts", &facts));
                        let articles = corpus::articles(&u);
                        loading.join().unwrap().unwrap();
                        articles
                    });
                    assert_eq!(articles.len(), people);
                    assert_eq!(people_loaded(&engine), people as i64);
                })
            },
        );
    }
    group.finish();
}

criterion_group!(benches, generation);
criterion_main!(benches);
