//! The LLM client, one for every caller (evaluation, synthesis, the tool and user simulators,
//! the judge): OpenAI chat-completions types, the [`LlmBackend`] trait, a record/replay cache
//! keyed by a hash of the request ([`CachedBackend`]: any run that used an LLM replays
//! bit-exactly offline), a scripted backend for tests ([`ScriptedBackend`]), tool calls in
//! either wire form ([`calls`]: OpenAI `tool_calls`, Hermes `<tool_call>`). The HTTP client is
//! in [`openai`]; [`client::ClientConfig`] is the one configuration every caller builds it from.

pub(crate) mod calls;
pub(crate) mod client;
#[cfg(feature = "http")]
pub mod openai;

pub use calls::{ParsedCall, parse_tool_calls};
pub use client::{ClientConfig, recorded};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Errors from an LLM backend.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum LlmError {
    /// The server answered with an error status (after retries, for retryable ones).
    #[error("HTTP {status} from the LLM endpoint: {body}")]
    Http {
        /// Status code.
        status: u16,
        /// The start of the response body.
        body: String,
    },
    /// The request could not be sent or the response not received.
    #[error("LLM transport error: {0}")]
    Transport(String),
    /// A retryable failure (transport, timeout, 408, 429, 5xx) persisted through every retry.
    #[error("{url}: gave up after {attempts} attempt(s): {last}")]
    GaveUp {
        /// The request URL.
        url: String,
        /// Attempts made.
        attempts: u32,
        /// The last failure.
        last: String,
    },
    /// The response was not a chat completion.
    #[error("unparseable LLM response: {0}")]
    Parse(String),
    /// Replay-only mode and the request is not in the cache.
    #[error("request {0} is not in the replay cache (replay-only mode)")]
    NotRecorded(String),
    /// The cache could not be read or written.
    #[error("LLM cache: {0}")]
    Cache(String),
    /// A scripted backend has no answer for this request.
    #[error("scripted backend: {0}")]
    Script(String),
    /// A configuration value is invalid.
    #[error("LLM backend configuration: {0}")]
    Config(String),
}

/// A tool call in an assistant message (OpenAI shape).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Call id, echoed by the tool message.
    #[serde(default)]
    pub id: String,
    /// Always `function`.
    #[serde(rename = "type", default = "function_kind")]
    pub kind: String,
    /// The function and its arguments.
    pub function: FunctionCall,
}

fn function_kind() -> String {
    "function".into()
}

/// The function part of a tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionCall {
    /// Tool name.
    pub name: String,
    /// Arguments as a JSON string (as OpenAI sends them). Read from a string, or from a JSON
    /// object (the chat-template form trainers log, e.g. TRL's tool-calling messages), which is
    /// kept as its compact JSON text.
    #[serde(default, deserialize_with = "arguments_text")]
    pub arguments: String,
}

/// [`FunctionCall::arguments`] from a JSON string or any other JSON value (written compactly).
fn arguments_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(match serde_json::Value::deserialize(d)? {
        serde_json::Value::String(text) => text,
        other => other.to_string(),
    })
}

/// Who wrote a chat message (OpenAI's roles; serialised lowercase).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions from the system (the prompt's frame).
    System,
    /// OpenAI's newer name for system instructions; read like `system`.
    Developer,
    /// The user (or the environment speaking as the user).
    User,
    /// The model.
    Assistant,
    /// A tool's response to a call.
    Tool,
}

impl Role {
    /// The wire name (`system`, `developer`, `user`, `assistant`, `tool`).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::Developer => "developer",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A chat message (OpenAI shape): the one message type of the crate, from the environments'
/// observations to the LLM requests. A text message serialises as `{"role", "content"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// Who wrote it.
    pub role: Role,
    /// Text (`null` for assistant messages that only call tools).
    #[serde(default)]
    pub content: Option<String>,
    /// Tool calls of an assistant message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For tool messages: the call answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl ChatMessage {
    /// A message with text content.
    pub fn text(role: Role, content: impl Into<String>) -> Self {
        ChatMessage {
            role,
            content: Some(content.into()),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }

    /// The text content, or `""`.
    pub fn content_str(&self) -> &str {
        self.content.as_deref().unwrap_or("")
    }
}

/// A chat-completions request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// Model name.
    pub model: String,
    /// The conversation.
    pub messages: Vec<ChatMessage>,
    /// OpenAI `tools` entries (`{"type": "function", "function": {...}}`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<Value>,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Nucleus sampling: the smallest token set of this total probability (0 < p <= 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// Maximum tokens to generate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Sampling seed (passed through; servers are not bit-reproducible even with it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Stop strings (the generation ends before any of them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<String>,
    /// The JSON schema the answer must follow. The client sends it as `response_format` in its
    /// server's dialect ([`SchemaFormat`]): servers with constrained decoding (vLLM, SGLang,
    /// llama.cpp, OpenAI) then only generate JSON that follows it, which keeps even a small
    /// simulator or judge model parseable. Answers are validated either way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_schema: Option<ResponseSchema>,
}

