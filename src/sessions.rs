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
//!
//! Admission is fair between clients, told apart by peer address: one client holds at most
//! [`SessionLimits::per_client`] sessions, and when every slot is taken the session idle
//! longest makes room for a newcomer if it has been idle [`SessionLimits::evict_idle_after`].
//! [`serve_connections`] serves every HTTP server on one connection layer: each connection,
//! upgraded to a WebSocket or not, holds a slot of one table; headers, bodies and idle
//! connections are timed; a declared oversize body is refused before it is read.

use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// Bounds on the sessions one server keeps.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionLimits {
    /// Live sessions at once; one more is refused until one ends.
    pub max_sessions: usize,
    /// A session without a request for this long is closed.
    pub idle_timeout: Duration,
    /// A session older than this is closed, however busy.
    pub max_lifetime: Duration,
    /// Live sessions one client (peer address) may hold; `None`: half of `max_sessions` (at
    /// least 1), so no one client can take every slot.
    pub max_per_client: Option<usize>,
    /// When every slot is taken (or a client holds its share), the session idle longest is
    /// closed to admit the newcomer, if it has been idle at least this long.
    pub evict_idle_after: Duration,
    /// New sessions one client may open per second, sustained (a token bucket holding the
    /// client's share, so a burst of its whole share is admitted at once); `None`: the share
    /// per second; infinite: unbounded. Bounds the churn of a client that opens and closes
    /// sessions in a loop.
    pub new_per_client_per_s: Option<f64>,
}

impl Default for SessionLimits {
    fn default() -> Self {
        SessionLimits {
            max_sessions: 1024,
            idle_timeout: Duration::from_secs(600),
            max_lifetime: Duration::from_secs(3600),
            max_per_client: None,
            evict_idle_after: Duration::from_secs(60),
            new_per_client_per_s: None,
        }
    }
}

/// Most live sessions a server may be configured for.
pub const MAX_SESSIONS_LIMIT: usize = 1 << 20;

/// Why session limits are unusable, or a session was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// `max_sessions` is 0 or above [`MAX_SESSIONS_LIMIT`].
    #[error("max sessions {0} must be 1-{MAX_SESSIONS_LIMIT}")]
    BadCap(usize),
    /// A timeout is zero.
    #[error("{0} must be longer than 0 s")]
    ZeroTimeout(&'static str),
    /// `max_per_client` is 0 or above `max_sessions`.
    #[error("max sessions per client {0} must be 1-{1} (the max sessions)")]
    BadPerClient(usize, usize),
    /// Every session slot is taken.
    #[error("too many sessions ({0} live, the limit); retry when one ends")]
    Full(usize),
    /// The client holds its share of the sessions.
    #[error("this client holds {0} sessions, its limit; close one or retry when one ends")]
    ClientFull(usize),
    /// The client opens sessions faster than its rate.
    #[error("this client opens sessions faster than {0} per second, its limit; retry later")]
    TooFast(f64),
    /// The creation rate is not a positive number (infinite is unbounded).
    #[error("new sessions per client per second {0} must be a positive number")]
    BadRate(f64),
    /// The client has started its budget of episodes ([`EpisodeBudget`]).
    #[error("this client has started {0} episodes, its limit on this server")]
    EpisodesSpent(u64),
    /// An [`EpisodeBudget`] counts as many clients as it can.
    #[error("too many clients ({0}) for this evaluation service")]
    TooManyClients(usize),
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
        if let Some(n) = self.max_per_client
            && !(1..=self.max_sessions).contains(&n)
        {
            return Err(SessionError::BadPerClient(n, self.max_sessions));
        }
        if let Some(r) = self.new_per_client_per_s
            && (r.is_nan() || r <= 0.0)
        {
            return Err(SessionError::BadRate(r));
        }
        Ok(())
    }

    /// New sessions one client may open per second, sustained.
    pub fn creation_rate(&self) -> f64 {
        self.new_per_client_per_s
            .unwrap_or(self.per_client() as f64)
    }

    /// Live sessions one client may hold.
    pub fn per_client(&self) -> usize {
        self.max_per_client
            .unwrap_or((self.max_sessions / 2).max(1))
    }

    /// How often the reaper looks for expired sessions: a quarter of the shorter timeout,
    /// between 50 ms and 5 s.
    pub fn reap_period(&self) -> Duration {
        (self.idle_timeout.min(self.max_lifetime) / 4)
            .clamp(Duration::from_millis(50), Duration::from_secs(5))
    }
}

