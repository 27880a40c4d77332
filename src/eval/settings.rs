//! What a caller asks of an evaluation run, resolved over the presets: the one precedence rule
//! of every front end (defaults, then the environment preset at its stage, then the sampling
//! preset, then explicit values).

use super::policy::Sampling;
use crate::preset::{self, Stage};
use crate::search::SearchEnvConfig;

/// An evaluation's knobs as a user gives them: presets by name and explicit overrides.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EvalSettings {
    /// The requests' `model`.
    pub model: String,
    /// An environment preset (`presets/env/<name>.json`): prompt, system message, termination,
    /// turn cap and token budgets at `stage`.
    pub env_preset: Option<String>,
    /// The environment preset's stage.
    pub stage: Stage,
    /// A model-family sampling preset (`presets/sampling.json`): temperature and top-p.
    pub sampling_preset: Option<String>,
    /// Turn cap [20, or the environment preset's].
    pub max_turns: Option<usize>,
    /// Passages per search [3, or the environment preset's].
    pub top_k: Option<usize>,
    /// The conversation's token budget [none, or the environment preset's].
    pub max_context_tokens: Option<usize>,
    /// Temperature [0, or the sampling preset's].
    pub temperature: Option<f64>,
    /// Nucleus top-p [not sent, or the sampling preset's].
    pub top_p: Option<f64>,
    /// Generated tokens per turn [1024, or the environment preset's per-turn cap]; with a
    /// per-turn cap in the preset, it also becomes the cap the environment applies.
    pub max_tokens: Option<u32>,
    /// The requests' `seed`.
    pub seed: Option<u64>,
}

impl EvalSettings {
    /// The environment and sampling these settings give, checked.
    pub fn resolve(&self) -> crate::Result<(SearchEnvConfig, Sampling)> {
        let default = SearchEnvConfig {
            max_turns: 20,
            ..SearchEnvConfig::default()
        };
        let mut env = preset::search_env(self.env_preset.as_deref(), self.stage, default)?;
        if let Some(t) = self.max_turns {
            env.max_turns = t;
        }
        if let Some(k) = self.top_k {
            env.top_k = k;
        }
        if let Some(c) = self.max_context_tokens {
            env.max_context_tokens = Some(c);
        }
        if let (Some(m), Some(_)) = (self.max_tokens, env.max_action_tokens) {
            // The per-turn cap the endpoint enforces is also the one the environment applies.
            env.max_action_tokens = Some(m as usize);
        }
        env.validate()?;
        let family = preset::sampling(self.sampling_preset.as_deref())?;
        let sampling = Sampling {
            model: self.model.clone(),
            temperature: self
                .temperature
                .or(family.map(|f| f.temperature))
                .unwrap_or(0.0),
            top_p: self.top_p.or(family.map(|f| f.top_p)),
            max_tokens: self
                .max_tokens
                .or(env.max_action_tokens.map(|m| m as u32))
                .unwrap_or(1024),
            seed: self.seed,
        };
        sampling.validate()?;
        Ok((env, sampling))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_override_presets_which_override_defaults() {
        let plain = EvalSettings {
            model: "m".into(),
            ..EvalSettings::default()
        };
        let (env, sampling) = plain.resolve().unwrap();
        assert_eq!((env.max_turns, env.top_k), (20, 3));
        assert_eq!((sampling.temperature, sampling.max_tokens), (0.0, 1024));
        let preset = EvalSettings {
            env_preset: Some("phantomenvs".into()),
            stage: Stage::Eval,
            sampling_preset: Some("llama".into()),
            ..plain.clone()
        };
        let (env, sampling) = preset.resolve().unwrap();
        assert_eq!(env.max_turns, 20);
        assert_eq!(env.max_context_tokens, Some(32_768));
        assert_eq!((sampling.temperature, sampling.top_p), (0.6, Some(0.9)));
        // The per-turn cap becomes the request's max_tokens; a flag moves both.
        assert_eq!(Some(sampling.max_tokens as usize), env.max_action_tokens);
        let flags = EvalSettings {
            max_turns: Some(7),
            temperature: Some(1.5),
            max_tokens: Some(300),
            ..preset
        };
        let (env, sampling) = flags.resolve().unwrap();
        assert_eq!((env.max_turns, env.max_action_tokens), (7, Some(300)));
        assert_eq!((sampling.temperature, sampling.max_tokens), (1.5, 300));
        let bad = EvalSettings {
            sampling_preset: Some("gpt".into()),
            ..plain
        };
        assert!(
            bad.resolve()
                .unwrap_err()
                .to_string()
                .contains("valid: llama")
        );
    }
}
