//! The errors of generating and replaying tool worlds.

/// Errors from generating or replaying tool worlds.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuleGenError {
    /// The configuration is unusable.
    #[error("tool-world config: {0}")]
    Config(String),
    /// Not enough distinct tasks could be generated.
    #[error("only {found} distinct tasks after {tried} candidates (asked for {wanted})")]
    Exhausted {
        /// Tasks found.
        found: usize,
        /// Candidates tried.
        tried: u64,
        /// Tasks asked for.
        wanted: usize,
    },
    /// A task's workflow is not a reference solution this module can replay.
    #[error("task {task}: workflow line {line}: {message}")]
    Workflow {
        /// Task id.
        task: String,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The environment failed during a replay.
    #[error("task {task}: replay failed: {message}")]
    Replay {
        /// Task id.
        task: String,
        /// What went wrong.
        message: String,
    },
}