tokio::task_local! {
    /// The peer address of the request being served ([`serve_connections`] sets it).
    static CLIENT: IpAddr;
}

/// The peer address of the request this task serves, when a connection layer set it.
pub fn current_client() -> Option<IpAddr> {
    CLIENT.try_with(|c| *c).ok()
}

/// Runs `f` as serving `client`: sessions it admits count against that client's share.
pub async fn serve_as<F: std::future::Future>(client: IpAddr, f: F) -> F::Output {
    CLIENT.scope(client, f).await
}

/// Episodes each client may start on a server (an evaluation service's bound, so that rewards
/// served by question cannot be mined for answers): counted per peer address, never given back
/// except for an episode that did not start ([`EpisodeBudget::refund`]).
#[derive(Debug)]
pub struct EpisodeBudget {
    max: Option<u64>,
    used: Mutex<HashMap<IpAddr, u64>>,
}

/// Distinct clients an [`EpisodeBudget`] keeps count of; a new client beyond is refused.
pub const MAX_COUNTED_CLIENTS: usize = 1 << 16;

impl EpisodeBudget {
    /// `max` episodes per client (`None`: unbounded, nothing is counted).
    pub fn new(max: Option<u64>) -> Self {
        EpisodeBudget {
            max,
            used: Mutex::default(),
        }
    }

    /// Counts one episode start of `client`, or refuses it past the budget (a request served
    /// without a peer address is not counted).
    pub fn charge(&self, client: Option<IpAddr>) -> Result<(), SessionError> {
        let (Some(max), Some(client)) = (self.max, client) else {
            return Ok(());
        };
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        if used.len() >= MAX_COUNTED_CLIENTS && !used.contains_key(&client) {
            return Err(SessionError::TooManyClients(MAX_COUNTED_CLIENTS));
        }
        let n = used.entry(client).or_default();
        if *n >= max {
            return Err(SessionError::EpisodesSpent(max));
        }
        *n += 1;
        Ok(())
    }

    /// Gives back a charge whose episode did not start (a refused or failed start).
    pub fn refund(&self, client: Option<IpAddr>) {
        if let (Some(_), Some(client)) = (self.max, client)
            && let Some(n) = self
                .used
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get_mut(&client)
        {
            *n = n.saturating_sub(1);
        }
    }
}

/// A close signal that every waiter sees, including those that start waiting after it fired.
#[derive(Debug, Default)]
pub struct Shutdown {
    closed: AtomicBool,
    notify: Notify,
}

impl Shutdown {
    /// Fires the signal (once is enough; later calls do nothing more).
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    /// True once [`Shutdown::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Waits until the signal fires (at once if it has).
    pub async fn closed(&self) {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.is_closed() {
                return;
            }
            notified.await;
        }
    }
}

struct Entry<V> {
    opened: Instant,
    seen: Instant,
    client: Option<IpAddr>,
    value: V,
}

/// The table's state under its lock: the sessions, each client's count, and the sessions
/// evicted for newcomers that the reaper has yet to close.
struct Live<K, V> {
    map: HashMap<K, Entry<V>>,
    per_client: HashMap<IpAddr, usize>,
    evicted: Vec<(K, V)>,
    /// Each client's creation tokens and when they were counted.
    buckets: HashMap<IpAddr, (f64, Instant)>,
}

impl<K: Eq + Hash, V> Live<K, V> {
    fn take(&mut self, key: &K) -> Option<Entry<V>> {
        let e = self.map.remove(key)?;
        if let Some(c) = e.client
            && let Some(n) = self.per_client.get_mut(&c)
        {
            *n -= 1;
            if *n == 0 {
                self.per_client.remove(&c);
            }
        }
        Some(e)
    }
}

