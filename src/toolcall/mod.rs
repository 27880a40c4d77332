//! The tool-call session: one episode of an environment driven by tool calls, defined once for
//! every protocol that serves it (MCP, OpenEnv, TRL's `environment_factory`, verifiers, verl,
//! SkyRL).
//!
//! A [`ToolSession`] lists its tools ([`SessionTool`]: name, description, JSON input schema), runs
//! `call(name, arguments)` to an [`Outcome`] (the text the agent sees, structured data, the
//! reward and whether the episode ended) or a typed [`ToolFault`] (nothing happened), and says
//! what the agent is told at the start ([`ToolSession::instructions`]). Three kinds:
//! - a **scored search** episode ([`search`]): `answer`, `get_article`, `search` over a question
//!   of a dataset, on the search environment's own [`SearchSession`] (its reward, answer scoring
//!   and turn cap);
//! - **browsing** a dataset (MCP without a question): `search` with `k`, `get_article`,
//!   `list_people`, no reward;
//! - a **tool-use task** ([`task`]): the task's own tools, `ask_user` and `finish`, played as
//!   assistant messages of the task's [`ToolEnv`](crate::tooluse::env::ToolEnv); the reward is
//!   the rubric score.
//!
//! A [`World`] holds what a server serves (a dataset's questions or a file of tasks) and starts
//! sessions from a [`ResetRequest`] (by id, split and index, seed, or round robin); it also lists
//! its tasks without gold answers. The protocol servers translate these types to their wire
//! formats and nothing more.
//!
//! Rules every kind follows, in this order: an unknown tool is [`ToolFault::UnknownTool`]; any
//! call after the episode ended is [`ToolFault::EpisodeOver`] (arguments are not read); bad
//! arguments are [`ToolFault::BadArguments`], [`ToolFault::TooLong`],
//! [`ToolFault::OutOfRange`] or [`ToolFault::ProtocolText`]. A fault takes no turn.

pub mod demo;
mod params;
pub mod search;
mod task;
mod world;

pub use params::{BuiltinTool, Param, ParamKind};
pub use task::BUILTIN_TOOLS;
pub use world::{
    FixedEpisode, ResetRequest, SearchWorld, TASK_SPLIT, TaskWorld, World, WorldError, WorldKind,
};

use crate::retrieval::SearchIndex;
use crate::search::session::SearchSession;
use crate::tooluse::env::ToolEnv;
use serde_json::{Map, Value};
use std::sync::Arc;

/// Bounds on what a call may ask for.
pub mod limits {
    /// Most passages one browsing `search` returns.
    pub const MAX_K: usize = 20;
    /// Passages a browsing `search` without `k` returns.
    pub const DEFAULT_K: usize = 3;
    /// Most people one `list_people` page holds.
    pub const MAX_PAGE: usize = 200;
    /// People per `list_people` page without `limit`.
    pub const DEFAULT_PAGE: usize = 50;
    /// Longest text argument (query, title, answer, question, summary), in characters.
    pub const MAX_TEXT_CHARS: usize = 4096;
    /// Largest arguments object of a task tool call, in bytes of JSON.
    pub const MAX_ARGS_BYTES: usize = 64 * 1024;
    /// Longest client-chosen episode id a server keeps with a session, in bytes.
    pub const MAX_EPISODE_ID_BYTES: usize = 256;
}

/// A tool as a session lists it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SessionTool {
    /// The tool's name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// JSON schema of its arguments object.
    pub input_schema: Map<String, Value>,
    /// What it returns (a docstring's `Returns:`; not part of MCP's or OpenEnv's listing).
    #[serde(skip)]
    pub returns: String,
}

/// What a tool call did.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The text the agent sees.
    pub text: String,
    /// The same result as data (passages, an article, a score), or `null`.
    pub data: Value,
    /// The tool ran but reports a failure to the agent (no article with that title, a task
    /// tool's `{"error": ...}` response); the turn was taken.
    pub is_error: bool,
    /// Whether the episode ended with this call.
    pub done: bool,
    /// The episode's reward: the exact reward once it ended, 0 before.
    pub reward: f64,
}

