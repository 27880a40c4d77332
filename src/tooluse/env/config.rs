//! The environment's options and its wire protocol.

/// How tool calls and their replies are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Protocol {
    /// OpenAI `tool_calls` in, `tool` messages out; tools passed in the request.
    #[default]
    #[cfg_attr(feature = "clap", value(name = "openai"))]
    OpenAi,
    /// Hermes text: `<tool_call>` in assistant text, `<tool_response>` user turns out; tools
    /// listed in the system prompt.
    Hermes,
}

/// Environment options.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ToolEnvConfig {
    /// Agent turns before the episode is cut (a task's `max_turns` overrides it).
    pub max_turns: u32,
    /// Wire protocol.
    pub protocol: Protocol,
    /// Assistant tokens per episode (text plus tool-call names and arguments): the episode
    /// ends with reason `response_budget` (and is scored as it stands) once the assistant has
    /// written more [off; SynthAgent 13,000]. Counted by the episode's token counter
    /// (`ceil(chars / 4)` unless [`ToolEnv::with_token_counter`] gives a real tokenizer).
    ///
    /// [`ToolEnv::with_token_counter`]: super::ToolEnv::with_token_counter
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_response_tokens: Option<u32>,
}

impl Default for ToolEnvConfig {
    fn default() -> Self {
        ToolEnvConfig {
            max_turns: 16,
            protocol: Protocol::OpenAi,
            max_response_tokens: None,
        }
    }
}

impl ToolEnvConfig {
    /// Checks every knob.
    pub fn validate(&self) -> crate::Result<()> {
        if !(1..=1000).contains(&self.max_turns) {
            return Err(crate::Error::Config(format!(
                "max_turns must be in 1..=1000, got {}",
                self.max_turns
            )));
        }
        if let Some(v) = self.max_response_tokens
            && !(1..=10_000_000).contains(&v)
        {
            return Err(crate::Error::Config(format!(
                "max_response_tokens must be in 1..=10000000, got {v}"
            )));
        }
        Ok(())
    }
}
