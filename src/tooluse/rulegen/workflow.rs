//! The reference solution of a task: one workflow line per agent turn.

use super::context::Context;
use super::{Action, RuleTask};
use crate::relations::Relation;
use crate::universe::PersonId;
use serde_json::json;

impl Context<'_> {
    /// The reference solution: one line per agent turn.
    pub(super) fn workflow(
        &self,
        w: &RuleTask,
        path: &[&Relation],
        levels: &[Vec<PersonId>],
        ask_value: &str,
        hide_user: bool,
        hide_value: bool,
    ) -> Vec<String> {
        let ambiguous = w.candidates.len() > 1;
        let mut workflow = Vec::new();
        if hide_user {
            workflow.push("ask user_name: What is your name?".to_owned());
        }
        for (k, rel) in path.iter().enumerate() {
            for &q in &levels[k] {
                workflow.push(format!(
                    "call list_relatives {}",
                    json!({"name": self.name(q), "relation": rel.name})
                ));
            }
        }
        if ambiguous {
            workflow.push(format!(
                "ask target: Which one do you mean: {}?",
                w.candidates.join(" or ")
            ));
        }
        if hide_value {
            workflow.push(format!("ask value: {ask_value}"));
        }
        workflow.push(match &w.action {
            Action::Update { field } => format!(
                "call update_record {}",
                json!({"name": w.target, field.as_str(): w.value})
            ),
            Action::Message => format!(
                "call send_message {}",
                json!({"to": w.target, "text": w.value})
            ),
        });
        workflow.push("answer Done.".to_owned());
        workflow
    }
}
