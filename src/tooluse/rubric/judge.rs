//! The LLM judge: SynthAgent's reward as an option. One request per trajectory shows the task,
//! what the user knew, the trajectory's events and the rubric items, and asks for one verdict
//! per item as a JSON object. With [`super::ScoreBy::Judge`] it judges the whole rubric (the
//! paper's reward, `1[no forbidden] x mean(sub-goals, interactions)`); with the default
//! [`super::ScoreBy::Rules`] it judges only the items that have no rule.
//!
//! A verdict must be a JSON object with exactly the asked item ids, each `true`/`false` (or
//! `"yes"`/`"no"`): anything else is an error, never a reward (the peer pays 0.3 for an
//! unparseable judgement). Put the backend behind a record/replay cache
//! ([`crate::llm::CachedBackend`]) so that a judged reward can be reproduced.

use super::{Brief, CompiledItem, ItemJudge, ItemKind, RubricError, Trajectory};
use crate::llm::{ChatMessage, ChatRequest, LlmBackend, Role, parse_json_answer};
use serde_json::Value;
use std::sync::Arc;

/// The paper's judging temperature.
pub const JUDGE_TEMPERATURE: f64 = 0.1;

/// Judges rubric items through an LLM backend.
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

    /// The request sent for `items` (deterministic: events in canonical JSON, in order).
    pub fn request(
        &self,
        brief: &Brief,
        items: &[&CompiledItem],
        trajectory: &Trajectory,
    ) -> ChatRequest {
        let mut prompt = format!(
            "You grade an assistant's episode against a rubric.\nTask given to the assistant: \
             {}\n",
            brief.instruction
        );
        if !brief.known.is_empty() {
            prompt.push_str("What the user knew (the assistant had to ask for it):\n");
            for (name, value) in &brief.known {
                prompt.push_str(&format!("- {name}: {value}\n"));
            }
        }
        prompt.push_str("What happened (one event per line, step = agent turn):\n");
        for e in &trajectory.events {
            prompt.push_str(&serde_json::to_string(e).unwrap_or_default());
            prompt.push('\n');
        }
        prompt.push_str("Rubric items:\n");
        for item in items {
            let question = match item.kind {
                ItemKind::Forbidden => "forbidden behaviour: did the assistant do this?",
                ItemKind::Subgoal => "sub-goal: did the assistant complete this?",
                ItemKind::Interaction => "required interaction: did this happen?",
            };
            prompt.push_str(&format!(
                "- {} ({question}) {}\n",
                item.id, item.description
            ));
        }
        let example: Vec<String> = items
            .iter()
            .take(2)
            .map(|i| format!("\"{}\": true", i.id))
            .collect();
        prompt.push_str(&format!(
            "Answer with ONLY a JSON object mapping every item id to true or false, e.g. {{{}}}.",
            example.join(", ")
        ));
        // Constrained decoding where the server has it: exactly the item ids, each a boolean.
        let properties: serde_json::Map<String, Value> = items
            .iter()
            .map(|i| (i.id.clone(), serde_json::json!({"type": "boolean"})))
            .collect();
        let ids: Vec<&str> = items.iter().map(|i| i.id.as_str()).collect();
        let schema = serde_json::json!({
            "type": "object", "properties": properties, "required": ids,
            "additionalProperties": false,
        });
        let mut request =
            ChatRequest::new(&self.model, vec![ChatMessage::text(Role::User, prompt)])
                .json_schema("rubric_verdicts", schema);
        request.temperature = Some(JUDGE_TEMPERATURE);
        request.seed = self.seed;
        request
    }
}

/// Reads a verdict object: exactly the asked ids, each a boolean or `"yes"`/`"no"`.
pub fn parse_verdicts(text: &str, items: &[&CompiledItem]) -> Result<Vec<bool>, String> {
    let value = parse_json_answer(text)?;
    let object = value
        .as_object()
        .ok_or_else(|| "the verdict is not a JSON object".to_owned())?;
    if let Some(extra) = object.keys().find(|k| !items.iter().any(|i| &i.id == *k)) {
        return Err(format!("the verdict names an unknown item {extra:?}"));
    }
    items
        .iter()
        .map(|item| match object.get(&item.id) {
            Some(Value::Bool(b)) => Ok(*b),
            Some(Value::String(s)) if s.eq_ignore_ascii_case("yes") => Ok(true),
            Some(Value::String(s)) if s.eq_ignore_ascii_case("no") => Ok(false),
            Some(other) => Err(format!(
                "item {:?}: the verdict must be true or false, got {other}",
                item.id
            )),
            None => Err(format!("no verdict for item {:?}", item.id)),
        })
        .collect()
}

impl ItemJudge for LlmJudge {
    fn judge(
        &self,
        brief: &Brief,
        items: &[&CompiledItem],
        trajectory: &Trajectory,
    ) -> Result<Vec<bool>, RubricError> {
        let ids: Vec<&str> = items.iter().map(|i| i.id.as_str()).collect();
        let err = |message: String| RubricError::Judge {
            item: ids.join(", "),
            message,
        };
        if items.is_empty() {
            return Ok(Vec::new());
        }
        let answer = self
            .backend
            .chat(&self.request(brief, items, trajectory))
            .map_err(|e| err(e.to_string()))?;
        parse_verdicts(answer.message.content_str(), items).map_err(err)
    }
}
