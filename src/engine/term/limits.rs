//! What one read may cost and why it fails: the reader's [`ReadLimits`] and its [`ReadError`],
//! shared by the lexer and the parser.

/// Resource limits of one read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadLimits {
    /// Longest accepted text, in bytes.
    pub max_bytes: usize,
    /// Most tokens in the text (the final full stop counts as one).
    pub max_tokens: usize,
    /// Deepest nesting of compound terms, lists, operator terms and parentheses. The reader
    /// recurses this deep, so keep it modest (hundreds at most).
    pub max_depth: usize,
    /// Longest atom, string or variable name, in characters (after escapes are resolved).
    pub max_text: usize,
}

impl ReadLimits {
    /// Generous limits for trusted files: 1 MiB, a million tokens, depth 64, 64 Ki characters.
    pub const DEFAULT: ReadLimits = ReadLimits {
        max_bytes: 1 << 20,
        max_tokens: 1_000_000,
        max_depth: 64,
        max_text: 64 * 1024,
    };
}

impl Default for ReadLimits {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Why a text could not be read: a message saying what was expected, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} at byte {offset}")]
pub struct ReadError {
    /// Byte offset in the text where reading failed.
    pub offset: usize,
    /// What is wrong.
    pub message: String,
}

impl ReadError {
    pub(super) fn new(offset: usize, message: impl Into<String>) -> Self {
        ReadError {
            offset,
            message: message.into(),
        }
    }

    /// The 1-based line and column (counted in characters) of the error in `src`, the text
    /// that was read.
    pub fn line_column(&self, src: &str) -> (usize, usize) {
        let mut line = 1;
        let mut column = 1;
        for (i, c) in src.char_indices() {
            if i >= self.offset {
                break;
            }
            if c == '\n' {
                line += 1;
                column = 1;
            } else {
                column += 1;
            }
        }
        (line, column)
    }
}
