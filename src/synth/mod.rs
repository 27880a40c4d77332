//! The SynthAgent task-synthesis pipeline, driven by any OpenAI-compatible LLM:
//!
//! ```text
//! personas -> draft -> tools -> rewrite -> rollouts -> rubric -> filter -> tasks.jsonl
//! ```
//!
//! - `draft` (`draft.rs`): a persona seed becomes a task, a workflow of 5-7 sub-goals,
//!   3-5 tools of different categories (`parameters` and `outputs` schemas) and one forbidden
//!   behaviour of the form "Tool X must NOT be used to Y" with its reason;
//! - `tools` (`tool_check.rs`): the tool check drops tools the model could do itself, keeps
//!   outputs simulatable (an object of at most 2 fields), marks read-only vs state-modifying and
//!   adds 1-2 distractor tools;
//! - `rewrite` (`rewrite.rs`): the information gap: a one-sentence underspecified
//!   instruction and a hidden user context of structured slots;
//! - `rollouts` (`rollout.rs`): at least two teacher rollouts in the mock environment
//!   ([`crate::tooluse::env::ToolEnv`] with the mapping tool simulator and a simulated user);
//! - `rubric` (`rubric_extract.rs`): executable rubric items (Prolog bodies over trajectory
//!   facts), each checked by the rubric whitelist and loaded into a rubric engine; extracted
//!   from all usable rollouts at once ([`Extraction::Joint`]) or once per rollout and merged
//!   ([`Extraction::PerTrajectory`], the paper's);
//! - `filter` (`filter.rs`): drops tasks whose teacher rollouts leave too much of the
//!   workflow unexecuted or whose best rollout does not pass its rubric; writes `tasks.jsonl`
//!   (valid [`Task`] records), `mappings/<id>.json` (the teacher's tool responses, so training
//!   rollouts start consistent with them) and `manifest.json`.
//!
//! Every LLM stage has a versioned prompt in `prompts/synth/` (embedded at compile time; the
//! version is recorded in each record) and a strict parser: an invalid answer drops the item with
//! a [`Reject`] record in `<stage>.rejects.jsonl`, never a default. Stages run on a pool of
//! `concurrency` threads and write their files in input order whatever the concurrency. Every
//! LLM exchange goes through a [`crate::llm::CachedBackend`], so a run replays bit-exactly offline
//! (`replay_only`).
//!
//! Resume: every record (kept or rejected) carries the [`fingerprint`] of what produced it: the
//! stage's prompt (version and text), the settings the stage reads, and the exact input record
//! from the previous stage (the persona for `draft`). A rerun into the same output directory
//! keeps the records whose fingerprint matches the current input and settings, recomputes the
//! others (identical LLM requests are answered by the cache), and drops the records of ids that
//! are no longer in the input; the `filter` stage (no LLM) always recomputes. The files of the
//! stages before the first stage run must match the current settings too, or the run stops with
//! [`PipelineError::Stale`] before writing anything. A partial last line (a write cut short) is
//! ignored when a file is read; only the stage that owns the file removes it, when it resumes.

mod draft;
mod filter;
mod parse;
pub mod preset;
mod prompt;
mod rewrite;
mod rollout;
mod rubric_extract;
mod runner;
mod tool_check;

pub use filter::Verdict;
pub use parse::{Reject, RejectReason};
pub use prompt::{PROMPTS, Prompt};
pub use rollout::Rollout;

