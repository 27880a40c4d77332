//! Filling templates with walks over the universe graph.
//!
//! * [`backward_walk`]: PhantomWiki's walk from the anchor toward the answer, uniform over the
//!   current person's (relation, relative) pairs, restarting on dead ends; only complete walks
//!   are returned.
//! * [`bidirectional_walk`]: PhantomEnvironments' anchor sampling: bind slot `a` of a k-hop chain
//!   to a random person, walk backward to slot 0 (the named person) and forward to slot k,
//!   adding attribute filters on the people walked through; beyond [`BEAM_FROM_HOPS`] hops a beam
//!   over chain prefixes ranked by candidate-set size replaces the forward walk.
//!
//! Walks only propose; answers always come from the engine.

use super::query::{Anchor, Attr, Chain, ChainStep};
use crate::relations::{Relation, relations};
use crate::universe::{PersonId, Universe};
use rand::Rng;
use rand::seq::{IndexedRandom, SliceRandom};
use serde::{Deserialize, Serialize};

/// Chains longer than this use the beam search.
pub const BEAM_FROM_HOPS: usize = 6;
/// Width of the beam over chain prefixes.
pub const BEAM_WIDTH: usize = 8;

/// How the anchor slot of a bidirectional walk is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AnchorStrategy {
    /// Uniform over slots 0..=k.
    Uniform,
    /// Round-robin over start, middle and end by question index.
    Balanced,
    /// Always slot K (clamped to the chain).
    Fixed(usize),
}

impl std::str::FromStr for AnchorStrategy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "uniform" => Ok(AnchorStrategy::Uniform),
            "balanced" => Ok(AnchorStrategy::Balanced),
            _ => s
                .strip_prefix("fixed:")
                .and_then(|k| k.parse().ok())
                .map(AnchorStrategy::Fixed)
                .ok_or_else(|| format!("anchor must be uniform, balanced or fixed:K, got {s:?}")),
        }
    }
}

impl AnchorStrategy {
    /// The anchor slot for question `index` of a `hops`-hop chain.
    pub fn slot(self, hops: usize, index: u64, rng: &mut impl Rng) -> usize {
        match self {
            AnchorStrategy::Uniform => rng.random_range(0..=hops),
            AnchorStrategy::Balanced => [0, hops / 2, hops][(index % 3) as usize],
            AnchorStrategy::Fixed(k) => k.min(hops),
        }
    }
}

fn attribute_value(u: &Universe, p: PersonId, a: Attr) -> String {
    a.fact().value(u.person(p)).to_owned()
}

/// A random attribute anchor or name for `p`.
pub fn anchor_for(u: &Universe, p: PersonId, by_attribute: bool, rng: &mut impl Rng) -> Anchor {
    if by_attribute {
        let attribute = *Attr::ALL.choose(rng).expect("non-empty");
        Anchor::Attribute {
            value: attribute_value(u, p, attribute),
            attribute,
        }
    } else {
        Anchor::Name(u.person(p).name.clone())
    }
}

/// PhantomWiki's walk: `hops` steps from a random person, uniform over (relation, relative)
/// pairs; `None` after `attempts` dead ends. Returns the chain and the people walked through.
pub fn backward_walk(
    u: &Universe,
    easy_mode: bool,
    hops: usize,
    by_attribute: bool,
    attempts: usize,
    rng: &mut impl Rng,
) -> Option<(Chain, Vec<PersonId>)> {
    let mode: Vec<&Relation> = relations(easy_mode).collect();
    'attempt: for _ in 0..attempts {
        let start = rng.random_range(0..u.people.len()) as PersonId;
        let mut path = vec![start];
        let mut steps = Vec::with_capacity(hops);
        for _ in 0..hops {
            let current = *path.last().expect("non-empty");
            let pairs: Vec<(&Relation, PersonId)> = mode
                .iter()
                .flat_map(|r| r.related(u, current).into_iter().map(move |y| (*r, y)))
                .collect();
            let Some(&(r, next)) = pairs.choose(rng) else {
                continue 'attempt;
            };
            steps.push(ChainStep::Hop(r.name.to_owned()));
            path.push(next);
        }
        let anchor = anchor_for(u, start, by_attribute, rng);
        return Some((Chain { anchor, steps }, path));
    }
    None
}

/// What a bidirectional walk produced.
#[derive(Debug, Clone)]
pub struct Walk {
    /// The chain, anchored at the name of slot 0.
    pub chain: Chain,
    /// The slot the walk started from.
    pub anchor_slot: usize,
}

