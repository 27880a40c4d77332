//! Question quality: no degenerate chains in any family (checked here independently of the
//! generator's own check), solvability certificates equal to replaying the oracle, the paper's
//! question shapes.

use proptest::prelude::*;
use rulegym::dataset::{self, BuildConfig};
use rulegym::question::sample::{WalkEnd, WalkShape, backward_walk, bidirectional_walk};
use rulegym::question::{
    self, Anchor, Attr, Certify, Chain, Family, Query, QuestionConfig, QuestionKind, Sampler,
    Solvability, WalkLimits,
};
use rulegym::search::oracle::{Certifier, bounded_proof_plan, replay};
use rulegym::search::{Retriever, SearchEnvConfig};
use rulegym::universe::{PersonId, Universe, UniverseConfig};
use std::sync::Arc;

/// The people reached after the anchor and after each hop (filters applied), each prefix of
/// the chain evaluated from scratch by the native evaluator.
fn slots(u: &Universe, chain: &Chain) -> Vec<Vec<PersonId>> {
    let hop_ends: Vec<usize> = chain
        .steps
        .iter()
        .enumerate()
        .filter(|(_, s)| matches!(s, question::ChainStep::Hop(_)))
        .map(|(i, _)| i)
        .collect();
    // A slot ends just before the next hop (its filters included) or at the end.
    let cuts = hop_ends.iter().copied().chain([chain.steps.len()]);
    cuts.map(|cut| {
        Chain {
            anchor: chain.anchor.clone(),
            steps: chain.steps[..cut].to_vec(),
        }
        .evaluate_native(u)
        .unwrap()
    })
    .collect()
}

/// Every violation of "no chain visits a person twice, no answer is named in the question".
fn violations(u: &Universe, q: &question::Question) -> Vec<String> {
    let mut found = Vec::new();
    for chain in q.plan.chains() {
        let slots = slots(u, chain);
        for (i, a) in slots.iter().enumerate() {
            for b in &slots[i + 1..] {
                if let Some(p) = a.iter().find(|p| b.contains(p)) {
                    found.push(format!("revisits {}", u.person(*p).name));
                }
            }
        }
        if chain.hops().count() > 0
            && let Anchor::Name(name) = &chain.anchor
            && !matches!(q.plan, Query::What(..))
            && q.answers.contains(name)
        {
            found.push(format!("answer {name} anchors a chain"));
        }
    }
    if let Query::What(chain, _) = &q.plan {
        for a in &q.answers {
            let stated = match &chain.anchor {
                Anchor::Attribute { value, .. } => value == a,
                Anchor::Name(_) => false,
            } || chain
                .steps
                .iter()
                .any(|s| matches!(s, question::ChainStep::Filter { value, .. } if value == a));
            if stated {
                found.push(format!("answer {a} is stated in the question"));
            }
        }
    }
    found
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    /// Zero degenerate questions over seeds, universe sizes, easy and hard mode, both samplers
    /// and every family (phase 1 only: the property is about the sampled questions).
    #[test]
    fn no_family_generates_degenerate_questions(
        seed in 0u64..10_000, trees in 5usize..60, easy in any::<bool>(), uniform in any::<bool>(),
    ) {
        let universe = Universe::generate(&UniverseConfig {
            seed,
            num_family_trees: trees,
            easy_mode: easy,
            ..Default::default()
        }).unwrap();
        let config = QuestionConfig {
            seed,
            families: Family::ALL.to_vec(),
            per_template: 2,
            easy_mode: easy,
            sampler: if uniform { Sampler::Uniform } else { Sampler::Unambiguous },
            ..Default::default()
        };
        let proposals = question::propose_all(&universe, &config, None).unwrap();
        prop_assert!(!proposals.questions().is_empty());
        for q in proposals.questions() {
            let v = violations(&universe, q);
            prop_assert!(v.is_empty(), "{}: {:?}", q.question, v);
        }
    }
}

fn build(families: Vec<Family>, per: usize, keep_unsolvable: bool) -> dataset::Dataset {
    dataset::build(&BuildConfig::new(
        UniverseConfig {
            num_family_trees: 40,
            seed: 3,
            ..Default::default()
        },
        Some(QuestionConfig {
            seed: 3,
            families,
            per_template: per,
            keep_unsolvable,
            ..Default::default()
        }),
    ))
    .unwrap()
}

