//! The one client configuration: where a caller's model requests go (an OpenAI-compatible
//! endpoint, its key, timeouts, retries, a concurrency limit) and where every exchange is
//! recorded for offline replay. Evaluation, synthesis, `tools play`/`agree` and the tool-use
//! simulation all build their backend here ([`ClientConfig::backend`]), and the CLI fills it
//! from one flattened set of flags.

use super::{CacheMode, CachedBackend, LlmBackend, LlmError, SchemaFormat};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How a caller reaches its model and records the exchanges.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClientConfig {
    /// OpenAI-compatible endpoint: a base URL (`http://host:8000/v1`) or the full
    /// chat-completions URL. Not needed when replaying.
    pub endpoint: Option<String>,
    /// The environment variable holding the API key (an unset or blank named variable is an
    /// error, never an unauthenticated run). `None`: `OPENAI_API_KEY` when it is set, as
    /// OpenAI's own clients do, else no key.
    pub api_key_env: Option<String>,
    /// Seconds one request may take before it counts as failed (and is retried).
    pub timeout_s: f64,
    /// Retries after the first attempt (transport errors, 408, 429, 5xx).
    pub max_retries: u32,
    /// First retry backoff in milliseconds (doubled per retry, capped at 30 s).
    pub backoff_ms: u64,
    /// Most requests in flight at once (all threads together).
    pub max_concurrency: usize,
    /// How a request's answer schema is sent (`response_format`).
    pub schema_format: SchemaFormat,
    /// Record every exchange here (one file per request hash) and reuse recorded answers.
    pub cache: Option<PathBuf>,
    /// Only recorded answers from `cache`: no request leaves the process; a miss is
    /// [`LlmError::NotRecorded`].
    pub replay_only: bool,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            endpoint: None,
            api_key_env: None,
            timeout_s: 120.0,
            max_retries: 4,
            backoff_ms: 500,
            max_concurrency: 16,
            schema_format: SchemaFormat::JsonSchema,
            cache: None,
            replay_only: false,
        }
    }
}

/// `inner` behind the record/replay cache in `dir`: misses go to `inner` and are recorded;
/// with `replay_only` (or no `inner`) only recorded answers are given.
pub fn recorded(
    inner: Option<Arc<dyn LlmBackend>>,
    dir: &Path,
    replay_only: bool,
) -> Arc<dyn LlmBackend> {
    let (inner, mode) = match inner {
        Some(inner) if !replay_only => (Some(inner), CacheMode::Record),
        _ => (None, CacheMode::Replay),
    };
    Arc::new(CachedBackend::new(inner, dir, mode))
}

impl ClientConfig {
    /// The same configuration with another endpoint (a simulator's or a judge's), when given.
    pub fn with_endpoint(&self, endpoint: Option<&str>) -> ClientConfig {
        ClientConfig {
            endpoint: endpoint
                .map(str::to_owned)
                .or_else(|| self.endpoint.clone()),
            ..self.clone()
        }
    }

    /// Checks the ranges and that a replay has a cache to replay from.
    pub fn validate(&self) -> Result<(), LlmError> {
        let config = |m: String| Err(LlmError::Config(m));
        if !(self.timeout_s.is_finite() && self.timeout_s > 0.0 && self.timeout_s <= 3600.0) {
            return config(format!(
                "timeout_s {} must be a number of seconds in (0, 3600]",
                self.timeout_s
            ));
        }
        if self.max_retries > 16 {
            return config(format!(
                "max_retries {} must be at most 16",
                self.max_retries
            ));
        }
        if self.backoff_ms > 60_000 {
            return config(format!(
                "backoff_ms {} must be at most 60000",
                self.backoff_ms
            ));
        }
        if !(1..=1024).contains(&self.max_concurrency) {
            return config(format!(
                "max_concurrency {} must be 1-1024",
                self.max_concurrency
            ));
        }
        if self.replay_only && self.cache.is_none() {
            return config("replay-only needs a cache directory (the recorded exchanges)".into());
        }
        Ok(())
    }

