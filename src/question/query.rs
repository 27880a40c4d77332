//! Typed question queries: a chain of hops and attribute filters from an anchor, and what is
//! asked about its end. Compiled to one set-at-a-time Prolog goal (gold answers), to
//! PhantomWiki-style atoms (for the record), and evaluated natively (the test oracle).

use crate::engine::{Engine, Term, Value, Var, write_atom};
use crate::relations::{Relation, relation};
use crate::universe::{AttributeFact, PersonId, Universe, dob_code, dob_text};
use serde::{Deserialize, Serialize};

/// Where a chain starts.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Anchor {
    /// A named person.
    Name(String),
    /// Everyone whose attribute has this value ("the person whose occupation is doctor").
    Attribute {
        /// The attribute.
        attribute: Attr,
        /// Its value.
        value: String,
    },
}

/// The attributes questions ask about or filter on (gender is never asked).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Attr {
    /// Date of birth.
    Dob,
    /// Occupation.
    Job,
    /// Hobby.
    Hobby,
}

impl Attr {
    /// All askable attributes.
    pub const ALL: [Attr; 3] = [Attr::Dob, Attr::Job, Attr::Hobby];

    /// The stored attribute.
    pub fn fact(self) -> AttributeFact {
        match self {
            Attr::Dob => AttributeFact::Dob,
            Attr::Job => AttributeFact::Job,
            Attr::Hobby => AttributeFact::Hobby,
        }
    }

    /// The person-to-value predicate (`job`).
    pub fn predicate(self) -> &'static str {
        self.fact().predicate()
    }

    /// The value-to-person predicate (`has_job`).
    pub fn inverse(self) -> &'static str {
        match self {
            Attr::Dob => "has_dob",
            Attr::Job => "has_job",
            Attr::Hobby => "has_hobby",
        }
    }

    /// The English noun ("occupation").
    pub fn noun(self) -> &'static str {
        self.fact().noun()
    }

    /// A value of this attribute as the engine holding `u` has it: a date of birth as its
    /// [`dob_code`] when `u`'s dates are coded, any other value as an atom. (A date that is not
    /// `YYYY-MM-DD` stays an atom, which no coded date equals: no one holds it.)
    fn engine_value(self, value: &str, u: &Universe) -> Term {
        match (self, dob_code(value)) {
            (Attr::Dob, Some(code)) if u.dobs_coded() => Term::Int(code),
            _ => Term::atom(value),
        }
    }
}

/// One step of a chain, applied to the set reached so far.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChainStep {
    /// Follow a relation: everyone Y with rel(X, Y) for some X in the set.
    Hop(String),
    /// Keep only the people whose attribute has this value.
    Filter {
        /// The attribute.
        attribute: Attr,
        /// Its value.
        value: String,
    },
}

/// A chain: an anchor, then steps in walk order (innermost relation of the sentence first).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Chain {
    /// The start.
    pub anchor: Anchor,
    /// The steps, applied in order.
    pub steps: Vec<ChainStep>,
}

/// What is asked about the end of a chain.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Query {
    /// The people at the end.
    Who(Chain),
    /// Their values of an attribute.
    What(Chain, Attr),
    /// For each person at the end, how many distinct relatives by the relation (the set of
    /// counts, as PhantomWiki's per-binding `aggregate_all(count, distinct(...))`).
    HowMany(Chain, String),
    /// Which of the two was born first; no answer on a tie. A side that denotes several people
    /// (an imported question; rulegym's generator keeps one person a side) has the answer every
    /// pairing gives, and none when pairings differ ([`pairing_winners`]).
    Older(Chain, Chain),
    /// Which of the two was born last, as [`Query::Older`] ("Who is younger, A, or B?").
    Younger(Chain, Chain),
    /// The same answer as [`Query::Older`], asked as "Who was born first, A, or B?".
    BornFirst(Chain, Chain),
    /// "Who is the oldest R of <chain>?": for each person at the end of the chain, their
    /// R-relatives born first (all of them on a tie); the union over the chain's end (the
    /// per-binding reading of the `\+ (R(Y, Z), dob(Z, D2), Z \= A, D2 @< D)` query).
    Oldest(Chain, String),
    /// "Who is the youngest R of <chain>?": as [`Query::Oldest`], born last.
    Youngest(Chain, String),
    /// "Who has the most Rs among <chain>?": the people at the end of the chain with the largest
    /// number of distinct R-relatives (all of them on a tie; none when the end is empty).
    MostRelatives(Chain, String),
}

