//! Filling templates with walks over the universe graph.
//!
//! * [`backward_walk`]: PhantomWiki's walk from the anchor toward the answer, uniform over the
//!   current person's (relation, relative) pairs, restarting on dead ends; only complete walks
//!   are returned.
//! * [`bidirectional_walk`]: PhantomEnvironments' anchor sampling: bind slot `a` of a k-hop chain
//!   to a random person, walk backward to slot 0 (the anchor) and forward to slot k, adding
//!   attribute filters on the people walked through; beyond [`BEAM_FROM_HOPS`] hops a beam over
//!   chain prefixes ranked by candidate-set size replaces the forward walk. Each step is drawn by
//!   the configured [`Sampler`].
//!
//! No walk visits a person twice: every step excludes the people already on the path, so
//! "the child of the mother of X" can only be walked to a sibling of X, never back to X (which
//! would be a question that names its own answer). Walks only propose; answers always come
//! from the engine.

use super::certify::Anchors;
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
#[non_exhaustive]
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
                .ok_or_else(|| {
                    format!("unknown anchor strategy {s:?} (valid: uniform, balanced, fixed:K)")
                }),
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

/// How each step of a bidirectional walk is drawn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Sampler {
    /// PhantomEnvironments' walk: uniform over the (relation, person) pairs that satisfy a
    /// relation from the current person, people already on the path excluded; questions whose
    /// engine answer is not unique are rejected afterwards. Of the two samplers, its relation
    /// mix is the closer to the graph's.
    #[default]
    Uniform,
    /// rulegym 0.1's walk: a relation drawn uniformly among those with exactly one candidate
    /// (unambiguous steps), all relations otherwise. 1.3-3x fewer rejections than `uniform` at
    /// 1-5 hops, at the price of a relation mix further skewed towards mother, father, husband
    /// and wife (see BENCHMARKS.md, "Question sampler").
    Unambiguous,
}

impl Sampler {
    /// The samplers' names, for error messages.
    pub const NAMES: &'static str = "uniform, unambiguous";
}

impl std::str::FromStr for Sampler {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "uniform" => Ok(Sampler::Uniform),
            "unambiguous" => Ok(Sampler::Unambiguous),
            _ => Err(format!("unknown sampler {s:?} (valid: {})", Sampler::NAMES)),
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

/// "The person whose hobby is H and whose occupation is O [and whose date of birth is D]":
/// two or three of `p`'s attributes, the one held by the fewest people first (the search an
/// agent makes), the others as filters on it.
pub fn multi_attribute_chain(u: &Universe, p: PersonId, rng: &mut impl Rng) -> Chain {
    let count = rng.random_range(2..=3);
    let mut attributes = Attr::ALL.to_vec();
    attributes.shuffle(rng);
    attributes.truncate(count);
    attributes.sort_by_key(|&a| (u.holders(a.fact(), a.fact().value(u.person(p))).len(), a));
    let anchor = Anchor::Attribute {
        attribute: attributes[0],
        value: attribute_value(u, p, attributes[0]),
    };
    let steps = attributes[1..]
        .iter()
        .map(|&attribute| ChainStep::Filter {
            attribute,
            value: attribute_value(u, p, attribute),
        })
        .collect();
    Chain { anchor, steps }
}

/// The people an anchor denotes: `p` for its name, every holder of the attribute's value.
fn anchor_set(u: &Universe, anchor: &Anchor, p: PersonId) -> Vec<PersonId> {
    match anchor {
        Anchor::Name(_) => vec![p],
        Anchor::Attribute { attribute, value } => u.holders(attribute.fact(), value),
    }
}

/// The slot sets of a chain being walked, set-at-a-time: a relation may extend the chain only
/// if its image of the last slot avoids every person reached so far, so that no chain passes
/// the same person twice even through the people it denotes besides the walked ones ("the
/// child of the mother of Ann" reaches Ann again whenever Ann's mother has children).
struct Reached {
    last: Vec<PersonId>,
    seen: Vec<bool>,
}

impl Reached {
    /// Starts from slot 0's set.
    fn new(u: &Universe, first: Vec<PersonId>) -> Reached {
        let mut seen = vec![false; u.people.len()];
        for &p in &first {
            seen[p as usize] = true;
        }
        Reached { last: first, seen }
    }

