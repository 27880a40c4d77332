//! Retrieval: flat top-k against a naive reference, built-in encoder quality, index files.

use proptest::prelude::*;
use rulegym::retrieval::flat::naive_search;
use rulegym::retrieval::{
    BuiltinConfig, BuiltinEncoder, Document, EncoderChoice, FlatIndex, IndexKind, SearchIndex,
    docs, synthetic,
};
use std::sync::Arc;

/// Hits as (row, score bits): equal only when the scores are bit-identical.
fn bits(hits: Vec<Vec<rulegym::retrieval::Hit>>) -> Vec<Vec<(u32, u32)>> {
    hits.into_iter()
        .map(|h| {
            h.into_iter()
                .map(|h| (h.index, h.score.to_bits()))
                .collect()
        })
        .collect()
}

/// A xorshift stream from `seed` (never stuck at zero).
fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut s = seed | 1;
    move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    }
}

fn fixture(name: &str) -> std::path::PathBuf {
    crate::repo().join("tests/fixtures").join(name)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Small integers make every dot product exact, so ties are frequent and exact.
    #[test]
    fn flat_topk_equals_naive_sort_with_ties(
        dim in 1usize..40,
        n in 0usize..300,
        m in 1usize..9,
        k in 1usize..25,
        threads in 1usize..4,
        seed in any::<u64>(),
    ) {
        let mut s = seed | 1;
        let mut next = || { s ^= s << 13; s ^= s >> 7; s ^= s << 17; ((s >> 33) % 5) as f32 - 2.0 };
        let data: Vec<f32> = (0..n * dim).map(|_| next()).collect();
        let queries: Vec<f32> = (0..m * dim).map(|_| next()).collect();
        let idx = FlatIndex::new(dim, &data).unwrap();
        let got = idx.search_with_threads(&queries, k, threads).unwrap();
        prop_assert_eq!(got, naive_search(dim, &data, &queries, k));
    }

    /// Random floats: scores are bit-identical to the canonical dot product.
    #[test]
    fn flat_topk_equals_naive_sort_floats(
        dim in 1usize..70,
        n in 1usize..400,
        m in 1usize..40,
        k in 1usize..12,
        seed in any::<u64>(),
    ) {
        let mut s = seed | 1;
        let mut next = || { s ^= s << 13; s ^= s >> 7; s ^= s << 17; (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5 };
        let data: Vec<f32> = (0..n * dim).map(|_| next()).collect();
        let queries: Vec<f32> = (0..m * dim).map(|_| next()).collect();
        let idx = FlatIndex::new(dim, &data).unwrap();
        prop_assert_eq!(idx.search(&queries, k).unwrap(), naive_search(dim, &data, &queries, k));
    }

    /// Sparse queries (mostly +0 and -0, some random values) over rows with zeros too: the
    /// sparse search returns the dense search's hits with bit-identical scores.
    #[test]
    fn sparse_search_is_bit_identical_to_the_dense_scan(
        dim in 1usize..80,
        n in 1usize..300,
        m in 1usize..12,
        k in 1usize..12,
        seed in any::<u64>(),
    ) {
        let mut next = xorshift(seed);
        let mut value = |zeros: u64| {
            let r = next();
            match r % zeros {
                0 => (r >> 40) as f32 / (1u64 << 24) as f32 - 0.5,
                1 => -0.0,
                _ => 0.0,
            }
        };
        let data: Vec<f32> = (0..n * dim).map(|_| value(2)).collect();
        let queries: Vec<f32> = (0..m * dim).map(|_| value(6)).collect();
        let idx = FlatIndex::new(dim, &data).unwrap();
        let dense = bits(idx.search(&queries, k).unwrap());
        prop_assert_eq!(bits(idx.search_sparse(&queries, k).unwrap()), dense.clone());
        prop_assert_eq!(bits(naive_search(dim, &data, &queries, k)), dense);
    }

    /// The rank checker decides "are these rows all among the top k" as searching ranks them:
    /// integer-valued rows with many zeros (frequent exact ties) and sparse queries, targets
    /// drawn around the boundary (the k-th and (k+1)-th hits, with the best, every hit, random
    /// rows, a row past the end, none).
    #[test]
    fn rank_checker_decides_as_the_search_ranks(
        (dim, n, m, k) in (1usize..40, 0usize..300, 1usize..6, 1usize..8),
        seed in any::<u64>(),
    ) {
        let mut next = xorshift(seed);
        let mut value = |zeros: u64| {
            let r = next();
            if r.is_multiple_of(zeros) { ((r >> 33) % 5) as f32 - 2.0 } else { 0.0 }
        };
        let data: Vec<f32> = (0..n * dim).map(|_| value(2)).collect();
        let queries: Vec<f32> = (0..m * dim).map(|_| value(3)).collect();
        let idx = FlatIndex::new(dim, &data).unwrap();
        let checker = idx.rank_checker();
        let ranked = idx.search(&queries, n.max(1)).unwrap();
        let top = idx.search(&queries, k).unwrap();
        let mut decided = 0;
        for (qi, (ranked, top)) in ranked.iter().zip(&top).enumerate() {
            let q = &queries[qi * dim..(qi + 1) * dim];
            let row = |i: usize| ranked.get(i).map(|h| h.index);
            let mut lists: Vec<Vec<u32>> = vec![
                vec![],
                vec![n as u32],
                top.iter().map(|h| h.index).collect(),
            ];
            lists.extend([row(k - 1), row(k), row(k + 1)].into_iter().flatten().map(|r| vec![r]));
            if let (Some(a), Some(b)) = (row(0), row(k)) {
                lists.push(vec![b, a]);
            }
            if n > 0 {
                lists.push((0..1 + next() % 3).map(|_| (next() % n as u64) as u32).collect::<std::collections::BTreeSet<u32>>().into_iter().collect());
            }
            for targets in lists {
                let expected = targets.iter().all(|t| top.iter().any(|h| h.index == *t));
                let got = checker.all_in_top_k(q, &[&targets[..]], k).unwrap();
                prop_assert_eq!(got, vec![expected], "query {} targets {:?}", qi, targets);
                decided += 1;
            }
        }
        prop_assert!(decided >= 3 * m);
    }
}

/// The certifier's searches (every name, attribute phrases) over a generated universe's
/// built-in index: the sparse search gives the dense search's hits, scores bit for bit.
#[test]
fn sparse_search_matches_dense_on_a_universe_index() {
    // ~400 people: 26 blocks of 16 rows, several cache chunks of 8 blocks and a remainder.
    let universe = rulegym::universe::Universe::generate(&rulegym::universe::UniverseConfig {
        num_family_trees: 40,
        ..Default::default()
    })
    .unwrap();
    let index =
        rulegym::dataset::build::article_index(&rulegym::corpus::articles(&universe)).unwrap();
    let mut texts: Vec<String> = universe.people.iter().map(|p| p.name.clone()).collect();
    texts.extend(universe.people.iter().map(|p| format!("hobby {}", p.hobby)));
    texts.push("no such words anywhere".into());
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let q = index
        .encoder()
        .encode(&refs, rulegym::retrieval::TextKind::Query)
        .unwrap();
    let dense = bits(index.flat().search(&q, 3).unwrap());
    assert_eq!(bits(index.flat().search_sparse(&q, 3).unwrap()), dense);
    assert_eq!(dense.len(), texts.len());
    // The rank checker's verdict on each text's own people (a name's person, a hobby's
    // holders) is the search's, and both verdicts occur.
    let people = universe.people.len();
    let targets: Vec<Vec<u32>> = (0..texts.len())
        .map(|t| match t {
            t if t < people => vec![t as u32],
            t if t < 2 * people => {
                let hobby = &universe.people[t - people].hobby;
                let holders = universe
                    .people
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| &p.hobby == hobby);
                holders.map(|(row, _)| row as u32).collect()
            }
            _ => vec![0],
        })
        .collect();
    let lists: Vec<&[u32]> = targets.iter().map(Vec::as_slice).collect();
    let got = index
        .flat()
        .rank_checker()
        .all_in_top_k(&q, &lists, 3)
        .unwrap();
    let expected: Vec<bool> = dense
        .iter()
        .zip(&targets)
        .map(|(hits, targets)| targets.iter().all(|t| hits.iter().any(|h| h.0 == *t)))
        .collect();
    assert_eq!(got, expected);
    assert!(got.iter().any(|r| *r) && got.iter().any(|r| !*r));
}

