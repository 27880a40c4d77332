//! The relations of the rule base (`prolog/family.pl`, `prolog/prelude.pl`): names, PhantomWiki's
//! difficulty weights, the easy and hard sets, English surface forms, and a native evaluator over
//! the universe graph.
//!
//! The native evaluator composes five primitive steps (parent, child, sibling, spouse, friend)
//! and is written independently of the Prolog rules: samplers use it to walk the graph quickly,
//! and tests use it as an oracle against the engine. Gold answers always come from the engine.

use crate::universe::{Gender, PersonId, Universe};

/// A primitive step through the universe graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GraphStep {
    /// To the person's parents.
    Parent,
    /// To the person's children.
    Child,
    /// To the person's siblings (same parents, not the person).
    Sibling,
    /// To the person's spouse.
    Spouse,
    /// To the person's friends.
    Friend,
}

/// One relation: `name(X, Y)` reads "Y is the name of X".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Relation {
    /// The Prolog predicate.
    pub name: &'static str,
    /// PhantomWiki's difficulty weight (1 to 5).
    pub weight: u8,
    /// Part of the easy set (the 11 immediate-family relations and friend).
    pub easy: bool,
    /// The path of primitive steps from X to Y.
    pub steps: &'static [GraphStep],
    /// Gender of Y, if the relation fixes it.
    pub gender: Option<Gender>,
    /// Singular surface form ("mother-in-law").
    pub singular: &'static str,
    /// Plural surface form ("mothers-in-law").
    pub plural: &'static str,
}

macro_rules! relations {
    ($( $name:ident : $weight:literal, $easy:literal, [$($step:ident),*], $gender:ident, $singular:literal, $plural:literal; )*) => {
        /// Every relation of the rule base, easy ones first, in a fixed order.
        pub const RELATIONS: &[Relation] = &[
            $( Relation {
                name: stringify!($name),
                weight: $weight,
                easy: $easy,
                steps: &[$(GraphStep::$step),*],
                gender: relations!(@gender $gender),
                singular: $singular,
                plural: $plural,
            }, )*
        ];
    };
    (@gender Any) => { None };
    (@gender Female) => { Some(Gender::Female) };
    (@gender Male) => { Some(Gender::Male) };
}

relations! {
    child: 1, true, [Child], Any, "child", "children";
    father: 1, true, [Parent], Male, "father", "fathers";
    mother: 1, true, [Parent], Female, "mother", "mothers";
    son: 1, true, [Child], Male, "son", "sons";
    daughter: 1, true, [Child], Female, "daughter", "daughters";
    parent: 1, true, [Parent], Any, "parent", "parents";
    sibling: 1, true, [Sibling], Any, "sibling", "siblings";
    sister: 1, true, [Sibling], Female, "sister", "sisters";
    brother: 1, true, [Sibling], Male, "brother", "brothers";
    husband: 1, true, [Spouse], Male, "husband", "husbands";
    wife: 1, true, [Spouse], Female, "wife", "wives";
    friend: 1, true, [Friend], Any, "friend", "friends";
    niece: 2, false, [Sibling, Child], Female, "niece", "nieces";
    nephew: 2, false, [Sibling, Child], Male, "nephew", "nephews";
    aunt: 2, false, [Parent, Sibling], Female, "aunt", "aunts";
    uncle: 2, false, [Parent, Sibling], Male, "uncle", "uncles";
    grandparent: 2, false, [Parent, Parent], Any, "grandparent", "grandparents";
    grandmother: 2, false, [Parent, Parent], Female, "grandmother", "grandmothers";
    grandfather: 2, false, [Parent, Parent], Male, "grandfather", "grandfathers";
    grandchild: 2, false, [Child, Child], Any, "grandchild", "grandchildren";
    grandson: 2, false, [Child, Child], Male, "grandson", "grandsons";
    granddaughter: 2, false, [Child, Child], Female, "granddaughter", "granddaughters";
    mother_in_law: 2, false, [Spouse, Parent], Female, "mother-in-law", "mothers-in-law";
    father_in_law: 2, false, [Spouse, Parent], Male, "father-in-law", "fathers-in-law";
    son_in_law: 2, false, [Child, Spouse], Male, "son-in-law", "sons-in-law";
    daughter_in_law: 2, false, [Child, Spouse], Female, "daughter-in-law", "daughters-in-law";
    sister_in_law: 2, false, [Spouse, Sibling], Female, "sister-in-law", "sisters-in-law";
    brother_in_law: 2, false, [Spouse, Sibling], Male, "brother-in-law", "brothers-in-law";
    great_aunt: 3, false, [Parent, Parent, Sibling], Female, "great-aunt", "great-aunts";
    great_uncle: 3, false, [Parent, Parent, Sibling], Male, "great-uncle", "great-uncles";
    great_grandparent: 3, false, [Parent, Parent, Parent], Any, "great-grandparent", "great-grandparents";
    great_grandmother: 3, false, [Parent, Parent, Parent], Female, "great-grandmother", "great-grandmothers";
    great_grandfather: 3, false, [Parent, Parent, Parent], Male, "great-grandfather", "great-grandfathers";
    great_grandchild: 3, false, [Child, Child, Child], Any, "great-grandchild", "great-grandchildren";
    great_grandson: 3, false, [Child, Child, Child], Male, "great-grandson", "great-grandsons";
    great_granddaughter: 3, false, [Child, Child, Child], Female, "great-granddaughter", "great-granddaughters";
    cousin: 3, false, [Parent, Sibling, Child], Any, "cousin", "cousins";
    female_cousin: 3, false, [Parent, Sibling, Child], Female, "female cousin", "female cousins";
    male_cousin: 3, false, [Parent, Sibling, Child], Male, "male cousin", "male cousins";
    female_first_cousin_once_removed: 4, false, [Parent, Sibling, Child, Child], Female, "female first cousin once removed", "female first cousins once removed";
    male_first_cousin_once_removed: 4, false, [Parent, Sibling, Child, Child], Male, "male first cousin once removed", "male first cousins once removed";
    second_aunt: 4, false, [Parent, Parent, Parent, Sibling], Female, "second aunt", "second aunts";
    second_uncle: 4, false, [Parent, Parent, Parent, Sibling], Male, "second uncle", "second uncles";
    female_second_cousin: 5, false, [Parent, Parent, Sibling, Child, Child], Female, "female second cousin", "female second cousins";
    male_second_cousin: 5, false, [Parent, Parent, Sibling, Child, Child], Male, "male second cousin", "male second cousins";
}

