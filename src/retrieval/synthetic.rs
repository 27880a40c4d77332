//! A synthetic corpus in rulegym's article format (people with family, friends and
//! attributes), for tests and benchmarks that need a corpus of a chosen size without the full
//! generator (feature `testkit`: a test helper, not part of the stable API). Names are unique; articles mention other people, as real ones do, and are
//! written by the corpus's own renderer ([`crate::corpus::render`]).

use super::docs::Document;
use super::topk::Hit;
use rand::Rng;

const FIRST: &[&str] = &[
    "Alison",
    "Beulah",
    "Dominique",
    "Williams",
    "Shelli",
    "Alvin",
    "Sha",
    "Ophelia",
    "Dino",
    "Daisy",
    "Tyson",
    "Darrell",
    "Vernie",
    "Queenie",
    "Susie",
    "Kevin",
    "Belia",
    "Luella",
    "Grover",
    "Christopher",
    "Amanda",
    "Milo",
    "Dewitt",
    "Effie",
    "Gene",
    "Ann",
    "Mary",
    "Bob",
    "Clara",
    "Elmer",
    "Fannie",
    "Harvey",
    "Ida",
    "Jasper",
    "Lottie",
    "Morris",
    "Nellie",
    "Otis",
    "Pearl",
    "Rufus",
    "Stella",
    "Truman",
    "Ursula",
    "Virgil",
    "Winnie",
    "Ezra",
    "Hattie",
    "Lyle",
    "Mabel",
    "Norris",
    "Opal",
    "Percy",
    "Rosa",
    "Silas",
    "Tilda",
    "Wade",
];
const LAST: &[&str] = &[
    "Smock",
    "Beltran",
    "Oyler",
    "Estrella",
    "Robbins",
    "Kimber",
    "Worthy",
    "Jarrett",
    "Pete",
    "Tice",
    "Waddell",
    "Henderson",
    "Lee",
    "Roe",
    "Abbott",
    "Barlow",
    "Conley",
    "Dalton",
    "Ewing",
    "Fowler",
    "Garner",
    "Hobbs",
    "Ingram",
    "Jensen",
    "Keller",
    "Lowry",
    "Mercer",
    "Nolan",
    "Osborn",
    "Pruitt",
    "Quinn",
    "Rowe",
    "Salas",
    "Tatum",
    "Upton",
    "Vance",
];
const JOBS: &[&str] = &[
    "personal assistant",
    "warehouse manager",
    "doctor",
    "health promotion specialist",
    "geologist",
    "teacher",
    "nurse",
    "electrician",
    "architect",
    "baker",
    "pilot",
    "lawyer",
];
const HOBBIES: &[&str] = &[
    "meditation",
    "photography",
    "meteorology",
    "chess",
    "gardening",
    "birdwatching",
    "pottery",
    "sailing",
    "fishing",
    "astronomy",
    "knitting",
    "running",
];

/// A one-hop question naming a person, with the row of that person's article.
#[derive(Clone, Debug)]
pub struct NamedQuery {
    /// The question text.
    pub query: String,
    /// Index (in the corpus) of the named person's article.
    pub target: usize,
}

/// How many of `named` (paired in order with `hits`, one hit list per query) have their
/// target article among their hits.
pub fn targets_found(named: &[NamedQuery], hits: &[Vec<Hit>]) -> usize {
    named
        .iter()
        .zip(hits)
        .filter(|(q, h)| h.iter().any(|h| h.index as usize == q.target))
        .count()
}

