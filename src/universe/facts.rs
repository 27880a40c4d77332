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

/// A `YYYY-MM-DD` date of birth as the integer `YYYYMMDD`, how the engine holds it
/// ([`Universe::engine_facts`]): integers order as the dates do, and no date enters scryer's atom
/// table. `None` for any other text.
pub fn dob_code(dob: &str) -> Option<i64> {
    super::iso_parts(dob).map(|(y, m, d)| i64::from(y) * 10_000 + i64::from(m) * 100 + i64::from(d))
}

/// The date of birth [`dob_code`] made `code` from; `None` if no date makes it.
pub fn dob_text(code: i64) -> Option<String> {
    (0..100_000_000).contains(&code).then(|| {
        format!(
            "{:04}-{:02}-{:02}",
            code / 10_000,
            code / 100 % 100,
            code % 100
        )
    })
}

/// One argument of a fact: an atom, or an integer (a person's id, a date's code).
#[derive(Clone, Copy)]
enum Arg<'a> {
    Atom(&'a str),
    Int(i64),
}

impl Arg<'_> {
    fn write(self, out: &mut String) {
        match self {
            // Names never contain NUL: they come from the embedded vocabularies, so quoting
            // cannot fail.
            Arg::Atom(text) => write_atom(text, out).expect("universe text never contains NUL"),
            Arg::Int(n) => {
                use std::fmt::Write;
                let _ = write!(out, "{n}");
            }
        }
    }
}

/// A list argument of a fact: atoms or integers, or `Dob-Person` pairs.
enum List<'a> {
    Args(&'a [Arg<'a>]),
    Pairs(&'a [(Arg<'a>, Arg<'a>)]),
}

/// How a fact names a person: by name (`facts.pl`, for people and other Prologs) or by id
/// (what rulegym's engine holds: [`Universe::engine_facts`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keys {
    Names,
    Ids,
}

/// Writes the universe's facts, one clause per line.
pub struct FactsWriter<'a> {
    universe: &'a Universe,
    keys: Keys,
    out: String,
}

impl<'a> FactsWriter<'a> {
    /// A writer of `universe`'s facts with people named (`facts.pl`).
    pub fn new(universe: &'a Universe) -> Self {
        FactsWriter {
            universe,
            keys: Keys::Names,
            out: String::with_capacity(universe.people.len() * 300),
        }
    }

    /// A writer of the same facts with every person written as their id, an integer, and, when
    /// every date of birth is `YYYY-MM-DD`, every date as its [`dob_code`]: the form rulegym's
    /// engine holds ([`Universe::engine_facts`]).
    pub fn by_id(universe: &'a Universe) -> Self {
        FactsWriter {
            universe,
            keys: Keys::Ids,
            out: String::with_capacity(universe.people.len() * 140),
        }
    }

    /// Appends one clause `predicate('A',...).` to `out`.
    pub fn clause(out: &mut String, predicate: &str, args: &[&str]) {
        let args: Vec<Arg> = args.iter().map(|a| Arg::Atom(a)).collect();
        Self::clause_with_lists(out, predicate, &args, &[]);
    }

    /// Appends `predicate('A',...,[...],...).`: the arguments, then the lists.
    fn clause_with_lists(out: &mut String, predicate: &str, args: &[Arg], lists: &[List]) {
        out.push_str(predicate);
        out.push('(');
        for (i, arg) in args.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            arg.write(out);
        }
        for list in lists {
            out.push_str(",[");
            match list {
                List::Args(items) => {
                    for (i, item) in items.iter().enumerate() {
                        if i > 0 {
                            out.push(',');
                        }
                        item.write(out);
                    }
                }
                List::Pairs(items) => {
                    for (i, (value, item)) in items.iter().enumerate() {
                        if i > 0 {
                            out.push(',');
                        }
                        value.write(out);
                        out.push('-');
                        item.write(out);
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
    /// more than the clause's size). A person is their name, or with [`FactsWriter::by_id`]
    /// their id.
    pub fn write(mut self) -> String {
        let people = &self.universe.people;
        let keys = self.keys;
        let key = |id: u32| match keys {
            Keys::Names => Arg::Atom(people[id as usize].name.as_str()),
            Keys::Ids => Arg::Int(id.into()),
        };
        let coded = keys == Keys::Ids && self.universe.dobs_coded();
        // A date of birth, and the year `with_dob` groups it under.
        let date = |dob: &'a str| match dob_code(dob) {
            Some(code) if coded => (Arg::Int(code), Arg::Int(code / 10_000)),
            _ => (Arg::Atom(dob), Arg::Atom(dob_year(dob))),
        };
        let keyed = |ids: &[u32]| -> Vec<Arg> { ids.iter().map(|&id| key(id)).collect() };
        self.out.push_str(match keys {
            Keys::Names => {
                "%% rulegym universe facts; predicates are documented in prolog/prelude.pl.\n"
            }
            Keys::Ids => {
                "%% rulegym universe facts, people by id; predicates are documented in prolog/prelude.pl.\n"
            }
        });
        for (id, p) in people.iter().enumerate() {
            let mut values = AttributeFact::ALL.map(|a| Arg::Atom(a.value(p)));
            values[0] = date(&p.dob).0;
            let (parents, children, friends) =
                (keyed(&p.parents), keyed(&p.children), keyed(&p.friends));
            Self::clause_with_lists(
                &mut self.out,
                "person",
                &[key(id as u32), values[3], values[0], values[1], values[2]],
                &[
                    List::Args(&parents),
                    List::Args(&children),
                    List::Args(&friends),
                ],
            );
        }
        for attribute in [AttributeFact::Dob, AttributeFact::Job, AttributeFact::Hobby] {
            let predicate = attribute.inverse_predicate().expect("has an inverse");
            // (key, value, id) sorted by key then value; stable, so people stay in id order.
            let mut rows: Vec<(&str, &str, u32)> = people
                .iter()
                .enumerate()
                .map(|(id, p)| {
                    let value = attribute.value(p);
                    let key = match attribute {
                        AttributeFact::Dob => dob_year(value),
                        _ => value,
                    };
                    (key, value, id as u32)
                })
                .collect();
            rows.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
            for group in rows.chunk_by(|a, b| a.0 == b.0) {
                let pairs: Vec<(Arg, Arg)> =
                    group.iter().map(|&(_, v, p)| (date(v).0, key(p))).collect();
                let holders: Vec<Arg> = group.iter().map(|&(_, _, p)| key(p)).collect();
                let (list, group_key) = match attribute {
                    AttributeFact::Dob => (List::Pairs(&pairs), date(group[0].1).1),
                    _ => (List::Args(&holders), Arg::Atom(group[0].0)),
                };
                Self::clause_with_lists(&mut self.out, predicate, &[group_key], &[list]);
            }
        }
        self.out
    }
}