/// Why a tool call was not carried out; the episode is unchanged and no turn was taken.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolFault {
    /// The session has no tool of this name.
    #[error("unknown tool {name:?} (tools: {known})")]
    UnknownTool {
        /// The name asked for.
        name: String,
        /// The tools there are, comma-separated.
        known: String,
    },
    /// The episode already ended (an answer, `finish`, or the turn cap).
    #[error("the episode is over (score {reward}); start a new episode")]
    EpisodeOver {
        /// Its final reward.
        reward: f64,
    },
    /// The arguments do not fit the tool's schema: a missing, unknown or mistyped argument, an
    /// empty text where one is needed.
    #[error("{tool}: {message}")]
    BadArguments {
        /// The tool called.
        tool: String,
        /// What is wrong.
        message: String,
    },
    /// A text argument is longer than [`limits::MAX_TEXT_CHARS`] (or a task tool's arguments
    /// than [`limits::MAX_ARGS_BYTES`]).
    #[error("{field} is {len} long; the limit is {max}")]
    TooLong {
        /// The argument.
        field: String,
        /// Its length (characters, or bytes of JSON for a task tool's arguments).
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A number argument is out of range.
    #[error("{field} must be in {min}..={max}, got {got}")]
    OutOfRange {
        /// The argument.
        field: String,
        /// Smallest allowed.
        min: usize,
        /// Largest allowed.
        max: usize,
        /// What was given.
        got: i128,
    },
    /// A text holds markup an environment would read as another action
    /// ([`crate::env::PROTOCOL_MARKERS`]).
    #[error("{field} must not contain {marker:?}")]
    ProtocolText {
        /// The argument.
        field: String,
        /// The markup found.
        marker: &'static str,
    },
    /// The environment failed (an engine, retrieval or simulator error).
    #[error("{0}")]
    Failed(String),
}

impl ToolFault {
    /// OpenEnv's `error_type` of this fault.
    pub fn kind(&self) -> &'static str {
        match self {
            ToolFault::UnknownTool { .. } => "tool_not_found",
            ToolFault::BadArguments { .. }
            | ToolFault::TooLong { .. }
            | ToolFault::OutOfRange { .. }
            | ToolFault::ProtocolText { .. } => "invalid_args",
            ToolFault::EpisodeOver { .. } | ToolFault::Failed(_) => "execution_error",
        }
    }
}

impl From<crate::Error> for ToolFault {
    fn from(e: crate::Error) -> Self {
        match e {
            crate::Error::ProtocolMarkup { field, marker } => ToolFault::ProtocolText {
                field: field.to_owned(),
                marker,
            },
            crate::Error::Tool(fault) => fault,
            e => ToolFault::Failed(e.to_string()),
        }
    }
}

/// Which kind of episode a session plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionKind {
    /// A scored question of the search environment.
    Search,
    /// Browsing a dataset's articles, without a question or reward.
    Browse,
    /// A tool-use task.
    Task,
}

/// One episode driven by tool calls.
pub struct ToolSession {
    inner: Inner,
}

enum Inner {
    Search(Box<search::SearchCalls>),
    Task(Box<task::TaskCalls>),
}

impl ToolSession {
    /// A scored search episode: `session`'s question, answered with `answer`, `get_article` and
    /// `search`; `index` is the session's own (it names the nearest titles when an article is
    /// missing).
    pub fn search(session: SearchSession, index: Arc<SearchIndex>) -> Self {
        ToolSession {
            inner: Inner::Search(Box::new(search::SearchCalls::scored(session, index))),
        }
    }

    /// Browsing `index` (the articles of a universe whose people are `people`): `search` (with
    /// `k`), `get_article`, `list_people`; no question, no reward, no end.
    pub fn browse(index: Arc<SearchIndex>, people: Arc<Vec<String>>) -> Self {
        ToolSession {
            inner: Inner::Search(Box::new(search::SearchCalls::browse(index, people))),
        }
    }

