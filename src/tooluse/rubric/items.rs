//! A rubric as a task file writes it: three lists of items, each a Prolog rule body over the
//! trajectory's facts (or, without a rule, an item an LLM judge decides).

use serde::{Deserialize, Serialize};

/// The rubric: three lists of items.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rubric {
    /// Behaviours that zero the reward; a rule succeeds when the behaviour happened.
    #[serde(default)]
    pub forbidden: Vec<RubricItem>,
    /// Sub-goals; a rule succeeds when the sub-goal was completed.
    #[serde(default)]
    pub subgoals: Vec<RubricItem>,
    /// Required user interactions; a rule succeeds when the interaction happened.
    #[serde(default)]
    pub interactions: Vec<RubricItem>,
}

/// Which list a rubric item is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ItemKind {
    /// A forbidden behaviour.
    Forbidden,
    /// A sub-goal.
    Subgoal,
    /// A required user interaction.
    Interaction,
}

impl Rubric {
    /// Every item with its kind, in order: forbidden, sub-goals, interactions.
    pub fn items(&self) -> impl Iterator<Item = (ItemKind, &RubricItem)> {
        let f = self.forbidden.iter().map(|i| (ItemKind::Forbidden, i));
        let s = self.subgoals.iter().map(|i| (ItemKind::Subgoal, i));
        let u = self.interactions.iter().map(|i| (ItemKind::Interaction, i));
        f.chain(s).chain(u)
    }
}

/// One rubric item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RubricItem {
    /// Identifier, unique within the task.
    pub id: String,
    /// What the item checks, in words.
    pub description: String,
    /// A Prolog rule body over trajectory facts; `None` only when an LLM judge is configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
}
