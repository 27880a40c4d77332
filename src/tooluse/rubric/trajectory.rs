//! What a rubric reads: the events of an episode (tool calls and results, user turns, answers,
//! the final state) as a [`Trajectory`].

use super::*;
use serde_json::Map;
use std::collections::BTreeMap;

/// A record of the world state: a JSON object.
pub type Record = Map<String, Json>;

/// The world state: table name -> record key -> record.
pub type WorldState = BTreeMap<String, BTreeMap<String, Record>>;

/// Why an episode stopped early.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopMarker {
    /// `###STOP`.
    Stop,
    /// `###TRANSFER_TO_HUMAN`.
    TransferToHuman,
}

impl StopMarker {
    pub(super) fn atom(self) -> &'static str {
        match self {
            StopMarker::Stop => "stop",
            StopMarker::TransferToHuman => "transfer_to_human",
        }
    }
}

/// One thing that happened in an episode. `step` is the 1-based agent turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The agent called a tool (arguments as parsed; an unknown tool keeps its name).
    ToolCall {
        /// Agent turn.
        step: u32,
        /// Tool name.
        tool: String,
        /// Arguments.
        args: Json,
    },
    /// A tool answered.
    ToolResult {
        /// Agent turn.
        step: u32,
        /// Tool name.
        tool: String,
        /// The response.
        result: Json,
    },
    /// A tool call failed (unknown tool, invalid arguments, tool-side error).
    ToolError {
        /// Agent turn.
        step: u32,
        /// Tool name.
        tool: String,
        /// Why.
        reason: String,
    },
    /// The agent's text went to the user.
    AskedUser {
        /// Agent turn.
        step: u32,
        /// The question.
        text: String,
    },
    /// The user replied.
    UserSaid {
        /// Agent turn the reply answers.
        step: u32,
        /// The reply.
        text: String,
    },
    /// The user's reply revealed a hidden slot.
    UserRevealed {
        /// Agent turn.
        step: u32,
        /// Slot name.
        slot: String,
    },
    /// The agent gave its final answer.
    Answered {
        /// Agent turn.
        step: u32,
        /// The answer text.
        text: String,
    },
    /// Any free text the agent wrote (outside tool calls).
    Said {
        /// Agent turn.
        step: u32,
        /// The text.
        text: String,
    },
    /// The episode was stopped by a marker.
    Stopped {
        /// Agent turn.
        step: u32,
        /// Which marker.
        marker: StopMarker,
    },
}

impl Event {
    /// The agent turn of the event.
    pub fn step(&self) -> u32 {
        match self {
            Event::ToolCall { step, .. }
            | Event::ToolResult { step, .. }
            | Event::ToolError { step, .. }
            | Event::AskedUser { step, .. }
            | Event::UserSaid { step, .. }
            | Event::UserRevealed { step, .. }
            | Event::Answered { step, .. }
            | Event::Said { step, .. }
            | Event::Stopped { step, .. } => *step,
        }
    }
}

/// What a rubric is evaluated on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Trajectory {
    /// Events in any order.
    pub events: Vec<Event>,
    /// The world state at the end (state-backed tools), if the task has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_state: Option<WorldState>,
    /// Whether the final state equals the task's expected state (`None`: nothing to compare).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_matches: Option<bool>,
    /// Number of agent turns.
    pub turns: u32,
}
