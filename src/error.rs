//! The crate-wide error type: one enum, each module contributing its own variant. A bad
//! configuration found by any module reaches the caller as [`Error::Config`]: the modules'
//! own `Config` variants (GRPO, retrieval, LLM backends, the synth pipeline, tool worlds)
//! become it, named by their subject, so one match catches every one of them.

/// Every fallible operation in rulegym returns this error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A configuration value is out of range or inconsistent, whichever module found it.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// GRPO math (advantages, loss, gradient) rejected its input.
    #[error(transparent)]
    Grpo(crate::grpo::GrpoError),
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
    Retrieval(crate::retrieval::RetrievalError),
    /// A tool-use task is malformed or missing.
    #[error(transparent)]
    Task(#[from] crate::tooluse::task::TaskError),
    /// A rubric could not be compiled or evaluated.
    #[error(transparent)]
    Rubric(#[from] crate::tooluse::rubric::RubricError),
    /// A tool or user simulator failed.
    #[error(transparent)]
    Simulator(#[from] crate::tooluse::mock_tools::SimError),
    /// An LLM backend failed.
    #[error(transparent)]
    Llm(crate::llm::LlmError),
    /// Generating or replaying a tool world failed.
    #[error(transparent)]
    RuleGen(crate::tooluse::rulegen::RuleGenError),
    /// The task-synthesis pipeline failed.
    #[cfg(feature = "synth")]
    #[error(transparent)]
    Pipeline(crate::synth::PipelineError),
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
    /// An output path exists and replacing it was not asked for (the CLI's `--force`, the
    /// Python bindings' `force=True`).
    #[error("{} already exists and replacing it was not asked for", .0.display())]
    Exists(std::path::PathBuf),
    /// Replacing was asked for something that is not a rulegym output.
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

/// `From` for a module error whose `Config(String)` variant becomes [`Error::Config`] with the
/// subject in front, and whose other variants become `Error::<variant>`.
macro_rules! config_becomes_error_config {
    ($($(#[$cfg:meta])* $ty:path, $config:path => $variant:ident, $subject:literal;)*) => {$(
        $(#[$cfg])*
        impl From<$ty> for Error {
            fn from(e: $ty) -> Self {
                use $config as ModuleConfig;
                match e {
                    ModuleConfig(m) => Error::Config(format!("{}: {m}", $subject)),
                    e => Error::$variant(e),
                }
            }
        }
    )*};
}

config_becomes_error_config! {
    crate::grpo::GrpoError, crate::grpo::GrpoError::Config => Grpo, "GRPO";
    crate::retrieval::RetrievalError, crate::retrieval::RetrievalError::Config
        => Retrieval, "retrieval";
    crate::llm::LlmError, crate::llm::LlmError::Config => Llm, "LLM backend";
    crate::tooluse::rulegen::RuleGenError, crate::tooluse::rulegen::RuleGenError::Config
        => RuleGen, "tool worlds";
    #[cfg(feature = "synth")]
    crate::synth::PipelineError, crate::synth::PipelineError::Config
        => Pipeline, "synth pipeline";
}

/// Shorthand for results with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
