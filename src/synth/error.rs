//! Why a pipeline run failed (an item's invalid LLM answer is not an error: it is a
//! [`Reject`](super::Reject)).

use crate::tooluse::rubric::RubricError;

/// Errors of the pipeline (an item's invalid LLM answer is not an error: it is a
/// [`Reject`](super::Reject)).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
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