/// The live sessions of one server, each with a value the server needs to close it (for a
/// connection, the signal its task waits on; `()` where the id is enough).
pub struct SessionTable<K, V = ()> {
    limits: SessionLimits,
    live: Mutex<Live<K, V>>,
    /// Sessions that ended so far (removed, expired or evicted).
    ended: AtomicU64,
    /// Wakes the reaper when a session was evicted.
    wake: Arc<Notify>,
}

impl<K: Eq + Hash + Clone, V: Clone> SessionTable<K, V> {
    /// An empty table under `limits` (checked).
    pub fn new(limits: SessionLimits) -> Result<Self, SessionError> {
        limits.validate()?;
        Ok(SessionTable {
            limits,
            live: Mutex::new(Live {
                map: HashMap::new(),
                per_client: HashMap::new(),
                evicted: Vec::new(),
                buckets: HashMap::new(),
            }),
            ended: AtomicU64::new(0),
            wake: Arc::new(Notify::new()),
        })
    }

    /// The limits the table enforces.
    pub fn limits(&self) -> &SessionLimits {
        &self.limits
    }

    fn lock(&self) -> MutexGuard<'_, Live<K, V>> {
        // A panic elsewhere while holding the lock leaves the map consistent (every update is
        // one insert or remove), so a poisoned lock is still usable.
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Admits a new session for the client this task serves ([`current_client`]).
    pub fn admit(&self, key: K, value: V) -> Result<(), SessionError> {
        self.admit_for(key, value, current_client())
    }

    /// Admits a new session for `client` (`None`: no client to bound). When the client holds
    /// its share, or every slot is taken, the longest-idle session (the client's own, or
    /// anyone's) makes room if it has been idle [`SessionLimits::evict_idle_after`]; it is
    /// closed by the reaper. Otherwise the newcomer is refused.
    pub fn admit_for(&self, key: K, value: V, client: Option<IpAddr>) -> Result<(), SessionError> {
        let mut live = self.lock();
        let now = Instant::now();
        if let Some(old) = live.take(&key) {
            // Re-admitting a key replaces its session (the old value is closed).
            live.evicted.push((key.clone(), old.value));
        }
        let tokens = self.tokens(&live, client, now);
        let held = client.map_or(0, |c| live.per_client.get(&c).copied().unwrap_or(0));
        let at_share = client.is_some() && held >= self.limits.per_client();
        let full = live.map.len() >= self.limits.max_sessions;
        // Room comes from the client's own idle sessions once it holds its share.
        let from = if at_share { client } else { None };
        if (at_share || full) && self.idlest(&live, now, from).is_none() {
            return Err(if full {
                SessionError::Full(live.map.len())
            } else {
                SessionError::ClientFull(held)
            });
        }
        let tokens = tokens?;
        if at_share || full {
            self.evict_idlest(&mut live, now, from);
        }
        if let Some(c) = client {
            *live.per_client.entry(c).or_default() += 1;
            if tokens.is_finite() {
                self.spend(&mut live, c, tokens, now);
            }
        }
        live.map.insert(
            key,
            Entry {
                opened: now,
                seen: now,
                client,
                value,
            },
        );
        Ok(())
    }

    /// Why one more session for the client this task serves would be refused now (nothing is
    /// evicted), if it would.
    pub fn refusal(&self) -> Option<SessionError> {
        let live = self.lock();
        let client = current_client();
        let tokens = self.tokens(&live, client, Instant::now());
        let held = client.map_or(0, |c| live.per_client.get(&c).copied().unwrap_or(0));
        let at_share = client.is_some() && held >= self.limits.per_client();
        let full = live.map.len() >= self.limits.max_sessions;
        let from = if at_share { client } else { None };
        if !(at_share || full) || self.idlest(&live, Instant::now(), from).is_some() {
            return tokens.err();
        }
        Some(if full {
            SessionError::Full(live.map.len())
        } else {
            SessionError::ClientFull(held)
        })
    }

