//! Presets: named configurations shipped as data, one versioned JSON file per preset under
//! `presets/` (embedded in the binary), so a paper's setup is a file to read and diff, not a
//! code path. A preset gives the base configuration; explicit flags override it.
//!
//! Three kinds: generation presets ([`Preset`], `presets/*.json`: universe and questions),
//! environment presets ([`EnvPreset`], `presets/env/*.json`: each paper's prompt, termination
//! rule, turn caps and token budgets for the search and tool-use environments, per [`Stage`])
//! and, with feature `synth`, task-synthesis presets (`SynthPreset`, `presets/synth/*.json`:
//! the settings of `rulegym synth` a paper states).

use crate::question::QuestionConfig;
use crate::search::SearchEnvConfig;
use crate::tooluse::env::ToolEnvConfig;
use crate::universe::UniverseConfig;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};

/// The shipped presets: (name, JSON).
const PRESETS: [(&str, &str); 1] = [("phantomenvs", include_str!("../presets/phantomenvs.json"))];

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

impl Preset {
    /// The names of the shipped presets, comma-separated.
    pub fn names() -> String {
        PRESETS.map(|(name, _)| name).join(", ")
    }

    /// The shipped preset called `name`; an unknown name is an error listing the valid ones.
    pub fn named(name: &str) -> Result<Preset> {
        let (_, json) = PRESETS.iter().find(|(n, _)| *n == name).ok_or_else(|| {
            Error::Config(format!(
                "unknown preset {name:?} (valid: {})",
                Preset::names()
            ))
        })?;
        let preset: Preset = serde_json::from_str(json).map_err(|source| Error::Json {
            context: format!("parsing preset {name}"),
            source,
        })?;
        preset.universe.validate()?;
        preset.questions.validate()?;
        Ok(preset)
    }
}

/// The shipped environment presets: (name, JSON).
const ENV_PRESETS: [(&str, &str); 2] = [
    (
        "phantomenvs",
        include_str!("../presets/env/phantomenvs.json"),
    ),
    ("synthagent", include_str!("../presets/env/synthagent.json")),
];

/// Training or evaluation: the papers use different turn caps and budgets for each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    /// Training rollouts (the default).
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

impl EnvPreset {
    /// The names of the shipped environment presets, comma-separated.
    pub fn names() -> String {
        ENV_PRESETS.map(|(name, _)| name).join(", ")
    }

    /// The shipped environment preset called `name`; an unknown name is an error listing the
    /// valid ones.
    pub fn named(name: &str) -> Result<EnvPreset> {
        let (_, json) = ENV_PRESETS
            .iter()
            .find(|(n, _)| *n == name)
            .ok_or_else(|| {
                Error::Config(format!(
                    "unknown environment preset {name:?} (valid: {})",
                    EnvPreset::names()
                ))
            })?;
        let preset: EnvPreset = serde_json::from_str(json).map_err(|source| Error::Json {
            context: format!("parsing environment preset {name}"),
            source,
        })?;
        if let Some(s) = &preset.search {
            s.train.validate()?;
            s.eval.validate()?;
        }
        if let Some(t) = &preset.tooluse {
            t.train.validate()?;
            t.eval.validate()?;
        }
        Ok(preset)
    }

    /// The names of the shipped presets for which `has` holds, comma-separated.
    fn with(has: impl Fn(&EnvPreset) -> bool) -> String {
        ENV_PRESETS
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

/// The shipped task-synthesis presets: (name, JSON).
#[cfg(feature = "synth")]
const SYNTH_PRESETS: [(&str, &str); 1] = [(
    "synthagent",
    include_str!("../presets/synth/synthagent.json"),
)];

/// A preset of `rulegym synth` ([`crate::synth::PipelineConfig`]): the settings a paper states,
/// as a versioned data file. A knob the file leaves out keeps the pipeline's default; explicit
/// flags override both.
#[cfg(feature = "synth")]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SynthPreset {
    /// Its name (`synthagent`).
    pub name: String,
    /// Bumped whenever a value changes.
    pub version: u32,
    /// What it reproduces, and which knobs the paper leaves at our defaults.
    pub description: String,
    /// Where each value comes from in the paper, by knob.
    pub sources: std::collections::BTreeMap<String, String>,
    /// Teacher rollouts per task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollouts: Option<u32>,
    /// How the rubric is extracted from the rollouts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extraction: Option<crate::synth::Extraction>,
    /// User simulator of teacher rollouts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<crate::synth::UserKind>,
    /// Sampling temperature of the generating stages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Sampling temperature of the teacher.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub teacher_temperature: Option<f64>,
    /// Agent turns per teacher rollout (also the tasks' `max_turns`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
    /// The filter's workflow-coverage threshold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_workflow_coverage: Option<f64>,
    /// The filter's best-rollout reward threshold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_best_reward: Option<f64>,
}

#[cfg(feature = "synth")]
impl SynthPreset {
    /// The names of the shipped task-synthesis presets, comma-separated.
    pub fn names() -> String {
        SYNTH_PRESETS.map(|(name, _)| name).join(", ")
    }