    /// The HTTP client of the endpoint; `None` when replaying or without an endpoint.
    #[cfg(feature = "http")]
    pub fn http(&self) -> Result<Option<Arc<dyn LlmBackend>>, LlmError> {
        use super::openai::{OpenAiBackend, OpenAiConfig, api_key_from_env};
        use std::time::Duration;
        self.validate()?;
        let Some(endpoint) = self.endpoint.as_ref().filter(|_| !self.replay_only) else {
            return Ok(None);
        };
        let api_key = match &self.api_key_env {
            Some(var) => Some(api_key_from_env("api key variable", var)?),
            None => std::env::var("OPENAI_API_KEY")
                .ok()
                .filter(|k| !k.trim().is_empty()),
        };
        let client = OpenAiBackend::new(OpenAiConfig {
            endpoint: endpoint.clone(),
            api_key,
            timeout: Duration::from_secs_f64(self.timeout_s),
            max_retries: self.max_retries,
            backoff: Duration::from_millis(self.backoff_ms),
            max_concurrency: self.max_concurrency,
            schema_format: self.schema_format,
        })?;
        Ok(Some(Arc::new(client)))
    }

    /// Without the `http` feature there is no HTTP client: an endpoint is an error unless
    /// replaying.
    #[cfg(not(feature = "http"))]
    pub fn http(&self) -> Result<Option<Arc<dyn LlmBackend>>, LlmError> {
        self.validate()?;
        match (&self.endpoint, self.replay_only) {
            (Some(_), false) => Err(LlmError::Config(
                "this build of rulegym has no HTTP client (feature `http`): an endpoint cannot \
                 be used"
                    .into(),
            )),
            _ => Ok(None),
        }
    }

    /// The backend a caller uses: the endpoint's client, behind the record/replay cache when
    /// there is one. Errors when there is no endpoint and no replay.
    pub fn backend(&self) -> Result<Arc<dyn LlmBackend>, LlmError> {
        let http = self.http()?;
        match (&self.cache, http) {
            (Some(dir), http) if http.is_some() || self.replay_only => {
                Ok(recorded(http, dir, self.replay_only))
            }
            (None, Some(http)) => Ok(http),
            _ => Err(LlmError::Config(
                "an endpoint is required unless replaying from a cache".into(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{ChatMessage, ChatRequest, Role, ScriptedBackend};

    #[test]
    fn replay_needs_a_cache_and_a_live_run_an_endpoint() {
        let replay = ClientConfig {
            replay_only: true,
            ..ClientConfig::default()
        };
        assert!(matches!(replay.backend(), Err(LlmError::Config(m)) if m.contains("cache")));
        let nothing = ClientConfig::default();
        assert!(matches!(nothing.backend(), Err(LlmError::Config(m)) if m.contains("endpoint")));
        let cache_only = ClientConfig {
            cache: Some("unused".into()),
            ..ClientConfig::default()
        };
        assert!(matches!(cache_only.backend(), Err(LlmError::Config(m)) if m.contains("endpoint")));
        let bad = ClientConfig {
            timeout_s: f64::NAN,
            ..ClientConfig::default()
        };
        assert!(matches!(bad.validate(), Err(LlmError::Config(m)) if m.contains("timeout")));
    }

    #[test]
    fn recorded_answers_replay_without_the_inner_backend() {
        let dir = std::env::temp_dir().join(format!("rulegym-client-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let request = ChatRequest::new("m", vec![ChatMessage::text(Role::User, "hi")]);
        let inner: Arc<dyn LlmBackend> = Arc::new(ScriptedBackend::constant("hello"));
        let live = recorded(Some(inner), &dir, false);
        let first = live.chat(&request).unwrap();
        let replay = ClientConfig {
            cache: Some(dir.clone()),
            replay_only: true,
            endpoint: Some("http://127.0.0.1:9/v1".into()),
            ..ClientConfig::default()
        }
        .backend()
        .unwrap();
        assert_eq!(replay.chat(&request).unwrap(), first);
        let other = ChatRequest::new("m", vec![ChatMessage::text(Role::User, "bye")]);
        assert!(matches!(replay.chat(&other), Err(LlmError::NotRecorded(_))));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn with_endpoint_keeps_the_rest() {
        let base = ClientConfig {
            endpoint: Some("http://a/v1".into()),
            max_concurrency: 3,
            ..ClientConfig::default()
        };
        let judge = base.with_endpoint(Some("http://b/v1"));
        assert_eq!(judge.endpoint.as_deref(), Some("http://b/v1"));
        assert_eq!(judge.max_concurrency, 3);
        assert_eq!(base.with_endpoint(None), base);
    }
}
