//! One client's session: its episode, step count, attached WebSockets and close signal.

use crate::sessions::Shutdown;
use crate::toolcall::ToolSession;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// One client's episode, and the signal that closes every WebSocket attached to it.
pub(super) struct Session {
    pub(super) episode: Mutex<Option<ToolSession>>,
    pub(super) episode_id: Mutex<Option<String>>,
    pub(super) steps: AtomicU64,
    /// WebSockets attached now.
    attached: AtomicUsize,
    /// The episode was drawn from the world's curriculum and its reward is not reported yet.
    pub(super) drawn: AtomicBool,
    pub(super) close: Shutdown,
}

impl Session {
    pub(super) fn new() -> Arc<Self> {
        Arc::new(Session {
            episode: Mutex::new(None),
            episode_id: Mutex::new(None),
            steps: AtomicU64::new(0),
            attached: AtomicUsize::new(0),
            drawn: AtomicBool::new(false),
            close: Shutdown::default(),
        })
    }

    /// Attaches one more WebSocket, unless `max` are attached or the session has closed.
    pub(super) fn attach(&self, max: usize) -> bool {
        !self.close.is_closed()
            && self
                .attached
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                    (n < max).then_some(n + 1)
                })
                .is_ok()
    }

    /// Detaches a WebSocket; true when it was the last one.
    pub(super) fn detach(&self) -> bool {
        self.attached.fetch_sub(1, Ordering::SeqCst) == 1
    }
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
