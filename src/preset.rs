//! Presets: named configurations shipped as data, one versioned JSON file per preset under
//! `presets/` (embedded in the binary), so a paper's setup is a file to read and diff, not a
//! code path. A preset gives the base configuration; explicit flags override it.
//!
//! Three kinds: generation presets ([`Preset`], `presets/*.json`: universe and questions),
//! environment presets ([`EnvPreset`], `presets/env/*.json`: each paper's prompt, termination
//! rule, turn caps and token budgets for the search and tool-use environments, per [`Stage`])
//! and, in the `synth` room (feature `synth`), task-synthesis presets
//! (`synth::preset::SynthPreset`, `presets/synth/*.json`). Every kind is looked up through the
//! one registry, [`Shipped`].

use crate::question::QuestionConfig;
use crate::search::SearchEnvConfig;
use crate::tooluse::env::{Protocol, ToolEnvConfig};
use crate::universe::UniverseConfig;
use crate::{Error, Result};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// A kind of preset shipped as embedded JSON files: one registry for every kind (generation,
/// environment, task synthesis), one lookup, one error listing the valid names.
pub trait Shipped: DeserializeOwned {
    /// What the kind is called in errors (`preset`, `environment preset`, ...).
    const KIND: &'static str;
    /// The shipped files: (name, JSON).
    const FILES: &'static [(&'static str, &'static str)];

    /// Checks a parsed preset (the configurations it sets validate).
    fn check(&self) -> Result<()>;

    /// The names of the shipped presets of this kind, comma-separated.
    fn names() -> String {
        Self::FILES
            .iter()
            .map(|(name, _)| *name)
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The shipped preset called `name`, parsed and checked; an unknown name is an error listing
    /// the valid ones.
    fn named(name: &str) -> Result<Self> {
        let (_, json) = Self::FILES
            .iter()
            .find(|(n, _)| *n == name)
            .ok_or_else(|| Error::UnknownName {
                kind: Self::KIND,
                name: name.to_owned(),
                valid: Self::FILES.iter().map(|(n, _)| (*n).to_owned()).collect(),
            })?;
        let preset: Self = serde_json::from_str(json).map_err(|source| Error::Json {
            context: format!("parsing {} {name}", Self::KIND),
            source,
        })?;
        preset.check()?;
        Ok(preset)
    }
}

/// A preset of `rulegym generate`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Preset {
    /// Its name (`phantomenvs`).
    pub name: String,
    /// Bumped whenever the preset's output changes.
    pub version: u32,
    /// What it reproduces.
    pub description: String,
    /// The universe (the seed stays the caller's).
    pub universe: UniverseConfig,
    /// The questions (the seed stays the caller's).
    pub questions: QuestionConfig,
}

impl Shipped for Preset {
    const KIND: &'static str = "preset";
    const FILES: &'static [(&'static str, &'static str)] =
        &[("phantomenvs", include_str!("../presets/phantomenvs.json"))];

    fn check(&self) -> Result<()> {
        self.universe.validate()?;
        self.questions.validate()
    }
}

/// Training or evaluation: the papers use different turn caps and budgets for each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    /// Training rollouts (the stage a preset file uses when none is named).
    #[default]
    Train,
    /// Evaluation episodes.
    Eval,
}

impl std::str::FromStr for Stage {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "train" => Ok(Stage::Train),
            "eval" => Ok(Stage::Eval),
            other => Err(Error::Config(format!(
                "unknown stage {other:?} (valid: train, eval)"
            ))),
        }
    }
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Stage::Train => "train",
            Stage::Eval => "eval",
        })
    }
}

/// One configuration per [`Stage`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Staged<T> {
    /// In training.
    pub train: T,
    /// At evaluation.
    pub eval: T,
}

impl<T: Clone> Staged<T> {
    /// The configuration of `stage`.
    pub fn get(&self, stage: Stage) -> T {
        match stage {
            Stage::Train => self.train.clone(),
            Stage::Eval => self.eval.clone(),
        }
    }
}

