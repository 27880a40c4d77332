//! `rulegym openenv`: a dataset's search environment, or a file of tool-use tasks, served over
//! OpenEnv's protocol (the `openenv` 0.10 Python package's clients: `GenericEnvClient`,
//! `MCPToolClient`; TRL, verifiers, SkyRL and NeMo Gym consume it). Feature `openenv`.
//!
//! Each episode is a [`ToolSession`](crate::toolcall::ToolSession) of a [`World`] (the session
//! MCP and the Python adapters serve too); this module only translates it to OpenEnv's wire.
//!
//! - Each WebSocket (`/ws`) is one session holding one episode at a time: `reset` starts one
//!   (by `question_id`/`task_id`, by `split` and `index`, by `seed`, or the next in order),
//!   `step` applies `list_tools` or `call_tool`, `state` reports it, `close` ends the session.
//!   `MCPToolClient` creates its session over `/mcp` (`openenv/session/create`) and attaches
//!   its WebSocket to it.
//! - Search tools: `search(query)`, `get_article(title)`, `answer(answer)`; `answer` ends the
//!   episode with the exact set F1 as the reward ([`crate::search::SearchEnv`]); every
//!   call is a turn, and the environment's turn cap ends an episode without an answer at 0.
//! - Tool-use tools: the task's own, `ask_user` and `finish`; the reward is the rubric score
//!   once the episode ends ([`crate::tooluse::env::ToolEnv`]).
//! - Malformed actions get an error frame or an error observation; the session goes on.
//!   Sessions are bounded ([`crate::sessions`]): a cap on live sessions (and connections), an
//!   idle timeout, a lifetime; message and body size; time per call.
//! - The task-listing API (`/{env}/splits`, `tasks`, `num_tasks`, `task`, `task_range`) lists
//!   the dataset's questions (splits `train`, `val`) or the task file's tasks (split `train`),
//!   without gold answers.

mod server;

pub use server::{ServerConfig, router, serve};

use crate::toolcall::{World, WorldError};

/// Why a world could not be served, or a request named nothing it holds.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum OpenEnvError {
    /// The world cannot serve the request (an unknown id, split or index).
    #[error(transparent)]
    World(#[from] WorldError),
    /// A task request without its `index`.
    #[error("the request needs \"index\"")]
    MissingIndex,
    /// Binding or serving failed.
    #[error("{context}: {message}")]
    Transport {
        /// What was being done.
        context: String,
        /// The error.
        message: String,
    },
}

/// Serves `world` at `addr` until the process is stopped (its own tokio runtime); `ready` is
/// called with the bound address (port 0 picks a free one).
pub fn serve_blocking(
    world: World,
    addr: &str,
    cfg: ServerConfig,
    ready: impl FnOnce(std::net::SocketAddr),
) -> crate::Result<()> {
    if world.is_empty() {
        return Err(WorldError::Empty("the dataset has no questions").into());
    }
    let transport = |context: String, e: std::io::Error| OpenEnvError::Transport {
        context,
        message: e.to_string(),
    };
    let runtime = crate::sessions::server_runtime()
        .map_err(|e| transport("start the async runtime".into(), e))?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| transport(format!("bind {addr}"), e))?;
        let local = listener
            .local_addr()
            .map_err(|e| transport("read the bound address".into(), e))?;
        ready(local);
        serve(listener, std::sync::Arc::new(world), cfg).await
    })
}