/// The certificate is the replay's verdict: solvable exactly when the proof-derived oracle,
/// replayed in the search environment over the dataset's own index, reaches F1 = 1 with its
/// searches and answer within the turn cap; and it counts the same searches.
#[test]
fn certificates_equal_oracle_replays() {
    let data = build(Family::ALL.to_vec(), 4, true);
    let index: Arc<dyn Retriever> = data.index.clone().unwrap();
    let (mut solvable, mut unsolvable) = (0, 0);
    for q in &data.questions {
        let c = q.certificate.unwrap();
        let config = SearchEnvConfig {
            top_k: c.top_k,
            max_turns: c.max_turns,
            ..SearchEnvConfig::default()
        };
        let t = replay(&data.universe, index.clone(), &config, q).unwrap();
        assert_eq!(t.searches, c.searches, "{}", q.question);
        assert_eq!(
            c.solvable,
            t.f1 == 1.0 && t.searches < c.max_turns,
            "{}: {t:?}",
            q.question
        );
        if c.solvable {
            solvable += 1;
        } else {
            unsolvable += 1;
        }
    }
    // Both verdicts occur, so the equality above is tested both ways.
    assert!(
        solvable > 50 && unsolvable > 10,
        "{solvable} / {unsolvable}"
    );
}

/// The anchors walks draw from are exactly those whose opening search (run here as the
/// environment runs it, a dense top-k search of the dataset's own index) retrieves every person
/// they denote: each person's name, each (person, attribute) whose value has at most k holders
/// that the search all returns. Both kinds of miss occur, so the pool is a real restriction.
#[test]
fn walks_draw_anchors_among_exactly_the_retrievable_ones() {
    let data = build(vec![Family::Base], 1, false);
    let index = data.index.clone().unwrap();
    let u = &data.universe;
    let setting = Solvability::default();
    let certifier = Certifier::new(u, &index, setting).unwrap();
    let pool = certifier.anchors().unwrap();
    let k = setting.top_k;
    let retrieves = |text: &str, people: &[PersonId]| {
        let hits = index.search(&[text], k).unwrap().remove(0);
        let ids: Vec<&str> = hits
            .iter()
            .map(|h| index.docs()[h.index as usize].id.as_str())
            .collect();
        people.iter().all(|p| ids.contains(&p.to_string().as_str()))
    };
    let mut names = Vec::new();
    let mut attributes = Vec::new();
    for (p, person) in u.people.iter().enumerate() {
        let p = p as PersonId;
        if retrieves(&person.name, &[p]) {
            names.push(p);
        }
        for attribute in Attr::ALL {
            let value = attribute.fact().value(person);
            let holders = u.holders(attribute.fact(), value);
            if holders.len() <= k && retrieves(&format!("{} {value}", attribute.noun()), &holders) {
                attributes.push((p, attribute));
            }
        }
    }
    assert_eq!(pool.names, names);
    assert_eq!(pool.attributes, attributes);
    assert!(!attributes.is_empty() && attributes.len() < 3 * u.people.len());
    // Every draw is one of them, of the kind asked for.
    let mut rng = rulegym::seed::stream(3, "anchor-pool", 0);
    for by_attribute in [false, true] {
        for _ in 0..200 {
            let (p, anchor) = pool.draw(u, by_attribute, &mut rng).unwrap();
            match anchor {
                Anchor::Name(name) => {
                    assert!(!by_attribute && names.contains(&p) && u.person(p).name == name)
                }
                Anchor::Attribute { attribute, value } => {
                    assert!(by_attribute && attributes.contains(&(p, attribute)));
                    assert_eq!(attribute.fact().value(u.person(p)), value);
                }
            }
        }
    }
}

/// A walk given up for needing too many searches is one whose every completion the
/// certificate rejects: the same random stream, walked without the limit, either dead-ends or
/// ends in a chain whose proof is over the cap; a walk the limit lets through is unchanged.
#[test]
fn walks_give_up_only_on_chains_over_the_turn_cap() {
    let data = build(vec![Family::Base], 1, false);
    let u = &data.universe;
    let cap = Solvability::default().max_turns - 1;
    let limited = WalkLimits {
        max_searches: cap,
        ..WalkLimits::NONE
    };
    let mut given_up = 0;
    for i in 0..3000u64 {
        let hops = 1 + (i % 6) as usize;
        let by_attribute = i % 2 == 0;
        let stream = || rulegym::seed::stream(11, "walk-limits", i);
        let (limited, unlimited) = if i % 3 == 0 {
            let walk = |limits: &WalkLimits| {
                backward_walk(u, true, hops, by_attribute, limits, 1, &mut stream())
                    .map(|(chain, _)| chain)
            };
            (walk(&limited), walk(&WalkLimits::NONE))
        } else {
            let shape = WalkShape {
                hops: hops.min(5),
                filters: 0,
                anchor_slot: (i as usize / 3) % (hops.min(5) + 1),
                by_attribute,
            };
            let walk = |limits: &WalkLimits| {
                bidirectional_walk(u, true, Sampler::Uniform, shape, limits, &mut stream())
                    .map(|w| w.chain)
            };
            (walk(&limited), walk(&WalkLimits::NONE))
        };
        match limited {
            Err(WalkEnd::TooManySearches) => {
                given_up += 1;
                if let Ok(chain) = unlimited {
                    let query = Query::Who(chain);
                    assert!(
                        bounded_proof_plan(u, &query, cap).is_none(),
                        "{query:?} was given up but fits in {cap} searches"
                    );
                }
            }
            other => assert_eq!(other, unlimited),
        }
    }
    assert!(given_up > 50, "only {given_up} walks were given up");
}