/// An environment preset: a paper's environment settings as a versioned data file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvPreset {
    /// Its name (`phantomenvs`, `synthagent`).
    pub name: String,
    /// Bumped whenever an environment's behaviour under the preset changes.
    pub version: u32,
    /// What it reproduces.
    pub description: String,
    /// Where each value comes from in the paper (and what is reconstructed rather than quoted).
    pub sources: std::collections::BTreeMap<String, String>,
    /// The search environment's settings, when the paper ran one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<Staged<SearchEnvConfig>>,
    /// The tool-use environment's settings, when the paper ran one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tooluse: Option<Staged<ToolEnvConfig>>,
}

impl Shipped for EnvPreset {
    const KIND: &'static str = "environment preset";
    const FILES: &'static [(&'static str, &'static str)] = &[
        (
            "phantomenvs",
            include_str!("../presets/env/phantomenvs.json"),
        ),
        ("synthagent", include_str!("../presets/env/synthagent.json")),
    ];

    fn check(&self) -> Result<()> {
        if let Some(s) = &self.search {
            s.train.validate()?;
            s.eval.validate()?;
        }
        if let Some(t) = &self.tooluse {
            t.train.validate()?;
            t.eval.validate()?;
        }
        Ok(())
    }
}

impl EnvPreset {
    /// The names of the shipped presets for which `has` holds, comma-separated.
    fn with(has: impl Fn(&EnvPreset) -> bool) -> String {
        Self::FILES
            .iter()
            .filter(|(n, _)| EnvPreset::named(n).is_ok_and(|p| has(&p)))
            .map(|(n, _)| *n)
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The search environment's settings at `stage`; an error naming the presets that have
    /// some when this one has none.
    pub fn search(&self, stage: Stage) -> Result<SearchEnvConfig> {
        self.search.as_ref().map(|s| s.get(stage)).ok_or_else(|| {
            Error::Config(format!(
                "preset {:?} has no search-environment settings (presets with some: {})",
                self.name,
                EnvPreset::with(|p| p.search.is_some())
            ))
        })
    }

    /// The tool-use environment's settings at `stage`; an error naming the presets that have
    /// some when this one has none.
    pub fn tooluse(&self, stage: Stage) -> Result<ToolEnvConfig> {
        self.tooluse.as_ref().map(|s| s.get(stage)).ok_or_else(|| {
            Error::Config(format!(
                "preset {:?} has no tool-use environment settings (presets with some: {})",
                self.name,
                EnvPreset::with(|p| p.tooluse.is_some())
            ))
        })
    }
}

/// The universe and question configurations `rulegym generate` starts from: those of the
/// generation preset `preset`, or the defaults without one.
pub fn generation(preset: Option<&str>) -> Result<(UniverseConfig, QuestionConfig)> {
    match preset {
        Some(name) => Preset::named(name).map(|p| (p.universe, p.questions)),
        None => Ok((UniverseConfig::default(), QuestionConfig::default())),
    }
}

/// The search environment's settings: those of the environment preset `preset` at `stage`,
/// or `default` without one. Every front end resolves a preset through here.
pub fn search_env(
    preset: Option<&str>,
    stage: Stage,
    default: SearchEnvConfig,
) -> Result<SearchEnvConfig> {
    match preset {
        Some(name) => EnvPreset::named(name)?.search(stage),
        None => Ok(default),
    }
}

/// The tool-use environment's settings: the defaults, then the environment preset `preset` at
/// `stage` (e.g. `synthagent`: Hermes, 16 turns, 13,000 response tokens), then an explicit
/// protocol and turn cap; checked.
pub fn tooluse_env(
    preset: Option<&str>,
    stage: Stage,
    protocol: Option<Protocol>,
    max_turns: Option<u32>,
) -> Result<ToolEnvConfig> {
    let mut env = match preset {
        Some(name) => EnvPreset::named(name)?.tooluse(stage)?,
        None => ToolEnvConfig::default(),
    };
    if let Some(protocol) = protocol {
        env.protocol = protocol;
    }
    if let Some(t) = max_turns {
        env.max_turns = t;
    }
    env.validate()?;
    Ok(env)
}

/// A model family's sampling settings, when one is named.
pub fn sampling(family: Option<&str>) -> Result<Option<SamplingPreset>> {
    family.map(SamplingPreset::named).transpose()
}

/// The shipped sampling presets (one file, a family per entry).
const SAMPLING_PRESETS: &str = include_str!("../presets/sampling.json");

/// A model family's sampling settings (`presets/sampling.json`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SamplingPreset {
    /// Sampling temperature.
    pub temperature: f64,
    /// Nucleus sampling top-p.
    pub top_p: f64,
}

