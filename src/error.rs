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
    Task(#[from] crate::tooluse::task::TaskError),
    /// A rubric could not be compiled or evaluated.
    #[error(transparent)]
    Rubric(#[from] crate::tooluse::rubric::RubricError),
    /// A tool or user simulator failed.
    #[error(transparent)]
    Simulator(#[from] crate::tooluse::simulator::SimError),
    /// An LLM backend failed.
    #[error(transparent)]
    Llm(#[from] crate::llm::LlmError),
    /// The task-synthesis pipeline failed.
    #[cfg(feature = "synth")]
    #[error(transparent)]
    Pipeline(#[from] crate::synth::PipelineError),
    /// A dataset export failed.
    #[cfg(feature = "export")]
    #[error(transparent)]
    Export(#[from] crate::export::ExportError),
    /// A model evaluation failed (endpoint, report).
    #[cfg(feature = "eval")]
    #[error(transparent)]
    Eval(#[from] crate::eval::EvalError),
    /// Session limits are unusable (a network server).
    #[cfg(any(feature = "server", feature = "mcp"))]
    #[error(transparent)]
    Session(#[from] crate::sessions::SessionError),
    /// The MCP server could not start or stopped (feature `mcp`).
    #[cfg(feature = "mcp")]
    #[error(transparent)]
    Mcp(#[from] crate::mcp::McpError),
    /// The OpenEnv server could not start, or a request named no task (feature `openenv`).
    #[cfg(feature = "openenv")]
    #[error(transparent)]
    OpenEnv(#[from] crate::openenv::OpenEnvError),
    /// A worker thread panicked (a bug: please report it).
    #[error("a worker thread panicked during {0}")]
    ThreadPanicked(&'static str),
    /// An engine does not hold exactly the universe's facts after loading them (a clause is
    /// missing, or one is left over from a universe the engine held before).
    #[error(
        "the engine holds {loaded} clauses of {predicate}, the universe of {people} people has {expected}"
    )]
    EngineIncomplete {
        /// The fact predicate, as name/arity.
        predicate: String,
        /// Clauses the engine holds.
        loaded: i64,
        /// Clauses in the universe's facts.
        expected: usize,
        /// People in the universe.
        people: usize,
    },
    /// A name that is not one of a closed set the crate ships (a preset, a sampling family): a
    /// caller can offer the valid ones.
    #[error("unknown {kind} {name:?} (valid: {})", .valid.join(", "))]
    UnknownName {
        /// What the name should name (`environment preset`, `sampling preset`, ...).
        kind: &'static str,
        /// The name given.
        name: String,
        /// The valid names, in order.
        valid: Vec<String>,
    },
    /// A tool call's text holds markup an environment would parse as another action (see
    /// [`crate::env::PROTOCOL_MARKERS`]); nothing was done.
    #[error("{field} must not contain {marker:?}")]
    ProtocolMarkup {
        /// The argument.
        field: &'static str,
        /// The markup found.
        marker: &'static str,
    },
    /// A tool call was not carried out (an unknown tool, bad arguments, an ended episode);
    /// nothing was done.
    #[error(transparent)]
    Tool(#[from] crate::toolcall::ToolFault),
    /// A served world could not be loaded, or a request named nothing it holds.
    #[error(transparent)]
    World(#[from] crate::toolcall::WorldError),
    /// A curriculum's configuration or resume state is unusable.
    #[error(transparent)]
    Curriculum(#[from] crate::curriculum::CurriculumError),
    /// `step` was called on an episode that has ended (call `reset`).
    #[error("step after the episode ended")]
    EpisodeOver,
    /// A dataset file is missing, does not match its manifest, or breaks an invariant.
    #[error("{file}: {message}")]
    Dataset {
        /// The file (path, or name within the dataset, with the line where known).
        file: String,
        /// What is wrong.
        message: String,
    },
    /// Some universes of a batch failed; the others were written.
    #[error(
        "{} of {} universes failed: {}",
        .failed.len(),
        .failed.len() + .written.len(),
        .failed.iter().map(|(s, e)| format!("seed {s}: {e}")).collect::<Vec<_>>().join("; ")
    )]
    BatchFailed {
        /// The seeds written, in order.
        written: Vec<u64>,
        /// Each failed seed with its error.
        failed: Vec<(u64, String)>,
    },
    /// A forked copy of the engine verifying part of a build's questions failed
    /// ([`crate::dataset::build()`] on Linux): its error as it reported it, or how it ended.
    #[error("the forked verifier of questions {share} failed: {reason}")]
    VerifierFailed {
        /// Which questions it verified (its batches).
        share: String,
        /// The child's error, or its exit status or signal.
        reason: String,
    },
    /// The forked child building one universe of a batch failed ([`crate::dataset::batch`]):
    /// its error as the child reported it, or how the child ended when it reported none.
    #[error("the child process building universe {seed} failed: {reason}")]
    ChildFailed {
        /// The universe's seed.
        seed: u64,
        /// The child's error, or its exit status or signal.
        reason: String,
    },
    /// An output path exists and replacing it was not asked for.
    #[error("{} already exists (pass --force to replace it)", .0.display())]
    Exists(std::path::PathBuf),
    /// `--force` was asked to replace something that is not a rulegym output.
    #[error("refusing to replace {}: {reason}", .path.display())]
    NotReplaceable {
        /// The path.
        path: std::path::PathBuf,
        /// Why it is not replaced.
        reason: String,
    },
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