    /// The image of the last slot under `r`, if it avoids everyone reached so far.
    fn image(&self, u: &Universe, r: &Relation) -> Option<Vec<PersonId>> {
        let mut next: Vec<PersonId> = Vec::new();
        for &p in &self.last {
            for y in r.related(u, p) {
                if self.seen[y as usize] {
                    return None;
                }
                next.push(y);
            }
        }
        next.sort_unstable();
        next.dedup();
        Some(next)
    }

    /// Appends a slot (an image returned by [`Reached::image`]).
    fn push(&mut self, next: Vec<PersonId>) {
        for &p in &next {
            self.seen[p as usize] = true;
        }
        self.last = next;
    }
}

/// Why a walk produced no chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalkEnd {
    /// No unvisited person satisfies an admissible relation.
    DeadEnd,
    /// The chain's anchor denotes more people than `max_anchor_set` (a question anchored there
    /// cannot be solvable: one search cannot retrieve them all), or no anchor is retrievable.
    AnchorTooCommon,
    /// The chain so far already needs more searches than `max_searches`: its proof reads every
    /// set a hop starts from, so any question built on it is over the turn cap.
    TooManySearches,
}

/// What a walk gives up on early, because only unsolvable questions could come of it (the
/// certificates would reject them afterwards, so giving up sooner changes nothing but time).
#[derive(Debug, Clone, Copy)]
pub struct WalkLimits<'a> {
    /// Give up on anchors that denote more people than this.
    pub max_anchor_set: usize,
    /// Give up on chains whose proof already needs more searches than this (an attribute
    /// anchor's search, and every person a hop starts from; chains with filters are never
    /// given up on, as a filter shrinks the sets the proof reads).
    pub max_searches: usize,
    /// Draw the start of walks that begin at the anchor among these.
    pub anchors: Option<&'a Anchors>,
}

impl WalkLimits<'_> {
    /// No limits: every walk runs to its end.
    pub const NONE: WalkLimits<'static> = WalkLimits {
        max_anchor_set: usize::MAX,
        max_searches: usize::MAX,
        anchors: None,
    };

    /// A start person and its anchor: uniform over the retrievable anchors when known,
    /// otherwise a uniform person and [`anchor_for`].
    fn start(
        &self,
        u: &Universe,
        by_attribute: bool,
        rng: &mut impl Rng,
    ) -> Result<(PersonId, Anchor), WalkEnd> {
        match self.anchors {
            Some(pool) => pool
                .draw(u, by_attribute, rng)
                .ok_or(WalkEnd::AnchorTooCommon),
            None => {
                let start = rng.random_range(0..u.people.len()) as PersonId;
                Ok((start, anchor_for(u, start, by_attribute, rng)))
            }
        }
    }
}

/// Counts the searches a chain's proof needs at least, hop by hop (see
/// [`WalkLimits::max_searches`]).
struct SearchCount {
    searches: usize,
    limit: usize,
}

impl SearchCount {
    fn new(anchor: &Anchor, limit: usize) -> SearchCount {
        SearchCount {
            searches: usize::from(matches!(anchor, Anchor::Attribute { .. })),
            limit,
        }
    }

    /// A hop from `set`, which the proof reads; `Err` past the limit.
    fn hop(&mut self, set: &[PersonId]) -> Result<(), WalkEnd> {
        self.searches += set.len();
        if self.searches > self.limit {
            Err(WalkEnd::TooManySearches)
        } else {
            Ok(())
        }
    }
}