/// The two ends of a date-of-birth comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Born {
    First,
    Last,
}

impl Born {
    /// Whether date `a` wins over date `b`.
    fn wins(self, a: &str, b: &str) -> bool {
        match self {
            Born::First => a < b,
            Born::Last => a > b,
        }
    }
}

/// The people who win at least one pairing of a member of `xs` with a member of `ys` (born
/// strictly first, or last), sorted: PhantomWiki's answer to a date comparison (the union over
/// the pairings; a tie names nobody). A comparison has an answer when this is one person. A
/// member of one side wins a pairing exactly when it beats the other side's weakest date, so
/// this is linear in the sides (the twin of the prelude's `pairing_winners/4`).
pub fn pairing_winners(
    u: &Universe,
    xs: &[PersonId],
    ys: &[PersonId],
    oldest: bool,
) -> Vec<PersonId> {
    let born = if oldest { Born::First } else { Born::Last };
    let weakest = |set: &[PersonId]| {
        set.iter()
            .map(|&p| u.person(p).dob.as_str())
            .reduce(|w, d| if born.wins(w, d) { d } else { w })
    };
    let (Some(wx), Some(wy)) = (weakest(xs), weakest(ys)) else {
        return Vec::new();
    };
    let mut out: Vec<PersonId> = xs
        .iter()
        .filter(|&&p| born.wins(&u.person(p).dob, wy))
        .chain(ys.iter().filter(|&&p| born.wins(&u.person(p).dob, wx)))
        .copied()
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// The people of `set` born first (or last), all of them on a tie; sorted.
pub(crate) fn extreme_born(u: &Universe, set: &[PersonId], oldest: bool) -> Vec<PersonId> {
    let born = if oldest { Born::First } else { Born::Last };
    let Some(best) = set
        .iter()
        .map(|&p| u.person(p).dob.as_str())
        .reduce(|best, d| if born.wins(d, best) { d } else { best })
    else {
        return Vec::new();
    };
    let mut out: Vec<PersonId> = set
        .iter()
        .copied()
        .filter(|&p| u.person(p).dob == best)
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// The people of `set` with the most distinct `r`-relatives, all of them on a tie; sorted.
pub(crate) fn most_related(u: &Universe, set: &[PersonId], r: &Relation) -> Vec<PersonId> {
    let counts: Vec<(PersonId, usize)> = set.iter().map(|&p| (p, r.related(u, p).len())).collect();
    let Some(max) = counts.iter().map(|&(_, n)| n).max() else {
        return Vec::new();
    };
    let mut out: Vec<PersonId> = counts
        .into_iter()
        .filter(|&(_, n)| n == max)
        .map(|(p, _)| p)
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// A query's answers: sorted, distinct strings.
pub type Answers = Vec<String>;

/// Errors while compiling or evaluating a query.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum QueryError {
    /// The relation is not in the rule base.
    #[error("unknown relation {0:?}")]
    UnknownRelation(String),
    /// The anchor names nobody.
    #[error("unknown person {0:?}")]
    UnknownPerson(String),
    /// The engine and the native evaluator disagree (a bug: generation stops).
    #[error(
        "engine and native evaluator disagree on {question:?}: engine {engine:?}, native {native:?}"
    )]
    OracleMismatch {
        /// The question text.
        question: String,
        /// The engine's answers.
        engine: Vec<String>,
        /// The native evaluator's answers.
        native: Vec<String>,
    },
    /// The engine returned something other than the expected list.
    #[error("unexpected engine answer: {0}")]
    Decode(String),
}

fn rel(name: &str) -> Result<&'static Relation, QueryError> {
    relation(name).ok_or_else(|| QueryError::UnknownRelation(name.to_owned()))
}

