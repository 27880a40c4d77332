//! One proposal for one slot: the walks over the universe and the typed query built from them.

use super::cells::Slots;
use super::{
    AnchorKind, Ask, Attr, ChainStep, Comparison, Family, Query, QuestionConfig, Template, sample,
};
use crate::universe::Universe;
use rand::Rng;

/// A proposal before verification: the query, its template and sampling facts.
pub(super) struct Proposal {
    /// The typed query.
    pub(super) query: Query,
    /// The `base` template it fills, if any.
    pub(super) template: Option<&'static Template>,
    /// Slot the walk started from (bidirectional sampling), if any.
    pub(super) anchor_position: Option<usize>,
    /// The cell label (`t03`, `h2c1`, `h1comparison`).
    pub(super) cell: String,
}

/// One proposal for a slot, its walks within `limits`.
pub(super) fn propose<R: Rng>(
    u: &Universe,
    config: &QuestionConfig,
    family: Family,
    slots: &Slots,
    index: u64,
    limits: &sample::WalkLimits,
    rng: &mut R,
) -> Result<Proposal, sample::WalkEnd> {
    let dead = sample::WalkEnd::DeadEnd;
    match *slots {
        Slots::Template(t) => {
            let by_attribute = t.anchor == AnchorKind::Attribute;
            let (chain, _) =
                sample::backward_walk(u, config.easy_mode, t.hops, by_attribute, limits, 1, rng)?;
            let query = match t.ask {
                Ask::Who => Query::Who(chain),
                Ask::What => {
                    let attribute = Attr::ALL[rng.random_range(0..Attr::ALL.len())];
                    Query::What(chain, attribute)
                }
                Ask::HowMany => {
                    let mode: Vec<_> = crate::relations::relations(config.easy_mode).collect();
                    let r = mode[rng.random_range(0..mode.len())];
                    Query::HowMany(chain, r.name.to_owned())
                }
            };
            Ok(Proposal {
                query,
                template: Some(t),
                anchor_position: None,
                cell: format!("t{:02}", t.index),
            })
        }
        Slots::Chain {
            hops,
            filters,
            comparison,
        } => {
            // Like the grammar's tails, a chain is anchored on a name or on "the person whose
            // <attribute> is <value>" with equal odds.
            let walk = |rng: &mut R, hops: usize, filters: usize| {
                let shape = sample::WalkShape {
                    hops,
                    filters,
                    anchor_slot: config.anchor.slot(hops, index, rng),
                    by_attribute: rng.random_bool(0.5),
                };
                sample::bidirectional_walk(u, config.easy_mode, config.sampler, shape, limits, rng)
            };
            let (query, anchor_position) = if comparison {
                // Round-robin by slot, so rejections do not tilt the mix towards easy shapes.
                let shape = config.comparisons[index as usize % config.comparisons.len()];
                // At most one filter overall.
                let filter_first = hops > 0 && rng.random_bool(0.25);
                let a = walk(rng, hops, usize::from(filter_first))?;
                let anchor_slot = a.anchor_slot;
                let query = match shape {
                    // Two chains; the second is at most as long.
                    Comparison::Older | Comparison::Younger | Comparison::BornFirst => {
                        let other_hops = rng.random_range(hops.min(1)..=hops);
                        let b = walk(rng, other_hops, 0)?;
                        // A zero-hop side may name its person by two or three attributes.
                        let side = |w: sample::Walk, rng: &mut R| {
                            if config.multi_attribute_sides && w.chain.steps.is_empty() {
                                sample::multi_attribute_chain(u, w.people[0], rng)
                            } else {
                                w.chain
                            }
                        };
                        let (a, b) = (side(a, rng), side(b, rng));
                        match shape {
                            Comparison::Older => Query::Older(a, b),
                            Comparison::Younger => Query::Younger(a, b),
                            _ => Query::BornFirst(a, b),
                        }
                    }
                    // A relation of the chain's end with at least two members to compare.
                    Comparison::Oldest | Comparison::Youngest => {
                        let end = *a.people.last().expect("a walk has people");
                        let mode: Vec<_> = crate::relations::relations(config.easy_mode).collect();
                        let rich: Vec<_> = mode
                            .iter()
                            .filter(|r| r.related(u, end).len() >= 2)
                            .collect();
                        let r = rich
                            .get(rng.random_range(0..rich.len().max(1)))
                            .ok_or(dead)?;
                        if shape == Comparison::Oldest {
                            Query::Oldest(a.chain, r.name.to_owned())
                        } else {
                            Query::Youngest(a.chain, r.name.to_owned())
                        }
                    }
                    // Who among the chain's end has the most relatives of a kind.
                    Comparison::Most => {
                        if a.chain.evaluate_native(u).map_or(0, |s| s.len()) < 2 {
                            return Err(dead); // nobody to compare
                        }
                        let mode: Vec<_> = crate::relations::relations(config.easy_mode).collect();
                        let r = mode[rng.random_range(0..mode.len())];
                        Query::MostRelatives(a.chain, r.name.to_owned())
                    }
                };
                (query, Some(anchor_slot))
            } else {
                let filters = if family == Family::HopsComparisons {
                    usize::from(rng.random_bool(0.25))
                } else {
                    filters
                };
                let a = walk(rng, hops, filters.min(hops))?;
                // The grammar's two question types (aggregation excluded): "Who is ...?" and
                // "What is the <attribute> of ...?", with equal odds.
                // An attribute question never asks what a filter on the last person states
                // ("What is the hobby of the friend, whose hobby is chess, of Ann?").
                let query = if rng.random_bool(0.5) {
                    Query::Who(a.chain)
                } else {
                    let stated: Vec<Attr> = a
                        .chain
                        .steps
                        .iter()
                        .rev()
                        .map_while(|s| match s {
                            ChainStep::Filter { attribute, .. } => Some(*attribute),
                            ChainStep::Hop(_) => None,
                        })
                        .collect();
                    let open: Vec<Attr> = Attr::ALL
                        .into_iter()
                        .filter(|x| !stated.contains(x))
                        .collect();
                    let asked = *open
                        .get(rng.random_range(0..open.len().max(1)))
                        .ok_or(dead)?;
                    Query::What(a.chain, asked)
                };
                (query, Some(a.anchor_slot))
            };
            let kind = if comparison { "comparison" } else { "base" };
            Ok(Proposal {
                query,
                template: None,
                anchor_position,
                cell: match family {
                    Family::HopsConstraints => format!("h{hops}c{filters}"),
                    Family::HopsComparisons => format!("h{hops}{kind}"),
                    _ => format!("h{hops}"),
                },
            })
        }
    }
}
