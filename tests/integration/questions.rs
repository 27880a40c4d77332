//! Questions: gold answers from the engine equal the native oracle; families keep their promises.

use proptest::prelude::*;
use rulegym::engine::Engine;
use rulegym::question::sample::backward_walk;
use rulegym::question::{self, Family, Query, QuestionConfig, QuestionKind, templates};
use rulegym::seed;
use rulegym::universe::{Universe, UniverseConfig};
use std::sync::OnceLock;

struct World {
    universe: Universe,
    engine: Engine,
}

fn world(easy: bool) -> &'static World {
    static EASY: OnceLock<World> = OnceLock::new();
    static HARD: OnceLock<World> = OnceLock::new();
    let cell = if easy { &EASY } else { &HARD };
    cell.get_or_init(|| {
        let config = UniverseConfig {
            num_family_trees: 60,
            seed: 11,
            easy_mode: easy,
            ..Default::default()
        };
        let universe = Universe::generate(&config).unwrap();
        let engine = Engine::with_facts(&universe.engine_facts()).unwrap();
        World { universe, engine }
    })
}

#[test]
fn template_counts() {
    assert_eq!(templates(16).len(), 38);
    assert_eq!(templates(20).len(), 50);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, ..ProptestConfig::default() })]
    /// Differential test: thousands of sampled queries, easy and hard mode, engine == oracle.
    #[test]
    fn engine_answers_equal_the_native_oracle(
        index in 0u64..1_000_000, hops in 0usize..6, by_attribute in any::<bool>(), easy in any::<bool>(),
        ask in 0usize..3,
    ) {
        let w = world(easy);
        let mut rng = seed::stream(5, "differential", index);
        let by_attribute = by_attribute || hops == 0;
        if let Ok((chain, _)) = backward_walk(&w.universe, easy, hops, by_attribute, &question::WalkLimits::NONE, 100, &mut rng) {
            let query = match ask {
                0 => Query::Who(chain),
                1 => Query::What(chain, question::Attr::ALL[(index % 3) as usize]),
                _ => Query::HowMany(chain, rulegym::relations::relations(easy).nth((index % 12) as usize).unwrap().name.to_owned()),
            };
            let gold = query.evaluate(&w.engine, &w.universe).unwrap();
            let oracle = query.evaluate_native(&w.universe).unwrap();
            prop_assert!(!gold.is_empty(), "a sampled walk always has an answer: {query:?}");
            prop_assert_eq!(gold, oracle, "{:?}", query);
        }
    }
}

fn generate(families: Vec<Family>, per: usize, easy: bool) -> Vec<question::Question> {
    let w = world(easy);
    let config = QuestionConfig {
        families,
        per_template: per,
        easy_mode: easy,
        max_hops: 5,
        ..Default::default()
    };
    question::generate(&w.universe, &w.engine, &config, None)
        .unwrap()
        .0
}

#[test]
fn families_keep_their_promises() {
    let qs = generate(Family::ALL.to_vec(), 3, true);
    let w = world(true);
    let mut texts = std::collections::HashSet::new();
    for q in &qs {
        assert!(
            texts.insert(q.question.clone()),
            "duplicate question {}",
            q.question
        );
        assert!(!q.answers.is_empty());
        assert_eq!(
            q.answers,
            q.plan.evaluate_native(&w.universe).unwrap(),
            "{}",
            q.question
        );
        if q.family != Family::Base {
            assert_eq!(q.answers.len(), 1, "unique answer: {}", q.question);
        }
        // Every constraint in the text is in the query and vice versa.
        let in_text = q.question.matches("whose ").count();
        let anchors = q
            .plan
            .chains()
            .iter()
            .filter(|c| matches!(c.anchor, question::Anchor::Attribute { .. }))
            .count();
        assert_eq!(in_text, q.constraints + anchors, "{}", q.question);
        let filter_atoms = q
            .query
            .iter()
            .filter(|a| a.starts_with("job(") || a.starts_with("hobby(") || a.starts_with("dob("))
            .count();
        let what = usize::from(matches!(q.plan, Query::What(..)));
        // A comparison reads both sides' dates of birth (`dob(A, CmpDL)`, `dob(B, CmpDR)`).
        let compared = 2 * usize::from(matches!(
            q.plan,
            Query::Older(..) | Query::Younger(..) | Query::BornFirst(..)
        ));
        assert_eq!(
            filter_atoms,
            q.constraints + anchors + what + compared,
            "{:?}",
            q.query
        );
        // The anchor's name appears in the corpus (every named person has an article).
        for chain in q.plan.chains() {
            if let question::Anchor::Name(name) = &chain.anchor {
                assert!(q.question.contains(name.as_str()));
                assert!(w.universe.people.iter().any(|p| &p.name == name));
            }
        }
    }
    for family in Family::ALL {
        assert!(
            qs.iter().any(|q| q.family == family),
            "{family:?} produced nothing"
        );
    }
    assert!(qs.iter().any(|q| q.kind == QuestionKind::Comparison));
    assert!(qs.iter().any(|q| q.constraints >= 2));
}

