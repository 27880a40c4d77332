//! Session bounds shared by every network server (`rulegym serve`, `rulegym mcp --transport
//! http`): a cap on live sessions, an idle timeout and a maximum lifetime, enforced by one
//! [`SessionTable`] per server and its reaper (features `server` or `mcp`).
//!
//! What a *session* is depends on the protocol: an MCP streamable-HTTP session (its
//! `Mcp-Session-Id`, one episode each) for `mcp`; a TCP connection for `serve`, whose requests
//! are stateless. Either way nothing a client sends makes a server hold more than
//! [`SessionLimits::max_sessions`] of them: one more is refused (HTTP 503, a JSON-RPC error body
//! for MCP) until one ends, a session without a request for [`SessionLimits::idle_timeout`] is
//! closed, and none lives past [`SessionLimits::max_lifetime`]. Closing a session frees its
//! state (the MCP episode, the connection's buffers).

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Bounds on the sessions one server keeps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionLimits {
    /// Live sessions at once; one more is refused until one ends.
    pub max_sessions: usize,
    /// A session without a request for this long is closed.
    pub idle_timeout: Duration,
    /// A session older than this is closed, however busy.
    pub max_lifetime: Duration,
}

impl Default for SessionLimits {
    fn default() -> Self {
        SessionLimits {
            max_sessions: 1024,
            idle_timeout: Duration::from_secs(600),
            max_lifetime: Duration::from_secs(3600),
        }
    }
}

/// Most live sessions a server may be configured for.
pub const MAX_SESSIONS_LIMIT: usize = 1 << 20;

/// Why session limits are unusable, or a session was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    /// `max_sessions` is 0 or above [`MAX_SESSIONS_LIMIT`].
    #[error("max sessions {0} must be 1-{MAX_SESSIONS_LIMIT}")]
    BadCap(usize),
    /// A timeout is zero.
    #[error("{0} must be longer than 0 s")]
    ZeroTimeout(&'static str),
    /// Every session slot is taken.
    #[error("too many sessions ({0} live, the limit); retry when one ends")]
    Full(usize),
}

impl SessionLimits {
    /// Checks the limits are usable.
    pub fn validate(&self) -> Result<(), SessionError> {
        if !(1..=MAX_SESSIONS_LIMIT).contains(&self.max_sessions) {
            return Err(SessionError::BadCap(self.max_sessions));
        }
        if self.idle_timeout.is_zero() {
            return Err(SessionError::ZeroTimeout("idle timeout"));
        }
        if self.max_lifetime.is_zero() {
            return Err(SessionError::ZeroTimeout("session lifetime"));
        }
        Ok(())
    }

    /// How often the reaper looks for expired sessions: a quarter of the shorter timeout,
    /// between 50 ms and 5 s.
    pub fn reap_period(&self) -> Duration {
        (self.idle_timeout.min(self.max_lifetime) / 4)
            .clamp(Duration::from_millis(50), Duration::from_secs(5))
    }
}

struct Entry<V> {
    opened: Instant,
    seen: Instant,
    value: V,
}

/// The live sessions of one server, each with a value the server needs to close it (for a
/// connection, the signal its task waits on; `()` where the id is enough).
pub struct SessionTable<K, V = ()> {
    limits: SessionLimits,
    live: Mutex<HashMap<K, Entry<V>>>,
    /// Sessions that ended so far (removed or expired).
    ended: AtomicU64,
}

impl<K: Eq + Hash + Clone, V: Clone> SessionTable<K, V> {
    /// An empty table under `limits` (checked).
    pub fn new(limits: SessionLimits) -> Result<Self, SessionError> {
        limits.validate()?;
        Ok(SessionTable {
            limits,
            live: Mutex::new(HashMap::new()),
            ended: AtomicU64::new(0),
        })
    }