/// PhantomWiki's walk: `hops` steps from a random person (or a random retrievable anchor, see
/// [`WalkLimits`]), uniform over (relation, relative) pairs, among the relations whose step
/// keeps the chain from passing anyone twice (set-at-a-time, see `Reached`), within `limits`;
/// the reason of the last failure after `attempts` failed walks. Returns the chain and the
/// people walked through.
pub fn backward_walk(
    u: &Universe,
    easy_mode: bool,
    hops: usize,
    by_attribute: bool,
    limits: &WalkLimits,
    attempts: usize,
    rng: &mut impl Rng,
) -> Result<(Chain, Vec<PersonId>), WalkEnd> {
    let mode: Vec<&Relation> = relations(easy_mode).collect();
    let mut end = WalkEnd::DeadEnd;
    'attempt: for _ in 0..attempts {
        let (start, anchor) = match limits.start(u, by_attribute, rng) {
            Ok(s) => s,
            Err(e) => {
                end = e;
                continue 'attempt;
            }
        };
        let first = anchor_set(u, &anchor, start);
        if first.len() > limits.max_anchor_set {
            end = WalkEnd::AnchorTooCommon;
            continue 'attempt;
        }
        end = WalkEnd::DeadEnd;
        let mut count = SearchCount::new(&anchor, limits.max_searches);
        let mut reached = Reached::new(u, first);
        let mut path = vec![start];
        let mut steps = Vec::with_capacity(hops);
        for _ in 0..hops {
            if let Err(e) = count.hop(&reached.last) {
                end = e;
                continue 'attempt;
            }
            let current = *path.last().expect("non-empty");
            let mut pairs: Vec<(&'static Relation, PersonId)> = mode
                .iter()
                .flat_map(|&r| r.related(u, current).into_iter().map(move |y| (r, y)))
                .collect();
            let Some((r, next, image)) = admissible_pair(u, &reached, &mut pairs, rng) else {
                continue 'attempt;
            };
            reached.push(image);
            steps.push(ChainStep::Hop(r.name.to_owned()));
            path.push(next);
        }
        return Ok((Chain { anchor, steps }, path));
    }
    Err(end)
}

/// What a bidirectional walk produced.
#[derive(Debug, Clone)]
pub struct Walk {
    /// The chain, anchored at slot 0 (its name, or one of its attributes).
    pub chain: Chain,
    /// The people walked through, slot 0 to slot k (all distinct).
    pub people: Vec<PersonId>,
    /// The slot the walk started from.
    pub anchor_slot: usize,
}