impl Chain {
    /// The relations it follows.
    pub fn hops(&self) -> impl Iterator<Item = &str> {
        self.steps.iter().filter_map(|s| match s {
            ChainStep::Hop(r) => Some(r.as_str()),
            ChainStep::Filter { .. } => None,
        })
    }

    /// Number of attribute filters (the anchor's attribute not included).
    pub fn filters(&self) -> usize {
        self.steps.len() - self.hops().count()
    }

    /// The chain as data: `chain(Anchor, Steps)` (see `prolog/queries.pl`), a named anchor
    /// written as its id in `u` (the engine holds [`Universe::engine_facts`]).
    fn data(&self, u: &Universe) -> Result<Term, QueryError> {
        let anchor = match &self.anchor {
            Anchor::Name(name) => {
                let id = u
                    .person_named(name)
                    .ok_or_else(|| QueryError::UnknownPerson(name.clone()))?;
                Term::compound("name", [Term::Int(id.into())])
            }
            Anchor::Attribute { attribute, value } => Term::compound(
                "attribute",
                [
                    Term::atom(attribute.inverse()),
                    attribute.engine_value(value, u),
                ],
            ),
        };
        let steps = self
            .steps
            .iter()
            .map(|step| match step {
                ChainStep::Hop(r) => Term::atom(r.as_str()),
                ChainStep::Filter { attribute, value } => Term::compound(
                    "filter",
                    [
                        Term::atom(attribute.predicate()),
                        attribute.engine_value(value, u),
                    ],
                ),
            })
            .collect();
        Ok(Term::compound("chain", [anchor, Term::List(steps)]))
    }

    /// The end set, natively: sorted person ids.
    pub fn evaluate_native(&self, u: &Universe) -> Result<Vec<PersonId>, QueryError> {
        let mut set: Vec<PersonId> = match &self.anchor {
            Anchor::Name(name) => vec![
                u.person_named(name)
                    .ok_or_else(|| QueryError::UnknownPerson(name.clone()))?,
            ],
            Anchor::Attribute { attribute, value } => u.holders(attribute.fact(), value),
        };
        for step in &self.steps {
            set = match step {
                ChainStep::Hop(r) => {
                    let r = rel(r)?;
                    let mut next: Vec<PersonId> =
                        set.iter().flat_map(|&p| r.related(u, p)).collect();
                    next.sort_unstable();
                    next.dedup();
                    next
                }
                ChainStep::Filter { attribute, value } => set
                    .into_iter()
                    .filter(|&p| attribute.fact().value(u.person(p)) == value)
                    .collect(),
            };
        }
        Ok(set)
    }
}

impl Query {
    /// The chains of the query.
    pub fn chains(&self) -> Vec<&Chain> {
        match self {
            Query::Who(c) | Query::What(c, _) | Query::HowMany(c, _) => vec![c],
            Query::Oldest(c, _) | Query::Youngest(c, _) | Query::MostRelatives(c, _) => vec![c],
            Query::Older(a, b) | Query::Younger(a, b) | Query::BornFirst(a, b) => vec![a, b],
        }
    }

    /// The relation a superlative or a count applies to the chain's end, if any.
    pub fn relation(&self) -> Option<&str> {
        match self {
            Query::HowMany(_, r)
            | Query::Oldest(_, r)
            | Query::Youngest(_, r)
            | Query::MostRelatives(_, r) => Some(r),
            _ => None,
        }
    }

    /// The query as data (`prolog/queries.pl`), its relations checked and its named anchors
    /// written as their ids in `u`: it names no variable, so the engine reads it and compiles
    /// nothing.
    fn data(&self, u: &Universe) -> Result<Term, QueryError> {
        for chain in self.chains() {
            for r in chain.hops() {
                rel(r)?;
            }
        }
        if let Some(r) = self.relation() {
            rel(r)?;
        }
        let with_relation = |functor: &str, chain: &Chain, r: &str| {
            Ok::<_, QueryError>(Term::compound(functor, [chain.data(u)?, Term::atom(r)]))
        };
        Ok(match self {
            Query::Who(chain) => Term::compound("who", [chain.data(u)?]),
            Query::What(chain, attribute) => {
                Term::compound("what", [chain.data(u)?, Term::atom(attribute.predicate())])
            }
            Query::HowMany(chain, r) => with_relation("how_many", chain, r)?,
            // "Who was born first" is the older side.
            Query::Older(a, b) | Query::BornFirst(a, b) => {
                Term::compound("older", [a.data(u)?, b.data(u)?])
            }
            Query::Younger(a, b) => Term::compound("younger", [a.data(u)?, b.data(u)?]),
            Query::Oldest(chain, r) => with_relation("oldest", chain, r)?,
            Query::Youngest(chain, r) => with_relation("youngest", chain, r)?,
            Query::MostRelatives(chain, r) => with_relation("most", chain, r)?,
        })
    }

