//! The world states of a task: the initial records and the expected ones after its action.

use super::context::Context;
use super::{Action, RuleTask};
use crate::tooluse::task::{Record, WorldState};
use crate::universe::PersonId;
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};

impl Context<'_> {
    /// The initial world state (the people, their relatives among them, no messages) and the
    /// expected one after the task's action.
    pub(super) fn states(
        &self,
        w: &RuleTask,
        people: &BTreeSet<PersonId>,
    ) -> (WorldState, WorldState) {
        let u = self.universe;
        let mut people_table = BTreeMap::new();
        for &q in people {
            let p = u.person(q);
            let mut r = Record::new();
            r.insert("name".into(), json!(p.name));
            r.insert("gender".into(), json!(p.gender.as_str()));
            r.insert("dob".into(), json!(p.dob));
            r.insert("occupation".into(), json!(p.occupation));
            r.insert("hobby".into(), json!(p.hobby));
            people_table.insert(p.name.clone(), r);
        }
        let mut relatives = BTreeMap::new();
        for &q in people {
            for rel in &self.relations {
                let found: Vec<String> = rel
                    .related(u, q)
                    .into_iter()
                    .filter(|x| people.contains(x))
                    .map(|x| self.name(x))
                    .collect();
                if found.is_empty() {
                    continue;
                }
                let name = self.name(q);
                let mut r = Record::new();
                r.insert("name".into(), json!(name));
                r.insert("relation".into(), json!(rel.name));
                r.insert("relatives".into(), json!(found));
                relatives.insert(format!("{name}|{}", rel.name), r);
            }
        }
        let mut initial: WorldState = BTreeMap::new();
        initial.insert("people".into(), people_table);
        initial.insert("relatives".into(), relatives);
        initial.insert("messages".into(), BTreeMap::new());
        let mut expected = initial.clone();
        match &w.action {
            Action::Update { field } => {
                if let Some(r) = expected
                    .get_mut("people")
                    .and_then(|t| t.get_mut(&w.target))
                {
                    r.insert(field.clone(), json!(w.value));
                }
            }
            Action::Message => {
                let mut r = Record::new();
                r.insert("text".into(), json!(w.value));
                expected
                    .entry("messages".into())
                    .or_default()
                    .insert(w.target.clone(), r);
            }
        }
        (initial, expected)
    }
}