    /// The limits the table enforces.
    pub fn limits(&self) -> &SessionLimits {
        &self.limits
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<K, Entry<V>>> {
        // A panic elsewhere while holding the lock leaves the map consistent (every update is
        // one insert or remove), so a poisoned lock is still usable.
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Admits a new session, or refuses it when every slot is taken.
    pub fn admit(&self, key: K, value: V) -> Result<(), SessionError> {
        let mut live = self.lock();
        if live.len() >= self.limits.max_sessions && !live.contains_key(&key) {
            return Err(SessionError::Full(live.len()));
        }
        let now = Instant::now();
        live.insert(
            key,
            Entry {
                opened: now,
                seen: now,
                value,
            },
        );
        Ok(())
    }

    /// Records activity on a session (resets its idle clock); false when it is not live.
    pub fn touch(&self, key: &K) -> bool {
        match self.lock().get_mut(key) {
            Some(e) => {
                e.seen = Instant::now();
                true
            }
            None => false,
        }
    }

    /// The value of a live session, recording activity on it (resets its idle clock).
    pub fn get(&self, key: &K) -> Option<V> {
        self.lock().get_mut(key).map(|e| {
            e.seen = Instant::now();
            e.value.clone()
        })
    }

    /// Forgets a session (it ended); false when it was not live.
    pub fn remove(&self, key: &K) -> bool {
        let removed = self.lock().remove(key).is_some();
        if removed {
            self.ended.fetch_add(1, Ordering::Relaxed);
        }
        removed
    }

    /// Sessions that ended since the table was made (removed or expired).
    pub fn ended(&self) -> u64 {
        self.ended.load(Ordering::Relaxed)
    }

    /// Live sessions.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True when no session is live.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// True when one more session would be refused.
    pub fn is_full(&self) -> bool {
        self.len() >= self.limits.max_sessions
    }

    /// Removes and returns the sessions idle longer than the idle timeout or older than the
    /// lifetime at `now`, oldest first.
    pub fn take_expired(&self, now: Instant) -> Vec<(K, V)> {
        let mut live = self.lock();
        let mut expired: Vec<(Instant, K)> = live
            .iter()
            .filter(|(_, e)| {
                now.saturating_duration_since(e.seen) >= self.limits.idle_timeout
                    || now.saturating_duration_since(e.opened) >= self.limits.max_lifetime
            })
            .map(|(k, e)| (e.opened, k.clone()))
            .collect();
        expired.sort_by_key(|(opened, _)| *opened);
        let taken: Vec<(K, V)> = expired
            .into_iter()
            .filter_map(|(_, k)| live.remove(&k).map(|e| (k, e.value)))
            .collect();
        self.ended.fetch_add(taken.len() as u64, Ordering::Relaxed);
        taken
    }
}

impl<K, V> SessionTable<K, V>
where
    K: Eq + Hash + Clone + Send + 'static,
    V: Clone + Send + 'static,
{
    /// Spawns the reaper on the current tokio runtime: every [`SessionLimits::reap_period`] it
    /// takes the expired sessions and awaits `close` for each; after closing some it returns
    /// freed memory to the system (glibc keeps it in its arenas otherwise). Runs until the
    /// table is dropped.
    pub fn spawn_reaper<F, Fut>(self: &Arc<Self>, close: F) -> tokio::task::JoinHandle<()>
    where
        F: Fn(K, V) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send,
    {
        let table = Arc::downgrade(self);
        let period = self.limits.reap_period();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            // A session's state is dropped by its own task once it ends (however it ended:
            // expired here, DELETE, the protocol's own timer): after sessions end, memory is
            // handed back on the next two ticks, when those tasks are done.
            let (mut ended_seen, mut trims_due) = (0u64, 0u8);
            loop {
                tick.tick().await;
                let Some(table) = table.upgrade() else { return };
                let expired = table.take_expired(Instant::now());
                let ended = table.ended();
                drop(table);
                if trims_due > 0 {
                    release_freed_memory();
                    trims_due -= 1;
                }
                for (k, v) in expired {
                    close(k, v).await;
                }
                if ended != ended_seen {
                    ended_seen = ended;
                    trims_due = 2;
                }
            }
        })
    }
}

/// Bounds on the connections of an HTTP server ([`serve_connections`]).
#[cfg(feature = "server")]
#[derive(Clone, Debug)]
pub struct ConnectionLimits {
    /// Connections at once (beyond: 503 and close), their idle timeout and longest life.
    pub sessions: SessionLimits,
    /// Time for a request's headers to arrive.
    pub header_timeout: Duration,
    /// Time a connection closed by the reaper gets to finish its request in flight.
    pub drain_timeout: Duration,
}

