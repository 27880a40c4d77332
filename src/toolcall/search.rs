//! The search tools, defined once: a scored episode's `answer`, `get_article` and `search` (what
//! MCP and OpenEnv serve, what `rulegym.trl.SearchEnvironment` exposes to TRL and what the SFT
//! demonstrations of [`super::demo`] call), browsing's `search` with `k` and `list_people`, the
//! system prompt, and the text each call returns. The session keeps the reward, the answer
//! scoring and the turn cap ([`SearchSession`]); this module reads the arguments and renders the
//! replies.

use super::limits::{DEFAULT_K, DEFAULT_PAGE, MAX_K, MAX_PAGE};
use super::params::{BuiltinTool, Param, ParamKind, text};
use super::{Outcome, SessionTool, ToolFault};
use crate::question::Question;
use crate::retrieval::{Document, SearchIndex};
use crate::search::session::{Reply, SearchSession};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The system prompt of a tool-calling search episode.
pub const SYSTEM_PROMPT: &str = "You answer questions about a fictional universe by calling tools. \
Call get_article with a person's full name to read their article, or search to find passages. \
When you know the answer, call answer with it (several answers separated by commas).";

/// What browsing sessions are told.
const BROWSE_PROMPT: &str = "A fictional universe of people, one article per person. Use \
`search` to find passages, `get_article` to read a person's article, `list_people` to browse \
names.";

const QUERY: Param = Param {
    name: "query",
    description: "What to look for, such as a person's name and a relation.",
    kind: ParamKind::Text { nonblank: true },
    required: true,
};

const GET_ARTICLE: BuiltinTool = BuiltinTool {
    name: "get_article",
    description: "Reads the whole article with this title (a person's name).",
    params: &[text(
        "title",
        "The article's title, such as a person's full name.",
    )],
    returns: "The article's text, or a note that no article has this title.",
};

/// The tools of a scored search episode, by name (the order TRL lists an environment's methods
/// in).
pub const TOOLS: [BuiltinTool; 3] = [
    BuiltinTool {
        name: "answer",
        description: "Gives the final answer and ends the episode.",
        params: &[text(
            "answer",
            "The answer; several answers separated by commas.",
        )],
        returns: "The score of the answer.",
    },
    GET_ARTICLE,
    BuiltinTool {
        name: "search",
        description: "Searches the encyclopedia for passages about a query.",
        params: &[QUERY],
        returns: "The best-matching passages, each with its article title.",
    },
];

