//! A generated task with what the generator knows about it: the user, the relation path, the
//! candidates, the target and the action.

use crate::tooluse::task::Task;

/// What the task asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Set a field (`hobby` or `occupation`) of the target's record.
    Update {
        /// The field.
        field: String,
    },
    /// Send the target a message.
    Message,
}

/// A generated task with what the generator knows about it (for tests and statistics).
#[derive(Debug, Clone, PartialEq)]
pub struct RuleTask {
    /// The task.
    pub task: Task,
    /// Index of the candidate it came from.
    pub index: u64,
    /// The user ("I").
    pub user: String,
    /// The relation path.
    pub path: Vec<String>,
    /// Everyone fitting the description.
    pub candidates: Vec<String>,
    /// The intended target.
    pub target: String,
    /// What to do.
    pub action: Action,
    /// The new value (field value or message text).
    pub value: String,
    /// Names of the user's family tree in the world.
    pub family: Vec<String>,
    /// Names from other trees in the world.
    pub outsiders: Vec<String>,
}
