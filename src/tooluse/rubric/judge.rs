//! An LLM judge for rubric items that have no rule (the optional fallback). The verdict must be
//! exactly `YES` or `NO`; anything else is an error, never a reward (the peer pays 0.3 for an
//! unparseable judgement). Put the backend behind a record/replay cache to make scores
//! reproducible.

use super::{CompiledItem, ItemJudge, RubricError, Trajectory};
use crate::llm::{ChatMessage, ChatRequest, LlmBackend};
use crate::tooluse::task::{ItemKind, Task};
use std::sync::Arc;

/// Judges items through an LLM backend.
pub struct LlmJudge {
    backend: Arc<dyn LlmBackend>,
    model: String,
    seed: Option<u64>,
}

impl LlmJudge {
    /// A judge asking `model` through `backend`.
    pub fn new(backend: Arc<dyn LlmBackend>, model: &str, seed: Option<u64>) -> Self {
        LlmJudge {
            backend,
            model: model.to_owned(),
            seed,
        }
    }

    /// The request sent for one item (deterministic: events in canonical JSON, in order).
    pub fn request(
        &self,
        task: &Task,
        item: &CompiledItem,
        trajectory: &Trajectory,
    ) -> ChatRequest {
        let question = match item.kind {
            ItemKind::Forbidden => "Did the assistant do this forbidden thing?",
            ItemKind::Subgoal => "Did the assistant complete this sub-goal?",
            ItemKind::Interaction => "Did this interaction with the user happen?",
        };
        let mut events = String::new();
        for e in &trajectory.events {
            events.push_str(&serde_json::to_string(e).unwrap_or_default());
            events.push('\n');
        }
        let prompt = format!(
            "Task given to the assistant: {}\nWhat happened (one event per line, step = agent \
             turn):\n{events}\n{question}\n{}\nAnswer with exactly YES or NO.",
            task.instruction, item.description
        );
        let mut request = ChatRequest::new(&self.model, vec![ChatMessage::text("user", prompt)]);
        request.temperature = Some(0.0);
        request.seed = self.seed;
        request
    }
}

impl ItemJudge for LlmJudge {
    fn judge(
        &self,
        task: &Task,
        item: &CompiledItem,
        trajectory: &Trajectory,
    ) -> Result<bool, RubricError> {
        let err = |message: String| RubricError::Judge {
            item: item.id.clone(),
            message,
        };
        let answer = self
            .backend
            .chat(&self.request(task, item, trajectory))
            .map_err(|e| err(e.to_string()))?;
        let text = answer.message.content_str().trim();
        match text.trim_end_matches('.').to_ascii_uppercase().as_str() {
            "YES" => Ok(true),
            "NO" => Ok(false),
            _ => Err(err(format!("verdict must be YES or NO, got {text:?}"))),
        }
    }
}