#[test]
fn large_parallel_search_is_batch_invariant_and_exact() {
    // Large enough to take the multi-threaded path.
    let (n, dim) = (5_000, 64);
    let mut s = 42u64;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    };
    let data: Vec<f32> = (0..n * dim).map(|_| next()).collect();
    let queries: Vec<f32> = (0..37 * dim).map(|_| next()).collect();
    let idx = FlatIndex::new(dim, &data).unwrap();
    let batch = idx.search_with_threads(&queries, 10, 2).unwrap();
    assert_eq!(batch, naive_search(dim, &data, &queries, 10));
    for (i, q) in queries.chunks(dim).enumerate() {
        assert_eq!(
            idx.search(q, 10).unwrap()[0],
            batch[i],
            "query {i} alone differs"
        );
    }
}

#[test]
fn flat_rejects_bad_input() {
    assert!(FlatIndex::new(0, &[]).is_err());
    assert!(FlatIndex::new(3, &[1.0, 2.0]).is_err());
    assert!(FlatIndex::new(2, &[1.0, f32::NAN]).is_err());
    assert!(FlatIndex::new(1, &[f32::INFINITY]).is_err());
    assert!(FlatIndex::new(1, &[1e30]).is_err(), "norm above 1e18");
    let idx = FlatIndex::new(2, &[1.0, 0.0, 0.0, 1.0]).unwrap();
    assert!(idx.search(&[1.0, 0.0], 0).is_err());
    assert!(idx.search(&[1.0], 1).is_err());
    assert!(idx.search(&[f32::NAN, 0.0], 1).is_err());
    assert_eq!(
        idx.search(&[1.0, 0.0], 10).unwrap()[0].len(),
        2,
        "k above n returns n"
    );
    let empty = FlatIndex::new(2, &[]).unwrap();
    assert_eq!(empty.search(&[1.0, 0.0], 3).unwrap(), vec![vec![]]);
}

