//! The server's bounds.

use crate::sessions::SessionLimits;
use std::time::Duration;

/// Server bounds.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Live sessions (WebSocket or HTTP-created), their idle timeout and longest life; the
    /// same cap bounds open connections.
    pub sessions: SessionLimits,
    /// Largest HTTP request body and WebSocket message, in bytes.
    pub max_message_bytes: usize,
    /// Time for a request's headers to arrive.
    pub header_timeout: Duration,
    /// Time for a request's body to arrive (408 beyond).
    pub body_timeout: Duration,
    /// Time a reply may take to reach a WebSocket client that does not read (the socket is
    /// closed beyond it).
    pub send_timeout: Duration,
    /// WebSockets attached to one session at once (`/ws?session_id=`).
    pub max_attachments: usize,
    /// Episodes one client (peer address) may start (`None`: unbounded): with a world that
    /// deals its tasks ([`crate::toolcall::World::dealt`]), an evaluation service whose
    /// rewards cannot be mined for answers.
    pub max_resets_per_client: Option<u64>,
    /// Longest one reset or tool call may run (a simulator LLM call, the rubric); beyond it
    /// the call answers an error and the session stays usable.
    pub call_timeout: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            sessions: SessionLimits::default(),
            max_message_bytes: 128 * 1024,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            send_timeout: Duration::from_secs(10),
            max_attachments: 4,
            max_resets_per_client: None,
            call_timeout: Duration::from_secs(120),
        }
    }
}