/// `n` articles (ids "0".."n-1") and, for each person, one-hop questions naming them.
/// `n` is capped at the number of distinct names (about 100,000).
pub fn corpus(n: usize, seed: u64) -> (Vec<Document>, Vec<NamedQuery>) {
    let cap = FIRST.len() * LAST.len() * 50;
    let n = n.min(cap);
    // Unique names: first + last, with a middle initial when the plain pair is taken.
    let mut names = Vec::with_capacity(n);
    let mut used = std::collections::HashSet::new();
    let mut i = 0u64;
    while names.len() < n {
        let mut rng = crate::seed::stream(seed, "synthetic-name", i);
        i += 1;
        let f = FIRST[rng.random_range(0..FIRST.len())];
        let l = LAST[rng.random_range(0..LAST.len())];
        let mut name = format!("{f} {l}");
        if used.contains(&name) {
            let mid = (b'A' + rng.random_range(0..26u8)) as char;
            name = format!("{f} {mid}. {l}");
        }
        if used.insert(name.clone()) {
            names.push(name);
        }
    }
    let mut docs = Vec::with_capacity(n);
    let mut queries = Vec::new();
    for (p, name) in names.iter().enumerate() {
        let mut rng = crate::seed::stream(seed, "synthetic-article", p as u64);
        let mut family: Vec<(&str, &str, Vec<&str>)> = Vec::new();
        for _ in 0..rng.random_range(1..4) {
            let (rel, plural) = crate::corpus::ARTICLE_RELATIONS[rng.random_range(0..8)];
            let other = names[rng.random_range(0..n)].as_str();
            match family.iter_mut().find(|(r, _, _)| *r == rel) {
                Some((_, _, others)) => others.push(other),
                None => family.push((rel, plural, vec![other])),
            }
            queries.push(NamedQuery {
                query: format!("Who is the {rel} of {name}?"),
                target: p,
            });
        }
        let k = rng.random_range(1..5);
        let friends: Vec<&str> = (0..k)
            .map(|_| names[rng.random_range(0..n)].as_str())
            .collect();
        queries.push(NamedQuery {
            query: format!("Who are the friends of {name}?"),
            target: p,
        });
        let dob = format!(
            "{:04}-{:02}-{:02}",
            rng.random_range(400..1000),
            rng.random_range(1..13),
            rng.random_range(1..29)
        );
        let job = JOBS[rng.random_range(0..JOBS.len())];
        let hobby = HOBBIES[rng.random_range(0..HOBBIES.len())];
        let gender = if rng.random_bool(0.5) {
            "female"
        } else {
            "male"
        };
        let attributes = vec![
            ("date of birth", dob.as_str()),
            ("occupation", job),
            ("hobby", hobby),
            ("gender", gender),
        ];
        for (attr, _) in &attributes {
            queries.push(NamedQuery {
                query: format!("What is the {attr} of {name}?"),
                target: p,
            });
        }
        let article = crate::corpus::Article {
            title: name.clone(),
            text: crate::corpus::render(&crate::corpus::ArticleContent {
                name,
                family,
                friends,
                attributes,
            }),
            facts: Vec::new(),
        };
        let record = article.record(p as crate::universe::PersonId);
        docs.push(Document {
            id: record.id,
            contents: record.contents,
        });
    }
    (docs, queries)
}

/// `n` clustered unit vectors of dimension `dim` (row-major): `clusters` random unit centres
/// (drawn from stream `(seed, "clustered-centres")`), each vector a centre plus Gaussian-like
/// noise of standard deviation `noise` per coordinate (from stream `(seed, label, row)`),
/// re-normalised. Use one `seed` with different labels for a base set and its queries.
pub fn clustered_unit_vectors(
    n: usize,
    dim: usize,
    clusters: usize,
    noise: f32,
    seed: u64,
    label: &str,
) -> Vec<f32> {
    let clusters = clusters.max(1);
    let normal = |rng: &mut rand_chacha::ChaCha8Rng| -> f32 {
        // Irwin-Hall(12) - 6: mean 0, variance 1.
        (0..12).map(|_| rng.random::<f32>()).sum::<f32>() - 6.0
    };
    let normalize = |v: &mut [f32]| {
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        if n > 0.0 {
            v.iter_mut().for_each(|x| *x /= n);
        }
    };
    let mut rng = crate::seed::stream(seed, "clustered-centres", 0);
    let mut centres: Vec<f32> = (0..clusters * dim).map(|_| normal(&mut rng)).collect();
    centres.chunks_exact_mut(dim).for_each(normalize);
    let mut out = vec![0f32; n * dim];
    for (i, v) in out.chunks_exact_mut(dim).enumerate() {
        let mut rng = crate::seed::stream(seed, label, i as u64);
        let c = rng.random_range(0..clusters);
        for (x, &m) in v.iter_mut().zip(&centres[c * dim..(c + 1) * dim]) {
            *x = m + noise * normal(&mut rng);
        }
        normalize(v);
    }
    out
}
