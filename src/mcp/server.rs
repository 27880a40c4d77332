//! The MCP handler: one [`McpServer`] per MCP session, holding one [`ToolSession`] of a shared
//! [`World`]; this file only translates the session's tools, outcomes and faults to MCP's types.

use crate::toolcall::{FixedEpisode, Outcome, SessionKind, ToolFault, ToolSession, World};
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
use serde_json::json;
use std::borrow::Cow;
use std::sync::{Arc, Mutex};

/// URI scheme prefix of an article resource; the document id follows.
pub const ARTICLE_URI: &str = "rulegym://article/";
/// URI of the scored question's resource.
pub const QUESTION_URI: &str = "rulegym://question";
/// URI of the tool-use task's instruction resource.
pub const TASK_URI: &str = "rulegym://task";
/// Resources per `resources/list` page.
pub const RESOURCE_PAGE: usize = 100;

/// One MCP session over a shared world: a handler for rmcp's server (stdio: the one session;
/// streamable HTTP: one per session, built by the service factory).
pub struct McpServer {
    world: Arc<World>,
    session: Arc<Mutex<ToolSession>>,
    kind: SessionKind,
}

/// The session, even after a panicking call (its state is still the environment's).
fn lock(m: &Mutex<ToolSession>) -> std::sync::MutexGuard<'_, ToolSession> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl McpServer {
    /// A new MCP session (a fresh episode of `episode`) of `world`.
    pub fn new(world: Arc<World>, episode: &FixedEpisode) -> crate::Result<Self> {
        let session = world.start(episode)?;
        Ok(McpServer {
            world,
            kind: session.kind(),
            session: Arc::new(Mutex::new(session)),
        })
    }

    /// The tools this session offers.
    pub fn tools(&self) -> Vec<Tool> {
        lock(&self.session)
            .tools()
            .into_iter()
            .map(|t| Tool::new(t.name, t.description, Arc::new(t.input_schema)))
            .collect()
    }

    async fn call(&self, name: String, args: JsonObject) -> Result<CallToolResult, ErrorData> {
        let session = self.session.clone();
        let result = tokio::task::spawn_blocking(move || lock(&session).call(&name, &args)).await;
        match result {
            Ok(Ok(outcome)) => Ok(tool_result(outcome)),
            Ok(Err(ToolFault::UnknownTool { name, .. })) => Err(ErrorData::invalid_params(
                format!("unknown tool {name:?}"),
                Some(
                    json!({"tools": self.tools().iter().map(|t| t.name.clone()).collect::<Vec<_>>()}),
                ),
            )),
            Ok(Err(fault)) => Ok(error_text(fault.to_string())),
            Err(join) => Ok(error_text(format!("the tool call failed: {join}"))),
        }
    }

    fn prompt_text(&self) -> Option<String> {
        lock(&self.session).prompt_text()
    }

    fn instructions(&self) -> String {
        let text = lock(&self.session).instructions();
        match self.kind {
            SessionKind::Task => text,
            SessionKind::Search => format!(
                "{text}\n\nThe question is also the prompt `question` and the resource \
                 {QUESTION_URI}; articles are resources ({ARTICLE_URI}{{id}})."
            ),
            SessionKind::Browse => {
                format!("{text} Articles are also resources ({ARTICLE_URI}{{id}}).")
            }
        }
    }
}

/// An outcome as MCP's tool result: its text, its data as structured content, `isError` as the
/// outcome says.
fn tool_result(o: Outcome) -> CallToolResult {
    let content = vec![ContentBlock::text(o.text)];
    let mut r = if o.is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    if !o.data.is_null() {
        r.structured_content = Some(o.data);
    }
    r
}

fn error_text(text: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
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
            match self.kind {
                SessionKind::Search => resources.push(
                    Resource::new(QUESTION_URI, "question")
                        .with_description("The question this session answers.")
                        .with_mime_type("text/plain"),
                ),
                SessionKind::Task => resources.push(
                    Resource::new(TASK_URI, "task")
                        .with_description("The user's request of this tool-use task.")
                        .with_mime_type("text/plain"),
                ),
                SessionKind::Browse => {}
            }
        }
        let mut next = None;
        if let Some(index) = self.world.index() {
            let docs = index.docs();
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
        let templates = match self.world.index() {
            Some(_) => vec![
                ResourceTemplate::new(format!("{ARTICLE_URI}{{id}}"), "article")
                    .with_description("An article of the corpus by document id.")
                    .with_mime_type("text/plain"),
            ],
            None => Vec::new(),
        };
        Ok(ListResourceTemplatesResult::with_all_items(templates))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri;
        let text = match (self.kind, uri.as_str()) {
            (SessionKind::Search, QUESTION_URI) | (SessionKind::Task, TASK_URI) => {
                self.prompt_text()
            }
            (_, u) => u
                .strip_prefix(ARTICLE_URI)
                .and_then(|id| self.world.article_by_id(id))
                .map(|d| d.contents.clone()),
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
        let prompts = match self.kind {
            SessionKind::Search => vec![Prompt::new(
                "question",
                Some("The question of this scored session, with how to answer it."),
                None,
            )],
            SessionKind::Task => vec![Prompt::new(
                "task",
                Some("The user's request of this tool-use task, with how to work on it."),
                None,
            )],
            SessionKind::Browse => Vec::new(),
        };
        Ok(ListPromptsResult::with_all_items(prompts))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let known = matches!(
            (self.kind, request.name.as_str()),
            (SessionKind::Search, "question") | (SessionKind::Task, "task")
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
                .with_description(self.prompt_text().unwrap_or_default())
                .into(),
        )
    }
}

fn truncate(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}
