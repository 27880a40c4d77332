//! The SynthAgent task-synthesis pipeline, driven by any OpenAI-compatible LLM:
//!
//! ```text
//! personas -> draft -> tools -> rewrite -> rollouts -> rubric -> filter -> tasks.jsonl
//! ```
//!
//! - `draft` (`draft.rs`): a persona seed becomes a task, a workflow of 5-7 sub-goals,
//!   3-5 tools of different categories (`parameters` and `outputs` schemas) and one forbidden
//!   behaviour of the form "Tool X must NOT be used to Y" with its reason;
//! - `tools` (`tool_check.rs`): the tool check drops tools the model could do itself, keeps
//!   outputs simulatable (an object of at most 2 fields), marks read-only vs state-modifying and
//!   adds 1-2 distractor tools;
//! - `rewrite` (`rewrite.rs`): the information gap: a one-sentence underspecified
//!   instruction and a hidden user context of structured slots;
//! - `rollouts` (`rollout.rs`): at least two teacher rollouts in the mock environment
//!   ([`crate::tooluse::env::ToolEnv`] with the mapping tool simulator and a simulated user);
//! - `rubric` (`rubric_extract.rs`): executable rubric items (Prolog bodies over trajectory
//!   facts), each checked by the rubric whitelist and loaded into a rubric engine; extracted
//!   from all usable rollouts at once ([`Extraction::Joint`]) or once per rollout and merged
//!   ([`Extraction::PerTrajectory`], the paper's);
//! - `filter` (`filter.rs`): drops tasks whose teacher rollouts leave too much of the
//!   workflow unexecuted or whose best rollout does not pass its rubric; writes `tasks.jsonl`
//!   (valid [`Task`](crate::tooluse::task::Task) records), `mappings/<id>.json` (the teacher's
//!   tool responses, so training rollouts start consistent with them) and `manifest.json`.
//!
//! Every LLM stage has a versioned prompt in `prompts/synth/` (embedded at compile time; the
//! version is recorded in each record) and a strict parser: an invalid answer drops the item with
//! a [`Reject`] record in `<stage>.rejects.jsonl`, never a default. Stages run on a pool of
//! `concurrency` threads and write their files in input order whatever the concurrency. Every
//! LLM exchange goes through a [`crate::llm::CachedBackend`], so a run replays bit-exactly offline
//! (`replay_only`).
//!
//! Resume: every record (kept or rejected) carries the [`fingerprint`] of what produced it: the
//! stage's prompt (version and text), the settings the stage reads, and the exact input record
//! from the previous stage (the persona for `draft`). A rerun into the same output directory
//! keeps the records whose fingerprint matches the current input and settings, recomputes the
//! others (identical LLM requests are answered by the cache), and drops the records of ids that
//! are no longer in the input; the `filter` stage (no LLM) always recomputes. The files of the
//! stages before the first stage run must match the current settings too, or the run stops with
//! [`PipelineError::Stale`] before writing anything. A partial last line (a write cut short) is
//! ignored when a file is read; only the stage that owns the file removes it, when it resumes.

// Where each part lives: `pipeline.rs` runs the stages in order (`run`, its report and progress
// events); `stage.rs` names the stages and runs one on an item; `item.rs` is the record they
// fill; `config.rs` the settings; `fingerprint.rs` what a rerun keeps; `error.rs` the errors;
// `runner.rs` a stage's files, resume and workers; one file per stage from `draft.rs` to
// `filter.rs`.
mod config;
mod draft;
mod error;
mod filter;
mod fingerprint;
mod item;
mod parse;
mod pipeline;
pub mod preset;
mod prompt;
mod rewrite;
mod rollout;
mod rubric_extract;
mod runner;
mod stage;
mod tool_check;

pub use config::{Extraction, PipelineConfig};
pub use error::PipelineError;
pub use filter::Verdict;
pub use fingerprint::fingerprint;
pub use item::{SynthItem, read_personas};
pub use parse::{Reject, RejectReason};
pub use pipeline::{PIPELINE_VERSION, PipelineReport, StageSummary, SynthEvent, run, run_observed};
pub use prompt::{PROMPTS, Prompt};
pub use rollout::Rollout;
pub use stage::SynthStage;

/// How the simulated user of teacher rollouts answers (the pipeline's default is the LLM user).
pub use crate::tooluse::user::UserKind;

pub(crate) use fingerprint::{fingerprint_with, stage_key};
pub(crate) use item::valid_item_id;
pub(crate) use prompt::{json_line, numbered};
pub(crate) use stage::{Ctx, ItemError, Outcome, missing, process};