    /// The shipped task-synthesis preset called `name`; an unknown name is an error listing the
    /// valid ones.
    pub fn named(name: &str) -> Result<SynthPreset> {
        let (_, json) = SYNTH_PRESETS
            .iter()
            .find(|(n, _)| *n == name)
            .ok_or_else(|| {
                Error::Config(format!(
                    "unknown synth preset {name:?} (valid: {})",
                    SynthPreset::names()
                ))
            })?;
        let preset: SynthPreset = serde_json::from_str(json).map_err(|source| Error::Json {
            context: format!("parsing synth preset {name}"),
            source,
        })?;
        let mut config = crate::synth::PipelineConfig::default();
        preset.apply(&mut config);
        config.validate()?;
        Ok(preset)
    }

    /// Sets the knobs the preset gives in `config`, leaving the others as they are.
    pub fn apply(&self, config: &mut crate::synth::PipelineConfig) {
        if let Some(v) = self.rollouts {
            config.rollouts = v;
        }
        if let Some(v) = self.extraction {
            config.extraction = v;
        }
        if let Some(v) = self.user {
            config.user = v;
        }
        if let Some(v) = self.temperature {
            config.temperature = v;
        }
        if let Some(v) = self.teacher_temperature {
            config.teacher_temperature = v;
        }
        if let Some(v) = self.max_turns {
            config.max_turns = v;
        }
        if let Some(v) = self.min_workflow_coverage {
            config.min_workflow_coverage = v;
        }
        if let Some(v) = self.min_best_reward {
            config.min_best_reward = v;
        }
    }
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
        all.families.get(family).copied().ok_or_else(|| {
            Error::Config(format!(
                "unknown sampling preset {family:?} (valid: {})",
                all.families.keys().cloned().collect::<Vec<_>>().join(", ")
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_preset_parses_and_validates() {
        for (name, _) in PRESETS {
            let p = Preset::named(name).unwrap();
            assert_eq!(p.name, name);
        }
        let err = Preset::named("phantomenv").unwrap_err().to_string();
        assert!(err.contains("valid: phantomenvs"), "{err}");
    }

    #[test]
    fn every_shipped_env_preset_parses_validates_and_round_trips() {
        for (name, json) in ENV_PRESETS {
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

    #[cfg(feature = "synth")]
    #[test]
    fn synth_presets_parse_round_trip_and_carry_the_papers_numbers() {
        use crate::synth::{Extraction, PipelineConfig, UserKind};
        for (name, json) in SYNTH_PRESETS {
            let p = SynthPreset::named(name).unwrap();
            assert_eq!(p.name, name);
            let back = serde_json::to_value(&p).unwrap();
            let file: serde_json::Value = serde_json::from_str(json).unwrap();
            assert_eq!(back, file, "{name}");
            // Every knob the file sets has its source, and every source names a knob it sets.
            let set: std::collections::BTreeSet<&String> = back
                .as_object()
                .unwrap()
                .keys()
                .filter(|k| !["name", "version", "description", "sources"].contains(&k.as_str()))
                .collect();
            assert_eq!(set, p.sources.keys().collect(), "{name}");
        }
        let sa = SynthPreset::named("synthagent").unwrap();
        assert_eq!(sa.rollouts, Some(4));
        assert_eq!(sa.extraction, Some(Extraction::PerTrajectory));
        assert_eq!(sa.user, Some(UserKind::Llm));
        assert_eq!(sa.max_turns, Some(16));
        assert_eq!(sa.min_best_reward, Some(0.0));
        // Numbers the paper does not give are not in the preset.
        assert_eq!(
            (
                sa.temperature,
                sa.teacher_temperature,
                sa.min_workflow_coverage
            ),
            (None, None, None)
        );
        assert!(sa.description.contains("min_best_reward is 0.0"));
        let config = PipelineConfig::from_preset("synthagent").unwrap();
        let default = PipelineConfig::default();
        assert_eq!(
            config,
            PipelineConfig {
                rollouts: 4,
                extraction: Extraction::PerTrajectory,
                max_turns: 16,
                min_best_reward: 0.0,
                ..default.clone()
            }
        );
        assert_eq!(config.min_workflow_coverage, default.min_workflow_coverage);
        let err = SynthPreset::named("synth-agent").unwrap_err().to_string();
        assert!(err.contains("valid: synthagent"), "{err}");
        let err = PipelineConfig::from_preset("phantomenvs").unwrap_err();
        assert!(
            matches!(&err, crate::synth::PipelineError::Config(m) if m.contains("valid: synthagent")),
            "{err}"
        );
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
