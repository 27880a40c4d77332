//! The step API of rulegym's multi-turn text environments: the search environment
//! ([`crate::search`], Search-R1 protocol) and the tool-use environment
//! ([`crate::tooluse::env`]) share [`Environment`], [`Step`], [`Span`] and the metadata
//! conventions, so one trainer adapter and one conformance test serve both; [`tokens`] counts
//! the tokens their budgets are in. Messages are the crate's one chat type, [`crate::llm::ChatMessage`].

pub mod tokens;

use crate::llm::ChatMessage;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The first of [`PROTOCOL_MARKERS`] that `text` contains, if any.
pub fn protocol_marker(text: &str) -> Option<&'static str> {
    PROTOCOL_MARKERS.iter().copied().find(|m| text.contains(m))
}

/// Markup the environments parse out of assistant text (the search environment's tags, the
/// tool-use environment's blocks and stop markers): text that a tool call passes into an
/// episode may not contain it, or one argument could act as another action.
pub const PROTOCOL_MARKERS: [&str; 10] = [
    "<search>",
    "</search>",
    "<answer>",
    "</answer>",
    "<question>",
    "</question>",
    "<tool_call>",
    "</tool_call>",
    "###STOP",
    "###TRANSFER_TO_HUMAN",
];

/// A byte range `[start, end)` of environment-written text inside the text a step appends, so a
/// trainer can mask it out of the loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Span {
    /// First byte.
    pub start: usize,
    /// One past the last byte.
    pub end: usize,
}

/// The result of one `step(action)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// New messages for the agent's context (empty when the episode ended without a reply).
    pub observations: Vec<ChatMessage>,
    /// Reward of this step (non-zero only at the end of an episode, by convention).
    pub reward: f64,
    /// Whether the episode is over.
    pub done: bool,
    /// Turn number, counts and whatever the environment reports (JSON values, sorted keys).
    pub metadata: BTreeMap<String, serde_json::Value>,
    /// Spans of environment text within the concatenated observation contents.
    pub env_spans: Vec<Span>,
}

/// A multi-turn environment. `Send`, cheap to construct per trajectory.
pub trait Environment: Send {
    /// Starts the episode: the chat prompt the agent sees.
    fn reset(&mut self) -> crate::Result<Vec<ChatMessage>>;
    /// Applies the agent's action text; never panics on any input.
    fn step(&mut self, action: &str) -> crate::Result<Step>;
}
