//! Oracle trajectories derived from a question's proof: search the anchor, read every article the
//! set-at-a-time evaluation of the query walks through, answer the gold set. The environment
//! replays each one; a trajectory that does not reach F1 = 1 names the retrieval misses.

use super::{Retriever, SearchEnv, SearchEnvConfig, SearchTask};
use crate::env::Environment;
use crate::llm::{ChatMessage, Role};
use crate::question::{
    Anchor, Anchors, Attr, Certificate, Certify, Chain, ChainStep, Query, Question, Solvability,
};
use crate::relations::relation;
use crate::retrieval::SearchIndex;
use crate::reward::{ScoreMode, score};
use crate::universe::{PersonId, Universe};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
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
    /// `read[p]`: `p` is in `plan.reads`.
    read: Vec<bool>,
    /// Stop recording searches beyond this many (the plan is then only known to be longer).
    limit: usize,
}

impl Reader<'_> {
    fn searches(&self) -> usize {
        self.plan.attribute_searches.len() + self.plan.reads.len()
    }

    fn read(&mut self, people: &[PersonId]) {
        for &p in people {
            if self.searches() > self.limit {
                return;
            }
            if !std::mem::replace(&mut self.read[p as usize], true) {
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
                .person_named(name)
                .map(|i| vec![i])
                .unwrap_or_default(),
            Anchor::Attribute { attribute, value } => {
                let holders = self.u.holders(attribute.fact(), value);
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
    bounded_proof_plan(u, query, usize::MAX).expect("unbounded")
}

/// [`proof_plan`], or `None` as soon as it needs more than `limit` searches.
pub fn bounded_proof_plan(u: &Universe, query: &Query, limit: usize) -> Option<ProofPlan> {
    let mut reader = Reader {
        u,
        plan: ProofPlan {
            attribute_searches: Vec::new(),
            reads: Vec::new(),
        },
        read: vec![false; u.people.len()],
        limit,
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
    (reader.searches() <= limit).then_some(reader.plan)
}

impl ProofPlan {
    /// The oracle's searches in order: (query text, the people whose articles it must
    /// retrieve): each attribute search, then each read person's name.
    pub fn searches(&self, u: &Universe) -> Vec<(String, Vec<PersonId>)> {
        self.attribute_searches
            .iter()
            .cloned()
            .chain(
                self.reads
                    .iter()
                    .map(|&p| (u.person(p).name.clone(), vec![p])),
            )
            .collect()
    }
}

/// The text of the oracle's final answer.
fn oracle_answer(answers: &[String]) -> String {
    answers.join(", ")
}

/// Solvability certificates over a dataset's index: the same decision as [`replay`] (every
/// search retrieves the articles the proof needs within the top k, the searches and the answer
/// fit in the turn cap, the answer scores F1 = 1), computed from the proof plan without playing
/// the chat. Every search an oracle can make is known in advance (a person's name, or
/// "<attribute> <value>" for a value held by at most k people; more holders can never all be
/// retrieved), so [`Certifier::new`] decides them all up front (over a flat index with a
/// [`crate::retrieval::RankChecker`]: the search's decision exactly, without ranking every
/// article) and certifying is a lookup.
pub struct Certifier<'a> {
    universe: &'a Universe,
    setting: Solvability,
    score_mode: ScoreMode,
    /// `names[p]`: searching `p`'s name retrieves `p`'s article.
    names: Vec<bool>,
    /// Attribute search text -> it retrieves every holder (values with at most k holders).
    attributes: BTreeMap<String, bool>,
    /// The anchors whose search retrieves what they denote, for the walks.
    anchors: Anchors,
}

impl<'a> Certifier<'a> {
    /// A certifier for questions about `universe` answered over `index`, whose document ids are
    /// person ids (the index `rulegym generate` writes).
    pub fn new(
        universe: &'a Universe,
        index: &SearchIndex,
        setting: Solvability,
    ) -> crate::Result<Self> {
        let k = setting.top_k;
        // Search text -> the attribute and the people holding its value.
        let mut holders: BTreeMap<String, (Attr, Vec<PersonId>)> = BTreeMap::new();
        for attribute in Attr::ALL {
            for (p, person) in universe.people.iter().enumerate() {
                let text = format!("{} {}", attribute.noun(), attribute.fact().value(person));
                holders
                    .entry(text)
                    .or_insert_with(|| (attribute, Vec::new()))
                    .1
                    .push(p as PersonId);
            }
        }
        holders.retain(|_, (_, people)| people.len() <= k);
        let people: Vec<PersonId> = (0..universe.people.len() as PersonId).collect();
        let searches: Vec<(&str, &[PersonId])> = universe
            .people
            .iter()
            .zip(&people)
            .map(|(person, p)| (person.name.as_str(), std::slice::from_ref(p)))
            .chain(holders.iter().map(|(text, (_, h))| (text.as_str(), &h[..])))
            .collect();
        let mut found = retrieves_all(index, &searches, k)?;
        let retrieved = found.split_off(people.len());
        // Every holder of a value whose search retrieves them all, person-major.
        let mut anchor_attributes: Vec<(PersonId, Attr)> = holders
            .values()
            .zip(&retrieved)
            .filter(|(_, retrieved)| **retrieved)
            .flat_map(|((attribute, people), _)| people.iter().map(|&p| (p, *attribute)))
            .collect();
        anchor_attributes.sort_unstable();
        let anchors = Anchors {
            names: people.into_iter().filter(|&p| found[p as usize]).collect(),
            attributes: anchor_attributes,
        };
        let attributes = holders.into_keys().zip(retrieved).collect();
        Ok(Certifier {
            universe,
            setting,
            score_mode: ScoreMode::Squad,
            names: found,
            attributes,
            anchors,
        })
    }

    fn retrieves(&self, query: &str, people: &[PersonId]) -> bool {
        match people {
            [p] if self.universe.person(*p).name == query => self.names[*p as usize],
            _ => self.attributes.get(query).copied().unwrap_or(false),
        }
    }
}

/// For each (search text, people) pair, whether searching the text retrieves every one of the
/// people's articles within the top `k`, as the environment retrieves them. A flat index
/// decides it with a [`crate::retrieval::RankChecker`] (the searches' decision exactly, without
/// ranking every article for every text); another kind is searched.
fn retrieves_all(
    index: &SearchIndex,
    searches: &[(&str, &[PersonId])],
    k: usize,
) -> crate::Result<Vec<bool>> {
    let docs = index.docs();
    let k = k.min(docs.len()).max(1);
    // A person's article is the document whose id is their id; a person without one is never
    // retrieved (a row past the end stands for them).
    let rows: std::collections::HashMap<&str, u32> = docs
        .iter()
        .enumerate()
        .map(|(row, doc)| (doc.id.as_str(), row as u32))
        .collect();
    let checker = index.is_flat().then(|| index.flat().rank_checker());
    let mut found = Vec::with_capacity(searches.len());
    for batch in searches.chunks(4096) {
        let texts: Vec<&str> = batch.iter().map(|(text, _)| *text).collect();
        let targets: Vec<Vec<u32>> = batch
            .iter()
            .map(|(_, people)| {
                people
                    .iter()
                    .map(|p| {
                        rows.get(p.to_string().as_str())
                            .copied()
                            .unwrap_or(u32::MAX)
                    })
                    .collect()
            })
            .collect();
        match &checker {
            Some(checker) => {
                let queries = index
                    .encoder()
                    .encode(&texts, crate::retrieval::TextKind::Query)?;
                let targets: Vec<&[u32]> = targets.iter().map(Vec::as_slice).collect();
                found.extend(checker.all_in_top_k(&queries, &targets, k)?);
            }
            None => {
                for (targets, hits) in targets.iter().zip(index.search(&texts, k)?) {
                    found.push(targets.iter().all(|t| hits.iter().any(|h| h.index == *t)));
                }
            }
        }
    }
    Ok(found)
}

impl Certify for Certifier<'_> {
    fn certify(
        &self,
        query: &Query,
        answers: &[String],
        unsolvable_too: bool,
    ) -> crate::Result<Option<Certificate>> {
        let certificate = |solvable: bool, searches: usize| Certificate {
            solvable,
            searches,
            top_k: self.setting.top_k,
            max_turns: self.setting.max_turns,
        };
        // Searches and the answer must fit in the turn cap.
        let cap = self.setting.max_turns - 1;
        let Some(plan) = bounded_proof_plan(self.universe, query, cap) else {
            return Ok(unsolvable_too.then(|| {
                let searches = proof_plan(self.universe, query)
                    .searches(self.universe)
                    .len();
                certificate(false, searches)
            }));
        };
        let searches = plan.searches(self.universe);
        let solvable = searches
            .iter()
            .all(|(text, people)| self.retrieves(text, people))
            && score(&oracle_answer(answers), answers, self.score_mode).f1 == 1.0;
        Ok((solvable || unsolvable_too).then(|| certificate(solvable, searches.len())))
    }

    fn anchors(&self) -> Option<&Anchors> {
        Some(&self.anchors)
    }
}

/// A replayed oracle trajectory, one line of `rulegym oracle`'s output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OracleTrajectory {
    /// The question id.
    pub id: String,
    /// The chat: prompt, the oracle's turns and the environment's observations.
    pub messages: Vec<ChatMessage>,
    /// F1 of the replayed answer.
    pub f1: f64,
    /// Searches the oracle made (its turns are these plus the answer).
    pub searches: usize,
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
    let attribute_searches = plan.attribute_searches.len();
    let mut actions: Vec<(String, Vec<PersonId>)> = plan
        .searches(u)
        .into_iter()
        .enumerate()
        .map(|(i, (s, people))| {
            let why = if i < attribute_searches {
                format!("the people whose {s}")
            } else {
                format!("to read the article about {s}")
            };
            (
                format!("<think>I need {why}.</think>\n<search> {s} </search>"),
                people,
            )
        })
        .collect();
    let searches = actions.len();
    actions.push((
        format!(
            "<think>I have everything I need.</think>\n<answer> {} </answer>",
            oracle_answer(&q.answers)
        ),
        Vec::new(),
    ));
    let mut reward = 0.0;
    for (action, expected) in actions {
        messages.push(ChatMessage::text(Role::Assistant, action.clone()));
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
        searches,
        retrieval_misses: misses,
        failure,
    })
}
