//! One OpenEnv episode: the search environment or a tool-use task, driven by tool calls.
//!
//! Both kinds wrap the library's own environments, so the reward is rulegym's exact reward:
//! [`SearchEnv`] scores `answer` with the set F1 of [`crate::reward::score`]; [`ToolEnv`]
//! scores the trajectory with the task's rubric when `finish` is called or the turn cap is
//! reached. Every tool call is one turn.

use crate::env::Environment;
use crate::llm::{ChatMessage, Role};
use crate::search::session::{Reply, SearchSession};
use crate::tooluse::env::{ToolEnv, openai_call};
use serde_json::{Map, Value, json};

/// Longest text argument (query, title, answer, question, summary), in characters.
pub const MAX_TEXT_CHARS: usize = 4096;
/// Largest arguments object of a task tool call, in bytes of JSON.
pub const MAX_ARGS_BYTES: usize = 64 * 1024;

/// What the text of a search-episode tool says once the episode is over.
pub const EPISODE_OVER: &str =
    "The episode is over (an answer was given, or the turn limit is reached).";

/// A tool as OpenEnv lists it: name, description and JSON schema of its arguments.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ToolSpec {
    /// The tool's name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// JSON schema of its arguments object.
    pub input_schema: Value,
}

/// Why a tool call was not carried out; the episode is unchanged (OpenEnv's `ToolError`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ToolFault {
    /// The episode has no tool of this name.
    #[error("unknown tool {name:?} (tools: {known})")]
    NotFound {
        /// The name asked for.
        name: String,
        /// The tools there are, comma-separated.
        known: String,
    },
    /// The arguments do not fit the tool's schema or bounds.
    #[error("{tool}: {message}")]
    InvalidArgs {
        /// The tool called.
        tool: String,
        /// What is wrong.
        message: String,
    },
    /// The tool ran and failed (an engine or simulator error), or the episode is over.
    #[error("{0}")]
    Execution(String),
}

impl ToolFault {
    /// OpenEnv's `error_type` of this fault.
    pub fn kind(&self) -> &'static str {
        match self {
            ToolFault::NotFound { .. } => "tool_not_found",
            ToolFault::InvalidArgs { .. } => "invalid_args",
            ToolFault::Execution(_) => "execution_error",
        }
    }
}

/// What a tool call did: its text, and the episode's reward and end.
#[derive(Debug, Clone, PartialEq)]
pub struct CallOutcome {
    /// The tool's response.
    pub text: String,
    /// The episode's reward: the exact reward once it ended, 0 before.
    pub reward: f64,
    /// Whether this call ended the episode (or it had ended).
    pub done: bool,
}

/// A tool-use episode: the task's tools, `ask_user` and `finish`.
pub struct TaskEpisode {
    env: ToolEnv,
    task_id: String,
    calls: u64,
}

/// One episode of an OpenEnv session.
pub enum Episode {
    /// A question of a dataset, answered with the search tools.
    Search(Box<SearchSession>),
    /// A tool-use task.
    Task(Box<TaskEpisode>),
}

fn text_schema(field: &str, description: &str) -> Value {
    json!({
        "type": "object",
        "properties": {field: {"type": "string", "description": description,
                               "maxLength": MAX_TEXT_CHARS}},
        "required": [field],
        "additionalProperties": false,
    })
}

fn spec(name: &str, description: &str, field: &str, field_doc: &str) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: description.into(),
        input_schema: text_schema(field, field_doc),
    }
}

/// The tools of a search episode.
pub fn search_tools() -> Vec<ToolSpec> {
    vec![
        spec(
            "search",
            "Searches the encyclopedia for passages about a query; returns the best-matching \
             passages, each with its article title.",
            "query",
            "What to look for, such as a person's name and a relation.",
        ),
        spec(
            "get_article",
            "Reads the whole article with this title (a person's full name).",
            "title",
            "The article's title, such as a person's full name.",
        ),
        spec(
            "answer",
            "Gives the final answer and ends the episode; the reward is its set F1 against the \
             gold answers.",
            "answer",
            "The answer; several answers separated by commas.",
        ),
    ]
}