/// The file `presets/sampling.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SamplingPresets {
    /// Bumped whenever a value changes.
    pub version: u32,
    /// What the values reproduce.
    pub description: String,
    /// Family name -> settings.
    pub families: std::collections::BTreeMap<String, SamplingPreset>,
}

impl SamplingPreset {
    /// Every shipped family's settings.
    pub fn all() -> Result<SamplingPresets> {
        serde_json::from_str(SAMPLING_PRESETS).map_err(|source| Error::Json {
            context: "parsing presets/sampling.json".into(),
            source,
        })
    }

    /// The settings of model family `family` (`qwen`, `llama`, `phi`); an unknown family is an
    /// error listing the valid ones.
    pub fn named(family: &str) -> Result<SamplingPreset> {
        let all = SamplingPreset::all()?;
        all.families
            .get(family)
            .copied()
            .ok_or_else(|| Error::UnknownName {
                kind: "sampling preset",
                name: family.to_owned(),
                valid: all.families.keys().cloned().collect(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_preset_parses_and_validates() {
        for &(name, _) in Preset::FILES {
            let p = Preset::named(name).unwrap();
            assert_eq!(p.name, name);
        }
        let err = Preset::named("phantomenv").unwrap_err().to_string();
        assert!(err.contains("valid: phantomenvs"), "{err}");
    }

    #[test]
    fn every_shipped_env_preset_parses_validates_and_round_trips() {
        for &(name, json) in EnvPreset::FILES {
            let p = EnvPreset::named(name).unwrap();
            assert_eq!(p.name, name);
            assert!(
                p.search.is_some() || p.tooluse.is_some(),
                "{name} sets nothing"
            );
            // The file holds exactly what the struct reads: nothing silently ignored.
            let back = serde_json::to_value(&p).unwrap();
            let file: serde_json::Value = serde_json::from_str(json).unwrap();
            assert_eq!(back, file, "{name}");
        }
        let err = EnvPreset::named("phantom").unwrap_err().to_string();
        assert!(err.contains("valid: phantomenvs, synthagent"), "{err}");
        let err = "test".parse::<Stage>().unwrap_err().to_string();
        assert!(err.contains("valid: train, eval"), "{err}");
    }

    #[test]
    fn sampling_presets_carry_the_papers_numbers() {
        let q = SamplingPreset::named("qwen").unwrap();
        let l = SamplingPreset::named("llama").unwrap();
        let p = SamplingPreset::named("phi").unwrap();
        assert_eq!((q.temperature, q.top_p), (1.0, 1.0));
        assert_eq!((l.temperature, l.top_p), (0.6, 0.9));
        assert_eq!((p.temperature, p.top_p), (0.8, 0.95));
        let err = SamplingPreset::named("gpt").unwrap_err().to_string();
        assert!(err.contains("valid: llama, phi, qwen"), "{err}");
    }

    #[test]
    fn env_presets_carry_the_papers_numbers() {
        let pe = EnvPreset::named("phantomenvs").unwrap();
        let train = pe.search(Stage::Train).unwrap();
        let eval = pe.search(Stage::Eval).unwrap();
        assert_eq!((train.max_turns, eval.max_turns), (10, 20));
        assert_eq!(
            (train.max_context_tokens, eval.max_context_tokens),
            (Some(8192), Some(32768))
        );
        assert_eq!(train.max_action_tokens, Some(500));
        assert_eq!(train.top_k, 3);
        assert!(train.end_on_invalid);
        let system = train.system_prompt.unwrap();
        assert!(system.contains("helpful and harmless"), "{system}");
        assert!(train.prompt.contains("sub-questions"));
        let err = pe.tooluse(Stage::Train).unwrap_err().to_string();
        assert!(err.contains("presets with some: synthagent"), "{err}");

        let sa = EnvPreset::named("synthagent").unwrap();
        let tool = sa.tooluse(Stage::Train).unwrap();
        assert_eq!(tool.max_turns, 16);
        assert_eq!(tool.max_response_tokens, Some(13000));
        let err = sa.search(Stage::Eval).unwrap_err().to_string();
        assert!(err.contains("presets with some: phantomenvs"), "{err}");
    }
}
