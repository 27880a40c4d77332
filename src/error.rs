//! The crate-wide error type: one enum, each module contributing its own variant.

/// Every fallible operation in rulegym returns this error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A configuration value is out of range or inconsistent.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// GRPO math (advantages, loss, gradient) rejected its input.
    #[error(transparent)]
    Grpo(#[from] crate::grpo::GrpoError),
    /// A question query could not be compiled or decoded.
    #[error(transparent)]
    Query(#[from] crate::question::QueryError),
    /// PhantomWiki output could not be read or interpreted.
    #[error(transparent)]
    PhantomWiki(#[from] crate::dataset::phantomwiki::PhantomWikiError),
    /// The Prolog engine reported an error.
    #[error(transparent)]
    Engine(#[from] crate::engine::EngineError),
    /// Retrieval (encoders, indexes, search) failed.
    #[error(transparent)]
    Retrieval(#[from] crate::retrieval::RetrievalError),
    /// A tool-use task is malformed or missing.
    #[error(transparent)]
    Task(#[from] crate::synth::task::TaskError),
    /// A rubric could not be compiled or evaluated.
    #[error(transparent)]
    Rubric(#[from] crate::reward::rubric::RubricError),
    /// A tool or user simulator failed.
    #[error(transparent)]
    Simulator(#[from] crate::env::tool_sim::SimError),
    /// An LLM backend failed.
    #[error(transparent)]
    Llm(#[from] crate::synth::llm::LlmError),
    /// The task-synthesis pipeline failed.
    #[error(transparent)]
    Pipeline(#[from] crate::synth::pipeline::PipelineError),
    /// A dataset export failed.
    #[error(transparent)]
    Export(#[from] crate::env::export::ExportError),
    /// A model evaluation failed (endpoint, report).
    #[error(transparent)]
    Eval(#[from] crate::env::eval::EvalError),
    /// Reading or writing a file failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, with the path.
        context: String,
        /// The underlying I/O error.
        source: std::io::Error,
    },
    /// JSON could not be parsed or written.
    #[error("{context}: {source}")]
    Json {
        /// What was being parsed, with the path.
        context: String,
        /// The underlying serde error.
        source: serde_json::Error,
    },
}

/// Shorthand for results with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
