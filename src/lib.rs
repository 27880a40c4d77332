//! # rulegym
//!
//! Verifiable reinforcement-learning environments for small LLM agents. A seed-driven universe of
//! people is held in an embedded Prolog engine that verifies every answer; articles about the
//! people form a search corpus; rewards are exact.
//!
//! ```no_run
//! use rulegym::{Universe, UniverseConfig};
//! let universe = Universe::generate(&UniverseConfig::default()).unwrap();
//! println!("{} people", universe.people.len());
//! ```
#![deny(missing_docs)]

pub mod corpus;
pub mod curriculum;
pub mod dataset;
pub mod engine;
pub mod env;
pub mod error;
#[cfg(feature = "eval")]
pub mod eval;
#[cfg(feature = "export")]
pub mod export;
#[cfg(feature = "gpu")]
pub mod gpu;
pub mod grpo;
pub mod io;
pub mod llm;
#[cfg(feature = "mcp")]
pub mod mcp;
#[cfg(feature = "openenv")]
pub mod openenv;
pub mod preset;
pub mod question;
pub mod relations;
pub mod retrieval;
pub mod reward;
pub mod rewardcheck;
pub mod search;
pub mod seed;
#[cfg(feature = "server")]
pub mod sessions;
#[cfg(feature = "synth")]
pub mod synth;
#[cfg(feature = "testkit")]
pub mod testkit;
pub mod toolcall;
pub mod tooluse;
pub mod universe;

pub use error::{Error, Result};

// The entry types of each wing, at the root: a vendoring stack needs no module path for the
// common path (universe -> dataset -> questions -> environments -> rewards).
pub use dataset::{BuildConfig, Dataset, build};
pub use env::{Environment, Step};
pub use llm::{ChatMessage, Role};
pub use question::{Question, QuestionConfig, QuestionKind, Split};
pub use retrieval::{Document, SearchIndex};
pub use reward::{ScoreMode, score};
pub use search::{SearchEnv, SearchEnvConfig, SearchTask};
pub use tooluse::env::{ToolEnv, ToolEnvConfig};
pub use tooluse::task::Task;
pub use universe::{Universe, UniverseConfig};
