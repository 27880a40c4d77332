//! Why an MCP tool call was refused or failed.

/// Why a tool call was refused or failed; the client receives it as a tool result with
/// `isError: true` and this message.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The arguments do not fit the tool's input schema.
    #[error("invalid arguments for {tool}: {message}")]
    BadArguments {
        /// The tool.
        tool: String,
        /// What is wrong.
        message: String,
    },
    /// A text argument is longer than its tool's bound,
    /// [`MAX_TEXT_CHARS`](crate::mcp::limits::MAX_TEXT_CHARS) (or a task tool's arguments than
    /// [`MAX_ARGS_BYTES`](crate::mcp::limits::MAX_ARGS_BYTES)).
    #[error("{field} is {len} long; the limit is {max}")]
    TooLong {
        /// The argument.
        field: &'static str,
        /// Its length (characters, or bytes of JSON for a task tool's arguments).
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A number argument is out of range.
    #[error("{field} must be in {min}..={max}, got {got}")]
    OutOfRange {
        /// The argument.
        field: &'static str,
        /// Smallest allowed.
        min: usize,
        /// Largest allowed.
        max: usize,
        /// What was given.
        got: usize,
    },
    /// `get_article` found no title equal to the one asked, even ignoring case.
    #[error("no article titled {title:?}{hint}")]
    NoArticle {
        /// The title asked for.
        title: String,
        /// Nearest titles by search, as text.
        hint: String,
    },
    /// The episode already ended (an answer, `finish`, a stop, or the turn cap).
    #[error("the episode is over ({0}); open a new MCP session for a new episode")]
    EpisodeOver(String),
    /// A text would be read by the tool-use environment as protocol markup.
    #[error("{field} must not contain {marker:?}")]
    ProtocolText {
        /// The argument.
        field: &'static str,
        /// The markup found.
        marker: &'static str,
    },
    /// The environment failed (the message of the library error).
    #[error("{0}")]
    Failed(String),
}

impl From<crate::Error> for ToolError {
    fn from(e: crate::Error) -> Self {
        match e {
            crate::Error::ProtocolMarkup { field, marker } => {
                ToolError::ProtocolText { field, marker }
            }
            e => ToolError::Failed(e.to_string()),
        }
    }
}