/// A named JSON schema for the answer of a request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResponseSchema {
    /// Name (OpenAI's `json_schema.name`).
    pub name: String,
    /// The JSON schema.
    pub schema: Value,
}

/// How a request's [`ResponseSchema`] goes on the wire, per server dialect.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum SchemaFormat {
    /// OpenAI's `{"type": "json_schema", "json_schema": {"name", "schema"}}` (OpenAI, vLLM,
    /// SGLang, llama.cpp's C++ server).
    #[default]
    JsonSchema,
    /// `{"type": "json_object", "schema": ...}`: llama-cpp-python's server, which rejects the
    /// OpenAI form.
    JsonObject,
    /// No `response_format` (servers without constrained decoding that reject the field).
    Off,
}

impl std::str::FromStr for SchemaFormat {
    type Err = LlmError;

    fn from_str(name: &str) -> Result<Self, LlmError> {
        serde_json::from_value(serde_json::json!(name)).map_err(|_| {
            LlmError::Config(format!(
                "unknown schema format {name:?} (json-schema, json-object, off)"
            ))
        })
    }
}

impl ChatRequest {
    /// A request with default sampling options.
    pub fn new(model: &str, messages: Vec<ChatMessage>) -> Self {
        ChatRequest {
            model: model.to_owned(),
            messages,
            tools: Vec::new(),
            temperature: None,
            top_p: None,
            max_tokens: None,
            seed: None,
            stop: Vec::new(),
            response_schema: None,
        }
    }

    /// Asks for JSON that follows `schema` (named `name`).
    pub fn json_schema(mut self, name: &str, schema: Value) -> Self {
        self.response_schema = Some(ResponseSchema {
            name: name.to_owned(),
            schema,
        });
        self
    }

    /// SHA-256 (hex) of the request's canonical JSON: the cache key.
    pub fn hash(&self) -> String {
        let canonical = serde_json::to_vec(self).unwrap_or_default();
        let mut h = Sha256::new();
        h.update(b"rulegym-chat-v1\0");
        h.update(&canonical);
        hex::encode(h.finalize())
    }
}

/// A chat-completions response: the first choice.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatResponse {
    /// The assistant message.
    pub message: ChatMessage,
    /// `stop`, `tool_calls`, `length`, ...
    #[serde(default)]
    pub finish_reason: Option<String>,
    /// The stop string the generation stopped at, when the server reports it (vLLM's
    /// `stop_reason`; OpenAI APIs drop the stop string from the text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
}

/// Something that answers chat requests. Implementations must be thread-safe.
pub trait LlmBackend: Send + Sync {
    /// Answers one request.
    fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError>;
}

impl<T: LlmBackend + ?Sized> LlmBackend for Arc<T> {
    fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        (**self).chat(request)
    }
}

type ScriptFn = dyn Fn(&ChatRequest) -> Result<ChatResponse, LlmError> + Send + Sync;

/// A backend whose answers come from a function of the request (tests, fixtures).
pub struct ScriptedBackend {
    script: Box<ScriptFn>,
    calls: Mutex<u64>,
}

impl ScriptedBackend {
    /// A backend answering with `script(request)`.
    pub fn new(
        script: impl Fn(&ChatRequest) -> Result<ChatResponse, LlmError> + Send + Sync + 'static,
    ) -> Self {
        ScriptedBackend {
            script: Box::new(script),
            calls: Mutex::new(0),
        }
    }

    /// A backend that always answers with this text.
    pub fn constant(text: &str) -> Self {
        let text = text.to_owned();
        Self::new(move |_| Ok(assistant_text(&text)))
    }

    /// How many requests it answered.
    pub fn calls(&self) -> u64 {
        *self.calls.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl LlmBackend for ScriptedBackend {
    fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        *self.calls.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        (self.script)(request)
    }
}

/// A response holding an assistant text message.
pub fn assistant_text(text: &str) -> ChatResponse {
    ChatResponse {
        message: ChatMessage::text(Role::Assistant, text),
        finish_reason: Some("stop".into()),
        stop_reason: None,
    }
}

/// Whether [`CachedBackend`] may call its inner backend on a miss.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheMode {
    /// Reuse recorded answers; call the inner backend on a miss and record the answer.
    Record,
    /// Only recorded answers; a miss is [`LlmError::NotRecorded`].
    Replay,
}

