//! A run of the pipeline: [`run`] and [`run_observed`] chain the configured stages (the stage
//! runner is `runner.rs`) and report what each did.

use super::{
    Ctx, PipelineConfig, PipelineError, SynthItem, SynthStage, filter, read_personas, runner,
    valid_item_id,
};
use crate::llm::LlmBackend;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

/// Version of the pipeline's record formats and stage order, recorded in `manifest.json`.
pub const PIPELINE_VERSION: &str = "synth-pipeline-v1";

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

/// What [`run_observed`] reports while it works: the library's one progress mechanism (a CLI
/// draws bars from these events; the library draws nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SynthEvent {
    /// A stage starts on `items` items (those an earlier run into the same output left to do).
    Started {
        /// The stage.
        stage: SynthStage,
        /// Items to process.
        items: usize,
    },
    /// One item of the running stage is done (kept, rejected or failed).
    Item,
    /// The running stage finished.
    Finished(SynthStage),
}

/// Runs the configured stages. `inner` answers requests that are not in the cache (ignored, and
/// may be `None`, with `replay_only`). `personas` is needed when the draft stage runs.
pub fn run(
    config: &PipelineConfig,
    personas: Option<&Path>,
    inner: Option<Arc<dyn LlmBackend>>,
) -> Result<PipelineReport, PipelineError> {
    run_observed(config, personas, inner, &mut |_| {})
}

/// [`run`], reporting progress to `observe` (on the calling thread).
pub fn run_observed(
    config: &PipelineConfig,
    personas: Option<&Path>,
    inner: Option<Arc<dyn LlmBackend>>,
    observe: &mut dyn FnMut(SynthEvent),
) -> Result<PipelineReport, PipelineError> {
    config.validate()?;
    if inner.is_none()
        && !config.replay_only
        && config.stages.iter().any(|&s| s != SynthStage::Filter)
    {
        return Err(PipelineError::Config(
            "no LLM backend given (use replay-only mode to run from the cache alone)".into(),
        ));
    }
    let ctx = Ctx::new(
        config.clone(),
        crate::llm::recorded(inner, &config.cache_dir(), config.replay_only),
    );
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
    if config.stages.contains(&SynthStage::Filter) {
        let tasks = filter::write_outputs(&ctx, items.as_deref().unwrap_or_default())?;
        report.tasks = Some(tasks);
        runner::write_manifest(&ctx, &report)?;
    }
    Ok(report)
}

/// The input of `stage` when it is the first one run: personas, or the previous stage's file.
fn stage_input(
    config: &PipelineConfig,
    stage: SynthStage,
    personas: Option<&Path>,
) -> Result<Vec<SynthItem>, PipelineError> {
    let index = SynthStage::ALL
        .iter()
        .position(|&s| s == stage)
        .unwrap_or(0);
    if index == 0 {
        let path = personas.ok_or_else(|| PipelineError::Input {
            stage: stage.name(),
            message: "the draft stage needs a personas file".into(),
        })?;
        return read_personas(path, &config.id_prefix);
    }
    let previous = SynthStage::ALL[index - 1];
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