    /// The creation tokens `client` has now (its bucket refilled at the creation rate, up to
    /// its share); an error when it has less than one.
    fn tokens(
        &self,
        live: &Live<K, V>,
        client: Option<IpAddr>,
        now: Instant,
    ) -> Result<f64, SessionError> {
        let rate = self.limits.creation_rate();
        let Some(c) = client.filter(|_| rate.is_finite()) else {
            return Ok(f64::INFINITY);
        };
        let burst = self.limits.per_client() as f64;
        let tokens = match live.buckets.get(&c) {
            Some(&(t, at)) => {
                (t + rate * now.saturating_duration_since(at).as_secs_f64()).min(burst)
            }
            None => burst,
        };
        if tokens < 1.0 {
            return Err(SessionError::TooFast(rate));
        }
        Ok(tokens)
    }

    /// Spends one of `client`'s `tokens` on a session admitted `now`. Buckets that have
    /// refilled are forgotten once there are many, so the map stays bounded.
    fn spend(&self, live: &mut Live<K, V>, client: IpAddr, tokens: f64, now: Instant) {
        live.buckets.insert(client, (tokens - 1.0, now));
        if live.buckets.len() > 4 * self.limits.max_sessions.max(256) {
            let (burst, rate) = (self.limits.per_client() as f64, self.limits.creation_rate());
            live.buckets.retain(|_, (t, at)| {
                *t + rate * now.saturating_duration_since(*at).as_secs_f64() < burst
            });
        }
    }

    /// The session idle longest (of `client`, or of anyone), if idle long enough to evict.
    fn idlest(&self, live: &Live<K, V>, now: Instant, client: Option<IpAddr>) -> Option<K> {
        live.map
            .iter()
            .filter(|(_, e)| client.is_none() || e.client == client)
            .map(|(k, e)| (now.saturating_duration_since(e.seen), k))
            .filter(|(idle, _)| *idle >= self.limits.evict_idle_after)
            .max_by_key(|(idle, _)| *idle)
            .map(|(_, k)| k.clone())
    }

    fn evict_idlest(
        &self,
        live: &mut Live<K, V>,
        now: Instant,
        client: Option<IpAddr>,
    ) -> Option<()> {
        let key = self.idlest(live, now, client)?;
        let e = live.take(&key)?;
        live.evicted.push((key, e.value));
        self.ended.fetch_add(1, Ordering::Relaxed);
        self.wake.notify_one();
        Some(())
    }

    /// Records activity on a session (resets its idle clock); false when it is not live.
    pub fn touch(&self, key: &K) -> bool {
        match self.lock().map.get_mut(key) {
            Some(e) => {
                e.seen = Instant::now();
                true
            }
            None => false,
        }
    }

    /// The value of a live session, recording activity on it (resets its idle clock).
    pub fn get(&self, key: &K) -> Option<V> {
        self.lock().map.get_mut(key).map(|e| {
            e.seen = Instant::now();
            e.value.clone()
        })
    }

    /// Forgets a session (it ended); false when it was not live.
    pub fn remove(&self, key: &K) -> bool {
        let removed = self.lock().take(key).is_some();
        if removed {
            self.ended.fetch_add(1, Ordering::Relaxed);
        }
        removed
    }

    /// Sessions that ended since the table was made (removed, expired or evicted).
    pub fn ended(&self) -> u64 {
        self.ended.load(Ordering::Relaxed)
    }

    /// Live sessions.
    pub fn len(&self) -> usize {
        self.lock().map.len()
    }

    /// Live sessions of `client`.
    pub fn held_by(&self, client: IpAddr) -> usize {
        self.lock().per_client.get(&client).copied().unwrap_or(0)
    }

    /// True when no session is live.
    pub fn is_empty(&self) -> bool {
        self.lock().map.is_empty()
    }

