//! The universe as Prolog facts: grouped by predicate, atoms quoted, loadable by scryer and by
//! SWI-Prolog. See `prolog/prelude.pl` for the predicates and why some are stored both ways.

use super::{Person, Universe};
use crate::engine::write_atom;

/// An attribute of a person as stored in facts (`dob`, `job`, `hobby`, `gender`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AttributeFact {
    /// Date of birth.
    Dob,
    /// Occupation.
    Job,
    /// Hobby.
    Hobby,
    /// Gender.
    Gender,
}

impl AttributeFact {
    /// All attributes, in article order.
    pub const ALL: [AttributeFact; 4] = [
        AttributeFact::Dob,
        AttributeFact::Job,
        AttributeFact::Hobby,
        AttributeFact::Gender,
    ];

    /// The predicate name (`job`).
    pub fn predicate(self) -> &'static str {
        match self {
            AttributeFact::Dob => "dob",
            AttributeFact::Job => "job",
            AttributeFact::Hobby => "hobby",
            AttributeFact::Gender => "gender",
        }
    }

    /// The stored predicate indexed by value (`with_job(Job, People)`; dates by year:
    /// `with_dob(Year, [Dob-Person...])`); gender has none (two values: a filter, never an
    /// anchor).
    pub fn inverse_predicate(self) -> Option<&'static str> {
        match self {
            AttributeFact::Dob => Some("with_dob"),
            AttributeFact::Job => Some("with_job"),
            AttributeFact::Hobby => Some("with_hobby"),
            AttributeFact::Gender => None,
        }
    }

    /// The English noun used in articles and questions ("occupation").
    pub fn noun(self) -> &'static str {
        match self {
            AttributeFact::Dob => "date of birth",
            AttributeFact::Job => "occupation",
            AttributeFact::Hobby => "hobby",
            AttributeFact::Gender => "gender",
        }
    }

    /// This attribute's value for `person`.
    pub fn value(self, person: &Person) -> &str {
        match self {
            AttributeFact::Dob => &person.dob,
            AttributeFact::Job => &person.occupation,
            AttributeFact::Hobby => &person.hobby,
            AttributeFact::Gender => person.gender.as_str(),
        }
    }
}

/// The year of a `YYYY-MM-DD` date: the key `with_dob` groups dates by (the text before the
/// first `-`; the whole text if there is none). Mirrors `dob_year/2` in `prolog/prelude.pl`.
pub fn dob_year(dob: &str) -> &str {
    dob.split_once('-').map_or(dob, |(year, _)| year)
}

/// A list argument of a fact: atoms, or `'A'-'B'` pairs.
enum List<'a> {
    Atoms(&'a [&'a str]),
    Pairs(&'a [(&'a str, &'a str)]),
}

/// Writes the universe's facts, one clause per line.
pub struct FactsWriter<'a> {
    universe: &'a Universe,
    out: String,
}

impl<'a> FactsWriter<'a> {
    /// A writer for `universe`.
    pub fn new(universe: &'a Universe) -> Self {
        FactsWriter {
            universe,
            out: String::with_capacity(universe.people.len() * 300),
        }
    }

    /// Appends one clause `predicate('A',...).` to `out` (names never contain NUL: they come
    /// from the embedded vocabularies, so quoting cannot fail).
    pub fn clause(out: &mut String, predicate: &str, args: &[&str]) {
        Self::clause_with_lists(out, predicate, args, &[]);
    }

    /// Appends `predicate('A',...,[...],...).`: the atoms, then the lists.
    fn clause_with_lists(out: &mut String, predicate: &str, args: &[&str], lists: &[List]) {
        let atom = |out: &mut String, text: &str| {
            write_atom(text, out).expect("universe text never contains NUL")
        };
        out.push_str(predicate);
        out.push('(');
        for (i, arg) in args.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            atom(out, arg);
        }
        for list in lists {
            out.push_str(",[");
            let len = match list {
                List::Atoms(items) => items.len(),
                List::Pairs(items) => items.len(),
            };
            for i in 0..len {
                if i > 0 {
                    out.push(',');
                }
                match list {
                    List::Atoms(items) => atom(out, items[i]),
                    List::Pairs(items) => {
                        atom(out, items[i].0);
                        out.push('-');
                        atom(out, items[i].1);
                    }
                }
            }
            out.push(']');
        }
        out.push_str(").\n");
    }

    /// All facts, people in id order: one
    /// `person(Name, Gender, Dob, Job, Hobby, Parents, Children, Friends)` clause per person
    /// (`Parents` is `[]` or `[Father, Mother]`; children in birth order), then the
    /// value-indexed `with_job/with_hobby(Value, [Person...])` and, since dates of birth are
    /// nearly unique, `with_dob(Year, [Dob-Person...])` grouped by year. Each predicate's first
    /// argument is the one a walk binds, so scryer's first-argument indexing serves every
    /// direction; few clauses keep the consult short (scryer's consult costs ~25 µs per clause,
    /// more than the clause's size).
    pub fn write(mut self) -> String {
        let people = &self.universe.people;
        let names = |ids: &[u32]| -> Vec<&str> {
            ids.iter()
                .map(|&id| people[id as usize].name.as_str())
                .collect()
        };
        self.out.push_str(
            "%% rulegym universe facts; predicates are documented in prolog/prelude.pl.\n",
        );
        for p in people {
            let values = AttributeFact::ALL.map(|a| a.value(p));
            let (parents, children, friends) =
                (names(&p.parents), names(&p.children), names(&p.friends));
            Self::clause_with_lists(
                &mut self.out,
                "person",
                &[&p.name, values[3], values[0], values[1], values[2]],
                &[
                    List::Atoms(&parents),
                    List::Atoms(&children),
                    List::Atoms(&friends),
                ],
            );
        }
        for attribute in [AttributeFact::Dob, AttributeFact::Job, AttributeFact::Hobby] {
            let predicate = attribute.inverse_predicate().expect("has an inverse");
            // (key, value, name) sorted by key then value; stable, so people stay in id order.
            let mut rows: Vec<(&str, &str, &str)> = people
                .iter()
                .map(|p| {
                    let value = attribute.value(p);
                    let key = match attribute {
                        AttributeFact::Dob => dob_year(value),
                        _ => value,
                    };
                    (key, value, p.name.as_str())
                })
                .collect();
            rows.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
            for group in rows.chunk_by(|a, b| a.0 == b.0) {
                let pairs: Vec<(&str, &str)> = group.iter().map(|&(_, v, n)| (v, n)).collect();
                let holders: Vec<&str> = group.iter().map(|&(_, _, n)| n).collect();
                let list = match attribute {
                    AttributeFact::Dob => List::Pairs(&pairs),
                    _ => List::Atoms(&holders),
                };
                Self::clause_with_lists(&mut self.out, predicate, &[group[0].0], &[list]);
            }
        }
        self.out
    }
}