/// One random (relation, neighbour) step from `p`, forward or backward, keeping the chain's
/// answer set a single person where possible: a relation type is drawn uniformly among those
/// whose step is unambiguous (forward: `p` has exactly one such relative; backward: the
/// neighbour's only such relative is `p`), and among all types with any candidate otherwise.
/// This is the walk-time uniqueness check that keeps rejections low.
fn random_step(
    u: &Universe,
    mode: &[&'static Relation],
    p: PersonId,
    forward: bool,
    rng: &mut impl Rng,
) -> Option<(&'static Relation, PersonId)> {
    let mut unambiguous: Vec<(&'static Relation, Vec<PersonId>)> = Vec::new();
    let mut any: Vec<(&'static Relation, Vec<PersonId>)> = Vec::new();
    for &r in mode {
        let candidates = if forward {
            r.related(u, p)
        } else {
            r.inverse_related(u, p)
        };
        if candidates.is_empty() {
            continue;
        }
        let single: Vec<PersonId> = if forward {
            if candidates.len() == 1 {
                candidates.clone()
            } else {
                Vec::new()
            }
        } else {
            candidates
                .iter()
                .copied()
                .filter(|&x| r.related(u, x) == [p])
                .collect()
        };
        if !single.is_empty() {
            unambiguous.push((r, single));
        }
        any.push((r, candidates));
    }
    let pool = if unambiguous.is_empty() {
        &any
    } else {
        &unambiguous
    };
    let (r, candidates) = pool.choose(rng)?;
    Some((*r, *candidates.choose(rng)?))
}

/// Bidirectional anchor sampling of a `hops`-hop chain with `filters` attribute filters on
/// people after slot 0. `None` on a dead end (the caller counts a rejection and retries).
pub fn bidirectional_walk(
    u: &Universe,
    easy_mode: bool,
    hops: usize,
    filters: usize,
    anchor_slot: usize,
    rng: &mut impl Rng,
) -> Option<Walk> {
    let mode: Vec<&'static Relation> = relations(easy_mode).collect();
    let (people, rels): (Vec<PersonId>, Vec<&'static Relation>) = if hops >= BEAM_FROM_HOPS {
        beam(u, &mode, hops, rng)?
    } else {
        let middle = rng.random_range(0..u.people.len()) as PersonId;
        let mut backward = vec![];
        let mut p = middle;
        for _ in 0..anchor_slot {
            let (r, x) = random_step(u, &mode, p, false, rng)?;
            backward.push((r, x));
            p = x;
        }
        let mut people: Vec<PersonId> = backward.iter().rev().map(|&(_, x)| x).collect();
        let mut rels: Vec<&'static Relation> = backward.iter().rev().map(|&(r, _)| r).collect();
        people.push(middle);
        let mut p = middle;
        for _ in anchor_slot..hops {
            let (r, y) = random_step(u, &mode, p, true, rng)?;
            rels.push(r);
            people.push(y);
            p = y;
        }
        (people, rels)
    };
    // Filters on distinct slots 1..=hops, with the walked person's own values.
    let mut slots: Vec<usize> = (1..=hops).collect();
    slots.shuffle(rng);
    let mut chosen: Vec<(usize, Attr)> = slots
        .into_iter()
        .take(filters)
        .map(|s| (s, *Attr::ALL.choose(rng).expect("non-empty")))
        .collect();
    if chosen.len() < filters {
        return None;
    }
    chosen.sort();
    let mut steps = Vec::new();
    for (i, r) in rels.iter().enumerate() {
        steps.push(ChainStep::Hop(r.name.to_owned()));
        for &(_, attribute) in chosen.iter().filter(|(s, _)| *s == i + 1) {
            steps.push(ChainStep::Filter {
                attribute,
                value: attribute_value(u, people[i + 1], attribute),
            });
        }
    }
    let chain = Chain {
        anchor: Anchor::Name(u.person(people[0]).name.clone()),
        steps,
    };
    Some(Walk {
        chain,
        anchor_slot: if hops >= BEAM_FROM_HOPS {
            0
        } else {
            anchor_slot
        },
    })
}

/// Beam over chain prefixes from a random person, ranked by the size of the set the prefix
/// reaches (smallest first, so long chains stay answerable by one person); returns one path of
/// a prefix that ends at a single person.
fn beam(
    u: &Universe,
    mode: &[&'static Relation],
    hops: usize,
    rng: &mut impl Rng,
) -> Option<(Vec<PersonId>, Vec<&'static Relation>)> {
    let start = rng.random_range(0..u.people.len()) as PersonId;
    // (relations, reached set, one witness path)
    let mut beam: Vec<(Vec<&'static Relation>, Vec<PersonId>, Vec<PersonId>)> =
        vec![(Vec::new(), vec![start], vec![start])];
    for _ in 0..hops {
        let mut next = Vec::new();
        for (rels, set, path) in &beam {
            for &r in mode {
                let mut reached: Vec<PersonId> =
                    set.iter().flat_map(|&p| r.related(u, p)).collect();
                reached.sort_unstable();
                reached.dedup();
                let last = *path.last().expect("non-empty");
                let Some(&y) = r.related(u, last).choose(rng) else {
                    continue;
                };
                let mut rels = rels.clone();
                rels.push(r);
                let mut path = path.clone();
                path.push(y);
                next.push((rels, reached, path));
            }
        }
        next.shuffle(rng);
        next.sort_by_key(|(_, set, _)| set.len()); // stable: ties stay in shuffled order
        next.truncate(BEAM_WIDTH);
        if next.is_empty() {
            return None;
        }
        beam = next;
    }
    beam.into_iter()
        .find(|(_, set, _)| set.len() == 1)
        .map(|(rels, _, path)| (path, rels))
}
