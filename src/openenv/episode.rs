//! One OpenEnv episode: the search environment or a tool-use task, driven by tool calls.
//!
//! Both kinds wrap the library's own environments, so the reward is rulegym's exact reward:
//! [`SearchEnv`] scores `answer` with the set F1 of [`crate::reward::score`]; [`ToolEnv`]
//! scores the trajectory with the task's rubric when `finish` is called or the turn cap is
//! reached. Every tool call is one turn.

use crate::env::Environment;
use crate::llm::ChatMessage;
use crate::question::Question;
use crate::retrieval::SearchIndex;
use crate::search::SearchEnv;
use crate::tooluse::env::{ToolEnv, openai_call};
use serde_json::{Map, Value, json};
use std::sync::Arc;

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

/// A search episode over tool calls: `search`, `get_article`, `answer`.
pub struct SearchEpisode {
    env: SearchEnv,
    index: Arc<SearchIndex>,
    question: Question,
    max_turns: usize,
    turns: usize,
    done: bool,
    reward: f64,
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
    Search(Box<SearchEpisode>),
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
    if let Some(marker) = crate::env::PROTOCOL_MARKERS
        .iter()
        .find(|m| value.contains(*m))
    {
        return Err(bad(format!("{field} must not contain {marker}")));
    }
    Ok(value.clone())
}

impl SearchEpisode {
    /// A fresh episode of `question` in `env` (reset here); `index` answers `get_article`.
    pub fn new(
        mut env: SearchEnv,
        index: Arc<SearchIndex>,
        question: Question,
        max_turns: usize,
    ) -> crate::Result<Self> {
        env.reset()?;
        Ok(SearchEpisode {
            env,
            index,
            question,
            max_turns,
            turns: 0,
            done: false,
            reward: 0.0,
        })
    }

    /// The question being answered.
    pub fn question(&self) -> &Question {
        &self.question
    }

    /// Counts one tool call against the turn cap; false once the episode is over.
    fn turn(&mut self) -> bool {
        if self.done {
            return false;
        }
        if self.turns >= self.max_turns {
            self.done = true;
            return false;
        }
        self.turns += 1;
        true
    }

    fn outcome(&self, text: String) -> CallOutcome {
        CallOutcome {
            text,
            reward: self.reward,
            done: self.done,
        }
    }

    fn call(&mut self, name: &str, args: &Map<String, Value>) -> Result<CallOutcome, ToolFault> {
        let (field, tag) = match name {
            "search" => ("query", Some("search")),
            "get_article" => ("title", None),
            "answer" => ("answer", Some("answer")),
            _ => {
                return Err(ToolFault::NotFound {
                    name: name.into(),
                    known: "search, get_article, answer".into(),
                });
            }
        };
        let text = text_arg(name, args, field)?;
        if !self.turn() {
            return Ok(self.outcome(EPISODE_OVER.into()));
        }
        let Some(tag) = tag else {
            let body = match self.index.article(&text) {
                Some(doc) => doc.contents.clone(),
                None => format!("No article is titled {text:?}."),
            };
            return Ok(self.outcome(body));
        };
        let step = self
            .env
            .step(&format!("<{tag}>{text}</{tag}>"))
            .map_err(|e| ToolFault::Execution(e.to_string()))?;
        if step.done {
            self.done = true;
            self.reward = step.reward;
            let text = if tag == "answer" {
                "Answer recorded.".to_owned()
            } else {
                EPISODE_OVER.to_owned()
            };
            return Ok(self.outcome(text));
        }
        let observed: String = step
            .observations
            .iter()
            .map(|m| m.content.as_str())
            .collect();
        let passages = observed.trim();
        let passages = passages
            .strip_prefix("<information>")
            .and_then(|p| p.strip_suffix("</information>"))
            .unwrap_or(passages)
            .trim();
        Ok(self.outcome(passages.to_owned()))
    }
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
                ChatMessage::text("assistant", format!("<question>{q}</question>"))
            }
            "finish" => {
                let s = text_arg(name, args, "summary")?;
                ChatMessage::text("assistant", format!("<answer>{s}</answer>"))
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
                    role: "assistant".into(),
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
            .map(|m| m.content.as_str())
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
            Episode::Search(s) => s.call(name, args),
            Episode::Task(t) => t.call(name, args),
        }
    }

    /// Whether the episode has ended.
    pub fn done(&self) -> bool {
        match self {
            Episode::Search(s) => s.done,
            Episode::Task(t) => t.env.is_done(),
        }
    }

    /// The episode's reward so far (the exact reward once it ended).
    pub fn reward(&self) -> f64 {
        match self {
            Episode::Search(s) => s.reward,
            Episode::Task(t) => t.reward(),
        }
    }

    /// Tool calls made (turns taken).
    pub fn turns(&self) -> usize {
        match self {
            Episode::Search(s) => s.turns,
            Episode::Task(t) => t
                .env
                .transcript()
                .iter()
                .filter(|m| m.role == "assistant")
                .count(),
        }
    }

    /// What the agent sees at the start: the task's id, its text and the opening messages.
    pub fn opening(&self) -> Value {
        match self {
            Episode::Search(s) => json!({
                "question_id": s.question.id,
                "question": s.question.question,
                "prompt": format!(
                    "Answer the question about a fictional universe of people. Use `search` \
                     to find passages, `get_article` to read a person's article, and `answer` \
                     (all answers, separated by commas) to finish. Question: {}",
                    s.question.question
                ),
                "split": s.question.split,
                "max_turns": s.max_turns,
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
                m.insert("question_id".into(), json!(s.question.id));
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
