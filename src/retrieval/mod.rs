//! Dense retrieval: encoders, exact flat search, index files and the search service behind
//! the HTTP server.

#[cfg(feature = "bert")]
pub mod bert;
pub mod docs;
pub(crate) mod encoder;
pub mod flat;
#[cfg(feature = "gpu")]
pub mod gpu;
pub mod hnsw;
pub(crate) mod index_file;
pub(crate) mod kernel;
#[cfg(feature = "server")]
pub mod server;
#[cfg(feature = "testkit")]
pub mod synthetic;
pub(crate) mod topk;
#[cfg(feature = "bert")]
pub(crate) mod transformer;

pub use docs::Document;
pub(crate) use docs::TitleLookup;
pub use encoder::{BuiltinConfig, BuiltinEncoder, Encoder, TextKind};
pub use flat::{FlatIndex, RankChecker};
pub use index_file::{EncoderChoice, IndexKind, SearchIndex};
/// The instruction set of the CPU kernels (every one gives the same bits).
pub use kernel::Isa;
/// The canonical score of a query and a row, the one every fast path equals bit for bit.
pub use kernel::dot_canonical;
pub use topk::Hit;

/// The Euclidean norm of `v`, accumulated in f64 in element order (deterministic).
pub(crate) fn l2_norm(v: &[f32]) -> f64 {
    v.iter()
        .map(|x| (*x as f64) * (*x as f64))
        .sum::<f64>()
        .sqrt()
}

/// Errors of the retrieval module.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RetrievalError {
    /// Vector or matrix shapes do not fit together.
    #[error("shape error: {0}")]
    Shape(String),
    /// A vector holds NaN, an infinity, or has an excessive norm.
    #[error("non-finite or too large vector: {0}")]
    NonFinite(String),
    /// `k` must be at least 1.
    #[error("invalid top-k {0}: must be at least 1")]
    InvalidK(usize),
    /// An encoder or index configuration is invalid.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A corpus or index file is malformed.
    #[error("format error: {0}")]
    Format(String),
    /// The index was built with another encoder than the one given for queries.
    #[error("encoder mismatch: index built with {index:?}, query encoder is {given:?}")]
    EncoderMismatch {
        /// Identity stored in the index.
        index: String,
        /// Identity of the encoder offered.
        given: String,
    },
    /// Reading or writing a file failed.
    #[error("{0}: {1}")]
    Io(String, #[source] std::io::Error),
    /// GPU setup or execution failed (including: no adapter on this machine).
    #[cfg(feature = "gpu")]
    #[error(transparent)]
    Gpu(#[from] crate::gpu::GpuError),
}
