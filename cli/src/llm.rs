//! The one set of flags of every command that calls a model (`eval`, `synth`, `tools play`,
//! `tools agree`), flattened into each: they fill [`rulegym::llm::ClientConfig`], which builds
//! the client and its record/replay cache.

use rulegym::llm::{ClientConfig, SchemaFormat};
use std::path::{Path, PathBuf};

/// How a command reaches its model and records the exchanges.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct LlmArgs {
    /// OpenAI-compatible endpoint: base URL (`http://host:8000/v1`) or full chat-completions
    /// URL; not needed with --replay-only.
    #[arg(long)]
    pub(crate) endpoint: Option<String>,
    /// Environment variable holding the API key (sent as a bearer token; an unset variable is
    /// an error) [OPENAI_API_KEY when it is set].
    #[arg(long)]
    api_key_env: Option<String>,
    /// Seconds per request before it counts as failed (and is retried) [the command's].
    #[arg(long)]
    timeout: Option<f64>,
    /// Retries per request on connection errors, timeouts, 408, 429 and 5xx [the command's].
    #[arg(long)]
    retries: Option<u32>,
    /// First retry backoff in milliseconds (doubled per retry) [500].
    #[arg(long)]
    backoff_ms: Option<u64>,
    /// How answer schemas (simulators, judge) are sent as `response_format`: json-schema
    /// (OpenAI, vLLM, SGLang, llama.cpp), json-object (llama-cpp-python's server) or off.
    #[arg(long, value_enum, default_value_t = SchemaFormat::JsonSchema)]
    schema_format: SchemaFormat,
    /// Record every exchange in this directory (one file per request hash) and reuse recorded
    /// answers, so the run replays offline [the command's: OUT/llm-cache for synth and tools].
    #[arg(long)]
    cache: Option<PathBuf>,
    /// Only recorded answers from the cache: no request leaves the process; a miss is an error.
    #[arg(long, alias = "replay")]
    pub(crate) replay_only: bool,
}

impl LlmArgs {
    /// The client these flags ask for over the command's defaults (`base`: its timeout,
    /// retries, concurrency) and cache directory (`default_cache`: `None` records nothing
    /// unless --cache is given).
    pub(crate) fn client(&self, base: ClientConfig, default_cache: Option<&Path>) -> ClientConfig {
        ClientConfig {
            endpoint: self.endpoint.clone(),
            api_key_env: self.api_key_env.clone(),
            timeout_s: self.timeout.unwrap_or(base.timeout_s),
            max_retries: self.retries.unwrap_or(base.max_retries),
            backoff_ms: self.backoff_ms.unwrap_or(base.backoff_ms),
            schema_format: self.schema_format,
            cache: self
                .cache
                .clone()
                .or_else(|| default_cache.map(Path::to_owned)),
            replay_only: self.replay_only,
            ..base
        }
    }
}
