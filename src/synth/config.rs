//! The pipeline's settings: [`PipelineConfig`] and the rubric [`Extraction`] mode.

use super::{PipelineError, SynthStage, UserKind, preset, valid_item_id};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// How the rubric stage extracts a task's rubric from its usable teacher rollouts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum Extraction {
    /// One request shows every usable rollout; its answer is the rubric.
    #[default]
    Joint,
    /// SynthAgent's: one request per usable rollout (the task, the workflow as the reference,
    /// the forbidden behaviour, tools, slots and only that rollout's facts; the request's seed
    /// is the rollout's), then a deterministic merge into one rubric: sub-goals grouped by
    /// workflow step, forbidden and interaction items by id, the distinct rule bodies of a group
    /// OR-ed as `(B1) ; (B2)` in order of first appearance. Any invalid answer rejects the task
    /// with that answer's reason (see `rubric_extract.rs`).
    PerTrajectory,
}

impl Extraction {
    /// Every mode.
    pub const ALL: [Extraction; 2] = [Extraction::Joint, Extraction::PerTrajectory];

    /// The mode's name (`joint`, `per-trajectory`), as in JSON and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Extraction::Joint => "joint",
            Extraction::PerTrajectory => "per-trajectory",
        }
    }

    /// Parses a mode name.
    pub fn parse(name: &str) -> Result<Extraction, PipelineError> {
        Extraction::ALL
            .into_iter()
            .find(|e| e.name() == name.trim())
            .ok_or_else(|| {
                PipelineError::Config(format!(
                    "unknown rubric extraction {name:?} (joint, per-trajectory)"
                ))
            })
    }
}

/// Pipeline options. `Default` plus an output directory is a usable configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct PipelineConfig {
    /// Output directory (stage files, `tasks.jsonl`, `mappings/`, `manifest.json`).
    pub out: PathBuf,
    /// Record/replay cache directory (default `OUT/llm-cache`).
    pub cache: Option<PathBuf>,
    /// Only replay recorded LLM answers; a request that is not recorded fails its item.
    pub replay_only: bool,
    /// Model of the generating stages and the teacher.
    pub model: String,
    /// Model of the tool and user simulators (default: `model`).
    pub sim_model: Option<String>,
    /// Stages to run, in pipeline order (each reads the previous stage's file in `out`).
    pub stages: Vec<SynthStage>,
    /// Items processed at once (worker threads).
    pub concurrency: usize,
    /// Teacher rollouts per task (at least 2).
    pub rollouts: u32,
    /// How the rubric is extracted from the usable rollouts.
    pub extraction: Extraction,
    /// Sampling temperature of the generating stages.
    pub temperature: f64,
    /// Sampling temperature of the teacher.
    pub teacher_temperature: f64,
    /// Seed passed to the endpoint (rollout `r` uses `seed + r`).
    pub seed: u64,
    /// Agent turns per teacher rollout (also written as the tasks' `max_turns`).
    pub max_turns: u32,
    /// User simulator of teacher rollouts.
    pub user: UserKind,
    /// A teacher rollout with a larger fraction of failed tool calls is unusable.
    pub max_tool_error_fraction: f64,
    /// Tasks whose rollouts execute a smaller mean fraction of the workflow are dropped.
    pub min_workflow_coverage: f64,
    /// Tasks whose best teacher rollout scores less under its rubric are dropped.
    pub min_best_reward: f64,
    /// Prefix of item ids (`<prefix><index>`).
    pub id_prefix: String,
    /// Maximum tokens per generation request.
    pub max_tokens: Option<u32>,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        PipelineConfig {
            out: PathBuf::from("synth-out"),
            cache: None,
            replay_only: false,
            model: "model".into(),
            sim_model: None,
            stages: SynthStage::ALL.to_vec(),
            concurrency: 4,
            rollouts: 2,
            extraction: Extraction::Joint,
            temperature: 0.7,
            teacher_temperature: 0.7,
            seed: 0,
            max_turns: 16,
            user: UserKind::Llm,
            max_tool_error_fraction: 0.5,
            min_workflow_coverage: 0.6,
            min_best_reward: 1.0,
            id_prefix: "synth-".into(),
            max_tokens: None,
        }
    }
}

impl PipelineConfig {
    /// The defaults with the shipped synth preset `name` applied
    /// ([`preset::SynthPreset`], `presets/synth/<name>.json`); an unknown name is an
    /// error listing the valid ones. Set `out` (and anything else) afterwards.
    pub fn from_preset(name: &str) -> Result<PipelineConfig, PipelineError> {
        Self::tuned(Some(name), &preset::Knobs::default())
    }

    /// The defaults, then the named preset's knobs (when given), then `overrides` (a CLI's
    /// flags): the one precedence rule of every synthesis front end.
    pub fn tuned(
        preset: Option<&str>,
        overrides: &preset::Knobs,
    ) -> Result<PipelineConfig, PipelineError> {
        use crate::preset::Shipped;
        let mut config = PipelineConfig::default();
        if let Some(name) = preset {
            let preset = preset::SynthPreset::named(name).map_err(|e| match e {
                crate::Error::Config(message) => PipelineError::Config(message),
                other => PipelineError::Config(other.to_string()),
            })?;
            preset.knobs.apply(&mut config);
        }
        overrides.apply(&mut config);
        Ok(config)
    }

    /// Checks ranges and the stage list.
    pub fn validate(&self) -> Result<(), PipelineError> {
        let bad = |m: String| Err(PipelineError::Config(m));
        if self.concurrency == 0 || self.concurrency > 256 {
            return bad(format!("concurrency {} must be 1-256", self.concurrency));
        }
        if !(2..=64).contains(&self.rollouts) {
            return bad(format!("rollouts {} must be 2-64", self.rollouts));
        }
        if self.max_turns == 0 {
            return bad("max_turns must be at least 1".into());
        }
        for (name, v, hi) in [
            ("temperature", self.temperature, 2.0),
            ("teacher_temperature", self.teacher_temperature, 2.0),
            ("max_tool_error_fraction", self.max_tool_error_fraction, 1.0),
            ("min_workflow_coverage", self.min_workflow_coverage, 1.0),
            ("min_best_reward", self.min_best_reward, 1.0),
        ] {
            if !(0.0..=hi).contains(&v) {
                return bad(format!("{name} {v} must be in [0, {hi}]"));
            }
        }
        if self.stages.is_empty() {
            return bad("no stages to run".into());
        }
        if self.stages.windows(2).any(|w| w[0] >= w[1]) {
            return bad("stages must be distinct and in pipeline order".into());
        }
        if self.model.trim().is_empty() {
            return bad("model must not be empty".into());
        }
        if !valid_item_id(&format!("{}00000", self.id_prefix)) || self.id_prefix.len() > 99 {
            return bad(format!(
                "id prefix {:?} must be [A-Za-z0-9_.:-], at most 99 characters",
                self.id_prefix
            ));
        }
        Ok(())
    }

    /// The cache directory.
    pub fn cache_dir(&self) -> PathBuf {
        self.cache
            .clone()
            .unwrap_or_else(|| self.out.join("llm-cache"))
    }

    /// The model of the tool and user simulators.
    pub(crate) fn sim_model(&self) -> &str {
        self.sim_model.as_deref().unwrap_or(&self.model)
    }
}