    /// What the engine's answers are, for naming them back.
    fn answer_kind(&self) -> AnswerKind {
        match self {
            Query::What(_, Attr::Dob) => AnswerKind::Dates,
            Query::What(..) | Query::HowMany(..) => AnswerKind::Values,
            _ => AnswerKind::People,
        }
    }

    /// The goal the engine answers (`query_answer(Query, Answer)` over the query as data, see
    /// `prolog/queries.pl`; set-at-a-time, one `hop_set/3` per hop) and its answer variable,
    /// for an engine that holds `u` as [`Universe::engine_facts`].
    pub fn goal(&self, u: &Universe) -> Result<(Term, Var), QueryError> {
        let answer = Var::numbered(0);
        Ok((
            Term::compound("query_answer", [self.data(u)?, Term::var(&answer)]),
            answer,
        ))
    }

    /// Gold answers: the result of running [`Query::goal`] on an engine that holds `u` as
    /// [`Universe::engine_facts`] (people by id, dates coded); the people and dates it answers
    /// are named from `u`.
    pub fn evaluate(&self, engine: &Engine, u: &Universe) -> crate::Result<Answers> {
        let (goal, answer) = self.goal(u)?;
        let rows = engine.query(&goal, std::slice::from_ref(&answer))?;
        answers_of(rows.iter().map(|row| &row[0]), self.answer_kind(), u)
    }

    /// [`Query::evaluate`] for many queries in one engine call (scryer's fixed cost per query,
    /// ~0.1 ms, is paid once): `batch_answers/2` over the queries as data (`prolog/queries.pl`),
    /// a `findall` of each query's answers. The same answers as one call per query; when the
    /// batch raises an error (one bad query), each query is evaluated alone, so the error is
    /// the one that query gives.
    pub fn evaluate_batch(
        queries: &[&Query],
        engine: &Engine,
        u: &Universe,
    ) -> crate::Result<Vec<Answers>> {
        if queries.len() <= 1 {
            return queries.iter().map(|q| q.evaluate(engine, u)).collect();
        }
        let data = queries
            .iter()
            .map(|q| q.data(u))
            .collect::<Result<Vec<_>, _>>()?;
        let lists = Var::numbered(0);
        let goal = Term::compound("batch_answers", [Term::List(data), Term::var(&lists)]);
        let rows = match engine.query(&goal, std::slice::from_ref(&lists)) {
            Ok(rows) => rows,
            Err(_) => return queries.iter().map(|q| q.evaluate(engine, u)).collect(),
        };
        let decode = |what: String| QueryError::Decode(what).into();
        let [row] = &rows[..] else {
            return Err(decode(format!("{} rows from a batch", rows.len())));
        };
        let items = match &row[0] {
            Value::List(items) if items.len() == queries.len() => items,
            other => {
                return Err(decode(format!(
                    "{other:?} from a batch of {}",
                    queries.len()
                )));
            }
        };
        items
            .iter()
            .zip(queries)
            .map(|(solutions, q)| match solutions {
                Value::List(items) => answers_of(items.iter(), q.answer_kind(), u),
                Value::Atom(a) if a == "[]" => Ok(Vec::new()),
                other => Err(QueryError::Decode(format!("{other:?}")).into()),
            })
            .collect()
    }

