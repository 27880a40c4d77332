//! Rejection rate of bidirectional anchor sampling by chain length, on a 10K-person universe.
//! `cargo run --release --example rejection_rate -- 1000 200` (trees, questions per cell).
use rulegym::question::{self, AnchorStrategy, Family, QuestionConfig};
use rulegym::universe::{Universe, UniverseConfig};
use std::collections::BTreeMap;

fn main() -> rulegym::Result<()> {
    let mut args = std::env::args()
        .skip(1)
        .map(|a| a.parse::<usize>().unwrap());
    let (trees, per) = (args.next().unwrap_or(1000), args.next().unwrap_or(200));
    let universe = Universe::generate(&UniverseConfig {
        num_family_trees: trees,
        ..Default::default()
    })?;
    for (family, anchor) in [
        (Family::Hops, AnchorStrategy::Uniform),
        (Family::Hops, AnchorStrategy::Balanced),
        (Family::HopsConstraints, AnchorStrategy::Uniform),
    ] {
        let config = QuestionConfig {
            families: vec![family],
            per_template: per,
            anchor,
            ..Default::default()
        };
        // Phase 1 only: rejection counts come from sampling; verification never rejects.
        let proposals = question::propose_all(&universe, &config, None)?;
        let mut by_hops: BTreeMap<usize, (u64, u64)> = BTreeMap::new();
        for q in proposals.questions() {
            let e = by_hops.entry(q.hops).or_default();
            e.0 += 1;
            e.1 += q.rejections as u64;
        }
        let rates: Vec<String> = by_hops
            .iter()
            .map(|(h, (ok, rej))| format!("{h}:{:.3}", *rej as f64 / (*ok + *rej) as f64))
            .collect();
        println!(
            "{} people, {} anchor={anchor:?}: rejection rate by hops {}",
            universe.people.len(),
            family.name(),
            rates.join(" ")
        );
    }
    Ok(())
}