use crate::llm::LlmBackend;
use crate::tooluse::rubric::{RubricError, RubricScorer, ScoreConfig};
use crate::tooluse::simulator::MappingEntry;
use crate::tooluse::task::{HiddenContext, Rubric, Task, ToolSpec};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// Errors of the pipeline (an item's invalid LLM answer is not an error: it is a [`Reject`]).
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// The configuration is unusable.
    #[error("synth pipeline config: {0}")]
    Config(String),
    /// A file could not be read or written.
    #[error("{context}: {message}")]
    Io {
        /// What was being done, with the path.
        context: String,
        /// The underlying error.
        message: String,
    },
    /// A complete line of a stage file is not a record (a partial last line is not an error).
    #[error("{path}:{line}: not a pipeline record: {message}")]
    Corrupt {
        /// The file.
        path: String,
        /// 1-based line.
        line: usize,
        /// Why.
        message: String,
    },
    /// A stage's input is missing or lacks what the stage needs.
    #[error("stage {stage}: {message}")]
    Input {
        /// The stage.
        stage: &'static str,
        /// What is missing.
        message: String,
    },
    /// The rubric engine could not start.
    #[error(transparent)]
    Rubric(#[from] RubricError),
    /// The file of a stage that is not run holds records produced from other input or other
    /// settings than the current ones, so later stages would build on (and the manifest would
    /// misdescribe) results the current settings did not produce.
    #[error(
        "stage {stage}: {count} record(s) of its file were produced from other input or \
         settings than the current ones (first: {first}); rerun from that stage (--stages \
         {stage},...) or use a fresh output directory"
    )]
    Stale {
        /// The stage whose file is stale.
        stage: &'static str,
        /// How many of its records are stale.
        count: usize,
        /// The first stale record's id.
        first: String,
    },
    /// Some items failed with errors that are not the model's fault (endpoint down, not in the
    /// replay cache, ...). They were not recorded: a rerun retries them.
    #[error("stage {stage}: {count} item(s) failed; first: {first}")]
    ItemsFailed {
        /// The stage.
        stage: &'static str,
        /// How many items failed.
        count: usize,
        /// The first failure (item id and error).
        first: String,
    },
}

/// Version of the pipeline's record formats and stage order, recorded in `manifest.json`.
pub const PIPELINE_VERSION: &str = "synth-pipeline-v1";

/// Shorthand for pipeline results.
pub type Result<T, E = PipelineError> = std::result::Result<T, E>;

/// The stages, in pipeline order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    /// Persona -> task, workflow, tools, forbidden behaviour.
    Draft,
    /// Tool check.
    Tools,
    /// Fuzzy rewrite: instruction and hidden context.
    Rewrite,
    /// Teacher rollouts in the mock environment.
    Rollouts,
    /// Rubric extraction.
    Rubric,
    /// Filtering and the final task file.
    Filter,
}

impl Stage {
    /// Every stage in order.
    pub const ALL: [Stage; 6] = [
        Stage::Draft,
        Stage::Tools,
        Stage::Rewrite,
        Stage::Rollouts,
        Stage::Rubric,
        Stage::Filter,
    ];

    /// The stage's name (also its file name stem).
    pub fn name(self) -> &'static str {
        match self {
            Stage::Draft => "draft",
            Stage::Tools => "tools",
            Stage::Rewrite => "rewrite",
            Stage::Rollouts => "rollouts",
            Stage::Rubric => "rubric",
            Stage::Filter => "filter",
        }
    }

    /// Parses a stage name.
    pub fn parse(name: &str) -> Result<Stage> {
        Stage::ALL
            .into_iter()
            .find(|s| s.name() == name.trim())
            .ok_or_else(|| {
                PipelineError::Config(format!(
                    "unknown stage {name:?} (draft, tools, rewrite, rollouts, rubric, filter)"
                ))
            })
    }

    /// The version recorded in the records the stage writes: its prompt's (`draft.v1`), or the
    /// filter's code version.
    pub fn version(self) -> &'static str {
        match self {
            Stage::Draft => prompt::DRAFT.version,
            Stage::Tools => prompt::TOOLS.version,
            Stage::Rewrite => prompt::REWRITE.version,
            Stage::Rollouts => prompt::TEACHER.version,
            Stage::Rubric => prompt::RUBRIC.version,
            Stage::Filter => filter::VERSION,
        }
    }
}

