//! The generation cells of each family: the templates of `base`, the (hops, filters,
//! comparison) shapes of the `hops*` families.

use super::{Ask, Family, QuestionConfig, Template, templates};

/// The generation cells of a family: (label, shape) where shape is the template for `base`
/// and (hops, filters or comparison flag) otherwise.
pub(super) enum Slots {
    /// A `base` template.
    Template(&'static Template),
    /// A chain shape of the `hops*` families.
    Chain {
        /// Relation hops.
        hops: usize,
        /// Attribute filters along the chain.
        filters: usize,
        /// Whether the cell holds comparisons.
        comparison: bool,
    },
}

/// The cells of `family` under `config`, in generation order.
pub(super) fn cells(family: Family, config: &QuestionConfig) -> Vec<(String, Slots)> {
    let hop_range = 1..=config.max_hops;
    match family {
        Family::Base => cached_templates(config.depth)
            .iter()
            .filter(|t| !(config.exclude_aggregation && t.ask == Ask::HowMany))
            .map(|t| (format!("t{:02}", t.index), Slots::Template(t)))
            .collect(),
        Family::Hops => hop_range
            .map(|h| {
                (
                    format!("h{h}"),
                    Slots::Chain {
                        hops: h,
                        filters: 0,
                        comparison: false,
                    },
                )
            })
            .collect(),
        Family::HopsConstraints => hop_range
            .flat_map(|h| {
                (0..=3usize.min(h)).map(move |c| {
                    (
                        format!("h{h}c{c}"),
                        Slots::Chain {
                            hops: h,
                            filters: c,
                            comparison: false,
                        },
                    )
                })
            })
            .collect(),
        // The zero-hop cell holds comparisons only ("Who is older, Ann or Bob?").
        Family::HopsComparisons => std::iter::once((
            "h0comparison".to_owned(),
            Slots::Chain {
                hops: 0,
                filters: 0,
                comparison: true,
            },
        ))
        .chain(hop_range.flat_map(|h| {
            [false, true].map(|comparison| {
                let kind = if comparison { "comparison" } else { "base" };
                (
                    format!("h{h}{kind}"),
                    Slots::Chain {
                        hops: h,
                        filters: 0,
                        comparison,
                    },
                )
            })
        }))
        .collect(),
    }
}

/// Templates by depth, computed once per depth.
fn cached_templates(depth: usize) -> &'static [Template] {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static CACHE: OnceLock<Mutex<HashMap<usize, &'static [Template]>>> = OnceLock::new();
    let mut cache = CACHE
        .get_or_init(Default::default)
        .lock()
        .expect("not poisoned");
    cache
        .entry(depth)
        .or_insert_with(|| Box::leak(templates(depth).into_boxed_slice()))
}
