//! The MCP handler: one [`McpServer`] per session (one episode), over a shared [`World`].

use super::limits::{
    DEFAULT_K, DEFAULT_PAGE, MAX_ARGS_BYTES, MAX_K, MAX_PAGE, MAX_TEXT_CHARS, RESOURCE_PAGE,
};
use super::{SearchWorld, TaskWorld, World};
use crate::env::Step;
use crate::llm::ChatMessage;
use crate::retrieval::Document;
use crate::search::session::{Reply, SearchSession};
use crate::tooluse::env::{ToolEnv, openai_call};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, GetPromptRequestParams,
    GetPromptResponse, GetPromptResult, Implementation, JsonObject, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    Prompt, PromptMessage, ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, Resource, ResourceContents, ResourceTemplate, Role, ServerCapabilities,
    ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// URI scheme prefix of an article resource; the document id follows.
pub const ARTICLE_URI: &str = "rulegym://article/";
/// URI of the scored question's resource.
pub const QUESTION_URI: &str = "rulegym://question";
/// URI of the tool-use task's instruction resource.
pub const TASK_URI: &str = "rulegym://task";

/// Why a tool call was refused or failed; the client receives it as a tool result with
/// `isError: true` and this message.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The arguments do not fit the tool's input schema.
    #[error("invalid arguments for {tool}: {message}")]
    BadArguments {
        /// The tool.
        tool: String,
        /// What is wrong.
        message: String,
    },
    /// A text argument is longer than [`MAX_TEXT_CHARS`] (or the arguments than
    /// [`MAX_ARGS_BYTES`]).
    #[error("{field} is {len} long; the limit is {max}")]
    TooLong {
        /// The argument.
        field: &'static str,
        /// Its length (characters, or bytes of JSON for a task tool's arguments).
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A number argument is out of range.
    #[error("{field} must be in {min}..={max}, got {got}")]
    OutOfRange {
        /// The argument.
        field: &'static str,
        /// Smallest allowed.
        min: usize,
        /// Largest allowed.
        max: usize,
        /// What was given.
        got: usize,
    },
    /// `get_article` found no title equal to the one asked, even ignoring case.
    #[error("no article titled {title:?}{hint}")]
    NoArticle {
        /// The title asked for.
        title: String,
        /// Nearest titles by search, as text.
        hint: String,
    },
    /// The episode already ended (an answer, `finish`, a stop, or the turn cap).
    #[error("the episode is over ({0}); open a new MCP session for a new episode")]
    EpisodeOver(String),
    /// A text would be read by the tool-use environment as protocol markup.
    #[error("{field} must not contain {marker:?}")]
    ProtocolText {
        /// The argument.
        field: &'static str,
        /// The markup found.
        marker: &'static str,
    },
    /// The environment failed (the message of the library error).
    #[error("{0}")]
    Failed(String),
}

impl From<crate::Error> for ToolError {
    fn from(e: crate::Error) -> Self {
        ToolError::Failed(e.to_string())
    }
}

/// The state of one session's episode.
enum Episode {
    /// A search session: scored (a question; the search environment's own session, so its
    /// reward, scoring and turn cap) or free browsing (`None`).
    Search(Option<Box<SearchSession>>),
    /// A tool-use episode.
    Task(Box<ToolEnv>),
}

/// One MCP session over a shared world: a handler for rmcp's server (stdio: the one session;
/// streamable HTTP: one per session, built by the service factory).
pub struct McpServer {
    world: Arc<World>,
    episode: Arc<Mutex<Episode>>,
    calls: AtomicU64,
}

impl McpServer {
    /// A new session (a fresh episode) of `world`.
    pub fn new(world: Arc<World>) -> crate::Result<Self> {
        let episode = match world.as_ref() {
            World::Search(w) => Episode::Search(w.session()?.map(Box::new)),
            World::Task(t) => Episode::Task(Box::new(t.episode()?)),
        };
        Ok(McpServer {
            world,
            episode: Arc::new(Mutex::new(episode)),
            calls: AtomicU64::new(0),
        })
    }