/// How the simulated user of teacher rollouts answers (the pipeline's default is the LLM user).
pub use crate::tooluse::user::UserKind;

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
    pub fn parse(name: &str) -> Result<Extraction> {
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
    pub stages: Vec<Stage>,
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
            stages: Stage::ALL.to_vec(),
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
    pub fn from_preset(name: &str) -> Result<PipelineConfig> {
        Self::tuned(Some(name), &preset::Knobs::default())
    }

    /// The defaults, then the named preset's knobs (when given), then `overrides` (a CLI's
    /// flags): the one precedence rule of every synthesis front end.
    pub fn tuned(preset: Option<&str>, overrides: &preset::Knobs) -> Result<PipelineConfig> {
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
    pub fn validate(&self) -> Result<()> {
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

    fn sim_model(&self) -> &str {
        self.sim_model.as_deref().unwrap_or(&self.model)
    }
}

/// One item as it flows through the stages; each stage fills its part.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SynthItem {
    /// Item id (becomes the task id).
    pub id: String,
    /// The persona seed.
    pub persona: String,
    /// Versions of the stages that produced the record, in order (`draft.v1`, `tools.v1`...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub versions: Vec<String>,
    /// [`fingerprint`] of the last stage that wrote the record: its prompt, settings and
    /// input record.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub fingerprint: String,
    /// Draft: the task as the persona would state it, with every detail.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub task: String,
    /// Draft: 5-7 sub-goals in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workflow: Vec<String>,
    /// Draft: the forbidden behaviour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forbidden: Option<draft::Forbidden>,
    /// Draft: the tool ecosystem as first written.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub draft_tools: Vec<draft::DraftTool>,
    /// Tool check: the tools the agent gets (distractors included).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolSpec>,
    /// Tool check: names of the distractor tools.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub distractors: Vec<String>,
    /// Tool check: dropped draft tools and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped: Vec<tool_check::DroppedTool>,
    /// Rewrite: the one-sentence instruction the agent sees.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub instruction: String,
    /// Rewrite: what only the user knows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hidden_context: Option<HiddenContext>,
    /// Rollouts: the teacher's episodes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rollouts: Vec<Rollout>,
    /// Rollouts: the tool simulator's mapping after all rollouts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mapping: Vec<MappingEntry>,
    /// Rubric: the executable rubric.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rubric: Option<Rubric>,
    /// Rubric: the workflow step (1-based) of each sub-goal item, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subgoal_steps: Vec<u32>,
    /// Filter: the scores that decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
}

impl SynthItem {
    /// The task as the environment runs it: the instruction, hidden context, tools and workflow
    /// so far, with `rubric` (after the rewrite stage).
    pub fn to_task(&self, rubric: Rubric, max_turns: u32) -> Task {
        Task {
            id: self.id.clone(),
            persona: self.persona.clone(),
            instruction: self.instruction.clone(),
            hidden_context: self.hidden_context.clone().unwrap_or_default(),
            tools: self.tools.clone(),
            initial_state: None,
            expected_state: None,
            workflow: self.workflow.clone(),
            rubric,
            max_turns: Some(max_turns),
        }
    }
}

/// What one stage did in a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StageSummary {
    /// The stage.
    pub stage: String,
    /// Its version.
    pub version: String,
    /// Items in its input.
    pub input: usize,
    /// Items it kept (in its output file).
    pub kept: usize,
    /// Items it rejected.
    pub rejected: usize,
    /// Items processed in this run (the others were done before: resumed).
    pub processed: usize,
    /// Records of this stage's file that were produced from another input record or other
    /// settings and were recomputed in this run (always 0 for `filter`, which recomputes all).
    pub recomputed: usize,
    /// Records of this stage's file whose ids are no longer in its input, removed in this run.
    pub orphaned: usize,
    /// Rejections by reason.
    pub reasons: std::collections::BTreeMap<String, usize>,
}