/// By default every family keeps only solvable questions, so the oracle answers all of them
/// within the turn cap, over the index written into the dataset directory.
#[test]
fn default_questions_are_all_solvable_in_the_environment() {
    let data = build(Family::ALL.to_vec(), 3, false);
    let index: Arc<dyn Retriever> = data.index.clone().unwrap();
    let config = SearchEnvConfig::default();
    for family in Family::ALL {
        let qs: Vec<_> = data
            .questions
            .iter()
            .filter(|q| q.family == family)
            .collect();
        assert!(qs.len() > 5, "{family:?}: {}", qs.len());
        for q in qs {
            assert!(q.certificate.unwrap().solvable);
            let t = replay(&data.universe, index.clone(), &config, q).unwrap();
            assert_eq!(t.f1, 1.0, "{}: {:?}", q.question, t.failure);
            assert!(t.searches < config.max_turns, "{}", q.question);
        }
    }
}

/// The hops families draw the grammar's question types: who and attribute questions, chains
/// anchored on names and on attributes, never aggregation; comparisons include the zero-hop cell.
#[test]
fn hops_families_have_the_papers_shapes() {
    let data = build(
        vec![
            Family::Hops,
            Family::HopsConstraints,
            Family::HopsComparisons,
        ],
        6,
        false,
    );
    let qs = &data.questions;
    let hops: Vec<_> = qs.iter().filter(|q| q.family != Family::Base).collect();
    assert!(hops.iter().all(|q| !q.is_aggregation));
    assert!(hops.iter().any(|q| q.kind == QuestionKind::What));
    assert!(hops.iter().any(|q| q.kind == QuestionKind::Who));
    let attribute_anchored = |q: &&&question::Question| {
        q.plan
            .chains()
            .iter()
            .any(|c| matches!(c.anchor, Anchor::Attribute { .. }))
    };
    assert!(hops.iter().filter(attribute_anchored).count() > hops.len() / 5);
    let zero_hop: Vec<_> = qs
        .iter()
        .filter(|q| q.family == Family::HopsComparisons && q.hops == 0)
        .collect();
    assert!(!zero_hop.is_empty());
    for q in zero_hop {
        assert_eq!(q.kind, QuestionKind::Comparison);
        assert!(q.question.starts_with("Who is older, "), "{}", q.question);
    }
    for q in hops {
        assert_eq!(q.answers.len(), 1, "{}", q.question);
    }
}

/// `generate` writes the environment's index (listed in the manifest, byte-identical to what
/// `rulegym index` builds from `articles.jsonl`), `oracle` uses it by default and answers every
/// question; unknown presets and knob values are errors naming the valid ones.
#[test]
fn generate_writes_a_ready_environment_and_rejects_unknown_knobs() {
    use super::cli::{generate_small, rulegym, run, run_ok};
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    generate_small(&data);
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(data.join("manifest.json")).unwrap()).unwrap();
    assert!(manifest["sha256"][dataset::INDEX_FILE].is_string());
    let rebuilt = dir.path().join("rebuilt.idx");
    run_ok(
        rulegym()
            .args(["index", "--corpus"])
            .arg(data.join("articles.jsonl"))
            .arg("--out")
            .arg(&rebuilt),
    );
    assert_eq!(
        std::fs::read(&rebuilt).unwrap(),
        std::fs::read(data.join(dataset::INDEX_FILE)).unwrap()
    );
    let out = run_ok(
        rulegym()
            .args(["oracle", "--dataset"])
            .arg(&data)
            .arg("--out")
            .arg(dir.path().join("oracle.jsonl")),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("(100.0%)"), "{stdout}");
    for (flag, value, valid) in [
        ("--preset", "phantomenv", "valid: phantomenvs"),
        ("--sampler", "random", "valid: uniform, unambiguous"),
        ("--anchor", "middle", "valid: uniform, balanced, fixed:K"),
        (
            "--comparisons",
            "older,taller",
            "valid: older, younger, born-first",
        ),
        (
            "--families",
            "hops,chains",
            "base, hops, hops+constraints, hops+comparisons",
        ),
    ] {
        let o = run(rulegym()
            .args(["generate", "--quiet", flag, value, "--out"])
            .arg(dir.path().join("never")));
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success() && stderr.contains(valid),
            "{flag}: {stderr}"
        );
        assert!(!dir.path().join("never").exists());
    }
}