    /// The tools this session offers.
    pub fn tools(&self) -> Vec<Tool> {
        match self.world.as_ref() {
            World::Search(w) => search_tools(w),
            World::Task(w) => task_tools(w),
        }
    }
}

fn schema(value: Value) -> Arc<JsonObject> {
    Arc::new(match value {
        Value::Object(map) => map,
        _ => Map::new(),
    })
}

fn text_schema(name: &str, description: &str) -> Arc<JsonObject> {
    schema(json!({
        "type": "object",
        "properties": {name: {"type": "string", "description": description,
                              "maxLength": MAX_TEXT_CHARS}},
        "required": [name],
        "additionalProperties": false,
    }))
}

fn search_tools(w: &SearchWorld) -> Vec<Tool> {
    let mut tools = vec![
        Tool::new(
            "search",
            format!(
                "Search the corpus (one article per person of the universe). Returns the top k \
                 passages, best first (k: 1 to {MAX_K}, default {DEFAULT_K})."
            ),
            schema(json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What to search for.",
                              "minLength": 1, "maxLength": MAX_TEXT_CHARS},
                    "k": {"type": "integer", "minimum": 1, "maximum": MAX_K,
                          "description": "Number of passages."},
                },
                "required": ["query"],
                "additionalProperties": false,
            })),
        ),
        Tool::new(
            "get_article",
            "The article about one person, by its exact title (the person's full name); a title \
             differing only in case also matches.",
            text_schema("title", "The article title (a person's full name)."),
        ),
        Tool::new(
            "list_people",
            format!(
                "The names of the universe's people, a page at a time (offset from 0, limit 1 to \
                 {MAX_PAGE}, default {DEFAULT_PAGE}); `contains` keeps names containing the text \
                 (ignoring case)."
            ),
            schema(json!({
                "type": "object",
                "properties": {
                    "offset": {"type": "integer", "minimum": 0},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE},
                    "contains": {"type": "string", "maxLength": MAX_TEXT_CHARS},
                },
                "additionalProperties": false,
            })),
        ),
    ];
    if w.question().is_some() {
        tools.push(Tool::new(
            "answer",
            "Give the final answer to the session's question (prompt `question`, resource \
             rulegym://question): all answers, separated by commas. Ends the episode and returns \
             its score (set F1 against the gold answers).",
            text_schema("answer", "The answer; several answers separated by commas."),
        ));
    }
    tools
}

fn task_tools(w: &TaskWorld) -> Vec<Tool> {
    let mut tools: Vec<Tool> = w
        .task()
        .task
        .tools
        .iter()
        .map(|t| {
            Tool::new(
                t.name.clone(),
                t.description.clone(),
                schema(t.parameters.clone()),
            )
        })
        .collect();
    tools.push(Tool::new(
        "ask_user",
        "Ask the user a question (one question per call); returns the user's reply.",
        text_schema("question", "The question for the user."),
    ));
    tools.push(Tool::new(
        "finish",
        "End the episode when the request is done: a short summary for the user. Returns the \
         rubric score of the whole episode.",
        text_schema("summary", "A short summary of what was done."),
    ));
    tools
}

fn parse<T: for<'de> Deserialize<'de>>(tool: &str, args: &JsonObject) -> Result<T, ToolError> {
    serde_json::from_value(Value::Object(args.clone())).map_err(|e| ToolError::BadArguments {
        tool: tool.to_owned(),
        message: e.to_string(),
    })
}

fn bounded(field: &'static str, text: &str) -> Result<(), ToolError> {
    let len = text.chars().count();
    if len > MAX_TEXT_CHARS {
        return Err(ToolError::TooLong {
            field,
            len,
            max: MAX_TEXT_CHARS,
        });
    }
    Ok(())
}

fn in_range(field: &'static str, got: usize, min: usize, max: usize) -> Result<(), ToolError> {
    if got < min || got > max {
        return Err(ToolError::OutOfRange {
            field,
            min,
            max,
            got,
        });
    }
    Ok(())
}