/// What a run did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PipelineReport {
    /// One entry per stage run.
    pub stages: Vec<StageSummary>,
    /// Tasks in `tasks.jsonl` (when the filter stage ran).
    pub tasks: Option<usize>,
}

/// What every stage shares: the cached backend, the configuration and a lazily started rubric
/// engine.
pub(crate) struct Ctx {
    pub config: PipelineConfig,
    pub backend: Arc<dyn LlmBackend>,
    scorer: OnceLock<std::result::Result<Arc<RubricScorer>, RubricError>>,
}

impl Ctx {
    /// The shared rubric engine (started on first use; ~0.3 s).
    pub fn scorer(&self) -> Result<Arc<RubricScorer>> {
        self.scorer
            .get_or_init(|| RubricScorer::new(ScoreConfig::default()).map(Arc::new))
            .clone()
            .map_err(PipelineError::from)
    }
}

/// The outcome of one item in one stage: the filled item, or why it was dropped.
pub(crate) type Outcome = std::result::Result<SynthItem, Box<Reject>>;

/// An item-level failure that is not the model's fault (not recorded; retried on a rerun).
pub(crate) type ItemError = String;

/// What [`run_observed`] reports while it works: the library's one progress mechanism (a CLI
/// draws bars from these events; the library draws nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SynthEvent {
    /// A stage starts on `items` items (those an earlier run into the same output left to do).
    Started {
        /// The stage.
        stage: Stage,
        /// Items to process.
        items: usize,
    },
    /// One item of the running stage is done (kept, rejected or failed).
    Item,
    /// The running stage finished.
    Finished(Stage),
}

/// Runs the configured stages. `inner` answers requests that are not in the cache (ignored, and
/// may be `None`, with `replay_only`). `personas` is needed when the draft stage runs.
pub fn run(
    config: &PipelineConfig,
    personas: Option<&Path>,
    inner: Option<Arc<dyn LlmBackend>>,
) -> Result<PipelineReport> {
    run_observed(config, personas, inner, &mut |_| {})
}

/// [`run`], reporting progress to `observe` (on the calling thread).
pub fn run_observed(
    config: &PipelineConfig,
    personas: Option<&Path>,
    inner: Option<Arc<dyn LlmBackend>>,
    observe: &mut dyn FnMut(SynthEvent),
) -> Result<PipelineReport> {
    config.validate()?;
    if inner.is_none() && !config.replay_only && config.stages.iter().any(|&s| s != Stage::Filter) {
        return Err(PipelineError::Config(
            "no LLM backend given (use replay-only mode to run from the cache alone)".into(),
        ));
    }
    let ctx = Ctx {
        backend: crate::llm::recorded(inner, &config.cache_dir(), config.replay_only),
        config: config.clone(),
        scorer: OnceLock::new(),
    };
    std::fs::create_dir_all(&config.out).map_err(|e| PipelineError::Io {
        context: format!("creating {}", config.out.display()),
        message: e.to_string(),
    })?;
    if let Some(&first) = config.stages.first() {
        runner::check_upstream(config, first)?;
    }
    let mut report = PipelineReport::default();
    let mut items: Option<Vec<SynthItem>> = None;
    for &stage in &config.stages {
        let input = match items.take() {
            Some(items) => items,
            None => stage_input(config, stage, personas)?,
        };
        let (kept, summary) = runner::run_stage(&ctx, stage, input, observe)?;
        report.stages.push(summary);
        items = Some(kept);
    }
    if config.stages.contains(&Stage::Filter) {
        let tasks = filter::write_outputs(&ctx, items.as_deref().unwrap_or_default())?;
        report.tasks = Some(tasks);
        runner::write_manifest(&ctx, &report)?;
    }
    Ok(report)
}

