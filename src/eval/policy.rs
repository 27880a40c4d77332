//! What answers each turn of an evaluation episode: the [`Policy`] trait and the
//! OpenAI-compatible endpoint policy with its sampling settings.

use crate::llm::{ChatMessage, ChatRequest, LlmBackend};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The stop strings of the Search-R1 protocol.
pub const STOP: [&str; 2] = ["</search>", "</answer>"];

/// Anything that answers a chat with the assistant's next text (an endpoint, a scripted policy).
pub trait Policy: Sync {
    /// The assistant's reply to `messages`, including the stop string it stopped at.
    fn act(&self, messages: &[ChatMessage]) -> crate::Result<String>;
}

/// Puts back the stop string an endpoint cut off (OpenAI APIs drop it from the text): the
/// `stop_reason` vLLM reports, else the closing tag of an unclosed last `<search>`/`<answer>`.
pub fn restore_stop(text: &str, finish_reason: Option<&str>, stop_reason: Option<&str>) -> String {
    if finish_reason != Some("stop") || STOP.iter().any(|s| text.ends_with(s)) {
        return text.to_owned();
    }
    if let Some(s) = stop_reason.filter(|s| STOP.contains(s)) {
        return format!("{text}{s}");
    }
    let open = ["<search>", "<answer>"]
        .iter()
        .zip(STOP)
        .filter_map(|(o, c)| text.rfind(o).map(|i| (i, o.len(), c)))
        .max_by_key(|&(i, _, _)| i);
    match open {
        Some((i, len, close)) if !text[i + len..].contains(close) => format!("{text}{close}"),
        _ => text.to_owned(),
    }
}

/// The sampling settings of each turn's request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sampling {
    /// The `model` field.
    pub model: String,
    /// Sampling temperature, in `[0, 2]`.
    pub temperature: f64,
    /// Nucleus sampling `top_p`, in `(0, 1]` (not sent when `None`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// Tokens per turn (>= 1).
    pub max_tokens: u32,
    /// The `seed` field, if any (vLLM still is not bit-reproducible).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

impl Sampling {
    /// Checks the ranges: an out-of-range value is an error naming the valid range.
    pub fn validate(&self) -> crate::Result<()> {
        if self.model.is_empty() {
            return Err(crate::Error::Config("model must not be empty".into()));
        }
        if !(self.temperature.is_finite() && (0.0..=2.0).contains(&self.temperature)) {
            return Err(crate::Error::Config(format!(
                "temperature must be in [0, 2], got {}",
                self.temperature
            )));
        }
        if let Some(p) = self.top_p
            && !(p.is_finite() && p > 0.0 && p <= 1.0)
        {
            return Err(crate::Error::Config(format!(
                "top_p must be in (0, 1], got {p}"
            )));
        }
        if self.max_tokens == 0 {
            return Err(crate::Error::Config(
                "max_tokens (per turn) must be at least 1".into(),
            ));
        }
        Ok(())
    }
}

/// A policy served by an LLM backend (the OpenAI-compatible client of [`crate::llm::openai`],
/// usually behind a record/replay [`crate::llm::CachedBackend`]): each turn is one chat request
/// with Search-R1's stop strings; a stop string the endpoint cut off is put back
/// ([`restore_stop`]).
pub struct EndpointPolicy {
    backend: Arc<dyn LlmBackend>,
    sampling: Sampling,
}

impl EndpointPolicy {
    /// A policy asking `backend` with these sampling settings; errors on an empty model name.
    pub fn new(backend: Arc<dyn LlmBackend>, sampling: Sampling) -> crate::Result<Self> {
        sampling.validate()?;
        Ok(EndpointPolicy { backend, sampling })
    }

    /// The request for one turn.
    pub fn request(&self, messages: &[ChatMessage]) -> ChatRequest {
        ChatRequest {
            temperature: Some(self.sampling.temperature),
            top_p: self.sampling.top_p,
            max_tokens: Some(self.sampling.max_tokens),
            seed: self.sampling.seed,
            stop: STOP.iter().map(|s| s.to_string()).collect(),
            ..ChatRequest::new(&self.sampling.model, messages.to_vec())
        }
    }
}

impl Policy for EndpointPolicy {
    fn act(&self, messages: &[ChatMessage]) -> crate::Result<String> {
        let response = self.backend.chat(&self.request(messages))?;
        Ok(restore_stop(
            response.message.content_str(),
            response.finish_reason.as_deref(),
            response.stop_reason.as_deref(),
        ))
    }
}
