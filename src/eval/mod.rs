//! Model evaluation in the search environment: plays one episode per question against a policy
//! (normally an OpenAI-compatible chat endpoint: vLLM, SGLang, hosted), with bounded concurrency,
//! timeouts and retries, and summarises the episodes: mean F1/EM overall, per hops, per
//! PhantomWiki difficulty and per family, and searches per question against the proof's
//! (the "search scaling" analysis), with SVG plots and a small HTML page (see [`write_outputs`]).
//!
//! The episode loop is Search-R1's: the assistant text (generation stopped at `</search>` or
//! `</answer>`) is the action; the environment's observation is appended as the next user message.
//!
//! The room's files, one job each: [`policy`] (what answers a turn: an endpoint, with its
//! sampling), [`episode`] (the episode loop and [`evaluate`]), [`report`] (statistics and the
//! report schema), [`compare`] (several runs side by side), [`plot`] (SVG figures), [`html`]
//! (the pages), [`output`] (writing a report or a comparison to its folder) and `settings`
//! ([`EvalSettings`]: presets and overrides resolved once).

pub(crate) mod compare;
pub(crate) mod episode;
pub(crate) mod html;
pub(crate) mod output;
pub(crate) mod plot;
pub(crate) mod policy;
pub(crate) mod report;
pub(crate) mod settings;

pub use compare::{Comparison, compare};
pub use episode::{EpisodeRecord, EvalConfig, evaluate, play};
pub use output::{write_comparison, write_outputs};
pub use policy::{EndpointPolicy, Policy, STOP, Sampling, restore_stop};
pub use report::{EvalReport, GroupStats, REPORT_SCHEMA_VERSION, RunInfo, mean_se, report};
pub use settings::EvalSettings;

/// Errors of the evaluation report (endpoint failures are [`crate::llm::LlmError`]s).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EvalError {
    /// Every episode failed against the endpoint (unreachable, refusing, answering garbage):
    /// a report of zeros would mislead, so none is written.
    #[error(
        "all {episodes} episodes failed against the endpoint; nothing was written. The first: {first}"
    )]
    AllEpisodesFailed {
        /// Episodes run.
        episodes: usize,
        /// The first episode's error.
        first: String,
    },
    /// Plotting a report figure failed.
    #[error("plotting {figure}: {message}")]
    Plot {
        /// The figure file.
        figure: String,
        /// The plotter's message.
        message: String,
    },
}
