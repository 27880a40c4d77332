//! Oracle trajectories derived from a question's proof: search the anchor, read every article the
//! set-at-a-time evaluation of the query walks through, answer the gold set. The environment
//! replays each one; a trajectory that does not reach F1 = 1 names the retrieval misses.

use super::search::{SearchEnv, SearchEnvConfig, SearchTask};
use super::{Environment, Message};
use crate::env::search::Retriever;
use crate::question::{Anchor, Chain, ChainStep, Query, Question};
use crate::relations::relation;
use crate::universe::{PersonId, Universe};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// What the oracle reads, in order: an opening attribute search (for "the person whose ..."
/// anchors), then the people whose articles the proof needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProofPlan {
    /// Attribute searches ("occupation doctor") and the people each must discover.
    pub attribute_searches: Vec<(String, Vec<PersonId>)>,
    /// People to read, each once, in proof order.
    pub reads: Vec<PersonId>,
}

struct Reader<'a> {
    u: &'a Universe,
    plan: ProofPlan,
}

impl Reader<'_> {
    fn read(&mut self, people: &[PersonId]) {
        for &p in people {
            if !self.plan.reads.contains(&p) {
                self.plan.reads.push(p);
            }
        }
    }

    /// Expands a set through a relation, reading each frontier (whose article lists the step).
    fn hop(&mut self, set: &[PersonId], name: &str) -> Vec<PersonId> {
        let Some(r) = relation(name) else {
            return Vec::new();
        };
        let mut next: Vec<PersonId> = set.iter().flat_map(|&p| r.related(self.u, p)).collect();
        let mut frontier = set.to_vec();
        for &s in r.steps {
            self.read(&frontier);
            let mut next = Vec::new();
            for &p in &frontier {
                s.extend(self.u, p, &mut next);
            }
            frontier = next;
            frontier.sort_unstable();
            frontier.dedup();
        }
        next.sort_unstable();
        next.dedup();
        next
    }

    fn chain(&mut self, chain: &Chain) -> Vec<PersonId> {
        let mut set = match &chain.anchor {
            Anchor::Name(name) => self
                .u
                .people
                .iter()
                .position(|p| &p.name == name)
                .map(|i| vec![i as PersonId])
                .unwrap_or_default(),
            Anchor::Attribute { attribute, value } => {
                let holders: Vec<PersonId> = (0..self.u.people.len() as PersonId)
                    .filter(|&p| attribute.fact().value(self.u.person(p)) == value)
                    .collect();
                self.plan
                    .attribute_searches
                    .push((format!("{} {value}", attribute.noun()), holders.clone()));
                self.read(&holders);
                holders
            }
        };
        for step in &chain.steps {
            set = match step {
                ChainStep::Hop(r) => self.hop(&set, r),
                ChainStep::Filter { attribute, value } => {
                    self.read(&set);
                    set.into_iter()
                        .filter(|&p| attribute.fact().value(self.u.person(p)) == value)
                        .collect()
                }
            };
        }
        set
    }
}

/// The articles the proof of `query` needs.
pub fn proof_plan(u: &Universe, query: &Query) -> ProofPlan {
    let mut reader = Reader {
        u,
        plan: ProofPlan {
            attribute_searches: Vec::new(),
            reads: Vec::new(),
        },
    };
    match query {
        Query::Who(chain) => {
            reader.chain(chain);
        }
        Query::What(chain, _) => {
            let end = reader.chain(chain);
            reader.read(&end);
        }
        Query::HowMany(chain, r) => {
            let end = reader.chain(chain);
            for p in end {
                reader.hop(&[p], r);
            }
        }
        Query::Older(a, b) | Query::Younger(a, b) | Query::BornFirst(a, b) => {
            let ea = reader.chain(a);
            let eb = reader.chain(b);
            reader.read(&ea);
            reader.read(&eb);
        }
        // Each base person's relatives, then every relative's article (for the date of birth).
        Query::Oldest(chain, r) | Query::Youngest(chain, r) => {
            let base = reader.chain(chain);
            for p in base {
                let relatives = reader.hop(&[p], r);
                reader.read(&relatives);
            }
        }
        Query::MostRelatives(chain, r) => {
            let end = reader.chain(chain);
            for p in end {
                reader.hop(&[p], r);
            }
        }
    }
    reader.plan
}

/// A replayed oracle trajectory, one line of `rulegym oracle`'s output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OracleTrajectory {
    /// The question id.
    pub id: String,
    /// The chat: prompt, the oracle's turns and the environment's observations.
    pub messages: Vec<Message>,
    /// F1 of the replayed answer.
    pub f1: f64,
    /// People whose article the oracle's search did not return (the oracle could not have
    /// learnt what it needed, so the trajectory counts as failed).
    pub retrieval_misses: Vec<String>,
    /// Why the replay scored below 1, if it did.
    pub failure: Option<String>,
}

/// Derives the oracle trajectory of `q` and replays it in a fresh environment.
pub fn replay(
    u: &Universe,
    retriever: Arc<dyn Retriever>,
    config: &SearchEnvConfig,
    q: &Question,
) -> crate::Result<OracleTrajectory> {
    let plan = proof_plan(u, &q.plan);
    let doc_id = |p: PersonId| p.to_string();
    let task = SearchTask {
        question: q.question.clone(),
        answers: q.answers.clone(),
        gold_docs: plan.reads.iter().map(|&p| doc_id(p)).collect(),
    };
    let turns = plan.attribute_searches.len() + plan.reads.len() + 1;
    let config = SearchEnvConfig {
        max_turns: config.max_turns.max(turns),
        ..config.clone()
    };
    let mut env = SearchEnv::new(retriever, config, task)?;
    let mut messages = env.reset()?;
    let mut misses = Vec::new();
    // (action, the people whose articles it must retrieve)
    let mut actions: Vec<(String, Vec<PersonId>)> = plan
        .attribute_searches
        .iter()
        .map(|(s, holders)| {
            let action =
                format!("<think>I need the people whose {s}.</think>\n<search> {s} </search>");
            (action, holders.clone())
        })
        .collect();
    for &p in &plan.reads {
        let name = &u.person(p).name;
        actions.push((
            format!(
                "<think>I need to read the article about {name}.</think>\n<search> {name} </search>"
            ),
            vec![p],
        ));
    }
    actions.push((
        format!(
            "<think>I have everything I need.</think>\n<answer> {} </answer>",
            q.answers.join(", ")
        ),
        Vec::new(),
    ));
    let mut reward = 0.0;
    for (action, expected) in actions {
        messages.push(Message::new("assistant", action.clone()));
        let step = env.step(&action)?;
        let retrieved: Vec<&str> = step
            .metadata
            .get("retrieved_ids")
            .and_then(|ids| ids.as_array())
            .map(|ids| ids.iter().filter_map(|id| id.as_str()).collect())
            .unwrap_or_default();
        for p in expected {
            if !retrieved.contains(&doc_id(p).as_str()) {
                misses.push(u.person(p).name.clone());
            }
        }
        messages.extend(step.observations);
        if step.done {
            reward = step.reward;
            break;
        }
    }
    let f1 = if misses.is_empty() { reward } else { 0.0 };
    let failure = (f1 < 1.0).then(|| {
        if misses.is_empty() {
            format!("the gold answer scored {reward}")
        } else {
            format!("retrieval missed {} article(s)", misses.len())
        }
    });
    Ok(OracleTrajectory {
        id: q.id.clone(),
        messages,
        f1,
        retrieval_misses: misses,
        failure,
    })
}