/// The tools of a browsing session.
pub const BROWSE_TOOLS: [BuiltinTool; 3] = [
    BuiltinTool {
        name: "search",
        description: "Searches the encyclopedia for passages about a query; returns the top k \
                      passages, best first.",
        params: &[
            QUERY,
            Param {
                name: "k",
                description: "Number of passages (default 3).",
                kind: ParamKind::Count { min: 1, max: MAX_K },
                required: false,
            },
        ],
        returns: "The best-matching passages, each with its article title.",
    },
    GET_ARTICLE,
    BuiltinTool {
        name: "list_people",
        description: "The names of the universe's people, a page at a time; `contains` keeps \
                      the names containing the text (ignoring case).",
        params: &[
            Param {
                name: "offset",
                description: "Position of the page's first name among the matching names, \
                              from 0.",
                kind: ParamKind::Count {
                    min: 0,
                    max: usize::MAX,
                },
                required: false,
            },
            Param {
                name: "limit",
                description: "Names per page (default 50).",
                kind: ParamKind::Count {
                    min: 1,
                    max: MAX_PAGE,
                },
                required: false,
            },
            Param {
                name: "contains",
                description: "Keep only the names containing this text (ignoring case).",
                kind: ParamKind::Text { nonblank: false },
                required: false,
            },
        ],
        returns: "One name per line.",
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

/// The OpenAI function schema of a scored search tool, exactly as
/// `transformers.utils.get_json_schema` renders the Python method it becomes (what TRL puts in
/// the chat template's `tools`): every argument a required string.
pub fn trl_schema(tool: &BuiltinTool) -> ToolSchema {
    let string = |description: &str| Returns {
        kind: "string".into(),
        description: description.into(),
    };
    ToolSchema {
        kind: "function".into(),
        function: FunctionSchema {
            name: tool.name.into(),
            description: tool.description.into(),
            parameters: Parameters {
                kind: "object".into(),
                properties: tool
                    .params
                    .iter()
                    .map(|p| (p.name.to_owned(), string(p.description)))
                    .collect(),
                required: tool.params.iter().map(|p| p.name.to_owned()).collect(),
            },
            returns: string(tool.returns),
        },
    }
}

/// The TRL schemas of [`TOOLS`], in order (TRL's: by name).
pub fn schemas() -> Vec<ToolSchema> {
    TOOLS.iter().map(trl_schema).collect()
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

fn doc_data(d: &Document) -> Value {
    json!({"id": d.id, "title": d.title(), "contents": d.contents})
}

fn outcome(text: String, data: Value, is_error: bool) -> Outcome {
    Outcome {
        text,
        data,
        is_error,
        done: false,
        reward: 0.0,
    }
}

/// A scored episode, or browsing (no question, no end).
enum Mode {
    Scored(Box<SearchSession>),
    Browse {
        people: Arc<Vec<String>>,
        calls: usize,
    },
}

/// The search tools over one session.
pub(super) struct SearchCalls {
    index: Arc<SearchIndex>,
    mode: Mode,
}

impl SearchCalls {
    pub(super) fn scored(session: SearchSession, index: Arc<SearchIndex>) -> Self {
        SearchCalls {
            index,
            mode: Mode::Scored(Box::new(session)),
        }
    }

    pub(super) fn browse(index: Arc<SearchIndex>, people: Arc<Vec<String>>) -> Self {
        SearchCalls {
            index,
            mode: Mode::Browse { people, calls: 0 },
        }
    }

    pub(super) fn is_scored(&self) -> bool {
        matches!(self.mode, Mode::Scored(_))
    }

    fn table(&self) -> &'static [BuiltinTool] {
        match self.mode {
            Mode::Scored(_) => &TOOLS,
            Mode::Browse { .. } => &BROWSE_TOOLS,
        }
    }

    pub(super) fn tools(&self) -> Vec<SessionTool> {
        self.table().iter().map(BuiltinTool::spec).collect()
    }

    pub(super) fn has_tool(&self, name: &str) -> bool {
        self.table().iter().any(|t| t.name == name)
    }

    pub(super) fn done(&self) -> bool {
        matches!(&self.mode, Mode::Scored(s) if s.done())
    }

    pub(super) fn reward(&self) -> f64 {
        match &self.mode {
            Mode::Scored(s) => s.reward(),
            Mode::Browse { .. } => 0.0,
        }
    }

    pub(super) fn turns(&self) -> usize {
        match &self.mode {
            Mode::Scored(s) => s.turns(),
            Mode::Browse { calls, .. } => *calls,
        }
    }

    pub(super) fn question(&self) -> Option<&Question> {
        match &self.mode {
            Mode::Scored(s) => s.question(),
            Mode::Browse { .. } => None,
        }
    }

    pub(super) fn question_text(&self) -> Option<String> {
        match &self.mode {
            Mode::Scored(s) => Some(s.question_text().to_owned()),
            Mode::Browse { .. } => None,
        }
    }

    pub(super) fn instructions(&self) -> String {
        match &self.mode {
            Mode::Scored(s) => format!("{SYSTEM_PROMPT}\n\nQuestion: {}", s.question_text()),
            Mode::Browse { .. } => BROWSE_PROMPT.to_owned(),
        }
    }

    pub(super) fn opening(&self) -> Value {
        let q = self.question();
        json!({
            "question_id": q.map(|q| &q.id),
            "question": self.question_text(),
            "prompt": self.instructions(),
            "split": q.map(|q| q.split),
            "max_turns": match &self.mode {
                Mode::Scored(s) => Some(s.max_turns()),
                Mode::Browse { .. } => None,
            },
        })
    }

    pub(super) fn call(
        &mut self,
        name: &str,
        args: &Map<String, Value>,
    ) -> Result<Outcome, ToolFault> {
        // `ToolSession::call` checked the name and that the episode goes on.
        let tool = self
            .table()
            .iter()
            .find(|t| t.name == name)
            .ok_or_else(|| ToolFault::Failed(format!("no tool {name:?}")))?;
        let args = tool.parse(args)?;
        let mut out = match &mut self.mode {
            Mode::Scored(s) => {
                let reply = match name {
                    "search" => s.search(args.required("query").trim(), None)?,
                    "get_article" => s.get_article(args.required("title").trim()),
                    _ => s.answer(args.required("answer"))?,
                };
                match reply {
                    Reply::Passages { text, docs } => outcome(
                        passages(&text),
                        json!({"results": docs.iter().map(doc_data).collect::<Vec<_>>()}),
                        false,
                    ),
                    Reply::Article(Some(d)) => outcome(d.contents.clone(), doc_data(&d), false),
                    Reply::Article(None) => missing_article(&self.index, args.required("title"))?,
                    Reply::Invalid { text } => outcome(text.trim().to_owned(), Value::Null, false),
                    Reply::Ended { metadata } => ended(&metadata, s.reward()),
                    Reply::Over => {
                        return Err(ToolFault::EpisodeOver { reward: s.reward() });
                    }
                }
            }
            Mode::Browse { people, calls } => {
                *calls += 1;
                match name {
                    "search" => {
                        let k = args.count("k").unwrap_or(DEFAULT_K);
                        let docs = search(&self.index, args.required("query").trim(), k)?;
                        outcome(
                            passages(&crate::search::information(&docs)),
                            json!({"results": docs.iter().map(|d| doc_data(d)).collect::<Vec<_>>()}),
                            false,
                        )
                    }
                    "get_article" => {
                        let title = args.required("title").trim();
                        match self.index.article(title) {
                            Some(d) => outcome(d.contents.clone(), doc_data(d), false),
                            None => missing_article(&self.index, title)?,
                        }
                    }
                    _ => list_people(
                        people,
                        args.count("offset").unwrap_or(0),
                        args.count("limit").unwrap_or(DEFAULT_PAGE),
                        args.text("contains"),
                    ),
                }
            }
        };
        out.done = self.done();
        out.reward = self.reward();
        Ok(out)
    }
}

/// The top-`k` articles for `query`, best first (`k` clamped to the corpus size): the index's
/// exact search, as the search environment's retriever runs it.
fn search<'a>(index: &'a SearchIndex, query: &str, k: usize) -> crate::Result<Vec<&'a Document>> {
    let docs = index.docs();
    if docs.is_empty() {
        return Ok(Vec::new());
    }
    let hits = index.search(&[query], k.clamp(1, docs.len()))?;
    Ok(hits
        .into_iter()
        .next()
        .unwrap_or_default()
        .into_iter()
        .map(|h| &docs[h.index as usize])
        .collect())
}

