//! The one OpenAI-compatible chat-completions client (vLLM, SGLang, llama.cpp's server, hosted
//! APIs), used by evaluation, synthesis, the simulators, the user and the judge: endpoint
//! normalisation ([`completions_url`]), per-request timeout, retries with exponential backoff on
//! 408/429/5xx and transport errors (honouring `Retry-After`), a concurrency limit shared by all
//! threads, `seed`, `stop` and `tools` passed through. Blocking (ureq, with rustls for https
//! endpoints). Put it behind a [`super::CachedBackend`] to record and replay.

use super::{ChatMessage, ChatRequest, ChatResponse, LlmBackend, LlmError, SchemaFormat};
use serde_json::{Value, json};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// Client options.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenAiConfig {
    /// Base URL (`http://host:8000/v1`) or the full `.../chat/completions` URL.
    pub endpoint: String,
    /// Sent as `Authorization: Bearer ...` when set.
    pub api_key: Option<String>,
    /// Timeout of one HTTP request.
    pub timeout: Duration,
    /// Retries after the first attempt (transport errors, 408, 429, 5xx).
    pub max_retries: u32,
    /// First backoff; doubles per retry, capped at 30 s.
    pub backoff: Duration,
    /// Most requests in flight at once (all threads together).
    pub max_concurrency: usize,
    /// How a request's answer schema is sent (`response_format`).
    pub schema_format: SchemaFormat,
}

impl Default for OpenAiConfig {
    fn default() -> Self {
        OpenAiConfig {
            endpoint: "http://127.0.0.1:8000/v1".into(),
            api_key: None,
            timeout: Duration::from_secs(120),
            max_retries: 4,
            backoff: Duration::from_millis(500),
            max_concurrency: 16,
            schema_format: SchemaFormat::JsonSchema,
        }
    }
}

/// A counting semaphore.
struct Semaphore {
    free: Mutex<usize>,
    cv: Condvar,
}

impl Semaphore {
    fn acquire(&self) -> SemaphoreGuard<'_> {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        while *free == 0 {
            free = self.cv.wait(free).unwrap_or_else(|e| e.into_inner());
        }
        *free -= 1;
        SemaphoreGuard(self)
    }
}

struct SemaphoreGuard<'a>(&'a Semaphore);

impl Drop for SemaphoreGuard<'_> {
    fn drop(&mut self) {
        *self.0.free.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        self.0.cv.notify_one();
    }
}

/// The HTTP client.
pub struct OpenAiBackend {
    agent: ureq::Agent,
    url: String,
    config: OpenAiConfig,
    permits: Semaphore,
}

impl OpenAiBackend {
    /// A client; errors on a non-HTTP(S) endpoint or a zero concurrency limit.
    pub fn new(config: OpenAiConfig) -> Result<Self, LlmError> {
        let endpoint = config.endpoint.trim_end_matches('/');
        if !endpoint.starts_with("http://") && !endpoint.starts_with("https://") {
            return Err(LlmError::Config(format!(
                "endpoint {endpoint:?} must start with http:// or https://"
            )));
        }
        if config.max_concurrency == 0 {
            return Err(LlmError::Config(
                "max_concurrency must be at least 1".into(),
            ));
        }
        let url = completions_url(endpoint);
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(config.timeout))
            .http_status_as_error(false)
            .build()
            .into();
        Ok(OpenAiBackend {
            agent,
            url,
            permits: Semaphore {
                free: Mutex::new(config.max_concurrency),
                cv: Condvar::new(),
            },
            config,
        })
    }

    /// The chat-completions URL requests go to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The request body sent for `request`.
    pub fn body(&self, request: &ChatRequest) -> Value {
        let mut body = json!({"model": request.model, "messages": request.messages});
        if !request.tools.is_empty() {
            body["tools"] = json!(request.tools);
            body["tool_choice"] = json!("auto");
        }
        if let Some(t) = request.temperature {
            body["temperature"] = json!(t);
        }
        if let Some(p) = request.top_p {
            body["top_p"] = json!(p);
        }
        if let Some(m) = request.max_tokens {
            body["max_tokens"] = json!(m);
        }
        if let Some(s) = request.seed {
            body["seed"] = json!(s);
        }
        if !request.stop.is_empty() {
            body["stop"] = json!(request.stop);
        }
        if let Some(answer) = &request.response_schema {
            match self.config.schema_format {
                SchemaFormat::JsonSchema => {
                    body["response_format"] = json!({"type": "json_schema",
                        "json_schema": {"name": answer.name, "schema": answer.schema}});
                }
                SchemaFormat::JsonObject => {
                    body["response_format"] =
                        json!({"type": "json_object", "schema": answer.schema});
                }
                SchemaFormat::Off => {}
            }
        }
        body
    }

    fn attempt(&self, body: &str) -> Result<ChatResponse, (LlmError, bool, Option<Duration>)> {
        let _permit = self.permits.acquire();
        let mut req = self
            .agent
            .post(&self.url)
            .header("Content-Type", "application/json");
        if let Some(key) = &self.config.api_key {
            req = req.header("Authorization", &format!("Bearer {key}"));
        }
        let mut resp = req
            .send(body.as_bytes())
            .map_err(|e| (LlmError::Transport(e.to_string()), true, None))?;
        let status = resp.status().as_u16();
        let retry_after = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let text = resp
            .body_mut()
            .with_config()
            .limit(64 << 20)
            .read_to_string()
            .map_err(|e| (LlmError::Transport(e.to_string()), true, None))?;
        if status != 200 {
            let retryable = status == 408 || status == 429 || status >= 500;
            let body: String = text.chars().take(500).collect();
            return Err((LlmError::Http { status, body }, retryable, retry_after));
        }
        parse_response(&text).map_err(|e| (e, false, None))
    }
}