    /// Removes and returns the sessions evicted for newcomers, then those idle longer than the
    /// idle timeout or older than the lifetime at `now`, oldest first.
    pub fn take_expired(&self, now: Instant) -> Vec<(K, V)> {
        let mut live = self.lock();
        let mut taken = std::mem::take(&mut live.evicted);
        let mut expired: Vec<(Instant, K)> = live
            .map
            .iter()
            .filter(|(_, e)| {
                now.saturating_duration_since(e.seen) >= self.limits.idle_timeout
                    || now.saturating_duration_since(e.opened) >= self.limits.max_lifetime
            })
            .map(|(k, e)| (e.opened, k.clone()))
            .collect();
        expired.sort_by_key(|(opened, _)| *opened);
        let before = taken.len();
        for (_, k) in expired {
            if let Some(e) = live.take(&k) {
                taken.push((k, e.value));
            }
        }
        self.ended
            .fetch_add((taken.len() - before) as u64, Ordering::Relaxed);
        taken
    }
}

impl<K, V> SessionTable<K, V>
where
    K: Eq + Hash + Clone + Send + 'static,
    V: Clone + Send + 'static,
{
    /// Spawns the reaper on the current tokio runtime: every [`SessionLimits::reap_period`] it
    /// (and at once after an eviction) takes the expired and evicted sessions and awaits
    /// `close` for each; after closing some it returns
    /// freed memory to the system (glibc keeps it in its arenas otherwise). Runs until the
    /// table is dropped.
    pub fn spawn_reaper<F, Fut>(self: &Arc<Self>, close: F) -> tokio::task::JoinHandle<()>
    where
        F: Fn(K, V) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send,
    {
        let table = Arc::downgrade(self);
        let period = self.limits.reap_period();
        let wake = self.wake.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            // A session's state is dropped by its own task once it ends (however it ended:
            // expired here, DELETE, the protocol's own timer): after sessions end, memory is
            // handed back on the next two ticks, when those tasks are done.
            let (mut ended_seen, mut trims_due) = (0u64, 0u8);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = wake.notified() => {}
                }
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
#[derive(Clone, Debug)]
pub struct ConnectionLimits {
    /// Connections at once, per client, their idle timeout and longest life (beyond the cap:
    /// 503 with `Retry-After`, and close).
    pub sessions: SessionLimits,
    /// Time for a request's headers to arrive.
    pub header_timeout: Duration,
    /// Largest request body, in bytes: a larger declared `Content-Length` is answered 413
    /// before any of the body is read; a body that grows past it, 413 when it does.
    pub max_body_bytes: usize,
    /// Time for a request's whole body to arrive (408 beyond).
    pub body_timeout: Duration,
    /// Time a connection closed by the reaper gets to finish its request in flight.
    pub drain_timeout: Duration,
}

/// A connection's slot in its server's table. The connection holds it, and so does the
/// WebSocket a request upgrades the connection to (axum hands the socket on and the HTTP
/// connection ends): the slot is freed when the last holder drops it, so an upgraded socket
/// still counts against the connection cap. Requests find it in their extensions.
#[derive(Clone)]
pub struct ConnectionSlot(Arc<SlotInner>);

struct SlotInner {
    id: u64,
    table: Arc<SessionTable<u64, Arc<Shutdown>>>,
    shutdown: Arc<Shutdown>,
}

impl Drop for SlotInner {
    fn drop(&mut self) {
        self.table.remove(&self.id);
    }
}

impl ConnectionSlot {
    /// Records activity (a WebSocket message resets the connection's idle clock).
    pub fn touch(&self) {
        self.0.table.touch(&self.0.id);
    }

    /// Waits until the reaper closes the connection (idle or over age).
    pub async fn closed(&self) {
        self.0.shutdown.closed().await
    }
}

/// Serves `app` on `listener` until the process ends, one HTTP/1 connection per task (with
/// upgrades, for WebSockets) under `limits`: beyond the connection cap, or a client's share of
/// it, a connection is answered 503 and closed; idle and over-age connections are closed by
/// the reaper; headers must arrive within the header timeout and bodies within the body
/// timeout, copied into one buffer as they arrive; sockets send without Nagle's delay. Each
/// request runs as serving its peer's address ([`current_client`]) and carries its
/// [`ConnectionSlot`].
pub async fn serve_connections(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    limits: ConnectionLimits,
) -> Result<(), SessionError> {
    // One entry per connection, with the signal that closes it; the reaper fires it when the
    // connection has been idle too long or has lived too long.
    // Connections are bounded in number, per client and in time; the creation rate bounds
    // sessions (a client without keep-alive opens a connection per request).
    let connections = SessionLimits {
        new_per_client_per_s: Some(f64::INFINITY),
        ..limits.sessions.clone()
    };
    let table: Arc<SessionTable<u64, Arc<Shutdown>>> = Arc::new(SessionTable::new(connections)?);
    let _reaper = table.spawn_reaper(|_, close: Arc<Shutdown>| async move { close.close() });
    let app = app.layer(axum::middleware::from_fn_with_state(
        (limits.max_body_bytes, limits.body_timeout),
        read_body,
    ));
    let mut next_id = 0u64;
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(_) => {
                // Out of file descriptors or a reset before accept: back off, keep serving.
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        next_id += 1;
        let id = next_id;
        let client = peer.ip();
        let shutdown = Arc::new(Shutdown::default());
        if let Err(e) = table.admit_for(id, shutdown.clone(), Some(client)) {
            tokio::spawn(refuse(stream, e));
            continue;
        }
        let slot = ConnectionSlot(Arc::new(SlotInner {
            id,
            table: table.clone(),
            shutdown: shutdown.clone(),
        }));
        let (app, limits) = (app.clone(), limits.clone());
        tokio::spawn(async move {
            use hyper::service::Service as _;
            let inner = hyper_util::service::TowerToHyperService::new(app);
            let held = slot.clone();
            let service = hyper::service::service_fn(move |mut req: hyper::Request<_>| {
                held.touch();
                req.extensions_mut().insert(held.clone());
                serve_as(client, inner.call(req))
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
                _ = shutdown.closed() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(limits.drain_timeout, conn).await;
                }
            }
            drop(slot);
        });
    }
}

/// Reads a request's body into one buffer before the routes see it: 413 at once for a declared
/// `Content-Length` over the bound, 413 when the body grows past it, 408 when it has not all
/// arrived within the body timeout. (Each chunk is copied as it arrives, so a body dripped a
/// byte at a time costs its size, not a read buffer per byte.)
async fn read_body(
    axum::extract::State((max, timeout)): axum::extract::State<(usize, Duration)>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::body::{Body, HttpBody as _};
    use axum::http::StatusCode;
    let refuse = |status: StatusCode, message: String| {
        use axum::response::IntoResponse;
        (
            status,
            [(axum::http::header::CONNECTION, "close")],
            axum::Json(serde_json::json!({"error": message, "detail": message})),
        )
            .into_response()
    };
    let declared = request
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "request body of {} bytes is over the limit of {max}",
                declared.unwrap_or(0)
            ),
        );
    }
    let (parts, mut body) = request.into_parts();
    if body.is_end_stream() {
        return next
            .run(axum::extract::Request::from_parts(parts, body))
            .await;
    }
    // Grown as bytes arrive, never to a declared length: a client pays for what it sends.
    let mut buf: Vec<u8> = Vec::new();
    let read = async {
        while let Some(frame) =
            std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx)).await
        {
            let Ok(frame) = frame else {
                return Err((
                    StatusCode::BAD_REQUEST,
                    "the request body broke off".to_owned(),
                ));
            };
            if let Ok(data) = frame.into_data() {
                if buf.len() + data.len() > max {
                    return Err((
                        StatusCode::PAYLOAD_TOO_LARGE,
                        format!("request body is over the limit of {max} bytes"),
                    ));
                }
                buf.extend_from_slice(&data);
            }
        }
        Ok(())
    };
    match tokio::time::timeout(timeout, read).await {
        Ok(Ok(())) => {}
        Ok(Err((status, message))) => return refuse(status, message),
        Err(_) => {
            return refuse(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "request body not received within {} s",
                    timeout.as_secs_f64()
                ),
            );
        }
    }
    next.run(axum::extract::Request::from_parts(parts, Body::from(buf)))
        .await
}

