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

    /// The inverse predicate indexed by value (`has_job`); gender has none (two values).
    pub fn inverse_predicate(self) -> Option<&'static str> {
        match self {
            AttributeFact::Dob => Some("has_dob"),
            AttributeFact::Job => Some("has_job"),
            AttributeFact::Hobby => Some("has_hobby"),
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

/// Writes clauses `pred('A','B').`, one per line.
pub struct FactsWriter<'a> {
    universe: &'a Universe,
    out: String,
}

impl<'a> FactsWriter<'a> {
    /// A writer for `universe`.
    pub fn new(universe: &'a Universe) -> Self {
        FactsWriter {
            universe,
            out: String::with_capacity(universe.people.len() * 600),
        }
    }

    /// Appends one clause `predicate(args...).` to `out` (names never contain NUL: they come from
    /// the embedded vocabularies, so quoting cannot fail).
    pub fn clause(out: &mut String, predicate: &str, args: &[&str]) {
        out.push_str(predicate);
        out.push('(');
        for (i, arg) in args.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            write_atom(arg, out).expect("universe text never contains NUL");
        }
        out.push_str(").\n");
    }

    /// All facts, grouped by predicate, people in id order.
    pub fn write(mut self) -> String {
        let people = &self.universe.people;
        let name = |id: u32| people[id as usize].name.as_str();
        self.out.push_str("%% rulegym universe facts; see prolog/prelude.pl.\n");
        for p in people {
            for &parent in &p.parents {
                Self::clause(&mut self.out, "parent", &[&p.name, name(parent)]);
            }
        }
        for p in people {
            for &child in &p.children {
                Self::clause(&mut self.out, "child", &[&p.name, name(child)]);
            }
        }
        for p in people {
            for &friend in &p.friends {
                Self::clause(&mut self.out, "friend", &[&p.name, name(friend)]);
            }
        }
        for attribute in AttributeFact::ALL {
            for p in people {
                Self::clause(
                    &mut self.out,
                    attribute.predicate(),
                    &[&p.name, attribute.value(p)],
                );
            }
            if let Some(inverse) = attribute.inverse_predicate() {
                // Grouped by value so the inverse index is contiguous; ties in person order.
                let mut by_value: Vec<&Person> = people.iter().collect();
                by_value.sort_by(|a, b| attribute.value(a).cmp(attribute.value(b)));
                for p in by_value {
                    Self::clause(&mut self.out, inverse, &[attribute.value(p), &p.name]);
                }
            }
        }
        self.out
    }
}
