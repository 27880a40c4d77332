//! The tool-use environment (SynthAgent's mock world with executable rubrics).
//!
//! Each agent turn is routed: `###STOP` / `###TRANSFER_TO_HUMAN` end the episode; `<answer>`
//! ends it; tool calls (OpenAI `tool_calls` or Hermes `<tool_call>{"name", "arguments"}</tool_call>`
//! text) go to the tools, each answered in order (OpenAI: `tool` messages; Hermes:
//! `<tool_response>` text); any other text (or a `<question>`) goes to the simulated user. Tool
//! arguments are validated against the tool's `parameters`: a violation, an unknown tool or a
//! tool-side failure is answered with `{"error": ...}` and becomes a `tool_error` fact. At the
//! end the trajectory's facts are scored by the task's rubric ([`crate::tooluse::rubric`]).
//!
//! The same parsing serves [`trajectory_from_messages`], which rebuilds the facts of a saved
//! conversation (state-backed tools are replayed), so `rulegym tools score` and the environment
//! agree.
//!
//! One file per job: `config` the options and wire protocol, `parse` an assistant turn read
//! into calls, answer and markers, `recorder` the world's side of an episode (state, facts,
//! revealed slots), `tool_env` the [`ToolEnv`] type, `step` its step logic, `prompt` the system
//! prompt, `messages` the reader of saved conversations, `episode` an agent model played
//! through one episode.

mod config;
mod episode;
mod messages;
mod parse;
mod prompt;
mod recorder;
mod step;
mod tool_env;

pub use config::{Protocol, ToolEnvConfig};
pub use episode::{Episode, play_episode};
pub use messages::trajectory_from_messages;
pub use parse::{ParsedTurn, openai_call, parse_assistant};
pub use prompt::system_prompt;
pub use recorder::same_state;
pub use tool_env::ToolEnv;

/// Environment id; bumped whenever outputs for a fixed input change.
pub const ENV_ID: &str = "tool-use-v1";
