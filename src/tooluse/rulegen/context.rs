//! What the generator reads from a universe once: the uniquely named people, the value pools and
//! the path relations.

use super::{PATH_RELATIONS, RuleGenError};
use crate::relations::{RELATIONS, Relation};
use crate::universe::{PersonId, Universe};
use std::collections::{BTreeMap, BTreeSet};

/// The universe as the generator sees it.
pub(super) struct Context<'a> {
    /// The universe.
    pub(super) universe: &'a Universe,
    /// People whose name is unique (the world keys records by name).
    pub(super) usable: Vec<PersonId>,
    /// Whether each person's name is unique, by id.
    pub(super) unique: Vec<bool>,
    /// Every hobby in the universe, sorted.
    pub(super) hobbies: Vec<String>,
    /// Every occupation in the universe, sorted.
    pub(super) occupations: Vec<String>,
    /// The relations of [`PATH_RELATIONS`], in that order.
    pub(super) relations: Vec<&'static Relation>,
}

impl<'a> Context<'a> {
    /// The generator's view of `universe`; errors when no one has a unique name.
    pub(super) fn new(universe: &'a Universe) -> Result<Self, RuleGenError> {
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for p in &universe.people {
            *counts.entry(p.name.as_str()).or_default() += 1;
        }
        let unique: Vec<bool> = universe
            .people
            .iter()
            .map(|p| counts[p.name.as_str()] == 1)
            .collect();
        let usable = (0..universe.people.len() as PersonId)
            .filter(|&i| unique[i as usize])
            .collect::<Vec<_>>();
        let set = |f: &dyn Fn(&crate::universe::Person) -> &str| {
            universe
                .people
                .iter()
                .map(|p| f(p).to_owned())
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect::<Vec<_>>()
        };
        let relations = PATH_RELATIONS
            .iter()
            .map(|n| RELATIONS.iter().find(|r| r.name == *n).expect("known"))
            .collect();
        if usable.is_empty() {
            return Err(RuleGenError::Config(
                "the universe has no uniquely named people".into(),
            ));
        }
        Ok(Context {
            universe,
            usable,
            unique,
            hobbies: set(&|p| &p.hobby),
            occupations: set(&|p| &p.occupation),
            relations,
        })
    }

    /// The name of person `id`.
    pub(super) fn name(&self, id: PersonId) -> String {
        self.universe.person(id).name.clone()
    }
}