#[test]
fn generation_is_deterministic_and_thread_independent() {
    let run = |threads| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            serde_json::to_string(&generate(
                vec![Family::Base, Family::HopsConstraints],
                2,
                true,
            ))
            .unwrap()
        })
    };
    let one = run(1);
    assert_eq!(one, run(2));
    assert_eq!(rulegym::io::sha256_hex(one.as_bytes()).len(), 64);
}

#[test]
fn verification_shards_concatenate_to_the_whole_run() {
    let w = world(true);
    let config = QuestionConfig {
        families: vec![Family::Base, Family::Hops],
        per_template: 2,
        max_hops: 4,
        ..Default::default()
    };
    let verify = |p| question::verify(std::slice::from_ref(&w.engine), p, &w.universe).unwrap();
    let (whole, report) = verify(question::propose_all(&w.universe, &config, None).unwrap());
    assert!(whole.len() > 40);
    for count in [1, 2, 3, 7] {
        let mut joined = Vec::new();
        let mut rejections = 0;
        for index in 0..count {
            let shard = question::propose_all(&w.universe, &config, None)
                .unwrap()
                .into_shard(index, count)
                .unwrap();
            let (part, r) = verify(shard);
            assert!(!part.is_empty(), "shard {index} of {count} is empty");
            rejections += r.rejections;
            joined.extend(part);
        }
        assert_eq!(joined, whole, "{count} shards");
        assert_eq!(rejections, report.rejections);
    }
    let proposals = || question::propose_all(&w.universe, &config, None).unwrap();
    assert!(proposals().into_shard(3, 3).is_err());
    assert!(proposals().into_shard(0, 0).is_err());
}

#[test]
fn hard_mode_questions_verify() {
    let qs = generate(vec![Family::Base, Family::Hops], 2, false);
    let w = world(false);
    assert!(
        qs.iter()
            .any(|q| q.query.iter().any(|a| a.starts_with("cousin(")
                || a.starts_with("grand")
                || a.starts_with("aunt(")
                || a.starts_with("uncle(")
                || a.starts_with("niece(")
                || a.starts_with("nephew(")
                || a.contains("in_law("))),
        "hard mode uses derived relations"
    );
    for q in &qs {
        assert_eq!(
            q.answers,
            q.plan.evaluate_native(&w.universe).unwrap(),
            "{}",
            q.question
        );
    }
}

#[test]
fn scoring_gold_is_one_and_wrong_is_zero() {
    // Conformance with a simple set F1 (the full reward lives in the search environment).
    let f1 = |pred: &[String], gold: &[String]| {
        let hit = pred.iter().filter(|p| gold.contains(p)).count() as f64;
        if hit == 0.0 {
            0.0
        } else {
            let (p, r) = (hit / pred.len() as f64, hit / gold.len() as f64);
            2.0 * p * r / (p + r)
        }
    };
    for q in generate(vec![Family::Base], 1, true) {
        assert_eq!(f1(&q.answers, &q.answers), 1.0);
        assert_eq!(f1(&["Nobody Atall".to_owned()], &q.answers), 0.0);
    }
}

