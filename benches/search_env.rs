//! Search environment benches: step overhead without retrieval (an in-memory retriever that hands
//! back three fixed passages), and oracle replay with the built-in encoder over the default
//! universe's questions.
//!
//! `cargo bench --bench search_env` (add `-- oracle` for the replay group only). The full replay
//! of 3,800 questions (`--per-template 100`) runs when `RULEGYM_BENCH_FULL=1`; the default set is
//! 380 questions (`--per-template 10`).

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use rayon::prelude::*;
use rulegym::env::Environment;
use rulegym::question::QuestionConfig;
use rulegym::retrieval::Document;
use rulegym::search::oracle::replay;
use rulegym::search::{Retriever, SearchEnv, SearchEnvConfig, SearchTask};
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

/// Three fixed passages of article length: retrieval costs a clone, nothing else.
struct InMemory(Vec<Document>);

impl Retriever for InMemory {
    fn retrieve(&self, queries: &[&str], k: usize) -> rulegym::Result<Vec<Vec<Document>>> {
        Ok(queries
            .iter()
            .map(|_| self.0[..k.min(self.0.len())].to_vec())
            .collect())
    }
}

fn in_memory() -> Arc<dyn Retriever> {
    let text = "Ann Lee is a doctor. The mother of Ann Lee is Carol Lee. The father of Ann Lee is \
                Dan Lee. The friends of Ann Lee are Bob Stone, Eve Marsh and Fay Gold. Ann Lee \
                was born on 1970-03-14. The hobby of Ann Lee is birdwatching. ";
    Arc::new(InMemory(
        (0..3)
            .map(|i| Document {
                id: i.to_string(),
                contents: format!("\"Person {i}\"\n# Person {i}\n\n{}", text.repeat(3)),
            })
            .collect(),
    ))
}

fn task() -> SearchTask {
    SearchTask {
        question: "Who is the friend of the mother of Ann Lee?".into(),
        answers: vec!["Bob Stone".into(), "Eve Marsh".into()],
        gold_docs: vec!["1".into(), "7".into()],
    }
}

const SEARCH: &str =
    "<think>I need to read the article about Ann Lee.</think>\n<search> Ann Lee </search>";
const ANSWER: &str =
    "<think>I have everything I need.</think>\n<answer> Bob Stone, Eve Marsh </answer>";

fn step_overhead(c: &mut Criterion) {
    let retriever = in_memory();
    let config = SearchEnvConfig::default();
    let mut g = c.benchmark_group("search_env");
    g.measurement_time(Duration::from_secs(4));
    // One search turn on a fresh episode (construction and reset excluded).
    g.bench_function("search_step", |b| {
        b.iter_batched(
            || {
                let mut env = SearchEnv::new(retriever.clone(), config.clone(), task()).unwrap();
                env.reset().unwrap();
                env
            },
            |mut env| black_box(env.step(SEARCH).unwrap()),
            BatchSize::SmallInput,
        )
    });
    g.bench_function("answer_step", |b| {
        b.iter_batched(
            || {
                let mut env = SearchEnv::new(retriever.clone(), config.clone(), task()).unwrap();
                env.reset().unwrap();
                env
            },
            |mut env| black_box(env.step(ANSWER).unwrap()),
            BatchSize::SmallInput,
        )
    });
    // A whole episode: construct, reset, four searches, answer (5 turns).
    g.bench_function("episode_5_turns", |b| {
        b.iter(|| {
            let mut env = SearchEnv::new(retriever.clone(), config.clone(), task()).unwrap();
            black_box(env.reset().unwrap());
            for _ in 0..4 {
                black_box(env.step(SEARCH).unwrap());
            }
            black_box(env.step(ANSWER).unwrap())
        })
    });
    g.finish();
}

#[path = "../tests/support/search.rs"]
mod search;

fn data(per_template: usize) -> search::SearchData {
    search::search_data(&QuestionConfig {
        per_template,
        ..QuestionConfig::default()
    })
}

fn oracle(c: &mut Criterion) {
    let full = std::env::var("RULEGYM_BENCH_FULL").is_ok_and(|v| v == "1");
    let d = data(if full { 100 } else { 10 });
    let retriever: Arc<dyn Retriever> = d.index.clone();
    let config = SearchEnvConfig::default();
    let mut g = c.benchmark_group("oracle");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(if full { 40 } else { 10 }));
    let name = format!("replay_{}_questions", d.questions.len());
    g.bench_function(&name, |b| {
        b.iter(|| {
            let perfect: usize = d
                .questions
                .par_iter()
                .map(|q| {
                    let t = replay(&d.universe, retriever.clone(), &config, q).unwrap();
                    usize::from(t.f1 == 1.0)
                })
                .sum();
            black_box(perfect)
        })
    });
    g.finish();
}

criterion_group!(benches, step_overhead, oracle);
criterion_main!(benches);