/// The one string argument `field` of a tool call: present, a string, bounded, and free of
/// protocol markup ([`crate::env::PROTOCOL_MARKERS`]).
fn text_arg(tool: &str, args: &Map<String, Value>, field: &str) -> Result<String, ToolFault> {
    let bad = |message: String| ToolFault::InvalidArgs {
        tool: tool.into(),
        message,
    };
    if let Some(extra) = args.keys().find(|k| k.as_str() != field) {
        return Err(bad(format!(
            "unknown argument {extra:?} (the tool takes {field:?})"
        )));
    }
    let value = match args.get(field) {
        Some(Value::String(s)) => s,
        Some(other) => return Err(bad(format!("{field} must be a string, got {other}"))),
        None => return Err(bad(format!("missing argument {field:?}"))),
    };
    let chars = value.chars().count();
    if chars > MAX_TEXT_CHARS {
        return Err(bad(format!(
            "{field} has {chars} characters; at most {MAX_TEXT_CHARS}"
        )));
    }
    if let Some(marker) = crate::env::protocol_marker(value) {
        return Err(bad(format!("{field} must not contain {marker}")));
    }
    Ok(value.clone())
}

/// One call of a search episode: the session does the work, this says it in OpenEnv's words.
fn call_search(
    s: &mut SearchSession,
    name: &str,
    args: &Map<String, Value>,
) -> Result<CallOutcome, ToolFault> {
    let field = match name {
        "search" => "query",
        "get_article" => "title",
        "answer" => "answer",
        _ => {
            return Err(ToolFault::NotFound {
                name: name.into(),
                known: "search, get_article, answer".into(),
            });
        }
    };
    let text = text_arg(name, args, field)?;
    let fault = |e: crate::Error| match e {
        crate::Error::ProtocolMarkup { .. } => ToolFault::InvalidArgs {
            tool: name.into(),
            message: e.to_string(),
        },
        e => ToolFault::Execution(e.to_string()),
    };
    let reply = match name {
        "search" => s.search(&text, None).map_err(fault)?,
        "get_article" => s.get_article(&text),
        _ => s.answer(&text).map_err(fault)?,
    };
    let text = match reply {
        Reply::Passages { text, .. } => {
            let passages = text.trim();
            passages
                .strip_prefix("<information>")
                .and_then(|p| p.strip_suffix("</information>"))
                .unwrap_or(passages)
                .trim()
                .to_owned()
        }
        Reply::Article(Some(doc)) => doc.contents,
        Reply::Article(None) => format!("No article is titled {text:?}."),
        Reply::Invalid { text } => text.trim().to_owned(),
        Reply::Ended { .. } if name == "answer" => "Answer recorded.".to_owned(),
        Reply::Ended { .. } | Reply::Over => EPISODE_OVER.to_owned(),
    };
    Ok(CallOutcome {
        text,
        reward: s.reward(),
        done: s.done(),
    })
}

impl TaskEpisode {
    /// A fresh episode of the task `task_id` played in `env` (reset here).
    pub fn new(mut env: ToolEnv, task_id: String) -> crate::Result<Self> {
        env.reset()?;
        Ok(TaskEpisode {
            env,
            task_id,
            calls: 0,
        })
    }

    fn tools(&self) -> Vec<ToolSpec> {
        let task = &self.env.task().task;
        let mut tools: Vec<ToolSpec> = task
            .tools
            .iter()
            .map(|t| ToolSpec {
                name: t.name.clone(),
                description: t.description.clone(),
                input_schema: if t.parameters.is_null() {
                    json!({"type": "object", "properties": {}})
                } else {
                    t.parameters.clone()
                },
            })
            .collect();
        tools.push(spec(
            "ask_user",
            "Asks the user one question about their request; returns the user's reply.",
            "question",
            "The question for the user.",
        ));
        tools.push(spec(
            "finish",
            "Ends the episode once the request is done; the reward is the task's rubric score.",
            "summary",
            "A short summary of what was done.",
        ));
        tools
    }

    fn reward(&self) -> f64 {
        self.env.result().map_or(0.0, |r| r.reward)
    }

