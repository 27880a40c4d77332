//! A candidate's task assembled: world states, instruction, hidden slots, rubric and reference
//! workflow.

use super::context::Context;
use super::instruction::{instruction, slots};
use super::{RuleGenConfig, RuleTask, tools};
use crate::relations::Relation;
use crate::tooluse::task::{HiddenContext, Task};
use crate::universe::PersonId;
use std::collections::BTreeSet;

impl Context<'_> {
    /// The task of one candidate: its world state, instruction, hidden slots, rubric and
    /// reference workflow.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn build(
        &self,
        config: &RuleGenConfig,
        w: &RuleTask,
        path: &[&Relation],
        levels: &[Vec<PersonId>],
        people: &BTreeSet<PersonId>,
        hide_user: bool,
        hide_value: bool,
    ) -> Task {
        let u = self.universe;
        let phrase = path
            .iter()
            .map(|r| r.singular)
            .collect::<Vec<_>>()
            .join("'s ");
        let (initial, expected) = self.states(w, people);
        let instruction = instruction(w, &phrase, hide_user, hide_value);
        let (slots, ask_value) = slots(w, path, hide_user, hide_value);
        let text = format!("You are {}. You mean your {phrase} {}.", w.user, w.target);
        let rubric = self.rubric(w, path, levels, &slots, hide_user, hide_value);
        let workflow = self.workflow(w, path, levels, &ask_value, hide_user, hide_value);
        let max_turns = workflow.len() as u32 + 8;
        Task {
            id: format!("world-{}-{}", config.seed, w.index),
            persona: format!("{}, a {}", w.user, u.person(levels[0][0]).occupation),
            instruction,
            hidden_context: HiddenContext { slots, text },
            tools: tools(),
            initial_state: Some(initial),
            expected_state: Some(expected),
            workflow,
            rubric,
            max_turns: Some(max_turns),
        }
    }
}