#[derive(serde::Deserialize)]
struct OneHop {
    question: String,
    article_id: String,
}

/// Recall@1 and @3 of one-hop questions naming a person, over an index.
fn recall(index: &SearchIndex, queries: &[(String, usize)]) -> (f64, f64, Vec<String>) {
    let texts: Vec<&str> = queries.iter().map(|q| q.0.as_str()).collect();
    let hits = index.search(&texts, 3).unwrap();
    let (mut r1, mut r3, mut misses) = (0, 0, Vec::new());
    for ((q, target), h) in queries.iter().zip(&hits) {
        r1 += (h[0].index as usize == *target) as usize;
        if h.iter().any(|x| x.index as usize == *target) {
            r3 += 1;
        } else {
            misses.push(q.clone());
        }
    }
    let n = queries.len() as f64;
    (r1 as f64 / n, r3 as f64 / n, misses)
}

#[test]
fn builtin_encoder_finds_the_named_person_phantomwiki_fixture() {
    let corpus = docs::read_jsonl(&fixture("phantomwiki-n100-seed1-articles.jsonl")).unwrap();
    let ids: Vec<String> = corpus.iter().map(|d| d.id.clone()).collect();
    let text = std::fs::read_to_string(fixture("phantomwiki-n100-seed1-onehop.jsonl")).unwrap();
    let queries: Vec<(String, usize)> = text
        .lines()
        .map(|l| {
            let q: OneHop = serde_json::from_str(l).unwrap();
            let row = ids.iter().position(|i| *i == q.article_id).unwrap();
            (q.question, row)
        })
        .collect();
    assert!(queries.len() > 800);
    let index = SearchIndex::build(corpus, &"builtin".parse().unwrap(), IndexKind::Flat).unwrap();
    let (r1, r3, misses) = recall(&index, &queries);
    eprintln!("phantomwiki n100 one-hop: recall@1 {r1:.4} recall@3 {r3:.4}");
    assert!(misses.is_empty(), "not in top-3: {misses:?}");
}

#[test]
fn builtin_encoder_finds_the_named_person_synthetic_1000() {
    let (corpus, named) = synthetic::corpus(1_000, 7);
    let queries: Vec<(String, usize)> = named.into_iter().map(|q| (q.query, q.target)).collect();
    let index = SearchIndex::build(corpus, &"builtin".parse().unwrap(), IndexKind::Flat).unwrap();
    let (r1, r3, misses) = recall(&index, &queries);
    eprintln!(
        "synthetic n1000 one-hop ({} queries): recall@1 {r1:.4} recall@3 {r3:.4}",
        queries.len()
    );
    assert!(
        misses.is_empty(),
        "not in top-3: {:?}",
        &misses[..misses.len().min(10)]
    );
    assert!(r1 >= 0.99);
}