    fn call(&mut self, name: &str, args: &Map<String, Value>) -> Result<CallOutcome, ToolFault> {
        let message = match name {
            "ask_user" => {
                let q = text_arg(name, args, "question")?;
                if q.trim().is_empty() {
                    return Err(ToolFault::InvalidArgs {
                        tool: name.into(),
                        message: "question is empty".into(),
                    });
                }
                ChatMessage::text(Role::Assistant, format!("<question>{q}</question>"))
            }
            "finish" => {
                let s = text_arg(name, args, "summary")?;
                ChatMessage::text(Role::Assistant, format!("<answer>{s}</answer>"))
            }
            tool if self.env.task().task.tool(tool).is_some() => {
                let value = Value::Object(args.clone());
                let len = value.to_string().len();
                if len > MAX_ARGS_BYTES {
                    return Err(ToolFault::InvalidArgs {
                        tool: tool.into(),
                        message: format!(
                            "arguments are {len} bytes of JSON; at most {MAX_ARGS_BYTES}"
                        ),
                    });
                }
                self.calls += 1;
                ChatMessage {
                    role: Role::Assistant,
                    content: None,
                    tool_calls: vec![openai_call(
                        &format!("openenv_{}", self.calls),
                        tool,
                        &value,
                    )],
                    tool_call_id: None,
                }
            }
            _ => {
                let known: Vec<String> = self.tools().into_iter().map(|t| t.name).collect();
                return Err(ToolFault::NotFound {
                    name: name.into(),
                    known: known.join(", "),
                });
            }
        };
        if self.env.is_done() {
            return Ok(CallOutcome {
                text: format!("The episode is over (score {}).", self.reward()),
                reward: self.reward(),
                done: true,
            });
        }
        let step = self
            .env
            .step_message(&message)
            .map_err(|e| ToolFault::Execution(e.to_string()))?;
        let text: Vec<&str> = step
            .observations
            .iter()
            .map(ChatMessage::content_str)
            .collect();
        let done = self.env.is_done();
        let text = match (text.join("\n"), done) {
            (t, true) if t.trim().is_empty() => {
                format!("Done (score {}).", self.reward())
            }
            (t, _) => t,
        };
        Ok(CallOutcome {
            text,
            reward: self.reward(),
            done,
        })
    }
}

impl Episode {
    /// The tools this episode offers.
    pub fn tools(&self) -> Vec<ToolSpec> {
        match self {
            Episode::Search(_) => search_tools(),
            Episode::Task(t) => t.tools(),
        }
    }

    /// Calls a tool: one turn of the episode. A fault leaves the episode as it was.
    pub fn call(
        &mut self,
        name: &str,
        args: &Map<String, Value>,
    ) -> Result<CallOutcome, ToolFault> {
        match self {
            Episode::Search(s) => call_search(s, name, args),
            Episode::Task(t) => t.call(name, args),
        }
    }

    /// Whether the episode has ended.
    pub fn done(&self) -> bool {
        match self {
            Episode::Search(s) => s.done(),
            Episode::Task(t) => t.env.is_done(),
        }
    }

    /// The episode's reward so far (the exact reward once it ended).
    pub fn reward(&self) -> f64 {
        match self {
            Episode::Search(s) => s.reward(),
            Episode::Task(t) => t.reward(),
        }
    }

    /// Tool calls made (turns taken).
    pub fn turns(&self) -> usize {
        match self {
            Episode::Search(s) => s.turns(),
            Episode::Task(t) => t
                .env
                .transcript()
                .iter()
                .filter(|m| m.role == Role::Assistant)
                .count(),
        }
    }

    /// What the agent sees at the start: the task's id, its text and the opening messages.
    pub fn opening(&self) -> Value {
        match self {
            Episode::Search(s) => json!({
                "question_id": s.question().map(|q| &q.id),
                "question": s.question().map(|q| &q.question),
                "prompt": format!(
                    "Answer the question about a fictional universe of people. Use `search` \
                     to find passages, `get_article` to read a person's article, and `answer` \
                     (all answers, separated by commas) to finish. Question: {}",
                    s.question().map_or("", |q| &q.question)
                ),
                "split": s.question().map(|q| q.split),
                "max_turns": s.max_turns(),
            }),
            Episode::Task(t) => json!({
                "task_id": t.task_id,
                "instruction": t.env.task().task.instruction,
                "prompt": t.env.system_prompt(),
                "messages": t.env.transcript(),
            }),
        }
    }

    /// The episode's own state fields (beside OpenEnv's `episode_id` and `step_count`).
    pub fn state_fields(&self) -> Map<String, Value> {
        let mut m = Map::new();
        match self {
            Episode::Search(s) => {
                m.insert("question_id".into(), json!(s.question().map(|q| &q.id)));
            }
            Episode::Task(t) => {
                m.insert("task_id".into(), json!(t.task_id));
            }
        }
        m.insert("done".into(), json!(self.done()));
        m.insert("reward".into(), json!(self.reward()));
        m
    }
}
