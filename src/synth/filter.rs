//! Stage `filter` (no LLM): every teacher rollout is scored by the task's extracted rubric. A
//! task is dropped when its rollouts execute, on average, less than `min_workflow_coverage` of
//! the workflow (a workflow step counts as executed in a rollout when one of its sub-goal items
//! passes; a step without items never does), or when its best rollout (highest reward, lowest
//! index on ties) scores below `min_best_reward`. Kept tasks become `tasks.jsonl`, and their
//! teacher mappings `mappings/<id>.json`.

use super::parse::{Reject, RejectReason};
use super::runner::{io_error, out_path, write_atomic};
use super::{Ctx, ItemError, Outcome, PipelineError, SynthItem, SynthStage, missing};
use crate::tooluse::mock_tools::{MappingConfig, MappingSimulator};
use crate::tooluse::rubric::ItemStatus;
use crate::tooluse::task::ItemKind;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// Version of the filter's rules, recorded like a prompt version.
pub const VERSION: &str = "filter.v1";

/// The scores the filter decided on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Verdict {
    /// Reward of each teacher rollout under the extracted rubric.
    pub rewards: Vec<f64>,
    /// Fraction of the workflow each rollout executed.
    pub coverage: Vec<f64>,
    /// Mean of `coverage`.
    pub mean_coverage: f64,
    /// Index of the best rollout.
    pub best: usize,
}

pub(super) fn run(ctx: &Ctx, item: &SynthItem) -> Result<Outcome, ItemError> {
    let rubric = item
        .rubric
        .clone()
        .ok_or_else(|| missing(SynthStage::Filter, "rubric"))?;
    if item.rollouts.is_empty() {
        return Err(missing(SynthStage::Filter, "rollouts"));
    }
    let task = item.to_task(rubric, ctx.config.max_turns);
    let program = match task.rubric_program() {
        Ok(p) => p,
        Err(e) => return Ok(Err(Reject::new(RejectReason::RuleRejected, e.to_string()))),
    };
    let scorer = ctx.scorer().map_err(|e| e.to_string())?;
    let steps = item.workflow.len().max(1);
    let mut verdict = Verdict {
        rewards: Vec::new(),
        coverage: Vec::new(),
        mean_coverage: 0.0,
        best: 0,
    };
    let mut failed_items = Vec::new();
    for (i, rollout) in item.rollouts.iter().enumerate() {
        let result = match scorer.score(&program, &rollout.trajectory, None) {
            Ok(r) => r,
            Err(e) => {
                let detail = format!("rollout {i}: {e}");
                return Ok(Err(Reject::new(RejectReason::RubricError, detail)));
            }
        };
        let executed: BTreeSet<u32> = result
            .items
            .iter()
            .filter(|r| r.kind == ItemKind::Subgoal)
            .zip(&item.subgoal_steps)
            .filter(|(r, _)| r.status == ItemStatus::Passed)
            .map(|(_, &step)| step)
            .collect();
        verdict.coverage.push(executed.len() as f64 / steps as f64);
        if verdict.rewards.is_empty() || result.reward > verdict.rewards[verdict.best] {
            verdict.best = i;
            failed_items = result
                .items
                .iter()
                .filter(|r| r.status == ItemStatus::Failed)
                .map(|r| r.id.clone())
                .collect();
        }
        verdict.rewards.push(result.reward);
    }
    verdict.mean_coverage = verdict.coverage.iter().sum::<f64>() / verdict.coverage.len() as f64;
    if verdict.mean_coverage < ctx.config.min_workflow_coverage {
        return Ok(Err(Reject::new(
            RejectReason::WorkflowUnexecuted,
            format!(
                "teacher rollouts executed {:.2} of the workflow on average (coverage {:?}), \
                 {:.2} needed",
                verdict.mean_coverage, verdict.coverage, ctx.config.min_workflow_coverage
            ),
        )));
    }
    let best = verdict.rewards[verdict.best];
    if best < ctx.config.min_best_reward {
        return Ok(Err(Reject::new(
            RejectReason::BestRolloutFails,
            format!(
                "best teacher rollout {} scores {best:.3} < {}; failed items: {}",
                verdict.best,
                ctx.config.min_best_reward,
                failed_items.join(", ")
            ),
        )));
    }
    Ok(Ok(SynthItem {
        verdict: Some(verdict),
        ..item.clone()
    }))
}

/// Writes `tasks.jsonl` (one [`crate::tooluse::task::Task`] per kept item, in order) and each
/// kept task's teacher mapping as `mappings/<id>.json` (the tool simulator's file format).
/// Returns the number of tasks.
pub(super) fn write_outputs(ctx: &Ctx, items: &[SynthItem]) -> Result<usize, PipelineError> {
    let out = &ctx.config.out;
    let mut lines = String::new();
    let bad = |message: String| PipelineError::Input {
        stage: SynthStage::Filter.name(),
        message: format!("{}: {message}", out_path(out, SynthStage::Filter).display()),
    };
    for item in items {
        // The id names a file under `mappings/`: one from an edited stage file must not escape.
        if !super::valid_item_id(&item.id) {
            return Err(bad(format!(
                "record id {:?} must be 1-128 of [A-Za-z0-9_.:-]",
                item.id
            )));
        }
        let rubric = item
            .rubric
            .clone()
            .ok_or_else(|| bad(format!("record {} has no rubric", item.id)))?;
        let task = item.to_task(rubric, ctx.config.max_turns);
        let line = serde_json::to_string(&task).map_err(|e| io_error(out, "serialising", e))?;
        lines.push_str(&line);
        lines.push('\n');
        let path = out.join("mappings").join(format!("{}.json", item.id));
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_error(&path, "removing", e)),
        }
        let config = MappingConfig {
            capacity: item.mapping.len().max(1),
            ..MappingConfig::default()
        };
        let sim = MappingSimulator::new(&item.id, Some(path.clone()), None, config)
            .map_err(|e| io_error(&path, "writing", e))?;
        for entry in &item.mapping {
            let args: serde_json::Value = serde_json::from_str(&entry.args).map_err(|e| {
                bad(format!(
                    "record {}: mapping arguments of {} are not JSON: {e}",
                    item.id, entry.tool
                ))
            })?;
            sim.insert(&entry.tool, &args, entry.response.clone())
                .map_err(|e| io_error(&path, "writing", e))?;
        }
    }
    write_atomic(&out.join("tasks.jsonl"), lines.as_bytes())?;
    remove_stale_mappings(&out.join("mappings"), items)?;
    Ok(items.len())
}

/// Removes the mapping files (`<id>.json` and its `<id>.lock`) of tasks an earlier run kept
/// and this one did not, so `mappings/` matches `tasks.jsonl`.
fn remove_stale_mappings(dir: &std::path::Path, items: &[SynthItem]) -> Result<(), PipelineError> {
    let kept: BTreeSet<&str> = items.iter().map(|i| i.id.as_str()).collect();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_error(dir, "listing", e)),
    };
    let mut stale = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| io_error(dir, "listing", e))?.path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let id = name
            .strip_suffix(".json")
            .or_else(|| name.strip_suffix(".lock"));
        if id.is_some_and(|id| !kept.contains(id)) && path.is_file() {
            stale.push(path);
        }
    }
    stale.sort();
    for path in stale {
        std::fs::remove_file(&path).map_err(|e| io_error(&path, "removing", e))?;
    }
    Ok(())
}