/// Answers a connection beyond the limit with 503 and closes it: the reply, then our end shut,
/// then what the client sent is read and dropped (at most 64 KiB, at most 1 s) so that the close
/// is a FIN the client reads the reply before, not a reset that discards it.
async fn refuse(mut stream: tokio::net::TcpStream, why: SessionError) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let body = serde_json::json!({"error": why.to_string(), "detail": why.to_string()}).to_string();
    let reply = format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nRetry-After: {RETRY_AFTER_S}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        stream.write_all(reply.as_bytes()).await?;
        stream.shutdown().await?;
        let mut sink = [0u8; 4096];
        let mut left = 64 * 1024;
        while left > 0 {
            match stream.read(&mut sink).await? {
                0 => break,
                n => left -= n.min(left),
            }
        }
        std::io::Result::Ok(())
    })
    .await;
}

/// Seconds a refused client is told to wait (`Retry-After`).
pub const RETRY_AFTER_S: u64 = 1;

/// The tokio runtime every network server runs on. Its memory is bounded for a burst of
/// clients: at most four blocking threads per core (tokio's default is 512), and glibc keeps
/// one malloc arena per core rather than up to eight (each thread that allocates may
/// otherwise take its own arena, which is never unmapped: ~200 KiB a thread that outlives
/// the burst).
pub fn server_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets a glibc tuning parameter; it takes no pointers.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, cores.min(64) as libc::c_int);
    }
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(4 * cores)
        .build()
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

