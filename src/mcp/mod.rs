//! `rulegym mcp`: a dataset's search environment or a tool-use task served to any Model Context
//! Protocol client, over stdio or streamable HTTP, with the official Rust SDK (`rmcp`).
//!
//! Two kinds of world ([`World`]):
//! - **Search** ([`SearchWorld`]): a dataset directory written by `rulegym generate`. Tools
//!   `search` (dense top-k passages from the dataset's index), `get_article` (exact title, then a
//!   case-insensitive match), `list_people` (paged); every article is a resource
//!   (`rulegym://article/{id}`, listed page by page). A *scored* session (started with a
//!   question id) also exposes the question (prompt `question`, resource `rulegym://question`)
//!   and the tool `answer`, which ends the episode and returns its set F1 against the gold
//!   answers ([`crate::reward::score`]).
//! - **Tool-use task** ([`TaskWorld`]): one MCP tool per task tool (its parameter schema as the
//!   input schema), played through [`crate::tooluse::env::ToolEnv`] (state-backed tools,
//!   mapping simulator, rule user), plus `ask_user` and `finish`; `finish` returns the rubric
//!   score.
//!
//! Each MCP session (the stdio connection, or one streamable-HTTP session) is one episode. Input
//! is bounded ([`limits`]) and never ends the server: an unknown tool is a JSON-RPC error, bad
//! arguments and calls after the episode ended are tool results with `isError` and a message.

mod args;
mod bounded;
mod error;
mod search;
mod search_tools;
mod server;
mod task;
mod task_tools;

pub use bounded::{BoundedError, BoundedSessions};

pub use error::ToolError;
pub use search::{SCORED_MAX_TURNS, SearchWorld};
pub use server::{ARTICLE_URI, McpServer, QUESTION_URI, TASK_URI};
pub use task::{BUILTIN_TOOLS, TaskWorld};

use std::sync::Arc;

/// Bounds on what a client may ask for.
pub mod limits {
    /// Most passages one `search` returns.
    pub const MAX_K: usize = 20;
    /// Passages a `search` without `k` returns.
    pub const DEFAULT_K: usize = 3;
    /// Most people one `list_people` page holds.
    pub const MAX_PAGE: usize = 200;
    /// People per `list_people` page without `limit`.
    pub const DEFAULT_PAGE: usize = 50;
    /// Resources per `resources/list` page.
    pub const RESOURCE_PAGE: usize = 100;
    /// Longest text argument (query, title, answer, question, summary), in characters.
    pub const MAX_TEXT_CHARS: usize = 4096;
    /// Largest arguments object of a task tool call, in bytes of JSON.
    pub const MAX_ARGS_BYTES: usize = 64 * 1024;
}

/// Why an MCP server could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// `--question` names no question of the dataset.
    #[error("no question with id {0:?} in the dataset's questions.jsonl")]
    UnknownQuestion(String),
    /// The task file has no task with this id.
    #[error("no task with id {id:?} in {file}")]
    UnknownTask {
        /// The id asked for.
        id: String,
        /// The task file.
        file: String,
    },
    /// The task file holds several tasks (or none) and no id was given.
    #[error("{file} holds {count} tasks; name one with --task ID")]
    AmbiguousTask {
        /// The task file.
        file: String,
        /// Its number of tasks.
        count: usize,
    },
    /// A task tool has the name of a built-in tool (`ask_user`, `finish`).
    #[error("task tool {0:?} has the name of a built-in MCP tool; rename it in the task")]
    ToolNameClash(String),
    /// Binding, serving or the stdio transport failed.
    #[error("{context}: {message}")]
    Transport {
        /// What was being done.
        context: String,
        /// The underlying error.
        message: String,
    },
}

/// What a server serves: a dataset's search environment or one tool-use task.
pub enum World {
    /// A dataset's search tools (and optionally one scored question).
    Search(Box<SearchWorld>),
    /// One tool-use task.
    Task(TaskWorld),
}

impl From<SearchWorld> for World {
    fn from(w: SearchWorld) -> Self {
        World::Search(Box::new(w))
    }
}

impl From<TaskWorld> for World {
    fn from(w: TaskWorld) -> Self {
        World::Task(w)
    }
}

fn transport_err(context: impl Into<String>, e: impl std::fmt::Display) -> crate::Error {
    McpError::Transport {
        context: context.into(),
        message: e.to_string(),
    }
    .into()
}

fn runtime() -> crate::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| transport_err("start tokio runtime", e))
}

/// Serves one session of `world` over stdin/stdout until the client closes the connection.
pub fn serve_stdio(world: Arc<World>) -> crate::Result<()> {
    use rmcp::ServiceExt;
    runtime()?.block_on(async move {
        let server = McpServer::new(world)?;
        let running = server
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| transport_err("MCP initialize over stdio", e))?;
        running
            .waiting()
            .await
            .map_err(|e| transport_err("MCP session over stdio", e))?;
        Ok(())
    })
}

/// Serves `world` over streamable HTTP at `http://{listener address}/mcp`, one episode per MCP
/// session, until the process is stopped. Requests must name a loopback host (`localhost`,
/// `127.0.0.1`, `::1`) or one of `extra_hosts` in their `Host` header (rmcp's DNS-rebinding
/// guard). Sessions are bounded by `limits` ([`crate::sessions`]): beyond the cap a new session
/// is answered 503 with a JSON-RPC error; idle and over-age sessions are closed and their
/// episodes freed; DELETE closes one at once. `ready` is called with the bound address (port 0
/// picks a free port).
pub fn serve_http(
    world: Arc<World>,
    addr: &str,
    extra_hosts: &[String],
    limits: crate::sessions::SessionLimits,
    ready: impl FnOnce(std::net::SocketAddr),
) -> crate::Result<()> {
    use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
    let sessions = BoundedSessions::new(limits)?;
    runtime()?.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| transport_err(format!("bind {addr}"), e))?;
        let local = listener
            .local_addr()
            .map_err(|e| transport_err("read the bound address", e))?;
        // Fail before listening when a session cannot be built (the factory runs per session).
        McpServer::new(world.clone())?;
        let config = StreamableHttpServerConfig::default();
        let hosts: Vec<String> = config
            .allowed_hosts
            .iter()
            .cloned()
            .chain(extra_hosts.iter().cloned())
            .collect();
        let _reaper = sessions.spawn_reaper();
        let table = sessions.table().clone();
        let service = StreamableHttpService::new(
            move || McpServer::new(world.clone()).map_err(std::io::Error::other),
            sessions,
            config.with_allowed_hosts(hosts),
        );
        let router = axum::Router::new().nest_service("/mcp", service).layer(
            axum::middleware::from_fn_with_state(table, bounded::refuse_when_full),
        );
        ready(local);
        axum::serve(listener, router)
            .await
            .map_err(|e| transport_err(format!("serve http://{local}/mcp"), e))
    })
}