/// A `get_article` that found no title: says so, with the nearest titles by search.
fn missing_article(index: &SearchIndex, title: &str) -> Result<Outcome, ToolFault> {
    let mut text = format!("No article is titled '{title}'.");
    let near: Vec<&str> = if title.trim().is_empty() {
        Vec::new()
    } else {
        search(index, title.trim(), 3)?
            .into_iter()
            .map(Document::title)
            .collect()
    };
    if !near.is_empty() {
        text.push_str(&format!(" Nearest titles: {}.", near.join(", ")));
    }
    Ok(outcome(text, json!({"nearest": near}), true))
}

/// The reply of the call that ended a scored episode: the score of an answer (F1, exact match,
/// precision, recall), or why it ended without one (the turn cap, the token budget).
fn ended(metadata: &BTreeMap<String, Value>, reward: f64) -> Outcome {
    let num = |k: &str| metadata.get(k).and_then(Value::as_f64).unwrap_or(0.0);
    let (f1, em, precision, recall) = (num("f1"), num("em"), num("precision"), num("recall"));
    let reason = metadata.get("reason").and_then(Value::as_str);
    let text = match reason {
        Some(why) if !metadata.contains_key("f1") => {
            format!("Episode over ({why}). Score: {reward}.")
        }
        _ => format!(
            "Episode over. Score (F1): {f1} (exact match {em}, precision {precision}, recall \
             {recall})."
        ),
    };
    outcome(
        text,
        json!({"score": reward, "f1": f1, "em": em, "precision": precision,
               "recall": recall, "done": true, "reason": reason}),
        false,
    )
}

/// One `list_people` page.
fn list_people(people: &[String], offset: usize, limit: usize, contains: Option<&str>) -> Outcome {
    let needle = contains.map(str::to_lowercase);
    let matching: Vec<&String> = people
        .iter()
        .filter(|p| needle.as_ref().is_none_or(|n| p.to_lowercase().contains(n)))
        .collect();
    let total = matching.len();
    let page: Vec<&String> = matching.into_iter().skip(offset).take(limit).collect();
    let next = (offset.saturating_add(page.len()) < total).then(|| offset + page.len());
    let text = page
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    outcome(
        text,
        json!({"people": page, "total": total, "offset": offset, "next_offset": next}),
        false,
    )
}