/// The body of a session refusal: a JSON-RPC error (MCP clients read it as one; plain HTTP
/// clients read `error.message`).
pub fn refusal_body(why: &SessionError) -> String {
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": -32000, "message": why.to_string()},
    })
    .to_string()
}

/// A session refusal as every server answers it, with [`refusal_body`]: HTTP 503 with
/// `Retry-After` for a bound that frees up (the cap, the client's share, its rate), 403 for a
/// client that has spent its [`EpisodeBudget`].
pub fn refusal_response(why: &SessionError) -> axum::response::Response {
    use axum::http::{StatusCode, header};
    use axum::response::IntoResponse;
    let json = (header::CONTENT_TYPE, "application/json".to_owned());
    match why {
        // Spent for good: waiting would not help.
        SessionError::EpisodesSpent(_) | SessionError::TooManyClients(_) => {
            (StatusCode::FORBIDDEN, [json], refusal_body(why)).into_response()
        }
        _ => (
            StatusCode::SERVICE_UNAVAILABLE,
            [json, (header::RETRY_AFTER, RETRY_AFTER_S.to_string())],
            refusal_body(why),
        )
            .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(cap: usize, idle_ms: u64, life_ms: u64) -> SessionLimits {
        SessionLimits {
            max_sessions: cap,
            idle_timeout: Duration::from_millis(idle_ms),
            max_lifetime: Duration::from_millis(life_ms),
            max_per_client: Some(cap),
            evict_idle_after: Duration::from_secs(3600),
            new_per_client_per_s: Some(1e9),
        }
    }

    #[test]
    fn a_client_opens_sessions_no_faster_than_its_rate() {
        let mut l = limits(8, 10_000, 10_000);
        l.max_per_client = Some(4);
        l.new_per_client_per_s = Some(20.0);
        let t: SessionTable<u32> = SessionTable::new(l).unwrap();
        // A burst of the whole share, closed at once: the churn is then held to the rate.
        for k in 0..4 {
            t.admit_for(k, (), ip(2)).unwrap();
            assert!(t.remove(&k));
        }
        assert_eq!(t.admit_for(9, (), ip(2)), Err(SessionError::TooFast(20.0)));
        assert_eq!(t.len(), 0);
        // Another client is not slowed down.
        t.admit_for(10, (), ip(3)).unwrap();
        // One token comes back every 50 ms.
        std::thread::sleep(Duration::from_millis(60));
        t.admit_for(9, (), ip(2)).unwrap();
        assert_eq!(t.admit_for(11, (), ip(2)), Err(SessionError::TooFast(20.0)));
        let mut bad = limits(8, 10_000, 10_000);
        bad.new_per_client_per_s = Some(0.0);
        assert!(matches!(
            SessionTable::<u32>::new(bad),
            Err(SessionError::BadRate(_))
        ));
    }

    fn ip(last: u8) -> Option<IpAddr> {
        Some(IpAddr::from([127, 0, 0, last]))
    }

    #[test]
    fn a_client_holds_its_share_and_idle_sessions_make_room() {
        let mut l = limits(4, 10_000, 10_000);
        l.max_per_client = None;
        l.evict_idle_after = Duration::from_millis(50);
        let t: SessionTable<u32, u32> = SessionTable::new(l).unwrap();
        assert_eq!(t.limits().per_client(), 2);
        t.admit_for(1, 1, ip(2)).unwrap();
        t.admit_for(2, 2, ip(2)).unwrap();
        // The attacker's share is full and nothing is idle yet: refused; others get in.
        assert_eq!(t.admit_for(3, 3, ip(2)), Err(SessionError::ClientFull(2)));
        t.admit_for(4, 4, ip(3)).unwrap();
        t.admit_for(5, 5, None).unwrap();
        assert_eq!(t.held_by(IpAddr::from([127, 0, 0, 2])), 2);
        assert_eq!(t.admit_for(6, 6, ip(4)), Err(SessionError::Full(4)));
        std::thread::sleep(Duration::from_millis(60));
        t.touch(&2);
        t.touch(&4);
        // Full: the idlest session (1, idle 60 ms) is evicted for the newcomer, and handed to
        // the reaper to close.
        t.admit_for(6, 6, ip(4)).unwrap();
        assert_eq!(t.len(), 4);
        assert_eq!(t.held_by(IpAddr::from([127, 0, 0, 2])), 1);
        assert_eq!(t.take_expired(Instant::now()), vec![(1, 1)]);
        assert_eq!(t.ended(), 1);
        // A client over its share makes room from its own idle sessions only.
        std::thread::sleep(Duration::from_millis(60));
        t.touch(&5);
        t.touch(&6);
        t.admit_for(7, 7, ip(3)).unwrap(); // evicts 2, the idlest of all
        t.admit_for(8, 8, ip(3)).unwrap(); // at its share: evicts its own idle 4
        assert_eq!(t.admit_for(9, 9, ip(3)), Err(SessionError::Full(4)));
        let mut evicted = t.take_expired(Instant::now());
        evicted.sort();
        assert_eq!(evicted, vec![(2, 2), (4, 4)]);
        assert_eq!(t.held_by(IpAddr::from([127, 0, 0, 3])), 2);
    }

    #[test]
    fn cap_refuses_one_more_and_frees_a_slot_on_remove() {
        let t: SessionTable<u32> = SessionTable::new(limits(2, 1000, 1000)).unwrap();
        t.admit(1, ()).unwrap();
        t.admit(2, ()).unwrap();
        assert_eq!(t.admit(3, ()), Err(SessionError::Full(2)));
        assert_eq!(t.refusal(), Some(SessionError::Full(2)));
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

    #[tokio::test]
    async fn a_shutdown_reaches_every_waiter_before_and_after_it_fires() {
        let s = Arc::new(Shutdown::default());
        let early = tokio::spawn({
            let s = s.clone();
            async move { s.closed().await }
        });
        tokio::task::yield_now().await;
        s.close();
        early.await.unwrap();
        tokio::time::timeout(Duration::from_secs(1), s.closed())
            .await
            .unwrap();
    }

    #[test]
    fn bad_limits_are_refused() {
        let mut share = limits(4, 1, 1);
        share.max_per_client = Some(5);
        assert_eq!(share.validate(), Err(SessionError::BadPerClient(5, 4)));
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
        let v: serde_json::Value =
            serde_json::from_str(&refusal_body(&SessionError::Full(7))).unwrap();
        assert_eq!(v["error"]["code"], -32000);
        assert!(v["error"]["message"].as_str().unwrap().contains("7 live"));
    }
}