/// The input of `stage` when it is the first one run: personas, or the previous stage's file.
fn stage_input(
    config: &PipelineConfig,
    stage: Stage,
    personas: Option<&Path>,
) -> Result<Vec<SynthItem>> {
    let index = Stage::ALL.iter().position(|&s| s == stage).unwrap_or(0);
    if index == 0 {
        let path = personas.ok_or_else(|| PipelineError::Input {
            stage: stage.name(),
            message: "the draft stage needs a personas file".into(),
        })?;
        return read_personas(path, &config.id_prefix);
    }
    let previous = Stage::ALL[index - 1];
    let path = runner::out_path(&config.out, previous);
    if !path.exists() {
        return Err(PipelineError::Input {
            stage: stage.name(),
            message: format!(
                "{} does not exist: run the {} stage first",
                path.display(),
                previous.name()
            ),
        });
    }
    let items: Vec<SynthItem> = runner::read_records(&path)?;
    let mut ids = BTreeSet::new();
    for (n, item) in items.iter().enumerate() {
        if !valid_item_id(&item.id) || !ids.insert(item.id.as_str()) {
            return Err(PipelineError::Corrupt {
                path: path.display().to_string(),
                line: n + 1,
                message: format!(
                    "record id {:?} is not a valid item id (1-128 of [A-Za-z0-9_.:-]) or \
                     appears twice",
                    item.id
                ),
            });
        }
    }
    Ok(items)
}

/// What `stage`'s records depend on besides their input record, as one canonical JSON line:
/// the pipeline version, the stage's prompt (version and SHA-256 of its text; the filter's rule
/// version) and exactly the settings the stage reads.
pub(crate) fn stage_key(config: &PipelineConfig, stage: Stage) -> String {
    let prompt = |p: &Prompt| {
        serde_json::json!({
            "version": p.version,
            "sha256": crate::io::sha256_hex(p.text.as_bytes()),
        })
    };
    let c = config;
    let generate = serde_json::json!({
        "model": c.model, "temperature": c.temperature, "seed": c.seed,
        "max_tokens": c.max_tokens,
    });
    let (prompt, settings) = match stage {
        Stage::Draft => (prompt(&prompt::DRAFT), generate),
        Stage::Tools => (prompt(&prompt::TOOLS), generate),
        Stage::Rewrite => {
            let mut s = generate;
            s["max_turns"] = c.max_turns.into();
            (prompt(&prompt::REWRITE), s)
        }
        Stage::Rollouts => (
            prompt(&prompt::TEACHER),
            serde_json::json!({
                "model": c.model, "sim_model": c.sim_model(),
                "teacher_temperature": c.teacher_temperature, "seed": c.seed,
                "rollouts": c.rollouts, "max_turns": c.max_turns, "user": c.user,
                "max_tool_error_fraction": c.max_tool_error_fraction,
            }),
        ),
        Stage::Rubric => {
            let mut s = generate;
            s["max_turns"] = c.max_turns.into();
            // Only a non-default mode is named, so records of runs made before the setting
            // existed (all joint) stay current.
            if c.extraction != Extraction::Joint {
                s["extraction"] = c.extraction.name().into();
                s["merge"] = rubric_extract::MERGE_VERSION.into();
            }
            (prompt(&prompt::RUBRIC), s)
        }
        Stage::Filter => (
            serde_json::json!({"version": filter::VERSION}),
            serde_json::json!({
                "max_turns": c.max_turns, "min_workflow_coverage": c.min_workflow_coverage,
                "min_best_reward": c.min_best_reward,
            }),
        ),
    };
    json_line(&serde_json::json!({
        "pipeline": PIPELINE_VERSION, "stage": stage.name(), "prompt": prompt,
        "settings": settings,
    }))
}

/// The fingerprint a record of a stage has when it was produced from `input` under the stage's
/// [`stage_key`]: the SHA-256 of the key and the input record's JSON.
pub fn fingerprint(config: &PipelineConfig, stage: Stage, input: &SynthItem) -> Result<String> {
    fingerprint_with(&stage_key(config, stage), input)
}