/// The API key in the environment variable `var`; `setting` names where `var` came from in the
/// error (an unset or blank variable is an error, never an unauthenticated run).
pub fn api_key_from_env(setting: &str, var: &str) -> Result<String, LlmError> {
    match std::env::var(var) {
        Ok(key) if !key.trim().is_empty() => Ok(key),
        _ => Err(LlmError::Config(format!(
            "{setting} {var}: the variable is not set or empty"
        ))),
    }
}

/// Parses a chat-completions response body (first choice).
pub fn parse_response(text: &str) -> Result<ChatResponse, LlmError> {
    let v: Value = serde_json::from_str(text).map_err(|e| LlmError::Parse(e.to_string()))?;
    let choice = v
        .get("choices")
        .and_then(|c| c.get(0))
        .ok_or_else(|| LlmError::Parse("no choices[0]".into()))?;
    let message: ChatMessage = serde_json::from_value(
        choice
            .get("message")
            .cloned()
            .ok_or_else(|| LlmError::Parse("no choices[0].message".into()))?,
    )
    .map_err(|e| LlmError::Parse(format!("choices[0].message: {e}")))?;
    Ok(ChatResponse {
        message,
        finish_reason: choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .map(str::to_owned),
        stop_reason: choice
            .get("stop_reason")
            .and_then(Value::as_str)
            .map(str::to_owned),
    })
}

/// The chat-completions URL of an endpoint given as a base URL (`http://host:8000`,
/// `http://host:8000/v1`) or as the full `.../chat/completions` URL.
pub fn completions_url(endpoint: &str) -> String {
    let e = endpoint.trim_end_matches('/');
    if e.ends_with("/chat/completions") {
        e.to_owned()
    } else if e.ends_with("/v1") {
        format!("{e}/chat/completions")
    } else {
        format!("{e}/v1/chat/completions")
    }
}

impl LlmBackend for OpenAiBackend {
    fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let body = self.body(request).to_string();
        let mut attempt = 0;
        loop {
            match self.attempt(&body) {
                Ok(r) => return Ok(r),
                Err((err, retryable, retry_after)) => {
                    if !retryable {
                        return Err(err);
                    }
                    if attempt >= self.config.max_retries {
                        return Err(LlmError::GaveUp {
                            url: self.url.clone(),
                            attempts: attempt + 1,
                            last: err.to_string(),
                        });
                    }
                    let backoff = self
                        .config
                        .backoff
                        .saturating_mul(1 << attempt.min(16))
                        .min(Duration::from_secs(30));
                    std::thread::sleep(retry_after.unwrap_or(backoff).min(Duration::from_secs(60)));
                    attempt += 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::Role;

    #[test]
    fn answer_schemas_are_sent_in_the_server_dialect() {
        let request = ChatRequest::new("m", vec![ChatMessage::text(Role::User, "hi")])
            .json_schema("verdicts", json!({"type": "object"}));
        let body = |schema_format| {
            let client = OpenAiBackend::new(OpenAiConfig {
                schema_format,
                ..OpenAiConfig::default()
            })
            .unwrap();
            client.body(&request)
        };
        assert_eq!(
            body(SchemaFormat::JsonSchema)["response_format"],
            json!({"type": "json_schema", "json_schema": {"name": "verdicts", "schema": {"type": "object"}}})
        );
        assert_eq!(
            body(SchemaFormat::JsonObject)["response_format"],
            json!({"type": "json_object", "schema": {"type": "object"}})
        );
        assert!(body(SchemaFormat::Off).get("response_format").is_none());
        assert_eq!(
            "json-object".parse::<SchemaFormat>().unwrap(),
            SchemaFormat::JsonObject
        );
        assert!("xml".parse::<SchemaFormat>().is_err());
    }
}