    /// Whether each side of a date comparison denotes exactly one person (true for every other
    /// query): the only comparisons rulegym's generator asks.
    pub fn one_person_sides(&self, u: &Universe) -> Result<bool, QueryError> {
        Ok(match self {
            Query::Older(a, b) | Query::Younger(a, b) | Query::BornFirst(a, b) => {
                a.evaluate_native(u)?.len() == 1 && b.evaluate_native(u)?.len() == 1
            }
            _ => true,
        })
    }

    /// The same answers computed natively over the universe graph (the test oracle).
    pub fn evaluate_native(&self, u: &Universe) -> Result<Answers, QueryError> {
        let names = |ids: Vec<PersonId>| -> Answers {
            ids.into_iter().map(|p| u.person(p).name.clone()).collect()
        };
        let mut answers = match self {
            Query::Who(chain) => names(chain.evaluate_native(u)?),
            Query::What(chain, attribute) => chain
                .evaluate_native(u)?
                .into_iter()
                .map(|p| attribute.fact().value(u.person(p)).to_owned())
                .collect(),
            Query::HowMany(chain, r) => {
                let r = rel(r)?;
                chain
                    .evaluate_native(u)?
                    .into_iter()
                    .map(|p| r.related(u, p).len().to_string())
                    .collect()
            }
            Query::Older(a, b) | Query::Younger(a, b) | Query::BornFirst(a, b) => {
                let oldest = !matches!(self, Query::Younger(..));
                let winners =
                    pairing_winners(u, &a.evaluate_native(u)?, &b.evaluate_native(u)?, oldest);
                if winners.len() == 1 {
                    names(winners)
                } else {
                    Vec::new()
                }
            }
            Query::Oldest(chain, r) | Query::Youngest(chain, r) => {
                let r = rel(r)?;
                let oldest = matches!(self, Query::Oldest(..));
                let mut out = Vec::new();
                for p in chain.evaluate_native(u)? {
                    out.extend(extreme_born(u, &r.related(u, p), oldest));
                }
                names(out)
            }
            Query::MostRelatives(chain, r) => {
                let r = rel(r)?;
                names(most_related(u, &chain.evaluate_native(u)?, r))
            }
        };
        answers.sort();
        answers.dedup();
        Ok(answers)
    }

