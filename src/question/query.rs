//! Typed question queries: a chain of hops and attribute filters from an anchor, and what is
//! asked about its end. Compiled to one set-at-a-time Prolog goal (gold answers), to
//! PhantomWiki-style atoms (for the record), and evaluated natively (the test oracle).

use crate::engine::{Engine, Term, Value, Var, write_atom};
use crate::relations::{Relation, relation};
use crate::universe::{AttributeFact, PersonId, Universe};
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
    /// Which of the two (each chain must end at one person) was born first; no answer on a tie.
    Older(Chain, Chain),
}

/// A query's answers: sorted, distinct strings.
pub type Answers = Vec<String>;

/// Errors while compiling or evaluating a query.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
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

    /// Goals computing the chain's end set into the returned variable; `next` numbers variables.
    fn goals(&self, next: &mut usize, goals: &mut Vec<Term>) -> Var {
        let mut fresh = || {
            *next += 1;
            Var::numbered(*next)
        };
        let mut set = fresh();
        match &self.anchor {
            Anchor::Name(name) => goals.push(Term::compound(
                "=",
                [Term::var(&set), Term::List(vec![Term::atom(name.as_str())])],
            )),
            Anchor::Attribute { attribute, value } => goals.push(Term::compound(
                "hop_set",
                [
                    Term::atom(attribute.inverse()),
                    Term::List(vec![Term::atom(value.as_str())]),
                    Term::var(&set),
                ],
            )),
        }
        for step in &self.steps {
            let out = fresh();
            goals.push(match step {
                ChainStep::Hop(r) => Term::compound(
                    "hop_set",
                    [Term::atom(r.as_str()), Term::var(&set), Term::var(&out)],
                ),
                ChainStep::Filter { attribute, value } => Term::compound(
                    "filter_set",
                    [
                        Term::atom(attribute.predicate()),
                        Term::atom(value.as_str()),
                        Term::var(&set),
                        Term::var(&out),
                    ],
                ),
            });
            set = out;
        }
        set
    }

    /// The end set, natively: sorted person ids.
    pub fn evaluate_native(&self, u: &Universe) -> Result<Vec<PersonId>, QueryError> {
        let mut set: Vec<PersonId> = match &self.anchor {
            Anchor::Name(name) => vec![
                u.people
                    .iter()
                    .position(|p| &p.name == name)
                    .ok_or_else(|| QueryError::UnknownPerson(name.clone()))?
                    as PersonId,
            ],
            Anchor::Attribute { attribute, value } => (0..u.people.len() as PersonId)
                .filter(|&p| attribute.fact().value(u.person(p)) == value)
                .collect(),
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
            Query::Older(a, b) => vec![a, b],
        }
    }

    /// The set-at-a-time goal (see `hop_set/3` in `prolog/prelude.pl`) and its answer variable.
    pub fn goal(&self) -> Result<(Term, Var), QueryError> {
        for chain in self.chains() {
            for r in chain.hops() {
                rel(r)?;
            }
        }
        let mut goals = Vec::new();
        let mut next = 0;
        let answer = Var::numbered(0);
        match self {
            Query::Who(chain) => {
                let end = chain.goals(&mut next, &mut goals);
                goals.push(Term::compound("=", [Term::var(&answer), Term::var(&end)]));
            }
            Query::What(chain, attribute) => {
                let end = chain.goals(&mut next, &mut goals);
                goals.push(Term::compound(
                    "hop_set",
                    [
                        Term::atom(attribute.predicate()),
                        Term::var(&end),
                        Term::var(&answer),
                    ],
                ));
            }
            Query::HowMany(chain, r) => {
                rel(r)?;
                let end = chain.goals(&mut next, &mut goals);
                goals.push(Term::compound(
                    "count_each",
                    [Term::atom(r.as_str()), Term::var(&end), Term::var(&answer)],
                ));
            }
            Query::Older(a, b) => {
                let (ea, eb) = (
                    a.goals(&mut next, &mut goals),
                    b.goals(&mut next, &mut goals),
                );
                goals.push(Term::compound(
                    "older_of",
                    [Term::var(&ea), Term::var(&eb), Term::var(&answer)],
                ));
            }
        }
        Ok((Term::and(goals), answer))
    }

    /// Gold answers: the result of running [`Query::goal`] on the engine.
    pub fn evaluate(&self, engine: &Engine) -> crate::Result<Answers> {
        let (goal, answer) = self.goal()?;
        let rows = engine.query(&goal, std::slice::from_ref(&answer))?;
        let mut answers: Answers = Vec::new();
        for row in rows {
            let items = match &row[0] {
                Value::List(items) => items.clone(),
                // scryer reads a list of one-character atoms back as a string.
                Value::Str(chars) => chars.chars().map(|c| Value::Atom(c.into())).collect(),
                other => return Err(QueryError::Decode(format!("{other:?}")).into()),
            };
            for item in &items {
                answers.push(match item {
                    Value::Atom(a) | Value::Str(a) => a.clone(),
                    Value::Int(n) => n.to_string(),
                    other => return Err(QueryError::Decode(format!("{other:?}")).into()),
                });
            }
        }
        answers.sort();
        answers.dedup();
        Ok(answers)
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
            Query::Older(a, b) => match (&a.evaluate_native(u)?[..], &b.evaluate_native(u)?[..]) {
                (&[pa], &[pb]) => {
                    let (da, db) = (&u.person(pa).dob, &u.person(pb).dob);
                    match da.cmp(db) {
                        std::cmp::Ordering::Less => names(vec![pa]),
                        std::cmp::Ordering::Greater => names(vec![pb]),
                        std::cmp::Ordering::Equal => Vec::new(),
                    }
                }
                _ => Vec::new(),
            },
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
            Query::Older(a, b) => {
                let ea = chain_atoms(a, &mut atoms);
                let eb = chain_atoms(b, &mut atoms);
                atoms.push(format!("older_of({ea}, {eb}, Y0)"));
                "Y0".to_owned()
            }
        };
        (atoms, answer)
    }
}