    /// A tool-use episode of `env` (reset here), whose task is named `task_id`. The task's tools
    /// must not be named like the built-in ones ([`BUILTIN_TOOLS`]).
    pub fn task(env: ToolEnv, task_id: impl Into<String>) -> crate::Result<Self> {
        Ok(ToolSession {
            inner: Inner::Task(Box::new(task::TaskCalls::new(env, task_id.into())?)),
        })
    }

    /// The kind of episode.
    pub fn kind(&self) -> SessionKind {
        match &self.inner {
            Inner::Search(s) if s.is_scored() => SessionKind::Search,
            Inner::Search(_) => SessionKind::Browse,
            Inner::Task(_) => SessionKind::Task,
        }
    }

    /// The tools this session offers.
    pub fn tools(&self) -> Vec<SessionTool> {
        match &self.inner {
            Inner::Search(s) => s.tools(),
            Inner::Task(t) => t.tools(),
        }
    }

    /// Calls a tool: one turn of the episode. A fault leaves the episode as it was. The checks
    /// come in one order for every kind: the tool's name, then whether the episode goes on,
    /// then the arguments.
    pub fn call(&mut self, name: &str, args: &Map<String, Value>) -> Result<Outcome, ToolFault> {
        let offered = match &self.inner {
            Inner::Search(s) => s.has_tool(name),
            Inner::Task(t) => t.has_tool(name),
        };
        if !offered {
            let known: Vec<String> = self.tools().into_iter().map(|t| t.name).collect();
            return Err(ToolFault::UnknownTool {
                name: name.to_owned(),
                known: known.join(", "),
            });
        }
        if self.done() {
            return Err(ToolFault::EpisodeOver {
                reward: self.reward(),
            });
        }
        match &mut self.inner {
            Inner::Search(s) => s.call(name, args),
            Inner::Task(t) => t.call(name, args),
        }
    }

    /// Whether the episode has ended (never, when browsing).
    pub fn done(&self) -> bool {
        match &self.inner {
            Inner::Search(s) => s.done(),
            Inner::Task(t) => t.done(),
        }
    }

    /// The episode's reward: the exact reward once it ended, 0 before.
    pub fn reward(&self) -> f64 {
        match &self.inner {
            Inner::Search(s) => s.reward(),
            Inner::Task(t) => t.reward(),
        }
    }

    /// Calls that took a turn.
    pub fn turns(&self) -> usize {
        match &self.inner {
            Inner::Search(s) => s.turns(),
            Inner::Task(t) => t.turns(),
        }
    }

    /// The id of the question or task (none when browsing or for a question known only by its
    /// text).
    pub fn id(&self) -> Option<&str> {
        match &self.inner {
            Inner::Search(s) => s.question().map(|q| q.id.as_str()),
            Inner::Task(t) => Some(t.task_id()),
        }
    }

    /// The question, or the user's request of a task (none when browsing).
    pub fn prompt_text(&self) -> Option<String> {
        match &self.inner {
            Inner::Search(s) => s.question_text(),
            Inner::Task(t) => Some(t.instruction().to_owned()),
        }
    }

    /// What the agent is told at the start: the tools' use, and the question or request.
    pub fn instructions(&self) -> String {
        match &self.inner {
            Inner::Search(s) => s.instructions(),
            Inner::Task(t) => t.instructions(),
        }
    }

    /// The opening observation as data: the id, the question or request, `prompt`
    /// ([`ToolSession::instructions`]) and the kind's own fields (`split` and `max_turns` of a
    /// question; `messages`, the task's opening transcript).
    pub fn opening(&self) -> Value {
        match &self.inner {
            Inner::Search(s) => s.opening(),
            Inner::Task(t) => t.opening(),
        }
    }

    /// The episode's state: the id (`question_id` or `task_id`), `done` and `reward`.
    pub fn state(&self) -> Map<String, Value> {
        let mut m = Map::new();
        let key = match self.kind() {
            SessionKind::Task => "task_id",
            _ => "question_id",
        };
        m.insert(key.into(), self.id().into());
        m.insert("done".into(), self.done().into());
        m.insert("reward".into(), self.reward().into());
        m
    }
}
