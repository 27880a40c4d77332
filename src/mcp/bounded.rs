//! MCP streamable-HTTP sessions under the shared [`SessionLimits`]: rmcp's
//! [`LocalSessionManager`] wrapped so that every session is admitted into a
//! [`SessionTable`] (refused beyond the cap), its activity resets the idle clock, and the
//! table's reaper closes idle and over-age sessions (which ends their episode and frees it).

use crate::sessions::{EpisodeBudget, SessionError, SessionLimits, SessionTable, refusal_response};
use futures_core::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, SessionConfig,
};
use rmcp::transport::streamable_http_server::session::{
    EventStore, RestoreOutcome, ServerSseMessage, SessionId, SessionManager,
};
use std::sync::Arc;

/// Why a bounded session operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BoundedError {
    /// The cap is reached (or the limits are unusable).
    #[error(transparent)]
    Limit(#[from] SessionError),
    /// rmcp's session manager failed.
    #[error(transparent)]
    Inner(#[from] LocalSessionManagerError),
}

/// rmcp's local session manager under a [`SessionTable`].
pub struct BoundedSessions {
    inner: LocalSessionManager,
    table: Arc<SessionTable<SessionId>>,
}

impl BoundedSessions {
    /// A manager enforcing `limits`; rmcp's own idle timer is set to the same idle timeout.
    pub fn new(limits: SessionLimits) -> Result<Arc<Self>, SessionError> {
        let mut inner = LocalSessionManager::default();
        inner.session_config = {
            let mut c = SessionConfig::default();
            c.keep_alive = Some(limits.idle_timeout);
            c
        };
        Ok(Arc::new(BoundedSessions {
            inner,
            table: Arc::new(SessionTable::new(limits)?),
        }))
    }

    /// The live sessions.
    pub fn table(&self) -> &Arc<SessionTable<SessionId>> {
        &self.table
    }

    /// Starts the reaper (on the current tokio runtime): expired sessions are closed as a
    /// DELETE would close them, each in its own task under a timeout, so a session whose worker
    /// is stuck (its channel full) never holds up the others; rmcp's own idle timer, set to the
    /// same timeout, ends such a worker.
    pub fn spawn_reaper(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let me = Arc::downgrade(self);
        self.table.spawn_reaper(move |id: SessionId, ()| {
            let me = me.clone();
            async move {
                if let Some(me) = me.upgrade() {
                    tokio::spawn(async move {
                        let close = me.inner.close_session(&id);
                        let _ =
                            tokio::time::timeout(std::time::Duration::from_secs(5), close).await;
                    });
                }
            }
        })
    }

    fn touch(&self, id: &SessionId) {
        self.table.touch(id);
    }
}

impl SessionManager for BoundedSessions {
    type Error = BoundedError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        if let Some(why) = self.table.refusal() {
            return Err(why.into());
        }
        let (id, transport) = self.inner.create_session().await?;
        if let Err(e) = self.table.admit(id.clone(), ()) {
            // Lost a race for the last slot: undo the session rmcp just made.
            let _ = self.inner.close_session(&id).await;
            return Err(e.into());
        }
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.touch(id);
        Ok(self.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.table.remove(id);
        Ok(self.inner.close_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id);
        Ok(self.inner.create_stream(id, message).await?)
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.touch(id);
        Ok(self.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id);
        Ok(self.inner.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id);
        Ok(self.inner.resume(id, last_event_id).await?)
    }

    async fn restore_session(
        &self,
        _id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        // No external session store: a session the server forgot stays forgotten (404).
        Ok(RestoreOutcome::NotSupported)
    }

    fn event_store(&self) -> Option<Arc<dyn EventStore>> {
        None
    }
}

/// What a new MCP session must pass before rmcp creates it ([`admit_new_sessions`]).
#[derive(Clone)]
pub(super) struct Admission {
    /// The live sessions (the cap, the client's share, its creation rate).
    pub(super) table: Arc<SessionTable<SessionId>>,
    /// Sessions each client may start over the server's life.
    pub(super) episodes: Arc<EpisodeBudget>,
}

/// An axum middleware answering a new session's `initialize` with 503, `Retry-After` and a
/// JSON-RPC error when the client could not be admitted (rmcp would answer a refused session
/// with a 500) or has started its budget of episodes; a request that opened no session (it
/// failed) gives its charge back.
pub(super) async fn admit_new_sessions(
    axum::extract::State(admission): axum::extract::State<Admission>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let opens_session = request.method() == axum::http::Method::POST
        && !request.headers().contains_key("mcp-session-id");
    if !opens_session {
        return next.run(request).await;
    }
    if let Some(why) = admission.table.refusal() {
        return refusal_response(&why);
    }
    let client = crate::sessions::current_client();
    if let Err(why) = admission.episodes.charge(client) {
        return refusal_response(&why);
    }
    let response = next.run(request).await;
    if !response.status().is_success() {
        admission.episodes.refund(client);
    }
    response
}
