//! The state every route shares, the failures answered to clients, and the session
//! operations (`reset`, `step`, `state`) behind both the WebSocket and HTTP routes.

use super::ServerConfig;
use super::action::{Action, call_payload, payload};
use super::session::{Session, lock};
use crate::sessions::SessionTable;
use crate::toolcall::{ResetRequest, World};
use serde_json::{Map, Value, json};
use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

pub(super) struct App {
    pub(super) world: Arc<World>,
    pub(super) sessions: Arc<SessionTable<String, Arc<Session>>>,
    pub(super) cfg: ServerConfig,
    pub(super) next: AtomicU64,
    pub(super) ids: std::hash::RandomState,
    /// WebSockets open now.
    pub(super) sockets: std::sync::atomic::AtomicUsize,
    /// Episode starts per client.
    pub(super) resets: Arc<crate::sessions::EpisodeBudget>,
}

/// A failure answered to the client: an error frame (WebSocket) or status (HTTP).
#[derive(Debug)]
pub(super) struct Failure {
    pub(super) code: &'static str,
    pub(super) message: String,
}

impl From<crate::sessions::SessionError> for Failure {
    fn from(e: crate::sessions::SessionError) -> Self {
        Failure::new("CAPACITY_REACHED", e.to_string())
    }
}

impl Failure {
    pub(super) fn new(code: &'static str, message: impl Into<String>) -> Self {
        Failure {
            code,
            message: message.into(),
        }
    }
}

impl App {
    pub(super) fn session_id(&self) -> String {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        format!("{:016x}{:08x}", self.ids.hash_one(n), n)
    }

    /// Runs blocking episode work off the async threads, bounded by the call timeout.
    async fn blocking<T: Send + 'static>(
        &self,
        job: impl FnOnce() -> Result<T, Failure> + Send + 'static,
    ) -> Result<T, Failure> {
        let task = tokio::task::spawn_blocking(job);
        match tokio::time::timeout(self.cfg.call_timeout, task).await {
            Ok(Ok(r)) => r,
            Ok(Err(join)) => Err(Failure::new(
                "EXECUTION_ERROR",
                format!("the call failed: {join}"),
            )),
            Err(_) => Err(Failure::new(
                "EXECUTION_ERROR",
                format!(
                    "the call ran past {} s and was abandoned",
                    self.cfg.call_timeout.as_secs_f64()
                ),
            )),
        }
    }

    /// Starts the episode `data` asks for in `session`; returns the reset payload.
    pub(super) async fn reset(
        &self,
        session: &Arc<Session>,
        data: Value,
    ) -> Result<Value, Failure> {
        let data = if data.is_null() { json!({}) } else { data };
        let req: ResetRequest = serde_json::from_value(data).map_err(|e| {
            Failure::new(
                "VALIDATION_ERROR",
                format!(
                    "bad reset arguments: {e} (accepted: seed, episode_id, question_id, \
                     task_id, split, index)"
                ),
            )
        })?;
        if let Some(id) = &req.episode_id
            && id.len() > crate::toolcall::limits::MAX_EPISODE_ID_BYTES
        {
            return Err(Failure::new(
                "VALIDATION_ERROR",
                format!(
                    "episode_id of {} bytes is over the limit of {}",
                    id.len(),
                    crate::toolcall::limits::MAX_EPISODE_ID_BYTES
                ),
            ));
        }
        let client = crate::sessions::current_client();
        self.resets.charge(client)?;
        let (world, resets) = (self.world.clone(), self.resets.clone());
        let s = session.clone();
        self.blocking(move || {
            let started = world.start_episode(&req).map_err(|e| {
                resets.refund(client);
                Failure::new("EXECUTION_ERROR", e.to_string())
            })?;
            let opening = started.session.opening();
            s.drawn.store(started.drawn, Ordering::Relaxed);
            *lock(&s.episode) = Some(started.session);
            *lock(&s.episode_id) = req.episode_id;
            s.steps.store(0, Ordering::Relaxed);
            Ok(payload(opening, None, false))
        })
        .await
    }

    /// Applies an action (`list_tools` or `call_tool`) to the session's episode, starting the
    /// next one first when the session has none.
    pub(super) async fn step(&self, session: &Arc<Session>, data: Value) -> Result<Value, Failure> {
        let action = Action::parse(&data)?;
        let world = self.world.clone();
        let s = session.clone();
        let (resets, client) = (self.resets.clone(), crate::sessions::current_client());
        self.blocking(move || {
            let mut ep = lock(&s.episode);
            if ep.is_none() {
                resets.charge(client)?;
                let fresh = world.start_episode(&ResetRequest::default()).map_err(|e| {
                    resets.refund(client);
                    Failure::new("EXECUTION_ERROR", e.to_string())
                })?;
                s.drawn.store(fresh.drawn, Ordering::Relaxed);
                *ep = Some(fresh.session);
            }
            let episode = ep.as_mut().expect("set above");
            s.steps.fetch_add(1, Ordering::Relaxed);
            let reply = match action {
                Action::ListTools => payload(
                    json!({"tools": episode.tools(), "metadata": {}}),
                    Some(episode.reward()),
                    episode.done(),
                ),
                Action::Call { name, arguments } => {
                    let outcome = episode.call(&name, &arguments);
                    call_payload(&name, outcome, episode)
                }
            };
            // A curriculum question's reward goes back to the curriculum once, when it ends.
            if episode.done() && s.drawn.swap(false, Ordering::Relaxed) {
                world
                    .report(episode.reward())
                    .map_err(|e| Failure::new("EXECUTION_ERROR", e.to_string()))?;
            }
            Ok(reply)
        })
        .await
    }

    pub(super) fn state(&self, session: &Session) -> Value {
        let mut m = Map::new();
        m.insert("episode_id".into(), json!(*lock(&session.episode_id)));
        m.insert(
            "step_count".into(),
            json!(session.steps.load(Ordering::Relaxed)),
        );
        if let Some(ep) = lock(&session.episode).as_ref() {
            m.extend(ep.state());
        }
        if let Some(c) = self.world.curriculum_state() {
            m.insert("curriculum_level".into(), json!(c.level));
        }
        Value::Object(m)
    }
}