#[test]
fn index_file_round_trip_and_rejections() {
    let (corpus, _) = synthetic::corpus(300, 3);
    let index =
        SearchIndex::build(corpus.clone(), &"builtin".parse().unwrap(), IndexKind::Flat).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("idx.rgi");
    index.save(&path).unwrap();
    let loaded = SearchIndex::load(&path).unwrap();
    assert_eq!(loaded.docs(), index.docs());
    assert_eq!(
        loaded.header().encoder_identity,
        index.header().encoder_identity
    );
    let q = ["Who is the mother of Alison Smock?", "hobby chess", "zzzz"];
    assert_eq!(loaded.search(&q, 5).unwrap(), index.search(&q, 5).unwrap());
    // no temporary files left behind
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);

    // An encoder with another identity is refused.
    let other = BuiltinEncoder::fit(BuiltinConfig::default(), &["something else"]).unwrap();
    let mut l2 = SearchIndex::load(&path).unwrap();
    let err = l2.set_encoder(Arc::new(other)).unwrap_err();
    assert!(err.to_string().contains("encoder mismatch"), "{err}");

    // Truncated, corrupted and foreign files are errors, not panics.
    let bytes = std::fs::read(&path).unwrap();
    for cut in [0, 5, 20, 40, bytes.len() / 2, bytes.len() - 1] {
        std::fs::write(&path, &bytes[..cut]).unwrap();
        assert!(SearchIndex::load(&path).is_err(), "truncated at {cut}");
    }
    let mut bad = bytes.clone();
    bad[0] = b'X';
    std::fs::write(&path, &bad).unwrap();
    assert!(SearchIndex::load(&path).is_err());
    let mut bad = bytes.clone();
    bad[30] ^= 0x55; // inside the JSON header
    std::fs::write(&path, &bad).unwrap();
    assert!(SearchIndex::load(&path).is_err());
    // Any flipped byte (header, documents, vectors or the checksum itself) is a clear error,
    // never a silently different search result: 64 positions spread over the file.
    for i in 0..64usize {
        let at = (i * 7919 + 13) % bytes.len();
        let mut bad = bytes.clone();
        bad[at] ^= 1 << (i % 8);
        std::fs::write(&path, &bad).unwrap();
        let err = SearchIndex::load(&path).unwrap_err().to_string();
        assert!(!err.is_empty(), "flip at byte {at}");
    }
    let mut bad = bytes.clone();
    let vectors_at = bytes.len() - 40; // inside the last vector block
    bad[vectors_at] ^= 0x01;
    std::fs::write(&path, &bad).unwrap();
    let err = SearchIndex::load(&path).unwrap_err().to_string();
    assert!(err.contains("checksum mismatch"), "{err}");
    assert!(SearchIndex::load(&dir.path().join("missing")).is_err());
}

#[test]
fn pooled_index_over_several_corpora_has_unique_ids() {
    let (a, _) = synthetic::corpus(50, 1);
    let (b, _) = synthetic::corpus(50, 2);
    let pooled = docs::pool(vec![("seed1".into(), a.clone()), ("seed2".into(), b)]).unwrap();
    assert_eq!(pooled.len(), 100);
    let index = SearchIndex::build(pooled, &"builtin".parse().unwrap(), IndexKind::Flat).unwrap();
    let ids: std::collections::BTreeSet<&str> =
        index.docs().iter().map(|d| d.id.as_str()).collect();
    assert_eq!(ids.len(), 100);
    assert!(ids.contains("seed1:0") && ids.contains("seed2:49"));
    // duplicate prefixes and duplicate ids are refused
    assert!(docs::pool(vec![("x".into(), a.clone()), ("x".into(), a.clone())]).is_err());
    let dup = vec![
        a[0].clone(),
        Document {
            id: a[0].id.clone(),
            contents: "x".into(),
        },
    ];
    assert!(SearchIndex::build(dup, &"builtin".parse().unwrap(), IndexKind::Flat).is_err());
    assert!("bert:".parse::<EncoderChoice>().is_err());
    assert!("nope".parse::<EncoderChoice>().is_err());
}
