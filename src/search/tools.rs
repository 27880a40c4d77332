//! The search environment as tool calls, defined once: the tools a policy sees (`search`,
//! `get_article`, `answer`), their JSON schemas, the system prompt, and the observation text each
//! call returns. `rulegym.trl.SearchEnvironment` (TRL's `environment_factory`), the SFT
//! demonstrations of [`super::demo`] and the curriculum's prompts all take them from here, so a
//! demonstration shows a model exactly what the environment it is trained in will show it.
//!
//! [`call`] runs one call on a [`SearchSession`]: the session keeps the reward, the answer
//! scoring and the turn cap; this module only reads the arguments and renders the reply.

use super::session::{Reply, SearchSession};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// The system prompt of a tool-calling search episode.
pub const SYSTEM_PROMPT: &str = "You answer questions about a fictional universe by calling tools. \
Call get_article with a person's full name to read their article, or search to find passages. \
When you know the answer, call answer with it (several answers separated by commas).";

/// What every tool returns once the episode is over.
pub const OVER: &str = "The episode is over (an answer was given, or the turn limit is reached).";

/// What `answer` returns when the answer was scored.
pub const ANSWER_RECORDED: &str = "Answer recorded.";

/// One tool: its name, what it does, its (string) arguments and what it returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SearchTool {
    /// The function name.
    pub name: &'static str,
    /// What the tool does (the schema's `description`).
    pub description: &'static str,
    /// (argument, description); every argument is a required string.
    pub arguments: &'static [(&'static str, &'static str)],
    /// What it returns (the docstring's `Returns:`).
    pub returns: &'static str,
}

/// The tools of a search episode, by name (the order TRL lists an environment's methods in).
pub const TOOLS: [SearchTool; 3] = [
    SearchTool {
        name: "answer",
        description: "Gives the final answer and ends the episode.",
        arguments: &[("answer", "The answer; several answers separated by commas.")],
        returns: "A confirmation.",
    },
    SearchTool {
        name: "get_article",
        description: "Reads the whole article with this title (a person's name).",
        arguments: &[(
            "title",
            "The article's title, such as a person's full name.",
        )],
        returns: "The article's text, or a note that no article has this title.",
    },
    SearchTool {
        name: "search",
        description: "Searches the encyclopedia for passages about a query.",
        arguments: &[(
            "query",
            "What to look for, such as a person's name and a relation.",
        )],
        returns: "The best-matching passages, each with its article title.",
    },
];

/// A tool's OpenAI function schema. Its fields serialise in the order
/// `transformers.utils.get_json_schema` writes them, so a chat template renders a row's `tools`
/// exactly as it renders the environment's methods (JSON key order is part of the prompt).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolSchema {
    /// Always `"function"`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The function.
    pub function: FunctionSchema,
}

/// The `function` of a [`ToolSchema`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionSchema {
    /// The function name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// Its arguments.
    pub parameters: Parameters,
    /// What it returns.
    #[serde(rename = "return")]
    pub returns: Returns,
}

/// The `parameters` of a [`FunctionSchema`]: an object of string arguments, all required.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Parameters {
    /// Always `"object"`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Each argument's type and description.
    pub properties: BTreeMap<String, Returns>,
    /// The required arguments.
    pub required: Vec<String>,
}

/// A type and its description (an argument, or the return value).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Returns {
    /// The JSON type.
    #[serde(rename = "type")]
    pub kind: String,
    /// What it is.
    pub description: String,
}

impl SearchTool {
    /// The OpenAI function schema, exactly as `transformers.utils.get_json_schema` renders the
    /// Python method this tool becomes (what TRL puts in the chat template's `tools`).
    pub fn schema(&self) -> ToolSchema {
        let string = |description: &str| Returns {
            kind: "string".into(),
            description: description.into(),
        };
        ToolSchema {
            kind: "function".into(),
            function: FunctionSchema {
                name: self.name.into(),
                description: self.description.into(),
                parameters: Parameters {
                    kind: "object".into(),
                    properties: self
                        .arguments
                        .iter()
                        .map(|(name, description)| ((*name).to_owned(), string(description)))
                        .collect(),
                    required: self
                        .arguments
                        .iter()
                        .map(|(name, _)| (*name).to_owned())
                        .collect(),
                },
                returns: string(self.returns),
            },
        }
    }
}

/// The schemas of [`TOOLS`], in order (TRL's: by name).
pub fn schemas() -> Vec<ToolSchema> {
    TOOLS.iter().map(SearchTool::schema).collect()
}

/// A call the tools cannot run: the message is what a policy is told.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// No tool has this name.
    #[error("unknown tool {0:?} (search, get_article, answer)")]
    UnknownTool(String),
    /// A required argument is missing or not a string.
    #[error("{tool}: argument {argument:?} must be a string")]
    Argument {
        /// The tool.
        tool: &'static str,
        /// The argument.
        argument: &'static str,
    },
    /// An argument this tool does not take.
    #[error("{tool}: unexpected argument {argument:?}")]
    Unexpected {
        /// The tool.
        tool: &'static str,
        /// The argument given.
        argument: String,
    },
}

/// The passages of a search as a tool returns them: the environment's `<information>` block
/// without its wrapper.
fn passages(text: &str) -> String {
    let text = text.trim();
    let text = text.strip_prefix("<information>").unwrap_or(text);
    text.strip_suffix("</information>")
        .unwrap_or(text)
        .trim()
        .to_owned()
}

/// What a tool returns for a reply of the session.
fn observe(tool: &SearchTool, reply: Reply, argument: &str) -> String {
    match (tool.name, reply) {
        (_, Reply::Over) => OVER.to_owned(),
        ("answer", Reply::Ended { .. }) => ANSWER_RECORDED.to_owned(),
        (_, Reply::Ended { .. }) => OVER.to_owned(),
        (_, Reply::Passages { text, .. }) => passages(&text),
        (_, Reply::Invalid { text }) => text.trim().to_owned(),
        (_, Reply::Article(Some(doc))) => doc.contents,
        (_, Reply::Article(None)) => format!("No article is titled '{argument}'."),
    }
}

/// Runs the call `name(arguments)` on `session` and returns what the tool shows the policy. A
/// call after the episode ended returns [`OVER`] and changes nothing. Unknown tools and bad
/// arguments are [`CallError`]s (inside [`crate::Error::ToolCall`]) and take no turn; so is an
/// argument holding protocol markup ([`crate::Error::ProtocolMarkup`]).
pub fn call(
    session: &mut SearchSession,
    name: &str,
    arguments: &Map<String, Value>,
) -> crate::Result<String> {
    let tool = TOOLS
        .iter()
        .find(|t| t.name == name)
        .ok_or_else(|| CallError::UnknownTool(name.to_owned()))?;
    let (argument, _) = tool.arguments[0];
    if let Some(extra) = arguments.keys().find(|k| k.as_str() != argument) {
        return Err(CallError::Unexpected {
            tool: tool.name,
            argument: extra.clone(),
        }
        .into());
    }
    let text = arguments
        .get(argument)
        .and_then(Value::as_str)
        .ok_or(CallError::Argument {
            tool: tool.name,
            argument,
        })?;
    if session.done() {
        return Ok(OVER.to_owned());
    }
    let reply = match tool.name {
        "search" => session.search(text, None)?,
        "get_article" => session.get_article(text.trim()),
        _ => session.answer(text)?,
    };
    Ok(observe(tool, reply, text))
}