/// Generation and PhantomWiki verification agree on every comparison shape: rulegym's own
/// questions (older, younger, born first, oldest, youngest, most; multi-attribute sides),
/// written as PhantomWiki `questions.json` records (text, answers, query atoms), are read back by
/// `phantomwiki verify`'s compiler and re-answered by the engine to the same answers.
#[test]
fn generated_extended_shapes_verify_as_phantomwiki_records() {
    use rulegym::dataset::phantomwiki::{parse_questions, verify_questions};
    use rulegym::question::Comparison;
    let data = dataset::build(&BuildConfig::new(
        UniverseConfig {
            num_family_trees: 40,
            seed: 5,
            ..Default::default()
        },
        Some(QuestionConfig {
            seed: 5,
            families: vec![Family::HopsComparisons],
            per_template: 6,
            comparisons: Comparison::ALL.to_vec(),
            multi_attribute_sides: true,
            ..Default::default()
        }),
    ))
    .unwrap();
    let kinds: std::collections::BTreeSet<&str> =
        data.questions.iter().map(|q| q.kind.as_str()).collect();
    for kind in [
        "comparison",
        "comparison-younger",
        "comparison-born-first",
        "superlative-oldest",
        "superlative-youngest",
        "superlative-most",
    ] {
        assert!(kinds.contains(kind), "{kind} missing from {kinds:?}");
    }
    assert!(
        data.questions
            .iter()
            .any(|q| q.hops == 0 && q.question.contains(" and whose ")),
        "a multi-attribute side"
    );
    let records: Vec<serde_json::Value> = data
        .questions
        .iter()
        .map(|q| {
            serde_json::json!({
                "id": q.id,
                "question": q.question,
                "answer": q.answers,
                "prolog": {"query": q.query, "answer": q.answer_variable},
            })
        })
        .collect();
    let pw = parse_questions(&serde_json::to_string(&records).unwrap(), "generated").unwrap();
    let engine = rulegym::engine::Engine::with_facts(&data.universe.engine_facts()).unwrap();
    let report = verify_questions(&data.universe, &engine, &pw);
    assert_eq!(
        (
            report.agree,
            report.disagree,
            report.errors,
            report.malformed,
            report.ambiguous
        ),
        (data.questions.len(), 0, 0, 0, 0),
        "{:#?}",
        (
            &report.error_details,
            &report.disagreements,
            &report.ambiguous_details
        )
    );
}

/// `generate --explain` prints a row per cell with its rejected walks by reason, whose sums
/// are the summary line's totals, and what each word means.
#[test]
fn generate_explains_its_rejections_per_cell() {
    use super::cli::{rulegym, run_ok};
    let dir = tempfile::tempdir().unwrap();
    let out = run_ok(
        rulegym()
            .args([
                "generate",
                "--num-family-trees",
                "4",
                "--families",
                "hops",
                "--explain",
            ])
            .args(["--per-template", "3", "--out"])
            .arg(dir.path().join("d")),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    let summary = err.lines().find(|l| l.starts_with("wrote ")).expect(&err);
    let all: Vec<usize> = err
        .lines()
        .find(|l| l.starts_with("all "))
        .expect(&err)
        .split_whitespace()
        .skip(1)
        .map(|n| n.parse().unwrap())
        .collect();
    let [
        _slots,
        questions,
        dead,
        dup,
        not_unique,
        degenerate,
        unsolvable,
    ] = all[..]
    else {
        panic!("{all:?}")
    };
    let expected = format!(
        "{questions} questions and the search index to {} (",
        dir.path().join("d").display()
    );
    assert!(summary.contains(&expected), "{summary}");
    let reasons = format!(
        "{dead} dead ends, {dup} duplicates, {not_unique} not unique, {degenerate} degenerate, \
         {unsolvable} unsolvable)"
    );
    assert!(summary.ends_with(&reasons), "{summary} / {reasons}");
    assert_eq!(
        err.lines().filter(|l| l.starts_with("hops/h")).count(),
        7,
        "{err}"
    );
    assert!(
        err.contains("unsolvable: the search environment's oracle"),
        "{err}"
    );
}