pub(crate) fn fingerprint_with(key: &str, input: &SynthItem) -> Result<String> {
    let record = serde_json::to_string(input).map_err(|e| PipelineError::Io {
        context: format!("serialising record {}", input.id),
        message: e.to_string(),
    })?;
    Ok(crate::io::sha256_hex(format!("{key}\n{record}").as_bytes()))
}

/// Whether `id` can be a task id: 1-128 characters of `[A-Za-z0-9_.:-]`.
fn valid_item_id(id: &str) -> bool {
    (1..=128).contains(&id.len())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-'))
}

/// Reads personas: one per non-empty line, either plain text or a JSON object
/// `{"persona": "...", "id": "..."}` (`id` optional). Item ids are `<prefix><index>` (5 digits,
/// 0-based over the personas) unless given.
pub fn read_personas(path: &Path, prefix: &str) -> Result<Vec<SynthItem>> {
    let text = std::fs::read_to_string(path).map_err(|e| PipelineError::Io {
        context: format!("reading {}", path.display()),
        message: e.to_string(),
    })?;
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Line {
        persona: String,
        #[serde(default)]
        id: Option<String>,
    }
    let mut items = Vec::new();
    let mut ids = BTreeSet::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let corrupt = |message: String| PipelineError::Corrupt {
            path: path.display().to_string(),
            line: n + 1,
            message,
        };
        let (persona, id) = if line.starts_with('{') {
            let l: Line = serde_json::from_str(line).map_err(|e| corrupt(e.to_string()))?;
            (l.persona, l.id)
        } else {
            (line.to_owned(), None)
        };
        let id = id.unwrap_or_else(|| format!("{prefix}{:05}", items.len()));
        if !valid_item_id(&id) {
            return Err(corrupt(format!(
                "id {id:?} must be 1-128 of [A-Za-z0-9_.:-]"
            )));
        }
        if persona.trim().is_empty() || persona.contains('\n') {
            return Err(corrupt("a persona is one non-empty line".into()));
        }
        if !ids.insert(id.clone()) {
            return Err(corrupt(format!("duplicate id {id:?}")));
        }
        items.push(SynthItem {
            id,
            persona: persona.trim().to_owned(),
            ..SynthItem::default()
        });
    }
    Ok(items)
}

/// Runs one stage on one item; the record it writes carries `fingerprint`.
pub(crate) fn process(
    ctx: &Ctx,
    stage: Stage,
    item: &SynthItem,
    fingerprint: &str,
) -> std::result::Result<Outcome, ItemError> {
    let mut outcome = match stage {
        Stage::Draft => draft::run(ctx, item),
        Stage::Tools => tool_check::run(ctx, item),
        Stage::Rewrite => rewrite::run(ctx, item),
        Stage::Rollouts => rollout::run(ctx, item),
        Stage::Rubric => rubric_extract::run(ctx, item),
        Stage::Filter => filter::run(ctx, item),
    }?;
    match &mut outcome {
        Ok(next) => {
            next.versions.push(stage.version().to_owned());
            next.fingerprint = fingerprint.to_owned();
        }
        Err(reject) => {
            reject.stage = stage.name().to_owned();
            reject.version = stage.version().to_owned();
            reject.id = item.id.clone();
            reject.fingerprint = fingerprint.to_owned();
        }
    }
    Ok(outcome)
}

/// A JSON value as the one-line canonical text used in prompts.
pub(crate) fn json_line(value: &Value) -> String {
    crate::tooluse::simulator::canonical_json(value)
}

/// The error for a record that lacks what an earlier stage should have filled.
pub(crate) fn missing(stage: Stage, field: &str) -> ItemError {
    format!(
        "stage {}: the record has no {field} (run the earlier stages first)",
        stage.name()
    )
}

/// A numbered list, one line per entry (`1. ...`), as prompts show workflows.
pub(crate) fn numbered(lines: &[String]) -> String {
    lines
        .iter()
        .enumerate()
        .map(|(i, s)| format!("{}. {s}", i + 1))
        .collect::<Vec<_>>()
        .join("\n")
}
