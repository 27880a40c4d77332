//! The record that flows through the stages ([`SynthItem`]), its ids, and the personas that
//! seed it.

use super::{PipelineError, Rollout, Verdict, draft, tool_check};
use crate::tooluse::mock_tools::MappingEntry;
use crate::tooluse::task::{HiddenContext, Rubric, Task, ToolSpec};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::Path;

/// One item as it flows through the stages; each stage fills its part.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SynthItem {
    /// Item id (becomes the task id).
    pub id: String,
    /// The persona seed.
    pub persona: String,
    /// Versions of the stages that produced the record, in order (`draft.v1`, `tools.v1`...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub versions: Vec<String>,
    /// [`fingerprint`](super::fingerprint) of the last stage that wrote the record: its prompt,
    /// settings and input record.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub fingerprint: String,
    /// Draft: the task as the persona would state it, with every detail.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub task: String,
    /// Draft: 5-7 sub-goals in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workflow: Vec<String>,
    /// Draft: the forbidden behaviour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forbidden: Option<draft::Forbidden>,
    /// Draft: the tool ecosystem as first written.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub draft_tools: Vec<draft::DraftTool>,
    /// Tool check: the tools the agent gets (distractors included).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolSpec>,
    /// Tool check: names of the distractor tools.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub distractors: Vec<String>,
    /// Tool check: dropped draft tools and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped: Vec<tool_check::DroppedTool>,
    /// Rewrite: the one-sentence instruction the agent sees.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub instruction: String,
    /// Rewrite: what only the user knows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hidden_context: Option<HiddenContext>,
    /// Rollouts: the teacher's episodes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rollouts: Vec<Rollout>,
    /// Rollouts: the tool simulator's mapping after all rollouts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mapping: Vec<MappingEntry>,
    /// Rubric: the executable rubric.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rubric: Option<Rubric>,
    /// Rubric: the workflow step (1-based) of each sub-goal item, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subgoal_steps: Vec<u32>,
    /// Filter: the scores that decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
}

impl SynthItem {
    /// The task as the environment runs it: the instruction, hidden context, tools and workflow
    /// so far, with `rubric` (after the rewrite stage).
    pub fn to_task(&self, rubric: Rubric, max_turns: u32) -> Task {
        Task {
            id: self.id.clone(),
            persona: self.persona.clone(),
            instruction: self.instruction.clone(),
            hidden_context: self.hidden_context.clone().unwrap_or_default(),
            tools: self.tools.clone(),
            initial_state: None,
            expected_state: None,
            workflow: self.workflow.clone(),
            rubric,
            max_turns: Some(max_turns),
        }
    }
}

/// Whether `id` can be a task id: 1-128 characters of `[A-Za-z0-9_.:-]`.
pub(crate) fn valid_item_id(id: &str) -> bool {
    (1..=128).contains(&id.len())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-'))
}

/// Reads personas: one per non-empty line, either plain text or a JSON object
/// `{"persona": "...", "id": "..."}` (`id` optional). Item ids are `<prefix><index>` (5 digits,
/// 0-based over the personas) unless given.
pub fn read_personas(path: &Path, prefix: &str) -> Result<Vec<SynthItem>, PipelineError> {
    let text = std::fs::read_to_string(path).map_err(|e| PipelineError::Io {
        context: format!("reading {}", path.display()),
        message: e.to_string(),
    })?;
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Line {
        persona: String,
        #[serde(default)]
        id: Option<String>,
    }
    let mut items = Vec::new();
    let mut ids = BTreeSet::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let corrupt = |message: String| PipelineError::Corrupt {
            path: path.display().to_string(),
            line: n + 1,
            message,
        };
        let (persona, id) = if line.starts_with('{') {
            let l: Line = serde_json::from_str(line).map_err(|e| corrupt(e.to_string()))?;
            (l.persona, l.id)
        } else {
            (line.to_owned(), None)
        };
        let id = id.unwrap_or_else(|| format!("{prefix}{:05}", items.len()));
        if !valid_item_id(&id) {
            return Err(corrupt(format!(
                "id {id:?} must be 1-128 of [A-Za-z0-9_.:-]"
            )));
        }
        if persona.trim().is_empty() || persona.contains('\n') {
            return Err(corrupt("a persona is one non-empty line".into()));
        }
        if !ids.insert(id.clone()) {
            return Err(corrupt(format!("duplicate id {id:?}")));
        }
        items.push(SynthItem {
            id,
            persona: persona.trim().to_owned(),
            ..SynthItem::default()
        });
    }
    Ok(items)
}