/// The relation called `name`.
pub fn relation(name: &str) -> Option<&'static Relation> {
    RELATIONS.iter().find(|r| r.name == name)
}

/// The relations of a mode: easy (12) or hard (all 45).
pub fn relations(easy_mode: bool) -> impl Iterator<Item = &'static Relation> {
    RELATIONS.iter().filter(move |r| r.easy || !easy_mode)
}

impl GraphStep {
    /// Appends everyone one step from `from` to `out` (unsorted; may repeat across calls).
    pub fn extend(self, universe: &Universe, from: PersonId, out: &mut Vec<PersonId>) {
        let person = universe.person(from);
        match self {
            GraphStep::Parent => out.extend(&person.parents),
            GraphStep::Child => out.extend(&person.children),
            GraphStep::Sibling => out.extend(universe.siblings(from)),
            GraphStep::Spouse => out.extend(person.spouse),
            GraphStep::Friend => out.extend(&person.friends),
        }
    }
}

impl Relation {
    /// Everyone `y` with `self(x, y)`: sorted by id, distinct, never `x` itself.
    pub fn related(&self, universe: &Universe, x: PersonId) -> Vec<PersonId> {
        let mut frontier = vec![x];
        for &s in self.steps {
            let mut next = Vec::new();
            for &p in &frontier {
                s.extend(universe, p, &mut next);
            }
            next.sort_unstable();
            next.dedup();
            frontier = next;
        }
        frontier.retain(|&y| y != x && self.gender.is_none_or(|g| universe.person(y).gender == g));
        frontier
    }
}

impl GraphStep {
    /// The step walked backwards.
    pub fn inverse(self) -> GraphStep {
        match self {
            GraphStep::Parent => GraphStep::Child,
            GraphStep::Child => GraphStep::Parent,
            other => other,
        }
    }
}

impl Relation {
    /// Everyone `x` with `self(x, y)` (the relation walked backwards): sorted, distinct, not `y`.
    pub fn inverse_related(&self, universe: &Universe, y: PersonId) -> Vec<PersonId> {
        if self.gender.is_some_and(|g| universe.person(y).gender != g) {
            return Vec::new();
        }
        let mut frontier = vec![y];
        for &s in self.steps.iter().rev() {
            let mut next = Vec::new();
            for &p in &frontier {
                s.inverse().extend(universe, p, &mut next);
            }
            next.sort_unstable();
            next.dedup();
            frontier = next;
        }
        frontier.retain(|&x| x != y && self.related(universe, x).contains(&y));
        frontier
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_relation_has_a_specialised_hop_clause() {
        let hops = include_str!("../prolog/hops.pl");
        for r in RELATIONS {
            let head = format!(
                "hop_set({}, Xs, Ys) :- !, findall(Y, (member(X, Xs), {}(X, Y))",
                r.name, r.name
            );
            assert!(
                hops.contains(&head),
                "prolog/hops.pl lacks a clause for {}",
                r.name
            );
        }
    }

    #[test]
    fn sets_and_weights_match_phantomwiki() {
        assert_eq!(RELATIONS.len(), 45);
        assert_eq!(relations(true).count(), 12);
        let weight_count = |w| RELATIONS.iter().filter(|r| r.weight == w).count();
        assert_eq!(
            [1, 2, 3, 4, 5].map(weight_count),
            [12, 16, 11, 4, 2],
            "weights: 1 immediate + friend; 2 aunt..in-laws, grand*; 3 great*, cousins; 4; 5"
        );
    }
}