fn plain(field: &'static str, text: &str) -> Result<(), ToolError> {
    bounded(field, text)?;
    match crate::env::PROTOCOL_MARKERS
        .iter()
        .find(|m| text.contains(*m))
    {
        Some(marker) => Err(ToolError::ProtocolText { field, marker }),
        None => Ok(()),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    query: String,
    k: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TitleArgs {
    title: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PeopleArgs {
    offset: Option<usize>,
    limit: Option<usize>,
    contains: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AnswerArgs {
    answer: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct QuestionArgs {
    question: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SummaryArgs {
    summary: String,
}

/// A successful tool result: `text` as content, `structured` as structured content.
fn ok(text: String, structured: Value) -> CallToolResult {
    let mut r = CallToolResult::success(vec![ContentBlock::text(text)]);
    r.structured_content = Some(structured);
    r
}

fn tool_error(e: &ToolError) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(e.to_string())])
}

fn lock(m: &Mutex<Episode>) -> std::sync::MutexGuard<'_, Episode> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs a tool call of a search session (blocking: retrieval is CPU work).
fn call_search(
    w: &SearchWorld,
    episode: &Mutex<Episode>,
    name: &str,
    args: &JsonObject,
) -> Result<CallToolResult, ToolError> {
    let mut ep = lock(episode);
    let Episode::Search(session) = &mut *ep else {
        return Err(ToolError::Failed("not a search session".into()));
    };
    if let Some(s) = session.as_deref().filter(|s| s.done()) {
        return Err(over(s));
    }
    match name {
        "search" => {
            let a: SearchArgs = parse(name, args)?;
            bounded("query", &a.query)?;
            let k = a.k.unwrap_or(DEFAULT_K);
            in_range("k", k, 1, MAX_K)?;
            if a.query.trim().is_empty() {
                return Err(ToolError::BadArguments {
                    tool: name.into(),
                    message: "query is empty".into(),
                });
            }
            let (text, docs) = match session {
                Some(s) => match s.search(a.query.trim(), Some(k))? {
                    Reply::Passages { text, docs } => (text, docs),
                    other => return ended(s, other),
                },
                None => {
                    let docs: Vec<Document> =
                        w.search(a.query.trim(), k)?.into_iter().cloned().collect();
                    (crate::search::information(&docs), docs)
                }
            };
            let results: Vec<Value> = docs
                .iter()
                .map(|d| json!({"id": d.id, "title": d.title(), "contents": d.contents}))
                .collect();
            Ok(ok(text.trim().to_owned(), json!({ "results": results })))
        }
        "get_article" => {
            let a: TitleArgs = parse(name, args)?;
            bounded("title", &a.title)?;
            let found = match session {
                Some(s) => match s.get_article(a.title.trim()) {
                    Reply::Article(found) => found,
                    other => return ended(s, other),
                },
                None => w.article_by_title(a.title.trim()).cloned(),
            };
            match found {
                Some(d) => Ok(ok(
                    d.contents.clone(),
                    json!({"id": d.id, "title": d.title(), "contents": d.contents,
                           "uri": format!("{ARTICLE_URI}{}", d.id)}),
                )),
                None => {
                    let near = if a.title.trim().is_empty() {
                        Vec::new()
                    } else {
                        w.search(a.title.trim(), 3)?
                    };
                    let titles: Vec<&str> = near.iter().map(|d| d.title()).collect();
                    let hint = if titles.is_empty() {
                        String::new()
                    } else {
                        format!("; nearest titles: {}", titles.join(", "))
                    };
                    Err(ToolError::NoArticle {
                        title: a.title,
                        hint,
                    })
                }
            }
        }
        "list_people" => {
            let a: PeopleArgs = parse(name, args)?;
            let offset = a.offset.unwrap_or(0);
            let limit = a.limit.unwrap_or(DEFAULT_PAGE);
            in_range("limit", limit, 1, MAX_PAGE)?;
            let needle = match &a.contains {
                Some(c) => {
                    bounded("contains", c)?;
                    Some(c.to_lowercase())
                }
                None => None,
            };
            let matching: Vec<&String> = w
                .people()
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
            Ok(ok(
                text,
                json!({"people": page, "total": total, "offset": offset, "next_offset": next}),
            ))
        }
        "answer" => {
            let Some(s) = session else {
                return Err(ToolError::BadArguments {
                    tool: name.to_owned(),
                    message: "no such tool in this session".into(),
                });
            };
            let a: AnswerArgs = parse(name, args)?;
            bounded("answer", &a.answer)?;
            let reply = s.answer(&a.answer)?;
            ended(s, reply)
        }
        other => Err(ToolError::BadArguments {
            tool: other.to_owned(),
            message: "no such tool in this session".into(),
        }),
    }
}

/// Why a scored search session is over, as a tool error.
fn over(s: &SearchSession) -> ToolError {
    ToolError::EpisodeOver(format!("score {}", s.reward()))
}

/// The result of the call that ended a scored search session: the score of an answer (F1, exact
/// match, precision, recall), or why it ended without one (the turn cap, the token budget).
fn ended(s: &SearchSession, reply: Reply) -> Result<CallToolResult, ToolError> {
    let Reply::Ended { metadata } = reply else {
        return Err(over(s));
    };
    let num = |k: &str| metadata.get(k).and_then(Value::as_f64).unwrap_or(0.0);
    let (f1, em, precision, recall) = (num("f1"), num("em"), num("precision"), num("recall"));
    let reason = metadata.get("reason").and_then(Value::as_str);
    let text = match reason {
        Some(why) if !metadata.contains_key("f1") => {
            format!("Episode over ({why}). Score: {}.", s.reward())
        }
        _ => format!(
            "Episode over. Score (F1): {f1} (exact match {em}, precision {precision}, recall \
             {recall})."
        ),
    };
    Ok(ok(
        text,
        json!({"score": s.reward(), "f1": f1, "em": em, "precision": precision,
               "recall": recall, "done": true, "reason": reason}),
    ))
}

/// The MCP result of a tool-use step: the observations, and the score when it ended.
fn step_result(step: Step) -> CallToolResult {
    let text = step
        .observations
        .iter()
        .map(ChatMessage::content_str)
        .collect::<Vec<_>>()
        .join("\n");
    if step.done {
        let reason = step.metadata.get("reason").cloned().unwrap_or(Value::Null);
        let rubric = step.metadata.get("rubric").cloned().unwrap_or(Value::Null);
        let mut out = format!(
            "Episode over ({}). Score: {}.",
            reason.as_str().unwrap_or("ended"),
            step.reward
        );
        if !text.is_empty() {
            out = format!("{text}\n{out}");
        }
        return ok(
            out,
            json!({"score": step.reward, "done": true, "reason": reason, "rubric": rubric}),
        );
    }
    let is_error = serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| {
            v.as_object()
                .map(|o| o.len() == 1 && o.contains_key("error"))
        })
        .unwrap_or(false);
    if is_error {
        CallToolResult::error(vec![ContentBlock::text(text)])
    } else {
        CallToolResult::success(vec![ContentBlock::text(text)])
    }
}

fn over_reason(env: &ToolEnv) -> String {
    match env.result() {
        Some(r) => format!("score {}", r.reward),
        None => "ended".into(),
    }
}

/// Runs a tool call of a task session (blocking: simulators and the rubric engine).
fn call_task(
    w: &TaskWorld,
    episode: &Mutex<Episode>,
    call_id: String,
    name: &str,
    args: &JsonObject,
) -> Result<CallToolResult, ToolError> {
    let mut ep = lock(episode);
    let Episode::Task(env) = &mut *ep else {
        return Err(ToolError::Failed("not a task session".into()));
    };
    if env.is_done() {
        return Err(ToolError::EpisodeOver(over_reason(env)));
    }
    let message = match name {
        "ask_user" => {
            let a: QuestionArgs = parse(name, args)?;
            plain("question", &a.question)?;
            if a.question.trim().is_empty() {
                return Err(ToolError::BadArguments {
                    tool: name.into(),
                    message: "question is empty".into(),
                });
            }
            ChatMessage::text(
                crate::llm::Role::Assistant,
                format!("<question>{}</question>", a.question),
            )
        }
        "finish" => {
            let a: SummaryArgs = parse(name, args)?;
            plain("summary", &a.summary)?;
            ChatMessage::text(
                crate::llm::Role::Assistant,
                format!("<answer>{}</answer>", a.summary),
            )
        }
        tool => {
            debug_assert!(w.task().task.tool(tool).is_some());
            let value = Value::Object(args.clone());
            let len = value.to_string().len();
            if len > MAX_ARGS_BYTES {
                return Err(ToolError::TooLong {
                    field: "arguments (bytes of JSON)",
                    len,
                    max: MAX_ARGS_BYTES,
                });
            }
            ChatMessage {
                role: crate::llm::Role::Assistant,
                content: None,
                tool_calls: vec![openai_call(&call_id, tool, &value)],
                tool_call_id: None,
            }
        }
    };
    let step = env.step_message(&message)?;
    Ok(step_result(step))
}

impl McpServer {
    fn known_tool(&self, name: &str) -> bool {
        self.tools().iter().any(|t| t.name == name)
    }

    async fn call(&self, name: String, args: JsonObject) -> Result<CallToolResult, ErrorData> {
        if !self.known_tool(&name) {
            return Err(ErrorData::invalid_params(
                format!("unknown tool {name:?}"),
                Some(
                    json!({"tools": self.tools().iter().map(|t| t.name.clone()).collect::<Vec<_>>()}),
                ),
            ));
        }
        let world = self.world.clone();
        let episode = self.episode.clone();
        let n = self.calls.fetch_add(1, Ordering::Relaxed);
        let result = tokio::task::spawn_blocking(move || match world.as_ref() {
            World::Search(w) => call_search(w, &episode, &name, &args),
            World::Task(w) => call_task(w, &episode, format!("mcp_{n}"), &name, &args),
        })
        .await;
        Ok(match result {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => tool_error(&e),
            Err(join) => tool_error(&ToolError::Failed(format!("the tool call failed: {join}"))),
        })
    }

    fn question_text(&self) -> Option<String> {
        match self.world.as_ref() {
            World::Search(w) => w.question().map(|q| q.question.clone()),
            World::Task(w) => Some(w.task().task.instruction.clone()),
        }
    }

    fn instructions(&self) -> String {
        match self.world.as_ref() {
            World::Search(w) => {
                let mut s = String::from(
                    "A fictional universe of people, one article per person. Use `search` to \
                     find passages, `get_article` to read a person's article, `list_people` to \
                     browse names; articles are also resources (rulegym://article/{id}).",
                );
                if let Some(q) = w.question() {
                    s.push_str(&format!(
                        " Answer this question with the `answer` tool (all answers, separated \
                         by commas); it ends the episode and returns the score. Question: {}",
                        q.question
                    ));
                }
                s
            }
            World::Task(w) => format!(
                "{}\n\nThe user's request: {}\n\nCall the task's tools, `ask_user` to ask the \
                 user, and `finish` with a short summary when the request is done (it returns \
                 the score).",
                crate::tooluse::env::system_prompt(
                    &w.task().task,
                    crate::tooluse::env::Protocol::OpenAi
                ),
                w.task().task.instruction
            ),
        }
    }
}

fn cursor_offset(request: &Option<PaginatedRequestParams>) -> Result<usize, ErrorData> {
    match request.as_ref().and_then(|r| r.cursor.as_deref()) {
        None => Ok(0),
        Some(c) => c
            .parse::<usize>()
            .map_err(|_| ErrorData::invalid_params(format!("invalid cursor {c:?}"), None)),
    }
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .enable_prompts()
                .build(),
        )
        .with_server_info(Implementation::new("rulegym", env!("CARGO_PKG_VERSION")))
        .with_instructions(self.instructions())
    }

    /// Sessions hold an episode, so only the protocol versions with sessions (the
    /// `initialize` handshake) are offered: 2026-07-28 streamable HTTP is stateless.
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(
            &ProtocolVersion::LATEST_WITH_INITIALIZE,
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        self.call(request.name.into_owned(), args)
            .await
            .map(CallToolResponse::from)
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let offset = cursor_offset(&request)?;
        let mut resources = Vec::new();
        if offset == 0 {
            match self.world.as_ref() {
                World::Search(w) if w.question().is_some() => resources.push(
                    Resource::new(QUESTION_URI, "question")
                        .with_description("The question this session answers.")
                        .with_mime_type("text/plain"),
                ),
                World::Task(_) => resources.push(
                    Resource::new(TASK_URI, "task")
                        .with_description("The user's request of this tool-use task.")
                        .with_mime_type("text/plain"),
                ),
                World::Search(_) => {}
            }
        }
        let mut next = None;
        if let World::Search(w) = self.world.as_ref() {
            let docs = w.articles();
            let page = docs.iter().skip(offset).take(RESOURCE_PAGE);
            for d in page {
                resources.push(
                    Resource::new(format!("{ARTICLE_URI}{}", d.id), d.title())
                        .with_description(format!("The article about {}.", d.title()))
                        .with_mime_type("text/plain"),
                );
            }
            let end = offset.saturating_add(RESOURCE_PAGE);
            if end < docs.len() {
                next = Some(end.to_string());
            }
        }
        let mut result = ListResourcesResult::with_all_items(resources);
        result.next_cursor = next;
        Ok(result)
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let templates = match self.world.as_ref() {
            World::Search(_) => vec![
                ResourceTemplate::new(format!("{ARTICLE_URI}{{id}}"), "article")
                    .with_description("An article of the corpus by document id.")
                    .with_mime_type("text/plain"),
            ],
            World::Task(_) => Vec::new(),
        };
        Ok(ListResourceTemplatesResult::with_all_items(templates))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri;
        let text = match (self.world.as_ref(), uri.as_str()) {
            (World::Search(w), QUESTION_URI) if w.question().is_some() => self.question_text(),
            (World::Task(_), TASK_URI) => self.question_text(),
            (World::Search(w), u) => u
                .strip_prefix(ARTICLE_URI)
                .and_then(|id| w.article_by_id(id))
                .map(|d| d.contents.clone()),
            _ => None,
        };
        match text {
            Some(text) => {
                Ok(ReadResourceResult::new(vec![ResourceContents::text(text, uri)]).into())
            }
            None => Err(ErrorData::resource_not_found(
                format!("no resource {}", truncate(&uri, 200)),
                None,
            )),
        }
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let prompts = match self.world.as_ref() {
            World::Search(w) if w.question().is_some() => vec![Prompt::new(
                "question",
                Some("The question of this scored session, with how to answer it."),
                None,
            )],
            World::Task(_) => vec![Prompt::new(
                "task",
                Some("The user's request of this tool-use task, with how to work on it."),
                None,
            )],
            World::Search(_) => Vec::new(),
        };
        Ok(ListPromptsResult::with_all_items(prompts))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let known = matches!(
            (self.world.as_ref(), request.name.as_str()),
            (World::Search(w), "question") if w.question().is_some()
        ) || matches!(
            (self.world.as_ref(), request.name.as_str()),
            (World::Task(_), "task")
        );
        if !known {
            return Err(ErrorData::invalid_params(
                format!("unknown prompt {:?}", truncate(&request.name, 200)),
                None,
            ));
        }
        let text = self.instructions();
        Ok(
            GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)])
                .with_description(self.question_text().unwrap_or_default())
                .into(),
        )
    }
}

fn truncate(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}
