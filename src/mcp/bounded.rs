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
use std::sync::{Arc, Mutex};

tokio::task_local! {
    /// Where [`BoundedSessions::create_session`] leaves the refusal of the session the
    /// request being served tried to open ([`admit_new_sessions`] sets it and reads it back).
    static REFUSAL: Arc<Mutex<Option<SessionError>>>;
}

/// Records why the session this request tried to open was refused, for the middleware.
fn record_refusal(why: &SessionError) {
    let _ = REFUSAL.try_with(|slot| {
        *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(why.clone());
    });
}

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
            record_refusal(&why);
            return Err(why.into());
        }
        let (id, transport) = self.inner.create_session().await?;
        if let Err(why) = self.table.admit(id.clone(), ()) {
            // Lost a race for the last slot: undo the session rmcp just made.
            let _ = self.inner.close_session(&id).await;
            record_refusal(&why);
            return Err(why.into());
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
/// JSON-RPC error when the client could not be admitted or has started its budget of
/// episodes; a request that opened no session (it failed) gives its charge back. A refusal
/// that comes from the session manager itself (another request took the last slot between
/// this check and the admission) is answered the same way: rmcp would answer it with a 500.
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
    let refusal = Arc::new(Mutex::new(None));
    let response = REFUSAL.scope(refusal.clone(), next.run(request)).await;
    if !response.status().is_success() {
        admission.episodes.refund(client);
    }
    let refused = refusal.lock().unwrap_or_else(|e| e.into_inner()).take();
    match refused {
        Some(why) => refusal_response(&why),
        None => response,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sessions::EpisodeBudget;
    use tower::ServiceExt;

    /// Two `initialize` requests can both pass the middleware's check for the last slot; the
    /// one that loses the race is refused inside rmcp's handler, which answers 500 with no
    /// JSON-RPC body. The middleware answers it 503 with the refusal (and gives the episode
    /// back), as it answers a refusal it saw itself.
    #[test]
    fn a_refusal_inside_the_session_manager_is_answered_503_not_500() {
        let runtime = crate::sessions::server_runtime().unwrap();
        runtime.block_on(async {
            let episodes = Arc::new(EpisodeBudget::new(Some(1)));
            let admission = Admission {
                table: Arc::new(SessionTable::new(SessionLimits::default()).unwrap()),
                episodes: episodes.clone(),
            };
            // Stands in for rmcp's handler whose `create_session` lost the race.
            let app = axum::Router::new()
                .route(
                    "/mcp",
                    axum::routing::post(|| async {
                        record_refusal(&SessionError::Full(1024));
                        axum::http::StatusCode::INTERNAL_SERVER_ERROR
                    }),
                )
                .layer(axum::middleware::from_fn_with_state(
                    admission,
                    admit_new_sessions,
                ));
            let client: std::net::IpAddr = [127, 0, 0, 2].into();
            let request = || {
                axum::http::Request::post("/mcp")
                    .body(axum::body::Body::empty())
                    .unwrap()
            };
            let response = crate::sessions::serve_as(client, app.clone().oneshot(request()))
                .await
                .unwrap();
            assert_eq!(response.status(), 503);
            assert!(response.headers().contains_key("retry-after"));
            let body = axum::body::to_bytes(response.into_body(), 1 << 16)
                .await
                .unwrap();
            let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(body["error"]["code"], -32000, "{body}");
            // The refused start did not spend the client's one episode.
            assert_eq!(episodes.charge(Some(client)), Ok(()));
        });
    }
}