/// Record/replay cache: one JSON file per request hash (`DIR/ab/abcdef....json` holding the
/// request and the response). Publishing is first-writer-wins (a hard link that never replaces an
/// existing entry), so concurrent threads or processes that miss on the same request all end up
/// returning the one recorded answer. Within a process, identical concurrent requests wait for
/// the first instead of calling the endpoint again.
pub struct CachedBackend {
    inner: Option<Arc<dyn LlmBackend>>,
    dir: PathBuf,
    mode: CacheMode,
    in_flight: Mutex<BTreeMap<String, Arc<Mutex<()>>>>,
}

#[derive(Serialize, Deserialize)]
struct CacheEntry {
    request: ChatRequest,
    response: ChatResponse,
}

impl CachedBackend {
    /// A cache in `dir` in front of `inner` (`None`: replay only, whatever `mode` says).
    pub fn new(inner: Option<Arc<dyn LlmBackend>>, dir: &Path, mode: CacheMode) -> Self {
        let mode = if inner.is_none() {
            CacheMode::Replay
        } else {
            mode
        };
        CachedBackend {
            inner,
            dir: dir.to_owned(),
            mode,
            in_flight: Mutex::new(BTreeMap::new()),
        }
    }

    fn path(&self, hash: &str) -> PathBuf {
        self.dir.join(&hash[..2]).join(format!("{hash}.json"))
    }

    fn read(&self, hash: &str) -> Result<Option<ChatResponse>, LlmError> {
        let path = self.path(hash);
        match std::fs::read(&path) {
            Ok(bytes) => {
                let entry: CacheEntry = serde_json::from_slice(&bytes).map_err(|e| {
                    LlmError::Cache(format!("corrupt entry {}: {e}", path.display()))
                })?;
                Ok(Some(entry.response))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(LlmError::Cache(format!("reading {}: {e}", path.display()))),
        }
    }

    /// Publishes an entry unless one exists; returns the entry that is recorded.
    fn publish(&self, hash: &str, entry: &CacheEntry) -> Result<ChatResponse, LlmError> {
        let path = self.path(hash);
        let parent = path.parent().expect("cache paths have a parent");
        let io = |what: &str, e: std::io::Error| LlmError::Cache(format!("{what}: {e}"));
        std::fs::create_dir_all(parent).map_err(|e| io(&parent.display().to_string(), e))?;
        let bytes = serde_json::to_vec_pretty(entry).map_err(|e| LlmError::Cache(e.to_string()))?;
        let tmp = tempfile_in(parent).map_err(|e| io("creating a temporary file", e))?;
        std::fs::write(&tmp, &bytes).map_err(|e| io(&tmp.display().to_string(), e))?;
        let linked = std::fs::hard_link(&tmp, &path);
        let _ = std::fs::remove_file(&tmp);
        match linked {
            Ok(()) => Ok(entry.response.clone()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => self
                .read(hash)?
                .ok_or_else(|| LlmError::Cache(format!("{} vanished", path.display()))),
            Err(e) => Err(io(&path.display().to_string(), e)),
        }
    }
}

fn tempfile_in(dir: &Path) -> std::io::Result<PathBuf> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    Ok(dir.join(
        format!(
            ".tmp-{}-{n}-{:?}",
            std::process::id(),
            std::thread::current().id()
        )
        .replace(['(', ')'], ""),
    ))
}

impl LlmBackend for CachedBackend {
    fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let hash = request.hash();
        if let Some(hit) = self.read(&hash)? {
            return Ok(hit);
        }
        let inner = match (self.mode, &self.inner) {
            (CacheMode::Record, Some(inner)) => inner,
            _ => return Err(LlmError::NotRecorded(hash)),
        };
        let slot = {
            let mut in_flight = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
            in_flight.entry(hash.clone()).or_default().clone()
        };
        let _guard = slot.lock().unwrap_or_else(|e| e.into_inner());
        let result = match self.read(&hash)? {
            Some(hit) => Ok(hit),
            None => inner.chat(request).and_then(|response| {
                self.publish(
                    &hash,
                    &CacheEntry {
                        request: request.clone(),
                        response,
                    },
                )
            }),
        };
        self.in_flight
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&hash);
        result
    }
}

/// Extracts the JSON object of an LLM answer: the whole trimmed text, or the single fenced
/// ```` ```json ```` block. Anything else is an error (never a guess).
pub fn parse_json_answer(text: &str) -> Result<Value, String> {
    let t = text.trim();
    let body = if let Some(rest) = t.strip_prefix("```") {
        let rest = rest.strip_prefix("json").unwrap_or(rest);
        rest.strip_suffix("```")
            .ok_or_else(|| "unterminated code fence".to_owned())?
            .trim()
    } else {
        t
    };
    serde_json::from_str(body).map_err(|e| format!("not a JSON value: {e}"))
}