/// Draws uniformly among `pairs` whose relation keeps the chain's sets apart (see `Reached`),
/// with its image: rejection sampling that drops a relation's pairs when it fails, so only the
/// drawn relations' images are computed. `None` when no pair is admissible.
fn admissible_pair(
    u: &Universe,
    reached: &Reached,
    pairs: &mut Vec<(&'static Relation, PersonId)>,
    rng: &mut impl Rng,
) -> Option<(&'static Relation, PersonId, Vec<PersonId>)> {
    while !pairs.is_empty() {
        let (r, y) = pairs[rng.random_range(0..pairs.len())];
        match reached.image(u, r) {
            Some(image) => return Some((r, y, image)),
            None => pairs.retain(|(other, _)| other.name != r.name),
        }
    }
    None
}

/// One random (relation, neighbour) step from `p`, forward (given the chain's slot sets so far)
/// or backward, never to a person in `visited`, drawn by `sampler` (see [`Sampler`]).
fn random_step(
    u: &Universe,
    mode: &[&'static Relation],
    p: PersonId,
    forward: Option<&Reached>,
    visited: &[PersonId],
    sampler: Sampler,
    rng: &mut impl Rng,
) -> Option<(&'static Relation, PersonId)> {
    // The unvisited people one step away by `r`.
    let reachable = |r: &Relation| {
        let mut c = if forward.is_some() {
            r.related(u, p)
        } else {
            r.inverse_related(u, p)
        };
        c.retain(|x| !visited.contains(x));
        c
    };
    // ... of a relation that keeps the chain's sets apart (see `Reached`), forward.
    let candidates = |r: &Relation| match forward {
        Some(reached) if reached.image(u, r).is_none() => Vec::new(),
        _ => reachable(r),
    };
    match sampler {
        Sampler::Uniform => {
            let mut pairs: Vec<(&'static Relation, PersonId)> = mode
                .iter()
                .flat_map(|&r| reachable(r).into_iter().map(move |x| (r, x)))
                .collect();
            match forward {
                Some(reached) => {
                    admissible_pair(u, reached, &mut pairs, rng).map(|(r, x, _)| (r, x))
                }
                None => pairs.choose(rng).copied(),
            }
        }
        Sampler::Unambiguous => {
            let forward = forward.is_some();
            // A relation type uniformly among those whose step is unambiguous (forward: `p`
            // has exactly one such relative; backward: the neighbour's only such relative is
            // `p`), among all types with any candidate otherwise.
            let mut unambiguous: Vec<(&'static Relation, Vec<PersonId>)> = Vec::new();
            let mut any: Vec<(&'static Relation, Vec<PersonId>)> = Vec::new();
            for &r in mode {
                let c = candidates(r);
                if c.is_empty() {
                    continue;
                }
                let single: Vec<PersonId> = if forward {
                    if r.related(u, p).len() == 1 {
                        c.clone()
                    } else {
                        Vec::new()
                    }
                } else {
                    c.iter()
                        .copied()
                        .filter(|&x| r.related(u, x) == [p])
                        .collect()
                };
                if !single.is_empty() {
                    unambiguous.push((r, single));
                }
                any.push((r, c));
            }
            let pool = if unambiguous.is_empty() {
                &any
            } else {
                &unambiguous
            };
            let (r, c) = pool.choose(rng)?;
            Some((*r, *c.choose(rng)?))
        }
    }
}

/// The shape of one bidirectional walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalkShape {
    /// Relation hops (0: the anchor alone).
    pub hops: usize,
    /// Attribute filters on distinct people after slot 0.
    pub filters: usize,
    /// The slot the walk starts from, 0..=hops.
    pub anchor_slot: usize,
    /// Anchor the chain on one of slot 0's attributes ("the person whose hobby is chess")
    /// instead of its name.
    pub by_attribute: bool,
}

/// Bidirectional anchor sampling of a chain of `shape`; on failure the caller counts a
/// rejection and retries.
pub fn bidirectional_walk(
    u: &Universe,
    easy_mode: bool,
    sampler: Sampler,
    shape: WalkShape,
    limits: &WalkLimits,
    rng: &mut impl Rng,
) -> Result<Walk, WalkEnd> {
    let WalkShape {
        hops,
        filters,
        anchor_slot,
        by_attribute,
    } = shape;
    let dead = WalkEnd::DeadEnd;
    let mode: Vec<&'static Relation> = relations(easy_mode).collect();
    // Filters shrink the sets the proof reads, so only filterless chains are counted.
    let max_searches = if filters == 0 {
        limits.max_searches
    } else {
        usize::MAX
    };
    let (anchor, people, rels) = if hops >= BEAM_FROM_HOPS {
        beam(u, &mode, hops, by_attribute, limits, rng)?
    } else {
        // A walk that starts at the anchor draws it like a backward walk.
        let (middle, start_anchor) = if anchor_slot == 0 {
            let (p, anchor) = limits.start(u, by_attribute, rng)?;
            (p, Some(anchor))
        } else {
            (rng.random_range(0..u.people.len()) as PersonId, None)
        };
        let mut visited = vec![middle];
        let mut backward = vec![];
        let mut p = middle;
        for _ in 0..anchor_slot {
            let (r, x) = random_step(u, &mode, p, None, &visited, sampler, rng).ok_or(dead)?;
            backward.push((r, x));
            visited.push(x);
            p = x;
        }
        let mut people: Vec<PersonId> = backward.iter().rev().map(|&(_, x)| x).collect();
        let mut rels: Vec<&'static Relation> = backward.iter().rev().map(|&(r, _)| r).collect();
        people.push(middle);
        // The anchor is known now: replay the backward part set-at-a-time from it (a dead end
        // if it already passes someone twice), then extend forward keeping the sets apart.
        let anchor = match start_anchor {
            Some(anchor) => anchor,
            None => anchor_for(u, people[0], by_attribute, rng),
        };
        let first = anchor_set(u, &anchor, people[0]);
        if first.len() > limits.max_anchor_set {
            return Err(WalkEnd::AnchorTooCommon);
        }
        let mut count = SearchCount::new(&anchor, max_searches);
        let mut reached = Reached::new(u, first);
        for r in &rels {
            count.hop(&reached.last)?;
            let image = reached.image(u, r).ok_or(dead)?;
            reached.push(image);
        }
        let mut p = middle;
        for _ in anchor_slot..hops {
            count.hop(&reached.last)?;
            let (r, y) =
                random_step(u, &mode, p, Some(&reached), &visited, sampler, rng).ok_or(dead)?;
            let image = reached.image(u, r).expect("random_step checked the image");
            reached.push(image);
            rels.push(r);
            people.push(y);
            visited.push(y);
            p = y;
        }
        (anchor, people, rels)
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
        return Err(dead);
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
    let chain = Chain { anchor, steps };
    Ok(Walk {
        chain,
        people,
        anchor_slot: if hops >= BEAM_FROM_HOPS {
            0
        } else {
            anchor_slot
        },
    })
}

/// Beam over chain prefixes from a random person (or a random retrievable anchor), ranked by the
/// size of the set the prefix reaches (smallest first, so long chains stay answerable by one
/// person); returns one path of a prefix that ends at a single person. Witness paths never
/// revisit a person.
fn beam(
    u: &Universe,
    mode: &[&'static Relation],
    hops: usize,
    by_attribute: bool,
    limits: &WalkLimits,
    rng: &mut impl Rng,
) -> Result<(Anchor, Vec<PersonId>, Vec<&'static Relation>), WalkEnd> {
    let (start, anchor) = limits.start(u, by_attribute, rng)?;
    let first = anchor_set(u, &anchor, start);
    if first.len() > limits.max_anchor_set {
        return Err(WalkEnd::AnchorTooCommon);
    }
    // (relations, last slot's set, everyone reached, one witness path)
    type Prefix = (
        Vec<&'static Relation>,
        Vec<PersonId>,
        Vec<PersonId>,
        Vec<PersonId>,
    );
    let mut beam: Vec<Prefix> = vec![(Vec::new(), first.clone(), first, vec![start])];
    for _ in 0..hops {
        let mut next = Vec::new();
        for (rels, set, seen, path) in &beam {
            for &r in mode {
                let mut reached: Vec<PersonId> =
                    set.iter().flat_map(|&p| r.related(u, p)).collect();
                reached.sort_unstable();
                reached.dedup();
                if reached.iter().any(|p| seen.contains(p)) {
                    continue;
                }
                let last = *path.last().expect("non-empty");
                let Some(&y) = r.related(u, last).choose(rng) else {
                    continue;
                };
                let mut rels = rels.clone();
                rels.push(r);
                let mut path = path.clone();
                path.push(y);
                let mut seen = seen.clone();
                seen.extend(&reached);
                next.push((rels, reached, seen, path));
            }
        }
        next.shuffle(rng);
        next.sort_by_key(|(_, set, _, _)| set.len()); // stable: ties stay in shuffled order
        next.truncate(BEAM_WIDTH);
        if next.is_empty() {
            return Err(WalkEnd::DeadEnd);
        }
        beam = next;
    }
    beam.into_iter()
        .find(|(_, set, _, _)| set.len() == 1)
        .map(|(rels, _, _, path)| (anchor, path, rels))
        .ok_or(WalkEnd::DeadEnd)
}
