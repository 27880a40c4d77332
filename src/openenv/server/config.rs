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
    /// Longest one reset or tool call may run (a simulator LLM call, the rubric); beyond it
    /// the call answers an error and the session stays usable.
    pub call_timeout: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            sessions: SessionLimits::default(),
            max_message_bytes: 1 << 20,
            header_timeout: Duration::from_secs(10),
            call_timeout: Duration::from_secs(120),
        }
    }
}