/// Serves `app` on `listener` until the process ends, one HTTP/1 connection per task (with
/// upgrades, for WebSockets) under `limits`: beyond the connection cap a connection is
/// answered 503 and closed; idle and over-age connections are closed by the reaper; headers
/// must arrive within the header timeout.
#[cfg(feature = "server")]
pub async fn serve_connections(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    limits: ConnectionLimits,
) -> Result<(), SessionError> {
    use tokio::sync::Notify;
    // One entry per connection, with the signal that closes it; the reaper fires it when the
    // connection has been idle too long or has lived too long.
    let table: Arc<SessionTable<u64, Arc<Notify>>> =
        Arc::new(SessionTable::new(limits.sessions.clone())?);
    let _reaper = table.spawn_reaper(|_, close: Arc<Notify>| async move { close.notify_one() });
    let mut next_id = 0u64;
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(_) => {
                // Out of file descriptors or a reset before accept: back off, keep serving.
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        next_id += 1;
        let id = next_id;
        let close = Arc::new(Notify::new());
        if table.admit(id, close.clone()).is_err() {
            tokio::spawn(refuse(stream));
            continue;
        }
        let (app, limits, table) = (app.clone(), limits.clone(), table.clone());
        tokio::spawn(async move {
            use hyper::service::Service as _;
            let inner = hyper_util::service::TowerToHyperService::new(app);
            let seen = table.clone();
            let service = hyper::service::service_fn(move |req| {
                seen.touch(&id);
                inner.call(req)
            });
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(limits.header_timeout);
            let conn = builder
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .with_upgrades();
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = close.notified() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(limits.drain_timeout, conn).await;
                }
            }
            table.remove(&id);
        });
    }
}

/// Answers a connection beyond the limit with 503 and closes it (never waits on the client).
#[cfg(feature = "server")]
async fn refuse(mut stream: tokio::net::TcpStream) {
    use tokio::io::AsyncWriteExt;
    const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n\
        Content-Length: 39\r\nRetry-After: 1\r\nConnection: close\r\n\r\n\
        {\"error\":\"too many connections, retry\"}";
    let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(BUSY)).await;
}

/// Hands memory the allocator holds but no longer uses back to the system (glibc only; a
/// no-op elsewhere), so a server's resident size falls after a burst of sessions ends.
pub fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks glibc's own free lists; it takes no pointers from us.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The body of a refusal beyond the cap: a JSON-RPC error (MCP clients read it as one; plain
/// HTTP clients read `error.message`).
pub fn refusal_body(live: usize) -> String {
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": -32000, "message": SessionError::Full(live).to_string()},
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(cap: usize, idle_ms: u64, life_ms: u64) -> SessionLimits {
        SessionLimits {
            max_sessions: cap,
            idle_timeout: Duration::from_millis(idle_ms),
            max_lifetime: Duration::from_millis(life_ms),
        }
    }

    #[test]
    fn cap_refuses_one_more_and_frees_a_slot_on_remove() {
        let t: SessionTable<u32> = SessionTable::new(limits(2, 1000, 1000)).unwrap();
        t.admit(1, ()).unwrap();
        t.admit(2, ()).unwrap();
        assert_eq!(t.admit(3, ()), Err(SessionError::Full(2)));
        assert!(t.is_full());
        assert!(t.remove(&1));
        assert!(!t.remove(&1));
        t.admit(3, ()).unwrap();
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn idle_and_lifetime_expire_oldest_first_and_touch_resets_idle() {
        let t: SessionTable<u32, &str> = SessionTable::new(limits(8, 100, 300)).unwrap();
        let start = Instant::now();
        t.admit(1, "a").unwrap();
        t.admit(2, "b").unwrap();
        assert!(t.take_expired(start).is_empty());
        std::thread::sleep(Duration::from_millis(60));
        assert!(t.touch(&2));
        let at = Instant::now() + Duration::from_millis(50);
        assert_eq!(t.take_expired(at), vec![(1, "a")]);
        // Busy forever still ends at the lifetime.
        let late = Instant::now() + Duration::from_millis(400);
        assert!(t.touch(&2));
        assert_eq!(t.take_expired(late), vec![(2, "b")]);
        assert!(t.is_empty());
        assert!(!t.touch(&2));
    }

    #[test]
    fn bad_limits_are_refused() {
        assert_eq!(
            SessionTable::<u32>::new(limits(0, 1, 1)).err(),
            Some(SessionError::BadCap(0))
        );
        assert!(matches!(
            limits(1, 0, 1).validate(),
            Err(SessionError::ZeroTimeout(_))
        ));
        assert!(matches!(
            limits(1, 1, 0).validate(),
            Err(SessionError::ZeroTimeout(_))
        ));
        assert_eq!(
            limits(4, 400, 100_000).reap_period(),
            Duration::from_millis(100)
        );
    }

    #[test]
    fn refusal_is_a_json_rpc_error() {
        let v: serde_json::Value = serde_json::from_str(&refusal_body(7)).unwrap();
        assert_eq!(v["error"]["code"], -32000);
        assert!(v["error"]["message"].as_str().unwrap().contains("7 live"));
    }
}
