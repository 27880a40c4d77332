//! The stages: their names and versions, what every stage shares ([`Ctx`]), and the one call
//! that runs a stage on an item ([`process`]).

use super::parse::Reject;
use super::{
    PipelineConfig, PipelineError, SynthItem, draft, filter, prompt, rewrite, rollout,
    rubric_extract, tool_check,
};
use crate::llm::LlmBackend;
use crate::tooluse::rubric::{RubricError, RubricScorer, ScoreConfig};
use serde::{Deserialize, Serialize};
use std::sync::{Arc, OnceLock};

/// The stages, in pipeline order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum SynthStage {
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

impl SynthStage {
    /// Every stage in order.
    pub const ALL: [SynthStage; 6] = [
        SynthStage::Draft,
        SynthStage::Tools,
        SynthStage::Rewrite,
        SynthStage::Rollouts,
        SynthStage::Rubric,
        SynthStage::Filter,
    ];

    /// The stage's name (also its file name stem).
    pub fn name(self) -> &'static str {
        match self {
            SynthStage::Draft => "draft",
            SynthStage::Tools => "tools",
            SynthStage::Rewrite => "rewrite",
            SynthStage::Rollouts => "rollouts",
            SynthStage::Rubric => "rubric",
            SynthStage::Filter => "filter",
        }
    }

    /// Parses a stage name.
    pub fn parse(name: &str) -> Result<SynthStage, PipelineError> {
        SynthStage::ALL
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
            SynthStage::Draft => prompt::DRAFT.version,
            SynthStage::Tools => prompt::TOOLS.version,
            SynthStage::Rewrite => prompt::REWRITE.version,
            SynthStage::Rollouts => prompt::TEACHER.version,
            SynthStage::Rubric => prompt::RUBRIC.version,
            SynthStage::Filter => filter::VERSION,
        }
    }
}

/// What every stage shares: the cached backend, the configuration and a lazily started rubric
/// engine.
pub(crate) struct Ctx {
    pub config: PipelineConfig,
    pub backend: Arc<dyn LlmBackend>,
    scorer: OnceLock<Result<Arc<RubricScorer>, RubricError>>,
}

impl Ctx {
    /// A context over `backend` (already behind the record/replay cache); the rubric engine
    /// starts on first use.
    pub fn new(config: PipelineConfig, backend: Arc<dyn LlmBackend>) -> Ctx {
        Ctx {
            config,
            backend,
            scorer: OnceLock::new(),
        }
    }

    /// The shared rubric engine (started on first use; ~0.3 s).
    pub fn scorer(&self) -> Result<Arc<RubricScorer>, PipelineError> {
        self.scorer
            .get_or_init(|| RubricScorer::new(ScoreConfig::default()).map(Arc::new))
            .clone()
            .map_err(PipelineError::from)
    }
}

/// The outcome of one item in one stage: the filled item, or why it was dropped.
pub(crate) type Outcome = Result<SynthItem, Box<Reject>>;

/// An item-level failure that is not the model's fault (not recorded; retried on a rerun).
pub(crate) type ItemError = String;

/// Runs one stage on one item; the record it writes carries `fingerprint`.
pub(crate) fn process(
    ctx: &Ctx,
    stage: SynthStage,
    item: &SynthItem,
    fingerprint: &str,
) -> Result<Outcome, ItemError> {
    let mut outcome = match stage {
        SynthStage::Draft => draft::run(ctx, item),
        SynthStage::Tools => tool_check::run(ctx, item),
        SynthStage::Rewrite => rewrite::run(ctx, item),
        SynthStage::Rollouts => rollout::run(ctx, item),
        SynthStage::Rubric => rubric_extract::run(ctx, item),
        SynthStage::Filter => filter::run(ctx, item),
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

/// The error for a record that lacks what an earlier stage should have filled.
pub(crate) fn missing(stage: SynthStage, field: &str) -> ItemError {
    format!(
        "stage {}: the record has no {field} (run the earlier stages first)",
        stage.name()
    )
}
