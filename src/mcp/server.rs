//! The MCP handler: one [`McpServer`] per session (one episode), over a shared [`World`].

use super::World;
use super::error::ToolError;
use super::limits::RESOURCE_PAGE;
use super::search_tools::{call_search, search_tools};
use super::task_tools::{call_task, task_tools};
use crate::search::session::SearchSession;
use crate::tooluse::env::ToolEnv;
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
use serde_json::{Value, json};
use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// URI scheme prefix of an article resource; the document id follows.
pub const ARTICLE_URI: &str = "rulegym://article/";
/// URI of the scored question's resource.
pub const QUESTION_URI: &str = "rulegym://question";
/// URI of the tool-use task's instruction resource.
pub const TASK_URI: &str = "rulegym://task";

/// The state of one session's episode.
pub(super) enum Episode {
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

/// A successful tool result: `text` as content, `structured` as structured content.
pub(super) fn ok(text: String, structured: Value) -> CallToolResult {
    let mut r = CallToolResult::success(vec![ContentBlock::text(text)]);
    r.structured_content = Some(structured);
    r
}

fn tool_error(e: &ToolError) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(e.to_string())])
}

/// The episode, even after a panicking call (its state is still the environment's).
pub(super) fn lock(m: &Mutex<Episode>) -> std::sync::MutexGuard<'_, Episode> {
    m.lock().unwrap_or_else(|e| e.into_inner())
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
