//! Sampler statistics behind BENCHMARKS.md "Question sampler": per-cell rejection rates (by
//! reason) and the relation mix of the hops family next to a uniform-step reference (every
//! (person, relation, relative) triple of the universe counted once), for both samplers, with
//! solvability certificates as `generate` computes them.
//!
//! `cargo run --release --example question_stats -- [trees] [per-cell] [easy|hard]`
use rulegym::dataset::build::article_index;
use rulegym::question::{self, ChainStep, Family, QuestionConfig, Sampler};
use rulegym::relations::relations;
use rulegym::search::oracle::Certifier;
use rulegym::universe::{Universe, UniverseConfig};
use std::collections::BTreeMap;
use std::time::Instant;

fn main() -> rulegym::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let trees = args.first().map_or(100, |a| a.parse().expect("trees"));
    let per = args.get(1).map_or(100, |a| a.parse().expect("per-cell"));
    let easy = args.get(2).is_none_or(|m| m != "hard");
    let universe = Universe::generate(&UniverseConfig {
        num_family_trees: trees,
        easy_mode: easy,
        ..Default::default()
    })?;
    let index = article_index(&rulegym::corpus::articles(&universe))?;
    let base = QuestionConfig {
        families: vec![
            Family::Hops,
            Family::HopsConstraints,
            Family::HopsComparisons,
        ],
        per_template: per,
        easy_mode: easy,
        ..Default::default()
    };
    let certifier = Certifier::new(&universe, &index, base.solvability)?;
    println!(
        "{} people, {} mode, {per} slots per cell, certificates top-{} within {} turns",
        universe.people.len(),
        if easy { "easy" } else { "hard" },
        base.solvability.top_k,
        base.solvability.max_turns
    );
    // Reference: one uniform step from every person, every (relation, relative) pair once.
    let mut reference: BTreeMap<&str, usize> = BTreeMap::new();
    for p in 0..universe.people.len() as u32 {
        for r in relations(easy) {
            *reference.entry(r.name).or_default() += r.related(&universe, p).len();
        }
    }
    let mut mixes = Vec::new();
    for sampler in [Sampler::Uniform, Sampler::Unambiguous] {
        let config = QuestionConfig {
            sampler,
            ..base.clone()
        };
        let start = Instant::now();
        let proposals = question::propose_all(&universe, &config, Some(&certifier))?;
        println!(
            "\n## sampler {sampler:?}: {} questions in {:.2} s",
            proposals.questions().len(),
            start.elapsed().as_secs_f64()
        );
        println!(
            "| cell | slots | accepted | rejection rate | dead ends | not unique | degenerate | unsolvable | duplicates |"
        );
        println!("|---|---|---|---|---|---|---|---|---|");
        for (cell, c) in &proposals.report().cells {
            println!(
                "| {cell} | {} | {} | {:.1}% | {} | {} | {} | {} | {} |",
                c.slots,
                c.accepted,
                100.0 * c.rejection_rate(),
                c.dead_ends,
                c.not_unique,
                c.degenerate,
                c.unsolvable,
                c.duplicates
            );
        }
        let mut mix: BTreeMap<String, usize> = BTreeMap::new();
        for q in proposals
            .questions()
            .iter()
            .filter(|q| q.family == Family::Hops)
        {
            for chain in q.plan.chains() {
                for step in &chain.steps {
                    if let ChainStep::Hop(r) = step {
                        *mix.entry(r.clone()).or_default() += 1;
                    }
                }
            }
        }
        mixes.push((sampler, mix));
    }
    fn total<K>(m: &BTreeMap<K, usize>) -> f64 {
        m.values().sum::<usize>().max(1) as f64
    }
    println!("\n## hops family: relation mix (share of hops)");
    println!("| relation | uniform-step reference | sampler uniform | sampler unambiguous |");
    println!("|---|---|---|---|");
    let reference_total = total(&reference);
    for (r, n) in &reference {
        let share =
            |m: &BTreeMap<String, usize>| 100.0 * *m.get(*r).unwrap_or(&0) as f64 / total(m);
        println!(
            "| {r} | {:.1}% | {:.1}% | {:.1}% |",
            100.0 * *n as f64 / reference_total,
            share(&mixes[0].1),
            share(&mixes[1].1)
        );
    }
    Ok(())
}