    /// PhantomWiki-style atoms, outermost first (`friend(Y1, Y0)`, `job(Y2, 'doctor')`), and
    /// the answer variable's name: a readable record of the query.
    pub fn atoms(&self) -> (Vec<String>, String) {
        let mut atoms = Vec::new();
        let mut next = 0usize;
        let mut fresh = || {
            next += 1;
            format!("Y{next}")
        };
        let atom = |text: &str| {
            let mut out = String::new();
            write_atom(text, &mut out).expect("question text never contains NUL");
            out
        };
        // Renders a chain into `atoms`, outermost first; returns the term of its end.
        let mut chain_atoms = |chain: &Chain, atoms: &mut Vec<String>| -> String {
            let mut rendered = Vec::new();
            let mut current = match &chain.anchor {
                Anchor::Name(name) => atom(name),
                Anchor::Attribute { attribute, value } => {
                    let v = fresh();
                    rendered.push(format!("{}({v}, {})", attribute.predicate(), atom(value)));
                    v
                }
            };
            for step in &chain.steps {
                match step {
                    ChainStep::Hop(r) => {
                        let to = fresh();
                        rendered.push(format!("{r}({current}, {to})"));
                        current = to;
                    }
                    ChainStep::Filter { attribute, value } => rendered.push(format!(
                        "{}({current}, {})",
                        attribute.predicate(),
                        atom(value)
                    )),
                }
            }
            atoms.extend(rendered.into_iter().rev());
            current
        };
        let answer = match self {
            Query::Who(chain) => chain_atoms(chain, &mut atoms),
            Query::What(chain, attribute) => {
                let mut inner = Vec::new();
                let end = chain_atoms(chain, &mut inner);
                atoms.push(format!("{}({end}, Y0)", attribute.predicate()));
                atoms.extend(inner);
                "Y0".to_owned()
            }
            Query::HowMany(chain, r) => {
                let mut inner = Vec::new();
                let end = chain_atoms(chain, &mut inner);
                atoms.push(format!(
                    "aggregate_all(count, distinct({r}({end}, Y0)), Count)"
                ));
                atoms.extend(inner);
                "Count".to_owned()
            }
            // The public extensions' form, outermost first: `CmpDL @< CmpDR`,
            // `dob(A, CmpDL)`, `dob(B, CmpDR)`, the chains to A and B. The list is the same for
            // older, younger and born first; the question text says which is asked.
            Query::Older(a, b) | Query::Younger(a, b) | Query::BornFirst(a, b) => {
                let mut inner = Vec::new();
                let ea = chain_atoms(a, &mut inner);
                let eb = chain_atoms(b, &mut inner);
                atoms.push("CmpDL @< CmpDR".to_owned());
                atoms.push(format!("dob({ea}, CmpDL)"));
                atoms.push(format!("dob({eb}, CmpDR)"));
                atoms.extend(inner);
                "Y0".to_owned()
            }
            // The public extensions' form, outermost first:
            // `\+ (R(Y, Z), dob(Z, D2), Z \= Y0, D2 @< D)`, `dob(Y0, D)`, `R(Y, Y0)`, chain.
            Query::Oldest(chain, r) | Query::Youngest(chain, r) => {
                let mut inner = Vec::new();
                let end = chain_atoms(chain, &mut inner);
                let op = if matches!(self, Query::Oldest(..)) {
                    "@<"
                } else {
                    "@>"
                };
                atoms.push(format!(
                    "\\+ ({r}({end}, Z), dob(Z, D2), Z \\= Y0, D2 {op} D)"
                ));
                atoms.push("dob(Y0, D)".to_owned());
                atoms.push(format!("{r}({end}, Y0)"));
                atoms.extend(inner);
                "Y0".to_owned()
            }
            // The public extensions' form: the chain to each candidate, its count, and no other
            // candidate (the chain again, with fresh variables) with a larger count.
            Query::MostRelatives(chain, r) => {
                let mut outer = Vec::new();
                let end = chain_atoms(chain, &mut outer);
                let mut again = Vec::new();
                let other = chain_atoms(chain, &mut again);
                again.push(format!("{other} \\= {end}"));
                again.push(format!(
                    "aggregate_all(count, distinct({r}({other}, W)), Count2)"
                ));
                again.push("Count2 > Count".to_owned());
                atoms.push(format!("\\+ ({})", again.join(", ")));
                atoms.push(format!(
                    "aggregate_all(count, distinct({r}({end}, Z)), Count)"
                ));
                atoms.extend(outer);
                end
            }
        };
        (atoms, answer)
    }
}

/// What a query's engine answers are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AnswerKind {
    /// People, by id.
    People,
    /// Dates of birth, coded when the universe's are ([`dob_code`]).
    Dates,
    /// Attribute values or counts, as they are.
    Values,
}