/// Golden SHA-256 of the default questions (default universe, default question config, and the
/// three training families), generated by the whole pipeline (certificates over the dataset's
/// own index included), and of that index. A change is a family-version bump: update
/// `Family::version_id`, these constants and CHANGELOG.md.
const GOLDEN_QUESTIONS: [(&str, &str); 2] = [
    (
        "base",
        "575f88835b9b81bdac0454268f71ea2b3d7e637ae23faf161d2b79fe63aa46f4",
    ),
    (
        "families",
        "ae76a1262047118386044c64434ed9ca699d29086b78ee0c2b7a4ca2aecbc0e7",
    ),
];
const GOLDEN_INDEX: &str = "e5b576a405263afef18d71069f4afbdf953287cfdc756889b4e52b80eced5181";

#[test]
fn default_questions_are_golden() {
    let configs = [
        ("base", QuestionConfig::default()),
        (
            "families",
            QuestionConfig {
                families: vec![
                    Family::Hops,
                    Family::HopsConstraints,
                    Family::HopsComparisons,
                ],
                per_template: 3,
                balance: true,
                ..Default::default()
            },
        ),
    ];
    for ((name, config), (golden_name, golden)) in configs.into_iter().zip(GOLDEN_QUESTIONS) {
        assert_eq!(name, golden_name);
        let data = rulegym::dataset::build(&rulegym::dataset::BuildConfig::new(
            UniverseConfig::default(),
            Some(config),
        ))
        .unwrap();
        let bytes = rulegym::io::jsonl_bytes(&data.questions).unwrap();
        assert_eq!(
            rulegym::io::sha256_hex(&bytes),
            golden,
            "{name} questions changed"
        );
        assert_eq!(
            rulegym::io::sha256_hex(&data.index.unwrap().to_bytes()),
            GOLDEN_INDEX,
            "the index changed"
        );
    }
}

/// Verification in batches (one engine call for many queries) gives each query the answers it
/// gets alone, for every family's questions, a query with no answer included, at any batch size;
/// a batch holding a query that cannot be compiled fails with that query's own error.
#[test]
fn batched_evaluation_equals_one_query_at_a_time() {
    let w = world(true);
    let config = QuestionConfig {
        per_template: 3,
        families: Family::ALL.to_vec(),
        ..Default::default()
    };
    let proposals = question::propose_all(&w.universe, &config, None).unwrap();
    let mut plans: Vec<Query> = proposals
        .questions()
        .iter()
        .map(|q| q.plan.clone())
        .collect();
    assert!(plans.len() > 100, "{} questions", plans.len());
    // A query with no answer: the father of someone who has no parents.
    let orphan = w
        .universe
        .people
        .iter()
        .find(|p| p.parents.is_empty())
        .unwrap();
    let nobody = rulegym::question::Chain {
        anchor: rulegym::question::Anchor::Name(orphan.name.clone()),
        steps: vec![rulegym::question::ChainStep::Hop("father".into())],
    };
    plans.push(Query::Who(nobody));
    let refs: Vec<&Query> = plans.iter().collect();
    let one_at_a_time: Vec<_> = plans
        .iter()
        .map(|q| q.evaluate(&w.engine, &w.universe).unwrap())
        .collect();
    for size in [2, 7, 16, refs.len()] {
        let batched: Vec<_> = refs
            .chunks(size)
            .flat_map(|chunk| Query::evaluate_batch(chunk, &w.engine, &w.universe).unwrap())
            .collect();
        assert_eq!(batched, one_at_a_time, "batches of {size}");
    }
    assert_eq!(one_at_a_time.last().unwrap(), &Vec::<String>::new());

    // A name nobody in the universe has is refused, as the native evaluator refuses it.
    let stranger = Query::Who(rulegym::question::Chain {
        anchor: rulegym::question::Anchor::Name("Nobody In This Universe".into()),
        steps: vec![rulegym::question::ChainStep::Hop("father".into())],
    });
    let err = Query::evaluate_batch(&[&plans[0], &stranger], &w.engine, &w.universe).unwrap_err();
    assert!(err.to_string().contains("Nobody In This Universe"), "{err}");
    assert!(stranger.evaluate_native(&w.universe).is_err());

    // An unknown relation is refused before the engine runs, as for one query.
    let bad = Query::HowMany(plans[0].chains()[0].clone(), "no_such_relation".into());
    let err = Query::evaluate_batch(&[&plans[0], &bad], &w.engine, &w.universe).unwrap_err();
    assert_eq!(
        err.to_string(),
        bad.evaluate(&w.engine, &w.universe)
            .unwrap_err()
            .to_string()
    );
}
