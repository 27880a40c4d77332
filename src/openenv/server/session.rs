//! One client's session: its episode, step count and close signal.

use crate::toolcall::ToolSession;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::Notify;

/// One client's episode, and the signal that closes its WebSocket.
pub(super) struct Session {
    pub(super) episode: Mutex<Option<ToolSession>>,
    pub(super) episode_id: Mutex<Option<String>>,
    pub(super) steps: AtomicU64,
    pub(super) close: Notify,
}

impl Session {
    pub(super) fn new() -> Arc<Self> {
        Arc::new(Session {
            episode: Mutex::new(None),
            episode_id: Mutex::new(None),
            steps: AtomicU64::new(0),
            close: Notify::new(),
        })
    }
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
