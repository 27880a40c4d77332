//! `rulegym mcp`: a dataset's search environment or a tool-use task served to any Model Context
//! Protocol client, over stdio or streamable HTTP, with the official Rust SDK (`rmcp`).
//!
//! Every MCP session (the stdio connection, or one streamable-HTTP session) plays one episode of
//! a [`World`] as a [`ToolSession`](crate::toolcall::ToolSession) (the same session OpenEnv and
//! the Python adapters serve): the episode a [`FixedEpisode`] names, a scored question, the
//! task file's task, or browsing a dataset without a question. This module only translates:
//! - the session's tools are MCP tools; an outcome is a tool result (its text, its data as
//!   structured content, `isError` when the tool reports a failure); a fault is a tool result
//!   with `isError` and the fault's message, except an unknown tool, a JSON-RPC error;
//! - a search world's articles are resources (`rulegym://article/{id}`, listed page by page); a
//!   scored question is the prompt `question` and the resource `rulegym://question`, a task's
//!   request the prompt `task` and the resource `rulegym://task`.
//!
//! Input is bounded ([`crate::toolcall::limits`]) and never ends the server.

mod bounded;
mod server;

pub use bounded::{BoundedError, BoundedSessions};
pub use server::{ARTICLE_URI, McpServer, QUESTION_URI, RESOURCE_PAGE, TASK_URI};

use crate::toolcall::{FixedEpisode, World};
use std::sync::Arc;

/// Why an MCP server could not start or stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// Binding, serving or the stdio transport failed.
    #[error("{context}: {message}")]
    Transport {
        /// What was being done.
        context: String,
        /// The underlying error.
        message: String,
    },
}

fn transport_err(context: impl Into<String>, e: impl std::fmt::Display) -> crate::Error {
    McpError::Transport {
        context: context.into(),
        message: e.to_string(),
    }
    .into()
}

fn runtime() -> crate::Result<tokio::runtime::Runtime> {
    crate::sessions::server_runtime().map_err(|e| transport_err("start tokio runtime", e))
}

/// Serves one session of `episode` over stdin/stdout until the client closes the connection.
pub fn serve_stdio(world: Arc<World>, episode: FixedEpisode) -> crate::Result<()> {
    use rmcp::ServiceExt;
    runtime()?.block_on(async move {
        let server = McpServer::new(world, &episode)?;
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

/// Largest request body `rulegym mcp --transport http` reads, in bytes.
pub const MAX_BODY_BYTES: usize = 1 << 20;

/// How `rulegym mcp --transport http` serves ([`serve_http`]).
#[derive(Clone, Debug, Default)]
pub struct HttpConfig {
    /// `Host` header values (name, or name:port) accepted besides the loopback names: rmcp's
    /// DNS-rebinding guard refuses any other.
    pub allowed_hosts: Vec<String>,
    /// Live MCP sessions, per client, their idle timeout and lifetime; the same cap bounds
    /// connections.
    pub sessions: crate::sessions::SessionLimits,
    /// MCP sessions (episodes) one client may start over the server's life (`None`:
    /// unbounded); with a world that deals its tasks, an evaluation service.
    pub max_episodes_per_client: Option<u64>,
}

/// Serves `episode` of `world` over streamable HTTP at `http://{listener address}/mcp`, one
/// episode per MCP session, until the process is stopped. Requests must name a loopback host
/// (`localhost`, `127.0.0.1`, `::1`) or one of the configured hosts in their `Host` header
/// (rmcp's DNS-rebinding guard). Sessions are bounded by the configured limits
/// ([`crate::sessions`]): beyond the cap, a client's share of it or its creation rate, a new
/// session is answered 503 with `Retry-After` and a JSON-RPC error, and past the client's
/// episode budget 403 without it (waiting would not help); idle and over-age sessions are
/// closed and their episodes freed; DELETE closes one at once.
/// Connections are served by [`crate::sessions::serve_connections`] under the same limits.
/// `ready` is called with the bound address (port 0 picks a free port).
pub fn serve_http(
    world: Arc<World>,
    episode: FixedEpisode,
    addr: &str,
    config: HttpConfig,
    ready: impl FnOnce(std::net::SocketAddr),
) -> crate::Result<()> {
    use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
    let HttpConfig {
        allowed_hosts,
        sessions: limits,
        max_episodes_per_client,
    } = config;
    let sessions = BoundedSessions::new(limits.clone())?;
    runtime()?.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| transport_err(format!("bind {addr}"), e))?;
        let local = listener
            .local_addr()
            .map_err(|e| transport_err("read the bound address", e))?;
        // Fail before listening when a session cannot be built (the factory runs per session);
        // a dealt episode is not tried, so that the first client gets the first task.
        if episode != FixedEpisode::Dealt {
            McpServer::new(world.clone(), &episode)?;
        }
        let config = StreamableHttpServerConfig::default();
        let hosts: Vec<String> = config
            .allowed_hosts
            .iter()
            .cloned()
            .chain(allowed_hosts)
            .collect();
        let _reaper = sessions.spawn_reaper();
        let admission = bounded::Admission {
            table: sessions.table().clone(),
            episodes: Arc::new(crate::sessions::EpisodeBudget::new(max_episodes_per_client)),
        };
        let service = StreamableHttpService::new(
            move || McpServer::new(world.clone(), &episode).map_err(std::io::Error::other),
            sessions,
            config.with_allowed_hosts(hosts),
        );
        let router = axum::Router::new().nest_service("/mcp", service).layer(
            axum::middleware::from_fn_with_state(admission, bounded::admit_new_sessions),
        );
        ready(local);
        let connections = crate::sessions::ConnectionLimits {
            sessions: limits,
            header_timeout: std::time::Duration::from_secs(10),
            max_body_bytes: MAX_BODY_BYTES,
            body_timeout: std::time::Duration::from_secs(30),
            drain_timeout: std::time::Duration::from_secs(5),
        };
        crate::sessions::serve_connections(listener, router, connections).await?;
        Ok(())
    })
}
