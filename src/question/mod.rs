//! Multi-hop questions with Prolog-verified gold answers.
//!
//! Templates come from PhantomWiki's grammar ([`grammar`]); walks over the universe graph propose
//! fillings ([`sample`]); each filling is a typed [`Query`] whose gold answers are the result of
//! running it, set-at-a-time, on the engine. Four families: `base` (PhantomWiki's grammar), `hops`,
//! `hops+constraints` and `hops+comparisons` (PhantomEnvironments), each with a versioned id.
//!
//! One job per file: the families and comparison shapes (`family`), the knobs (`config`),
//! solvability certificates (`certify`), the question record (`record`), the generation report
//! (`report`), a family's cells (`cells`), one proposal per slot (`propose`), phase 1 over every
//! slot ([`propose_all`], `proposals`) and phase 2, the engine's gold answers ([`verify`]).

pub mod balance;
pub(crate) mod degenerate;
pub(crate) mod grammar;
pub(crate) mod query;
pub mod sample;
pub(crate) mod text;

mod cells;
mod certify;
mod config;
mod family;
mod proposals;
mod record;
mod report;
mod slot;
mod verify;

pub use certify::{Anchors, Certificate, Certify};
pub use config::{QuestionConfig, Solvability};
pub use degenerate::Degeneracy;
pub use family::{Comparison, Family};
pub use grammar::{AnchorKind, Ask, Template, templates};
pub use proposals::{Proposals, check_shard, propose_all, propose_all_observed};
pub use query::{Anchor, Attr, Chain, ChainStep, Query, QueryError};
pub use record::{Question, QuestionKind, Split, difficulty};
pub use report::{CellReport, GenerationReport};
pub use sample::{AnchorStrategy, Sampler, WalkLimits};
#[cfg(target_os = "linux")]
pub(crate) use verify::verify_forked;
pub use verify::{generate, verify};