/// The answers of a query from its solutions' answer values (each a list of atoms or numbers),
/// sorted and distinct; people (by id) and coded dates are named from `u`.
fn answers_of<'a>(
    solutions: impl Iterator<Item = &'a Value>,
    kind: AnswerKind,
    u: &Universe,
) -> crate::Result<Answers> {
    let mut answers: Answers = Vec::new();
    for solution in solutions {
        let items = match solution {
            Value::List(items) => items.clone(),
            // scryer reads a list of one-character atoms back as a string.
            Value::Str(chars) => chars.chars().map(|c| Value::Atom(c.into())).collect(),
            Value::Atom(a) if a == "[]" => Vec::new(),
            other => return Err(QueryError::Decode(format!("{other:?}")).into()),
        };
        for item in &items {
            answers.push(match (item, kind) {
                (Value::Int(id), AnswerKind::People) => usize::try_from(*id)
                    .ok()
                    .and_then(|id| u.people.get(id))
                    .map(|p| p.name.clone())
                    .ok_or_else(|| QueryError::Decode(format!("no person with id {id}")))?,
                (Value::Int(code), AnswerKind::Dates) if u.dobs_coded() => dob_text(*code)
                    .ok_or_else(|| QueryError::Decode(format!("no date with code {code}")))?,
                (Value::Atom(a) | Value::Str(a), AnswerKind::Values | AnswerKind::Dates) => {
                    a.clone()
                }
                (Value::Int(n), AnswerKind::Values) => n.to_string(),
                (other, _) => return Err(QueryError::Decode(format!("{other:?}")).into()),
            });
        }
    }
    answers.sort();
    answers.dedup();
    Ok(answers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::universe::UniverseConfig;

    fn name(u: &Universe, p: PersonId) -> Chain {
        Chain {
            anchor: Anchor::Name(u.person(p).name.clone()),
            steps: Vec::new(),
        }
    }

    fn hop(mut chain: Chain, r: &str) -> Chain {
        chain.steps.push(ChainStep::Hop(r.to_owned()));
        chain
    }

    /// "the person whose occupation is O and whose hobby is H" for person `p`.
    fn described(u: &Universe, p: PersonId) -> Chain {
        let person = u.person(p);
        Chain {
            anchor: Anchor::Attribute {
                attribute: Attr::Job,
                value: person.occupation.clone(),
            },
            steps: vec![ChainStep::Filter {
                attribute: Attr::Hobby,
                value: person.hobby.clone(),
            }],
        }
    }

    /// Engine and native evaluator agree on every extended variant, over chains anchored on
    /// names and on multi-attribute descriptions, with one- and several-person ends.
    #[test]
    fn extended_variants_engine_equals_native() {
        let config = UniverseConfig {
            num_family_trees: 12,
            seed: 7,
            easy_mode: false,
            ..UniverseConfig::default()
        };
        let u = Universe::generate(&config).unwrap();
        let engine = Engine::with_facts(&u.engine_facts()).unwrap();
        let people = u.people.len() as PersonId;
        let relations = [
            "child",
            "sibling",
            "friend",
            "parent",
            "cousin",
            "aunt",
            "grandchild",
        ];
        let (mut checked, mut answered) = (0, 0);
        for (i, p) in (0..people).step_by(3).take(40).enumerate() {
            let q = (p * 7 + 5) % people;
            let r = relations[i % relations.len()];
            let queries = [
                Query::Older(name(&u, p), name(&u, q)),
                Query::Younger(name(&u, p), described(&u, q)),
                Query::BornFirst(hop(name(&u, p), "parent"), name(&u, q)),
                Query::Younger(hop(name(&u, p), "sibling"), hop(name(&u, q), "friend")),
                Query::Oldest(name(&u, p), r.to_owned()),
                Query::Youngest(name(&u, p), r.to_owned()),
                Query::Oldest(hop(name(&u, p), "friend"), r.to_owned()),
                Query::Youngest(described(&u, q), "child".to_owned()),
                Query::MostRelatives(hop(name(&u, p), r), "child".to_owned()),
                Query::MostRelatives(hop(name(&u, p), "friend"), r.to_owned()),
                Query::MostRelatives(described(&u, p), "friend".to_owned()),
                Query::Who(described(&u, p)),
            ];
            for query in queries {
                let gold = query.evaluate(&engine, &u).unwrap();
                let native = query.evaluate_native(&u).unwrap();
                assert_eq!(gold, native, "{query:?}");
                checked += 1;
                answered += usize::from(!gold.is_empty());
            }
        }
        assert_eq!(checked, 40 * 12);
        assert!(
            answered > checked / 2,
            "only {answered} of {checked} answered"
        );
    }

    #[test]
    fn comparisons_and_superlatives_on_a_known_family() {
        let config = UniverseConfig {
            num_family_trees: 4,
            seed: 2,
            ..UniverseConfig::default()
        };
        let u = Universe::generate(&config).unwrap();
        let engine = Engine::with_facts(&u.engine_facts()).unwrap();
        // A parent with two or more children born on different days.
        let (parent, kids) = (0..u.people.len() as PersonId)
            .find_map(|p| {
                let kids = &u.person(p).children;
                let mut dobs: Vec<&str> = kids.iter().map(|&k| u.person(k).dob.as_str()).collect();
                dobs.sort_unstable();
                dobs.dedup();
                (dobs.len() >= 2 && dobs.len() == kids.len()).then(|| (p, kids.clone()))
            })
            .expect("a family with children");
        let mut by_age = kids.clone();
        by_age.sort_by(|&a, &b| u.person(a).dob.cmp(&u.person(b).dob));
        let (first, last) = (by_age[0], *by_age.last().unwrap());
        let n = |p: PersonId| vec![u.person(p).name.clone()];
        let check = |q: Query, want: Vec<String>| {
            assert_eq!(q.evaluate(&engine, &u).unwrap(), want, "{q:?}");
            assert_eq!(q.evaluate_native(&u).unwrap(), want, "{q:?}");
        };
        check(Query::Oldest(name(&u, parent), "child".into()), n(first));
        check(Query::Youngest(name(&u, parent), "child".into()), n(last));
        check(Query::Older(name(&u, first), name(&u, last)), n(first));
        check(Query::BornFirst(name(&u, last), name(&u, first)), n(first));
        check(Query::Younger(name(&u, first), name(&u, last)), n(last));
        // A side of several people has no single answer.
        check(
            Query::Younger(hop(name(&u, parent), "child"), name(&u, parent)),
            Vec::new(),
        );
        assert!(question_texts_are_distinct(&u, parent));
    }

    fn question_texts_are_distinct(u: &Universe, p: PersonId) -> bool {
        use crate::question::text::question_text;
        let texts = [
            question_text(&Query::Older(name(u, p), name(u, p))),
            question_text(&Query::Younger(name(u, p), name(u, p))),
            question_text(&Query::BornFirst(name(u, p), name(u, p))),
            question_text(&Query::Oldest(name(u, p), "child".into())),
            question_text(&Query::Youngest(name(u, p), "child".into())),
            question_text(&Query::MostRelatives(
                hop(name(u, p), "child"),
                "friend".into(),
            )),
        ];
        let most = &texts[5];
        assert!(
            most.starts_with("Who has the most friends among the children of "),
            "{most}"
        );
        texts
            .iter()
            .collect::<std::collections::BTreeSet<_>>()
            .len()
            == texts.len()
    }

    /// Dates of birth reach the engine as integers when every one is `YYYY-MM-DD`, and as the
    /// atoms `facts.pl` has otherwise (an imported universe may write them differently); either
    /// way dates are asked about, anchored on, filtered on and compared exactly as the native
    /// evaluator does.
    #[test]
    fn dates_are_coded_only_when_every_one_is_yyyy_mm_dd() {
        let config = UniverseConfig {
            num_family_trees: 4,
            seed: 3,
            ..UniverseConfig::default()
        };
        let coded = Universe::generate(&config).unwrap();
        let mut uncoded = Universe::generate(&config).unwrap();
        // Still in date order, no longer YYYY-MM-DD.
        uncoded.people[0].dob.push('~');
        assert!(coded.dobs_coded() && !uncoded.dobs_coded());
        for u in [&coded, &uncoded] {
            let engine = Engine::with_facts(&u.engine_facts()).unwrap();
            let people = u.people.len() as PersonId;
            for p in (0..people).step_by(5) {
                let q = (p * 7 + 3) % people;
                let dob = u.person(p).dob.clone();
                let by_date = Chain {
                    anchor: Anchor::Attribute {
                        attribute: Attr::Dob,
                        value: dob.clone(),
                    },
                    steps: vec![ChainStep::Filter {
                        attribute: Attr::Dob,
                        value: dob.clone(),
                    }],
                };
                for query in [
                    Query::What(name(u, p), Attr::Dob),
                    Query::What(hop(name(u, q), "parent"), Attr::Dob),
                    Query::Who(by_date.clone()),
                    Query::Older(name(u, p), name(u, q)),
                    Query::Oldest(name(u, q), "sibling".to_owned()),
                ] {
                    let gold = query.evaluate(&engine, u).unwrap();
                    assert_eq!(gold, query.evaluate_native(u).unwrap(), "{query:?}");
                }
                assert_eq!(
                    Query::What(name(u, p), Attr::Dob)
                        .evaluate(&engine, u)
                        .unwrap(),
                    [dob]
                );
            }
        }
    }
}
